"""scripts/bench/deferred_tools.py: which requests it sends and how it reads the store afterwards.
The model run itself is a benchmark (it needs the 1.1 GB model and minutes); the verdict logic is
checked here on rows written the way the agent loop writes them."""

import json

import pytest

from stack.check.evidence import StoreReader
from stack.store import Store
from tests.bench_scripts import bench_script


@pytest.fixture(scope="module")
def bench():
    with bench_script("deferred_tools") as module:
        yield module


def test_requests_are_untuned_single_task_ones_whose_gold_the_pack_serves(bench):
    with bench_script("tool_pack_server") as pack_server:
        pack = pack_server.pack_origins(200)
    chosen = bench.requests(pack, 10)
    assert len(chosen) == 10
    assert [q["category"] for q in chosen] == ["lexical", "semantic"] * 5
    assert all(q["id"].startswith(("ho-", "th-")) for q in chosen)
    for request in chosen:
        assert request["gold"] and all(g in pack for g in request["gold"])
    assert chosen == bench.requests(pack, 10)  # the same requests on every run
    assert not bench.requests({}, 10)


def record(store: Store, session: str, name: str, arguments: dict, result: str, *,
           via_bridge: bool = False, status: str = "ok") -> None:
    call_id = f"call_{name}_{len(store.executions(session))}"
    message_id = store.add_message(session, "assistant", None, prompt_tokens=500,
                                   tool_calls=[{"id": call_id, "type": "function",
                                                "function": {"name": name, "arguments": "{}"}}])
    store.add_tool_result(session, message_id, result, tool_call_id=call_id, tool_name=name,
                          via_bridge=via_bridge, origin="native", arguments=json.dumps(arguments),
                          status=status, result=result if status == "ok" else None,
                          error=None if status == "ok" else result,
                          started_at="2026-01-01T00:00:00", duration_ms=1.0)


def test_a_gold_tool_run_through_the_bridge_after_a_search_that_showed_it(bench, tmp_path):
    store = Store(tmp_path / "state.db")
    store.create_session("s")
    store.add_message("s", "user", "post standup moved to #general")
    record(store, "s", "tool_search", {"queries": ["post slack message", "slack"]},
           "- pack__slack_post_message(channel_id, text): Post a message")
    record(store, "s", "pack__slack_post_message", {"text": "moved"}, "ok: ran", via_bridge=True)
    store.add_message("s", "assistant", "Posted.", prompt_tokens=700)
    request = {"id": "ho-003", "category": "lexical", "query": "post standup moved",
               "gold": ["pack__slack_post_message"]}
    outcome = bench.judge(request, StoreReader(tmp_path / "state.db"), "s", 12.0, None)
    assert outcome.passed and outcome.how == "bridge" and outcome.gold_shown
    assert outcome.searches == ["post slack message | slack"]
    assert outcome.ran == ["tool_search", "pack__slack_post_message"]
    assert (outcome.prompt_tokens, outcome.model_calls) == (1700, 3)


def test_a_guess_that_ran_another_tool_or_failed_is_no_pass(bench, tmp_path):
    store = Store(tmp_path / "state.db")
    for session in ("other", "failed"):
        store.create_session(session)
    record(store, "other", "stripe", {}, "There is no tool named 'stripe'. Hidden tools for it:\n"
           "- pack__retrieve_balance(): Retrieve the balance", status="refused")
    record(store, "other", "terminal", {"command": "stripe balance"}, "exit code: 127")
    record(store, "failed", "pack__retrieve_balance", {}, "backend down", status="error")
    record(store, "failed", "pack__list_customers", {}, "ok: ran")
    request = {"id": "th-048", "category": "semantic", "query": "how much money",
               "gold": ["pack__retrieve_balance"]}
    reader = StoreReader(tmp_path / "state.db")
    other = bench.judge(request, reader, "other", 3.0, None)
    assert not other.passed and other.ran == ["terminal"] and other.how == ""
    assert other.searches == [] and other.gold_shown  # the answer to its guess listed it
    failed = bench.judge(request, reader, "failed", 3.0, "timed out after 300s")
    assert not failed.passed and failed.ran == ["pack__list_customers"]
    assert failed.error == "timed out after 300s" and not failed.gold_shown
    assert other.wrong_hidden == [] and failed.wrong_hidden == ["pack__list_customers"]
    summary = bench.report([other, failed]).splitlines()[-1]
    assert "0/2" in summary and "a wrong hidden tool ran in 1" in summary
