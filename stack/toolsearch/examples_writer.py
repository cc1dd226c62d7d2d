"""Writes example requests for the deferred tools while nobody is waiting on the model.

The lane's model is the only writer a laptop has, and the user's turns come first: the writer asks
about one tool (one style of request) at a time, only after the lane has been idle for `idle_s`,
and a turn that starts meanwhile cancels its request at once, whether the model is still reading
the prompt or already writing (the client closes the connection and the llm service drops the
call, see agent/llm_client.py); the same tool is asked again at the next quiet moment. Answers go
to the shared ExampleBook, so the next catalog indexes them.

It lives beside the examples it writes (examples.py words the question and keeps the answers) and
asks whatever model it is given (asking.py): the shim passes it the lane's client.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Callable, Iterator

from .asking import Answer, ChatModel, ModelFailed
from .examples import (
    EXAMPLE_MAX_TOKENS,
    ExampleBook,
    RequestStyle,
    parse_requests,
    request_messages,
)
from .retrieval import ToolDoc

log = logging.getLogger("lane.examples")

IDLE_S = 20.0
# After a failed request (the llm service down or erring) the writer waits this long.
RETRY_S = 60.0


class ExampleWriter:
    def __init__(self, book: ExampleBook, llm: ChatModel[Answer], docs: Callable[[], list[ToolDoc]], *,
                 idle_s: float | None = None, retry_s: float = RETRY_S):
        self.book, self.llm, self.docs = book, llm, docs
        self.idle_s = IDLE_S if idle_s is None else idle_s
        self.retry_s = retry_s
        self._turns = 0
        self._last_turn = time.monotonic()
        self._turn_started = asyncio.Event()

    @contextlib.contextmanager
    def turn(self) -> Iterator[None]:
        """Wraps one agent turn: the writer steps aside while it runs."""
        self._turns += 1
        self._turn_started.set()
        try:
            yield
        finally:
            self._turns -= 1
            self._last_turn = time.monotonic()

    async def run(self) -> None:
        """Until cancelled: wait for a quiet moment, write one tool's examples, repeat."""
        while True:
            await self._quiet()
            try:
                todo = await asyncio.to_thread(lambda: self.book.missing(self.docs()))
                if not todo:
                    await asyncio.sleep(self.idle_s)  # new tools may arrive (MCP list_changed)
                elif await self.write(*todo[0]) is None:
                    log.info("a turn started; example requests for %s wait", todo[0][0].name)
            except ModelFailed as exc:
                log.warning("example requests for %s not written: %s", todo[0][0].name, exc)
                await asyncio.sleep(self.retry_s)
            except Exception:  # a tool source failing now must not end the writer for good
                log.exception("example writer: could not read the tools")
                await asyncio.sleep(self.retry_s)

    async def write(self, doc: ToolDoc, style: RequestStyle) -> tuple[str, ...] | None:
        """Asks for one style of a tool's examples and keeps them; None when a turn started first
        (nothing is kept)."""
        self._turn_started.clear()
        if self._turns:
            return None
        ask = asyncio.ensure_future(write_examples(self.book, self.llm, doc, style))
        interrupted = asyncio.ensure_future(self._turn_started.wait())
        try:
            await asyncio.wait({ask, interrupted}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            interrupted.cancel()
            if not ask.done():
                ask.cancel()
                await asyncio.wait({ask})  # its connection closed: the llm service stops
        return None if ask.cancelled() else ask.result()

    async def _quiet(self) -> None:
        while self._turns or time.monotonic() - self._last_turn < self.idle_s:
            await asyncio.sleep(max(0.05, self.idle_s - (time.monotonic() - self._last_turn)))


async def write_examples(book: ExampleBook, llm: ChatModel[Answer], doc: ToolDoc,
                         style: RequestStyle) -> tuple[str, ...]:
    """Asks the model for one style of a tool's example requests and keeps them in the book (an
    answer with none usable is kept too: that tool is not asked again)."""
    reply = await llm.chat(request_messages(doc, style), [], max_tokens=EXAMPLE_MAX_TOKENS,
                           temperature=0.0)
    requests = parse_requests(reply.content)
    book.add(doc, style, requests, await llm.model_name())
    log.info("example requests (%s) for %s: %s", style.name, doc.name,
             "; ".join(requests) or "none usable")
    return requests
