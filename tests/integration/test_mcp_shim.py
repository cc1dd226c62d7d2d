"""The shim with the real time server configured in its settings: the lifespan starts it through
open_lane_registry, arm B reaches its tool through the bridge, arm A (`X-Lane-Tools: full`) offers
it directly among at least fifteen tools; in each the lane's decision picks the tool and forces its
call, and the store says what ran."""

from __future__ import annotations

import sqlite3

import httpx
import pytest

pytest.importorskip("mcp")

from stack.config import Settings  # noqa: E402
from tests.fakes.mcp_servers import real_server_command  # noqa: E402
from tests.fakes.scripted_model import ScriptedModel, call, text  # noqa: E402
from tests.integration.shim_server import ShimServer  # noqa: E402

TIME = real_server_command("mcp-server-time")
pytestmark = pytest.mark.skipif(TIME is None, reason="mcp-server-time not installed")

ARGUMENTS = {"timezone": "Asia/Tokyo"}


def ask(shim: ShimServer, profile: str, session: str) -> dict:
    response = httpx.post(f"{shim.url}/v1/chat/completions", timeout=60,
                          headers={"X-Session-Id": session, "X-Lane-Tools": profile},
                          json={"model": "fallback-lane",
                                "messages": [{"role": "user", "content": "What time is it in Tokyo?"}]})
    assert response.status_code == 200, response.text
    return response.json()


def test_both_arms_run_the_time_server_through_the_shim(tmp_path):
    script = [
        # arm B: the decision picks the hidden tool, whose call is forced through the bridge
        call("tool_call", {"name": "time__get_current_time", "arguments": ARGUMENTS}),
        text("Done (search): the Tokyo time."),
        # arm A: the tool is offered directly, and its call forced by name
        call("time__get_current_time", ARGUMENTS),
        text("Done (full): the Tokyo time."),
    ]
    with ScriptedModel(script) as model:
        settings = Settings(home=tmp_path, llm_url=model.url,
                            mcp_servers={"time": {"command": TIME, "args": ["--local-timezone", "UTC"]}})
        with ShimServer(settings) as shim:
            arm_b = ask(shim, "search", "arm-b")
            arm_a = ask(shim, "full", "arm-a")
    assert arm_b["choices"][0]["message"]["content"] == "Done (search): the Tokyo time."
    assert arm_a["choices"][0]["message"]["content"] == "Done (full): the Tokyo time."
    assert arm_b["usage"]["lane"]["tools_executed"] == ["time__get_current_time"]
    assert arm_a["usage"]["lane"]["tools_executed"] == ["time__get_current_time"]
    forced_b, _, forced_a, _ = model.requests
    offered_b = [t["function"]["name"] for t in forced_b["tools"]]
    offered_a = [t["function"]["name"] for t in forced_a["tools"]]
    assert "tool_call" in offered_b and "time__get_current_time" not in offered_b
    assert "time__get_current_time" in offered_a and "tool_call" not in offered_a
    assert len(offered_a) >= 15 and len(offered_a) > len(offered_b)
    # arm B forces tool_call naming the hidden tool through its reply's format; arm A names it
    bridged = forced_b["response_format"]["json_schema"]["schema"]["properties"]["arguments"]
    assert bridged["properties"]["name"] == {"const": "time__get_current_time"}
    assert forced_a["tool_choice"] == {"type": "function", "function": {"name": "time__get_current_time"}}
    # each arm's decision chose among what it offers: arm B's lists the tool as a search hit
    decide_b, decide_a = model.decide_requests
    hits_b = decide_b["messages"][-1]["content"].split("Other tools, found by a word search")[1]
    assert "- time__get_current_time:" in hits_b
    assert "- time__get_current_time:" not in decide_b["messages"][0]["content"]
    assert "- time__get_current_time:" in decide_a["messages"][0]["content"]
    with sqlite3.connect(settings.db_path) as db:
        rows = db.execute("SELECT session_id, tool_name, via_bridge, status FROM tool_executions "
                          "ORDER BY id").fetchall()
    assert rows == [("arm-b", "time__get_current_time", 1, "ok"),
                    ("arm-a", "time__get_current_time", 0, "ok")]
