"""One constrained model call, in the form the upstream honours: the only place that looks at
what it honours (capabilities.py).

The turn asks three kinds of constrained call (llm_client.LlmClient.chat): a reply held to a JSON
schema (the decision, the reading, a call forced through the bridge), a call forced by a named
`tool_choice`, and a yes/no read from `logprobs`. Callers always ask in the full form; `shape`
turns the request into what this upstream does, and `read` turns the reply back into what the
caller asked for, so decide.py, reading.py, loop.py and proxy.py never branch on the server:

* a reply schema: `response_format` json_schema ("schema"); else a tool whose parameters are the
  schema, forced by name where that is honoured, else offered alone ("tool"); else the schema in
  words after the request, the JSON read out of free text and validated ("text"). A reply that
  holds no valid value on the "tool" or "text" path is asked for once more, the model told why.
* a named `tool_choice`: as it is ("named"); else a reply schema of that one call, the call then
  handed back as a native call ("schema"); else that one tool offered alone ("offered": the
  caller salvages a call written as text, as for any reply); else "text".
* `logprobs`: sent where honoured; elsewhere not asked (the yes/no lever is off: ledger.LEVERS).

`path` says which form a call took; the store keeps it with the lane's own calls (lane_calls.path)
and the trace page shows it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from ..tools.base import ToolError
from ..tools.validation import validate_arguments
from .capabilities import Capabilities
from .toolcalls import ToolCall, extract_calls, json_values, new_call_id

if TYPE_CHECKING:
    from .llm_client import ModelReply

# The tool whose parameters are a reply's schema, where the upstream makes calls but does not
# hold output to a schema.
SCHEMA_TOOL = "lane_reply"
SCHEMA_INSTRUCTION = "Reply with only a JSON object that matches this JSON schema, and nothing else:"
TOOL_INSTRUCTION = f"Reply by calling the tool {SCHEMA_TOOL}; its arguments are your reply."
AGAIN = "That reply was not usable: {problem}\n"
# The property a non-object reply schema is wrapped in as the reply tool's parameters.
WRAPPED = "reply"


@dataclass(frozen=True)
class Form:
    """A model call as it goes upstream. `expect`: the schema the reply's value must hold where
    the lane reads it itself ("tool" and "text"); `call`: the tool a forced call names, when the
    call is asked for as a reply schema and handed back as a call."""

    path: str | None
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    tool_choice: dict[str, Any] | str | None = None
    response_schema: dict[str, Any] | None = None
    top_logprobs: int | None = None
    expect: dict[str, Any] | None = None
    call: str | None = None
    instruction: str = ""  # how to reply, told again with what was wrong when the reply held no value
    # The caller offered tools: a call of one of them (or of a tool it told the model of in words)
    # instead of the reply tool is read as the call it is.
    calls_welcome: bool = False


def shape(caps: Capabilities, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *,
          tool_choice: dict[str, Any] | str | None, response_schema: dict[str, Any] | None,
          top_logprobs: int | None) -> Form:
    """The request in the form `caps` honours (the module's docstring lists the paths). Where a
    named tool_choice is not honoured, the one tool the call must be is the only one offered."""
    logprobs = top_logprobs if caps.logprobs else None
    named = _named(tool_choice) if tools else None
    if named is not None and response_schema is None and not caps.tool_choice:
        call_schema = _call_schema(named, tools)
        if caps.json_schema:
            return Form("schema", messages, tools, None, call_schema, logprobs, call=named)
        if caps.tool_calls:
            return Form("offered", messages, [t for t in tools if t["function"]["name"] == named], None, None, logprobs)
        return _text(messages, tools, call_schema, logprobs, call=named)
    if response_schema is None:
        path = "named" if named is not None else "logprobs" if top_logprobs is not None else None
        return Form(path, messages, tools, tool_choice, None, logprobs)
    if caps.json_schema:
        return Form("schema", messages, tools, tool_choice, response_schema, logprobs)
    if caps.tool_calls:
        reply_tool = {"type": "function", "function": {
            "name": SCHEMA_TOOL, "description": "Give your reply.", "parameters": _as_object(response_schema)}}
        if caps.tool_choice:
            return Form("tool", messages, [*tools, reply_tool], _forced(SCHEMA_TOOL), None, logprobs,
                        expect=response_schema, instruction=TOOL_INSTRUCTION, calls_welcome=bool(tools))
        return Form("tool", messages, [reply_tool], None, None, logprobs, expect=response_schema,
                    instruction=TOOL_INSTRUCTION, calls_welcome=bool(tools))
    return _text(messages, tools, response_schema, logprobs)


def read(form: Form, reply: ModelReply) -> str | None:
    """Puts the reply into the shape the caller asked for (a schema's JSON as content, a forced
    call as a native call); what is wrong with it where it holds no valid value (the call is then
    worth asking once more), else None."""
    reply.path = form.path
    if form.expect is not None:
        if form.calls_welcome and any(call.name != SCHEMA_TOOL for call in reply.tool_calls):
            return None  # a real call instead of the reply: the caller reads it as any call
        value, problem = _value(form.expect, reply)
        if value is None:  # the reply tool is no tool: its call never reaches the caller as one
            words = [c.arguments for c in reply.tool_calls if c.name == SCHEMA_TOOL and isinstance(c.arguments, str)]
            reply.tool_calls = [c for c in reply.tool_calls if c.name != SCHEMA_TOOL]
            reply.content = reply.content or " ".join(words)
            return problem
        reply.content, reply.tool_calls = json.dumps(value, ensure_ascii=False), []
    if form.call is not None and not reply.tool_calls:
        value = _first_valid(form.response_schema or form.expect or {}, [reply.content])[0]
        if value is not None:
            origin: Literal["native", "content"] = "content" if form.path == "text" else "native"
            reply.tool_calls = [ToolCall(new_call_id(), form.call,
                                         json.dumps(value.get("arguments") or {}, ensure_ascii=False), origin)]
            reply.content = ""
    return None


def again(form: Form, reply: ModelReply, problem: str) -> Form:
    """The same call once more, the model shown its reply and told what was wrong with it."""
    note = AGAIN.format(problem=problem) + (form.instruction or SCHEMA_INSTRUCTION)
    messages = [*form.messages, {"role": "assistant", "content": reply.content or ""},
                {"role": "user", "content": note}]
    return replace(form, messages=messages)


def _text(messages: list[dict[str, Any]], tools: list[dict[str, Any]], schema: dict[str, Any],
          logprobs: int | None, call: str | None = None) -> Form:
    instruction = f"{SCHEMA_INSTRUCTION}\n{json.dumps(schema, ensure_ascii=False)}"
    return Form("text", _told(messages, instruction), tools, None, None, logprobs, expect=schema, call=call,
                instruction=instruction)


def _value(schema: dict[str, Any], reply: ModelReply) -> tuple[Any, str]:
    """The reply's value: the reply tool's arguments (a native call, or one written as text),
    else the first valid JSON in its text."""
    parameters = _as_object(schema)
    written = extract_calls(reply.content, lambda name: parameters if name == SCHEMA_TOOL else None)
    arguments = [call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)
                 for call in [*reply.tool_calls, *written] if call.name == SCHEMA_TOOL]
    if parameters is not schema:  # the tool's arguments wrap the value
        value, _ = _first_valid(parameters, arguments)
        if value is not None:
            return value[WRAPPED], ""
    return _first_valid(schema, [*arguments, reply.content])


def _first_valid(schema: dict[str, Any], texts: list[str]) -> tuple[Any, str]:
    """The first JSON value in `texts` that `schema` admits (None), or what was wrong."""
    problem = "it holds no JSON object"
    for text in texts:
        for value in json_values(text or ""):
            try:
                return _valid(schema, value), ""
            except ToolError as exc:
                problem = str(exc).splitlines()[0]
    return None, problem


def _valid(schema: dict[str, Any], value: Any) -> Any:
    """`value` as the lane's one validator (tools/validation.py) passes it, of any JSON type."""
    if isinstance(value, dict) and schema.get("type", "object") == "object" and "anyOf" not in schema:
        return validate_arguments("the reply", schema, value)
    return validate_arguments("the reply", _as_object(schema, force=True), {WRAPPED: value})[WRAPPED]


def _as_object(schema: dict[str, Any], *, force: bool = False) -> dict[str, Any]:
    """A tool's parameters must be an object: a schema of anything else (a list of calls) becomes
    the one property WRAPPED of one, its `$defs` kept at the root its `$ref`s point to."""
    if schema.get("type") == "object" and not force:
        return schema
    inner = {key: value for key, value in schema.items() if key != "$defs"}
    wrapper: dict[str, Any] = {"type": "object", "properties": {WRAPPED: inner}, "required": [WRAPPED]}
    return wrapper | ({"$defs": schema["$defs"]} if "$defs" in schema else {})


def _named(tool_choice: dict[str, Any] | str | None) -> str | None:
    if isinstance(tool_choice, dict):
        name = (tool_choice.get("function") or {}).get("name")
        return name if isinstance(name, str) else None
    return None


def _forced(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name}}


def _call_schema(name: str, tools: list[dict[str, Any]]) -> dict[str, Any]:
    """A reply that is exactly one call of `name`, its arguments under the tool's parameters."""
    parameters = next((t["function"].get("parameters") or {"type": "object"} for t in tools
                       if t.get("function", {}).get("name") == name), {"type": "object"})
    return {"type": "object", "required": ["name", "arguments"],
            "properties": {"name": {"const": name}, "arguments": parameters}}


def _told(messages: list[dict[str, Any]], instruction: str) -> list[dict[str, Any]]:
    """The messages with `instruction` after the last one (in it, when it is the user's words):
    the opening stays the cached prefix it always is."""
    last = messages[-1] if messages else {}
    if last.get("role") == "user" and isinstance(last.get("content"), str):
        return [*messages[:-1], {**last, "content": f"{last['content']}\n\n{instruction}"}]
    return [*messages, {"role": "user", "content": instruction}]
