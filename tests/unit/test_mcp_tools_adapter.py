"""The adapter from MCP descriptors to lane tools, and open_lane_registry without live servers."""

from __future__ import annotations

import logging
import sys

import pytest

from stack.config import Settings
from stack.tools.execute import run_tool
from stack.tools.mcp_tools import as_tool, mcp_provider, open_lane_registry
from stack.tools.registry import build_registry
from tests.fakes.tool_context import tool_context

connection = pytest.importorskip("stack.mcp.connection")


def descriptor(name: str, call) -> "connection.McpTool":
    return connection.McpTool(name=f"srv__{name}", server="srv", remote_name=name, description=f"{name}.",
                              input_schema={"type": "object", "properties": {"x": {"type": "integer"}}},
                              call=call)


def failing(arguments):
    raise connection.McpCallError("the server said no")


class FakeManager:
    def __init__(self, tools):
        self.live = tools

    def tools(self):
        return list(self.live)


@pytest.fixture
def ctx(tmp_path):
    with tool_context(tmp_path) as context:
        yield context


def test_results_and_failures_become_outcomes(ctx):
    echo = as_tool(descriptor("echo", lambda arguments: f"x={arguments['x']}"))
    assert echo.source == "srv" and echo.name == "srv__echo"
    ok = run_tool(echo, '{"x": "7"}', ctx)  # validated and coerced against the server's schema
    assert (ok.status, ok.output) == ("ok", "x=7")
    error = run_tool(as_tool(descriptor("no", failing)), {"x": 1}, ctx)
    assert (error.status, error.output) == ("error", "the server said no")
    bad = run_tool(echo, {"x": "seven"}, ctx)
    assert bad.status == "error" and "invalid arguments" in bad.output


def test_provider_follows_the_live_list_and_reuses_tools():
    first, second = descriptor("a", str), descriptor("b", str)
    manager = FakeManager([first])
    provide = mcp_provider(manager)
    tools = provide()
    assert [t.name for t in tools] == ["srv__a"] and provide()[0] is tools[0]
    manager.live = [first, second]
    assert [t.name for t in provide()] == ["srv__a", "srv__b"] and provide()[0] is tools[0]
    manager.live = []
    assert provide() == []
    registry = build_registry([mcp_provider(FakeManager([second]))])
    assert "srv__b" in registry.tools() and "memory" in registry.tools()


def test_no_servers_means_the_builtin_registry(tmp_path):
    with open_lane_registry(Settings(home=tmp_path)) as registry:
        assert set(registry.tools()) == {tool.name for tool in build_registry()}


def test_missing_sdk_is_logged_and_the_lane_runs_without_mcp(tmp_path, monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "stack.mcp.manager", None)  # import fails as if not installed
    settings = Settings(home=tmp_path, mcp_servers={"time": {"command": "mcp-server-time"}})
    with caplog.at_level(logging.ERROR), open_lane_registry(settings) as registry:
        assert set(registry.tools()) == {tool.name for tool in build_registry()}
    assert "fallback-lane[mcp]" in caplog.text
