"""OpenAI chat-completions wire format: parse a request into a `ChatRequest`, shape responses.

The generation cap is applied here, once, for every request: a missing, zero, negative or larger
`max_tokens` becomes the server's cap. Clients get a clamp, never a rejection, because gateways
routinely send huge or absent values.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

KNOWN_ROLES = ("system", "user", "assistant", "tool", "developer", "function")
MAX_STOP_STRINGS = 4


class BadRequest(ValueError):
    """The request cannot be served; the message is shown to the client with a 400."""


@dataclass(frozen=True)
class ChatRequest:
    messages: list[dict[str, Any]]
    max_tokens: int
    requested_max_tokens: int | None
    stream: bool = False
    include_usage: bool = False
    tools: list[dict[str, Any]] | None = None
    tool_choice: Any = None
    temperature: float = 0.7
    top_p: float = 0.95
    top_k: int = 40
    min_p: float = 0.05
    repeat_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    seed: int | None = None
    stop: tuple[str, ...] = field(default_factory=tuple)


def parse_chat_request(body: Any, cap: int) -> ChatRequest:
    """Validate an OpenAI chat request and clamp its `max_tokens` to `cap`."""
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list")
    messages = [_text_message(index, message) for index, message in enumerate(messages)]
    requested = _optional_int(body, "max_completion_tokens")
    if requested is None:
        requested = _optional_int(body, "max_tokens")
    stream = _optional_bool(body, "stream", False)
    options = body.get("stream_options")
    options = {} if options is None else options
    if not isinstance(options, dict):
        raise BadRequest("'stream_options' must be an object")
    tools = body.get("tools")
    if tools is not None and not (isinstance(tools, list) and all(isinstance(t, dict) for t in tools)):
        raise BadRequest("'tools' must be a list of tool objects")
    return ChatRequest(
        messages=messages,
        max_tokens=clamp_max_tokens(requested, cap),
        requested_max_tokens=requested,
        stream=stream,
        include_usage=stream and _optional_bool(options, "include_usage", False),
        tools=tools or None,
        tool_choice=body.get("tool_choice") if tools else None,
        temperature=_optional_float(body, "temperature", 0.7, low=0.0, high=2.0),
        top_p=_optional_float(body, "top_p", 0.95, low=0.0, high=1.0),
        top_k=_default(_optional_int(body, "top_k"), 40),
        min_p=_optional_float(body, "min_p", 0.05, low=0.0, high=1.0),
        repeat_penalty=_optional_float(body, "repeat_penalty", 1.0, low=0.0, high=10.0),
        presence_penalty=_optional_float(body, "presence_penalty", 0.0, low=-2.0, high=2.0),
        frequency_penalty=_optional_float(body, "frequency_penalty", 0.0, low=-2.0, high=2.0),
        seed=_optional_int(body, "seed"),
        stop=_stop_strings(body.get("stop")),
    )


def _text_message(index: int, message: Any) -> dict[str, Any]:
    """Chat templates concatenate `content` as a string: text parts are joined, null becomes ""."""
    if not isinstance(message, dict) or message.get("role") not in KNOWN_ROLES:
        raise BadRequest(f"messages[{index}] needs a 'role' among {', '.join(KNOWN_ROLES)}")
    content = message.get("content")
    if content is None:
        return {**message, "content": ""}
    if isinstance(content, str):
        return message
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in content):
        return {**message, "content": "".join(str(p.get("text", "")) for p in content)}
    raise BadRequest(f"messages[{index}].content must be a string or a list of text parts")


def clamp_max_tokens(requested: int | None, cap: int) -> int:
    """The hard cap: absent, non-positive or too large requests all get exactly `cap`."""
    if requested is None or requested <= 0 or requested > cap:
        return cap
    return requested


def _optional_int(body: dict[str, Any], key: str) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise BadRequest(f"'{key}' must be an integer")
    return int(value)


def _default(value: int | None, default: int) -> int:
    return default if value is None else value


def _optional_float(body: dict[str, Any], key: str, default: float, *, low: float, high: float) -> float:
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadRequest(f"'{key}' must be a number")
    if not low <= value <= high:
        raise BadRequest(f"'{key}' must be between {low} and {high}")
    return float(value)


def _optional_bool(body: dict[str, Any], key: str, default: bool) -> bool:
    value = body.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise BadRequest(f"'{key}' must be true or false")
    return value


def _stop_strings(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(s, str) for s in items):
        raise BadRequest("'stop' must be a string or a list of strings")
    if len(items) > MAX_STOP_STRINGS:
        raise BadRequest(f"'stop' takes at most {MAX_STOP_STRINGS} strings")
    return tuple(s for s in items if s)


def new_completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex[:24]}"


def usage(prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> dict[str, Any]:
    """OpenAI's usage block; `cached_tokens` are prompt tokens served from the KV cache."""
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens},
    }


def completion_body(
    completion_id: str, model: str, content: str, finish_reason: str, usage_block: dict[str, Any]
) -> dict[str, Any]:
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish_reason,
            }
        ],
        "usage": usage_block,
    }


def chunk_body(
    completion_id: str, model: str, delta: dict[str, Any] | None, finish_reason: str | None = None,
    *, usage_block: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One streaming chunk; with `usage_block` it is the final usage chunk (no choices)."""
    chunk: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }
    if usage_block is not None:
        chunk["usage"] = usage_block
    return chunk


def error_body(message: str, code: str, error_type: str = "invalid_request_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type, "code": code}}
