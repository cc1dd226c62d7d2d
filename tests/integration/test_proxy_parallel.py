"""Several calls in one proxy reply (issue 55, item 7): a request for the same tool on several
inputs, or for several tools, gets every call back, each decoded under its tool's schema, in each
wire format (chat completions' `tool_calls`, Anthropic's `tool_use` blocks, Responses'
`function_call` items), streamed or not; a client that disallows parallel calls gets one."""

import json

import pytest

from tests.fakes.scripted_model import Reply, calls_as_held, several_allowed
from tests.integration.test_api_chat import running_lane, sse_events
from tests.integration.test_proxy import TIME, WEATHER

THREE_CITIES = [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Rome"}),
                ("get_weather", {"city": "Oslo"})]
ASK = [{"role": "user", "content": "What is the weather in Paris, Rome and Oslo?"}]
WEATHER_PICKED = Reply(content='{"next": "get_weather"}')


def chat_calls(reply):
    return [(c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in reply["choices"][0]["message"]["tool_calls"]]


def test_the_same_tool_on_several_inputs_is_every_call(tmp_path):
    with running_lane(tmp_path, calls_as_held(*THREE_CITIES), decision=WEATHER_PICKED) as lane:
        response = lane.chat(messages=ASK, tools=[WEATHER, TIME])
        reply = response.json()
        assert reply["choices"][0]["finish_reason"] == "tool_calls"
        assert chat_calls(reply) == THREE_CITIES
        ids = [c["id"] for c in reply["choices"][0]["message"]["tool_calls"]]
        assert len(set(ids)) == 3
        # The decision's tool leads the list of calls the reply may hold; each under its schema.
        sent = lane.model.requests[0]
        assert several_allowed(sent) == ["get_weather", "get_time"]
        schema = sent["response_format"]["json_schema"]["schema"]
        assert schema["$defs"]["first"]["properties"] == {"name": {"const": "get_weather"},
                                                          "arguments": WEATHER["function"]["parameters"]}
        assert "tool_choice" not in sent
        assert lane.rows("SELECT tool_name, arguments FROM returned_calls ORDER BY id") == [
            ("get_weather", '{"city": "Paris"}'), ("get_weather", '{"city": "Rome"}'),
            ("get_weather", '{"city": "Oslo"}')]


def test_several_tools_in_one_reply_and_a_repeated_call_once(tmp_path):
    both = [("get_weather", {"city": "Paris"}), ("get_time", {"city": "Paris"}), ("get_weather", {"city": "Paris"})]
    with running_lane(tmp_path, calls_as_held(*both), decision=WEATHER_PICKED) as lane:
        ask = [{"role": "user", "content": "Weather and local time in Paris?"}]
        reply = lane.chat(messages=ask, tools=[WEATHER, TIME]).json()
        assert chat_calls(reply) == both[:2]


def test_a_call_that_guesses_what_an_earlier_call_of_the_reply_returns_is_not_returned(tmp_path):
    """A second call of one reply that needs the first's result writes values nobody gave ("find
    alice, then mail her": an address): it is kept out of the reply and recorded as refused; a
    second call whose values the request holds goes with the first."""
    find = {"type": "function", "function": {"name": "find_user", "parameters": {
        "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}}
    mail = {"type": "function", "function": {"name": "send_email", "parameters": {
        "type": "object", "properties": {"to": {"type": "string"}, "body": {"type": "string"}},
        "required": ["to", "body"]}}}
    guessed = [("find_user", {"name": "alice"}),
               ("send_email", {"to": "alice@example.com", "body": "Thank you for joining us."})]
    picked = Reply(content='{"next": "find_user"}')
    with running_lane(tmp_path, calls_as_held(*guessed), decision=picked) as lane:
        ask = [{"role": "user", "content": "Find the user named alice, then send her a welcome email."}]
        reply = lane.chat(messages=ask, tools=[find, mail]).json()
        assert chat_calls(reply) == guessed[:1]
        assert lane.rows("SELECT tool_name, status FROM tool_executions ORDER BY id") == [("send_email", "refused")]
        assert lane.rows("SELECT tool_name FROM returned_calls") == [("find_user",)]
        # given in the request, the same second call goes with the first
        told = [{"role": "user", "content": "Find the user named alice, then send alice@example.com a "
                 "welcome email saying: thank you for joining us."}]
        reply = lane.chat(messages=told, tools=[find, mail], user="second").json()
        assert chat_calls(reply) == guessed


def test_a_second_call_whose_words_a_request_without_spaces_holds_is_returned(tmp_path):
    """Japanese is written without spaces: the request's words are held inside one run of letters."""
    convert = {"type": "function", "function": {"name": "fx_convert", "parameters": {
        "type": "object", "properties": {"amount": {"type": "number"}, "from": {"type": "string"}},
        "required": ["amount", "from"]}}}
    both = [("fx_convert", {"amount": 100, "from": "米ドル"}), ("fx_convert", {"amount": 50, "from": "ユーロ"})]
    with running_lane(tmp_path, calls_as_held(*both), decision=Reply(content='{"next": "fx_convert"}')) as lane:
        ask = [{"role": "user", "content": "100米ドルと50ユーロをそれぞれ日本円に換算して。"}]
        assert chat_calls(lane.chat(messages=ask, tools=[convert]).json()) == both


def test_parallel_tool_calls_false_decodes_one_forced_call(tmp_path):
    with running_lane(tmp_path, calls_as_held(*THREE_CITIES), decision=WEATHER_PICKED) as lane:
        reply = lane.chat(messages=ASK, tools=[WEATHER, TIME], parallel_tool_calls=False).json()
        assert chat_calls(reply) == THREE_CITIES[:1]
        sent = lane.model.requests[0]
        assert several_allowed(sent) is None
        assert sent["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}


def test_a_named_tool_choice_admits_that_tool_alone_several_times(tmp_path):
    with running_lane(tmp_path, calls_as_held(*THREE_CITIES, ("get_time", {"city": "Rome"}))) as lane:
        named = {"type": "function", "function": {"name": "get_weather"}}
        reply = lane.chat(messages=ASK, tools=[WEATHER, TIME], tool_choice=named).json()
        assert chat_calls(reply) == THREE_CITIES
        assert several_allowed(lane.model.requests[0]) == ["get_weather"]


def test_streamed_chat_carries_every_call_as_its_own_delta(tmp_path):
    with running_lane(tmp_path, calls_as_held(*THREE_CITIES), decision=WEATHER_PICKED) as lane:
        events = sse_events(lane.chat(messages=ASK, tools=[WEATHER, TIME], stream=True).text)
        deltas = [e["choices"][0]["delta"] for e in events[:-1] if e["choices"]]
        calls = [c for d in deltas for c in d.get("tool_calls") or []]
        assert [(c["index"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
            (i, name, arguments) for i, (name, arguments) in enumerate(THREE_CITIES)]
        assert events[-2]["choices"][0]["finish_reason"] == "tool_calls"


ANTHROPIC_TOOLS = [{"name": t["function"]["name"], "description": t["function"]["description"],
                    "input_schema": t["function"]["parameters"]} for t in (WEATHER, TIME)]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_anthropic_messages_get_a_tool_use_block_per_call(tmp_path, stream):
    with running_lane(tmp_path, calls_as_held(*THREE_CITIES), decision=WEATHER_PICKED) as lane:
        body = {"model": "c", "max_tokens": 1024, "messages": ASK, "tools": ANTHROPIC_TOOLS, "stream": stream}
        response = lane.client.post("/v1/messages", json=body)
        assert response.status_code == 200, response.text
        if stream:
            events = [e for e in sse_events(response.text) if isinstance(e, dict)]
            starts = [e["content_block"] for e in events if e["type"] == "content_block_start"]
            inputs: dict[int, str] = {}
            for e in events:
                if e["type"] == "content_block_delta" and e["delta"]["type"] == "input_json_delta":
                    inputs[e["index"]] = inputs.get(e["index"], "") + e["delta"]["partial_json"]
            blocks = [(b["name"], json.loads(inputs[i])) for i, b in enumerate(starts) if b["type"] == "tool_use"]
            stop = next(e["delta"]["stop_reason"] for e in events if e["type"] == "message_delta")
        else:
            message = response.json()
            blocks = [(b["name"], b["input"]) for b in message["content"] if b["type"] == "tool_use"]
            stop = message["stop_reason"]
        assert blocks == THREE_CITIES and stop == "tool_use"


def test_anthropic_disable_parallel_tool_use_gets_one_block(tmp_path):
    with running_lane(tmp_path, calls_as_held(*THREE_CITIES), decision=WEATHER_PICKED) as lane:
        body = {"model": "c", "max_tokens": 1024, "messages": ASK, "tools": ANTHROPIC_TOOLS,
                "tool_choice": {"type": "auto", "disable_parallel_tool_use": True}}
        message = lane.client.post("/v1/messages", json=body).json()
        assert [(b["name"], b["input"]) for b in message["content"] if b["type"] == "tool_use"] == THREE_CITIES[:1]


RESPONSES_TOOLS = [{"type": "function", **t["function"]} for t in (WEATHER, TIME)]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_responses_get_a_function_call_item_per_call(tmp_path, stream):
    with running_lane(tmp_path, calls_as_held(*THREE_CITIES), decision=WEATHER_PICKED) as lane:
        body = {"model": "m", "input": ASK[0]["content"], "tools": RESPONSES_TOOLS, "stream": stream}
        response = lane.client.post("/v1/responses", json=body)
        assert response.status_code == 200, response.text
        if stream:
            events = [e for e in sse_events(response.text) if isinstance(e, dict)]
            output = next(e["response"]["output"] for e in events if e["type"] == "response.completed")
            done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
            assert [i["call_id"] for i in done] == [i["call_id"] for i in output]
        else:
            output = response.json()["output"]
        assert [(i["name"], json.loads(i["arguments"])) for i in output if i["type"] == "function_call"] == THREE_CITIES


def test_every_call_a_reply_may_hold_says_the_modes_its_schema_leaves_optional(tmp_path):
    """Seen with Hermes: terminal forced, a `memory` call written beside it without `action` failed
    in Hermes. Each tool a several-call reply may hold is decoded with its optional enums that have
    no default required, as the forced one is."""
    note = {"type": "function", "function": {"name": "note", "description": "Keep a note.", "parameters": {
        "type": "object", "required": ["text"], "properties": {
            "text": {"type": "string"}, "action": {"type": "string", "enum": ["add", "remove"]}}}}}
    with running_lane(tmp_path, calls_as_held(("get_weather", {"city": "Paris"})), decision=WEATHER_PICKED) as lane:
        lane.chat(messages=ASK, tools=[WEATHER, note])
        schema = lane.model.requests[0]["response_format"]["json_schema"]["schema"]
        [variant] = [v for v in schema["$defs"]["call"]["anyOf"] if v["properties"]["name"]["const"] == "note"]
        assert variant["properties"]["arguments"]["required"] == ["text", "action"]
