"""The reference MCP servers from PyPI (mcp-server-time, mcp-server-git), started for real over
stdio through `open_lane_registry`: their tools join the registry as deferred tools, tool search
finds them and `tool_call` runs them, recorded under the real tool name with via_bridge."""

from __future__ import annotations

import json
import subprocess
from datetime import datetime

import jsonschema
import pytest

pytest.importorskip("mcp")

from stack.config import DEFAULT_CORE_TOOLS, Settings  # noqa: E402
from stack.store import Store  # noqa: E402
from stack.tools.base import ToolContext  # noqa: E402
from stack.tools.mcp_tools import open_lane_registry  # noqa: E402
from stack.toolsearch.surface import assemble  # noqa: E402
from tests.fakes.mcp_servers import real_server_command  # noqa: E402

TIME, GIT = real_server_command("mcp-server-time"), real_server_command("mcp-server-git")
pytestmark = pytest.mark.skipif(not (TIME and GIT), reason="install tests/requirements.txt "
                                                             "(mcp-server-time, mcp-server-git)")


def reference_servers() -> dict:
    return {"time": {"command": TIME, "args": ["--local-timezone", "UTC"]}, "git": {"command": GIT}}


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    path = tmp_path_factory.mktemp("repo")
    git = ["git", "-C", str(path), "-c", "user.name=Lane", "-c", "user.email=lane@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    (path / "notes.txt").write_text("first\n")
    subprocess.run([*git, "add", "notes.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "Add the first note"], check=True)
    return path


@pytest.fixture(scope="module")
def lane(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    settings = Settings(home=home, mcp_servers=reference_servers())
    store = Store(settings.db_path)
    store.create_session("s1")
    with open_lane_registry(settings) as registry:
        yield settings, registry, ToolContext(settings, store, "s1")
    store.close()


def test_reference_tools_join_the_registry(lane):
    _, registry, _ = lane
    tools = registry.tools()
    assert {"time__get_current_time", "time__convert_time"} <= set(tools)
    git_tools = {name for name in tools if name.startswith("git__")}
    assert {"git__git_status", "git__git_log", "git__git_diff", "git__git_commit"} <= git_tools
    assert tools["time__get_current_time"].source == "time"
    for name in ("time__get_current_time", "git__git_log"):
        jsonschema.Draft202012Validator.check_schema(tools[name].parameters)
        assert tools[name].parameters["type"] == "object" and tools[name].parameters["properties"]


def test_full_profile_offers_at_least_twenty_real_tools(lane):
    settings, registry, _ = lane
    full = assemble(registry, settings, profile="full")
    names = [tool["function"]["name"] for tool in full.offered]
    assert len(names) >= 20 and len(set(names)) == len(names)
    assert set(DEFAULT_CORE_TOOLS) <= set(names) and "tool_call" not in names
    search = assemble(registry, settings, profile="search")
    offered = {tool["function"]["name"] for tool in search.offered}
    assert {"tool_search", "tool_describe", "tool_call"} <= offered
    assert "git__git_log" not in offered  # deferred: reachable only through the bridge


def test_tool_search_finds_the_time_server(lane):
    settings, registry, ctx = lane
    toolset = assemble(registry, settings)
    outcome = toolset.dispatch("tool_search", {"query": "current time in Tokyo"}, ctx)
    assert outcome.status == "ok"
    assert outcome.output.splitlines()[0].startswith("- time__get_current_time(")


def test_tool_call_runs_the_time_server(lane):
    settings, registry, ctx = lane
    outcome = assemble(registry, settings).dispatch(
        "tool_call", {"name": "time__get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}, ctx)
    assert (outcome.status, outcome.tool_name, outcome.via_bridge) == ("ok", "time__get_current_time", True)
    reported = json.loads(outcome.output)
    stamp = datetime.fromisoformat(reported["datetime"])
    assert reported["timezone"] == "Asia/Tokyo" and stamp.utcoffset().total_seconds() == 9 * 3600


def test_server_side_errors_are_tool_errors(lane):
    settings, registry, ctx = lane
    outcome = assemble(registry, settings).dispatch(
        "tool_call", {"name": "time__get_current_time", "arguments": {"timezone": "Mars/Olympus"}}, ctx)
    assert (outcome.status, outcome.tool_name) == ("error", "time__get_current_time")
    assert "Invalid timezone" in outcome.output


def test_tool_call_runs_the_git_server(lane, repo):
    settings, registry, ctx = lane
    toolset = assemble(registry, settings)
    log = toolset.dispatch("tool_call", {"name": "git__git_log", "arguments": {"repo_path": str(repo)}}, ctx)
    assert (log.status, log.tool_name, log.via_bridge) == ("ok", "git__git_log", True)
    assert "Add the first note" in log.output
    (repo / "notes.txt").write_text("first\nsecond\n")
    diff = toolset.dispatch("tool_call", {"name": "git__git_diff_unstaged",
                                          "arguments": {"repo_path": str(repo)}}, ctx)
    assert diff.status == "ok" and "+second" in diff.output
