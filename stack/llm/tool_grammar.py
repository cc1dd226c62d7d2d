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


# Keywords whose values are data, not schemas: left as they are.
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples", "description", "title"})
# Length and count bounds the converter writes out as that many nested repetitions: over this,
# left out of the grammar (Stripe's MCP `update_dispute` says `maxLength: 20000`, and llama.cpp's
# parser, given the 20,000-deep rule, overflows its stack and takes the process down).
MAX_BOUND = 64
_BOUNDS = frozenset({"maxLength", "minLength", "maxItems", "minItems"})


def for_grammar(schema: Any, *, patterns: bool = True) -> Any:
    """The schema as the grammar holds it: bounds over MAX_BOUND left out, and with `patterns`
    false every `pattern` keyword too (a property named "pattern" stays: its value is a schema),
    the keyword whose regular expressions the converter translates least reliably. The shim
    validates arguments against the client's whole schema afterwards."""
    if isinstance(schema, list):
        return [for_grammar(item, patterns=patterns) for item in schema]
    if not isinstance(schema, dict):
        return schema
    return {key: value if key in _DATA_KEYWORDS else for_grammar(value, patterns=patterns)
            for key, value in schema.items()
            if not (key == "pattern" and isinstance(value, str) and not patterns)
            and not (key in _BOUNDS and isinstance(value, int) and value > MAX_BOUND)}
