"""The three bridge tools through which a model reaches every deferred tool.

Their schemas are what a small model reads on every call, so each word is there to make the
protocol unmistakable: search by task, get back names with the arguments they need, call by name.
`tool_search` answers in short plain lines (a 4B model copies `name(arg: type)` more reliably
than it digs through JSON) and never answers with nothing: on a hopeless query it still names the
closest tools and the connected sources.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Collection

from ..config import Settings
from ..tools.base import RESERVED_NAMES, Tool, ToolContext, ToolError, object_schema
from ..tools.execute import Outcome, Status, refused, run_tool
from ..tools.validation import parse_arguments
from .catalog import Catalog, one_line, signature

SEARCH, DESCRIBE, CALL = "tool_search", "tool_describe", "tool_call"

SEARCH_DESCRIPTION = "Find hidden tools for a task. Returns names with the arguments they need."
DESCRIBE_DESCRIPTION = "Full argument schema of a hidden tool."
CALL_DESCRIPTION = "Run a hidden tool found by tool_search."

SEARCH_PARAMETERS = object_schema(
    {"query": {"type": "string", "description": "the task in a few words"},
     "limit": {"type": "integer"}},
    ["query"],
)
DESCRIBE_PARAMETERS = object_schema({"name": {"type": "string"}}, ["name"])
CALL_PARAMETERS = object_schema(
    {"name": {"type": "string"}, "arguments": {"type": "object"}}, ["name", "arguments"])


def bridge_tools(catalog: Catalog, settings: Settings) -> dict[str, Tool]:
    """tool_search and tool_describe, ordinary tools over this catalog. tool_call is not among
    them: it runs the tool it names, so `call_through_bridge` records that tool instead."""
    def search(arguments: dict[str, Any], ctx: ToolContext) -> str:
        return search_text(catalog, arguments["query"], arguments.get("limit"), settings)

    def describe(arguments: dict[str, Any], ctx: ToolContext) -> str:
        return describe_text(catalog, arguments["name"])

    return {
        SEARCH: Tool(SEARCH, SEARCH_DESCRIPTION, SEARCH_PARAMETERS, search, "lane"),
        DESCRIBE: Tool(DESCRIBE, DESCRIBE_DESCRIPTION, DESCRIBE_PARAMETERS, describe, "lane"),
    }


CALL_SCHEMA = {"type": "function", "function": {
    "name": CALL, "description": CALL_DESCRIPTION, "parameters": CALL_PARAMETERS}}


def call_through_bridge(catalog: Catalog, direct: Collection[str], raw_arguments: Any,
                        ctx: ToolContext) -> Outcome:
    """Run the deferred tool that a tool_call names. The outcome carries that tool's name with
    via_bridge set; a call that reaches no tool is refused under tool_call's own name."""
    try:
        arguments = parse_arguments(raw_arguments)
    except ToolError as exc:
        return _bridge_outcome("error", f"{exc}. {USAGE}", raw_arguments)
    name = arguments.get("name")
    if not isinstance(name, str) or not name.strip():
        return _bridge_outcome("error", f"tool_call needs the tool's name. {USAGE}", raw_arguments)
    name = name.strip()
    if "arguments" in arguments:
        target_arguments = arguments["arguments"]
    else:  # {"name": "x", "path": "..."}: the model flattened the arguments; take them as meant
        target_arguments = {k: v for k, v in arguments.items() if k != "name"}
    if name in RESERVED_NAMES:
        reason = (f"{name} cannot run through tool_call (recursion)" if name == CALL
                  else f"{name} is a bridge tool: call {name} directly, not through tool_call")
        return refused(CALL, reason, raw_arguments)
    if name in direct and name not in catalog:
        return refused(CALL, f"{name} is offered directly: call it directly, not through "
                             "tool_call", raw_arguments)
    tool = catalog.tools.get(name)
    if tool is None:
        near = ", ".join(catalog.closest(name, 3)) or "none"
        return refused(CALL, f"no hidden tool named {name!r} in this session; closest: {near}. "
                             "Use tool_search to find one.", raw_arguments)
    return run_tool(tool, target_arguments, ctx, via_bridge=True)


USAGE = 'Use tool_call({"name": "<tool>", "arguments": {...}}).'


def _bridge_outcome(status: Status, reason: str, raw_arguments: Any) -> Outcome:
    outcome = refused(CALL, reason, raw_arguments)
    return replace(outcome, status=status)


def search_text(catalog: Catalog, query: str, limit: int | None, settings: Settings) -> str:
    if not catalog:
        return "No hidden tools are available in this session."
    wanted = settings.search_default_limit if limit is None or limit < 1 else limit
    wanted = min(wanted, settings.max_search_limit)
    hits, confident = catalog.search(query, wanted)
    if confident:
        lines = [f"- {signature(catalog.tools[h.name])}: "
                 f"{one_line(catalog.tools[h.name].description)}" for h in hits]
        return "\n".join(lines + ['Call one: tool_call(name, arguments={...}).'])
    closest = [h.name for h in hits] or catalog.closest(query, 3)
    lines = [f"- {signature(catalog.tools[n])}: {one_line(catalog.tools[n].description)}"
             for n in closest]
    return "\n".join([
        f"Low confidence: no tool clearly matches {query!r}. Closest:", *lines,
        f"Connected sources: {', '.join(catalog.sources)}. Try other words.",
    ])


def describe_text(catalog: Catalog, name: str) -> str:
    tool = catalog.tools.get(name)
    if tool is None:
        near = ", ".join(catalog.closest(name, 3)) or "none"
        raise ToolError(f"no hidden tool named {name!r}; closest: {near}")
    return json.dumps({"name": tool.name, "description": tool.description,
                       "parameters": tool.parameters}, ensure_ascii=False)
