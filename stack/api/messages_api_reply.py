"""A turn's reply in Anthropic's Messages shape, whole or as Anthropic's stream of events, and
errors in Anthropic's shape.

The turn is the one every API gets (api/turns.py); this module only writes it: text and
`tool_use` blocks, `stop_reason` (`end_turn`, `tool_use`, `max_tokens`), usage with
`input_tokens` counted apart from `cache_read_input_tokens` as Anthropic counts them, and the
event sequence `message_start`, `ping` (also the keep-alive while the turn runs),
`content_block_start` / `content_block_delta` (`text_delta`, `input_json_delta`) /
`content_block_stop` per block, `message_delta` with the stop reason and usage, `message_stop`.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from ..wire import ApiError
from .responses import MODEL_ID, finish_reason_of, usage_of

_STOP_REASONS = {"tool_calls": "tool_use", "length": "max_tokens"}
# Anthropic's error types by HTTP status (its API documents these pairs).
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
               500: "api_error", 502: "api_error", 503: "overloaded_error", 504: "timeout_error",
               529: "overloaded_error"}


def error_body(status: int, message: str) -> dict[str, Any]:
    """`{"type": "error", "error": {"type", "message"}}`; a 4xx Anthropic does not name is an
    invalid request."""
    kind = ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


def event(name: str, payload: dict[str, Any]) -> str:
    return f"event: {name}\ndata: {json.dumps(payload, ensure_ascii=False)}\n\n"


def blocks(result: Any) -> list[dict[str, Any]]:
    """The reply's content: the calls for the client as tool_use blocks, or the answer as text."""
    calls = getattr(result, "tool_calls", None) or []
    if not calls:
        return [{"type": "text", "text": result.content or ""}]
    return [{"type": "tool_use", "id": call["id"], "name": call["function"]["name"],
             "input": _input(call["function"]["arguments"])} for call in calls]


def usage(result: Any) -> dict[str, Any]:
    """Anthropic's usage: `input_tokens` are the prompt tokens not read from the cache; the lane's
    own accounting (model calls, tools run) rides along under `lane` as in chat completions."""
    return {"input_tokens": result.prompt_tokens - result.cached_tokens,
            "output_tokens": result.completion_tokens,
            "cache_read_input_tokens": result.cached_tokens,
            "cache_creation_input_tokens": 0,
            "lane": usage_of(result)["lane"]}


def stop_reason(result: Any) -> str:
    return _STOP_REASONS.get(finish_reason_of(result), "end_turn")


@dataclass(frozen=True)
class MessagesFormat:
    """Anthropic Messages as a turn's reply (api/turns.py's ReplyFormat)."""

    id: str

    @classmethod
    def new(cls) -> "MessagesFormat":
        return cls(f"msg_{uuid.uuid4().hex[:24]}")

    def _message(self, content: list[dict[str, Any]], reason: str | None,
                 usage_block: dict[str, Any]) -> dict[str, Any]:
        return {"id": self.id, "type": "message", "role": "assistant", "model": MODEL_ID, "content": content,
                "stop_reason": reason, "stop_sequence": None, "usage": usage_block}

    def body(self, result: Any) -> dict[str, Any]:
        return self._message(blocks(result), stop_reason(result), usage(result))

    def opening(self) -> list[str]:
        empty = {"input_tokens": 0, "output_tokens": 0, "cache_read_input_tokens": 0,
                 "cache_creation_input_tokens": 0}
        return [event("message_start", {"type": "message_start", "message": self._message([], None, empty)})]

    def keepalive(self) -> str:
        return event("ping", {"type": "ping"})

    def closing(self, result: Any) -> list[str]:
        events = []
        for index, block in enumerate(blocks(result)):
            if block["type"] == "text":
                start, delta = {**block, "text": ""}, {"type": "text_delta", "text": block["text"]}
            else:
                start = {**block, "input": {}}
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"], ensure_ascii=False)}
            events += [
                event("content_block_start", {"type": "content_block_start", "index": index, "content_block": start}),
                event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}),
                event("content_block_stop", {"type": "content_block_stop", "index": index}),
            ]
        return [*events,
                event("message_delta", {"type": "message_delta", "usage": usage(result),
                                        "delta": {"stop_reason": stop_reason(result), "stop_sequence": None}}),
                event("message_stop", {"type": "message_stop"})]

    def failure(self, error: ApiError) -> list[str]:
        return [event("error", error_body(error.status, error.message))]


def _input(arguments: str) -> dict[str, Any]:
    """A returned call's arguments (JSON text, validated against the client's schema) as the
    object Anthropic's `input` is."""
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
