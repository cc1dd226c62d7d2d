"""The one place a constrained call meets what the upstream honours (agent/constrained.py), and
the probe that finds out (agent/capabilities.py), against replies written here."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from stack.agent.capabilities import FULL, PROBE_TOOLS, Capabilities, Refused, probe
from stack.agent.constrained import SCHEMA_INSTRUCTION, SCHEMA_TOOL, again, read, shape
from stack.agent.decide import decision_schema
from stack.agent.ledger import lever_on
from stack.agent.llm_client import ModelReply
from stack.agent.toolcalls import ToolCall

SCHEMA = decision_schema(["memory", "terminal"])
MESSAGES = [{"role": "system", "content": "Pick."}, {"role": "user", "content": "save 42"}]
MEMORY = {"type": "function", "function": {"name": "memory", "parameters": {
    "type": "object", "properties": {"content": {"type": "string"}}, "required": ["content"]}}}
TERMINAL = {"type": "function", "function": {"name": "terminal", "parameters": {"type": "object"}}}
FORCE_MEMORY = {"type": "function", "function": {"name": "memory"}}


def ask(caps: Capabilities, **options: Any):
    asked = {"tool_choice": None, "response_schema": None, "top_logprobs": None, **options}
    tools = asked.pop("tools", [])
    return shape(caps, MESSAGES, tools, **asked)


def test_a_full_upstream_gets_every_request_as_asked() -> None:
    decision = ask(FULL, response_schema=SCHEMA)
    forced = ask(FULL, tools=[MEMORY, TERMINAL], tool_choice=FORCE_MEMORY)
    yes_no = ask(FULL, top_logprobs=20)
    assert (decision.path, decision.response_schema, decision.tools, decision.messages) == \
        ("schema", SCHEMA, [], MESSAGES)
    assert (forced.path, forced.tool_choice, forced.tools, forced.response_schema) == \
        ("named", FORCE_MEMORY, [MEMORY, TERMINAL], None)
    assert (yes_no.path, yes_no.top_logprobs) == ("logprobs", 20)
    reply = ModelReply('{"next": "memory"}')
    assert read(decision, reply) is None and reply.content == '{"next": "memory"}' and reply.path == "schema"


def test_without_schema_support_the_decision_is_a_call_of_the_reply_tool() -> None:
    form = ask(Capabilities(json_schema=False), response_schema=SCHEMA)
    assert form.path == "tool" and form.response_schema is None
    assert form.tool_choice == {"type": "function", "function": {"name": SCHEMA_TOOL}}
    assert form.tools[-1]["function"]["parameters"] == SCHEMA
    reply = ModelReply("", [ToolCall("c1", SCHEMA_TOOL, '{"next": "terminal"}', "native")])
    assert read(form, reply) is None
    assert (json.loads(reply.content), reply.tool_calls, reply.path) == ({"next": "terminal"}, [], "tool")


def test_without_a_named_tool_choice_the_reply_tool_is_offered_alone_and_read_from_text_too() -> None:
    form = ask(Capabilities(json_schema=False, tool_choice=False), tools=[TERMINAL], response_schema=SCHEMA)
    assert [t["function"]["name"] for t in form.tools] == [SCHEMA_TOOL] and form.tool_choice is None
    written = ModelReply(f'<tool_call>{{"name": "{SCHEMA_TOOL}", "arguments": {{"next": "memory"}}}}</tool_call>')
    assert read(form, written) is None and json.loads(written.content) == {"next": "memory"}


def test_with_neither_the_json_is_read_out_of_free_text_and_validated() -> None:
    form = ask(Capabilities(json_schema=False, tool_choice=False, tool_calls=False), response_schema=SCHEMA)
    assert form.path == "text" and form.tools == [] and form.messages[0] == MESSAGES[0]
    assert form.messages[-1]["content"].startswith("save 42\n\n" + SCHEMA_INSTRUCTION)
    good = ModelReply('Sure! {"next": "memory"} is my pick.')
    assert read(form, good) is None and json.loads(good.content) == {"next": "memory"}
    # a value outside the enum, or no JSON at all, is a problem worth one more try
    bad = ModelReply('{"next": "calendar"}')
    problem = read(form, bad)
    assert problem and "calendar" in problem
    retry = again(form, bad, problem)
    assert retry.messages[-2] == {"role": "assistant", "content": '{"next": "calendar"}'}
    assert problem in retry.messages[-1]["content"] and SCHEMA_INSTRUCTION in retry.messages[-1]["content"]
    assert read(form, ModelReply("I think memory.")) == "it holds no JSON object"


def test_a_forced_call_without_named_tool_choice() -> None:
    # schema support: asked as one call's JSON, handed back as a call
    form = ask(Capabilities(tool_choice=False), tools=[MEMORY, TERMINAL], tool_choice=FORCE_MEMORY)
    assert (form.path, form.tool_choice) == ("schema", None)
    assert form.response_schema and form.response_schema["properties"]["name"] == {"const": "memory"}
    reply = ModelReply('{"name": "memory", "arguments": {"content": "42"}}')
    assert read(form, reply) is None
    assert [(c.name, json.loads(c.arguments), c.origin) for c in reply.tool_calls] == \
        [("memory", {"content": "42"}, "native")]
    assert reply.content == ""
    # calls but no schema: that tool offered alone
    offered = ask(Capabilities(json_schema=False, tool_choice=False), tools=[MEMORY, TERMINAL],
                  tool_choice=FORCE_MEMORY)
    assert (offered.path, offered.tools, offered.tool_choice) == ("offered", [MEMORY], None)
    # neither: read out of text, marked as salvaged from text
    text = ask(Capabilities(json_schema=False, tool_choice=False, tool_calls=False), tools=[MEMORY, TERMINAL],
               tool_choice=FORCE_MEMORY)
    reply = ModelReply('I would do this: {"name": "memory", "arguments": {"content": "42"}}')
    assert text.path == "text" and read(text, reply) is None
    assert [(c.name, c.origin) for c in reply.tool_calls] == [("memory", "content")]


def test_without_logprobs_none_are_asked_and_the_yes_no_lever_is_off() -> None:
    caps = Capabilities(logprobs=False)
    assert ask(caps, top_logprobs=20).top_logprobs is None
    assert not lever_on("fit", caps) and lever_on("fit", FULL)
    assert lever_on("decide", caps)


class Server:
    """A scripted upstream for the probe: what it honours decides its replies."""

    def __init__(self, *, schema: bool, choice: bool, calls: bool, logprobs: bool, refuse: bool = False):
        self.schema, self.choice, self.calls, self.logprobs, self.refuse = schema, choice, calls, logprobs, refuse
        self.bodies: list[dict[str, Any]] = []

    async def send(self, body: dict[str, Any]) -> ModelReply:
        self.bodies.append(body)
        if self.refuse and ("response_format" in body or "logprobs" in body):
            raise Refused("400")
        if "response_format" in body and self.schema:
            return ModelReply('{"probe": "ok"}')
        if body.get("tools") and self.calls:
            forced = body.get("tool_choice", {}).get("function", {}).get("name") if self.choice else None
            return ModelReply("", [ToolCall("c", forced or PROBE_TOOLS[0], "{}", "native")])
        if body.get("logprobs") and self.logprobs:
            return ModelReply("yes", logprobs=[{"yes": -0.1, "no": -2.0}])
        return ModelReply('Hello there, friend! {"probe": "nope"}')


@pytest.mark.parametrize("server, expected, requests", [
    (Server(schema=True, choice=True, calls=True, logprobs=True), FULL, 3),
    (Server(schema=False, choice=True, calls=True, logprobs=True), Capabilities(json_schema=False), 3),
    (Server(schema=False, choice=False, calls=True, logprobs=False),
     Capabilities(json_schema=False, tool_choice=False, logprobs=False), 3),
    # 4xx to response_format and logprobs, and no calls: the plain-call probe is asked too
    (Server(schema=True, choice=False, calls=False, logprobs=False, refuse=True),
     Capabilities(json_schema=False, tool_choice=False, tool_calls=False, logprobs=False), 4),
])
def test_the_probe_finds_what_the_server_honours(server: Server, expected: Capabilities, requests: int) -> None:
    assert asyncio.run(probe(server.send)) == expected
    assert len(server.bodies) == requests
    assert all(body["max_tokens"] <= 32 for body in server.bodies)


def test_a_model_writing_a_forced_call_as_text_honours_tool_choice() -> None:
    """The lane's own llm writes a forced call as `{"name": ..., "arguments": ...}` text."""
    async def send(body: dict[str, Any]) -> ModelReply:
        if body.get("tool_choice"):
            return ModelReply(json.dumps({"name": body["tool_choice"]["function"]["name"], "arguments": {}}))
        return ModelReply('{"probe": "ok"}' if "response_format" in body else "yes",
                          logprobs=[{"yes": -0.1}] if body.get("logprobs") else [])

    assert asyncio.run(probe(send)) == FULL


def test_a_reply_tool_call_without_a_valid_value_never_reaches_the_caller_as_a_call() -> None:
    form = ask(Capabilities(json_schema=False), tools=[TERMINAL], response_schema=SCHEMA)
    reply = ModelReply("", [ToolCall("c1", SCHEMA_TOOL, "I could not decide.", "native")])
    assert read(form, reply) == "it holds no JSON object"
    assert (reply.tool_calls, reply.content) == ([], "I could not decide.")
    # a call of an offered tool instead of the reply tool is the caller's to read
    real = ModelReply("", [ToolCall("c2", "terminal", "{}", "native")])
    assert read(form, real) is None and [c.name for c in real.tool_calls] == ["terminal"]


def test_asked_once_more_the_model_is_told_how_to_reply_on_its_path() -> None:
    for caps in (Capabilities(json_schema=False), Capabilities(json_schema=False, tool_choice=False)):
        form = ask(caps, response_schema=SCHEMA)
        retry = again(form, ModelReply("memory"), "it holds no JSON object")
        told = retry.messages[-1]["content"]
        assert told.startswith("That reply was not usable: it holds no JSON object")
        assert told.endswith(f"Reply by calling the tool {SCHEMA_TOOL}; its arguments are your reply.")


def test_a_list_of_calls_goes_as_the_reply_tools_one_property_its_refs_kept() -> None:
    """Proxy mode's several calls (toolcalls.several_calls_schema) are a list, with `$defs`: a
    tool's parameters are an object, so the list is wrapped, and read back unwrapped."""
    from stack.agent.parallel_calls import several_calls_schema

    schema = several_calls_schema([MEMORY, TERMINAL], first="memory")
    assert schema is not None and "$defs" in schema
    form = ask(Capabilities(json_schema=False), tools=[MEMORY, TERMINAL], response_schema=schema)
    parameters = form.tools[-1]["function"]["parameters"]
    assert parameters["type"] == "object" and parameters["$defs"] == schema["$defs"]
    calls = [{"name": "memory", "arguments": {"content": "a"}}, {"name": "terminal", "arguments": {}}]
    reply = ModelReply("", [ToolCall("c", SCHEMA_TOOL, json.dumps({"reply": calls}), "native")])
    assert read(form, reply) is None and json.loads(reply.content) == calls
    # in words: the list read out of the text, and one that breaks the schema is a problem
    text = ask(Capabilities(json_schema=False, tool_choice=False, tool_calls=False), response_schema=schema)
    words = ModelReply(f"Here: {json.dumps(calls)}")
    assert read(text, words) is None and json.loads(words.content) == calls
    assert read(text, ModelReply('[{"name": "terminal", "arguments": {}}]')) is not None  # memory must lead
