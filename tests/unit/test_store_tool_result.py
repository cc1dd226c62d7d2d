"""`Store.add_tool_result`: a tool's result message and its tool_executions row are one write."""

import sqlite3

import pytest

from stack.store import Store

EXECUTION = dict(tool_call_id="c1", tool_name="terminal", via_bridge=False, origin="native",
                 arguments='{"command": "echo hi"}', result="hi", error=None,
                 started_at="2026-01-01T00:00:00.000+00:00", duration_ms=3.5)


def test_writes_the_tool_message_and_its_execution_together(tmp_path):
    store = Store(tmp_path / "s.db")
    session = store.create_session()
    asked = store.add_message(session, "assistant", "", tool_calls=[{"id": "c1"}])
    store.add_tool_result(session, asked, "exit 0\nhi", status="ok", **EXECUTION)
    [message] = [m for m in store.messages(session) if m["role"] == "tool"]
    assert (message["content"], message["tool_call_id"], message["tool_name"]) == \
        ("exit 0\nhi", "c1", "terminal")
    [execution] = store.executions(session)
    assert (execution["message_id"], execution["status"], execution["result"]) == (asked, "ok", "hi")


def test_a_failed_execution_row_takes_its_message_with_it(tmp_path):
    store = Store(tmp_path / "s.db")
    session = store.create_session()
    asked = store.add_message(session, "assistant", "", tool_calls=[{"id": "c1"}])
    with pytest.raises(sqlite3.IntegrityError):  # the schema's CHECK refuses the status
        store.add_tool_result(session, asked, "exit 0\nhi", status="done", **EXECUTION)
    assert [m["role"] for m in store.messages(session)] == ["assistant"]
    assert store.executions(session) == []
    store.add_tool_result(session, asked, "exit 0\nhi", status="ok", **EXECUTION)  # usable after
    assert len(store.executions(session)) == 1


def test_a_started_row_exists_before_the_tool_runs_and_is_completed_in_place(tmp_path):
    store = Store(tmp_path / "s.db")
    session = store.create_session()
    asked = store.add_message(session, "assistant", "", tool_calls=[{"id": "c1"}])
    started = store.start_execution(session, asked, tool_call_id="c1", tool_name="terminal",
                                    via_bridge=False, origin="native", arguments='{"command": "sleep 9"}')
    [row] = store.executions(session)
    assert (row["id"], row["status"], row["started_at"] is not None) == (started, "running", True)
    assert [m["role"] for m in store.messages(session)] == ["assistant"]  # no result yet
    done = store.add_tool_result(session, asked, "exit 0\nhi", status="ok", execution_id=started, **EXECUTION)
    [row] = store.executions(session)
    assert (done, row["id"], row["status"], row["result"], row["duration_ms"]) == (started, started, "ok", "hi", 3.5)
    assert row["started_at"] != EXECUTION["started_at"]  # the start keeps its own time


def test_an_abandoned_run_is_a_status_of_its_own(tmp_path):
    store = Store(tmp_path / "s.db")
    session = store.create_session()
    asked = store.add_message(session, "assistant", "", tool_calls=[{"id": "c1"}])
    started = store.start_execution(session, asked, tool_call_id="c1", tool_name="terminal",
                                    via_bridge=False, origin="native", arguments="{}")
    store.add_tool_result(session, asked, "ABANDONED", status="abandoned", execution_id=started,
                          **{**EXECUTION, "result": None, "error": "the client left"})
    assert [e["status"] for e in store.executions(session)] == ["abandoned"]


def test_a_lone_surrogate_is_stored_replaced_never_refused(tmp_path):
    """A model's arguments decoded from JSON's "\\ud800" hold a lone surrogate, which UTF-8 cannot
    encode: the row of a tool that already ran must still be written."""
    store = Store(tmp_path / "s.db")
    session = store.create_session()
    asked = store.add_message(session, "assistant", "said \ud800", tool_calls=[{"id": "c1"}])
    started = store.start_execution(session, asked, tool_call_id="c1", tool_name="terminal",
                                    via_bridge=False, origin="native", arguments='{"command": "echo \ud83d"}')
    store.add_tool_result(session, asked, "exit 0\n\udcff", status="ok", execution_id=started,
                          **{**EXECUTION, "arguments": '{"command": "echo \ud83d"}', "result": "\udcff"})
    [row] = store.executions(session)
    assert (row["arguments"], row["result"]) == ('{"command": "echo \ufffd"}', "\ufffd")
    assert [m["content"] for m in store.messages(session)] == ["said \ufffd", "exit 0\n\ufffd"]
