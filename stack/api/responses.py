"""What the shim means by a completion: a turn's answer, its finish reason and its usage.

Without `tools` the client sees only the final answer of a turn: the tool calls ran inside the
shim, so what they cost is reported in `usage` (summed over every model call) and `usage.lane`,
not as tool_calls. With `tools` (proxy mode) a reply may be tool_calls for the client to run.
The shapes themselves are the wire module's.
"""

from __future__ import annotations

from typing import Any

from ..wire import chunk_body, completion_body, usage

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


def models_list() -> dict[str, Any]:
    return {"object": "list", "data": [
        {"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "fallback-lane"},
    ]}
