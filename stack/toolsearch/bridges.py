"""The three bridge tools through which a model reaches every deferred tool.

Their schemas are what a small model reads on every call, so each word is there to make the
protocol unmistakable: search by task, get back names with the arguments they need, call by name.
`tool_search` answers in short plain lines (a 4B model copies `name(arg: type)` more reliably
than it digs through JSON) and never answers with nothing: on a hopeless query it still names the
closest tools and the connected sources. Both take several at once (`queries`, `names`), as
peer agent endpoints converged on: a multi-step request is searched in one call, not three.
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

_STRINGS = {"type": "array", "items": {"type": "string"}}
SEARCH_PARAMETERS = object_schema(
    {"query": {"type": "string", "description": "the task in a few words"},
     "queries": {**_STRINGS, "description": "several tasks, one search each"},
     "limit": {"type": "integer"}},
)
DESCRIBE_PARAMETERS = object_schema({"name": {"type": "string"}, "names": _STRINGS})
CALL_PARAMETERS = object_schema(
    {"name": {"type": "string"}, "arguments": {"type": "object"}}, ["name", "arguments"])


def bridge_tools(catalog: Catalog, settings: Settings) -> dict[str, Tool]:
    """tool_search and tool_describe, ordinary tools over this catalog. tool_call is not among
    them: it runs the tool it names, so `call_through_bridge` records that tool instead."""
    def search(arguments: dict[str, Any], ctx: ToolContext) -> str:
        queries = _several(arguments, "query", "queries")
        if len(queries) == 1:
            return search_text(catalog, queries[0], arguments.get("limit"), settings)
        return search_many(catalog, queries, arguments.get("limit"), settings)

    def describe(arguments: dict[str, Any], ctx: ToolContext) -> str:
        names = _several(arguments, "name", "names")
        return describe_text(catalog, names[0]) if len(names) == 1 else describe_many(catalog, names)

    return {
        SEARCH: Tool(SEARCH, SEARCH_DESCRIPTION, SEARCH_PARAMETERS, search, "lane"),
        DESCRIBE: Tool(DESCRIBE, DESCRIBE_DESCRIPTION, DESCRIBE_PARAMETERS, describe, "lane"),
    }


CALL_SCHEMA: dict[str, Any] = {"type": "function", "function": {
    "name": CALL, "description": CALL_DESCRIPTION, "parameters": CALL_PARAMETERS}}


def forced_bridge_schema(catalog: Catalog, tool: str | None) -> dict[str, Any] | None:
    """The reply schema that forces a call to a hidden tool: a tool_call naming it, with
    arguments that fit its schema. A response format rather than a change to `tools`, so the
    prompt's cached tools block stays as it is. None for a tool the catalog does not hold."""
    if tool is None or tool not in catalog:
        return None
    arguments = {"type": "object", "required": ["name", "arguments"], "properties": {
        "name": {"const": tool},
        "arguments": catalog.tools[tool].parameters or {"type": "object"}}}
    return {"type": "object", "required": ["name", "arguments"],
            "properties": {"name": {"const": CALL}, "arguments": arguments}}


def call_through_bridge(catalog: Catalog, direct: Collection[str], raw_arguments: Any,
                        ctx: ToolContext) -> Outcome:
    """Run the deferred tool that a tool_call names. The outcome carries that tool's name with
    via_bridge set; a call that reaches no tool is refused under tool_call's own name."""
    target = bridge_target(catalog, direct, raw_arguments)
    if isinstance(target, Outcome):
        return target
    tool, target_arguments = target
    return run_tool(tool, target_arguments, ctx, via_bridge=True)


def bridge_target(catalog: Catalog, direct: Collection[str],
                  raw_arguments: Any) -> tuple[Tool, Any] | Outcome:
    """The hidden tool a tool_call names and the arguments meant for it, or the Outcome of a
    tool_call that reaches none (the lane runs the tool; proxy mode returns it to the client)."""
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
    return tool, target_arguments


USAGE = 'Use tool_call({"name": "<tool>", "arguments": {...}}).'


def _bridge_outcome(status: Status, reason: str, raw_arguments: Any) -> Outcome:
    outcome = refused(CALL, reason, raw_arguments)
    return replace(outcome, status=status)


def _several(arguments: dict[str, Any], one: str, many: str) -> list[str]:
    """The non-empty strings of `one` and `many` together, in order, without repeats."""
    given = [arguments.get(one), *(arguments.get(many) or [])]
    values = list(dict.fromkeys(v.strip() for v in given if isinstance(v, str) and v.strip()))
    if not values:
        raise ToolError(f"give {one} (a string) or {many} (a list of strings)")
    return values


CALL_HINT = "Call one: tool_call(name, arguments={...})."


def search_text(catalog: Catalog, query: str, limit: int | None, settings: Settings) -> str:
    if not catalog:
        return "No hidden tools are available in this session."
    lines, confident = _hit_lines(catalog, query, limit, settings)
    if confident:
        return "\n".join(lines + [CALL_HINT])
    return "\n".join([f"Low confidence: no tool clearly matches {query!r}. Closest:", *lines,
                      f"{_sources(catalog)} Try other words."])


def search_many(catalog: Catalog, queries: list[str], limit: int | None,
                settings: Settings) -> str:
    """One group of hits per query, headed by the query; the sources once if any group is
    hopeless."""
    if not catalog:
        return "No hidden tools are available in this session."
    out: list[str] = []
    hopeless = False
    for query in queries:
        lines, confident = _hit_lines(catalog, query, limit, settings)
        out.append(f"{query!r}:" if confident else f"{query!r} (low confidence, closest):")
        out.extend(lines)
        hopeless |= not confident
    out.append(CALL_HINT)
    if hopeless:
        out.append(_sources(catalog))
    return "\n".join(out)


def _hit_lines(catalog: Catalog, query: str, limit: int | None,
               settings: Settings) -> tuple[list[str], bool]:
    wanted = settings.search_default_limit if limit is None or limit < 1 else limit
    wanted = min(wanted, settings.max_search_limit)
    hits, confident = catalog.search(query, wanted)
    names = [h.name for h in hits] or catalog.closest(query, 3)
    return [f"- {signature(catalog.tools[n])}: {one_line(catalog.tools[n].description)}"
            for n in names], confident and bool(hits)


def _sources(catalog: Catalog) -> str:
    return f"Connected sources: {', '.join(catalog.sources)}."


def describe_text(catalog: Catalog, name: str) -> str:
    tool = catalog.tools.get(name)
    if tool is None:
        near = ", ".join(catalog.closest(name, 3)) or "none"
        raise ToolError(f"no hidden tool named {name!r}; closest: {near}")
    return json.dumps(_described(tool), ensure_ascii=False)


def describe_many(catalog: Catalog, names: list[str]) -> str:
    """`{"tools": [schemas], "unknown": [{"name", "closest"}]}`; an error only when no name is
    known."""
    known = [catalog.tools[n] for n in names if n in catalog.tools]
    unknown = [{"name": n, "closest": catalog.closest(n, 3)} for n in names
               if n not in catalog.tools]
    if not known:
        listed = "; ".join(f"{u['name']!r} (closest: {', '.join(u['closest']) or 'none'})"
                           for u in unknown)
        raise ToolError(f"no hidden tool by these names: {listed}")
    answer: dict[str, Any] = {"tools": [_described(t) for t in known]}
    if unknown:
        answer["unknown"] = unknown
    return json.dumps(answer, ensure_ascii=False)


def _described(tool: Tool) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
