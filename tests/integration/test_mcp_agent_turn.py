"""Whole turns of the agent loop (scripted model over real HTTP) that reach MCP tools through the
bridge: a deferred tool of the real time server, which the lane's decision finds among search's
hidden tools, completes the turn, and a crashing server turns into a recorded tool error while the
turn goes on. The store is read with plain SQL."""

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
from tests.fakes.scripted_model import Reply, ScriptedModel, call, text  # noqa: E402


def turn(settings: Settings, script, user: str, decision=None):
    async def go(registry):
        with ScriptedModel(script, decision=decision) as model:
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


def bridged_target(request: dict) -> str | None:
    """The hidden tool a request forces through tool_call (its response format), if any."""
    schema = (request.get("response_format") or {}).get("json_schema", {}).get("schema", {})
    return schema.get("properties", {}).get("arguments", {}).get("properties", {}).get("name", {}).get("const")


@pytest.mark.skipif(real_server_command("mcp-server-time") is None, reason="mcp-server-time not installed")
def test_deferred_time_tool_completes_a_turn_through_the_bridge(tmp_path):
    servers = {"time": {"command": real_server_command("mcp-server-time"), "args": ["--local-timezone", "UTC"]}}
    settings = Settings(home=tmp_path, mcp_servers=servers, max_iterations=5)
    script = [
        call("tool_call", {"name": "time__get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}),
        text("It is morning in Tokyo."),
    ]
    result, model = turn(settings, script, "What time is it in Tokyo?")
    assert result.content == "It is morning in Tokyo."
    assert result.tools_executed == ["time__get_current_time"]
    # The decision was offered the deferred tool among search's hidden ones, and picked it.
    [decision] = model.decide_requests
    assert "- time__get_current_time:" in decision["messages"][-1]["content"].split("Other tools")[1]
    forced, composed = model.requests
    offered = {tool["function"]["name"] for tool in forced["tools"]}
    assert "tool_call" in offered and "time__get_current_time" not in offered  # deferred
    assert bridged_target(forced) == "time__get_current_time" and "tool_choice" not in forced
    rows = executions(settings)
    assert [(name, bridged, status) for name, bridged, status, _, _ in rows] == [
        ("time__get_current_time", 1, "ok")]
    assert json.loads(rows[0][3])["timezone"] == "Asia/Tokyo"
    # the time server's answer is among the facts the answer was written from
    assert "tools" not in composed or not composed["tools"]
    assert "time__get_current_time (ok)" in composed["messages"][1]["content"]
    assert "Asia/Tokyo" in composed["messages"][1]["content"]


def test_a_crashing_server_is_a_recorded_error_and_the_turn_goes_on(tmp_path):
    settings = Settings(home=tmp_path, mcp_servers={"fake": raw_server(call_timeout_s=5)},
                        max_iterations=5)

    def model_reply(body: dict) -> Reply:
        if bridged_target(body) == "fake__crash":
            # The lane forces the failed call once more when the server is back in time: that
            # retry says nothing (the server is still down), the crash is not made twice.
            retry = any(m["role"] == "tool" for m in body["messages"])
            return text("") if retry else call("tool_call", {"name": "fake__crash", "arguments": {}})
        if bridged_target(body) == "calculate":  # hidden too; named by the request's second task
            return call("tool_call", {"name": "calculate", "arguments": {"expression": "6 * 7"}})
        assert not body.get("tools"), body  # the composed answer
        return text("The server crashed; 6 * 7 is 42.")

    result, model = turn(settings, model_reply, "Try the fake server's crash tool, then calculate 6 * 7",
                         decision=Reply(content='{"next": "fake__crash"}'))
    assert result.content == "The server crashed; 6 * 7 is 42."
    rows = executions(settings)
    assert [(name, bridged, status) for name, bridged, status, _, _ in rows] == [
        ("fake__crash", 1, "error"), ("calculate", 1, "ok")]
    assert "closed the connection" in rows[0][4]
    tool_reply = [m for m in model.requests[1]["messages"] if m["role"] == "tool"][0]
    assert tool_reply["content"].startswith("ERROR:") and "crashed" in tool_reply["content"]
    # the answer was written knowing both: the crash and the product
    facts = model.requests[-1]["messages"][1]["content"]
    assert "fake__crash (error)" in facts and "calculate (ok): 42" in facts
