"""Parsing and validating a chat-completion request into what the agent needs.

Validation is hand-written rather than a pydantic model so that each mistake gets one precise
message naming the field (`messages[2].role`), and so the rules stay the documented ones: unknown
keys are ignored (clients send many), wrong types are refused, `max_tokens` is clamped, never
refused.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Mapping

from .errors import bad_request

ROLES = ("system", "user", "assistant", "tool")
PROFILES = ("search", "full")
SESSION_HEADERS = ("x-session-id", "x-hermes-session-id")
_SESSION_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


@dataclass(frozen=True)
class ChatRequest:
    messages: list[dict[str, Any]]  # normalised: content is str or None
    stream: bool
    max_tokens: int  # already clamped to the lane's cap
    temperature: float | None


def parse_chat_request(body: bytes, *, max_tokens_cap: int) -> ChatRequest:
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, ValueError) as exc:
        raise bad_request(f"request body is not valid JSON: {exc}", "invalid_json") from exc
    if not isinstance(data, dict):
        raise bad_request(f"request body must be a JSON object, not {_kind(data)}",
                          "invalid_json")
    if "model" in data and data["model"] is not None and not isinstance(data["model"], str):
        raise bad_request("model must be a string", "invalid_type")
    stream = _optional(data, "stream", bool, "a boolean")
    temperature = _optional(data, "temperature", (int, float), "a number")
    if temperature is not None and not 0 <= temperature <= 2:
        raise bad_request("temperature must be between 0 and 2", "invalid_value")
    requested = _optional(data, "max_tokens", int, "an integer")
    newer = _optional(data, "max_completion_tokens", int, "an integer")
    n = _optional(data, "n", int, "an integer")
    if n is not None and n != 1:
        raise bad_request("n must be 1: the lane answers with one choice", "invalid_value")
    if "stream_options" in data and data["stream_options"] is not None \
            and not isinstance(data["stream_options"], dict):
        raise bad_request("stream_options must be an object", "invalid_type")
    return ChatRequest(
        messages=_messages(data.get("messages")),
        stream=bool(stream),
        max_tokens=clamp_max_tokens(requested if requested is not None else newer,
                                    max_tokens_cap),
        temperature=float(temperature) if temperature is not None else None,
    )


def clamp_max_tokens(requested: int | None, cap: int) -> int:
    """The cap clamps, it never rejects: missing, non-positive or too large becomes the cap."""
    if requested is None or requested <= 0:
        return cap
    return min(requested, cap)


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


def profile_from(headers: Mapping[str, str]) -> str:
    value = headers.get("x-lane-tools")
    if value is None:
        return "search"
    profile = value.strip().lower()
    if profile not in PROFILES:
        raise bad_request(f"X-Lane-Tools must be 'search' or 'full', not {value!r}",
                          "invalid_header")
    return profile


def last_user_message(messages: list[dict[str, Any]]) -> dict[str, Any]:
    for message in reversed(messages):
        if message["role"] == "user":
            return message
    raise bad_request("messages must contain a user message", "invalid_messages")


def _optional(data: dict[str, Any], key: str, types: type | tuple[type, ...], kind: str) -> Any:
    value = data.get(key)
    if value is None:
        return None
    # bool is an int in Python, but JSON true is not a number of tokens.
    if isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
        raise bad_request(f"{key} must be {kind}, not a boolean", "invalid_type")
    if not isinstance(value, types):
        raise bad_request(f"{key} must be {kind}, not {_kind(value)}", "invalid_type")
    return value


def _messages(value: Any) -> list[dict[str, Any]]:
    if value is None:
        raise bad_request("messages is required", "invalid_messages")
    if not isinstance(value, list):
        raise bad_request(f"messages must be a list, not {_kind(value)}", "invalid_messages")
    if not value:
        raise bad_request("messages must not be empty", "invalid_messages")
    messages = [_message(item, f"messages[{index}]") for index, item in enumerate(value)]
    last_user_message(messages)
    return messages


def _message(item: Any, where: str) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise bad_request(f"{where} must be an object, not {_kind(item)}", "invalid_messages")
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
    content = _content(item.get("content"), f"{where}.content")
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


def _content(value: Any, where: str) -> str | None:
    """A string, or OpenAI's list of text parts joined into one; other part types are refused
    because the lane's models read text only."""
    if value is None or isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise bad_request(f"{where} must be a string or a list of text parts, not "
                          f"{_kind(value)}", "invalid_messages")
    texts = []
    for index, part in enumerate(value):
        if not isinstance(part, dict) or part.get("type") != "text" \
                or not isinstance(part.get("text"), str):
            raise bad_request(f"{where}[{index}] must be a text part "
                              '{"type": "text", "text": "..."}; the lane reads text only',
                              "invalid_messages")
        texts.append(part["text"])
    return "\n".join(texts)


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


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            type(None): "null", int: "a number", float: "a number"}.get(type(value), "a value")
