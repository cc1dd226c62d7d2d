"""Repairs for chat templates that show a small model a wrong picture of the tool-call format.

A small model copies what its prompt shows. Two defects, both in Qwen2.5's own template and common
in templates written for Hugging Face's `apply_chat_template`, make it copy the wrong thing:
* Past calls rendered with `arguments | tojson`: OpenAI clients send `arguments` as a JSON *string*,
  so the history shows `"arguments": "{\\"action\\": \\"add\\"}"`, double-encoded, and the model
  writes its next call that way. Templates like that expect an object, as llama.cpp's own server
  also concludes; which kind a template is, is found by rendering a probe once.
* The instruction line `{{"name": <function-name>, "arguments": <args-json-object>}}`: doubled
  braces inside a Jinja string literal are printed as they are, and the model answers `{{...}}`.
"""

from __future__ import annotations

import json
from typing import Any, Callable

Render = Callable[[list[dict[str, Any]]], str]

_PROBE = '{"lane_probe": 1}'
_DOUBLED = '{{"name": <function-name>, "arguments": <args-json-object>}}'
_SINGLE = '{"name": <function-name>, "arguments": <args-json-object>}'


def wants_object_arguments(render: Render) -> bool:
    """True when the template JSON-encodes a call's `arguments` itself (a string shows escaped)."""
    call = {"id": "probe", "type": "function", "function": {"name": "probe", "arguments": _PROBE}}
    messages: list[dict[str, Any]] = [{"role": "user", "content": "probe"},
                {"role": "assistant", "content": "", "tool_calls": [call]}]
    try:
        return json.dumps(_PROBE) in render(messages)
    except Exception:  # a template that cannot render tool calls at all has nothing to repair
        return False


def with_object_arguments(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages with every call's JSON-string `arguments` decoded into an object."""
    return [_decoded_calls(m) if m.get("tool_calls") else m for m in messages]


def single_braces(prompt: str) -> str:
    return prompt.replace(_DOUBLED, _SINGLE)


def _decoded_calls(message: dict[str, Any]) -> dict[str, Any]:
    calls = []
    for call in message["tool_calls"]:
        function = call.get("function") if isinstance(call, dict) else None
        arguments = function.get("arguments") if isinstance(function, dict) else None
        if isinstance(function, dict) and isinstance(arguments, str):
            try:
                decoded = json.loads(arguments)
            except json.JSONDecodeError:
                decoded = None
            if isinstance(decoded, dict):
                call = {**call, "function": {**function, "arguments": decoded}}
        calls.append(call)
    return {**message, "tool_calls": calls}
