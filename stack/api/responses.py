"""What the shim means by a completion: a turn's answer, its finish reason and its usage.

Without `tools` the client sees only the final answer of a turn: the tool calls ran inside the
shim, so what they cost is reported in `usage` (summed over every model call) and `usage.lane`,
not as tool_calls. With `tools` (proxy mode) a reply may be tool_calls for the client to run.
The shapes themselves are the wire module's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..wire import SSE_DONE, SSE_KEEPALIVE, ApiError, chunk_body, completion_body, new_completion_id, sse, usage

MODEL_ID = "fallback-lane"

# The agent's finish reasons mapped onto OpenAI's: a clarifying question is a normal stop, an
# exhausted iteration budget is a cut-off answer like a length limit. The original stays in lane.
_FINISH = {"stop": "stop", "length": "length", "clarify": "stop", "iteration_limit": "length",
           "repeated_call": "stop", "tool_calls": "tool_calls"}


def usage_of(result: Any) -> dict[str, Any]:
    return {
        **usage(result.prompt_tokens, result.completion_tokens, result.cached_tokens),
        "lane": {
            "model_calls": result.model_calls,
            "peak_prompt_tokens": result.peak_prompt_tokens,
            "tools_executed": list(result.tools_executed),
            "finish_reason": result.finish_reason,
        },
    }


def finish_reason_of(result: Any) -> str:
    return _FINISH.get(result.finish_reason, "stop")


def completion(result: Any, *, id: str) -> dict[str, Any]:
    """In proxy mode a reply may be calls for the client to run: content null, `tool_calls`."""
    calls = getattr(result, "tool_calls", None)
    return completion_body(id, MODEL_ID, None if calls else result.content, finish_reason_of(result),
                           usage_of(result), tool_calls=calls)


def tool_call_deltas(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A streamed reply's calls as OpenAI sends them: one delta per call, whole, with its index."""
    return [{"tool_calls": [{"index": index, **call}]} for index, call in enumerate(calls)]


def chunk(id: str, delta: dict[str, Any], finish_reason: str | None = None,
          usage_block: dict[str, Any] | None = None) -> dict[str, Any]:
    return chunk_body(id, MODEL_ID, delta, finish_reason, usage_block=usage_block)


@dataclass(frozen=True)
class ChatFormat:
    """OpenAI chat completions as a turn's reply (api/turns.py's ReplyFormat): the role chunk at
    once, `: keep-alive` comments, the calls or the answer, a chunk with finish_reason and usage,
    then [DONE]."""

    id: str

    @classmethod
    def new(cls) -> "ChatFormat":
        return cls(new_completion_id())

    def body(self, result: Any) -> dict[str, Any]:
        return completion(result, id=self.id)

    def opening(self) -> list[str]:
        return [sse(chunk(self.id, {"role": "assistant", "content": ""}))]

    def keepalive(self) -> str:
        return SSE_KEEPALIVE

    def closing(self, result: Any) -> list[str]:
        events = [sse(chunk(self.id, delta)) for delta in tool_call_deltas(getattr(result, "tool_calls", None) or [])]
        if result.content:
            events.append(sse(chunk(self.id, {"content": result.content})))
        return [*events, sse(chunk(self.id, {}, finish_reason_of(result), usage_of(result))), SSE_DONE]

    def failure(self, error: ApiError) -> list[str]:
        return [sse(error.body), SSE_DONE]


def models_list() -> dict[str, Any]:
    return {"object": "list", "data": [
        {"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "fallback-lane"},
    ]}
