"""The OpenAI chat-completions wire format, one copy for both servers that speak it.

The llm service (`stack/llm`) and the shim (`stack/api`) answer the same clients, so they share
one reading of a request body (JSON nested at most MAX_JSON_DEPTH deep, text-only content), one
`max_tokens` clamp, one error type and body, one completion id, one usage block, and one shape
of completion, chunk and SSE line. Each server keeps only what it alone means by a request: the
llm's sampling fields, the shim's sessions and profiles. This module imports nothing from the lane.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from itertools import accumulate
from typing import Any

# Deeper than any real request (a tool schema inside a message part is about 10 levels).
MAX_JSON_DEPTH = 64
SSE_DONE = "data: [DONE]\n\n"
SSE_KEEPALIVE = ": keep-alive\n\n"
# The lane's own llm route beside the OpenAI ones, under the same base URL (/v1): POST a chat
# request's `messages` and `tools` to have their stable prefix evaluated (or restored) and kept;
# GET lists what was warmed. Other OpenAI servers answer 404, and the shim then skips warming.
WARM_ROUTE = "/lane/warm"
# What the lane's own llm service declares on GET WARM_ROUTE that it honours (the names of
# agent/capabilities.Capabilities): the shim takes its word instead of probing, which would cost a
# restarted lane's first answer a few seconds of model time (other servers are probed).
HONOURED = ("json_schema", "tool_choice", "tool_calls", "logprobs", "hidden_state")

_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_NOT_BRACKET = bytes(sorted(set(range(256)) - set(b"[]{}")))
_BRACKET_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}

_NUMBER = ((int, float), "a number")
_INTEGER = ((int,), "an integer")
_OBJECT = ((dict,), "an object")
# The request fields the lane knows, with the JSON type a client must send.
_FIELD_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "model": ((str,), "a string"),
    "stream": ((bool,), "a boolean"),
    "temperature": _NUMBER,
    "top_p": _NUMBER,
    "top_k": _INTEGER,
    "min_p": _NUMBER,
    "repeat_penalty": _NUMBER,
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


class ApiError(Exception):
    """A request answered with an error status; the message is shown to the client."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",
                 code: str = "invalid_request", headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.code = code
        self.headers = headers

    @property
    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.code, self.type)


def bad_request(message: str, code: str = "invalid_request") -> ApiError:
    return ApiError(400, message, code=code)


def error_body(message: str, code: str, type: str = "invalid_request_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "code": code}}


def load_object(body: bytes) -> dict[str, Any]:
    """The request body as a JSON object; too deep, not JSON or not an object is a 400."""
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
        raise bad_request(f"request body must be a JSON object, not {kind_of(data)}",
                          "invalid_json")
    if _may_hold_surrogates(body) and not _encodes(data):
        where = _unencodable_at(data, "")
        raise bad_request(f"{where} holds text that is not valid Unicode (a lone surrogate such "
                          "as \\ud800), which the lane can neither store nor show to a model",
                          "invalid_text")
    return data


def _may_hold_surrogates(body: bytes) -> bool:
    """Whether json.loads may have made a lone surrogate of `body`: from a \\uD800-\\uDFFF
    escape, or from bytes that are not strict UTF-8 (it decodes with surrogatepass). One C-speed
    pass, so the usual body skips the checks below."""
    if _SURROGATE_ESCAPE.search(body):
        return True
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def _encodes(data: dict[str, Any]) -> bool:
    """Whether all of `data` can be written as UTF-8 (at C speed: a paired surrogate escape, as
    ensure_ascii clients send every emoji, is common and fine)."""
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _unencodable_at(value: Any, where: str) -> str | None:
    """Where a string (or key) in a parsed JSON value cannot be written as UTF-8, as
    `messages[0].content`; None when all can. Walked only when `_encodes` says one can't."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return where
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            name = key.encode("utf-8", "backslashreplace").decode()  # the message must encode
            at = f"{where}.{name}" if where else name
            found = _unencodable_at(key, at) or _unencodable_at(item, at)
            if found:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = _unencodable_at(item, f"{where}[{index}]")
            if found:
                return found
    return None


def json_depth(body: bytes) -> int:
    """How deeply `body` nests arrays and objects, found without parsing it: strings are cut out,
    then the brackets left are counted. A few C-speed passes over at most the body limit, where
    json.loads on a deep body would recurse until RecursionError."""
    brackets = _JSON_STRING.sub(b"", body).translate(None, _NOT_BRACKET)
    return max(accumulate(map(_BRACKET_STEP.__getitem__, brackets)), default=0)


def check_field_types(data: dict[str, Any]) -> None:
    """A wrong JSON type for any request field the lane knows is a 400, even for a field a
    server ignores, so that a client's bug shows at once."""
    for key, (types, kind) in _FIELD_TYPES.items():
        value = data.get(key)
        if value is None:
            continue
        # bool is an int in Python, but JSON true is not a number of tokens.
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise bad_request(f"{key} must be {kind}, not {kind_of(value)}", "invalid_type")
        element = _ELEMENT_TYPES.get(key)
        if element is not None and isinstance(value, list):
            for index, item in enumerate(value):
                if not isinstance(item, element[0]):
                    raise bad_request(f"{key}[{index}] must be {element[1]}, not {kind_of(item)}",
                                      "invalid_type")


def text_content(value: Any, where: str) -> str | None:
    """A message's content: a string, or OpenAI's list of text parts joined into one; other part
    types are refused because the lane's models read text only."""
    if value is None or isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise bad_request(f"{where} must be a string or a list of text parts, not "
                          f"{kind_of(value)}", "invalid_messages")
    texts = []
    for index, part in enumerate(value):
        if not isinstance(part, dict) or part.get("type") != "text" \
                or not isinstance(part.get("text"), str):
            raise bad_request(f"{where}[{index}] must be a text part "
                              '{"type": "text", "text": "..."}; the lane reads text only',
                              "invalid_messages")
        texts.append(part["text"])
    return "\n".join(texts)


def requested_max_tokens(data: dict[str, Any]) -> int | None:
    """What the client asked for: `max_completion_tokens`, OpenAI's current name, wins over the
    older `max_tokens`."""
    requested = data.get("max_completion_tokens")
    return data.get("max_tokens") if requested is None else requested


def clamp_max_tokens(requested: int | None, cap: int) -> int:
    """The hard cap clamps, it never rejects (gateways routinely send huge or absent values):
    missing, non-positive or too large becomes the cap."""
    if requested is None or requested <= 0:
        return cap
    return min(requested, cap)


def kind_of(value: Any) -> str:
    """A JSON value's kind as an error message names it."""
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            type(None): "null", int: "a number", float: "a number"}.get(type(value), "a value")


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


def completion_body(completion_id: str, model: str, content: str | None, finish_reason: str,
                    usage_block: dict[str, Any], logprobs: Any = None,
                    tool_calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A whole chat completion; `logprobs` (OpenAI's `{"content": [...]}`) when asked for;
    `tool_calls` (OpenAI's shape) for a reply that calls the client's tools."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    body: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{
            "index": 0,
            "message": message,
            "finish_reason": finish_reason,
        }],
        "usage": usage_block,
    }
    if logprobs is not None:
        body["choices"][0]["logprobs"] = logprobs
    return body


def chunk_body(completion_id: str, model: str, delta: dict[str, Any] | None,
               finish_reason: str | None = None, *,
               usage_block: dict[str, Any] | None = None, logprobs: Any = None) -> dict[str, Any]:
    """One streaming chunk; with `delta` None and a `usage_block` it is the usage-only chunk."""
    chunk: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [] if delta is None else [{"index": 0, "delta": delta,
                                              "finish_reason": finish_reason}],
    }
    if logprobs is not None and delta is not None:
        chunk["choices"][0]["logprobs"] = logprobs
    if usage_block is not None:
        chunk["usage"] = usage_block
    return chunk


def sse(payload: dict[str, Any]) -> str:
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"
