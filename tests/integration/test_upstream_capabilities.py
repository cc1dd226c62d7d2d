"""What the upstream honours, probed by the shim (agent/capabilities.py) and reported in /health:
scripted OpenAI-compatible servers that honour everything, ignore response_format, also ignore a
named tool_choice and send no logprobs; probed again when the upstream comes back after it was
unreachable; and `lane up --llm-url`, the shim alone in front of such a server."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from stack.config import Settings
from tests.fakes.scripted_model import EVERYTHING, ScriptedModel, call, text
from tests.integration.llm_server import free_port, start_lane, stop, wait_healthy
from tests.integration.shim_server import ShimServer


def health(url: str) -> dict[str, Any]:
    return httpx.get(f"{url}/health", timeout=10).json()


def probed(json_schema: bool, tool_choice: bool, tool_calls: bool, logprobs: bool,
           decision: str, forced_call: str) -> dict[str, Any]:
    """/health's capabilities of a probed upstream (never declared: no hidden state)."""
    return {"json_schema": json_schema, "tool_choice": tool_choice, "tool_calls": tool_calls, "logprobs": logprobs,
            "hidden_state": False, "paths": {"decision": decision, "forced_call": forced_call,
                                             "yes_no": "logprobs" if logprobs else "off", "reading": "list"}}


@pytest.mark.parametrize(("honours", "expected"), [
    (EVERYTHING, probed(True, True, True, True, "schema", "named")),
    (EVERYTHING - {"json_schema"}, probed(False, True, True, True, "tool", "named")),
    (frozenset({"tool_calls"}), probed(False, False, True, False, "tool", "offered")),
    (frozenset({"json_schema"}), probed(True, False, False, False, "schema", "schema")),
    # as the lane's own llm: a forced call comes back as text the lane reads, not as tool_calls
    (EVERYTHING - {"tool_calls"} | {"text_calls"}, probed(True, True, True, True, "schema", "named")),
    (frozenset({"text_calls"}), probed(False, False, True, False, "tool", "offered")),
])
def test_health_reports_what_the_upstream_honours(tmp_path: Path, honours: frozenset[str],
                                                   expected: dict[str, Any]) -> None:
    with ScriptedModel([], honours=honours) as model:
        with ShimServer(Settings(home=tmp_path, llm_url=model.url)) as shim:
            report = health(shim.url)
    assert report["status"] == "ok"
    assert report["capabilities"] == expected
    # tiny requests, apart from any turn: nothing of the script was spent on them
    assert 3 <= len(model.probe_requests) <= 4 and not model.requests
    assert all(body["max_tokens"] <= 32 for body in model.probe_requests)


@pytest.mark.parametrize("logprobs", [True, False])
def test_an_upstream_without_logprobs_gets_no_yes_no_question(tmp_path: Path, logprobs: bool) -> None:
    """Levers "fit" and "declined" need logprobs: where the upstream sends none, neither yes/no
    question is asked (it would only cost the user a model call that cannot say yes)."""
    honours = EVERYTHING if logprobs else EVERYTHING - {"logprobs"}
    script = [text("You can check it yourself with df -h.")] * 4
    with ScriptedModel(script, decision='{"next": "answer"}', honours=honours) as model:
        with ShimServer(Settings(home=tmp_path, llm_url=model.url)) as shim:
            reply = httpx.post(f"{shim.url}/v1/chat/completions", timeout=30, json={
                "messages": [{"role": "user", "content": "how full is my disk?"}],
                "tools": [{"type": "function", "function": {
                    "name": "disk_usage", "description": "How full the disk is.",
                    "parameters": {"type": "object", "properties": {}}}}]})
    assert reply.status_code == 200, reply.text
    assert model.decide_requests
    asked = model.fit_requests + model.decline_requests
    assert bool(asked) is logprobs
    assert not any(body.get("logprobs") for body in model.requests)


def test_the_upstream_is_probed_again_when_it_comes_back(tmp_path: Path) -> None:
    port = free_port()
    with ScriptedModel([], port=port) as first:
        settings = Settings(home=tmp_path, llm_url=first.url)
        with ShimServer(settings) as shim:
            assert health(shim.url)["capabilities"]["json_schema"] is True
            first.__exit__(None, None, None)
            down = health(shim.url)
            assert (down["llm"], down["capabilities"]) == ("unreachable", None)
            with ScriptedModel([], port=port, honours=EVERYTHING - {"json_schema"}) as second:
                back = health(shim.url)
            assert second.probe_requests
    assert back["status"] == "ok" and back["capabilities"]["json_schema"] is False
    assert back["capabilities"]["paths"]["decision"] == "tool"


def test_lane_up_with_llm_url_serves_only_the_shim(tmp_path: Path) -> None:
    port, log = free_port(), tmp_path / "lane-up.log"
    env = {"LANE_HOME": str(tmp_path / "home"), "LANE_LLM_TIMEOUT": "10"}
    script = [call("todo", {"action": "set", "items": ["water the plants"]}), text("One task on your list.")]
    with ScriptedModel(script, honours=EVERYTHING - {"json_schema"}) as model:
        lane = start_lane(["up", "--llm-url", model.url, "--port", str(port), "--home", str(tmp_path / "home")],
                          log, env=env)
        try:
            url = f"http://127.0.0.1:{port}"
            wait_healthy(f"{url}/health", lane, log, timeout_s=60)
            deadline = time.monotonic() + 10
            while "fallback-lane is up" not in log.read_text() and time.monotonic() < deadline:
                time.sleep(0.1)
            report = health(url)
            reply = httpx.post(f"{url}/v1/chat/completions", timeout=30, headers={"X-Session-Id": "up-1"},
                               json={"messages": [{"role": "user", "content": "put watering the plants on my list"}]})
            session = httpx.get(f"{url}/v1/sessions/up-1", timeout=10).json()
            children = _children(lane.pid)
        finally:
            code = stop(lane, signal.SIGINT, timeout_s=30)
    output = log.read_text()
    assert code == 0, output
    assert children == ["shim"]  # no local model was started
    assert f"llm  (upstream )       {model.url}" in output and "fallback-lane is up" in output
    assert report["capabilities"]["json_schema"] is False
    assert reply.status_code == 200, reply.text
    assert [(e["tool_name"], e["status"]) for e in session["executions"]] == [("todo", "ok")]
    assert {c["path"] for c in session["lane_calls"] if c["purpose"] == "decide"} == {"tool"}


def test_lane_up_refuses_local_model_options_with_llm_url(tmp_path: Path) -> None:
    log = tmp_path / "lane-up.log"
    lane = start_lane(["up", "--llm-url", "http://127.0.0.1:9/v1", "--model", "x.gguf"], log,
                      env={"LANE_HOME": str(tmp_path)})
    assert lane.wait(timeout=30) == 2
    output = log.read_text()
    assert "--model" in output and "--llm-url" in output


def _children(pid: int) -> list[str]:
    """The `lane` subcommands running as children of `pid`."""
    found = []
    for status in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = status.read_text().rsplit(")", 1)[1].split()
            args = (status.parent / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid and b"stack.cli" in args:
            found.append(args[args.index(b"stack.cli") + 1].decode())
    return sorted(found)


@pytest.mark.parametrize("declares", [("json_schema", "tool_choice", "tool_calls", "logprobs", "hidden_state"),
                                      ("json_schema", "tool_choice", "tool_calls")])
def test_the_lanes_own_llm_is_taken_at_its_word_not_probed(tmp_path: Path, declares: tuple[str, ...]) -> None:
    """The lane's own llm declares what it honours on its warm-up route: no probe costs a
    restarted lane's first answer model time, and what it declares is what the shim uses."""
    with ScriptedModel([], declares=declares) as model:
        with ShimServer(Settings(home=tmp_path, llm_url=model.url)) as shim:
            report = health(shim.url)
    assert model.probe_requests == []
    assert report["capabilities"]["logprobs"] is ("logprobs" in declares)
    assert report["capabilities"]["paths"]["yes_no"] == ("logprobs" if "logprobs" in declares else "off")
    assert report["capabilities"]["paths"]["reading"] == ("probe" if "hidden_state" in declares else "list")
