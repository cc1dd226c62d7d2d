"""The benchmark's tool pack through the shim: the lane.yaml that scripts/bench/lane_run.py writes
starts scripts/bench/tool_pack_server.py, arm A (`X-Lane-Tools: full`) offers its 16 real schemas
beside the 14 built-in tools, arm B keeps them behind the bridges, and a pack tool the lane's
decision picks, called through `tool_call`, runs on the MCP server and answers its canned text."""

from __future__ import annotations

import sqlite3

import httpx
import pytest
import yaml

pytest.importorskip("mcp")

from stack.config import Settings  # noqa: E402
from stack.tools.registry import build_registry  # noqa: E402
from stack.tools.validation import example_arguments  # noqa: E402
from tests.bench_scripts import bench_script  # noqa: E402
from tests.fakes.scripted_model import ScriptedModel, call, text  # noqa: E402
from tests.integration.shim_server import ShimServer  # noqa: E402

COUNT = 16
ARGUMENTS = {"repo_path": "/srv/notes", "files": ["notes.md"]}


def ask(shim: ShimServer, profile: str, session: str, content: str = "Stage notes.md in /srv/notes.") -> dict:
    response = httpx.post(f"{shim.url}/v1/chat/completions", timeout=60,
                          headers={"X-Session-Id": session, "X-Lane-Tools": profile},
                          json={"model": "fallback-lane",
                                "messages": [{"role": "user", "content": content}]})
    assert response.status_code == 200, response.text
    return response.json()


def test_the_pack_is_offered_in_arm_a_and_runs_through_the_bridge_in_arm_b(tmp_path):
    with bench_script("tool_pack_server") as pack_server:
        pack = [f"pack__{tool['name']}" for tool in pack_server.select_tools(COUNT)]
    assert len(pack) == COUNT and "pack__git_add" in pack
    with bench_script("lane_run") as lane_run:
        config = lane_run.tool_pack_config(tmp_path, COUNT)
    script = [
        # arm B: the decision picks the pack tool among search's hits, its call goes through the bridge
        call("tool_call", {"name": "pack__git_add", "arguments": ARGUMENTS}),
        text("Staged (search)."),  # held back (it leaves out the result): the lane's account
        # arm A: the pack tool is offered directly
        call("pack__git_add", ARGUMENTS),
        text("Staged (full)."),
    ]
    with ScriptedModel(script) as model:
        settings = Settings(home=tmp_path, llm_url=model.url,
                            mcp_servers=yaml.safe_load(config.read_text())["mcp_servers"])
        with ShimServer(settings) as shim:
            arm_b = ask(shim, "search", "arm-b")
            arm_a = ask(shim, "full", "arm-a")
    assert arm_b["usage"]["lane"]["tools_executed"] == ["pack__git_add"]
    assert arm_a["usage"]["lane"]["tools_executed"] == ["pack__git_add"]

    forced_b, composed_b, forced_a, composed_a = model.requests
    offered_b = [t["function"]["name"] for t in forced_b["tools"]]
    offered_a = [t["function"]["name"] for t in forced_a["tools"]]
    builtin = {tool.name for tool in build_registry()}
    assert sorted(offered_a) == sorted(builtin | set(pack))
    assert {"tool_search", "tool_describe", "tool_call"} <= set(offered_b)
    assert not set(offered_b) & set(pack)

    found = model.decide_requests[0]["messages"][-1]["content"].split("Other tools, found by a word search")[1]
    assert "- pack__git_add:" in found
    assert forced_a["tool_choice"] == {"type": "function", "function": {"name": "pack__git_add"}}
    canned = 'ok: git_add ran with {"files":["notes.md"],"repo_path":"/srv/notes"}'
    assert canned in composed_b["messages"][1]["content"]  # the facts the answer is written from
    assert canned in composed_a["messages"][1]["content"]
    with sqlite3.connect(settings.db_path) as db:
        rows = db.execute("SELECT session_id, tool_name, via_bridge, status FROM tool_executions "
                          "ORDER BY id").fetchall()
    assert rows == [("arm-b", "pack__git_add", 1, "ok"), ("arm-a", "pack__git_add", 0, "ok")]


def test_the_pack_by_server_lists_each_catalog_server_under_its_own_name(tmp_path):
    with bench_script("tool_pack_server") as pack_server:
        origins = pack_server.pack_origins(3, by_server=True)
        servers = pack_server.pack_servers(3)
        schema = next(t["parameters"] for t in pack_server.select_tools(3, server="asana"))
        canned = pack_server.canned_result
    # round-robin over the catalog's servers in name order: one tool each from the first three
    assert servers == ["airtable", "asana", "atlassian"]
    assert all(lane == origin and lane.split("__")[0] in servers for lane, origin in origins.items())
    with bench_script("lane_run") as lane_run:
        config = lane_run.tool_pack_config(tmp_path, 3, by_server=True)
    mcp_servers = yaml.safe_load(config.read_text())["mcp_servers"]
    assert sorted(mcp_servers) == servers
    asana_tool = next(name for name in origins if name.startswith("asana__"))
    own = asana_tool.split("__", 1)[1]
    arguments = example_arguments(schema)
    script = [call(asana_tool, arguments), text("Done.")]
    with ScriptedModel(script) as model:
        settings = Settings(home=tmp_path, llm_url=model.url,
                            mcp_servers=mcp_servers)
        with ShimServer(settings) as shim:
            # the request names the tool: a pick the tool index does not rank would be asked again
            reply = ask(shim, "full", "by-server", f"Run {asana_tool} for notes.md.")
    assert {t["function"]["name"] for t in model.requests[0]["tools"]} >= set(origins)
    assert reply["usage"]["lane"]["tools_executed"] == [asana_tool]
    forced, composed = model.requests  # the answer, held back, is not written again
    assert forced["tool_choice"] == {"type": "function", "function": {"name": asana_tool}}
    assert canned(own, arguments) in composed["messages"][1]["content"]
