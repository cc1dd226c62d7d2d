"""The Anthropic Messages and OpenAI Responses requests as the chat-completions request the turn
engine takes: the shapes each one translates (api/messages_api_request.py,
api/responses_api_request.py)."""

import json

import pytest

from stack.api.messages_api_request import chat_body
from stack.api.responses_api_request import input_messages, parse_responses_request
from stack.wire import ApiError

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}}


def test_anthropic_blocks_become_calls_results_and_text():
    body = chat_body({"max_tokens": 10, "system": [{"type": "text", "text": "A.", "cache_control": {"type": "x"}}],
                      "messages": [
                          {"role": "user", "content": "Weather?"},
                          {"role": "assistant", "content": [
                              {"type": "thinking", "thinking": "hm", "signature": "s"},
                              {"type": "text", "text": "Looking."},
                              {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "Oslo"}}]},
                          {"role": "user", "content": [
                              {"type": "tool_result", "tool_use_id": "t1", "is_error": True,
                               "content": [{"type": "text", "text": "no network"}]},
                              {"type": "text", "text": "Try again."}]},
                          {"role": "system", "content": "B."}]})
    assert body["messages"] == [
        {"role": "system", "content": "A.\n\nB."},
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "Looking.", "tool_calls": [
            {"id": "t1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]},
        {"role": "tool", "tool_call_id": "t1", "content": "Error: no network"},
        {"role": "user", "content": "Try again."}]


def test_claude_codes_billing_line_never_reaches_the_model():
    """Its hash changes on every request; left in, no two prompts share more than 20 tokens."""
    for nonce in ("b80", "a0e"):
        billing = f"x-anthropic-billing-header: cc_version=2.1.328.{nonce}; cc_entrypoint=sdk-cli; cch=1{nonce};"
        blocks = chat_body({"max_tokens": 5, "messages": [{"role": "user", "content": "hi"}],
                            "system": [{"type": "text", "text": billing}, {"type": "text", "text": "You are X."}]})
        plain = chat_body({"max_tokens": 5, "messages": [{"role": "user", "content": "hi"}],
                           "system": f"{billing}\nYou are X."})
        assert blocks["messages"][0] == {"role": "system", "content": "You are X."}
        assert plain["messages"][0]["content"] == "You are X."
    alone = chat_body({"max_tokens": 5, "messages": [{"role": "user", "content": "hi"}],
                       "system": "x-anthropic-billing-header: cch=1;"})
    assert alone["messages"] == [{"role": "user", "content": "hi"}]


def test_anthropic_server_tools_are_left_out_and_choices_mapped():
    body = chat_body({"messages": [{"role": "user", "content": "hi"}],
                      "tools": [{"type": "web_search_20250305", "name": "web_search"},
                                {"name": "get_weather", "input_schema": SCHEMA, "defer_loading": True}],
                      "tool_choice": {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True}})
    assert body["tools"] == [{"type": "function", "function": {"name": "get_weather", "description": None,
                                                                 "parameters": SCHEMA}}]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert body["parallel_tool_calls"] is False


@pytest.mark.parametrize("messages", [
    [{"role": "user", "content": [{"type": "image", "source": {}}]}],
    [{"role": "assistant", "content": [{"type": "tool_result", "tool_use_id": "x", "content": "y"}]}],
    [{"role": "tool", "content": "x"}],
    [],
])
def test_anthropic_shapes_the_lane_cannot_read_are_bad_requests(messages):
    with pytest.raises(ApiError) as raised:
        chat_body({"messages": messages})
    assert raised.value.status == 400


def test_responses_items_become_chat_messages():
    items = [{"role": "developer", "content": "Be brief."},
             {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather?"}]},
             {"type": "reasoning", "id": "rs_1", "summary": []},
             {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": '{"city":"Oslo"}'},
             {"type": "function_call", "call_id": "c2", "name": "get_weather", "arguments": '{"city":"Rome"}'},
             {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
             {"type": "function_call_output", "call_id": "c2", "output": "rain"}]
    messages = input_messages(items)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "tool"]
    assert [c["id"] for c in messages[2]["tool_calls"]] == ["c1", "c2"]
    assert messages[2]["content"] is None


def test_an_output_the_client_adds_without_a_call_joins_the_result_before_it():
    """Codex, after its create_goal ran, sends its goal's objective as an output with a name and
    no call id (seen through the lane: a 400 ended the task)."""
    call = {"type": "function_call", "call_id": "c1", "name": "create_goal", "arguments": '{"objective":"x"}'}
    goal = {"type": "function_call_output", "name": "goal_objective", "namespace": "agent", "output": "Make notes.txt"}
    messages = input_messages([{"role": "user", "content": "Make notes.txt"}, call,
                               {"type": "function_call_output", "call_id": "c1", "output": "{\"goal\":1}"}, goal])
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"]
    assert messages[2]["tool_call_id"] == "c1"
    assert messages[2]["content"] == '{"goal":1}\n\ngoal_objective: Make notes.txt'
    alone = input_messages([goal])
    assert alone == [{"role": "user", "content": "goal_objective: Make notes.txt"}]


def test_responses_instructions_lead_and_earlier_conversation_comes_first():
    earlier = [{"role": "user", "content": "My codename is Falcon."}, {"role": "assistant", "content": "Noted."}]
    parsed = parse_responses_request(
        {"input": "And now?", "instructions": "Be brief.", "max_output_tokens": 99, "store": False,
         "tools": [{"type": "web_search"}, {"type": "function", "name": "f", "parameters": SCHEMA}],
         "tool_choice": {"type": "function", "name": "f"}, "parallel_tool_calls": False},
        earlier, max_tokens_cap=50, max_tools=10)
    assert [m["role"] for m in parsed.chat.messages] == ["system", "user", "assistant", "user"]
    assert parsed.chat.messages[0]["content"] == "Be brief."
    assert parsed.conversation == [*earlier, {"role": "user", "content": "And now?"}]
    assert parsed.chat.max_tokens == 50 and parsed.store is False
    assert parsed.chat.proxy is not None
    assert [t["function"]["name"] for t in parsed.chat.proxy.tools] == ["f"]
    assert (parsed.chat.proxy.tool_choice.mode, parsed.chat.proxy.parallel_tool_calls) == ("function", False)


@pytest.mark.parametrize("data", [{"input": 5}, {"input": "x", "store": "no"},
                                  {"input": "x", "max_output_tokens": True},
                                  {"input": [{"type": "input_image", "image_url": "u"}]},
                                  {"input": [{"type": "function_call_output", "output": "x"}]}])
def test_responses_bad_shapes_are_bad_requests(data):
    with pytest.raises(ApiError) as raised:
        parse_responses_request(data, [], max_tokens_cap=50, max_tools=10)
    assert raised.value.status == 400
    json.dumps(raised.value.body)
