"""The shim's client for the OpenAI-compatible llm service.

It always streams upstream, even when the shim's own client did not ask for a stream: a streamed
call is one that can be abandoned, and llama.cpp servers stop generating when a stream's connection
closes. On timeout or cancellation the `async with` closes the connection, so the llm service is
free for the next call instead of finishing a monologue nobody will read.

What the upstream honours (a reply schema, a named tool_choice, logprobs) is probed before the first
call and again after the service was unreachable (capabilities.py); each call is shaped into what
it honours (constrained.py), so callers always ask in the full form.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field
from typing import Any, TypedDict

import httpx

from ..token_estimate import estimate_tokens
from ..toolsearch.asking import ModelFailed
from ..wire import HONOURED, WARM_ROUTE
from .capabilities import Capabilities, Refused, probe
from .constrained import Form, again, read, shape
from .toolcalls import ToolCall, new_call_id

log = logging.getLogger("lane.llm_client")


class LlmError(ModelFailed):
    """The llm service is unreachable or answered something that is not a chat completion."""


class LlmTimeout(LlmError):
    """A model call ran past its time limit and was cancelled."""


class LlmNotReady(LlmError):
    """The llm service cannot be reached yet, or says its model is still loading: worth retrying."""


class LlmRefused(LlmError):
    """The llm service answered a request with an error status that is about the request (a 4xx,
    or a 500/501 some servers give for an option they do not know)."""


# Error statuses that say nothing about a request's options: the caller, its key or the service's
# state is wrong (a probe answered so has learnt nothing).
NOT_ABOUT_THE_REQUEST = frozenset({401, 403, 404, 408, 429, 502, 503, 504})
# Probing again after a failed probe waits this long, doubling up to PROBE_RETRY_MAX_S.
PROBE_RETRY_S = 1.0
PROBE_RETRY_MAX_S = 5.0


class Tokens(TypedDict):
    """A model call's token counts, under the names the store's columns have."""

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int


@dataclass
class ModelReply:
    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    # Per generated token, its likeliest alternatives as {text: log-probability} (the chosen one
    # included), when the call asked for `top_logprobs` and the service sent them.
    logprobs: list[dict[str, float]] = field(default_factory=list)
    # The form the call took upstream (constrained.py: "schema", "tool", "text", "named",
    # "offered", "logprobs"); None for a call with nothing constrained.
    path: str | None = None

    @property
    def tokens(self) -> Tokens:
        """Its token counts, as the store's writes take them (a message or a lane call)."""
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "cached_tokens": self.cached_tokens}


class LlmClient:
    def __init__(self, base_url: str, *, model: str | None, timeout_s: float,
                 api_key: str | None = None):
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self._model = model
        self._info: tuple[str, int | None] | None = None
        self._capabilities: Capabilities | None = None
        self._probing: asyncio.Task[Capabilities] | None = None
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.AsyncClient(
            headers=headers, timeout=httpx.Timeout(timeout_s, connect=10.0)
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def model_name(self) -> str:
        """LANE_MODEL, or the first model the service lists."""
        return self._model or (await self._model_info())[0]

    async def context_window(self) -> int | None:
        """The upstream model's context size when the service reports it (the lane's llm service
        does, as `meta.n_ctx` in /v1/models); None when it does not or cannot say."""
        try:
            return (await self._model_info())[1]
        except LlmError:
            return None

    async def _model_info(self) -> tuple[str, int | None]:
        if self._info is None:
            try:
                response = await self._http.get(f"{self.base_url}/models", timeout=10.0)
                if response.status_code == 503:
                    raise LlmNotReady(f"llm service at {self.base_url} is not ready: {response.text[:200]}")
                response.raise_for_status()
                first = response.json()["data"][0]
                model_id = str(first["id"])
            except (httpx.ConnectError, httpx.RemoteProtocolError) as exc:
                self._unreachable()
                raise LlmNotReady(f"cannot read the model name from {self.base_url}/models: {exc}") from None
            except (httpx.HTTPError, KeyError, IndexError, TypeError, ValueError) as exc:
                raise LlmError(
                    f"cannot read the model name from {self.base_url}/models: {exc}") from None
            n_ctx = (first.get("meta") or {}).get("n_ctx")
            self._info = (model_id, n_ctx if isinstance(n_ctx, int) and n_ctx > 0 else None)
        return self._info

    async def healthy(self) -> bool:
        try:
            response = await self._http.get(f"{self.base_url}/models", timeout=5.0)
        except httpx.ConnectError:  # gone, not busy: a slow answer keeps what was found
            self._unreachable()
            return False
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    @property
    def known_capabilities(self) -> Capabilities | None:
        """What the upstream was found to honour; None before it was asked (or since it was
        unreachable)."""
        return self._capabilities

    async def capabilities(self) -> Capabilities:
        """What the upstream honours, probed on first need (capabilities.probe); one probe at a
        time, shared by whoever waits for it. LlmError when the service cannot be asked."""
        if self._capabilities is None:
            if self._probing is None or self._probing.done():
                self._probing = asyncio.create_task(self._probe())
            self._capabilities = await asyncio.shield(self._probing)
        return self._capabilities

    async def probe_until_known(self, retry_s: float = PROBE_RETRY_S) -> Capabilities | None:
        """Probes until the upstream answers (it may not be up yet, or still loading); None
        when it answers with something else that fails (asked again on the first call)."""
        while True:
            try:
                return await self.capabilities()
            except LlmNotReady as exc:
                log.debug("probing waits for the llm service: %s", exc)
            except LlmError as exc:
                log.warning("could not probe what the llm service honours (asked again on the first call): %s", exc)
                return None
            await asyncio.sleep(retry_s)
            retry_s = min(retry_s * 2, PROBE_RETRY_MAX_S)

    async def _probe(self) -> Capabilities:
        async def send(body: dict[str, Any]) -> ModelReply:
            try:
                return await self._timed({"model": await self.model_name(), "stream": True, **body})
            except LlmRefused as exc:
                raise Refused(str(exc)) from None

        declared = await self._declared()
        found = declared or await probe(send)
        level = logging.INFO if found.paths()["decision"] == "schema" else logging.WARNING
        log.log(level, "the llm service at %s honours (%s): %s", self.base_url,
                "its own word" if declared else "probed", found.summary())
        return found

    async def _declared(self) -> Capabilities | None:
        """What the lane's own llm service says it honours (wire.HONOURED on its warm-up route),
        taken at its word; None from any other server, which is probed."""
        try:
            response = await self._http.get(f"{self.base_url}{WARM_ROUTE}", timeout=5.0)
            honours = response.json().get("honours") if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError):
            return None
        if not isinstance(honours, list):
            return None
        return Capabilities(**{name: name in honours for name in HONOURED})

    def _unreachable(self) -> None:
        """The upstream went away: what it honours is asked again when it is back (it may be
        another server by then)."""
        if self._capabilities is not None:
            log.info("the llm service at %s is unreachable; it will be probed again", self.base_url)
        self._capabilities = self._info = None

    async def embedding(self, text: str) -> tuple[list[float], int] | None:
        """The service's vector for `text` and its token count (OpenAI's /embeddings shape; the
        lane's llm service gives the last token's hidden state, Engine.embed); None when the
        service has no such route. LlmError when it fails."""
        try:
            response = await self._http.post(f"{self.base_url}/embeddings",
                                              json={"model": await self.model_name(), "input": text})
        except (httpx.ConnectError, httpx.RemoteProtocolError) as exc:
            raise LlmNotReady(f"llm service at {self.base_url} unreachable: {exc}") from None
        except httpx.HTTPError as exc:
            raise LlmError(f"llm service at {self.base_url} failed to embed: {type(exc).__name__} {exc}") from None
        if response.status_code in (404, 405, 501):
            return None
        if response.status_code >= 400:
            raise LlmError(f"llm service answered {response.status_code} to embeddings: {response.text[:500]}")
        try:
            payload = response.json()
            vector = [float(x) for x in payload["data"][0]["embedding"]]
            tokens = int((payload.get("usage") or {}).get("prompt_tokens") or 0)
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise LlmError(f"llm service sent an unreadable embedding: {exc}") from None
        return vector, tokens

    async def warm_supported(self) -> bool | None:
        """Whether the service has the lane's warm-up route: False for another OpenAI server,
        None when it cannot tell yet (not up, or slow to answer)."""
        try:
            response = await self._http.get(f"{self.base_url}{WARM_ROUTE}", timeout=5.0)
        except httpx.HTTPError:
            return None
        if response.status_code in (404, 405):
            return False
        return True if response.status_code == 200 else None

    async def warm(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any] | None:
        """Have the lane's llm service evaluate, or restore from disk, the stable prefix of a
        conversation opening with `messages` and `tools`, and keep it (stack/llm/prefix_state.py).
        What it did (`prefix_tokens`, `source`, `seconds`, `saved`); None when the service has no
        such route (another OpenAI server: nothing to warm). LlmNotReady when it is not up yet."""
        body: dict[str, Any] = {"messages": messages, "max_tokens": 1}
        if tools:
            body["tools"] = tools
        try:
            response = await self._http.post(f"{self.base_url}{WARM_ROUTE}", json=body)
        except (httpx.ConnectError, httpx.RemoteProtocolError) as exc:
            raise LlmNotReady(f"llm service at {self.base_url} unreachable: {exc}") from None
        except httpx.HTTPError as exc:
            raise LlmError(f"llm service at {self.base_url} failed to warm: {type(exc).__name__} {exc}") from None
        if response.status_code in (404, 405):
            return None
        if response.status_code == 503:
            raise LlmNotReady(f"llm service not ready: {response.text[:200]}")
        if response.status_code >= 400:
            raise LlmError(f"llm service answered {response.status_code} to warming: {response.text[:500]}")
        result = response.json()
        return result if isinstance(result, dict) else {}

    async def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *,
                   max_tokens: int, temperature: float | None = None,
                   tool_choice: dict[str, Any] | str | None = None,
                   top_logprobs: int | None = None,
                   response_schema: dict[str, Any] | None = None) -> ModelReply:
        """One model call, asked in the full form and sent in the form the upstream honours
        (constrained.py); a reply the lane reads itself that holds no valid value is asked for once
        more, and the two calls' tokens are summed."""
        form = shape(await self.capabilities(), messages, tools, tool_choice=tool_choice,
                     response_schema=response_schema, top_logprobs=top_logprobs)
        reply = await self._call(form, max_tokens, temperature)
        problem = read(form, reply)
        if problem is not None:
            log.info("the model's %s reply held no valid value (%s); asked once more", form.path, problem)
            first, form = reply, again(form, reply, problem)
            reply = await self._call(form, max_tokens, temperature)
            read(form, reply)
            reply.prompt_tokens += first.prompt_tokens
            reply.completion_tokens += first.completion_tokens
            reply.cached_tokens += first.cached_tokens
        return reply

    async def _call(self, form: Form, max_tokens: int, temperature: float | None) -> ModelReply:
        body: dict[str, Any] = {
            "model": await self.model_name(),
            "messages": form.messages,
            "max_tokens": max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if form.tools:
            body["tools"] = form.tools
            if form.tool_choice is not None:
                body["tool_choice"] = form.tool_choice
        if temperature is not None:
            body["temperature"] = temperature
        if form.top_logprobs is not None:
            body |= {"logprobs": True, "top_logprobs": form.top_logprobs}
        if form.response_schema is not None:
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": "reply", "schema": form.response_schema}}
        reply = await self._timed(body)
        if not reply.prompt_tokens:
            reply.prompt_tokens = estimate_tokens([body["messages"], body.get("tools", [])])
        return reply

    async def _timed(self, body: dict[str, Any]) -> ModelReply:
        """One streamed call within the time limit, its failures as LlmError."""
        try:
            async with asyncio.timeout(self.timeout_s):
                return await self._stream(body)
        except TimeoutError:
            raise LlmTimeout(f"the model did not finish within {self.timeout_s:g} s") from None
        except httpx.TimeoutException:
            raise LlmTimeout(f"the llm service did not answer within {self.timeout_s:g} s") from None
        except (httpx.ConnectError, httpx.RemoteProtocolError) as exc:
            self._unreachable()
            raise LlmNotReady(f"llm service at {self.base_url} failed: "
                              f"{type(exc).__name__} {exc}".rstrip()) from None
        except httpx.HTTPError as exc:
            raise LlmError(f"llm service at {self.base_url} failed: "
                           f"{type(exc).__name__} {exc}".rstrip()) from None

    async def _stream(self, body: dict[str, Any]) -> ModelReply:
        request = self._http.build_request("POST", f"{self.base_url}/chat/completions", json=body)
        r = await self._send(request)
        try:
            if r.status_code >= 400:
                detail = (await r.aread()).decode(errors="replace")[:500]
                kind = LlmError if r.status_code in NOT_ABOUT_THE_REQUEST else LlmRefused
                kind = LlmNotReady if r.status_code == 503 else kind
                raise kind(f"llm service answered {r.status_code}: {detail}")
            if "text/event-stream" not in r.headers.get("content-type", ""):
                raw = await r.aread()
                try:
                    return _from_completion(json.loads(raw))
                except json.JSONDecodeError:
                    raise LlmError(f"llm service sent no JSON: {raw[:200]!r}") from None
            builder = _ReplyBuilder()
            async for line in r.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                try:
                    builder.add(json.loads(data))
                except json.JSONDecodeError:
                    raise LlmError(
                        f"llm service sent a malformed stream chunk: {data[:200]}") from None
            return builder.reply()
        finally:
            await r.aclose()

    async def _send(self, request: httpx.Request) -> httpx.Response:
        """A pooled keep-alive connection that the server has just closed fails before any answer
        comes back; that one case is retried once on a fresh connection. Once the response has
        started, nothing is retried: the model may already have generated."""
        try:
            return await self._http.send(request, stream=True)
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError):
            log.info("the llm service closed a pooled connection; retrying once")
            return await self._http.send(request, stream=True)


class _ReplyBuilder:
    """Joins streamed deltas: content pieces, and tool calls whose arguments arrive in pieces."""

    def __init__(self) -> None:
        self.content: list[str] = []
        self.calls: dict[int, dict[str, str]] = {}
        self.finish_reason = "stop"
        self.usage: dict[str, Any] = {}
        self.logprobs: list[dict[str, float]] = []

    def add(self, chunk: dict[str, Any]) -> None:
        if chunk.get("error"):
            raise LlmError(f"llm service error: {chunk['error']}")
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                self.content.append(delta["content"])
            for piece in delta.get("tool_calls") or []:
                call = self.calls.setdefault(piece.get("index", 0),
                                             {"id": "", "name": "", "arguments": ""})
                call["id"] = piece.get("id") or call["id"]
                function = piece.get("function") or {}
                call["name"] += function.get("name") or ""
                call["arguments"] += function.get("arguments") or ""
            self.logprobs += _alternatives(choice.get("logprobs"))
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]

    def reply(self) -> ModelReply:
        return ModelReply(
            content="".join(self.content),
            tool_calls=[ToolCall(c["id"] or new_call_id(), c["name"], c["arguments"], "native")
                        for _, c in sorted(self.calls.items())],
            finish_reason=self.finish_reason,
            logprobs=self.logprobs,
            **_token_counts(self.usage),
        )


def _from_completion(payload: dict[str, Any]) -> ModelReply:
    try:
        choice = payload["choices"][0]
        message = choice["message"]
    except (KeyError, IndexError, TypeError):
        raise LlmError(f"llm service sent no choices: {str(payload)[:200]}") from None
    calls = [
        ToolCall(c.get("id") or new_call_id(), c["function"]["name"],
                 c["function"].get("arguments") or "", "native")
        for c in message.get("tool_calls") or []
    ]
    return ModelReply(
        content=message.get("content") or "",
        tool_calls=calls,
        finish_reason=choice.get("finish_reason") or "stop",
        logprobs=_alternatives(choice.get("logprobs")),
        **_token_counts(payload.get("usage") or {}),
    )


def _alternatives(logprobs: Any) -> list[dict[str, float]]:
    """OpenAI's `logprobs.content` as {token: log-probability} per token; anything else, none."""
    if not isinstance(logprobs, dict) or not isinstance(logprobs.get("content"), list):
        return []
    out = []
    for entry in logprobs["content"]:
        if not isinstance(entry, dict):
            continue
        rivals = [e for e in entry.get("top_logprobs") or [] if isinstance(e, dict)] + [entry]
        out.append({str(e.get("token")): float(e["logprob"]) for e in rivals
                    if isinstance(e.get("logprob"), (int, float))})
    return out


def _token_counts(usage: dict[str, Any]) -> Tokens:
    """Token counts of an OpenAI usage block; servers without a prompt cache send no details."""
    details = usage.get("prompt_tokens_details") or {}
    return {"prompt_tokens": int(usage.get("prompt_tokens") or 0),
            "completion_tokens": int(usage.get("completion_tokens") or 0),
            "cached_tokens": int(details.get("cached_tokens") or 0)}
