"""Tools described in the system message when a chat template drops them."""

from stack.llm.tool_prompt import with_tools_in_system_message

TOOL = {"type": "function", "function": {"name": "terminal", "description": "Run a command.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}


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
