#!/usr/bin/env python3
"""An MCP stdio server that offers N real MCP tool schemas and answers every call with canned text.

The A/B benchmark needs a deferred tool set as large as a real deployment's, without the real
servers (they need network, credentials and backends). The schemas are the servers' own, from
scripts/bench/data/catalog.json, served unchanged through the SDK's low-level server so nothing
re-derives them; a call answers `ok: NAME ran with ARGUMENTS`, short and deterministic.

Selection (fixed, so both arms and every run see the same pack): servers sorted by name, each
server's tools sorted by name, taken round-robin; a tool is skipped when its own name (after the
catalog's `server__` prefix) is a lane tool's name, is already taken, or would not make a valid
`pack__NAME` function name. With `--server NAME` a process serves only the selected tools of that
catalog server, so a lane.yaml can list one server per product (`github`, `stripe`, ...) as a
real deployment does, and its tools read as in the catalog (`github__star_repository`).

    .venv/bin/python scripts/bench/tool_pack_server.py [--count 16] [--server NAME] [--list]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from itertools import zip_longest
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

CATALOG = Path(__file__).with_name("data") / "catalog.json"
SERVER_NAME = "pack"  # the lane.yaml server name, so lane tool names read `pack__NAME`
_VALID_NAME = re.compile(r"^[A-Za-z0-9-]+(_[A-Za-z0-9-]+)*$")  # OpenAI-valid, no `__` inside
_MAX_NAME = 64 - len(SERVER_NAME) - 2


def lane_tool_names() -> frozenset[str]:
    """The lane's own tools and bridges: a pack tool named like one would shadow it in search."""
    from stack.tools.registry import build_registry
    from stack.toolsearch.bridges import CALL, DESCRIBE, SEARCH

    return frozenset(tool.name for tool in build_registry()) | {SEARCH, DESCRIBE, CALL}


def select_tools(count: int, catalog: Path = CATALOG, server: str | None = None) -> list[dict[str, Any]]:
    """`count` catalog entries (OpenAI format, name replaced by the tool's own name), round-robin
    across servers so the pack mixes domains the way a multi-server deployment does; with
    `server`, only the chosen ones of that catalog server."""
    return [{**entry["function"], "name": own} for entry, own in _selection(count, catalog)
            if server is None or entry["x-server"] == server]


def pack_servers(count: int, catalog: Path = CATALOG) -> list[str]:
    """The catalog servers the selection draws from, sorted: one lane.yaml server each."""
    return sorted({entry["x-server"] for entry, _ in _selection(count, catalog)})


def pack_origins(count: int, catalog: Path = CATALOG, *, by_server: bool = False) -> dict[str, str]:
    """{lane name: the catalog name it was taken from} for the same selection; the lane name is
    `pack__NAME` from one server, or the catalog's own name when each catalog server is its own."""
    return {f"{entry['x-server'] if by_server else SERVER_NAME}__{own}": entry["function"]["name"]
            for entry, own in _selection(count, catalog)}


def _selection(count: int, catalog: Path) -> list[tuple[dict[str, Any], str]]:
    by_server: dict[str, list[dict[str, Any]]] = {}
    for entry in json.loads(catalog.read_text()):
        by_server.setdefault(entry["x-server"], []).append(entry)
    columns = [sorted(tools, key=lambda e: e["function"]["name"]) for _, tools in sorted(by_server.items())]
    taken = set(lane_tool_names())
    chosen: list[tuple[dict[str, Any], str]] = []
    for row in zip_longest(*columns):
        for entry in filter(None, row):
            own = entry["function"]["name"].split("__", 1)[1]
            if own in taken or len(own) > _MAX_NAME or not _VALID_NAME.match(own):
                continue
            taken.add(own)
            chosen.append((entry, own))
            if len(chosen) == count:
                return chosen
    return chosen


def canned_result(name: str, arguments: dict[str, Any] | None) -> str:
    return f"ok: {name} ran with {json.dumps(arguments or {}, sort_keys=True, separators=(',', ':'))}"


def serve(tools: list[dict[str, Any]]) -> None:
    import anyio
    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    listed = [types.Tool(name=t["name"], description=t.get("description"),
                         input_schema=t.get("parameters") or {"type": "object", "properties": {}})
              for t in tools]
    known = {t.name for t in listed}

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in known:
            return types.CallToolResult(content=[types.TextContent(text=f"unknown tool {params.name}")],
                                        is_error=True)
        answer = canned_result(params.name, params.arguments)
        return types.CallToolResult(content=[types.TextContent(text=answer)])

    server = Server("tool-pack", on_list_tools=list_tools, on_call_tool=call_tool)

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(main)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=16, help="how many tools to serve (default 16)")
    parser.add_argument("--server", help="serve only the selected tools of this catalog server")
    parser.add_argument("--list", action="store_true", help="print the selected names and exit")
    args = parser.parse_args()
    tools = select_tools(args.count, server=args.server)
    if args.list:
        print("\n".join(t["name"] for t in tools))
        return 0
    serve(tools)
    return 0


if __name__ == "__main__":
    sys.exit(main())
