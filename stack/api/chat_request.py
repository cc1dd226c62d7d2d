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
from itertools import accumulate
from typing import Any, Mapping

from ..toolsearch.surface import PROFILES, Profile
from .errors import bad_request

ROLES = ("system", "user", "assistant", "tool")
SESSION_HEADERS = ("x-session-id", "x-hermes-session-id")
_SESSION_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")

# Deeper than any real request (a tool schema inside a message part is about 10 levels).
MAX_JSON_DEPTH = 64
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = bytes(sorted(set(range(256)) - set(b"[]{}")))
_BRACKET_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}

_NUMBER = ((int, float), "a number")
_INTEGER = ((int,), "an integer")
_OBJECT = ((dict,), "an object")
# The request fields the lane knows, with the JSON type a client must send: a wrong type is a 400
# even for a field the lane ignores (tools, stop, ...), so that a client's bug shows at once.
_FIELD_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "model": ((str,), "a string"),
    "stream": ((bool,), "a boolean"),
    "temperature": _NUMBER,
    "top_p": _NUMBER,
    "presence_penalty": _NUMBER,
    "frequency_penalty": _NUMBER,
    "max_tokens": _INTEGER,
    "max_completion_tokens": _INTEGER,
    "n": _INTEGER,
    "seed": _INTEGER,
    "top_logprobs": _INTEGER,
    "logprobs": ((bool,), "a boolean"),
    "parallel_tool_calls": ((bool,), "a boolean"),
    "stream_options": _OBJECT,
    "response_format": _OBJECT,
    "logit_bias": _OBJECT,
    "metadata": _OBJECT,
    "tools": ((list,), "a list"),
    "tool_choice": ((str, dict), "a string or an object"),
    "stop": ((str, list), "a string or a list of strings"),
    "user": ((str,), "a string"),
}
_ELEMENT_TYPES: dict[str, tuple[type, str]] = {"tools": (dict, "an object"), "stop": (str, "a string")}


@dataclass(frozen=True)
class ChatRequest:
    messages: list[dict[str, Any]]  # normalised: content is str or None
    stream: bool
    max_tokens: int  # already clamped to the lane's cap
    temperature: float | None


def parse_chat_request(body: bytes, *, max_tokens_cap: int) -> ChatRequest:
    data = _json_object(body)
    _check_types(data)
    temperature = data.get("temperature")
    if temperature is not None and not 0 <= temperature <= 2:
        raise bad_request("temperature must be between 0 and 2", "invalid_value")
    if data.get("n") not in (None, 1):
        raise bad_request("n must be 1: the lane answers with one choice", "invalid_value")
    requested = data.get("max_tokens")
    return ChatRequest(
        messages=_messages(data.get("messages")),
        stream=bool(data.get("stream")),
        max_tokens=clamp_max_tokens(
            requested if requested is not None else data.get("max_completion_tokens"),
            max_tokens_cap),
        temperature=float(temperature) if temperature is not None else None,
    )


def json_depth(body: bytes) -> int:
    """How deeply `body` nests arrays and objects, found without parsing it: strings are cut out,
    then the brackets left are counted. A few C-speed passes over at most the body limit, where
    json.loads on a deep body would recurse until RecursionError."""
    brackets = _JSON_STRING.sub(b"", body).translate(None, _NOT_BRACKET)
    return max(accumulate(map(_BRACKET_STEP.__getitem__, brackets)), default=0)


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


def _json_object(body: bytes) -> dict[str, Any]:
    if json_depth(body) > MAX_JSON_DEPTH:
        raise bad_request(f"request body nests JSON deeper than {MAX_JSON_DEPTH} levels",
                          "invalid_json")
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        # RecursionError: a body in UTF-16 or -32 (which json.loads also reads) that the byte
        # scan above could not measure.
        raise bad_request(f"request body is not valid JSON: {exc}", "invalid_json") from exc
    if not isinstance(data, dict):
        raise bad_request(f"request body must be a JSON object, not {_kind(data)}",
                          "invalid_json")
    return data


def _check_types(data: dict[str, Any]) -> None:
    for key, (types, kind) in _FIELD_TYPES.items():
        value = data.get(key)
        if value is None:
            continue
        # bool is an int in Python, but JSON true is not a number of tokens.
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise bad_request(f"{key} must be {kind}, not {_kind(value)}", "invalid_type")
        element = _ELEMENT_TYPES.get(key)
        if element is not None and isinstance(value, list):
            for index, item in enumerate(value):
                if not isinstance(item, element[0]):
                    raise bad_request(f"{key}[{index}] must be {element[1]}, not {_kind(item)}",
                                      "invalid_type")


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
