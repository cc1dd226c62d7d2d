"""Running one agent turn for one HTTP request: one turn at a time per session, and no turn
outliving its client.

The turn runs as its own task so the request can watch the client meanwhile: when the client goes
away (or a streaming client stops reading) the task is cancelled, which closes the upstream model
call instead of letting a small local model generate for nobody.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from dataclasses import dataclass
from typing import Any, AsyncIterator

from starlette.requests import Request

from ..agent.llm_client import LlmError, LlmTimeout
from ..agent.loop import Agent, TurnResult
from ..agent.proxy import ProxyLane
from ..config import Settings
from ..store import Store
from ..toolsearch.examples_writer import ExampleWriter
from ..toolsearch.surface import Profile
from ..wire import SSE_DONE, SSE_KEEPALIVE, ApiError, sse
from .chat_request import ChatRequest
from .errors import INTERNAL
from .responses import chunk, finish_reason_of, tool_call_deltas, usage_of

log = logging.getLogger("lane.api")

# How often a waiting request checks whether its client is still there.
DISCONNECT_POLL_S = 0.1


class ClientGone(Exception):
    """The client disconnected before its turn ended; the turn was cancelled."""


def upstream_error(exc: LlmError) -> ApiError:
    if isinstance(exc, LlmTimeout):
        return ApiError(504, f"the model did not answer in time: {exc}", type="timeout_error",
                        code="llm_timeout")
    return ApiError(502, f"the model service failed: {exc}", type="upstream_error",
                    code="llm_unavailable")


@dataclass
class TurnRunner:
    settings: Settings
    store: Store
    agent: Agent
    keepalive_s: float
    examples: ExampleWriter | None = None  # steps aside while a turn runs
    proxy: ProxyLane | None = None  # serves requests that carry `tools`

    def __post_init__(self) -> None:
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = (
            weakref.WeakValueDictionary())

    def _lock(self, session_id: str) -> asyncio.Lock:
        lock = self._locks.get(session_id)
        if lock is None:
            lock = self._locks[session_id] = asyncio.Lock()
        return lock

    def start(self, session_id: str, new_messages: list[dict[str, Any]], chat: ChatRequest,
              profile: Profile) -> asyncio.Task[TurnResult]:
        task = asyncio.create_task(self._turn(session_id, new_messages, chat, profile))
        # A cancelled or failed task nobody awaits must not log "exception never retrieved".
        task.add_done_callback(lambda done: done.cancelled() or done.exception())
        return task

    async def _turn(self, session_id: str, new_messages: list[dict[str, Any]],
                    chat: ChatRequest, profile: Profile) -> TurnResult:
        quiet = self.examples.turn() if self.examples else contextlib.nullcontext()
        with quiet:
            return await self._locked_turn(session_id, new_messages, chat, profile)

    async def _locked_turn(self, session_id: str, new_messages: list[dict[str, Any]],
                           chat: ChatRequest, profile: Profile) -> TurnResult:
        async with self._lock(session_id):
            if chat.proxy is not None:
                if self.proxy is None:
                    raise RuntimeError("a request with tools reached a TurnRunner without a proxy lane")
                self.store.create_session(session_id, source="proxy", title=_title(new_messages))
                return await self.proxy.run_turn(session_id, new_messages, chat.proxy, profile)
            self.store.create_session(session_id, source="api", title=_title(new_messages))
            return await self.agent.run_turn(
                session_id, new_messages, profile=profile, max_tokens=chat.max_tokens,
                temperature=chat.temperature,
            )

    async def wait(self, task: asyncio.Task[TurnResult], request: Request) -> TurnResult:
        """The turn's result; ClientGone (and the turn cancelled) if the client left first."""
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=DISCONNECT_POLL_S)
                if done:
                    return task.result()
                if await request.is_disconnected():
                    log.info("client left; cancelling its turn")
                    raise ClientGone()
        finally:
            task.cancel()

    async def stream(self, task: asyncio.Task[TurnResult], request: Request,
                     completion_id: str) -> AsyncIterator[str]:
        """SSE for one turn: the role chunk at once, keep-alive comments while the turn runs, then
        the answer, a chunk with finish_reason and usage, and [DONE]. Headers are already sent,
        so a failure becomes an `error` event rather than a status code."""
        try:
            yield sse(chunk(completion_id, {"role": "assistant", "content": ""}))
            last_sent = time.monotonic()
            while not task.done():
                await asyncio.wait({task}, timeout=DISCONNECT_POLL_S)
                if task.done():
                    break
                if await request.is_disconnected():
                    log.info("streaming client left; cancelling its turn")
                    return
                if time.monotonic() - last_sent >= self.keepalive_s:
                    yield SSE_KEEPALIVE
                    last_sent = time.monotonic()
            try:
                result = task.result()
            except (LlmError, ApiError) as exc:
                error = upstream_error(exc) if isinstance(exc, LlmError) else exc
                yield sse(error.body)
                yield SSE_DONE
                return
            except Exception:
                log.exception("turn failed while streaming")
                yield sse(INTERNAL.body)
                yield SSE_DONE
                return
            for delta in tool_call_deltas(getattr(result, "tool_calls", None) or []):
                yield sse(chunk(completion_id, delta))
            if result.content:
                yield sse(chunk(completion_id, {"content": result.content}))
            yield sse(chunk(completion_id, {}, finish_reason_of(result), usage_of(result)))
            yield SSE_DONE
        finally:
            task.cancel()


TITLE_CHARS = 80


def _title(new_messages: list[dict[str, Any]]) -> str | None:
    """A session's title is the start of its first user message (kept if already set)."""
    for message in new_messages:
        if message["role"] == "user" and message.get("content"):
            line = " ".join(message["content"].split())
            # Cut between words: a small model copies a cut word as it is (seen: "Ostrowsk" saved
            # to memory from a session_search hit's title).
            return line if len(line) <= TITLE_CHARS else line[:TITLE_CHARS].rsplit(" ", 1)[0] + " …"
    return None
