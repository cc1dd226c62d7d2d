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
