"""The official Anthropic Python SDK against the shim's Messages API (`POST /v1/messages`), as a
person pointing an Anthropic client (or Claude Code) at the lane would: base URL the shim's
root, the lane's key as the API key. The shim is the in-test one in front of the scripted model
(tests/integration/test_api_chat.py's `running_lane`)."""

import json

import pytest

from tests.fakes.scripted_model import Reply, call, demanded, text
from tests.integration.test_api_chat import running_lane, sse_events

anthropic = pytest.importorskip("anthropic", reason="the clients extra is not installed")

KEY = "lane-test-key"
WEATHER = {"name": "get_weather", "description": "Current weather for a city.",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
TIME = {"name": "get_time", "description": "Local time in a city.", "defer_loading": True,
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


def sdk(lane, *, api_key=KEY) -> "anthropic.Anthropic":
    """Base URL the shim's root (the SDK adds /v1/messages); no retries, so a failure shows at once."""
    return anthropic.Anthropic(base_url=str(lane.client.base_url), api_key=api_key, max_retries=0, timeout=20)


def test_without_tools_the_agent_endpoint_answers(tmp_path):
    with running_lane(tmp_path, [call("add", {"a": 2, "b": 3}), text("It is 5.")], api_key=KEY) as lane:
        raw = sdk(lane).messages.with_raw_response.create(
            model="claude", max_tokens=64_000, system=[{"type": "text", "text": "Be brief."}],
            messages=[{"role": "user", "content": [{"type": "text", "text": "What is 2+3?"}]}],
            thinking={"type": "enabled", "budget_tokens": 1024}, metadata={"user_id": "u1"})
        message = raw.parse()
        session = raw.headers["x-session-id"]

        assert [(b.type, b.text) for b in message.content] == [("text", "It is 5.")]
        assert (message.role, message.stop_reason, message.model) == ("assistant", "end_turn", "fallback-lane")
        prompt, completion = lane.rows(
            "SELECT sum(p), sum(c) FROM (SELECT prompt_tokens p, completion_tokens c FROM messages"
            " WHERE session_id = ?1 AND role = 'assistant' UNION ALL"
            " SELECT prompt_tokens, completion_tokens FROM lane_calls WHERE session_id = ?1)", session)[0]
        usage = message.usage
        assert usage.input_tokens + usage.cache_read_input_tokens == prompt
        assert (usage.output_tokens, usage.cache_creation_input_tokens) == (completion, 0)
        assert lane.rows("SELECT source FROM sessions WHERE id = ?", session) == [("api",)]
        assert lane.rows("SELECT tool_name, status FROM tool_executions WHERE session_id = ?",
                         session) == [("add", "ok")]
        assert lane.history(session)[:2] == [("system", "Be brief."), ("user", "What is 2+3?")]


def test_streamed_answer_comes_in_anthropics_event_sequence(tmp_path):
    with running_lane(tmp_path, [text("Hello there."), text("Hello there.")], api_key=KEY) as lane:
        events = list(sdk(lane).messages.create(model="claude", max_tokens=100, stream=True, messages=ASK))
        with sdk(lane).messages.stream(model="claude", max_tokens=100, messages=ASK) as stream:
            final = stream.get_final_message()

    assert [e.type for e in events] == ["message_start", "content_block_start", "content_block_delta",
                                        "content_block_stop", "message_delta", "message_stop"]
    assert events[2].delta.text == "Hello there."
    assert events[4].delta.stop_reason == "end_turn" and events[4].usage.output_tokens > 0
    assert final.content[0].text == "Hello there." and final.usage.input_tokens > 0


def test_pings_keep_a_slow_stream_alive(tmp_path):
    with running_lane(tmp_path, [Reply(content="Done.", delay_s=0.4)], api_key=KEY, keepalive_s=0.05) as lane:
        headers = {"x-api-key": KEY, "anthropic-version": "2023-06-01", "anthropic-beta": "interleaved-thinking"}
        response = lane.client.post("/v1/messages?beta=true", headers=headers,
                                    json={"model": "claude", "max_tokens": 10, "stream": True, "messages": ASK})
    names = [line[7:] for line in response.text.splitlines() if line.startswith("event: ")]
    assert names[0] == "message_start" and "ping" in names
    assert names[-2:] == ["message_delta", "message_stop"]


def tool_loop(client, *, stream: bool) -> tuple[str, list[str]]:
    """The SDK's documented tool loop: ask, run the tool_use blocks, send tool_result blocks back."""
    messages: list = [{"role": "user", "content": "Weather and time in Paris?"}]
    ran = []
    for _ in range(5):
        options = {"model": "claude", "max_tokens": 1024, "messages": messages, "tools": [WEATHER, TIME]}
        if stream:
            with client.messages.stream(**options) as live:
                message = live.get_final_message()
        else:
            message = client.messages.create(**options)
        messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in message.content]})
        if message.stop_reason != "tool_use":
            return message.content[0].text, ran
        results = []
        for block in message.content:
            ran.append(block.name)
            results.append({"type": "tool_result", "tool_use_id": block.id,
                            "content": f"{block.name} of {block.input['city']}: fine"})
        messages.append({"role": "user", "content": results})
    raise AssertionError("the tool loop did not end")


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_tool_use_then_tool_result_gets_an_answer(tmp_path, stream):
    script = [call("get_weather", {"city": "Paris"}), call("get_time", {"city": "Paris"}),
              text("Fine weather, and fine time.")]
    with running_lane(tmp_path, script, api_key=KEY) as lane:
        answer, ran = tool_loop(sdk(lane), stream=stream)
        assert answer == "Fine weather, and fine time."
        assert ran == ["get_weather", "get_time"]
        # One stateless proxy session: the tool_result blocks continued the session that returned the calls.
        assert lane.rows("SELECT source FROM sessions") == [("proxy",)]
        assert lane.rows("SELECT tool_name, arguments, result FROM returned_calls ORDER BY id") == [
            ("get_weather", '{"city": "Paris"}', "get_weather of Paris: fine"),
            ("get_time", '{"city": "Paris"}', "get_time of Paris: fine")]
        assert lane.rows("SELECT count(*) FROM tool_executions") == [(0,)]


def test_tool_choice_and_disabled_parallel_use_reach_the_engine(tmp_path):
    both = Reply(tool_calls=[{"name": "get_weather", "arguments": {"city": "Paris"}},
                             {"name": "get_weather", "arguments": {"city": "Rome"}}])
    with running_lane(tmp_path, [both, both, call("get_time", {"city": "Oslo"}), text("No tools.")],
                      api_key=KEY) as lane:
        client = sdk(lane)
        two_cities = [{"role": "user", "content": "What is the weather in Paris and in Rome?"}]
        one = client.messages.create(model="c", max_tokens=50, messages=two_cities, tools=[WEATHER],
                                     tool_choice={"type": "any", "disable_parallel_tool_use": True})
        two = client.messages.create(model="c", max_tokens=50, messages=two_cities, tools=[WEATHER],
                                     tool_choice={"type": "any"})
        client.messages.create(model="c", max_tokens=50, messages=ASK, tools=[WEATHER, TIME],
                               tool_choice={"type": "tool", "name": "get_time"})
        none = client.messages.create(model="c", max_tokens=50, messages=ASK, tools=[WEATHER],
                                      tool_choice={"type": "none"})
        assert [b.input for b in one.content] == [{"city": "Paris"}]
        assert [b.input for b in two.content] == [{"city": "Paris"}, {"city": "Rome"}]
        # With parallel use allowed, a forced reply is a list of calls (to the named tool alone).
        assert [demanded(r) for r in lane.model.requests] == [
            "required", {"several": ["get_weather"]}, {"several": ["get_time"]}, None]
        assert (none.stop_reason, none.content[0].text) == ("end_turn", "No tools.")


def test_system_entries_inside_messages_join_the_system_prompt(tmp_path):
    """Claude Code sends `role: "system"` entries among the messages; with tools (proxy mode) the
    model reads them in the one system message at the top."""
    with running_lane(tmp_path, [text("Sunny.")], api_key=KEY) as lane:
        reply = lane.client.post("/v1/messages", headers={"x-api-key": KEY}, json={
            "model": "c", "max_tokens": 50, "system": "You are terse.", "tools": [WEATHER],
            "context_management": {"edits": []}, "output_config": {"effort": "low"},
            "messages": [*ASK, {"role": "system", "content": "Mind the date."}]})
        assert reply.status_code == 200, reply.text
        sent = lane.model.requests[-1]["messages"]
        assert [m["role"] for m in sent].count("system") == 1
        assert sent[0]["role"] == "system"
        assert "You are terse." in sent[0]["content"] and "Mind the date." in sent[0]["content"]


def test_session_header_keeps_the_history(tmp_path):
    with running_lane(tmp_path, [text("Noted: Falcon."), text("Falcon.")], api_key=KEY) as lane:
        client = sdk(lane)
        for content in ("My codename is Falcon.", "What is my codename?"):
            raw = client.messages.with_raw_response.create(
                model="c", max_tokens=50, messages=[{"role": "user", "content": content}],
                extra_headers={"X-Session-Id": "anthropic-session-1"})
            assert raw.headers["x-session-id"] == "anthropic-session-1"
        assert [r for r, _ in lane.history("anthropic-session-1")] == ["user", "assistant", "user", "assistant"]


def test_count_tokens_uses_the_lanes_estimate(tmp_path):
    with running_lane(tmp_path, [], api_key=KEY) as lane:
        counted = sdk(lane).messages.count_tokens(model="c", system="Be brief.", messages=ASK, tools=[WEATHER])
        tool = {"type": "function", "function": {"name": "get_weather", "description": WEATHER["description"],
                                                 "parameters": WEATHER["input_schema"]}}
        expected = len(json.dumps([[{"role": "system", "content": "Be brief."}, *ASK], [tool]],
                                  separators=(",", ":"))) // 4
        assert counted.input_tokens == expected
        assert lane.model.requests == []


def test_errors_come_in_anthropics_shape(tmp_path):
    with running_lane(tmp_path, [text("never")], api_key=KEY) as lane:
        with pytest.raises(anthropic.AuthenticationError) as raised:
            sdk(lane, api_key="wrong").messages.create(model="c", max_tokens=10, messages=ASK)
        assert raised.value.status_code == 401
        assert raised.value.body == {"type": "error", "error": {
            "type": "authentication_error", "message": "missing or wrong API key: send Authorization: Bearer KEY"}}

        with pytest.raises(anthropic.BadRequestError) as raised:
            sdk(lane).messages.create(model="c", max_tokens=10, messages=[
                {"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": "http://x/y.png"}}]}])
        assert raised.value.body["type"] == "error"
        assert raised.value.body["error"]["type"] == "invalid_request_error"
        assert "text only" in raised.value.body["error"]["message"]

        missing = lane.client.get("/v1/messages", headers={"x-api-key": KEY})
        assert missing.status_code == 405
        assert missing.json()["type"] == "error"
        assert lane.model.requests == []


def test_model_failure_mid_stream_is_an_error_event(tmp_path):
    with running_lane(tmp_path, lambda body: Reply(hang=True), api_key=KEY, llm_timeout_s=0.5) as lane:
        with pytest.raises(anthropic.InternalServerError) as raised:
            sdk(lane).messages.create(model="c", max_tokens=10, messages=ASK)
        assert raised.value.status_code == 504
        assert raised.value.body["error"]["type"] == "timeout_error"

        response = lane.client.post("/v1/messages", headers={"x-api-key": KEY},
                                    json={"model": "c", "max_tokens": 10, "stream": True, "messages": ASK})
        assert [e for e in sse_events(response.text)][-1]["error"]["type"] == "timeout_error"
