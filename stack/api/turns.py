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
from typing import Any, AsyncIterator, Callable, Protocol

from starlette.requests import Request

from ..agent.llm_client import LlmError, LlmTimeout
from ..agent.loop import Agent, TurnResult
from ..agent.proxy import ProxyLane
from ..config import Settings
from ..store import Store
from ..toolsearch.examples_writer import ExampleWriter
from ..toolsearch.surface import Profile
from ..wire import ApiError
from .chat_request import ChatRequest
from .errors import INTERNAL

log = logging.getLogger("lane.api")

# How often a waiting request checks whether its client is still there.
DISCONNECT_POLL_S = 0.1


class ClientGone(Exception):
    """The client disconnected before its turn ended; the turn was cancelled."""


class ReplyFormat(Protocol):
    """One wire format's reply to one turn (OpenAI chat completions, Anthropic Messages, OpenAI
    Responses): the turn is the same, only its shape differs. Streamed replies are SSE text."""

    def body(self, result: TurnResult) -> dict[str, Any]:
        """The whole reply of a request that did not stream."""

    def opening(self) -> list[str]:
        """Sent as soon as the turn starts, before anything is known of it."""

    def keepalive(self) -> str:
        """Sent while the turn runs, so that proxies and clients do not time out."""

    def closing(self, result: TurnResult) -> list[str]:
        """The turn's reply, its finish and usage, and the end of the stream."""

    def failure(self, error: ApiError) -> list[str]:
        """A failure after the headers went out (status 200 already sent), and the end."""


AfterTurn = Callable[[TurnResult], None]


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
              profile: Profile, after: AfterTurn | None = None) -> asyncio.Task[TurnResult]:
        """The turn as a task; `after` runs with its result while the session is still locked,
        so what it records is there before the session's next turn can start."""
        task = asyncio.create_task(self._turn(session_id, new_messages, chat, profile, after))
        # A cancelled or failed task nobody awaits must not log "exception never retrieved".
        task.add_done_callback(lambda done: done.cancelled() or done.exception())
        return task

    async def _turn(self, session_id: str, new_messages: list[dict[str, Any]],
                    chat: ChatRequest, profile: Profile, after: AfterTurn | None) -> TurnResult:
        quiet = self.examples.turn() if self.examples else contextlib.nullcontext()
        with quiet:
            async with self._lock(session_id):
                result = await self._locked_turn(session_id, new_messages, chat, profile)
                if after is not None:
                    after(result)
                return result

    async def _locked_turn(self, session_id: str, new_messages: list[dict[str, Any]],
                           chat: ChatRequest, profile: Profile) -> TurnResult:
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
                     reply: ReplyFormat) -> AsyncIterator[str]:
        """SSE for one turn in the client's format: the opening at once, keep-alives while the
        turn runs, then the reply and its end. Headers are already sent, so a failure becomes the
        format's error event rather than a status code."""
        try:
            for event in reply.opening():
                yield event
            last_sent = time.monotonic()
            while not task.done():
                await asyncio.wait({task}, timeout=DISCONNECT_POLL_S)
                if task.done():
                    break
                if await request.is_disconnected():
                    log.info("streaming client left; cancelling its turn")
                    return
                if time.monotonic() - last_sent >= self.keepalive_s:
                    yield reply.keepalive()
                    last_sent = time.monotonic()
            try:
                result = task.result()
            except (LlmError, ApiError) as exc:
                events = reply.failure(upstream_error(exc) if isinstance(exc, LlmError) else exc)
            except Exception:
                log.exception("turn failed while streaming")
                events = reply.failure(INTERNAL)
            else:
                events = reply.closing(result)
            for event in events:
                yield event
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
