"""A scripted OpenAI-compatible model server for deterministic tests.

It speaks real HTTP on loopback (stream and non-stream chat completions, /v1/models), so the shim
under test goes through its real client, timeouts and cancellation. A script is a list of Replies
served in order, or a function from the request body to a Reply.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from stack.agent.decide import ANSWER, DECLINE_SYSTEM, FIT_SYSTEM
from tests.fakes.threaded_server import ThreadedServer


@dataclass
class Reply:
    content: str | None = None
    # [{"name": ..., "arguments": dict or raw string}] written as native tool_calls
    tool_calls: list[dict[str, Any]] | None = None
    # stream tokens forever (one every 20 ms) until the client goes away
    hang: bool = False
    # wait this long before answering, as a model reading a long prompt does; a client that leaves
    # meanwhile is counted in `disconnects` and its call dropped, as the lane's llm service does
    delay_s: float = 0.0
    finish_reason: str | None = None
    # The first token's likeliest alternatives ({token: log-probability}), sent as OpenAI's
    # `logprobs.content` when the request asks for log-probabilities.
    first_token_logprobs: dict[str, float] | None = None


Script = list[Reply] | Callable[[dict[str, Any]], Reply]


def text(content: str) -> Reply:
    return Reply(content=content)


def call(name: str, arguments: dict[str, Any] | str, **more: Any) -> Reply:
    return Reply(tool_calls=[{"name": name, "arguments": arguments}], **more)


@dataclass
class ScriptedModel:
    script: Script
    model_name: str = "scripted-model"
    # reported as meta.n_ctx in /v1/models, as the lane's llm service does
    n_ctx: int | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)
    # The lane asks which tool the request needs next (agent/decide.py): answered with this, or
    # what this function makes of the request, and kept apart from `script` and `requests`. By
    # default the decision follows the script, as a model that means what it does next would: the
    # tool its next scripted reply calls (a bridged call's inner tool), else "answer".
    decision: str | Reply | Callable[[dict[str, Any]], Reply] | None = None
    decide_requests: list[dict[str, Any]] = field(default_factory=list)
    # Proxy mode's second look (decide.fit_probability) asks whether one tool fits: answered with
    # this yes-probability, or by default as a model that follows its script would: high when its
    # next scripted reply calls that tool, low otherwise. Kept apart in `fit_requests`.
    fit: float | None = None
    fit_requests: list[dict[str, Any]] = field(default_factory=list)
    # Proxy mode asks whether a reply in words declines the request or tells the user how
    # (decide.decline_probability): answered with this yes-probability, by default that it does
    # not. Kept apart in `decline_requests`.
    declines: float = 0.05
    decline_requests: list[dict[str, Any]] = field(default_factory=list)
    # The lane's reading of which actions an answer reports as done (agent/reading.py): answered
    # with this (literal_reading: the granted tools the reply names), by default that the reply
    # reports nothing. Kept apart in `reading_requests`.
    reading: str | Reply | Callable[[dict[str, Any]], Reply] | None = None
    reading_requests: list[dict[str, Any]] = field(default_factory=list)
    authorizations: list[str | None] = field(default_factory=list)  # per request, as sent
    disconnects: int = 0
    port: int = 0

    def __post_init__(self) -> None:
        self._server: ThreadedServer | None = None
        self._served = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def next_reply(self, body: dict[str, Any]) -> Reply:
        if callable(self.script):
            return self.script(body)
        if self._served >= len(self.script):
            return Reply(content="(script exhausted)")
        reply = self.script[self._served]
        self._served += 1
        return reply

    def _follow(self, decide: dict[str, Any]) -> Reply:
        """The decision a model that follows its script makes: the tool its next reply calls."""
        upcoming = self.script[self._served] if isinstance(self.script, list) and \
            self._served < len(self.script) else None
        names: list[str] = []
        if upcoming and upcoming.tool_calls:
            first = upcoming.tool_calls[0]
            arguments = first["arguments"] if isinstance(first["arguments"], dict) else {}
            names = [str(arguments.get("name", "")), first["name"]]
        elif upcoming and upcoming.content:
            names = list(reversed(re.findall(r'"name"\s*:\s*"([^"]+)"', upcoming.content)))
        choices = _decision_choices(decide) or []
        picked = next((n for n in names if n in choices), ANSWER)
        return Reply(content=json.dumps({"next": picked}))

    def _fit(self, question: dict[str, Any]) -> Reply:
        """The second look's one-token answer, its yes-probability in the first token's logprobs."""
        probability = self.fit
        if probability is None:
            asked = re.search(r"^Function: (\S+)", question["messages"][-1]["content"], re.MULTILINE)
            upcoming = self.script[self._served] if isinstance(self.script, list) and \
                self._served < len(self.script) else None
            calls = [c["name"] for c in upcoming.tool_calls or []] if upcoming else []
            probability = 0.95 if asked and asked.group(1) in calls else 0.05
        return _yes(probability)

    def _lane_question(self, body: dict[str, Any]) -> Reply | None:
        """The answer to one of the lane's own questions (reading, decision, second look, whether a
        reply declines), each kept apart; None for any other request."""
        if _reading_choices(body) is not None:
            self.reading_requests.append(body)
            return _answer(self.reading, body) if self.reading is not None else Reply('{"done": []}')
        if _decision_choices(body) is not None:
            self.decide_requests.append(body)
            return _answer(self.decision, body) if self.decision is not None else self._follow(body)
        if _asks(body, FIT_SYSTEM):
            self.fit_requests.append(body)
            return self._fit(body)
        if _asks(body, DECLINE_SYSTEM):
            self.decline_requests.append(body)
            return _yes(self.declines)
        return None

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.get("/v1/models")
        async def models() -> dict[str, Any]:
            model: dict[str, Any] = {"id": self.model_name, "object": "model"}
            if self.n_ctx:
                model["meta"] = {"n_ctx": self.n_ctx}
            return {"object": "list", "data": [model]}

        @app.get("/health")
        async def health() -> dict[str, str]:
            return {"status": "ok"}

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> Any:
            body = await request.json()
            reply = self._lane_question(body)
            if reply is None:
                self.requests.append(body)
                self.authorizations.append(request.headers.get("authorization"))
                reply = self.next_reply(body)
            if reply.delay_s and await _left_within(request, reply.delay_s):
                self.disconnects += 1
                return JSONResponse({})
            usage = _usage(body, reply)
            logprobs = _logprobs(reply) if body.get("logprobs") else None
            if body.get("stream"):
                return StreamingResponse(self._stream(reply, usage, logprobs), media_type="text/event-stream")
            if reply.hang:
                while not await request.is_disconnected():
                    await asyncio.sleep(0.02)
                self.disconnects += 1
                return JSONResponse({})
            return _completion(self.model_name, reply, usage, logprobs)

        return app

    async def _stream(self, reply: Reply, usage: dict[str, int], logprobs: dict[str, Any] | None):
        chunk_id = "chatcmpl-" + uuid.uuid4().hex[:12]

        def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            if finish and logprobs:
                choice["logprobs"] = logprobs
            payload = {
                "id": chunk_id,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": self.model_name,
                "choices": [choice],
                **extra,
            }
            return f"data: {json.dumps(payload)}\n\n"

        try:
            yield chunk({"role": "assistant"})
            if reply.hang:
                while True:
                    yield chunk({"content": "and on "})
                    await asyncio.sleep(0.02)
            if reply.content:
                for start in range(0, len(reply.content), 16):
                    yield chunk({"content": reply.content[start:start + 16]})
            for index, item in enumerate(reply.tool_calls or []):
                yield chunk({"tool_calls": [{
                    "index": index,
                    "id": f"call_{uuid.uuid4().hex[:8]}",
                    "type": "function",
                    "function": {"name": item["name"], "arguments": ""},
                }]})
                yield chunk({"tool_calls": [{
                    "index": index, "function": {"arguments": _raw_arguments(item)},
                }]})
            yield chunk({}, _finish(reply))
            payload = {"id": chunk_id, "object": "chat.completion.chunk", "choices": [],
                       "usage": usage}
            yield f"data: {json.dumps(payload)}\n\n"
            yield "data: [DONE]\n\n"
        except (asyncio.CancelledError, GeneratorExit):
            self.disconnects += 1
            raise

    def __enter__(self) -> "ScriptedModel":
        self._server = ThreadedServer(self.app(), port=self.port, lifespan="off",
                                      name="scripted model")
        self._server.start()
        self.port = self._server.port
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server
        self._server.stop()


async def _left_within(request: Request, seconds: float) -> bool:
    """Whether the client went away before `seconds` passed (checked every 20 ms)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if await request.is_disconnected():
            return True
        await asyncio.sleep(min(0.02, max(0.0, deadline - time.monotonic())))
    return False


def _raw_arguments(item: dict[str, Any]) -> str:
    arguments = item["arguments"]
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _finish(reply: Reply) -> str:
    return reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")


def _usage(body: dict[str, Any], reply: Reply) -> dict[str, int]:
    prompt = len(json.dumps(body.get("messages", []))) + len(json.dumps(body.get("tools", [])))
    completion = len(reply.content or "") + len(json.dumps(reply.tool_calls or []))
    return {
        "prompt_tokens": prompt // 4,
        "completion_tokens": max(1, completion // 4),
        "total_tokens": prompt // 4 + max(1, completion // 4),
    }


def _completion(model: str, reply: Reply, usage: dict[str, int],
                logprobs: dict[str, Any] | None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": f"call_{uuid.uuid4().hex[:8]}",
                "type": "function",
                "function": {"name": item["name"], "arguments": _raw_arguments(item)},
            }
            for item in reply.tool_calls
        ]
    return {
        "id": "chatcmpl-" + uuid.uuid4().hex[:12],
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": _finish(reply),
                     **({"logprobs": logprobs} if logprobs else {})}],
        "usage": usage,
    }


def _decision_choices(body: dict[str, Any]) -> list[str] | None:
    """The choices of the lane's decision question (agent/decide.py, in the agent's turn or
    after a proxy client's conversation), known by its reply schema; None for any other request."""
    fmt = body.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema") or {} if isinstance(fmt, dict) else {}
    choices = ((schema.get("properties") or {}).get("next") or {}).get("enum")
    return choices if isinstance(choices, list) else None


def _reading_choices(body: dict[str, Any]) -> list[str] | None:
    """The names the lane's reading of an answer admits, known by its reply schema."""
    fmt = body.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema") or {} if isinstance(fmt, dict) else {}
    done = (schema.get("properties") or {}).get("done") or {}
    items = (done.get("items") or {}).get("enum") or done.get("enum")  # a list, or one choice
    return items if isinstance(items, list) else None


def literal_reading(body: dict[str, Any]) -> Reply:
    """A reader that lists the granted tools the reply names as words, and nothing else."""
    question = body["messages"][-1]["content"]
    reply = question.split("The assistant's reply:", 1)[-1]
    words = set(re.findall(r"[\w-]+(?:\.[\w-]+)*", reply))
    named = [name for name in _reading_choices(body) or [] if name in words]
    return Reply(content=json.dumps({"done": named}))


def _yes(probability: float) -> Reply:
    """A one-token yes/no answer, its yes-probability in the first token's logprobs."""
    return Reply(content="yes" if probability >= 0.5 else "no",
                 first_token_logprobs={"yes": math.log(max(probability, 1e-9)),
                                       "no": math.log(max(1 - probability, 1e-9))})


def _asks(body: dict[str, Any], instruction: str, *, prefix: bool = False) -> bool:
    messages = body.get("messages") or [{}]
    content = messages[0].get("content") or ""
    return content.startswith(instruction) if prefix else content == instruction


def _answer(answer: str | Reply | Callable[[dict[str, Any]], Reply], body: dict[str, Any]) -> Reply:
    return answer(body) if callable(answer) else answer if isinstance(answer, Reply) else Reply(answer)


def _logprobs(reply: Reply) -> dict[str, Any] | None:
    """OpenAI's `logprobs` for a reply whose first token's alternatives are scripted."""
    if not reply.first_token_logprobs:
        return None
    ranked = sorted(reply.first_token_logprobs.items(), key=lambda item: -item[1])
    first = {"token": ranked[0][0], "logprob": ranked[0][1], "bytes": list(ranked[0][0].encode())}
    top = [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in ranked]
    return {"content": [{**first, "top_logprobs": top}]}


def several_allowed(body: dict[str, Any]) -> list[str] | None:
    """The tools a reply of several calls may call, where the request's reply schema is a list of
    calls (the lane's parallel_calls.several_calls_schema); None where the reply is at most one call."""
    fmt = body.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema") or {} if isinstance(fmt, dict) else {}
    if "first" in schema.get("$defs", {}):  # a list that begins with a call to the decision's tool
        first, items = schema["$defs"]["first"], schema["$defs"]["call"]
    elif schema.get("type") == "array":
        first, items = None, schema.get("items") or {}
    else:
        return None
    names = [variant["properties"]["name"]["const"] for variant in [*([first] if first else []),
                                                                    *items.get("anyOf", [items])]]
    return list(dict.fromkeys(names))


def calls_as_held(*calls: tuple[str, dict[str, Any]]) -> Callable[[dict[str, Any]], Reply]:
    """A model that would make every one of `calls` but, as decoding under the request's
    constraint does, writes what that admits: all of them (those the schema names) as the JSON list
    of a reply of several calls; else one call, to the tool a named tool_choice forces (or the
    first); never more than one call where no list is asked for."""
    def reply(body: dict[str, Any]) -> Reply:
        allowed = several_allowed(body)
        if allowed is not None:
            return Reply(content=json.dumps([{"name": name, "arguments": arguments}
                                             for name, arguments in calls if name in allowed]))
        choice = body.get("tool_choice")
        named = choice["function"]["name"] if isinstance(choice, dict) else None
        name, arguments = next(((n, a) for n, a in calls if n == named), calls[0])
        return Reply(tool_calls=[{"name": name, "arguments": arguments}])
    return reply


def demanded(body: dict[str, Any]) -> Any:
    """What a request holds its reply to: `{"several": names}` for a list of calls to those tools
    (several_allowed), else its tool_choice (None where the reply is free)."""
    allowed = several_allowed(body)
    return {"several": allowed} if allowed is not None else body.get("tool_choice")


def forced_name(body: dict[str, Any]) -> str | None:
    """The tool a forced reply leads with: a named tool_choice's, or the first of a list of calls'."""
    allowed = several_allowed(body)
    if allowed:
        return allowed[0]
    choice = body.get("tool_choice")
    return choice["function"]["name"] if isinstance(choice, dict) else None
