"""The official OpenAI Python SDK's Responses API (`client.responses.create`) against the shim's
`POST /v1/responses`, configured as for chat completions (tests/integration/test_clients_openai.py):
base URL `<shim>/v1`, the lane's key."""

import json

import pytest

from tests.fakes.scripted_model import Reply, call, demanded, text
from tests.integration.test_api_chat import running_lane
from tests.integration.test_clients_openai import CLIENT_TOOLS, KEY, TWO_CALLS, sdk

openai = pytest.importorskip("openai", reason="the clients extra is not installed")

TOOLS = [{"type": "function", "name": name, "description": description, "strict": False,
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
         for name, description in (("get_weather", "Current weather for a city."),
                                   ("get_time", "Local time in a city."))]
ASK = "What is the weather in Paris?"


def final_response(client, *, stream: bool, **options):
    if not stream:
        return client.responses.create(model="fallback-lane", **options)
    with client.responses.stream(model="fallback-lane", **options) as live:
        return live.get_final_response()


def test_text_input_gets_the_agent_endpoints_answer(tmp_path):
    with running_lane(tmp_path, [call("add", {"a": 2, "b": 3}), text("It is 5.")], api_key=KEY) as lane:
        raw = sdk(lane).responses.with_raw_response.create(
            model="fallback-lane", input="What is 2+3?", instructions="Be brief.",
            reasoning={"effort": "low"}, metadata={"run": "1"})
        response = raw.parse()
        session = raw.headers["x-session-id"]

        assert response.output_text == "It is 5."
        assert (response.status, response.object, response.model) == ("completed", "response", "fallback-lane")
        assert response.instructions == "Be brief."
        prompt, completion = lane.rows(
            "SELECT sum(p), sum(c) FROM (SELECT prompt_tokens p, completion_tokens c FROM messages"
            " WHERE session_id = ?1 AND role = 'assistant' UNION ALL"
            " SELECT prompt_tokens, completion_tokens FROM lane_calls WHERE session_id = ?1)", session)[0]
        assert (response.usage.input_tokens, response.usage.output_tokens) == (prompt, completion)
        assert response.usage.input_tokens_details.cached_tokens == 0
        assert lane.rows("SELECT tool_name, status FROM tool_executions WHERE session_id = ?",
                         session) == [("add", "ok")]
        assert lane.history(session)[:2] == [("system", "Be brief."), ("user", "What is 2+3?")]
        assert lane.rows("SELECT session_id FROM responses WHERE id = ?", response.id) == [(session,)]


def test_streamed_answer_comes_as_response_events(tmp_path):
    with running_lane(tmp_path, [text("Hello there."), text("Hello there.")], api_key=KEY) as lane:
        client = sdk(lane)
        events = list(client.responses.create(model="fallback-lane", input=ASK, stream=True))
        final = final_response(client, stream=True, input=ASK)

    assert [e.type for e in events] == [
        "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.done", "response.content_part.done",
        "response.output_item.done", "response.completed"]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[4].delta == "Hello there."
    assert events[-1].response.output_text == "Hello there." and events[-1].response.usage.output_tokens > 0
    assert final.output_text == "Hello there."


def tool_loop(client, *, stream: bool, chained: bool) -> tuple[str, list[str]]:
    """The Responses tool loop: run each function_call, send function_call_output items back, either
    with the whole conversation (stateless) or only the outputs and `previous_response_id`."""
    conversation: list = [{"role": "user", "content": "Weather and time in Paris?"}]
    new_items, previous, ran = conversation, None, []
    for _ in range(5):
        options = {"input": new_items if chained else conversation, "tools": TOOLS}
        if chained and previous:
            options["previous_response_id"] = previous
        response = final_response(client, stream=stream, **options)
        calls = [item for item in response.output if item.type == "function_call"]
        if not calls:
            return response.output_text, ran
        outputs = []
        for item in calls:
            ran.append(item.name)
            outputs.append({"type": "function_call_output", "call_id": item.call_id,
                            "output": CLIENT_TOOLS[item.name](**json.loads(item.arguments))})
        conversation += [*(item.model_dump(exclude_none=True) for item in calls), *outputs]
        new_items, previous = outputs, response.id
    raise AssertionError("the tool loop did not end")


@pytest.mark.parametrize("chained", [False, True], ids=["stateless", "previous_response_id"])
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_function_calls_then_outputs_get_an_answer(tmp_path, stream, chained):
    with running_lane(tmp_path, TWO_CALLS, api_key=KEY) as lane:
        answer, ran = tool_loop(sdk(lane), stream=stream, chained=chained)
        assert answer == "Sunny, and it is noon."
        assert ran == ["get_weather", "get_time"]
        # One proxy session holds both returned calls with the outputs the SDK sent back.
        assert lane.rows("SELECT source FROM sessions") == [("proxy",)]
        assert lane.rows("SELECT tool_name, result FROM returned_calls ORDER BY id") == [
            ("get_weather", "sunny in Paris"), ("get_time", "12:00 in Paris")]
        assert lane.rows("SELECT count(DISTINCT session_id), count(*) FROM responses") == [(1, 3)]


def test_previous_response_id_continues_the_session(tmp_path):
    with running_lane(tmp_path, [text("Noted: Falcon."), text("Your codename is Falcon.")], api_key=KEY) as lane:
        client = sdk(lane)
        first = client.responses.with_raw_response.create(model="fallback-lane", input="My codename is Falcon.")
        second = client.responses.with_raw_response.create(
            model="fallback-lane", input=[{"role": "user", "content": [{"type": "input_text",
                                                                        "text": "What is my codename?"}]}],
            previous_response_id=first.parse().id)
        session = first.headers["x-session-id"]
        assert second.headers["x-session-id"] == session
        assert second.parse().previous_response_id == first.parse().id
        assert second.parse().output_text == "Your codename is Falcon."
        assert [r for r, _ in lane.history(session)] == ["user", "assistant", "user", "assistant"]


def test_store_false_keeps_no_response_id_but_records_the_turn(tmp_path):
    with running_lane(tmp_path, [text("Kept in the store anyway.")], api_key=KEY) as lane:
        client = sdk(lane)
        raw = client.responses.with_raw_response.create(model="fallback-lane", input="hi", store=False)
        response = raw.parse()
        assert response.store is False
        assert lane.rows("SELECT count(*) FROM responses") == [(0,)]
        assert lane.history(raw.headers["x-session-id"]) == [("user", "hi"), ("assistant", "Kept in the store anyway.")]

        with pytest.raises(openai.BadRequestError) as raised:
            client.responses.create(model="fallback-lane", input="again", previous_response_id=response.id)
        assert raised.value.code == "previous_response_not_found"


def test_tool_choice_and_parallel_tool_calls_reach_the_engine(tmp_path):
    both = Reply(tool_calls=[{"name": "get_weather", "arguments": {"city": "A"}},
                             {"name": "get_weather", "arguments": {"city": "B"}}])
    with running_lane(tmp_path, [both, call("get_time", {"city": "Oslo"}), text("No tools.")], api_key=KEY) as lane:
        client = sdk(lane)
        one = client.responses.create(model="m", input=ASK, tools=TOOLS, tool_choice="required",
                                      parallel_tool_calls=False)
        client.responses.create(model="m", input=ASK, tools=TOOLS, tool_choice={"type": "function", "name": "get_time"})
        none = client.responses.create(model="m", input=ASK, tools=TOOLS, tool_choice="none")
        assert [json.loads(item.arguments) for item in one.output] == [{"city": "A"}]
        assert [demanded(r) for r in lane.model.requests] == ["required", {"several": ["get_time"]}, None]
        assert none.output_text == "No tools."


def test_model_timeout_is_a_server_error_plain_and_an_api_error_streamed(tmp_path):
    with running_lane(tmp_path, lambda body: Reply(hang=True), api_key=KEY, llm_timeout_s=0.5) as lane:
        client = sdk(lane)
        with pytest.raises(openai.InternalServerError) as raised:
            client.responses.create(model="m", input="hi")
        assert (raised.value.status_code, raised.value.code) == (504, "llm_timeout")
        with pytest.raises(openai.APIError, match="did not answer in time"):
            list(client.responses.create(model="m", input="hi", stream=True))


def test_bad_input_is_a_bad_request(tmp_path):
    with running_lane(tmp_path, [text("never")], api_key=KEY) as lane:
        with pytest.raises(openai.BadRequestError) as raised:
            sdk(lane).responses.create(model="m", input=[{"type": "input_image", "image_url": "http://x/y.png"}])
        assert raised.value.code == "invalid_input"
        assert lane.model.requests == []
