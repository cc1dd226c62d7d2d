"""MCP tools as lane tools, and the one place a lane's full Registry is opened.

`open_lane_registry` is what the shim and `lane search` use: the built-in families plus the live
tools of every configured MCP server. The servers start (in parallel) when the context opens and
stop when it closes; while it is open the registry reads their current tool lists on every call,
so a server that crashes takes its tools with it and brings them back when it reconnects.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator

from ..config import Settings
from ..mcp.config import parse_servers
from .base import Tool, ToolContext, ToolError
from .registry import Registry, ToolProvider, build_registry

if TYPE_CHECKING:
    from ..mcp.connection import McpTool
    from ..mcp.manager import McpManager

log = logging.getLogger("lane.tools")


@contextmanager
def open_lane_registry(settings: Settings) -> Iterator[Registry]:
    """Builtin tools + the live tools of settings.mcp_servers, servers stopped on exit."""
    servers = parse_servers(settings.mcp_servers, call_timeout_s=settings.tool_timeout_s)
    if not servers:
        yield build_registry()
        return
    try:
        from ..mcp.manager import McpManager
    except ImportError as exc:
        log.error("mcp_servers is configured but the MCP SDK is missing (%s); install "
                  "fallback-lane[mcp]. Continuing with the built-in tools only.", exc)
        yield build_registry()
        return
    with McpManager(servers, log_dir=settings.home / "logs") as manager:
        yield build_registry([mcp_provider(manager)])


def mcp_provider(manager: "McpManager") -> ToolProvider:
    """A registry provider over the manager's live tools; Tool objects are rebuilt only when a
    server's list changes (the registry asks on every read)."""
    # Keyed by id(); each entry holds its descriptor, so an id cannot be reused while cached.
    cache: dict[int, tuple["McpTool", Tool]] = {}

    def provide() -> list[Tool]:
        current = {id(d): cache.get(id(d)) or (d, as_tool(d)) for d in manager.tools()}
        cache.clear()
        cache.update(current)
        return [tool for _, tool in current.values()]

    return provide


def as_tool(descriptor: "McpTool") -> Tool:
    def run(arguments: dict[str, Any], ctx: ToolContext) -> str:
        from ..mcp.connection import McpCallError

        try:
            return descriptor.call(arguments)
        except McpCallError as exc:
            raise ToolError(str(exc)) from None

    return Tool(name=descriptor.name, description=descriptor.description,
                parameters=descriptor.input_schema, run=run, source=descriptor.server)
