"""What the upstream llm service honours, asked of it rather than assumed.

Every turn leans on three things an OpenAI-compatible server may or may not do: output held to a
JSON schema (`response_format` json_schema: the decision, the reading), a call forced by a named
`tool_choice`, and `logprobs` (the yes/no of the second look). The lane's own `lane llm` does all
three; another server may ignore `response_format` and answer free text, and then every decision
read as "answer" and no tool ever ran, with nothing telling the user why. So the shim asks, with
a few tiny requests (`probe`), and the llm client shapes each constrained call into what is
there (agent/constrained.py); /health and the log say what was found.

A feature counts as honoured only when the reply shows it: a schema's one allowed value against a
prompt that asks for something else, the forced tool against a prompt that names the other one,
log-probabilities present. A 4xx answer to a probe is a "no"; anything else that fails (the
service unreachable, a timeout) leaves the answer unknown, to be asked again.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any, Awaitable, Callable, Protocol

from .toolcalls import extract_calls

# The first message of every probe: how a test's scripted server tells a probe from a turn.
PROBE_SYSTEM = "You are being checked for which request options you honour."
PROBE_TOOLS = ("lane_probe_a", "lane_probe_b")
PROBE_VALUE = "ok"
# Enough for `{"probe": "ok"}` or an argument-less call written as `<tool_call>` text; the
# probes ask for nothing longer.
PROBE_MAX_TOKENS = 32


class ProbeReply(Protocol):
    """What a probe reads of a reply (llm_client.ModelReply is one)."""

    @property
    def content(self) -> str: ...

    @property
    def tool_calls(self) -> Any: ...

    @property
    def logprobs(self) -> list[dict[str, float]]: ...


class Refused(Exception):
    """The service answered a probe with a 4xx: it does not take that option."""


Send = Callable[[dict[str, Any]], Awaitable[ProbeReply]]


@dataclass(frozen=True)
class Capabilities:
    """What the upstream honours. `tool_calls`: it calls an offered tool when asked to, natively
    or as a call written in text that the lane reads (toolcalls.extract_calls: the lane's own llm
    writes a forced call as `{"name": ..., "arguments": ...}`), whether or not it honours a
    named `tool_choice`; `tool_choice`: a call of the named tool comes back, in either form."""

    json_schema: bool = True
    tool_choice: bool = True
    tool_calls: bool = True
    logprobs: bool = True
    # The last token's hidden state from /v1/embeddings (the reading's probe, reading.probed).
    # Only the lane's own llm service declares it: another server's embeddings may be pooled or
    # normalised differently, and a probe fitted on one kind of state reads nothing in another.
    hidden_state: bool = False

    def paths(self) -> dict[str, str]:
        """How each kind of constrained call reaches this upstream (constrained.py's paths)."""
        decision = "schema" if self.json_schema else "tool" if self.tool_calls else "text"
        forced = "named" if self.tool_choice else "schema" if self.json_schema else \
            "offered" if self.tool_calls else "text"
        return {"decision": decision, "forced_call": forced, "yes_no": "logprobs" if self.logprobs else "off",
                "reading": "probe" if self.hidden_state else "list"}

    def report(self) -> dict[str, Any]:
        """/health's `capabilities` object."""
        return {**asdict(self), "paths": self.paths()}

    def summary(self) -> str:
        """One log line."""
        honoured = ", ".join(f"{name} {'yes' if value else 'no'}" for name, value in asdict(self).items())
        paths = ", ".join(f"{kind} as {path}" for kind, path in self.paths().items())
        return f"{honoured}; {paths}"


FULL = Capabilities()


def _asked(question: str, **options: Any) -> dict[str, Any]:
    return {"messages": [{"role": "system", "content": PROBE_SYSTEM}, {"role": "user", "content": question}],
            "max_tokens": PROBE_MAX_TOKENS, "temperature": 0.0, **options}


def _tool(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": "Does nothing.",
                                             "parameters": {"type": "object", "properties": {}}}}


# The probes, each a request body without model and stream (the client adds them).
SCHEMA_PROBE = _asked("Say hello in three words.", response_format={
    "type": "json_schema", "json_schema": {"name": "probe", "schema": {
        "type": "object", "properties": {"probe": {"enum": [PROBE_VALUE]}}, "required": ["probe"]}}})
CHOICE_PROBE = _asked(f"Call {PROBE_TOOLS[0]}.", tools=[_tool(name) for name in PROBE_TOOLS],
                      tool_choice={"type": "function", "function": {"name": PROBE_TOOLS[1]}})
CALL_PROBE = _asked(f"Call {PROBE_TOOLS[0]}.", tools=[_tool(PROBE_TOOLS[0])])
LOGPROBS_PROBE = {**_asked("Say yes."), "max_tokens": 1, "logprobs": True, "top_logprobs": 2}


async def probe(send: Send) -> Capabilities:
    """Asks the upstream, through `send` (one chat completion; Refused for a 4xx), what it
    honours: three or four requests of at most PROBE_MAX_TOKENS tokens each."""
    schema = await _honoured(send, SCHEMA_PROBE, _holds_schema)
    called = await _called(send, CHOICE_PROBE)
    tool_choice = called == PROBE_TOOLS[1]
    tool_calls = called is not None or await _called(send, CALL_PROBE) is not None
    logprobs = await _honoured(send, LOGPROBS_PROBE, lambda reply: bool(reply.logprobs))
    return Capabilities(json_schema=schema, tool_choice=tool_choice, tool_calls=tool_calls, logprobs=logprobs,
                        hidden_state=False)


async def _honoured(send: Send, body: dict[str, Any], shows: Callable[[ProbeReply], bool]) -> bool:
    try:
        return shows(await send(body))
    except Refused:
        return False


async def _called(send: Send, body: dict[str, Any]) -> str | None:
    """The name of the reply's first call, native or written as text; None without one (or for
    a 4xx)."""
    try:
        reply = await send(body)
    except Refused:
        return None
    offered = {tool["function"]["name"] for tool in body["tools"]}
    calls = [*(reply.tool_calls or []), *extract_calls(
        reply.content, lambda name: {"type": "object"} if name in offered else None)]
    return next((str(call.name) for call in calls), None)


def _holds_schema(reply: ProbeReply) -> bool:
    try:
        value = json.loads(reply.content.strip())
    except json.JSONDecodeError:
        return False
    return isinstance(value, dict) and value.get("probe") == PROBE_VALUE
