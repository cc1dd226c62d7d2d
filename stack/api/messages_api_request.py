"""An Anthropic Messages request (`POST /v1/messages`) read as the chat-completions request the
turn engine takes.

Only shapes change here: `system` (a string or text blocks, and `role: "system"` entries inside
`messages`, as Claude Code sends them) becomes the leading system message; `tool_use` blocks
become an assistant's `tool_calls`, `tool_result` blocks `role: "tool"` messages; `tools`
(`input_schema`) become function tools; `tool_choice` and `disable_parallel_tool_use` become
`tool_choice` and `parallel_tool_calls`. Everything else is then checked by the chat parser, so
the rules (clamped max_tokens, valid schemas, results that answer a call) are the same for both
APIs. Fields the lane has no use for (`thinking`, `metadata`, `stop_sequences`,
`context_management`, `output_config`, `cache_control`, a tool's `defer_loading`) are ignored,
and so is Claude Code's billing line in `system` (BILLING_LINE).
"""

from __future__ import annotations

import json
from typing import Any

from ..wire import bad_request, check_field_types, kind_of
from .chat_request import ChatRequest, chat_request_from

# Blocks an assistant turn may carry that the lane's models cannot read back: dropped, as a model
# without extended thinking would.
IGNORED_BLOCKS = frozenset({"thinking", "redacted_thinking"})
# Anthropic's tool_choice types and the chat-completions choice each one is.
_CHOICES = {"auto": "auto", "any": "required", "none": "none"}
# Claude Code opens `system` with a line for Anthropic's billing (`x-anthropic-billing-header:
# cc_version=…; cc_entrypoint=…; cch=…;`) whose hash changes on every request: left in, the model's
# prompt differs from the 20th token on and its 4k-token opening is evaluated again each time
# (75-95 s a request on the 1.5B model here). It means nothing to a model; llama.cpp, vLLM and
# SGLang drop it too. A line of this API's own metadata, not words of the conversation.
BILLING_LINE = "x-anthropic-billing-header:"


def parse_messages_request(data: dict[str, Any], *, max_tokens_cap: int, max_tools: int) -> ChatRequest:
    return chat_request_from(chat_body(data), max_tokens_cap=max_tokens_cap, max_tools=max_tools)


def chat_body(data: dict[str, Any]) -> dict[str, Any]:
    """The request as a chat-completions body; a shape that cannot be translated is a 400."""
    check_field_types(data)  # model, stream, max_tokens, temperature, tools, tool_choice: shared names
    messages, inner_system = _messages(data.get("messages"))
    system = "\n\n".join(text for text in [_system(data.get("system")), *inner_system] if text)
    body: dict[str, Any] = {
        "messages": [{"role": "system", "content": system}, *messages] if system else messages,
        "stream": data.get("stream", False),
        "max_tokens": data.get("max_tokens"),
        "temperature": data.get("temperature"),
    }
    tools = [_tool(tool, f"tools[{index}]") for index, tool in enumerate(data.get("tools") or [])]
    body["tools"] = [tool for tool in tools if tool is not None]
    choice = data.get("tool_choice")
    if choice is not None and body["tools"]:
        body["tool_choice"], parallel = _tool_choice(choice)
        if parallel is False:
            body["parallel_tool_calls"] = False
    return body


def _system(value: Any) -> str:
    if value is None:
        return ""
    lines = _text(value, "system").split("\n")
    return "\n".join(line for line in lines if not line.startswith(BILLING_LINE)).strip("\n")


def _text(value: Any, where: str) -> str:
    """A string, or a list of text blocks joined (their `cache_control` ignored)."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise bad_request(f"{where} must be a string or a list of text blocks, not {kind_of(value)}",
                          "invalid_messages")
    texts = []
    for index, block in enumerate(value):
        if not isinstance(block, dict) or block.get("type") != "text" or not isinstance(block.get("text"), str):
            raise bad_request(f'{where}[{index}] must be a text block {{"type": "text", "text": "..."}}; '
                              "the lane reads text only", "invalid_messages")
        texts.append(block["text"])
    return "\n".join(texts)


def _messages(value: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """(the conversation in chat shape, the texts of role=system entries found among it)."""
    if not isinstance(value, list) or not value:
        raise bad_request("messages must be a non-empty list", "invalid_messages")
    out: list[dict[str, Any]] = []
    system: list[str] = []
    for index, item in enumerate(value):
        where = f"messages[{index}]"
        if not isinstance(item, dict):
            raise bad_request(f"{where} must be an object, not {kind_of(item)}", "invalid_messages")
        role, content = item.get("role"), item.get("content")
        if role == "system":
            system.append(_text(content, f"{where}.content"))
        elif role not in ("user", "assistant"):
            raise bad_request(f"{where}.role must be user or assistant, not {role!r}", "invalid_messages")
        elif isinstance(content, str):
            out.append({"role": role, "content": content})
        elif isinstance(content, list):
            out.extend(_blocks(role, content, f"{where}.content"))
        else:
            raise bad_request(f"{where}.content must be a string or a list of blocks, not {kind_of(content)}",
                              "invalid_messages")
    return out, system


def _blocks(role: str, blocks: list[Any], where: str) -> list[dict[str, Any]]:
    """One message's blocks: an assistant's text and tool_use blocks are one message; a user's
    tool_result blocks are role=tool messages, followed by its text (when it has any)."""
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for index, block in enumerate(blocks):
        kind = block.get("type") if isinstance(block, dict) else None
        here = f"{where}[{index}]"
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "tool_use" and role == "assistant":
            calls.append(_call(block, here))
        elif kind == "tool_result" and role == "user":
            results.append(_result(block, here))
        elif kind not in IGNORED_BLOCKS:
            allowed = "text and tool_use" if role == "assistant" else "text and tool_result"
            raise bad_request(f"{here} is a {kind!r} block; a {role} message may carry {allowed} blocks "
                              "(the lane reads text only)", "invalid_messages")
    if role == "assistant":
        message: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) or (None if calls else "")}
        return [{**message, "tool_calls": calls}] if calls else [message]
    return [*results, {"role": "user", "content": "\n".join(texts)}] if texts or not results else results


def _call(block: dict[str, Any], where: str) -> dict[str, Any]:
    call_id, name, arguments = block.get("id"), block.get("name"), block.get("input", {})
    if not isinstance(call_id, str) or not isinstance(name, str) or not isinstance(arguments, dict):
        raise bad_request(f"{where} must be a tool_use block {{id, name, input: object}}", "invalid_messages")
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)}}


def _result(block: dict[str, Any], where: str) -> dict[str, Any]:
    call_id, content = block.get("tool_use_id"), block.get("content")
    if not isinstance(call_id, str) or not call_id:
        raise bad_request(f"{where}.tool_use_id must be a non-empty string", "invalid_messages")
    text = "" if content is None else _text(content, f"{where}.content")
    if block.get("is_error") is True:  # the chat shape has no such flag: the model reads it
        text = f"Error: {text}"
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def _tool(tool: Any, where: str) -> dict[str, Any] | None:
    """A client tool as a function tool; Anthropic's server tools (`web_search_…`, `bash_…`: a
    versioned `type`, no `input_schema`) are left out, as the lane cannot run them for the client."""
    if not isinstance(tool, dict):
        raise bad_request(f"{where} must be an object, not {kind_of(tool)}", "invalid_tools")
    if tool.get("type") not in (None, "custom"):
        return None
    return {"type": "function", "function": {"name": tool.get("name"), "description": tool.get("description"),
                                             "parameters": tool.get("input_schema")}}


def _tool_choice(value: Any) -> tuple[Any, bool | None]:
    """(the chat tool_choice, False when parallel tool use is disabled, else None)."""
    if not isinstance(value, dict):
        raise bad_request(f"tool_choice must be an object, not {kind_of(value)}", "invalid_tool_choice")
    kind = value.get("type")
    parallel = False if value.get("disable_parallel_tool_use") is True else None
    if kind in _CHOICES:
        return _CHOICES[kind], parallel
    if kind == "tool":
        return {"type": "function", "function": {"name": value.get("name")}}, parallel
    raise bad_request(f"tool_choice.type must be auto, any, tool or none, not {kind!r}", "invalid_tool_choice")
