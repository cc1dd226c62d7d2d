"""The decision's question: its examples, as the cached first message shows them."""

from stack.agent.decide import decide_messages

TOOLS = [("terminal", "Run a shell command."), ("memory", "Remember something for later.")]


def test_a_follow_up_example_shows_the_message_before_it_when_its_tool_is_known():
    with_clock = decide_messages("x", TOOLS, [], [], known={"world_clock"})[0]["content"]
    assert '"and in Rome?" (after "what time is it in Lima?") -> {"next": "world_clock"}' in with_clock
    without = decide_messages("x", TOOLS, [], [], known=())[0]["content"]
    assert "and in Rome?" not in without
