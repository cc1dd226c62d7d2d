"""What the llm service reads from a chat request: the prompt, its cap and the sampling fields.

The body's shape (depth, field types, text content, the `max_tokens` clamp) is the wire module's,
shared with the shim; this module adds the fields only a generator has, with their ranges. The
generation cap is applied here, once, for every request: a missing, zero, negative or larger
`max_tokens` becomes the server's cap.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stack.wire import (
    bad_request,
    check_field_types,
    clamp_max_tokens,
    load_object,
    requested_max_tokens,
    text_content,
)

KNOWN_ROLES = ("system", "user", "assistant", "tool", "developer", "function")
MAX_STOP_STRINGS = 4
MAX_TOP_LOGPROBS = 20  # OpenAI's own limit


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
    # OpenAI's `logprobs` / `top_logprobs`: None when not asked for, else how many alternatives
    # each generated token reports (0: only the chosen token's own log-probability).
    top_logprobs: int | None = None
    # OpenAI's `response_format`: the JSON schema the reply must match (`json_object`: any object),
    # decoded under a grammar; None leaves the reply free.
    response_schema: dict[str, Any] | None = None


def parse_chat_request(raw: bytes, cap: int) -> ChatRequest:
    """Validate an OpenAI chat request and clamp its `max_tokens` to `cap`; ApiError when bad."""
    body = load_object(raw)
    check_field_types(body)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad_request("'messages' must be a non-empty list", "invalid_messages")
    messages = [_text_message(index, message) for index, message in enumerate(messages)]
    requested = requested_max_tokens(body)
    stream = bool(body.get("stream"))
    options = body.get("stream_options") or {}
    tools = body.get("tools")
    return ChatRequest(
        messages=messages,
        max_tokens=clamp_max_tokens(requested, cap),
        requested_max_tokens=requested,
        stream=stream,
        include_usage=stream and _optional_bool(options, "include_usage", False),
        tools=tools or None,
        tool_choice=body.get("tool_choice") if tools else None,
        temperature=_number(body, "temperature", 0.7, low=0.0, high=2.0),
        top_p=_number(body, "top_p", 0.95, low=0.0, high=1.0),
        top_k=int(_number(body, "top_k", 40, low=0, high=1_000_000)),
        min_p=_number(body, "min_p", 0.05, low=0.0, high=1.0),
        repeat_penalty=_number(body, "repeat_penalty", 1.0, low=0.0, high=10.0),
        presence_penalty=_number(body, "presence_penalty", 0.0, low=-2.0, high=2.0),
        frequency_penalty=_number(body, "frequency_penalty", 0.0, low=-2.0, high=2.0),
        seed=body.get("seed"),
        stop=_stop_strings(body.get("stop")),
        top_logprobs=_top_logprobs(body),
        response_schema=_response_schema(body.get("response_format")),
    )


def _text_message(index: int, message: Any) -> dict[str, Any]:
    """Chat templates concatenate `content` as a string: text parts are joined, null becomes ""."""
    if not isinstance(message, dict) or message.get("role") not in KNOWN_ROLES:
        raise bad_request(f"messages[{index}] needs a 'role' among {', '.join(KNOWN_ROLES)}")
    content = text_content(message.get("content"), f"messages[{index}].content")
    return {**message, "content": content or ""}


def _number(body: dict[str, Any], key: str, default: float, *, low: float, high: float) -> float:
    """A sampling field within its range (its type is checked with the others)."""
    value = body.get(key)
    if value is None:
        return default
    if not low <= value <= high:
        raise bad_request(f"'{key}' must be between {low} and {high}", "invalid_value")
    return float(value)


def _optional_bool(body: dict[str, Any], key: str, default: bool) -> bool:
    value = body.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise bad_request(f"'{key}' must be true or false", "invalid_type")
    return value


def _top_logprobs(body: dict[str, Any]) -> int | None:
    if not _optional_bool(body, "logprobs", False):
        return None
    count = body.get("top_logprobs") or 0
    if not 0 <= count <= MAX_TOP_LOGPROBS:
        raise bad_request(f"'top_logprobs' must be between 0 and {MAX_TOP_LOGPROBS}", "invalid_value")
    return int(count)


def _response_schema(value: Any) -> dict[str, Any] | None:
    """The schema of OpenAI's `response_format` (`text` and absent: None)."""
    if value is None:
        return None
    kind = value.get("type") if isinstance(value, dict) else None
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "object"}
    schema = (value.get("json_schema") or {}).get("schema") if kind == "json_schema" else None
    if not isinstance(schema, dict):
        raise bad_request("'response_format' must be {\"type\": \"text\"|\"json_object\"} or "
                          "{\"type\": \"json_schema\", \"json_schema\": {\"schema\": {...}}}",
                          "invalid_value")
    return schema


def _stop_strings(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if len(items) > MAX_STOP_STRINGS:
        raise bad_request(f"'stop' takes at most {MAX_STOP_STRINGS} strings")
    return tuple(s for s in items if s)


MAX_EMBEDDING_INPUT_CHARS = 64_000


def parse_embedding_request(raw: bytes) -> str:
    """The one text of an OpenAI embeddings request (`input`: a string, or a list of one string);
    ApiError when bad. One text a request: each is a full prompt evaluation on the one model."""
    body = load_object(raw)
    value = body.get("input")
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if not isinstance(value, str) or not value:
        raise bad_request("'input' must be one non-empty string", "invalid_input")
    if len(value) > MAX_EMBEDDING_INPUT_CHARS:
        raise bad_request(f"'input' is longer than {MAX_EMBEDDING_INPUT_CHARS} characters", "invalid_input")
    if body.get("encoding_format") not in (None, "float"):
        raise bad_request("'encoding_format' must be \"float\"", "invalid_value")
    return value
