"""The agent's turn: the lane asks its model each step, runs the tool, records everything, and
writes the answer from what ran.

A 1.5B model given a dozen tools and an open reply decides, calls, reads and answers all at once,
and gets most of it wrong: it answers from its own head where a tool was needed, says it ran tools
that never ran, and copies its history. So each step is a question it can get right: a choice of the
next tool or "answer" under a grammar (decide.py), then that tool's arguments decoded under its
schema, then an answer written from the request and the results (answers.py), held to the store.
Every message is committed to the store before the next model call, so a crash or a timeout loses
at most the call in flight, and the store is always the truth about what ran.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..config import Settings
from ..store import Store
from ..tools.base import ToolContext
from ..tools.execute import run_recorded
from ..tools.memory import read_memory
from ..tools.registry import Registry
from ..toolsearch.surface import Profile, Toolset, assemble
from .answer_check import fallback_answer
from .answers import asked_user, composed_answer, decided_tool, english_of, facts_of, fitting_tool
from .asked import as_asked, names_an_offered_tool, request_messages, said_in, started, unasked
from .ledger import MODEL_CALL_BUDGET, Correction, repeated
from .llm_client import LlmClient, ModelReply
from .prompt import promoted_tools_note
from .records import calls_made, finished, incoming, latest_request, record_outcome
from .toolcalls import ToolCall, as_spelled, calls_in, forced
from .turn import FORCED_CALL_MAX_TOKENS, Turn, TurnEnded, TurnResult, count

__all__ = ["Agent", "TurnEnded", "TurnResult"]

class Agent:
    def __init__(self, settings: Settings, store: Store, registry: Registry, llm: LlmClient):
        self.settings, self.store, self.registry, self.llm = settings, store, registry, llm

    async def run_turn(self, session_id: str, new_messages: list[dict[str, Any]], *,
                       profile: Profile = "search", max_tokens: int | None = None,
                       temperature: float | None = None) -> TurnResult:
        # One transaction, off the event loop: a conversation of 100,000 messages is a legal request.
        await asyncio.to_thread(self.store.add_messages, session_id, [incoming(m) for m in new_messages])
        turn = self._new_turn(session_id, new_messages, profile, max_tokens, temperature)
        try:
            turn.english = await english_of(self.llm, self.store, turn.result, turn.ledger, turn.query)
            for step in range(self.settings.max_iterations):
                if turn.result.model_calls >= MODEL_CALL_BUDGET:  # every call is paid by a waiting user
                    raise TurnEnded(fallback_answer(turn.outcomes), "model_call_budget")
                toolset = await self._toolset(turn, first=step == 0)
                turn.force = await self._next_step(turn, toolset)
                if turn.force is None:
                    answer, fix = await self._composed(turn, toolset)
                    turn.force = self._acted_on(turn, toolset, fix) or await self._second_look(turn, toolset, answer)
                    if turn.force is None:
                        raise answer
                forced_tool, reply = turn.force, await self._ask(turn, toolset)
                calls = [as_spelled(call, turn.query)
                         for call in calls_in(reply.content, reply.tool_calls, toolset.parameters_of)]
                message_id = calls_made(self.store, turn.result.session_id, reply, calls)
                # cut by the cap, the same prompt would only run into it again: no retry
                turn.unmade = None if calls or reply.finish_reason == "length" else forced_tool
                for call in calls:
                    await self._execute(call, toolset, turn, message_id)
            turn.steps_ran_out = True
            answer, _ = await self._composed(turn, toolset)
            raise answer
        except TurnEnded as end:
            return self._finish(turn, end)

    async def _next_step(self, turn: Turn, toolset: Toolset) -> str | None:
        """The tool the next model call must call, or None when the turn is to be answered: a
        call that just failed, or a forced reply that held no readable call, is made again once
        (the model has read the error), else the model's own constrained choice
        (answers.decided_tool), once per tool. (A command that ran and exited non-zero is not
        made again: on the dev files the 1.5B model wrote the same command all six times.)"""
        ran = {o.tool_name for o in turn.outcomes if o.status == "ok"}
        failed = turn.unmade or (turn.outcomes[-1].tool_name if turn.outcomes and
                                 turn.outcomes[-1].status == "error" else None)
        if failed and failed not in ran and toolset.reaches(failed) \
                and turn.ledger.take(Correction(None, failed, "retry")):
            return failed
        tool = await decided_tool(self.llm, self.store, turn, toolset, read_memory(self.settings))
        if tool is None or tool in ran or not toolset.reaches(tool):
            return None
        return tool if turn.ledger.take(Correction(None, tool, "decide")) else None

    def _acted_on(self, turn: Turn, toolset: Toolset, fix: Correction | None) -> str | None:
        """The tool a held-back answer's own words ask for (it says the tool ran, or states what
        only a command could check), forced once when it has not been tried in this turn: the
        model's stated intent, not a word list, picks it; the answer is then composed again."""
        tool = fix.force if fix is not None else None
        if tool is None or tool in {o.tool_name for o in turn.outcomes} or not toolset.reaches(tool):
            return None
        return tool if turn.ledger.take(fix) else None

    async def _composed(self, turn: Turn, toolset: Toolset) -> tuple[TurnEnded, Correction | None]:
        """The answer, from the notes as they are now (the decision and the answer are not the
        forced calls' cached prefix, so they read what this session saved too)."""
        memory = read_memory(self.settings)
        facts = await asyncio.to_thread(facts_of, turn, toolset, self.store, memory)  # reads the whole session
        return await composed_answer(self.llm, self.store, turn, toolset, facts, memory)

    async def _second_look(self, turn: Turn, toolset: Toolset, answer: TurnEnded) -> str | None:
        """Lever "fit": when nothing ran and the answer was held back, the index's best tool for
        the request, forced once where the model says it fits (answers.fitting_tool)."""
        if turn.outcomes or not answer.held:
            return None
        tool = await fitting_tool(self.llm, self.store, turn, toolset)
        return tool if tool is not None and turn.ledger.take(Correction(None, tool, "fit")) else None

    def _new_turn(self, session_id: str, new_messages: list[dict[str, Any]], profile: Profile,
                  max_tokens: int | None, temperature: float | None) -> Turn:
        cap = min(max_tokens, self.settings.max_tokens) if max_tokens and max_tokens > 0 \
            else self.settings.max_tokens
        query = latest_request(new_messages)
        temperature = self.settings.temperature if temperature is None else temperature
        return Turn(TurnResult(session_id, "", "stop"), query, profile, cap, temperature,
                    ToolContext(self.settings, self.store, session_id))

    async def _toolset(self, turn: Turn, *, first: bool) -> Toolset:
        # Off the event loop: the search for tools to promote (and a catalog rebuilt after an MCP
        # server changed its tools) is CPU work.
        toolset = await asyncio.to_thread(assemble, self.registry, self.settings, profile=turn.profile,
                                          query=turn.indexed)
        if toolset.promoted and names_an_offered_tool(turn.query, toolset):
            toolset = toolset.without_promotion()  # the user named the tool: none is pushed beside it
        if first and toolset.promoted:
            # After the turn's user message, not in `tools`: what changes per turn never moves
            # the prompt's cached prefix (the system prompt and the tools block before it).
            self.store.add_message(turn.result.session_id, "system",
                                   promoted_tools_note(toolset.promoted_schemas), lane_note=True)
        return toolset

    async def _ask(self, turn: Turn, toolset: Toolset) -> ModelReply:
        messages = await asyncio.to_thread(request_messages, self.store, self.settings, turn.result.session_id,
                                           toolset, turn.cap, await self.llm.context_window())
        in_tools = turn.force in {t["function"]["name"] for t in toolset.offered}
        reply = await self.llm.chat(messages, toolset.offered, max_tokens=min(turn.cap, FORCED_CALL_MAX_TOKENS),
                                    temperature=turn.temperature,
                                    tool_choice=forced(turn.force) if in_tools else None,
                                    response_schema=None if in_tools else toolset.forced_through_bridge(turn.force))
        turn.force = None
        count(turn.result, reply)
        return reply

    async def _execute(self, call: ToolCall, toolset: Toolset, turn: Turn, message_id: int) -> None:
        said = lambda: said_in(self.store, self.settings, turn.ctx.session_id)  # noqa: E731  (read only if needed)
        call = as_asked(call, toolset, turn.query, said)
        key, earlier = turn.ledger.attempt(call.name, call.arguments, toolset.parameters_of(call.name))
        if turn.ledger.too_many(key):
            raise TurnEnded(fallback_answer(turn.outcomes), "repeated_call")
        refusal = unasked(call, toolset, turn.query, said) \
            if earlier is None else None
        if refusal is not None:  # nothing ran: the next step answers in words
            record_outcome(self.store, turn.ctx.session_id, message_id, call, refusal)
            return
        if earlier is not None:
            outcome = repeated(call.name, call.arguments, earlier)
        else:
            turn.ctx.later_step = bool(turn.result.tools_executed)
            outcome = await run_recorded(turn.ctx, started(call, toolset, message_id),
                                         lambda: toolset.dispatch(call.name, call.arguments, turn.ctx))
            turn.ledger.outcomes[key] = outcome
            turn.outcomes.append(outcome)
        record_outcome(self.store, turn.ctx.session_id, message_id, call, outcome)
        if outcome.status == "ok":
            turn.result.tools_executed.append(outcome.tool_name)
        if turn.ctx.question_for_user:  # the model's words: held to the store like an answer
            raise await asked_user(self.llm, self.store, turn, toolset, turn.ctx.question_for_user,
                                   read_memory(self.settings))

    def _finish(self, turn: Turn, end: TurnEnded) -> TurnResult:
        return finished(self.store, turn.result, end,
                        "iteration_limit" if turn.steps_ran_out and end.reason == "stop" else end.reason)
