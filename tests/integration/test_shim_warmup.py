"""The shim reports healthy only once the llm service holds its stable prefixes, and what it
warms is exactly what its model calls begin with (the answer's instruction, the agent's system
prompt and tools block for the forced calls, the decision's question). Scripted model with the
lane llm's warm-up route."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from stack.config import Settings
from stack.tools.base import Tool, object_schema
from stack.tools.registry import Registry
from tests.fakes.scripted_model import ScriptedModel, call, text
from tests.integration.shim_server import ShimServer

TOOLS = [
    Tool("add", "Add two integers.", object_schema({"a": {"type": "integer"}, "b": {"type": "integer"}},
                                                   ["a", "b"]), lambda arguments, ctx: "3"),
    Tool("world_clock", "The time in a time zone.", object_schema({"timezone": {"type": "string"}}, ["timezone"]),
         lambda arguments, ctx: "12:00"),
]


@dataclass
class WarmingModel(ScriptedModel):
    """Records what it is asked to warm and answers once `release` is set, with `warm_status`."""

    warm_bodies: list[dict[str, Any]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    warm_status: int = 200

    def app(self) -> FastAPI:
        app = super().app()

        @app.get("/v1/lane/warm")
        async def listed() -> dict[str, Any]:
            return {"prefixes": []}

        @app.post("/v1/lane/warm")
        async def warm(request: Request) -> JSONResponse:
            self.warm_bodies.append(await request.json())
            while not self.release.is_set():
                await asyncio.sleep(0.02)
            if self.warm_status != 200:
                return JSONResponse({"error": {"message": "too long", "type": "invalid_request_error",
                                               "code": "context_length_exceeded"}}, status_code=self.warm_status)
            return JSONResponse({"prefix_tokens": 900, "source": "evaluated", "seconds": 0.1, "saved": True})

        return app


@contextmanager
def lane(tmp_path: Path, model: WarmingModel) -> Iterator[httpx.Client]:
    settings = Settings(home=tmp_path, llm_url=model.url, tool_search="on", core_tools=("add",),
                        tool_examples=False)
    with ShimServer(settings, registry=Registry(TOOLS)) as shim, \
            httpx.Client(base_url=shim.url, timeout=20) as client:
        yield client


def health(client: httpx.Client) -> tuple[int, dict[str, Any]]:
    """The status and the parts, without what the upstream honours (asserted where it matters)."""
    response = client.get("/health")
    body = response.json()
    body.pop("capabilities")
    return response.status_code, body


def wait_until(condition: Any, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_not_healthy_until_warm_and_the_warmed_prefix_is_what_the_first_call_sends(tmp_path: Path) -> None:
    with WarmingModel([call("add", {"a": 1, "b": 2}), text("It is 3.")]) as model, \
            lane(tmp_path, model) as client:
        assert wait_until(lambda: len(model.warm_bodies) == 1)
        assert health(client) == (503, {"status": "unavailable", "store": "ok", "llm": "ok", "warm": "warming"})
        model.release.set()
        assert wait_until(lambda: health(client)[0] == 200)
        assert health(client)[1] == {"status": "ok", "store": "ok", "llm": "ok"}
        answer = client.post("/v1/chat/completions", headers={"X-Session-Id": "first"},
                             json={"messages": [{"role": "user", "content": "add 1 and 2"}]})
        assert answer.status_code == 200 and answer.json()["choices"][0]["message"]["content"] == "It is 3."
    # the decision's goes last, so the context holds it when the first request comes
    compose, read, agent, decide = model.warm_bodies
    decision, = model.decide_requests
    reading, = model.reading_requests  # the answer's reading begins with what was warmed
    assert reading["messages"][: len(read["messages"])] == read["messages"]
    assert decision["messages"][: len(decide["messages"])] == decide["messages"] and "tools" not in decide
    forced, composed = model.requests
    assert forced["tool_choice"] == {"type": "function", "function": {"name": "add"}}
    assert forced["messages"][: len(agent["messages"])] == agent["messages"]
    assert forced["tools"] == agent["tools"]
    assert {t["function"]["name"] for t in agent["tools"]} >= {"add", "tool_search", "tool_call"}
    assert composed["messages"][: len(compose["messages"])] == compose["messages"]
    assert not composed.get("tools") and "tools" not in compose
    assert len({json.dumps(body["messages"][0]) for body in model.warm_bodies}) == 4


def test_a_prefix_the_llm_refuses_leaves_the_lane_healthy_unwarmed(tmp_path: Path) -> None:
    with WarmingModel([text("Hi.")], warm_status=400) as model, lane(tmp_path, model) as client:
        model.release.set()
        assert wait_until(lambda: health(client)[0] == 200)
        assert len(model.warm_bodies) == 1  # refused: not asked again, nothing else warmed


def test_an_upstream_without_the_route_is_healthy_at_once(tmp_path: Path) -> None:
    with ScriptedModel([text("Hi.")]) as model:
        settings = Settings(home=tmp_path, llm_url=model.url, tool_search="on", core_tools=("add",),
                            tool_examples=False)
        with ShimServer(settings, registry=Registry(TOOLS)) as shim:
            assert httpx.get(f"{shim.url}/health").status_code == 200
