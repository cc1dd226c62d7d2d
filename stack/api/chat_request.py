"""Parsing and validating a chat-completion request into what the agent needs.

Validation is hand-written rather than a pydantic model so that each mistake gets one precise
message naming the field (`messages[2].role`), and so the rules stay the documented ones: unknown
keys are ignored (clients send many), wrong types are refused, `max_tokens` is clamped, never
refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

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

ROLES = ("system", "user", "assistant", "tool")
SESSION_HEADERS = ("x-session-id", "x-hermes-session-id")
_SESSION_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")

@dataclass(frozen=True)
class ChatRequest:
    messages: list[dict[str, Any]]  # normalised: content is str or None
    stream: bool
    max_tokens: int  # already clamped to the lane's cap
    temperature: float | None


def parse_chat_request(body: bytes, *, max_tokens_cap: int) -> ChatRequest:
    data = load_object(body)
    check_field_types(data)
    temperature = data.get("temperature")
    if temperature is not None and not 0 <= temperature <= 2:
        raise bad_request("temperature must be between 0 and 2", "invalid_value")
    if data.get("n") not in (None, 1):
        raise bad_request("n must be 1: the lane answers with one choice", "invalid_value")
    return ChatRequest(
        messages=_messages(data.get("messages")),
        stream=bool(data.get("stream")),
        max_tokens=clamp_max_tokens(requested_max_tokens(data), max_tokens_cap),
        temperature=float(temperature) if temperature is not None else None,
    )


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
    message: dict[str, Any] = {"role": role}
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
