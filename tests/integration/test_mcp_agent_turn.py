"""Whole turns of the agent loop (scripted model over real HTTP) that reach MCP tools through the
bridge: a deferred tool of the real time server completes the turn, and a crashing server turns into
a recorded tool error while the turn goes on. The store is read with plain SQL."""

from __future__ import annotations

import asyncio
import json
import sqlite3

import pytest

pytest.importorskip("mcp")

from stack.agent.llm_client import LlmClient  # noqa: E402
from stack.agent.loop import Agent  # noqa: E402
from stack.config import Settings  # noqa: E402
from stack.store import Store  # noqa: E402
from stack.tools.mcp_tools import open_lane_registry  # noqa: E402
from tests.fakes.mcp_servers import raw_server, real_server_command  # noqa: E402
from tests.fakes.scripted_model import ScriptedModel, call, text  # noqa: E402


def turn(settings: Settings, script, user: str):
    async def go(registry):
        with ScriptedModel(script) as model:
            llm = LlmClient(model.url, model=None, timeout_s=10.0)
            try:
                session = store.create_session()
                result = await Agent(settings, store, registry, llm).run_turn(
                    session, [{"role": "user", "content": user}])
                return result, model
            finally:
                await llm.aclose()

    store = Store(settings.db_path)
    try:
        with open_lane_registry(settings) as registry:
            return asyncio.run(go(registry))
    finally:
        store.close()


def executions(settings: Settings) -> list[tuple]:
    with sqlite3.connect(settings.db_path) as db:
        return db.execute("SELECT tool_name, via_bridge, status, result, error FROM tool_executions "
                          "ORDER BY id").fetchall()


@pytest.mark.skipif(real_server_command("mcp-server-time") is None, reason="mcp-server-time not installed")
def test_deferred_time_tool_completes_a_turn_through_the_bridge(tmp_path):
    servers = {"time": {"command": real_server_command("mcp-server-time"), "args": ["--local-timezone", "UTC"]}}
    settings = Settings(home=tmp_path, mcp_servers=servers, max_iterations=5)
    script = [
        call("tool_search", {"query": "current time in Tokyo"}),
        call("tool_call", {"name": "time__get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}),
        text("It is morning in Tokyo."),
    ]
    result, model = turn(settings, script, "What time is it in Tokyo?")
    assert result.content == "It is morning in Tokyo."
    assert result.tools_executed == ["tool_search", "time__get_current_time"]
    offered = {tool["function"]["name"] for tool in model.requests[0]["tools"]}
    assert "tool_call" in offered and "time__get_current_time" not in offered  # deferred
    rows = executions(settings)
    assert [(name, bridged, status) for name, bridged, status, _, _ in rows] == [
        ("tool_search", 0, "ok"), ("time__get_current_time", 1, "ok")]
    assert "time__get_current_time" in rows[0][3]
    assert json.loads(rows[1][3])["timezone"] == "Asia/Tokyo"
    # the time server's answer went back to the model in a tool message
    assert any(m["role"] == "tool" and "Asia/Tokyo" in m["content"] for m in model.requests[2]["messages"])


def test_a_crashing_server_is_a_recorded_error_and_the_turn_goes_on(tmp_path):
    settings = Settings(home=tmp_path, mcp_servers={"fake": raw_server(call_timeout_s=5)},
                        max_iterations=5)
    script = [
        call("tool_call", {"name": "fake__crash", "arguments": {}}),
        call("calculate", {"expression": "6 * 7"}),
        text("The server crashed; 6 * 7 is 42."),
    ]
    result, model = turn(settings, script, "Try the fake server.")
    assert result.content == "The server crashed; 6 * 7 is 42."
    rows = executions(settings)
    assert [(name, bridged, status) for name, bridged, status, _, _ in rows] == [
        ("fake__crash", 1, "error"), ("calculate", 0, "ok")]
    assert "closed the connection" in rows[0][4]
    tool_reply = [m for m in model.requests[1]["messages"] if m["role"] == "tool"][0]
    assert tool_reply["content"].startswith("ERROR:") and "crashed" in tool_reply["content"]
