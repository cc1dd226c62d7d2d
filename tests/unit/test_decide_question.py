"""The decision's question: its examples, as the cached first message shows them; and the
lane's yes/no question whether a call failed."""

import asyncio
import math

from stack.agent.decide import (
    CLIENT_INSTRUCTION,
    CLIENT_REPLY,
    FAILS,
    INSTRUCTION,
    ask_decision,
    decide_messages,
    failure_probability,
)
from stack.agent.llm_client import ModelReply

TOOLS = [("terminal", "Run a shell command."), ("memory", "Remember something for later.")]


def test_a_follow_up_example_shows_the_message_before_it_when_its_tool_is_known():
    with_clock = decide_messages("x", TOOLS, [], [], known={"world_clock"})[0]["content"]
    assert '"and in Rome?" (after "what time is it in Lima?") -> {"next": "world_clock"}' in with_clock
    without = decide_messages("x", TOOLS, [], [], known=())[0]["content"]
    assert "and in Rome?" not in without


def test_a_clients_tools_are_asked_for_by_a_slot_no_name_can_start_with():
    """Claude Code's tools are words (Write, Read, ToolSearch): a slot spelled as a word drew the
    name's first token; "answer" is named first (the first option drew the pick: BFCL even ids,
    docs/measurements.md); the agent's own question is asked as before."""
    class Recorder:
        def __init__(self) -> None:
            self.asked: list[str] = []

        async def chat(self, messages, tools, **kwargs):
            self.asked.append(messages[-1]["content"].splitlines()[-1])
            return ModelReply('{"next": "answer"}')

    tools = [("Write", "Writes a file."), ("ToolSearch", "Fetches schemas.")]
    llm = Recorder()
    for instruction, reply in ((INSTRUCTION, {}), (CLIENT_INSTRUCTION, {"reply": CLIENT_REPLY})):
        for choices in (None, ["Write"]):
            asyncio.run(ask_decision(llm, "make a.txt", tools, [], [], choices=choices,
                                     instruction=instruction, **reply))
    agent, agent_narrowed, client, client_narrowed = llm.asked
    assert agent == 'Reply with {"next": TOOL} or {"next": "answer"}.'
    assert agent_narrowed == 'Reply with {"next": TOOL} with TOOL one of Write or {"next": "answer"}.'
    assert client == 'Reply with {"next": X}, where X is "answer" or one tool\'s name.'
    assert client_narrowed == 'Reply with {"next": X}, where X is "answer" or one of Write.'


class _Probabilities:
    """An llm that answers each yes/no question with a yes-probability chosen by its wording."""

    def __init__(self, failed: float, worked: float):
        self.failed, self.worked = failed, worked
        self.asked: list[str] = []

    async def chat(self, messages, tools, **_):
        question = messages[-1]["content"]
        self.asked.append(question)
        yes = self.worked if "do its job" in question else self.failed
        return ModelReply(content="yes", tool_calls=[], finish_reason="stop", prompt_tokens=1,
                          completion_tokens=1, logprobs=[{"yes": math.log(yes), "no": math.log(1 - yes)}])


def test_a_result_is_read_as_failed_only_where_failed_outweighs_did_its_job():
    """A 1.5B model says yes to "did it fail?" at 0.52-0.70 for results that did their job; it
    says yes to "did it do its job?" higher still. Only the share of the two decides."""
    worked = _Probabilities(failed=0.65, worked=0.9)
    share, replies = asyncio.run(failure_probability(worked, "git_status", '{"branch": "main", "clean": true}'))
    assert share is not None and share < FAILS and len(replies) == 2
    assert all('"branch": "main"' in q for q in worked.asked)
    broken = _Probabilities(failed=0.85, worked=0.2)
    share, _ = asyncio.run(failure_probability(broken, "memory", "Unknown action 'None'"))
    assert share is not None and share > FAILS
