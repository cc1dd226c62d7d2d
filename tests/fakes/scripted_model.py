"""A scripted OpenAI-compatible model server for deterministic tests.

It speaks real HTTP on loopback (stream and non-stream chat completions, /v1/models), so the shim
under test goes through its real client, timeouts and cancellation. A script is a list of Replies
served in order, or a function from the request body to a Reply.

`honours` says which request options it takes, as servers differ: `json_schema` (response_format),
`tool_choice` (a named one), `tool_calls` (native calls; without it, a call is written as
`<tool_call>` text with `text_calls`, as the lane's own llm does, else as bare JSON amid words, and
asked to call a tool it declines) and `logprobs`. What it does not honour it ignores, as such a server does; it
answers the lane's probes (agent/capabilities.py) accordingly, apart from the script.
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

from stack.agent.capabilities import PROBE_SYSTEM
from stack.agent.constrained import SCHEMA_INSTRUCTION, SCHEMA_TOOL
from stack.agent.decide import ANSWER, DECLINE_SYSTEM, FAILED_SYSTEM, FIT_SYSTEM
from stack.agent.english import SYSTEM as ENGLISH_SYSTEM
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
EVERYTHING = frozenset({"json_schema", "tool_choice", "tool_calls", "logprobs"})


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
    # this yes-probability (per tool name where it is a dict: 0.05 for a tool it does not name), or
    # by default as a model that follows its script would: high when its next scripted reply calls
    # that tool, low otherwise. Kept apart in `fit_requests`.
    fit: float | dict[str, float] | None = None
    fit_requests: list[dict[str, Any]] = field(default_factory=list)
    # Proxy mode asks whether a reply in words declines the request or tells the user how
    # (decide.decline_probability): answered with this yes-probability, by default that it does
    # not. Kept apart in `decline_requests`.
    declines: float = 0.05
    decline_requests: list[dict[str, Any]] = field(default_factory=list)
    # Proxy mode asks whether the call just answered failed, and whether it did its job
    # (decide.failure_probability): answered with this yes-probability and its complement, by
    # default that it did not fail. Kept apart in `failed_requests`.
    failed: float = 0.05
    failed_requests: list[dict[str, Any]] = field(default_factory=list)
    # The lane's reading of which actions an answer reports as done (agent/reading.py): answered
    # with this (literal_reading: the granted tools the reply names), by default that the reply
    # reports nothing. Kept apart in `reading_requests`.
    reading: str | Reply | Callable[[dict[str, Any]], Reply] | None = None
    reading_requests: list[dict[str, Any]] = field(default_factory=list)
    # The lane asks for a request in another language in English (agent/english.py): answered
    # with this translation (or what this function makes of the question), by default the
    # message as it is. Kept apart in `english_requests`.
    english: str | Reply | Callable[[dict[str, Any]], Reply] | None = None
    english_requests: list[dict[str, Any]] = field(default_factory=list)
    authorizations: list[str | None] = field(default_factory=list)  # per request, as sent
    # The request options it honours (the module's docstring); the lane's probes of them are
    # answered apart from the script and kept in `probe_requests`.
    honours: frozenset[str] = EVERYTHING
    probe_requests: list[dict[str, Any]] = field(default_factory=list)
    # As the lane's own llm service: these names declared on GET /v1/lane/warm (wire.HONOURED),
    # which the shim takes instead of probing; None: no such route (404), as another server.
    declares: tuple[str, ...] | None = None
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
        asked = re.search(r"^Function: (\S+)", question["messages"][-1]["content"], re.MULTILINE)
        probability = self.fit.get(asked.group(1) if asked else "", 0.05) if isinstance(self.fit, dict) else self.fit
        if probability is None:
            upcoming = self.script[self._served] if isinstance(self.script, list) and \
                self._served < len(self.script) else None
            calls = [c["name"] for c in upcoming.tool_calls or []] if upcoming else []
            probability = 0.95 if asked and asked.group(1) in calls else 0.05
        return _yes(probability)

    def _english(self, body: dict[str, Any]) -> Reply:
        """The rendering under its grammar: `english` (a string is the translation), by default
        the text to translate as it is."""
        if self.english is not None and not isinstance(self.english, str):
            return _answer(self.english, body)
        asked = body["messages"][-1]["content"]
        given = self.english if self.english is not None else asked.split('"""')[1].strip()
        return Reply(json.dumps({"english": given}))

    def _lane_question(self, body: dict[str, Any]) -> Reply | None:
        """The answer to one of the lane's own questions (a probe of what it honours, reading,
        decision, second look, whether a reply declines), each kept apart; None for any other
        request."""
        if _asks(body, PROBE_SYSTEM):
            self.probe_requests.append(body)
            return self._probed(body)
        if _reading_choices(body) is not None:
            self.reading_requests.append(body)
            return _answer(self.reading, body) if self.reading is not None else Reply('{"done": []}')
        if _decision_choices(body) is not None:
            self.decide_requests.append(body)
            return _answer(self.decision, body) if self.decision is not None else self._follow(body)
        if _asks(body, ENGLISH_SYSTEM):
            self.english_requests.append(body)
            return self._english(body)
        if _asks(body, FIT_SYSTEM):
            self.fit_requests.append(body)
            return self._fit(body)
        if _asks(body, DECLINE_SYSTEM):
            self.decline_requests.append(body)
            return _yes(self.declines)
        if _asks(body, FAILED_SYSTEM):
            self.failed_requests.append(body)  # "did it fail?" and "did it do its job?": the two agree
            return _yes(1.0 - self.failed if "do its job" in body["messages"][-1]["content"] else self.failed)
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

        if self.declares is not None:
            @app.get("/v1/lane/warm")
            async def warmed() -> dict[str, Any]:
                return {"prefixes": [], "honours": list(self.declares)}

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> Any:
            body = self._as_seen(await request.json())
            reply = self._lane_question(body)
            if reply is None:
                self.requests.append(body)
                self.authorizations.append(request.headers.get("authorization"))
                reply = self.next_reply(body)
            reply = self._delivered(body, reply)
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

    def _as_seen(self, body: dict[str, Any]) -> dict[str, Any]:
        """The request without the options it does not honour: they are ignored."""
        ignored = {"json_schema": ("response_format",), "tool_choice": ("tool_choice",),
                   "logprobs": ("logprobs", "top_logprobs")}
        dropped = {key for option, keys in ignored.items() if option not in self.honours for key in keys}
        return {key: value for key, value in body.items() if key not in dropped}

    def _probed(self, body: dict[str, Any]) -> Reply:
        """A probe answered as a model with these options would: the schema's value, the forced
        tool (else, making calls, the tool the message names), "yes" with its alternatives."""
        schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema")
        if schema:
            return Reply(json.dumps(_instance(schema)))
        offered = [t["function"]["name"] for t in body.get("tools") or []]
        if offered:
            forced = ((body.get("tool_choice") or {}).get("function") or {}).get("name") \
                if isinstance(body.get("tool_choice"), dict) else None
            asked = body["messages"][-1]["content"]
            if not {"tool_calls", "text_calls"} & self.honours:
                return Reply("I cannot call tools.")
            return call(forced or next((n for n in offered if n in asked), offered[0]), {})
        return Reply("yes", first_token_logprobs={"yes": -0.05, "no": -3.0})

    def _delivered(self, body: dict[str, Any], reply: Reply) -> Reply:
        """The reply in the form the request's reply schema came in (a call of the lane's reply
        tool, or JSON amid words); calls as text where it makes no native ones."""
        form = _schema_form(body)
        if form == "tool" and reply.content and not reply.tool_calls:
            reply = Reply(tool_calls=[{"name": SCHEMA_TOOL, "arguments": reply.content}],
                          delay_s=reply.delay_s, hang=reply.hang)
        elif form == "text" and reply.content and not reply.hang:
            reply = Reply(f"Sure, here it is:\n{reply.content}", delay_s=reply.delay_s)
        if reply.tool_calls and "tool_calls" not in self.honours:
            calls = [json.dumps({"name": c["name"], "arguments": _parsed(c)}) for c in reply.tool_calls]
            written = "".join(f"<tool_call>{c}</tool_call>" for c in calls) if "text_calls" in self.honours \
                else "I would do this: " + " ".join(calls)
            reply = Reply((reply.content or "") + written, delay_s=reply.delay_s, hang=reply.hang)
        return reply

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


def reply_schema(body: dict[str, Any]) -> dict[str, Any]:
    """The schema the request holds its reply to, whichever form it came in (agent/constrained.py):
    `response_format`, the parameters of the lane's reply tool, or written after the request."""
    fmt = body.get("response_format") or {}
    if isinstance(fmt, dict) and (fmt.get("json_schema") or {}).get("schema"):
        return fmt["json_schema"]["schema"]
    return _schema_tool(body) or _written_schema(body) or {}


def _schema_form(body: dict[str, Any]) -> str | None:
    if isinstance(body.get("response_format"), dict):
        return "schema"
    return "tool" if _schema_tool(body) else "text" if _written_schema(body) else None


def _schema_tool(body: dict[str, Any]) -> dict[str, Any] | None:
    return next((t["function"].get("parameters") for t in body.get("tools") or []
                 if t["function"]["name"] == SCHEMA_TOOL), None)


def _written_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    messages = body.get("messages") or []
    content = messages[-1].get("content") if messages else None
    if not isinstance(content, str) or SCHEMA_INSTRUCTION not in content:
        return None
    return json.loads(content.rsplit(SCHEMA_INSTRUCTION, 1)[1].strip().splitlines()[0])


def _instance(schema: dict[str, Any]) -> Any:
    """The simplest value a schema admits (its first choice, its required properties)."""
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    if schema.get("type") == "array":
        return []
    if schema.get("type") == "string":
        return ""
    return {key: _instance(schema.get("properties", {}).get(key, {})) for key in schema.get("required", [])}


def _parsed(item: dict[str, Any]) -> Any:
    arguments = item["arguments"]
    return json.loads(arguments) if isinstance(arguments, str) else arguments


def _decision_choices(body: dict[str, Any]) -> list[str] | None:
    """The choices of the lane's decision question (agent/decide.py, in the agent's turn or
    after a proxy client's conversation), known by its reply schema; None for any other request."""
    schema = reply_schema(body)
    choices = ((schema.get("properties") or {}).get("next") or {}).get("enum")
    return choices if isinstance(choices, list) else None


def _reading_choices(body: dict[str, Any]) -> list[str] | None:
    """The names the lane's reading of an answer admits, known by its reply schema."""
    schema = reply_schema(body)
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
