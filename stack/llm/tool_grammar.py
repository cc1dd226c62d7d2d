"""Constrained decoding of a tool call, for requests whose `tool_choice` demands one.

OpenAI's `tool_choice: "required"` (some tool) or `{"type": "function", "function": {"name": N}}`
(that tool) is a promise that the reply is a call. A small model does not keep such promises by
itself, so the engine holds it to them: a llama.cpp grammar, built from the offered tools' JSON
schemas, admits only `{"name": ..., "arguments": {...}}` with arguments that fit the chosen tool.
The shim reads that object back as a call like any other it recovers from text. `"auto"`, `"none"`
and no `tool_choice` leave decoding free.
"""

from __future__ import annotations

import json
from typing import Any


def call_schema(tools: list[dict[str, Any]] | None, tool_choice: Any) -> dict[str, Any] | None:
    """The JSON schema a forced reply must match, or None when the reply is free."""
    functions = [t["function"] for t in tools or [] if isinstance(t.get("function"), dict)]
    if tool_choice == "required":
        chosen = functions
    elif isinstance(tool_choice, dict) and isinstance(tool_choice.get("function"), dict):
        chosen = [f for f in functions if f.get("name") == tool_choice["function"].get("name")]
    else:
        return None
    variants = [{"type": "object",
                 "properties": {"name": {"const": f["name"]},
                                "arguments": f.get("parameters") or {"type": "object"}},
                 "required": ["name", "arguments"]} for f in chosen if f.get("name")]
    if not variants:
        return None
    return variants[0] if len(variants) == 1 else {"oneOf": variants}


def grammar_text(schema: dict[str, Any]) -> str:
    """GBNF for the schema (llama-cpp-python's converter, the one llama.cpp's server uses)."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    return json_schema_to_gbnf(json.dumps(schema))
