"""The OpenAI shapes the shim answers with: a chat.completion, its streamed chunks, and usage.

The client sees only the final answer of a turn: the tool calls ran inside the shim, so what they
cost is reported in `usage` (summed over every model call) and `usage.lane`, not as tool_calls.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

MODEL_ID = "fallback-lane"

# The agent's finish reasons mapped onto OpenAI's: a clarifying question is a normal stop, an
# exhausted iteration budget is a cut-off answer like a length limit. The original stays in lane.
_FINISH = {"stop": "stop", "length": "length", "clarify": "stop", "iteration_limit": "length",
           "repeated_call": "stop"}


def completion_id() -> str:
    return "chatcmpl-" + uuid.uuid4().hex[:24]


def usage_of(result: Any) -> dict[str, Any]:
    return {
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
        "total_tokens": result.prompt_tokens + result.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": result.cached_tokens},
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
    return {
        "id": id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": MODEL_ID,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": result.content},
            "finish_reason": finish_reason_of(result),
        }],
        "usage": usage_of(result),
    }


def chunk(id: str, delta: dict[str, Any], finish_reason: str | None = None,
          **extra: Any) -> dict[str, Any]:
    return {
        "id": id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": MODEL_ID,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        **extra,
    }


def sse(payload: dict[str, Any]) -> str:
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"


SSE_DONE = "data: [DONE]\n\n"
SSE_KEEPALIVE = ": keep-alive\n\n"


def models_list() -> dict[str, Any]:
    return {"object": "list", "data": [
        {"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "fallback-lane"},
    ]}
