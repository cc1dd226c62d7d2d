"""Every configured MCP server, run on one event loop in a background thread.

The lane's tools are synchronous functions called from worker threads, and the MCP SDK is async.
The manager owns a private asyncio loop so that MCP traffic never depends on whichever loop (if any)
the caller runs: the shim's uvicorn loop, `lane search`, a test. Tool calls cross into that loop
with run_coroutine_threadsafe and block the calling worker thread until the result is back.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from .config import ServerConfig
from .connection import McpCallError, McpTool, ServerConnection

log = logging.getLogger("lane.mcp")

_STOP_TIMEOUT_S = 15.0  # stdio shutdown is close stdin, 2 s grace, SIGTERM, 2 s, SIGKILL


@dataclass(frozen=True)
class ServerStatus:
    name: str
    state: str  # starting | up | down
    tools: int
    last_error: str | None


class McpManager:
    def __init__(self, servers: Iterable[ServerConfig], *, health_interval_s: float = 10.0,
                 backoff_initial_s: float = 1.0, backoff_max_s: float = 60.0,
                 log_dir: Path | None = None):
        self._connections = [
            ServerConnection(config, self._invoke, health_interval_s=health_interval_s,
                             backoff_initial_s=backoff_initial_s, backoff_max_s=backoff_max_s,
                             log_dir=log_dir)
            for config in servers
        ]
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._tasks: list[asyncio.Task[None]] = []

    def __enter__(self) -> "McpManager":
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> None:
        """Start every server at once and return when each is up or has failed its first try
        (at most the longest start-up timeout); failed servers keep retrying in the background."""
        if self._loop is not None:
            raise RuntimeError("the MCP manager is already running")
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="lane-mcp", daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._spawn(), self._loop).result()
        started = time.monotonic()
        for connection in self._connections:
            budget = connection.config.startup_timeout_s + 5 - (time.monotonic() - started)
            connection.first_attempt_done.wait(max(budget, 0))
        for status in self.status():
            if status.state != "up":
                log.warning("MCP server %s is not available yet: %s", status.name,
                            status.last_error or "still starting")

    def stop(self) -> None:
        loop = self._loop
        if loop is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self._cancel_all(), loop).result(_STOP_TIMEOUT_S)
        except concurrent.futures.TimeoutError:
            log.warning("MCP servers did not stop within %.0f s", _STOP_TIMEOUT_S)
        loop.call_soon_threadsafe(loop.stop)
        assert self._thread is not None
        self._thread.join(_STOP_TIMEOUT_S)
        if not self._thread.is_alive():
            loop.close()
        self._loop, self._thread, self._tasks = None, None, []

    def tools(self) -> list[McpTool]:
        """The live tools of every connected server, in configuration order."""
        return [tool for connection in self._connections for tool in connection.tools]

    def status(self) -> list[ServerStatus]:
        return [ServerStatus(c.name, c.state, len(c.tools), c.last_error) for c in self._connections]

    async def _spawn(self) -> None:
        self._tasks = [asyncio.create_task(c.run(), name=f"mcp-{c.name}") for c in self._connections]

    async def _cancel_all(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _invoke(self, connection: ServerConnection, remote_name: str, arguments: dict[str, Any]) -> str:
        """Run one call on the manager's loop and wait for it from the calling thread."""
        loop = self._loop
        if loop is None:
            raise McpCallError(f"MCP server {connection.name} is not running (the lane is shutting down)")
        future = asyncio.run_coroutine_threadsafe(connection.call(remote_name, arguments), loop)
        try:
            return future.result(connection.config.call_timeout_s + 10)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise McpCallError(f"{remote_name} on MCP server {connection.name} did not answer within "
                               f"{connection.config.call_timeout_s:g} s") from None
