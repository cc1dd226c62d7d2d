"""A reply of several calls: when proxy mode asks for one, and the schema it is decoded under.

A client that allows parallel calls may need several in one reply ("the weather in A, B and C" is
three calls). A call forced to one tool's schema can only ever be one, so where a call is forced
and parallel calls are allowed, the reply is decoded as a list of calls instead, each under its
own tool's schema. How many calls, and to which tools, is the model's decoding under the
grammar: no word of the request decides it.
"""

from __future__ import annotations

from typing import Any

# A reply that is several calls holds at most this many: a small model held to a list of calls can
# repeat its last one until the token cap; a client asking for more in one message gets the rest
# in the next reply.
MAX_CALLS_IN_REPLY = 8


def several_calls_schema(tools: list[dict[str, Any]], first: str | None = None) -> dict[str, Any] | None:
    """The JSON schema of a reply that is a list of one or more calls (each `{"name", "arguments"}`
    with arguments under that tool's own schema) to the functions of `tools`: what a request that
    allows parallel calls is decoded under in place of a call forced to one tool, so that "the
    weather in A, B and C" can be three calls. With `first` (the tool the decision picked), the
    list begins with a call to it and goes on with calls to any of them (llama.cpp's converter
    reads no `prefixItems` followed by `items`, so each length is one tuple, its calls `$ref`s):
    the decision's pick is kept, and a second tool the request needs can follow. How many calls,
    and to which further tools, is the model's decoding under the grammar: no word of the request
    decides it. None where `tools` holds no function."""
    functions = [t["function"] for t in tools if isinstance(t.get("function"), dict) and t["function"].get("name")]
    functions.sort(key=lambda f: f["name"] != first)
    variants = [{"type": "object", "properties": {"name": {"const": f["name"]},
                                                  "arguments": f.get("parameters") or {"type": "object"}},
                 "required": ["name", "arguments"]} for f in functions]
    if not variants:
        return None
    item = variants[0] if len(variants) == 1 else {"anyOf": variants}
    if first is None or functions[0]["name"] != first or len(variants) == 1:
        return {"type": "array", "items": item, "minItems": 1, "maxItems": MAX_CALLS_IN_REPLY}
    calls = [{"$ref": "#/$defs/first"}, *[{"$ref": "#/$defs/call"}] * (MAX_CALLS_IN_REPLY - 1)]
    return {"$defs": {"first": variants[0], "call": item},
            "anyOf": [{"type": "array", "prefixItems": calls[:size], "minItems": size, "maxItems": size}
                      for size in range(1, MAX_CALLS_IN_REPLY + 1)]}



def several_calls(tools: list[dict[str, Any]], tool_choice: dict[str, Any] | str | None, *,
                  parallel: bool, named: bool) -> dict[str, Any] | None:
    """Where a call is forced (`tool_choice`) and the client allows parallel calls, the schema of
    a reply of one or more calls (several_calls_schema) that replaces the forced one: asked for
    the same function on several inputs, or for several functions, the model writes every call,
    each under its tool's schema. The decision's (or the client's) tool leads the list of
    variants; a tool_choice the client `named` admits that tool alone."""
    if tool_choice is None or not parallel:
        return None
    if isinstance(tool_choice, dict):
        first = tool_choice["function"]["name"]
        if named:
            tools = [t for t in tools if t["function"]["name"] == first]
        return several_calls_schema(tools, first)
    return several_calls_schema(tools)
