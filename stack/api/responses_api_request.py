"""An OpenAI Responses request (`POST /v1/responses`) read as the chat-completions request the turn
engine takes.

Only shapes change here: `input` (a string, or `message`, `function_call` and
`function_call_output` items; an output without a call joins the result before it) becomes chat
messages, a conversation continued from
`previous_response_id` comes first, `instructions` and system or developer messages become the
leading system message, flat function tools (`{type, name, description, parameters}`) become
chat tools, `max_output_tokens` becomes `max_tokens`. The chat parser then checks the result, so
the rules are those of chat completions. `reasoning` items are dropped; `text`, `reasoning`,
`include`, `truncation`, `metadata`, `user` and tools of other types (hosted tools the lane cannot
run for the client) are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..wire import bad_request, check_field_types, kind_of
from .chat_request import ChatRequest, chat_request_from

_TEXT_PARTS = frozenset({"input_text", "output_text", "text"})
_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}
_SKIPPED_ITEMS = frozenset({"reasoning"})
# The Responses fields chat completions does not have, with the JSON type a client must send.
_OWN_FIELDS: dict[str, tuple[type, str]] = {
    "instructions": (str, "a string"), "max_output_tokens": (int, "an integer"), "store": (bool, "a boolean"),
    "previous_response_id": (str, "a string")}


@dataclass(frozen=True)
class ResponsesRequest:
    chat: ChatRequest
    conversation: list[dict[str, Any]]  # chat-shaped, without instructions: what a response id keeps
    previous_response_id: str | None
    store: bool  # False: no response id is kept for a later previous_response_id
    echo: dict[str, Any]  # the request's settings as the response object repeats them


def parse_responses_request(data: dict[str, Any], earlier: list[dict[str, Any]], *, max_tokens_cap: int,
                            max_tools: int) -> ResponsesRequest:
    """`earlier`: the conversation of `previous_response_id` (empty when the request names none)."""
    check_field_types(data)  # model, stream, temperature, top_p, tools, tool_choice, parallel_tool_calls, ...
    for key, (kind, name) in _OWN_FIELDS.items():
        value = data.get(key)
        if value is not None and type(value) is not kind:  # JSON true is not an integer here
            raise bad_request(f"{key} must be {name}, not {kind_of(value)}", "invalid_type")
    conversation = [*earlier, *input_messages(data.get("input"))]
    instructions = data.get("instructions") or ""
    system = "\n\n".join(t for t in [instructions, *(m["content"] for m in conversation if m["role"] == "system")] if t)
    rest = [m for m in conversation if m["role"] != "system"]
    tools = [_tool(tool, f"tools[{index}]") for index, tool in enumerate(data.get("tools") or [])]
    body: dict[str, Any] = {
        "messages": [{"role": "system", "content": system}, *rest] if system else rest,
        "stream": data.get("stream", False),
        "max_tokens": data.get("max_output_tokens"),
        "temperature": data.get("temperature"),
        "tools": [tool for tool in tools if tool is not None],
        "parallel_tool_calls": data.get("parallel_tool_calls"),
    }
    if body["tools"] and data.get("tool_choice") is not None:
        body["tool_choice"] = _tool_choice(data["tool_choice"])
    chat = chat_request_from(body, max_tokens_cap=max_tokens_cap, max_tools=max_tools)
    echo = {"instructions": data.get("instructions"), "max_output_tokens": data.get("max_output_tokens"),
            "metadata": data.get("metadata") or {}, "parallel_tool_calls": data.get("parallel_tool_calls", True),
            "previous_response_id": data.get("previous_response_id"), "store": data.get("store", True),
            "temperature": data.get("temperature"), "top_p": data.get("top_p"),
            "tool_choice": data.get("tool_choice", "auto"), "tools": data.get("tools") or [],
            "user": data.get("user")}
    return ResponsesRequest(chat, conversation, data.get("previous_response_id"), data.get("store", True) is not False,
                            echo)


def input_messages(value: Any) -> list[dict[str, Any]]:
    """`input` as chat messages: consecutive function_call items join one assistant message (with
    the assistant text just before them, if any)."""
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if not isinstance(value, list):
        raise bad_request(f"input must be a string or a list of items, not {kind_of(value)}", "invalid_input")
    out: list[dict[str, Any]] = []
    for index, item in enumerate(value):
        where = f"input[{index}]"
        if not isinstance(item, dict):
            raise bad_request(f"{where} must be an object, not {kind_of(item)}", "invalid_input")
        kind = item.get("type", "message")
        if kind == "message":
            out.append(_message(item, where))
        elif kind == "function_call":
            call = _call(item, where)
            last = out[-1] if out else None
            if last is not None and last["role"] == "assistant":
                last["tool_calls"] = [*last.get("tool_calls", []), call]
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output" and not item.get("call_id") and isinstance(item.get("name"), str):
            _uncalled(out, item, where)
        elif kind == "function_call_output":
            out.append(_output(item, where))
        elif kind not in _SKIPPED_ITEMS:
            raise bad_request(f"{where} is a {kind!r} item; the lane reads message, function_call and "
                              "function_call_output items", "invalid_input")
    return out


def _message(item: dict[str, Any], where: str) -> dict[str, Any]:
    role = _ROLES.get(item.get("role"))  # type: ignore[arg-type]
    if role is None:
        raise bad_request(f"{where}.role must be user, assistant, system or developer, not {item.get('role')!r}",
                          "invalid_input")
    return {"role": role, "content": _text(item.get("content"), f"{where}.content")}


def _text(value: Any, where: str) -> str:
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise bad_request(f"{where} must be a string or a list of text parts, not {kind_of(value)}", "invalid_input")
    texts = []
    for index, part in enumerate(value):
        if not isinstance(part, dict) or part.get("type") not in _TEXT_PARTS or not isinstance(part.get("text"), str):
            raise bad_request(f'{where}[{index}] must be a text part {{"type": "input_text", "text": "..."}}; '
                              "the lane reads text only", "invalid_input")
        texts.append(part["text"])
    return "\n".join(texts)


def _call(item: dict[str, Any], where: str) -> dict[str, Any]:
    call_id, name, arguments = item.get("call_id"), item.get("name"), item.get("arguments", "")
    if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not isinstance(arguments, str):
        raise bad_request(f"{where} must be a function_call item {{call_id, name, arguments: string}}",
                          "invalid_input")
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _output(item: dict[str, Any], where: str) -> dict[str, Any]:
    call_id = item.get("call_id")
    if not isinstance(call_id, str) or not call_id:
        raise bad_request(f"{where}.call_id must be a non-empty string", "invalid_input")
    return {"role": "tool", "tool_call_id": call_id, "content": _text(item.get("output", ""), f"{where}.output")}


def _uncalled(out: list[dict[str, Any]], item: dict[str, Any], where: str) -> None:
    """An output the client adds without a call (no `call_id`, a `name`: Codex sends its goal's
    objective as `goal_objective` after `create_goal` returned) is no answer to a call of the
    model's: it joins the tool result just before it, or else stands as a message of the client's,
    so nothing it says is lost and no call id is made up."""
    text = f"{item['name']}: {_text(item.get('output', ''), f'{where}.output')}"
    if out and out[-1]["role"] == "tool":
        out[-1]["content"] = f"{out[-1]['content']}\n\n{text}"
    else:
        out.append({"role": "user", "content": text})


def _tool(tool: Any, where: str) -> dict[str, Any] | None:
    """A flat function tool as a chat tool; hosted tools (web_search, file_search, ...) are left
    out: the lane cannot run them for the client."""
    if not isinstance(tool, dict):
        raise bad_request(f"{where} must be an object, not {kind_of(tool)}", "invalid_tools")
    if tool.get("type") != "function":
        return None
    return {"type": "function", "function": {"name": tool.get("name"), "description": tool.get("description"),
                                             "parameters": tool.get("parameters")}}


def _tool_choice(value: Any) -> Any:
    """`auto`, `none`, `required` as they are; `{"type": "function", "name"}` in the chat shape."""
    if isinstance(value, dict) and value.get("type") == "function":
        return {"type": "function", "function": {"name": value.get("name")}}
    return value
