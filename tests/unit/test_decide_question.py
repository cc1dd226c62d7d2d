"""The decision's question: its examples, as the cached first message shows them."""

import asyncio

from stack.agent.decide import CLIENT_INSTRUCTION, CLIENT_SLOT, INSTRUCTION, ask_decision, decide_messages
from stack.agent.llm_client import ModelReply

TOOLS = [("terminal", "Run a shell command."), ("memory", "Remember something for later.")]


def test_a_follow_up_example_shows_the_message_before_it_when_its_tool_is_known():
    with_clock = decide_messages("x", TOOLS, [], [], known={"world_clock"})[0]["content"]
    assert '"and in Rome?" (after "what time is it in Lima?") -> {"next": "world_clock"}' in with_clock
    without = decide_messages("x", TOOLS, [], [], known=())[0]["content"]
    assert "and in Rome?" not in without


def test_a_clients_tools_are_asked_for_by_a_slot_no_name_can_start_with():
    """Claude Code's tools are words (Write, Read, ToolSearch): a slot spelled as a word drew the
    name's first token; the agent's own question is asked as before."""
    class Recorder:
        def __init__(self) -> None:
            self.asked: list[str] = []

        async def chat(self, messages, tools, **kwargs):
            self.asked.append(messages[-1]["content"].splitlines()[-1])
            return ModelReply('{"next": "answer"}')

    tools = [("Write", "Writes a file."), ("ToolSearch", "Fetches schemas.")]
    llm = Recorder()
    for instruction, slot in ((INSTRUCTION, {}), (CLIENT_INSTRUCTION, {"slot": CLIENT_SLOT})):
        for choices in (None, ["Write"]):
            asyncio.run(ask_decision(llm, "make a.txt", tools, [], [], choices=choices,
                                     instruction=instruction, **slot))
    agent, agent_narrowed, client, client_narrowed = llm.asked
    assert agent == 'Reply with {"next": TOOL} or {"next": "answer"}.'
    assert agent_narrowed == 'Reply with {"next": TOOL} with TOOL one of Write or {"next": "answer"}.'
    assert client == 'Reply with {"next": "<the tool\'s name>"} or {"next": "answer"}.'
    assert "TOOL" not in client_narrowed and client_narrowed.endswith("one of Write or {\"next\": \"answer\"}.")
