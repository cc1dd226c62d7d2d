"""The turn-time benchmark (scripts/bench/turn_time.py) reads the llm service's log beside the
store: a completion credited to the wrong purpose would send speed work after the wrong call."""
from datetime import datetime, timedelta, timezone

import pytest

from stack.store import Store
from tests.bench_scripts import bench_script


@pytest.fixture(scope="module")
def tt():
    with bench_script("turn_time") as module:
        yield module


def _line(at: datetime, prompt: int, cached: int, completion: int, prompt_s: float, total_s: float) -> str:
    return (f"{at:%Y-%m-%d %H:%M:%S},{at.microsecond // 1000:03d} INFO lane.llm: chatcmpl-1 stream=True "
            f"prompt={prompt} cached={cached} evaluated={prompt - cached} completion={completion} "
            f"max_tokens=24(requested 24) wait=0.00s prompt_eval={prompt_s:.2f}s gen={total_s:.2f}s "
            "3.0 tok/s finish=stop cancelled=False")


def test_each_completion_is_credited_to_the_store_row_of_the_same_tokens(tt, tmp_path, capsys):
    store = Store(tmp_path / "state.db")
    session = store.create_session()
    store.add_message(session, "user", "remember that the dentist is Dr. Keller")
    store.add_lane_call(session, "decide", '{"next": "memory"}', prompt_tokens=1200, completion_tokens=6,
                        cached_tokens=950)
    store.add_message(session, "assistant", "", tool_calls=[{"id": "c1", "type": "function", "function": {
        "name": "memory", "arguments": "{}"}}], prompt_tokens=1300, completion_tokens=30, cached_tokens=1200)
    store.add_lane_call(session, "read", "probe: 0.9, reports an action", prompt_tokens=400,
                        completion_tokens=0, cached_tokens=0, path="probe")
    store.add_message(session, "assistant", "Saved.", prompt_tokens=700, completion_tokens=4, cached_tokens=500)
    store.close()
    start = datetime.now(timezone.utc) - timedelta(seconds=5)
    log = [_line(start, 1200, 950, 6, 3.0, 3.5),
           "2026-12-02 08:50:21,686 INFO httpx: HTTP Request: POST http://127.0.0.1:1/v1/embeddings 200",
           _line(start + timedelta(seconds=1), 1300, 1200, 30, 1.0, 4.0),
           _line(start + timedelta(seconds=2), 700, 500, 4, 2.0, 2.5),
           _line(start + timedelta(seconds=3), 999, 0, 1, 9.0, 9.0)]  # another client's: no row
    (tmp_path / "lane-up-1.log").write_text("\n".join(log) + "\n")
    assert tt.main([str(tmp_path)]) == 0
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()[1:]}
    assert rows["decide"][1:3] == ["1", "3.5"] and rows["decide"][5] == "250"
    assert rows["call"][1:3] == ["1", "4.0"] and rows["answer"][1:3] == ["1", "2.5"]
    assert rows["?"][1:3] == ["1", "9.0"]
    assert "probes (not timed) 1, 400 prompt tokens" in " ".join(rows["all"])


def test_a_home_without_a_lane_log_is_an_error(tt, tmp_path, capsys):
    assert tt.main([str(tmp_path)]) == 2
    assert "no lane-up" in capsys.readouterr().err
