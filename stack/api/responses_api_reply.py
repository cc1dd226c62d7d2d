"""A turn's reply as an OpenAI Responses object, whole or as the Responses stream of events.

The turn is the one every API gets (api/turns.py); this module only writes it: the output is a
`message` item with the answer as `output_text`, or one `function_call` item per call for the
client; `status` is `completed`, or `incomplete` when the answer was cut at the length limit. The
stream is `response.created`, `response.in_progress`, then per item `response.output_item.added`,
its text (`response.content_part.added`, `response.output_text.delta` / `.done`,
`response.content_part.done`) or its arguments (`response.function_call_arguments.delta` /
`.done`), `response.output_item.done`, and last `response.completed`; every event numbered by
`sequence_number`. A failure after the stream began is `response.failed` and an `error` event (whose `error`
object makes the OpenAI SDK raise).
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from ..wire import SSE_KEEPALIVE, ApiError
from .responses import MODEL_ID, finish_reason_of, usage_of


def new_response_id() -> str:
    return f"resp_{uuid.uuid4().hex}"


def as_chat_message(result: Any) -> dict[str, Any]:
    """The reply as the chat-shaped assistant message a stored conversation holds."""
    calls = getattr(result, "tool_calls", None) or []
    if calls:
        return {"role": "assistant", "content": None, "tool_calls": calls}
    return {"role": "assistant", "content": result.content or ""}


@dataclass
class ResponsesFormat:
    """OpenAI Responses as a turn's reply (api/turns.py's ReplyFormat); one per request."""

    id: str
    echo: dict[str, Any]  # the request's settings, repeated in the response object
    created_at: int = field(default_factory=lambda: int(time.time()))
    _sequence: int = 0

    def _response(self, status: str, output: list[dict[str, Any]], usage: dict[str, Any] | None,
                  **more: Any) -> dict[str, Any]:
        return {"id": self.id, "object": "response", "created_at": self.created_at, "status": status,
                "model": MODEL_ID, "output": output, "usage": usage, "error": None, "incomplete_details": None,
                "text": {"format": {"type": "text"}}, "truncation": "disabled",
                "reasoning": {"effort": None, "summary": None}, **self.echo, **more}

    def items(self, result: Any) -> list[dict[str, Any]]:
        calls = getattr(result, "tool_calls", None) or []
        if calls:
            return [{"type": "function_call", "id": f"fc_{self.id[5:]}_{index}", "call_id": call["id"],
                     "name": call["function"]["name"], "arguments": call["function"]["arguments"],
                     "status": "completed"} for index, call in enumerate(calls)]
        return [{"type": "message", "id": f"msg_{self.id[5:]}", "status": "completed", "role": "assistant",
                 "content": [{"type": "output_text", "text": result.content or "", "annotations": []}]}]

    def body(self, result: Any) -> dict[str, Any]:
        cut = finish_reason_of(result) == "length"
        return self._response("incomplete" if cut else "completed", self.items(result), _usage(result),
                              incomplete_details={"reason": "max_output_tokens"} if cut else None)

    def _event(self, kind: str, **payload: Any) -> str:
        data = {"type": kind, "sequence_number": self._sequence, **payload}
        self._sequence += 1
        return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"

    def opening(self) -> list[str]:
        return [self._event(kind, response=self._response("in_progress", [], None))
                for kind in ("response.created", "response.in_progress")]

    def keepalive(self) -> str:
        return SSE_KEEPALIVE

    def closing(self, result: Any) -> list[str]:
        events = []
        for index, item in enumerate(self.items(result)):
            events.append(self._event("response.output_item.added", output_index=index,
                                      item={**_unfinished(item), "status": "in_progress"}))
            events += self._item_events(index, item)
            events.append(self._event("response.output_item.done", output_index=index, item=item))
        return [*events, self._event("response.completed", response=self.body(result))]

    def _item_events(self, index: int, item: dict[str, Any]) -> list[str]:
        where = {"item_id": item["id"], "output_index": index}
        if item["type"] == "function_call":
            return [self._event("response.function_call_arguments.delta", **where, delta=item["arguments"]),
                    self._event("response.function_call_arguments.done", **where, arguments=item["arguments"])]
        part = item["content"][0]
        text = part["text"]
        return [self._event("response.content_part.added", **where, content_index=0, part={**part, "text": ""}),
                self._event("response.output_text.delta", **where, content_index=0, delta=text, logprobs=[]),
                self._event("response.output_text.done", **where, content_index=0, text=text, logprobs=[]),
                self._event("response.content_part.done", **where, content_index=0, part=part)]

    def failure(self, error: ApiError) -> list[str]:
        failed = self._response("failed", [], None, error={"code": error.code, "message": error.message})
        return [self._event("response.failed", response=failed),
                self._event("error", code=error.code, message=error.message, param=None,
                            error={"type": error.type, "code": error.code, "message": error.message})]


def _unfinished(item: dict[str, Any]) -> dict[str, Any]:
    """An item as `response.output_item.added` announces it, before its text or arguments."""
    if item["type"] == "function_call":
        return {**item, "arguments": ""}
    return {**item, "content": []}


def _usage(result: Any) -> dict[str, Any]:
    """Responses' usage; the lane's own accounting rides along under `lane` as in chat completions."""
    return {"input_tokens": result.prompt_tokens, "input_tokens_details": {"cached_tokens": result.cached_tokens},
            "output_tokens": result.completion_tokens, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": result.prompt_tokens + result.completion_tokens, "lane": usage_of(result)["lane"]}
