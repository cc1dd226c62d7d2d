"""Parsing and validating a chat-completion request into what the agent needs.

Validation is hand-written rather than a pydantic model so that each mistake gets one precise
message naming the field (`messages[2].role`), and so the rules stay the documented ones: unknown
keys are ignored (clients send many), wrong types are refused, `max_tokens` is clamped, never
refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Mapping

from ..agent.client_history import unanswerable_results
from ..agent.proxy_request import ProxyRequest, ToolChoice
from ..tools.validation import outside_reference, schema_problem
from ..toolsearch.surface import PROFILES, Profile
from ..wire import (
    bad_request,
    check_field_types,
    clamp_max_tokens,
    kind_of,
    load_object,
    requested_max_tokens,
    text_content,
)

ROLES = ("system", "developer", "user", "assistant", "tool")
# OpenAI's newer name for the system role ("developer-provided instructions that the model should
# follow"); the lane's models know only `system`.
ROLE_ALIASES = {"developer": "system"}
SESSION_HEADERS = ("x-session-id", "x-hermes-session-id")
_SESSION_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
# OpenAI allows a-z, A-Z, 0-9, _ and - (64 at most); dots and colons are accepted too (MCP-style
# and BFCL-style names such as `math.factorial`).
_TOOL_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
CHOICES = ("auto", "none", "required")

@dataclass(frozen=True)
class ChatRequest:
    messages: list[dict[str, Any]]  # normalised: content is str or None
    stream: bool
    max_tokens: int  # already clamped to the lane's cap
    temperature: float | None
    # A request that carries `tools`: proxy mode (the client owns the tools); None otherwise.
    proxy: ProxyRequest | None = None


def parse_chat_request(body: bytes, *, max_tokens_cap: int, max_tools: int = 4096) -> ChatRequest:
    return chat_request_from(load_object(body), max_tokens_cap=max_tokens_cap, max_tools=max_tools)


def chat_request_from(data: dict[str, Any], *, max_tokens_cap: int, max_tools: int = 4096) -> ChatRequest:
    """A chat-completions body, already a JSON object, checked into the one internal turn request:
    the other wire formats (Anthropic Messages, OpenAI Responses) translate into this shape and
    come here, so every API is held to the same rules."""
    check_field_types(data)
    temperature = data.get("temperature")
    if temperature is not None and not 0 <= temperature <= 2:
        raise bad_request("temperature must be between 0 and 2", "invalid_value")
    if data.get("n") not in (None, 1):
        raise bad_request("n must be 1: the lane answers with one choice", "invalid_value")
    messages = _messages(data.get("messages"))
    max_tokens = clamp_max_tokens(requested_max_tokens(data), max_tokens_cap)
    chat = ChatRequest(messages, bool(data.get("stream")), max_tokens,
                       float(temperature) if temperature is not None else None)
    tools = _client_tools(data.get("tools") or [], max_tools)
    choice = _tool_choice(data.get("tool_choice"), tools)
    if not tools:
        return chat
    stray = unanswerable_results(messages)
    if stray:
        raise bad_request(f"a role=tool message answers tool_call_id {stray[0]!r}, which no earlier "
                          "assistant message in messages called", "invalid_messages")
    parallel = data.get("parallel_tool_calls")
    return replace(chat, proxy=ProxyRequest(messages, tools, choice, parallel is not False,
                                            max_tokens, chat.temperature))


def _client_tools(value: list[Any], limit: int) -> list[dict[str, Any]]:
    """The client's tool definitions, checked once here: each a function with a unique name and a
    valid object schema. A missing `parameters` is repaired to an empty object schema (OpenAI
    allows it), a missing description to ""."""
    if len(value) > limit:
        raise bad_request(f"tools has {len(value)} entries; the lane takes at most {limit}",
                          "too_many_tools")
    tools: list[dict[str, Any]] = []
    seen: set[str] = set()
    for index, item in enumerate(value):
        where = f"tools[{index}]"
        function = item.get("function")
        if item.get("type", "function") != "function" or not isinstance(function, dict):
            raise bad_request(f'{where} must be {{"type": "function", "function": {{name, '
                              'description, parameters}}}}', "invalid_tools")
        name = function.get("name")
        if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
            raise bad_request(f"{where}.function.name must be 1-64 characters of A-Z a-z 0-9 _ - . :, "
                              f"not {name!r}", "invalid_tools")
        if name in seen:
            raise bad_request(f"{where}: two tools are named {name!r}; tool names must be unique",
                              "invalid_tools")
        seen.add(name)
        description = function.get("description")
        if description is not None and not isinstance(description, str):
            raise bad_request(f"{where}.function.description must be a string", "invalid_tools")
        tools.append({"type": "function", "function": {
            "name": name, "description": description or "",
            "parameters": _parameters(function.get("parameters"), f"{where}.function.parameters",
                                      name)}})
    return tools


def _parameters(value: Any, where: str, name: str) -> dict[str, Any]:
    if value is None:
        return {"type": "object", "properties": {}}
    if not isinstance(value, dict):
        raise bad_request(f"{where} must be a JSON schema object, not {kind_of(value)}", "invalid_tools")
    outside = outside_reference(value)
    if outside:  # refused here, before anything runs: validation would never fetch it anyway
        raise bad_request(f"{where} of tool {name!r} refers outside its schema at {outside}; only "
                          "local references (#/...) are allowed", "invalid_tools")
    if value.get("type", "object") != "object":
        raise bad_request(f"{where} must describe an object (type: object), not {value.get('type')!r}",
                          "invalid_tools")
    problem = schema_problem(value)
    if problem:
        raise bad_request(f"{where} is not a valid JSON schema {problem}", "invalid_tools")
    return {"type": "object", **value}


def _tool_choice(value: Any, tools: list[dict[str, Any]]) -> ToolChoice:
    """`auto`, `none`, `required` or {"type": "function", "function": {"name"}} naming a tool."""
    names = {t["function"]["name"] for t in tools}
    if value is None or value == "auto":
        return ToolChoice()
    if isinstance(value, str):
        if value not in CHOICES:
            raise bad_request(f"tool_choice must be auto, none, required or a function, not {value!r}",
                              "invalid_tool_choice")
        if value == "required" and not tools:
            raise bad_request("tool_choice is required, but the request has no tools", "invalid_tool_choice")
        return ToolChoice("none") if value == "none" else ToolChoice("required")
    function = value.get("function")
    name = function.get("name") if isinstance(function, dict) else None
    if value.get("type", "function") != "function" or not isinstance(name, str):
        raise bad_request('tool_choice must be {"type": "function", "function": {"name": ...}}',
                          "invalid_tool_choice")
    if name not in names:
        raise bad_request(f"tool_choice names {name!r}, which is not among the request's tools",
                          "invalid_tool_choice")
    return ToolChoice("function", name)


def session_id_from(headers: Mapping[str, str]) -> str | None:
    """The session id from X-Session-Id or its alias X-Hermes-Session-Id; None when neither."""
    given = {name: headers[name] for name in SESSION_HEADERS if name in headers}
    if len(set(given.values())) > 1:
        raise bad_request("X-Session-Id and X-Hermes-Session-Id disagree; send one",
                          "invalid_session_id")
    if not given:
        return None
    return check_session_id(next(iter(given.values())))


def check_session_id(value: str) -> str:
    if not _SESSION_ID.fullmatch(value):
        raise bad_request("session id must be 1-128 characters of A-Z a-z 0-9 . _ : -",
                          "invalid_session_id")
    return value


def profile_from(headers: Mapping[str, str]) -> Profile:
    value = headers.get("x-lane-tools")
    if value is None:
        return "search"
    for profile in PROFILES:
        if value.strip().lower() == profile:
            return profile
    raise bad_request(f"X-Lane-Tools must be 'search' or 'full', not {value!r}", "invalid_header")


def last_user_message(messages: list[dict[str, Any]]) -> dict[str, Any]:
    for message in reversed(messages):
        if message["role"] == "user":
            return message
    raise bad_request("messages must contain a user message", "invalid_messages")


def _messages(value: Any) -> list[dict[str, Any]]:
    if value is None:
        raise bad_request("messages is required", "invalid_messages")
    if not isinstance(value, list):
        raise bad_request(f"messages must be a list, not {kind_of(value)}", "invalid_messages")
    if not value:
        raise bad_request("messages must not be empty", "invalid_messages")
    messages = [_message(item, f"messages[{index}]") for index, item in enumerate(value)]
    last_user_message(messages)
    return messages


def _message(item: Any, where: str) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise bad_request(f"{where} must be an object, not {kind_of(item)}", "invalid_messages")
    role = item.get("role")
    if not isinstance(role, str) or role not in ROLES:
        raise bad_request(f"{where}.role must be one of {', '.join(ROLES)}, not {role!r}",
                          "invalid_messages")
    message: dict[str, Any] = {"role": ROLE_ALIASES.get(role, role)}
    tool_calls = item.get("tool_calls")
    if tool_calls is not None:
        if role != "assistant":
            raise bad_request(f"{where}.tool_calls is only allowed on assistant messages",
                              "invalid_messages")
        message["tool_calls"] = _tool_calls(tool_calls, f"{where}.tool_calls")
    if "content" not in item and not tool_calls:
        raise bad_request(f"{where}.content is required", "invalid_messages")
    content = text_content(item.get("content"), f"{where}.content")
    if content is None and not tool_calls:
        raise bad_request(f"{where}.content may only be null on an assistant message with "
                          "tool_calls", "invalid_messages")
    message["content"] = content
    if role == "tool":
        tool_call_id = item.get("tool_call_id")
        if not isinstance(tool_call_id, str) or not tool_call_id:
            raise bad_request(f"{where}.tool_call_id must be a non-empty string",
                              "invalid_messages")
        message["tool_call_id"] = tool_call_id
    name = item.get("name")
    if name is not None:
        if not isinstance(name, str):
            raise bad_request(f"{where}.name must be a string", "invalid_messages")
        message["name"] = name
    return message


def _tool_calls(value: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise bad_request(f"{where} must be a list", "invalid_messages")
    calls = []
    for index, call in enumerate(value):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str) \
                or not isinstance(function.get("arguments", ""), str):
            raise bad_request(f"{where}[{index}] must be {{id, type: function, function: "
                              "{name, arguments: string}}", "invalid_messages")
        calls.append({
            "id": str(call.get("id") or f"call_{index}"),
            "type": "function",
            "function": {"name": function["name"], "arguments": function.get("arguments", "")},
        })
    return calls
