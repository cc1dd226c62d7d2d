"""The official OpenAI Python SDK against the shim, configured exactly as the README's "Two ways to
use it" shows: what a person switching to the lane actually runs. The shim is the in-test
one in front of the scripted model (tests/integration/test_api_chat.py's `running_lane`)."""

import json

import httpx
import pytest

from tests.fakes.scripted_model import Reply, call, text
from tests.integration.test_api_chat import running_lane

openai = pytest.importorskip("openai", reason="the clients extra is not installed")
OpenAI = openai.OpenAI

KEY = "lane-test-key"


def base_url(lane) -> str:
    return str(lane.client.base_url).rstrip("/") + "/v1"


def sdk(lane, *, api_key=KEY) -> OpenAI:
    """The README's client: base URL `<shim>/v1`, the lane's key; no retries so a failure shows
    at once as the SDK's own exception."""
    return OpenAI(base_url=base_url(lane), api_key=api_key, max_retries=0, timeout=20)


def test_plain_completion_runs_the_tool_and_reports_usage(tmp_path):
    with running_lane(tmp_path, [call("add", {"a": 2, "b": 3}), text("It is 5.")],
                      api_key=KEY) as lane:
        raw = sdk(lane).chat.completions.with_raw_response.create(
            model="fallback-lane", messages=[{"role": "user", "content": "What is 2+3?"}])
        reply = raw.parse()
        session = raw.headers["x-session-id"]

        assert reply.choices[0].message.content == "It is 5."
        assert reply.choices[0].message.tool_calls is None
        assert reply.choices[0].finish_reason == "stop"
        assert reply.model == "fallback-lane"
        prompt, completion = lane.rows(  # the conversation's model calls and the lane's own
            "SELECT sum(p), sum(c) FROM (SELECT prompt_tokens p, completion_tokens c FROM messages"
            " WHERE session_id = ?1 AND role = 'assistant' UNION ALL"
            " SELECT prompt_tokens, completion_tokens FROM lane_calls WHERE session_id = ?1)", session)[0]
        assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (prompt, completion)
        assert reply.usage.prompt_tokens_details.cached_tokens == 0
        assert reply.usage.model_extra["lane"]["tools_executed"] == ["add"]
        assert reply.usage.model_extra["lane"]["model_calls"] == 4  # decision, call, answer, its reading
        assert lane.rows("SELECT tool_name, status FROM tool_executions WHERE session_id = ?",
                         session) == [("add", "ok")]


def test_streamed_completion_yields_the_answer_and_a_usage_chunk(tmp_path):
    with running_lane(tmp_path, [call("add", {"a": 20, "b": 22}), text("The sum is 42.")],
                      api_key=KEY) as lane:
        stream = sdk(lane).chat.completions.create(
            model="fallback-lane", messages=[{"role": "user", "content": "20+22?"}],
            stream=True, stream_options={"include_usage": True})
        chunks = list(stream)

        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == \
            "The sum is 42."
        assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
        usage = [c.usage for c in chunks if c.usage is not None]
        assert len(usage) == 1 and usage[0].completion_tokens > 0
        assert lane.rows("SELECT tool_name, status FROM tool_executions") == [("add", "ok")]


def test_session_header_through_extra_headers_keeps_the_history(tmp_path):
    with running_lane(tmp_path, [text("Noted: Falcon."), text("Your codename is Falcon.")],
                      api_key=KEY) as lane:
        client = sdk(lane)
        for content in ("My codename is Falcon.", "What is my codename?"):
            raw = client.chat.completions.with_raw_response.create(
                model="fallback-lane", messages=[{"role": "user", "content": content}],
                extra_headers={"X-Session-Id": "sdk-session-1"})
            assert raw.headers["x-session-id"] == "sdk-session-1"

        assert raw.parse().choices[0].message.content == "Your codename is Falcon."
        # The second answer was composed from the first turn as the store holds it (the request
        # carried only the new message), with the user's message last.
        _, facts, asked = lane.model.requests[1]["messages"]
        assert "The user said: My codename is Falcon." in facts["content"]
        assert "The assistant answered: Noted: Falcon." in facts["content"]
        assert asked == {"role": "user", "content": "What is my codename?"}
        assert [r for r, _ in lane.history("sdk-session-1")] == \
            ["user", "assistant", "user", "assistant"]


def test_models_list_names_the_lane(tmp_path):
    with running_lane(tmp_path, [], api_key=KEY) as lane:
        assert [m.id for m in sdk(lane).models.list()] == ["fallback-lane"]


def test_wrong_key_is_an_authentication_error(tmp_path):
    with running_lane(tmp_path, [text("never")], api_key=KEY) as lane:
        with pytest.raises(openai.AuthenticationError) as raised:
            sdk(lane, api_key="wrong").chat.completions.create(
                model="fallback-lane", messages=[{"role": "user", "content": "hi"}])
        assert raised.value.status_code == 401
        assert raised.value.code == "invalid_api_key"
        assert lane.model.requests == []


@pytest.mark.parametrize(("options", "code"), [
    ({"messages": []}, "invalid_messages"),
    ({"messages": [{"role": "user", "content": "hi"}], "n": 2}, "invalid_value"),
    ({"messages": [{"role": "user", "content": "hi"}],
      "extra_headers": {"X-Session-Id": "not a valid id!"}}, "invalid_session_id"),
])
def test_bad_input_is_a_bad_request_error(tmp_path, options, code):
    with running_lane(tmp_path, [text("never")], api_key=KEY) as lane:
        with pytest.raises(openai.BadRequestError) as raised:
            sdk(lane).chat.completions.create(model="fallback-lane", **options)
        assert raised.value.status_code == 400
        assert raised.value.code == code
        assert raised.value.type == "invalid_request_error"


def test_model_timeout_is_a_server_error_plain_and_an_api_error_streamed(tmp_path):
    with running_lane(tmp_path, lambda body: Reply(hang=True), api_key=KEY,
                      llm_timeout_s=0.5) as lane:
        client = sdk(lane)
        with pytest.raises(openai.InternalServerError) as raised:
            client.chat.completions.create(
                model="fallback-lane", messages=[{"role": "user", "content": "hi"}])
        assert raised.value.status_code == 504
        assert raised.value.code == "llm_timeout"

        with pytest.raises(openai.APIError, match="did not answer in time"):
            list(client.chat.completions.create(
                model="fallback-lane", messages=[{"role": "user", "content": "hi"}],
                stream=True))


def test_environment_configuration_works_without_arguments(tmp_path, monkeypatch):
    """`OPENAI_BASE_URL` and `OPENAI_API_KEY`, the README's other way to point the SDK."""
    with running_lane(tmp_path, [text("From the environment.")], api_key=KEY) as lane:
        monkeypatch.setenv("OPENAI_BASE_URL", base_url(lane))
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        reply = OpenAI(max_retries=0, http_client=httpx.Client(timeout=20)).chat.completions.create(
            model="fallback-lane", messages=[{"role": "user", "content": "hi"}])
        assert reply.choices[0].message.content == "From the environment."


# Proxy mode: the SDK's own tool loop, the client running its tools, the lane returning calls.
WEATHER_TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "get_time", "description": "Local time in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
]
CLIENT_TOOLS = {"get_weather": lambda city: f"sunny in {city}", "get_time": lambda city: f"12:00 in {city}"}
TWO_CALLS = [call("get_weather", {"city": "Paris"}), call("get_time", {"city": "Paris"}),
             text("Sunny, and it is noon.")]


def streamed_message(stream) -> dict:
    """The assistant message an SDK user assembles from a stream's deltas."""
    content, calls = "", {}
    for chunk in stream:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        content += delta.content or ""
        for piece in delta.tool_calls or []:
            entry = calls.setdefault(piece.index, {"id": "", "type": "function",
                                                   "function": {"name": "", "arguments": ""}})
            entry["id"] = piece.id or entry["id"]
            entry["function"]["name"] += piece.function.name or ""
            entry["function"]["arguments"] += piece.function.arguments or ""
    message: dict = {"role": "assistant", "content": content or None}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return message


def tool_loop(client: OpenAI, *, stream: bool) -> tuple[str, list[str]]:
    """The SDK's documented tool loop: call, run the tools the reply asks for, send the results."""
    messages: list = [{"role": "user", "content": "Weather and time in Paris?"}]
    ran = []
    for _ in range(5):
        if stream:
            message = streamed_message(client.chat.completions.create(
                model="fallback-lane", messages=messages, tools=WEATHER_TOOLS, stream=True))
        else:
            reply = client.chat.completions.create(model="fallback-lane", messages=messages,
                                                   tools=WEATHER_TOOLS)
            message = reply.choices[0].message.model_dump(exclude_none=True)
        messages.append(message)
        if not message.get("tool_calls"):
            return message["content"], ran
        for tool_call in message["tool_calls"]:
            function = tool_call["function"]
            ran.append(function["name"])
            messages.append({"role": "tool", "tool_call_id": tool_call["id"],
                             "content": CLIENT_TOOLS[function["name"]](**json.loads(function["arguments"]))})
    raise AssertionError("the tool loop did not end")


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_sdk_tool_loop_completes_a_two_call_task(tmp_path, stream):
    with running_lane(tmp_path, TWO_CALLS, api_key=KEY) as lane:
        answer, ran = tool_loop(sdk(lane), stream=stream)
        assert answer == "Sunny, and it is noon."
        assert ran == ["get_weather", "get_time"]
        # One proxy session holds both returned calls with the results the SDK sent back, and the
        # lane ran nothing itself.
        assert lane.rows("SELECT source FROM sessions") == [("proxy",)]
        assert lane.rows("SELECT tool_name, result FROM returned_calls ORDER BY id") == [
            ("get_weather", "sunny in Paris"), ("get_time", "12:00 in Paris")]
        assert lane.rows("SELECT count(*) FROM tool_executions") == [(0,)]
