"""The check's verdicts, judged from stores built by hand with the real Store (real SQLite)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from stack.check.evidence import Mark, StoreReader, StoreUnreadable
from stack.check.names import named_tools
from stack.check.report import arm_table, side_by_side
from stack.check.runner import ArmResult, StepResult
from stack.check.scenario import DEFAULT_PROMPTS, Markers, PromptsError, load_prompts, step_prompts
from stack.check.verdicts import Context, judge, unexecuted_tool_text
from stack.store import Store
from stack.store.claims import text_tool_calls

SESSION = "check-b-test"
SEED = "check-seed-b-test"
MARKERS = Markers(codename="ORCHID-4821", phrase="HELLO_7F3K2_BASELINE")


class Lane:
    """Writes rows the way the agent loop does: assistant call, tool message, execution row."""

    def __init__(self, path: Path):
        self.path = path
        self.store = Store(path)
        self.store.create_session(SESSION)
        self.store.create_session(SEED)
        self.reader = StoreReader(path)
        self.calls = 0

    def user(self, text: str) -> None:
        self.store.add_message(SESSION, "user", text)

    def answer(self, text: str) -> int:
        return self.store.add_message(SESSION, "assistant", text, prompt_tokens=100,
                                      completion_tokens=10)

    def tool(self, name: str, arguments: dict, result: str = "done", *, status: str = "ok",
             report: bool = True, via_bridge: bool = False, origin: str = "native",
             content: str | None = None) -> None:
        self.calls += 1
        call_id = f"call_{self.calls}"
        message_id = self.store.add_message(
            SESSION, "assistant", content, prompt_tokens=90, completion_tokens=5,
            tool_calls=[{"id": call_id, "type": "function",
                         "function": {"name": name, "arguments": json.dumps(arguments)}}])
        self.store.add_tool_result(
            SESSION, message_id, result, tool_call_id=call_id, tool_name=name, via_bridge=via_bridge,
            origin=origin, arguments=json.dumps(arguments), status=status,
            result=result if status == "ok" else None,
            error=None if status == "ok" else result, started_at="2025-01-01T00:00:00",
            duration_ms=1.0)
        if not report:  # a store whose tool message went missing (the lane never writes one)
            with sqlite3.connect(self.path) as db:
                db.execute("DELETE FROM messages WHERE role = 'tool' AND tool_call_id = ?", (call_id,))

    def mark(self) -> Mark:
        return self.reader.mark(SESSION)

    def judge(self, step: int, since: Mark, earlier: Mark | None = None, arm: str = "b"):
        rows = self.reader.rows_since(SESSION, since)
        history = ()
        if earlier is not None:
            history = tuple(e for e in self.reader.rows_since(SESSION, earlier).ran
                            if e.id <= since.execution_id)
        return judge(step, rows, Context(MARKERS, SEED, arm, history)), rows


@pytest.fixture
def lane(tmp_path: Path) -> Lane:
    return Lane(tmp_path / "state.db")


def test_step1_passes_on_391_without_tools(lane: Lane) -> None:
    start = lane.mark()
    lane.user(DEFAULT_PROMPTS[0])
    lane.answer("391")
    verdict, _ = lane.judge(1, start)
    assert verdict.passed


def test_step1_passes_on_391_from_a_calculator_but_not_on_its_result_alone(lane: Lane) -> None:
    start = lane.mark()
    lane.tool("calculate", {"expression": "17 * 23"}, "391")
    lane.answer("391")
    verdict, _ = lane.judge(1, start)
    assert verdict.passed and verdict.reason == "answered 391, through calculate"
    start = lane.mark()
    lane.tool("calculate", {"expression": "17 * 23"}, "391")
    lane.answer("The result is shown above.")
    verdict, _ = lane.judge(1, start)
    assert not verdict.passed and "lacks 391" in verdict.reason


def test_step1_fails_when_a_tool_ran_or_the_number_is_wrong(lane: Lane) -> None:
    start = lane.mark()
    lane.tool("terminal", {"command": "echo $((17*23))"}, "391")
    lane.answer("391")
    verdict, _ = lane.judge(1, start)
    assert not verdict.passed and "terminal" in verdict.reason
    start = lane.mark()
    lane.answer("It is 401.")
    verdict, _ = lane.judge(1, start)
    assert not verdict.passed and "lacks 391" in verdict.reason


def test_the_lanes_own_model_call_counts_as_a_call_but_answers_nothing(lane: Lane) -> None:
    start = lane.mark()
    lane.user(DEFAULT_PROMPTS[0])
    lane.store.add_lane_call(SESSION, "decide", "391", prompt_tokens=200, completion_tokens=2,
                             cached_tokens=0)  # the lane's own call in step 1
    verdict, rows = lane.judge(1, start)
    assert not verdict.passed and rows.model_calls == 1 and rows.prompt_tokens == 200
    lane.answer("391")
    verdict, rows = lane.judge(1, start)
    assert verdict.passed and rows.model_calls == 2


def test_step2_needs_a_real_memory_write_with_the_codename(lane: Lane) -> None:
    start = lane.mark()
    lane.tool("memory", {"action": "add", "content": "Project codename: ORCHID-4821"}, "saved")
    lane.answer("Saved.")
    assert lane.judge(2, start)[0].passed


@pytest.mark.parametrize("kwargs,expected", [
    ({"status": "error"}, "memory was called but error"),
    ({"report": False}, "no tool message carrying its result"),
    ({"arguments": {"action": "add", "content": "codename something"}}, "without the codename"),
    ({"arguments": {"action": "read", "content": "ORCHID-4821"}}, "without the codename"),
])
def test_step2_fails_on_writes_that_did_not_really_happen(lane: Lane, kwargs: dict,
                                                         expected: str) -> None:
    arguments = kwargs.pop("arguments", {"action": "add", "content": "ORCHID-4821"})
    start = lane.mark()
    lane.tool("memory", arguments, **kwargs)
    lane.answer("I saved your codename ORCHID-4821 to memory.")
    verdict, _ = lane.judge(2, start)
    assert not verdict.passed
    assert expected in verdict.reason


def test_step2_reports_a_call_written_as_text(lane: Lane) -> None:
    start = lane.mark()
    lane.user(MARKERS.render(DEFAULT_PROMPTS[1]))
    lane.answer('Sure: {"name": "save_note", "arguments": {"text": "ORCHID-4821"}} Done, saved!')
    verdict, rows = lane.judge(2, start)
    assert not verdict.passed
    assert "memory did not run" in verdict.reason and "save_note" in verdict.reason
    assert unexecuted_tool_text(rows) == ["save_note"]


def test_a_salvaged_call_that_ran_is_not_unexecuted_text(lane: Lane) -> None:
    start = lane.mark()
    text = '<tool_call>{"name": "memory", "arguments": {"action": "add", "content": "ORCHID-4821"}}'
    lane.tool("memory", {"action": "add", "content": "ORCHID-4821"}, origin="content", content=text)
    lane.answer("Saved.")
    verdict, rows = lane.judge(2, start)
    assert verdict.passed
    assert unexecuted_tool_text(rows) == []


def test_step3_tells_memory_recall_from_context(lane: Lane) -> None:
    origin = lane.mark()
    lane.answer("Noted.")
    step3 = lane.mark()
    lane.answer("Your codename is orchid-4821.")
    verdict, _ = lane.judge(3, step3, earlier=origin)
    assert verdict.passed and "memory not written" in verdict.reason

    origin = lane.mark()
    lane.tool("memory", {"action": "add", "content": "codename ORCHID-4821"})
    step3 = lane.mark()
    lane.answer("ORCHID-4821")
    verdict, _ = lane.judge(3, step3, earlier=origin)
    assert verdict.passed and "stored in memory" in verdict.reason

    step3 = lane.mark()
    lane.answer("I don't know.")
    assert not lane.judge(3, step3, earlier=origin)[0].passed


def test_step4_needs_terminal_then_memory_with_42(lane: Lane) -> None:
    start = lane.mark()
    lane.tool("terminal", {"command": "echo $((6*7))"}, "42\n")
    lane.tool("memory", {"action": "add", "content": "echo output: 42"})
    lane.answer("Done.")
    assert lane.judge(4, start)[0].passed

    start = lane.mark()
    lane.tool("memory", {"action": "add", "content": "42"})
    lane.tool("terminal", {"command": "echo $((6*7))"}, "42\n")
    lane.answer("Done.")
    verdict, _ = lane.judge(4, start)
    assert not verdict.passed and "memory did not run" in verdict.reason

    start = lane.mark()
    lane.answer("I ran it and saved 42.")
    verdict, _ = lane.judge(4, start)
    assert not verdict.passed and verdict.reason.startswith("terminal did not run")


def test_step5_needs_the_seeded_id_from_search_into_memory(lane: Lane) -> None:
    hit = json.dumps([{"session_id": SEED, "date": "2025-01-01", "snippet": "HELLO"}])
    start = lane.mark()
    lane.tool("session_search", {"query": MARKERS.phrase}, hit)
    lane.tool("memory", {"action": "add", "content": f"phrase session: {SEED}"})
    lane.answer("Saved.")
    assert lane.judge(5, start)[0].passed

    start = lane.mark()
    lane.tool("session_search", {"query": MARKERS.phrase}, "no matches")
    lane.tool("memory", {"action": "add", "content": "session 20250101_000000_deadbeef"})
    verdict, _ = lane.judge(5, start)
    assert not verdict.passed and "did not return the seeded session" in verdict.reason

    start = lane.mark()
    lane.tool("session_search", {"query": MARKERS.phrase}, hit)
    lane.tool("memory", {"action": "add", "content": "session 20250101_000000_deadbeef"})
    verdict, _ = lane.judge(5, start)
    assert not verdict.passed and "memory ran without the seeded session id" in verdict.reason

    start = lane.mark()
    lane.answer(f"Found it in session {SEED} and saved it.")
    verdict, _ = lane.judge(5, start)
    assert not verdict.passed and verdict.reason.startswith("session_search did not run")


def test_step6_lists_tools_named_that_never_ran(lane: Lane) -> None:
    origin = lane.mark()
    lane.tool("memory", {"action": "add", "content": "x"})
    lane.tool("terminal", {"command": "true"})
    step6 = lane.mark()
    lane.answer("I used the memory tool, the terminal, `session_search` and run_shell(command='x').")
    verdict, _ = lane.judge(6, step6, earlier=origin)
    assert not verdict.passed
    assert verdict.hallucinated == ("run_shell", "session_search")

    step6 = lane.mark()
    lane.answer("I used memory and terminal.")
    verdict, _ = lane.judge(6, step6, earlier=origin)
    assert verdict.passed, verdict.reason

    step6 = lane.mark()
    lane.answer("I helped you with several things today.")
    verdict, _ = lane.judge(6, step6, earlier=origin)
    assert not verdict.passed and "names none" in verdict.reason


def test_step6_counts_tool_call_when_the_bridge_ran(lane: Lane) -> None:
    origin = lane.mark()
    lane.tool("tool_search", {"query": "time"})
    lane.tool("current_time", {"timezone": "UTC"}, via_bridge=True)
    step6 = lane.mark()
    lane.answer("I used tool_search, then tool_call to run current_time.")
    verdict, _ = lane.judge(6, step6, earlier=origin)
    assert verdict.passed, verdict.reason


def test_step7_needs_via_bridge_in_arm_b(lane: Lane) -> None:
    start = lane.mark()
    lane.tool("tool_search", {"query": "time"})
    lane.tool("current_time", {}, "12:00 UTC", via_bridge=True)
    lane.answer("It is 12:00 UTC.")
    assert lane.judge(7, start)[0].passed

    start = lane.mark()
    lane.tool("current_time", {}, "12:00 UTC")
    verdict, _ = lane.judge(7, start)
    assert not verdict.passed and "not through tool_call" in verdict.reason
    assert lane.judge(7, start, arm="a")[0].passed


def test_text_tool_calls_finds_call_shapes_and_ignores_prose() -> None:
    assert text_tool_calls('{"tool": "store_note", "args": {"value": 42}}') == ["store_note"]
    assert text_tool_calls('<tool_call>{"name": "memory", "arguments": {}}</tool_call>') == ["memory"]
    assert text_tool_calls("I ran search_history(query='x') for you") == ["search_history"]
    assert text_tool_calls("<tool_call>garbage") == ["?"]
    assert text_tool_calls("The answer is 391. Use the terminal to run `echo $((6*7))`.") == []
    assert text_tool_calls('Your config is {"name": "demo", "version": 2}.') == []


def test_named_tools_reads_names_not_english() -> None:
    assert named_tools("I used memory, the Terminal and session_search.") == {
        "memory", "terminal", "session_search"}
    assert named_tools("To clarify: there is nothing left to do and no patch.") == set()
    assert named_tools("I called `patch` and save_memory.") == {"patch", "save_memory"}
    assert named_tools("Your phrase HELLO_7F3K2_BASELINE is in 20250101_000000_ab12cd34.") == set()
    # a token whose parts begin with digits is no tool's name: the lane's own facts line
    assert named_tools("I ran memory on Linux (x86_64, utf_8 locale, python3_11).") == {"memory"}
    assert named_tools("I used get_weather_v2.") == {"get_weather_v2"}


def test_reader_refuses_a_missing_or_foreign_store(tmp_path: Path) -> None:
    with pytest.raises(StoreUnreadable, match="no session store"):
        StoreReader(tmp_path / "nope.db")
    foreign = tmp_path / "foreign.db"
    sqlite3.connect(foreign).execute("CREATE TABLE sessions(id TEXT)").connection.commit()
    with pytest.raises(StoreUnreadable, match="not a fallback-lane session store"):
        StoreReader(foreign)
    text = tmp_path / "text.db"
    text.write_text("not sqlite at all, just text long enough to be a header" * 4)
    with pytest.raises(StoreUnreadable, match="cannot read"):
        StoreReader(text)


def test_reader_is_read_only(lane: Lane) -> None:
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        lane.reader._db.execute("DELETE FROM messages")


def test_prompts_file_forms(tmp_path: Path) -> None:
    lines = tmp_path / "p.txt"
    lines.write_text("# mine\n" + "\n".join(f"prompt {i}" for i in range(6)) + "\n")
    assert load_prompts(lines, with_deferred=False) == tuple(f"prompt {i}" for i in range(6))
    as_json = tmp_path / "p.json"
    as_json.write_text(json.dumps([f"p{i}" for i in range(7)]))
    seven = load_prompts(as_json, with_deferred=True)
    assert step_prompts(seven, with_deferred=True)[-1] == "p6"
    with pytest.raises(PromptsError, match="has 7 prompts"):
        load_prompts(as_json, with_deferred=False)
    assert len(step_prompts(None, with_deferred=True)) == 7


def _step(number: int, passed: bool, *, text: bool = False) -> StepResult:
    return StepResult(number, "p", passed, "ok" if passed else "memory did not run", 1.25, 300, 2,
                      ["memory"] if passed else [], text, cached_tokens=100)


def test_tables_show_every_column_and_totals() -> None:
    arm_b = ArmResult("b", SESSION, SEED, MARKERS, [_step(1, True), _step(2, False, text=True)])
    table = arm_table(arm_b)
    lines = [" ".join(line.split()) for line in table.splitlines()]
    assert lines[1] == "step | wall | prompt tok | evaluated | model calls | executed? | verdict"
    assert lines[3].startswith("1 | 1.2s | 300 | 200 |")
    assert "none*" in table and "FAIL: memory did not run" in table
    assert "FAIL arm b (search): 1/2 steps passed · prompt tokens 600 (evaluated 400) · wall 2.5s" in table
    arm_a = ArmResult("a", "check-a", "seed-a", MARKERS, [_step(1, True), _step(2, True)])
    both = side_by_side(arm_a, arm_b)
    total = next(line for line in both.splitlines() if line.startswith("total"))
    assert total.split("|")[2].strip() == "600" and total.split("|")[3].strip() == "400"
    assert total.split("|")[-1].strip() == "1/2"
