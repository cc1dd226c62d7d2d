"""LiteLLM as the gateway in front of a cloud model, with the lane as its fallback: the lane's
reason to exist. A `litellm.Router` configured as the README's "LiteLLM: the lane as the fallback" shows, whose
primary fails the three ways a cloud model does (unreachable, rate-limited, too slow); the answer
must come from the lane, and the lane's store must hold the session it ran."""

import asyncio
import os
import re
import socket
import textwrap
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

# LiteLLM fetches its model-cost map from the network at import unless told not to; this machine
# (and CI) has no route to it, and a test must not depend on one.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
litellm = pytest.importorskip("litellm", reason="the clients extra is not installed")

from tests.fakes.scripted_model import call, text  # noqa: E402
from tests.fakes.threaded_server import ThreadedServer  # noqa: E402
from tests.integration.test_api_chat import running_lane  # noqa: E402
from tests.integration.test_clients_openai import WEATHER_TOOLS  # noqa: E402

KEY = "lane-test-key"
# The primary's timeout: long enough for a loopback answer, short enough to keep the test fast.
PRIMARY_TIMEOUT_S = 0.5
ANSWER = "The lane answered: 3."  # it holds what the tool returned, or the lane writes it again


class FailingPrimary:
    """The cloud model having a bad day, on loopback: every request, whatever the provider's path,
    is either refused with 429 (rate-limited) or left unanswered until the client gives up."""

    def __init__(self, failure: str):
        self.failure = failure
        self.hits = 0
        app = FastAPI()
        app.add_api_route("/{path:path}", self._chat, methods=["POST"])
        self._server = ThreadedServer(app, lifespan="off", name=f"{failure} primary")

    async def _chat(self, request: Request) -> Response:
        self.hits += 1
        if self.failure == "rate_limited":
            return JSONResponse(
                {"error": {"message": "Rate limit reached", "type": "rate_limit_error",
                           "code": "rate_limit_exceeded"}},
                status_code=429, headers={"retry-after": "0"})
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not await request.is_disconnected():
            await asyncio.sleep(0.02)
        return Response(status_code=504)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.port}"

    def __enter__(self) -> "FailingPrimary":
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop()


def closed_port_url() -> str:
    """A loopback URL nothing listens on: connecting to it is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@contextmanager
def primary(failure: str):
    if failure == "unreachable":
        yield closed_port_url(), None
        return
    with FailingPrimary(failure) as server:
        yield server.url, server


def readme_config() -> dict:
    """The LiteLLM `config.yaml` of the README's "LiteLLM: the lane as the fallback", as people copy it."""
    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^ *```yaml\n(.*?)^ *```", readme, re.S | re.M)
    [config] = [yaml.safe_load(textwrap.dedent(b)) for b in blocks if "model_list" in b]
    return config


def router(primary_url: str, lane_url: str):
    """A Router built from the README's configuration. Only addresses and the primary's patience
    change: `main` points at the failing stand-in with a short timeout, `lane` at the in-test
    shim; retries are off so the test is fast (a real gateway keeps its own retry policy)."""
    config = readme_config()
    deployments = {d["model_name"]: d["litellm_params"] for d in config["model_list"]}
    deployments["main"].update(api_base=primary_url, timeout=PRIMARY_TIMEOUT_S,
                               stream_timeout=PRIMARY_TIMEOUT_S)
    deployments["lane"]["api_base"] = lane_url
    return litellm.Router(model_list=config["model_list"],
                          fallbacks=config["litellm_settings"]["fallbacks"], num_retries=0)


@pytest.fixture(autouse=True)
def keys(monkeypatch):
    """The keys the README's configuration reads from the environment."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "cloud-key")
    monkeypatch.setenv("LANE_API_KEY", KEY)


def lane_url(lane) -> str:
    return str(lane.client.base_url).rstrip("/") + "/v1"


FAILURES = ["unreachable", "rate_limited", "too_slow"]


@pytest.mark.parametrize("failure", FAILURES)
def test_router_falls_back_to_the_lane(tmp_path, failure):
    with running_lane(tmp_path, [text(ANSWER)], api_key=KEY) as lane, \
            primary(failure) as (primary_url, server):
        started = time.monotonic()
        reply = router(primary_url, lane_url(lane)).completion(
            model="main", messages=[{"role": "user", "content": "Is the cloud down?"}])
        elapsed = time.monotonic() - started

        assert reply.choices[0].message.content == ANSWER
        assert reply.model.endswith("fallback-lane")
        if server is not None:
            assert server.hits == 1, "the primary was not tried first"
        # Measured median at most 1.2 s (the slowest failure kind, three runs, two shared cores).
        assert elapsed < 12
        # The lane's session id reaches the gateway's caller as a provider header, and the turn
        # the lane ran is in its store under that id.
        session = reply._hidden_params["additional_headers"]["llm_provider-x-session-id"]
        assert lane.rows("SELECT role, content FROM messages WHERE session_id = ? AND"
                         " lane_prompt = 0 ORDER BY id", session) == [
            ("user", "Is the cloud down?"), ("assistant", ANSWER)]


@pytest.mark.parametrize("failure", FAILURES)
def test_streamed_router_falls_back_to_the_lane(tmp_path, failure):
    # A slow tool turn, so the stream carries the shim's keep-alive comments before the answer.
    script = [call("add", {"a": 1, "b": 2}, delay_s=0.3), text(ANSWER)]
    with running_lane(tmp_path, script, api_key=KEY, keepalive_s=0.05) as lane, \
            primary(failure) as (primary_url, server):
        stream = router(primary_url, lane_url(lane)).completion(
            model="main", messages=[{"role": "user", "content": "Stream it, please."}],
            stream=True)
        content = "".join(chunk.choices[0].delta.content or "" for chunk in stream
                          if chunk.choices)

        assert content == ANSWER
        if server is not None:
            assert server.hits == 1
        session = _session_with(lane, "Stream it, please.")
        assert lane.rows("SELECT tool_name, status FROM tool_executions WHERE session_id = ?",
                         session) == [("add", "ok")]
        assert lane.rows("SELECT content FROM messages WHERE session_id = ? AND"
                         " role = 'assistant' ORDER BY id DESC LIMIT 1", session) == [(ANSWER,)]


@pytest.mark.parametrize("failure", FAILURES)
def test_async_streamed_router_falls_back_to_the_lane(tmp_path, failure):
    """The LiteLLM proxy serves requests through `Router.acompletion`: the same fallback, async."""
    async def ask(gateway) -> str:
        stream = await gateway.acompletion(
            model="main", messages=[{"role": "user", "content": "Async, please."}], stream=True)
        return "".join([chunk.choices[0].delta.content or "" async for chunk in stream
                        if chunk.choices])

    with running_lane(tmp_path, [text(ANSWER)], api_key=KEY) as lane, \
            primary(failure) as (primary_url, server):
        assert asyncio.run(ask(router(primary_url, lane_url(lane)))) == ANSWER
        if server is not None:
            assert server.hits == 1
        session = _session_with(lane, "Async, please.")
        assert lane.history(session) == [("user", "Async, please."), ("assistant", ANSWER)]


def test_session_header_passes_through_the_gateway(tmp_path):
    """A gateway that forwards X-Session-Id keeps one lane session across fallbacks."""
    with running_lane(tmp_path, [text("Noted."), text("Falcon.")], api_key=KEY) as lane:
        gateway = router(closed_port_url(), lane_url(lane))
        for content in ("My codename is Falcon.", "What is my codename?"):
            reply = gateway.completion(model="main",
                                       messages=[{"role": "user", "content": content}],
                                       extra_headers={"X-Session-Id": "gateway-session"})
        assert reply.choices[0].message.content == "Falcon."
        assert lane.history("gateway-session") == [
            ("user", "My codename is Falcon."), ("assistant", "Noted."),
            ("user", "What is my codename?"), ("assistant", "Falcon.")]


def _session_with(lane, user_message: str) -> str:
    rows = lane.rows("SELECT DISTINCT session_id FROM messages WHERE role = 'user' AND"
                     " content = ?", user_message)
    assert len(rows) == 1, rows
    return rows[0][0]



@pytest.mark.parametrize("failure", ["unreachable", "rate_limited"])
def test_router_fallback_with_tools_completes_a_two_call_task(tmp_path, failure):
    """LiteLLM passes the primary request's `tools` to the fallback unchanged: the lane answers
    as a tool-calling model, and the caller's tool loop runs to the end through the gateway."""
    script = [call("get_weather", {"city": "Paris"}), call("get_time", {"city": "Paris"}),
              text("Sunny, and it is noon.")]
    results = {"get_weather": "sunny", "get_time": "12:00"}
    with running_lane(tmp_path, script, api_key=KEY) as lane, \
            primary(failure) as (primary_url, server):
        gateway = router(primary_url, lane_url(lane))
        messages: list = [{"role": "user", "content": "Weather and time in Paris?"}]
        ran = []
        for _ in range(5):
            reply = gateway.completion(model="main", messages=messages, tools=WEATHER_TOOLS)
            message = reply.choices[0].message
            if not message.tool_calls:
                break
            calls = [{"id": c.id, "type": "function",
                      "function": {"name": c.function.name, "arguments": c.function.arguments}}
                     for c in message.tool_calls]
            messages.append({"role": "assistant", "content": None, "tool_calls": calls})
            for c in calls:
                ran.append(c["function"]["name"])
                messages.append({"role": "tool", "tool_call_id": c["id"],
                                 "content": results[c["function"]["name"]]})

        assert message.content == "Sunny, and it is noon."
        assert ran == ["get_weather", "get_time"]
        if server is not None:
            assert server.hits == 3, "the primary was not tried first each time"
        assert lane.rows("SELECT tool_name, result FROM returned_calls ORDER BY id") == [
            ("get_weather", "sunny"), ("get_time", "12:00")]
        assert lane.rows("SELECT count(*) FROM tool_executions") == [(0,)]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_anthropic_route_pointed_at_the_lane_completes_a_tool_task(tmp_path, stream):
    """LiteLLM's Anthropic provider (`anthropic/<model>`, `api_base` the shim's root) speaks the
    Messages API to the lane: OpenAI-shaped tools and results in, Anthropic's blocks on the wire."""
    script = [call("get_weather", {"city": "Paris"}), text("Sunny in Paris.")]
    with running_lane(tmp_path, script, api_key=KEY) as lane:
        options = {"model": "anthropic/claude-fallback", "api_base": str(lane.client.base_url), "api_key": KEY,
                   "max_tokens": 256, "tools": WEATHER_TOOLS[:1]}
        messages: list = [{"role": "user", "content": "Weather in Paris?"}]
        for _ in range(3):
            reply = litellm.completion(messages=messages, stream=stream, **options)
            if stream:
                reply = litellm.stream_chunk_builder(list(reply), messages=messages)
            message = reply.choices[0].message
            if not message.tool_calls:
                break
            calls = [{"id": c.id, "type": "function",
                      "function": {"name": c.function.name, "arguments": c.function.arguments}}
                     for c in message.tool_calls]
            messages += [{"role": "assistant", "content": None, "tool_calls": calls},
                         *({"role": "tool", "tool_call_id": c["id"], "content": "sunny"} for c in calls)]

        assert message.content == "Sunny in Paris."
        assert lane.rows("SELECT source FROM sessions") == [("proxy",)]
        assert lane.rows("SELECT tool_name, arguments, result FROM returned_calls") == [
            ("get_weather", '{"city": "Paris"}', "sunny")]
