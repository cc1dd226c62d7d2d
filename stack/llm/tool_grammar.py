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
from dataclasses import dataclass
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


def grammar_text(schema: dict[str, Any], closing: int = 0) -> str:
    """GBNF for the schema (llama-cpp-python's converter, the one llama.cpp's server uses); with
    `closing`, for an optional space, the schema's value and that many closing braces: what is
    left of a reply after its forced opening (forced_opening)."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    text = json_schema_to_gbnf(json.dumps(schema))
    if not closing:
        return text
    # The converter names its top rule `root` and never refers to it (it rejects a "$ref": "#").
    rules = [f"lane-rest ::= {line[len('root ::= '):]}" if line.startswith("root ::= ") else line
             for line in text.splitlines()]
    return "\n".join(["root ::= space lane-rest" + ' "}" space' * closing, *rules])


@dataclass(frozen=True)
class Opening:
    """The text every reply a schema admits opens with, in the converter's own spacing, and what
    follows it: `rest`'s value, then `closing` braces."""

    text: str
    rest: dict[str, Any]
    closing: int


def forced_opening(schema: dict[str, Any] | None) -> Opening | None:
    """The opening the grammar leaves the model no choice about, or None: for an object whose
    properties are all required (no others allowed) and whose every property but the last is a
    constant, its brace, keys and constants up to the last property's value, and so on into that
    value. A forced call `{"name": "calculate", "arguments": {…}}` opens with ~10 such tokens (~17
    through the tool_call bridge), a decision `{"next": …}` with 4: each sampled one by one under
    the grammar on two cores at ~0.15 s a token (docs/measurements.md), where the engine can put
    them into the prompt instead and sample only the rest. The spacing is the converter's (one
    space after ',', none after '{'), which the model's own calls use too; the opening stops at
    the last ':', so the space before a value stays the model's own token (BPE merges it with
    the value's first character: a lone space in the prompt would be text it never writes)."""
    text, closing, node = "", 0, schema
    while _plain_object(node):
        assert isinstance(node, dict)
        properties = list(node["properties"].items())
        if any(not _constant(value) for _, value in properties[:-1]):
            break
        text += (" {" if text else "{") + ", ".join(f"{json.dumps(key)}: {json.dumps(value['const'])}"
                                for key, value in properties[:-1])
        text += (", " if len(properties) > 1 else "") + f"{json.dumps(properties[-1][0])}:"
        closing, node = closing + 1, properties[-1][1]
    return Opening(text, node, closing) if closing and isinstance(node, dict) else None


def _plain_object(node: Any) -> bool:
    """An object schema the converter writes as its properties in order, all required, nothing else."""
    if not isinstance(node, dict) or node.get("type", "object") != "object" or not node.get("properties"):
        return False
    if {"oneOf", "anyOf", "allOf", "$ref", "const", "enum", "not", "if"} & node.keys():
        return False
    properties = node["properties"]
    return isinstance(properties, dict) and set(node.get("required") or ()) == set(properties) \
        and node.get("additionalProperties") in (None, False)


def _constant(node: Any) -> bool:
    return isinstance(node, dict) and set(node) <= {"const", "type", "description", "title"} \
        and isinstance(node.get("const"), (str, int, float, bool))


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
