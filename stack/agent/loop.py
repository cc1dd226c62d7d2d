"""The agent loop: ask the model, run the tools it calls, record everything, repeat.

Every message is committed to the store before the next model call, so a crash or a timeout loses
at most the call in flight, and the store is always the truth about what ran.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ..config import Settings
from ..store import Store
from ..token_estimate import estimate_tokens
from ..tools.base import ToolContext
from ..tools.execute import Outcome
from ..tools.memory import read_memory
from ..tools.registry import Registry
from ..toolsearch.bridges import CALL
from ..toolsearch.surface import Profile, Toolset, assemble
from .corrections import (
    Correction,
    TurnFacts,
    TurnLedger,
    asks_about_session,
    correction,
    decided,
    fallback_answer,
    faults,
    guessed,
    repeated,
)
from .decide import ask_decision, parse_decision
from .history import conversation, earlier_facts
from .llm_client import LlmClient, LlmError, ModelReply
from .prompt import compose_messages, memory_note, promoted_tools_note, system_prompt
from .reading import names_an_offered_tool, read_request
from .toolcalls import ToolCall, extract_calls, guessed_call

log = logging.getLogger("lane.agent")
# The decision question lists the direct tools and at most this many hidden ones (search's best).
DECIDE_HIDDEN = 5


@dataclass
class TurnResult:
    session_id: str
    content: str
    finish_reason: str  # stop | length | clarify | iteration_limit | repeated_call
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    model_calls: int = 0
    peak_prompt_tokens: int = 0
    tools_executed: list[str] = field(default_factory=list)


class TurnEnded(Exception):
    """Ends a turn. `content` is the answer; `lane_written` when the lane, not the model, wrote it
    (the model's own answer is already stored with its model call)."""

    def __init__(self, content: str, reason: str, *, lane_written: bool = True):
        super().__init__(reason)
        self.content, self.reason, self.lane_written = content, reason, lane_written


@dataclass
class Turn:
    result: TurnResult
    query: str
    profile: Profile
    cap: int
    temperature: float | None
    ctx: ToolContext
    ledger: TurnLedger = field(default_factory=TurnLedger)
    force: str | None = None  # the tool the next model call must call (after a correction)
    restated: tuple[str, ...] = ()  # the request as the tools it needs (toolsearch/restate.py)
    judged: dict[str, float] = field(default_factory=dict)  # best hits' yes-probability (judge.py)
    outcomes: list[Outcome] = field(default_factory=list)
    decided: bool = False  # the decision question was asked (agent/decide.py)


class Agent:
    def __init__(self, settings: Settings, store: Store, registry: Registry, llm: LlmClient):
        self.settings, self.store, self.registry, self.llm = settings, store, registry, llm

    async def run_turn(self, session_id: str, new_messages: list[dict[str, Any]], *,
                       profile: Profile = "search", max_tokens: int | None = None,
                       temperature: float | None = None) -> TurnResult:
        for message in new_messages:
            self._store_incoming(session_id, message)
        turn = self._new_turn(session_id, new_messages, profile, max_tokens, temperature)
        turn.restated, turn.judged = await read_request(
            self.llm, self.store, self.registry, self.settings, session_id=session_id,
            query=turn.query, profile=profile, count=partial(_count, turn.result))
        try:
            for iteration in range(self.settings.max_iterations):
                toolset = self._toolset(turn, first=iteration == 0)
                reply = await self._ask(turn, toolset)
                calls = _calls_of(reply, toolset)
                message_id = self._store_reply(turn, reply, calls)
                if not calls:
                    await self._answer_or_correct(turn, reply, toolset)
                for call in calls:
                    await self._execute(call, toolset, turn, message_id)
        except TurnEnded as end:
            return self._finish(turn, end)
        ran = ", ".join(turn.result.tools_executed) or "none"
        return self._finish(turn, TurnEnded(
            f"I stopped after {turn.result.model_calls} model calls without reaching a final "
            f"answer. Tools that ran: {ran}.", "iteration_limit"))

    def _new_turn(self, session_id: str, new_messages: list[dict[str, Any]], profile: Profile,
                  max_tokens: int | None, temperature: float | None) -> Turn:
        cap = min(max_tokens, self.settings.max_tokens) if max_tokens and max_tokens > 0 \
            else self.settings.max_tokens
        query = next((_text(m.get("content")) or "" for m in reversed(new_messages)
                      if m.get("role") == "user"), "")
        temperature = self.settings.temperature if temperature is None else temperature
        return Turn(TurnResult(session_id, "", "stop"), query, profile, cap, temperature,
                    ToolContext(self.settings, self.store, session_id))

    def _store_incoming(self, session_id: str, message: dict[str, Any]) -> None:
        self.store.add_message(session_id, message["role"], _text(message.get("content")),
                               tool_calls=message.get("tool_calls"),
                               tool_call_id=message.get("tool_call_id"),
                               tool_name=message.get("name"))

    def _toolset(self, turn: Turn, *, first: bool) -> Toolset:
        toolset = assemble(self.registry, self.settings, profile=turn.profile, query=turn.query,
                           restated=turn.restated, judged=turn.judged)
        if toolset.promoted and names_an_offered_tool(turn.query, toolset):
            toolset = toolset.without_promotion()  # the user named the tool: none is pushed beside it
        if first and toolset.promoted:
            # After the turn's user message, not in `tools`: what changes per turn never moves
            # the prompt's cached prefix (the system prompt and the tools block before it).
            self.store.add_message(turn.result.session_id, "system",
                                   promoted_tools_note(toolset.promoted_schemas), lane_note=True)
        return toolset

    async def _ask(self, turn: Turn, toolset: Toolset) -> ModelReply:
        messages = self._request_messages(turn.result.session_id, toolset, turn.cap,
                                          await self.llm.context_window())
        in_tools = turn.force in {t["function"]["name"] for t in toolset.offered}
        reply = await self.llm.chat(messages, toolset.offered, max_tokens=turn.cap,
                                    temperature=turn.temperature,
                                    tool_choice=_forced(turn.force) if in_tools else None,
                                    response_schema=None if in_tools else _bridged(turn.force, toolset))
        turn.force = None
        _count(turn.result, reply)
        return reply

    def _store_reply(self, turn: Turn, reply: ModelReply, calls: list[ToolCall]) -> int:
        return self.store.add_message(
            turn.result.session_id, "assistant", reply.content, tool_calls=[_stored(c) for c in calls],
            prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens,
            cached_tokens=reply.cached_tokens)

    async def _answer_or_correct(self, turn: Turn, reply: ModelReply, toolset: Toolset) -> None:
        """A reply without calls ends the turn, unless a lever (corrections.LEVERS) earns another
        model call; what ends it is held to the store first (_checked)."""
        facts = self._facts(turn, toolset)
        fix = correction(reply.content, facts)
        if fix is None and not facts.ran_in_turn and not turn.decided:
            # An answer from the model's own head: does the request need a tool after all?
            turn.decided = True
            fix = decided(await self._decide(turn, toolset), facts)
        if self._apply(turn, fix, toolset):
            return
        raise await self._checked(turn, reply, facts)

    def _apply(self, turn: Turn, fix: Correction | None, toolset: Toolset) -> bool:
        """Every lever goes through here: once per kind (and tool), a note the model reads next,
        and the tool its next reply must call, when that tool can be called at all."""
        if not turn.ledger.take(fix) or fix is None:
            return False
        reachable = fix.force is not None and (toolset.parameters_of(fix.force) is not None
                                               or (toolset.bridged and fix.force in toolset.catalog))
        turn.force = fix.force if reachable else None
        if fix.note:
            self.store.add_message(turn.result.session_id, "system", fix.note, lane_note=True)
        return True

    def _facts(self, turn: Turn, toolset: Toolset) -> TurnFacts:
        ran = [o for o in turn.outcomes if o.status == "ok"]
        schemas = {t["function"]["name"]: t["function"].get("parameters") or {}
                   for t in toolset.offered + toolset.promoted_schemas}
        schemas |= {name: tool.parameters for name, tool in toolset.catalog.tools.items()}
        return TurnFacts(turn.query, schemas, self.store.tools_that_ran(turn.result.session_id),
                         {o.tool_name for o in ran}, ran[-1].output if ran else None,
                         asks_about_session(turn.query), tuple(o.output for o in ran))

    async def _decide(self, turn: Turn, toolset: Toolset) -> str | None:
        """The model's constrained choice of the tool the request still needs (agent/decide.py),
        kept with the lane's own model calls; None for "answer" or when asking fails."""
        tools = [(t["function"]["name"], t["function"].get("description") or "")
                 for t in toolset.offered if t["function"]["name"] not in toolset.bridges
                 and t["function"]["name"] != CALL]
        if toolset.bridged and turn.query.strip():
            hits, _ = toolset.catalog.search(turn.query, DECIDE_HIDDEN)
            tools += [(h.name, toolset.catalog.tools[h.name].description) for h in hits]
        ran = [(o.tool_name, o.status, o.output) for o in turn.outcomes]
        try:
            reply = await ask_decision(self.llm, turn.query, tools, ran, self._earlier(turn))
        except LlmError as exc:
            log.warning("no decision: %s", exc)
            return None
        _count(turn.result, reply)
        self.store.add_lane_call(turn.result.session_id, "decide", reply.content,
                                 prompt_tokens=reply.prompt_tokens,
                                 completion_tokens=reply.completion_tokens,
                                 cached_tokens=reply.cached_tokens)
        return parse_decision(reply.content, [name for name, _ in tools])

    async def _checked(self, turn: Turn, reply: ModelReply, facts: TurnFacts) -> TurnEnded:
        """The answer as the store allows it: the model's when nothing is wrong with it; else one
        written again from the request and the results; else the lane's own account of what ran.
        Every answer held back is a lane note."""
        problems = faults(reply.content, facts)
        if not problems:
            return TurnEnded(reply.content, "length" if reply.finish_reason == "length" else "stop",
                             lane_written=False)
        session = turn.result.session_id
        self.store.add_message(session, "system", "Answer not passed on: " + "; ".join(problems),
                               lane_note=True)
        results = [(o.tool_name, o.status, o.output) for o in turn.outcomes]
        try:
            composed = await self.llm.chat(compose_messages(turn.query, results, self._earlier(turn)),
                                           [], max_tokens=min(turn.cap, 400), temperature=0.0)
        except LlmError as exc:
            log.warning("answer not composed: %s", exc)
            return TurnEnded(fallback_answer(turn.outcomes, problems), "stop")
        _count(turn.result, composed)
        self._store_reply(turn, composed, [])
        still = faults(composed.content, facts)
        if not still:
            return TurnEnded(composed.content, "stop", lane_written=False)
        self.store.add_message(session, "system", "Answer not passed on: " + "; ".join(still),
                               lane_note=True)
        return TurnEnded(fallback_answer(turn.outcomes, still), "stop")

    def _earlier(self, turn: Turn) -> str:
        return earlier_facts(self.store.messages(turn.result.session_id))

    def _request_messages(self, session_id: str, toolset: Toolset, cap: int,
                          upstream_context: int | None) -> list[dict[str, Any]]:
        prompt = system_prompt(bridged=toolset.bridged)
        if self.store.last_lane_prompt(session_id) != prompt:
            self.store.add_message(session_id, "system", prompt, lane_prompt=True)
        note = memory_note(self.store.memory_snapshot(session_id, lambda: read_memory(self.settings)))
        opening = [{"role": "system", "content": text} for text in (prompt, note) if text]
        context = min(self.settings.context_tokens,
                      upstream_context or self.settings.context_tokens)
        # The llm service generates into whatever room is left, so a quarter of the window is
        # enough to keep free; reserving the whole cap would starve history on an 8k model.
        budget = context - min(cap, context // 4) - estimate_tokens(toolset.offered) \
            - estimate_tokens(opening)
        return opening + conversation(self.store.messages(session_id), max(budget, 0),
                                      self.store.failed_call_ids(session_id))

    async def _execute(self, call: ToolCall, toolset: Toolset, turn: Turn, message_id: int) -> None:
        key, earlier = turn.ledger.attempt(call.name, call.arguments)
        if turn.ledger.too_many(key):
            raise TurnEnded(fallback_answer(turn.outcomes), "repeated_call")
        if earlier is not None:
            outcome = repeated(call.name, call.arguments, earlier)
        else:
            outcome = await asyncio.to_thread(toolset.dispatch, call.name, call.arguments, turn.ctx)
            turn.ledger.outcomes[key] = outcome
            turn.outcomes.append(outcome)
        self._record(turn.ctx.session_id, message_id, call, outcome)
        if "guess" not in turn.ledger.corrected:
            self._apply(turn, guessed(toolset.answers_guess(call.name, call.arguments)), toolset)
        if outcome.status == "ok":
            turn.result.tools_executed.append(outcome.tool_name)
        if turn.ctx.question_for_user:
            raise TurnEnded(turn.ctx.question_for_user, "clarify")

    def _record(self, session: str, message_id: int, call: ToolCall, outcome: Outcome) -> None:
        self.store.add_tool_result(
            session, message_id, outcome.for_model, tool_call_id=call.id, tool_name=outcome.tool_name,
            via_bridge=outcome.via_bridge, origin=call.origin, arguments=outcome.arguments,
            status=outcome.status, result=outcome.output if outcome.status == "ok" else None,
            error=None if outcome.status == "ok" else outcome.output,
            started_at=outcome.started_at, duration_ms=outcome.duration_ms)

    def _finish(self, turn: Turn, end: TurnEnded) -> TurnResult:
        if end.lane_written:
            self.store.add_message(turn.result.session_id, "assistant", end.content, lane_note=True)
        turn.result.content, turn.result.finish_reason = end.content, end.reason
        return turn.result


def _calls_of(reply: ModelReply, toolset: Toolset) -> list[ToolCall]:
    if reply.tool_calls:
        return reply.tool_calls
    calls = extract_calls(reply.content, toolset.parameters_of)
    if calls:
        return calls
    guess = guessed_call(reply.content, toolset.parameters_of)
    return [guess] if guess else []


def _forced(tool: str | None) -> dict[str, Any] | None:
    return {"type": "function", "function": {"name": tool}} if tool else None


def _bridged(tool: str | None, toolset: Toolset) -> dict[str, Any] | None:
    """A hidden tool forced: the reply must be a tool_call reaching it with arguments that fit
    its schema. A response format, not `tools`, so the prompt's cached tools block stays as it is."""
    if tool is None or not toolset.bridged or tool not in toolset.catalog:
        return None
    arguments = {"type": "object", "properties": {
        "name": {"const": tool},
        "arguments": toolset.catalog.tools[tool].parameters or {"type": "object"}},
        "required": ["name", "arguments"]}
    return {"type": "object", "properties": {"name": {"const": CALL}, "arguments": arguments},
            "required": ["name", "arguments"]}


def _stored(call: ToolCall) -> dict[str, Any]:
    arguments = call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)
    stored = {"id": call.id, "type": "function",
              "function": {"name": call.name, "arguments": arguments}}
    return {**stored, "origin": "content"} if call.origin == "content" else stored


def _count(turn: TurnResult, reply: ModelReply) -> None:
    turn.model_calls += 1
    turn.prompt_tokens += reply.prompt_tokens
    turn.completion_tokens += reply.completion_tokens
    turn.cached_tokens += reply.cached_tokens
    turn.peak_prompt_tokens = max(turn.peak_prompt_tokens, reply.prompt_tokens)


def _text(content: Any) -> str | None:
    """OpenAI content is a string, null, or a list of parts; the store keeps the text."""
    if content is None or isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
