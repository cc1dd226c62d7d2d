"""Tools described in the system message when a chat template drops them."""

from stack.llm.tool_prompt import template_dropped_tools, with_tools_in_system_message

TOOL = {"type": "function", "function": {"name": "terminal", "description": "Run a command.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}


def test_a_prompt_that_names_no_offered_tool_dropped_them():
    assert template_dropped_tools("<|im_start|>user\nhi<|im_end|>", [TOOL])
    assert not template_dropped_tools('... "name": "terminal" ...', [TOOL])
    assert not template_dropped_tools("anything", [])


def test_tools_join_an_existing_system_message():
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    out = with_tools_in_system_message(messages, [TOOL])
    assert out[0]["content"].startswith("Be brief.\n\n# Tools")
    assert '"name":"terminal"' in out[0]["content"] and "<tool_call>" in out[0]["content"]
    assert out[1:] == messages[1:]
    assert messages[0]["content"] == "Be brief."  # the request's own messages are not changed


def test_tools_become_a_system_message_when_there_is_none():
    out = with_tools_in_system_message([{"role": "user", "content": "hi"}], [TOOL])
    assert [m["role"] for m in out] == ["system", "user"]
