"""The decision's question: what is fixed sits in its first message, the cached prefix."""

from stack.agent.decide import CLIENT_INSTRUCTION, REPLY, decide_messages

TOOLS = [("terminal", "Run a shell command."), ("memory", "Remember something for later.")]
HIDDEN = [("world_clock", "The current time in a time zone.")]


def test_the_agents_reply_line_is_in_the_cached_first_message_not_after_the_request():
    system, question = decide_messages("hello", TOOLS, HIDDEN, [])
    assert system["content"].endswith(REPLY)
    assert REPLY not in question["content"]
    # the request's message begins and ends with this request's own facts
    assert question["content"].startswith("The user's message: hello")
    assert question["content"].rstrip().endswith("- world_clock: The current time in a time zone.")


def test_the_first_message_is_the_same_for_every_request():
    first = decide_messages("hello", TOOLS, HIDDEN, [])[0]
    other = decide_messages("what time is it in Lima?", TOOLS, [], [("terminal", "ok", "x")])[0]
    assert first == other


def test_proxy_mode_keeps_the_reply_line_after_the_request():
    system, question = decide_messages("weather in Paris?", TOOLS, [], [], instruction=CLIENT_INSTRUCTION)
    assert REPLY not in system["content"]
    assert question["content"].endswith(REPLY)


def test_narrowed_choices_are_named_after_the_request_in_both_modes():
    for instruction in ({}, {"instruction": CLIENT_INSTRUCTION}):
        question = decide_messages("x", TOOLS, HIDDEN, [], choices=["memory", "world_clock"], **instruction)[-1]
        assert question["content"].endswith(
            'Reply with {"next": TOOL} with TOOL one of memory, world_clock or {"next": "answer"}.')


def test_a_follow_up_example_shows_the_message_before_it_when_its_tool_is_known():
    with_clock = decide_messages("x", TOOLS, [], [], known={"world_clock"})[0]["content"]
    assert '"and in Rome?" (after "what time is it in Lima?") -> {"next": "world_clock"}' in with_clock
    without = decide_messages("x", TOOLS, [], [], known=())[0]["content"]
    assert "and in Rome?" not in without
