"""One configured MCP server, kept connected for as long as the lane runs.

A ServerConnection lives on the manager's event loop. It connects, lists the server's tools and
then watches it: a `notifications/tools/list_changed` re-lists, a periodic ping catches a server
that died or stopped answering while idle, and a failed call asks for an immediate ping. Whenever
the connection is lost its tools leave the list at once and it reconnects with exponential
backoff, so the rest of the lane never waits on a broken server.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from contextlib import AsyncExitStack
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable, TextIO

import anyio
import httpx2
import mcp.types as types
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from .config import ServerConfig
from .results import render_result

log = logging.getLogger("lane.mcp")

CLIENT_INFO = types.Implementation(name="fallback-lane", version="0.1.0")
_MAX_PAGES = 50  # a server that keeps handing out cursors is broken, not large
_TOOL_NAME = re.compile(r"[^A-Za-z0-9_-]")
_MAX_TOOL_NAME = 64  # what OpenAI-compatible clients accept for a function name


class McpCallError(Exception):
    """A call to an MCP tool failed; the message says why in words a model can act on."""


@dataclass(frozen=True)
class McpTool:
    """One live MCP tool as the lane sees it; `call` blocks and raises McpCallError on failure."""

    name: str  # `server__tool`, unique across the lane
    server: str
    remote_name: str  # the name the server knows it by
    description: str
    input_schema: dict[str, Any]
    call: Callable[[dict[str, Any]], str]


Invoke = Callable[["ServerConnection", str, dict[str, Any]], str]


class ServerConnection:
    def __init__(self, config: ServerConfig, invoke: Invoke, *, health_interval_s: float,
                 backoff_initial_s: float, backoff_max_s: float, log_dir: Path | None = None):
        self.config = config
        self.tools: tuple[McpTool, ...] = ()
        self.state = "starting"  # starting | up | down
        self.last_error: str | None = None
        # Set (from the loop thread) once the first attempt has connected or failed.
        self.first_attempt_done = threading.Event()
        self._invoke = invoke
        self._health_interval_s = health_interval_s
        self._backoff = (backoff_initial_s, backoff_max_s)
        self._log_dir = log_dir
        self._session: ClientSession | None = None
        self._wake: anyio.Event | None = None
        self._refresh_wanted = False
        self._check_wanted = False
        self._in_flight = 0

    @property
    def name(self) -> str:
        return self.config.name

    async def run(self) -> None:
        """Connect, serve, and after any loss reconnect with backoff; ends only when cancelled."""
        delay = self._backoff[0]
        while True:
            try:
                await self._serve()
            except Exception as exc:  # any failure of one server is logged, never fatal
                self.last_error = _describe(exc)
                log.warning("MCP server %s: %s", self.name, self.last_error)
            finally:
                was_up = self.state == "up"
                self._session = None
                self.tools = ()
                self.state = "down"
                self.first_attempt_done.set()
            if was_up:  # a server that worked for a while is retried promptly
                delay = self._backoff[0]
            log.info("MCP server %s: reconnecting in %.1f s", self.name, delay)
            await anyio.sleep(delay)
            delay = min(delay * 2, self._backoff[1])

    async def call(self, remote_name: str, arguments: dict[str, Any]) -> str:
        session, timeout = self._session, self.config.call_timeout_s
        if session is None:
            raise McpCallError(f"MCP server {self.name} is not connected ({self.last_error or 'starting'}); "
                               "its tools are back once it reconnects")
        label = f"{remote_name} on MCP server {self.name}"
        self._in_flight += 1
        try:
            # The SDK's read timeout cancels the request on the server; fail_after is the backstop.
            with anyio.fail_after(timeout + 5):
                result = await session.call_tool(remote_name, arguments, read_timeout_seconds=timeout)
        except MCPError as exc:
            if exc.code == types.REQUEST_TIMEOUT:
                self.request_check()
                raise McpCallError(f"{label} did not answer within {timeout:g} s") from None
            if exc.code == types.CONNECTION_CLOSED:
                self.request_check()
                raise McpCallError(f"MCP server {self.name} closed the connection during {remote_name} "
                                   "(it crashed or exited); the lane reconnects it") from None
            raise McpCallError(f"{label} failed: {exc}") from None
        except TimeoutError:
            self.request_check()
            raise McpCallError(f"{label} did not answer within {timeout:g} s") from None
        except Exception as exc:  # pydantic errors and friends: the server broke the protocol
            raise McpCallError(f"{label} sent a malformed result: {_describe(exc)}") from None
        finally:
            self._in_flight -= 1
        text = render_result(result)
        if result.is_error:
            raise McpCallError(text)
        return text

    def request_check(self) -> None:
        """Ping the server now instead of at the next health tick (called after a failed call)."""
        self._check_wanted = True
        if self._wake is not None:
            self._wake.set()

    async def _serve(self) -> None:
        """One connection's life: connect, list tools, watch until the server is lost."""
        self.state = "starting"
        async with AsyncExitStack() as stack:
            read, write = await stack.enter_async_context(self._transport(stack))
            session = await stack.enter_async_context(
                ClientSession(read, write, message_handler=self._on_message, client_info=CLIENT_INFO))
            try:
                with anyio.fail_after(self.config.startup_timeout_s):
                    # The pre-2026 handshake: every server generation answers it, and it keeps
                    # tools/list_changed a plain notification rather than a subscription stream.
                    await session.initialize()
                    await self._list_tools(session)
            except TimeoutError:
                raise ConnectionError(f"no answer to initialize and tools/list within "
                                      f"{self.config.startup_timeout_s:g} s") from None
            self._session, self.state, self.last_error = session, "up", None
            log.info("MCP server %s: up with %d tools", self.name, len(self.tools))
            self.first_attempt_done.set()
            await self._watch(session)

    def _transport(self, stack: AsyncExitStack) -> Any:
        config = self.config
        if config.transport == "stdio":
            assert config.command is not None
            params = StdioServerParameters(command=config.command, args=list(config.args),
                                           env=dict(config.env) or None, cwd=config.cwd)
            return stdio_client(params, errlog=self._errlog(stack))
        assert config.url is not None
        http = httpx2.AsyncClient(headers=dict(config.headers), follow_redirects=True,
                                  timeout=httpx2.Timeout(30, read=max(300, config.call_timeout_s)))
        stack.push_async_callback(http.aclose)
        return streamable_http_client(config.url, http_client=http)

    def _errlog(self, stack: AsyncExitStack) -> TextIO:
        """Where a stdio server's stderr goes: a log file per server, so its noise stays out of ours."""
        if self._log_dir is None:
            return stack.enter_context(open(os.devnull, "w"))
        self._log_dir.mkdir(parents=True, exist_ok=True)
        return stack.enter_context(open(self._log_dir / f"mcp-{self.name}.log", "a", encoding="utf-8"))

    async def _watch(self, session: ClientSession) -> None:
        """Until the server is lost: re-list on tools/list_changed, ping on every tick or request."""
        while True:
            self._wake = anyio.Event()
            if not (self._refresh_wanted or self._check_wanted):
                with anyio.move_on_after(self._health_interval_s):
                    await self._wake.wait()
            if self._refresh_wanted:
                self._refresh_wanted = False
                with anyio.fail_after(self.config.startup_timeout_s):
                    await self._list_tools(session)
                log.info("MCP server %s: tool list changed, now %d tools", self.name, len(self.tools))
                continue
            if not self._check_wanted and self._in_flight:
                # A server busy with a long call may not answer pings (some handle one message at
                # a time); the call's own timeout watches it, and a failed call asks for a check.
                continue
            self._check_wanted = False
            try:
                with anyio.fail_after(min(10.0, self.config.startup_timeout_s)):
                    await session.send_ping()
            except TimeoutError:
                raise ConnectionError("lost: ping timed out (the server hangs)") from None
            except MCPError as exc:
                raise ConnectionError(f"lost: {_describe(exc)}") from None

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._refresh_wanted = True
            if self._wake is not None:
                self._wake.set()
        elif isinstance(message, Exception):
            log.warning("MCP server %s sent something unreadable: %s", self.name, _describe(message))

    async def _list_tools(self, session: ClientSession) -> None:
        listed: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
            listed.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        self.tools = tuple(self._descriptors(listed))

    def _descriptors(self, listed: list[types.Tool]) -> list[McpTool]:
        tools: dict[str, McpTool] = {}
        for remote in listed:
            if not self.config.allows(remote.name):
                continue
            name = (f"{self.name}__" + _TOOL_NAME.sub("_", remote.name))[:_MAX_TOOL_NAME]
            if name in tools:
                log.warning("MCP server %s: skipping %s, its name collides as %s", self.name, remote.name, name)
                continue
            tools[name] = McpTool(
                name=name,
                server=self.name,
                remote_name=remote.name,
                description=(remote.description or remote.title or f"{remote.name} (MCP server {self.name})").strip(),
                input_schema=_object_schema(remote.input_schema),
                call=partial(self._invoke, self, remote.name),
            )
        return list(tools.values())


def _object_schema(schema: dict[str, Any] | None) -> dict[str, Any]:
    """Servers may omit `properties` for a tool without arguments; the lane's validator and
    OpenAI-style clients expect an object schema, so fill in what is missing."""
    result = dict(schema or {})
    result.setdefault("type", "object")
    result.setdefault("properties", {})
    return result


def _describe(exc: BaseException) -> str:
    """The innermost useful message of an exception, ExceptionGroups (anyio task groups) unwrapped."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
