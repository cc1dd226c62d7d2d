"""Proxy mode: a request that carries `tools` is served as a tool-calling model.

The client owns its tools and runs them; the lane returns OpenAI `tool_calls` and the client sends
its `role: "tool"` results in the next request, with the whole conversation (stateless, as
OpenAI is). Inside one request the lane still pulls its levers, for the client's tools:
* under `tool_choice: auto` the request begins with the decision (decide.py): the next tool, then
  forced under its schema (a hidden one offered for that call), or "answer", then written with no
  tools offered;
* where the client allows parallel calls, a forced call is decoded as a list of calls, each under
  its tool's schema (toolcalls.several_calls_schema): "the weather in A, B and C" is three calls;
* a reply in words that declines the request or tells the user how to do it (the model's own
  yes/no, decide.decline_probability) is not the answer while the decision, asked again with it
  in view, picks a client tool; a reply naming the lane's bridges is answered again without them;
* calls written as text (every shape toolcalls.py salvages) become real tool_calls;
* arguments are validated against the client's schema and repaired where that cannot change
  their meaning (tools/validation.py; an optional one set to its declared default is left out); a
  call that still does not fit is told to the model and corrected here: the client never sees a
  bad call;
* tool search over the client's tools (toolsearch/client_tools.py): tool_search/tool_describe are
  answered here, and a tool_call to a client tool is returned as a call to that tool;
* the repeat breaker, the generation cap, the iteration cap, and the answer check (a reply that
  claims or spells a call that was never made does not reach the client as it is).
No tool call is ever returned as text content: a call-shaped reply is returned as tool_calls or
corrected. The lane's own tools are neither offered nor run here unless Settings.proxy_lane_tools
(LANE_PROXY_LANE_TOOLS) says so; then its core tools join the client's (a client tool of the same
name wins), run inside the lane and are recorded in tool_executions like the agent's.

The store holds every model call: a reply the client got, or whose calls the lane ran, is an
assistant row (as the client got it); one the lane held back (a correction followed, or the lane
answered in its own words) is a lane call (purpose HELD) with why. It holds every bridge step and
rejected call (tool_executions, as in the agent loop), every call returned to the client
(returned_calls) and every result the client sent back (tool rows linked from returned_calls).
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ..config import Settings
from ..store import HELD, Store, new_session_id
from ..token_estimate import estimate_tokens
from ..tools.base import RESERVED_NAMES, Tool, ToolContext
from ..tools.execute import Call, Outcome, refused, run_recorded, run_tool, unmet_precondition
from ..tools.registry import Registry, granted_tools, split_core
from ..tools.validation import without_defaults
from ..toolsearch.bridges import CALL, DESCRIBE, SEARCH, bridge_target
from ..toolsearch.client_tools import ClientSurface, client_surface, needs_search
from ..toolsearch.surface import Profile, guessed_task
from ..wire import ApiError
from .answer_check import TurnFacts, call_shaped
from .answers import second_look
from .corrections import correction
from .decide import (
    CLIENT_DESCRIBED,
    CLIENT_INSTRUCTION,
    DECLINES,
    ask_decision,
    decline_probability,
    listed_tool,
    parse_decision,
)
from .history import earlier_facts, fitted, said
from .ledger import MAX_IDENTICAL_CALLS, MODEL_CALL_BUDGET, Correction, TurnLedger, call_key, lever_on, repeated
from .llm_client import LlmClient, ModelReply
from .prompt import BRIDGE
from .reading import read_reported, receipt, shortlist, unbacked
from .toolcalls import (
    ToolCall,
    distinct,
    extract_calls,
    forced,
    python_calls,
    several_calls_schema,
    stored,
    unmistakable_calls,
)
from .turn import FORCED_CALL_MAX_TOKENS, TurnEnded, TurnResult, count

ChoiceMode = Literal["auto", "none", "required", "function"]
# The decision lists client tools (best match first) while their lines take no more than this: the
# question stays small even for a client that sends thousands of tools.
DECIDE_LIST_TOKENS = 1500
# Every reply the decision did not force (words, or an open reply with the tools): measured on BFCL
# even ids (multi-turn, 2 cores), a reply in words ran 2,695 tokens and an open reply after a bridge
# step past 4,000 until the 300 s timeout, three times over as the client retried.
REPLY_MAX_TOKENS = 1024
# A reply of several calls (toolcalls.several_calls_schema) gets the room of an open reply: a
# forced call's 512 tokens cut a list of calls short (the complete ones are still read).
SEVERAL_CALLS_MAX_TOKENS = REPLY_MAX_TOKENS
# Kept free beside the conversation for the lane's notes and the bridge steps of a request.
NOTES_ROOM = 400
# Measured on Qwen2.5-Coder-1.5B through proxy mode: after two tool results it replied with
# nothing, and answered after this note.
EMPTY_REPLY = ("Your reply was empty. Answer the user now in one or two sentences, using the tool results "
               "above; or call a tool if the task still needs one.")

# Why a reply that earned the "call" correction was held back.
UNMADE_CALL = "it told or spelled a call it did not make"
# How much of a declining reply the decision asked again reads (lever "declined").
DRAFT_CHARS = 300
# The client tools search ranks best for the request, listed to the reading of an answer beside
# those the conversation called (a client may send thousands).
READ_RANKED = 8


@dataclass(frozen=True)
class ToolChoice:
    mode: ChoiceMode = "auto"
    name: str | None = None  # the function a named choice forces


@dataclass(frozen=True)
class ProxyRequest:
    """What a proxy-mode request asks, already validated (api/chat_request.py)."""

    messages: list[dict[str, Any]]  # the client's conversation, normalised
    tools: list[dict[str, Any]]  # OpenAI function definitions, each with an object schema
    tool_choice: ToolChoice = ToolChoice()
    parallel_tool_calls: bool = True
    max_tokens: int = 4096  # already clamped to the lane's cap
    temperature: float | None = None


@dataclass
class ProxyResult(TurnResult):
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # OpenAI shape, for the client


@dataclass(frozen=True)
class ClientCall:
    """A call the lane returns: the model's call id, the client's real tool, arguments as JSON."""

    id: str
    name: str
    arguments: str
    via_bridge: bool
    origin: Literal["native", "content"]

    def wire(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function",
                "function": {"name": self.name, "arguments": self.arguments}}


class CallsReturned(Exception):
    """Ends a turn: these calls go to the client."""

    def __init__(self, calls: list[ClientCall], message_id: int):
        super().__init__(f"{len(calls)} calls returned")
        self.calls, self.message_id = calls, message_id


@dataclass
class History:
    """What the client's conversation says about calls: those it made, with their results."""

    calls: list[tuple[str, str, str]]  # (id, name, arguments) of every assistant tool call
    results: dict[str, str]  # tool_call_id -> the result the client sent
    before_user: int  # how many of the calls came before the latest user message

    @property
    def used_before(self) -> list[str]:
        return list(dict.fromkeys(name for _, name, _ in self.calls[:self.before_user]))

    @property
    def used_since(self) -> list[str]:
        return list(dict.fromkeys(name for _, name, _ in self.calls[self.before_user:]))

    @property
    def since_user(self) -> set[str]:
        return set(self.used_since)

    def repeats(self, name: str, arguments: str) -> bool:
        """Whether this call, made again now, would repeat itself: it is the call just answered
        (nothing happened in between that could change its result), or it was made
        MAX_IDENTICAL_CALLS times for this user message already. A call from an earlier user
        message may be made again: the world it reads may have changed."""
        key = call_key(name, arguments)
        since = [call_key(n, a) for _, n, a in self.calls[self.before_user:]]
        return bool(since) and (since[-1] == key or Counter(since)[key] >= MAX_IDENTICAL_CALLS)

    def result_of(self, name: str, arguments: str) -> str:
        key = call_key(name, arguments)
        found = [self.results.get(i, "") for i, n, a in self.calls if call_key(n, a) == key]
        return found[-1] if found else ""


@dataclass
class ProxyTurn:
    result: ProxyResult
    request: ProxyRequest
    surface: ClientSurface
    history: History
    query: str
    ctx: ToolContext
    opening: list[dict[str, Any]]  # the lane's note (when bridged) and the client's messages
    lane_tools: dict[str, Tool] = field(default_factory=dict)  # run by the lane (proxy_lane_tools)
    scratch: list[dict[str, Any]] = field(default_factory=list)  # this request's own steps
    ledger: TurnLedger = field(default_factory=TurnLedger)
    outcomes: list[Outcome] = field(default_factory=list)
    force: str | None = None
    # After a call that repeats itself (History.repeats) the next model call gets no tools: seen on
    # Qwen2.5-Coder-1.5B, told "already done", it made the same call again rather than answer.
    answer_next: bool = False
    left_out: int = 0  # the client's oldest messages not shown to the model (fitted)


class ProxyLane:
    def __init__(self, settings: Settings, store: Store, llm: LlmClient, registry: Registry | None = None):
        self.settings, self.store, self.llm, self.registry = settings, store, llm, registry

    async def run_turn(self, session_id: str, new_messages: list[dict[str, Any]],
                       request: ProxyRequest, profile: Profile = "search") -> ProxyResult:
        turn = await self._new_turn(session_id, request, profile)
        await asyncio.to_thread(self._store_incoming, session_id, new_messages, request.messages)
        if turn.left_out:
            self.store.add_message(session_id, "system", f"The model was not shown the oldest {turn.left_out} "
                                   "messages of the client's conversation: with them it exceeds the context.",
                                   lane_note=True)
        try:
            await self._first_step(turn)
            for _ in range(self.settings.max_iterations):
                if turn.result.model_calls >= MODEL_CALL_BUDGET:  # every call is paid by a waiting user
                    raise TurnEnded(_no_answer(turn.outcomes), "stop")
                reply = await self._ask(turn)
                calls = _calls_of(reply, turn.surface)
                if calls:
                    await self._take_calls(turn, reply, calls)
                else:
                    await self._answer_or_correct(turn, reply)
        except CallsReturned as done:
            return self._returned(turn, done.calls, done.message_id)
        except TurnEnded as end:
            return self._finish(turn, end)
        return self._finish(turn, TurnEnded(_no_answer(turn.outcomes), "iteration_limit"))

    async def _new_turn(self, session_id: str, request: ProxyRequest, profile: Profile) -> ProxyTurn:
        history = _history(request.messages)
        query = next((m.get("content") or "" for m in reversed(request.messages)
                      if m["role"] == "user"), "")
        context = min(self.settings.context_tokens,
                      await self.llm.context_window() or self.settings.context_tokens)
        search = profile == "search" and needs_search(request.tools, self.settings, context)
        surface = await asyncio.to_thread(
            client_surface, request.tools, self.settings, search=search, used_before=history.used_before,
            used_since=history.used_since, query=query, pinned=request.tool_choice.name)
        room = context - min(request.max_tokens, context // 4)
        if estimate_tokens(surface.offered) > room:
            raise ApiError(400, f"the request's tools take about {estimate_tokens(surface.offered)} tokens, "
                                f"more than the model's context of {context} leaves for them; send fewer "
                                "tools, or let the lane search them (without X-Lane-Tools: full, with "
                                "LANE_PROXY_TOOL_SEARCH on)", code="tools_too_large")
        lane_tools = self._lane_tools(surface)
        budget = room - estimate_tokens(surface.offered) - estimate_tokens(
            [tool.openai_schema() for tool in lane_tools.values()]) - NOTES_ROOM
        opening, left_out = fitted(_model_messages(request.messages, surface.bridged), budget)
        if estimate_tokens(opening) > budget:
            raise ApiError(400, f"the latest user message and what follows it take about "
                                f"{estimate_tokens(opening)} tokens, more than the model's context of {context} "
                                "leaves beside the tools and the reply; send a shorter conversation",
                           code="context_length_exceeded")
        if surface.bridged and self.store.last_lane_prompt(session_id) != BRIDGE:
            self.store.add_message(session_id, "system", BRIDGE, lane_prompt=True)
        temperature = self.settings.temperature if request.temperature is None else request.temperature
        result = ProxyResult(session_id, "", "stop")
        return ProxyTurn(result, replace(request, temperature=temperature), surface, history, query,
                         ToolContext(self.settings, self.store, session_id), opening, lane_tools,
                         left_out=left_out)

    def _lane_tools(self, surface: ClientSurface) -> dict[str, Tool]:
        """The lane's core tools, only where configured, and never under a name the client uses."""
        if not self.settings.proxy_lane_tools or self.registry is None:
            return {}
        core, _ = split_core(granted_tools(self.registry, self.settings), self.settings)
        return {name: tool for name, tool in core.items()
                if surface.parameters_of(name) is None and name not in RESERVED_NAMES}

    def _store_incoming(self, session_id: str, new_messages: list[dict[str, Any]],
                        conversation: list[dict[str, Any]]) -> None:
        names = _call_names(conversation)
        rows = [{"role": "tool", "content": m.get("content"), "tool_call_id": m["tool_call_id"],
                 "tool_name": names.get(m["tool_call_id"])} if m["role"] == "tool" else
                {"role": m["role"], "content": m.get("content"), "tool_calls": m.get("tool_calls"),
                 "tool_name": m.get("name")} for m in new_messages]
        self.store.add_messages(session_id, rows, client_results=True)  # one transaction

    async def _first_step(self, turn: ProxyTurn) -> None:
        """The decide lever, for a client's tools: under `tool_choice: auto`, before the reply,
        the model's constrained choice of the tool the conversation needs next, or "answer": the
        agent's question (decide.py) in words for a client's tools (CLIENT_INSTRUCTION: they are
        not "this computer"), its tools listed one line each, **best
        word match for the request first** (decision_listing), what ran since the user's latest
        message, earlier turns as facts, and of its examples those whose tools the client has. A
        tool is then forced (its arguments decoded under its schema; a hidden one offered for that
        call); "answer" gets a reply with no tools.
        Measured on Qwen2.5-Coder-1.5B: offered any tool in an open reply, it called one for
        every request, "difference between cpu and gpu?" included; of the questions tried on BFCL
        even ids (docs/measurements.md), the agent's chose right most often, and most often of
        all with its tools in search order (32/38 against 29/38 in the client's order: a small
        model leans towards the first lines it reads). After a call came back, a pick of that same
        tool is asked once more among the others (no second look at it): seen on BFCL even ids,
        `ls` picked again after `ls` (then refused as a repeat) where `cd` came next, while in the
        ground truth of the even multi-turn entries a step calls the tool just answered in 13 of
        583 steps after a call.
        After a result, "answer" is the answer, written from it: the second look (a correction)
        is only asked where nothing ran for the user's message, so it never calls a tool the
        decision did not pick once a result is in (seen with Hermes: `terminal` forced again
        after it had run for the request)."""
        if turn.request.tool_choice.mode != "auto" or turn.request.messages[-1]["role"] not in ("user", "tool"):
            return
        tools = decision_listing(turn.surface, turn.query)
        tools += [(name, tool.description) for name, tool in turn.lane_tools.items()]
        if not tools:
            return
        since = turn.history.calls[turn.history.before_user:]
        ran = [(name, "ok", turn.history.results.get(call_id, "")) for call_id, name, _ in since]
        context = earlier_facts(_as_rows(turn.request.messages))
        turn.force = await self._decided(turn, tools, ran, context)
        answered = since[-1][1] if since else None
        if turn.force is not None and turn.force == answered:
            turn.force = await self._decided(turn, tools, ran, context, leave_out=answered)
        elif turn.force is None and not since and tools[0][0] in turn.surface.catalog.tools:
            turn.force = await self._second_look(turn, tools[0][0])
        turn.answer_next = turn.force is None

    async def _decided(self, turn: ProxyTurn, tools: list[tuple[str, str]], ran: list[tuple[str, str, str]],
                       context: str, leave_out: str | None = None, draft: str = "") -> str | None:
        """One decision among the listed tools (all but `leave_out`, the one whose call just came
        back: lever "decide"), recorded; the tool picked, or None for "answer". `draft`: a reply in
        words that declined the request or told the user how (lever "declined"), shown with it."""
        choices = [name for name, _ in tools if name != leave_out]
        request = turn.query if not draft else (
            f"{turn.query}\n\n(A first reply, in words, declined it or told the user how to do it: "
            f"\"{draft.strip()[:DRAFT_CHARS]}\")")
        reply = await ask_decision(self.llm, request, tools, [], ran, context, known=turn.surface.catalog.tools,
                                   choices=choices if leave_out else None, instruction=CLIENT_INSTRUCTION)
        count(turn.result, reply)
        self.store.add_lane_call(turn.result.session_id, "decide", reply.content, path=reply.path, **reply.tokens)
        return parse_decision(reply.content, choices)

    async def _second_look(self, turn: ProxyTurn, name: str) -> str | None:
        """Lever "fit": where the decision said "answer", the best word match for the request is
        called when the model, asked about that one tool (decide.fit_probability), says it is what
        the message asks for with a probability of at least decide.FITS. Measured on BFCL even
        ids: the decision answered in words 9 of 64 single-tool requests the tool was made for
        ("What key signature does C# major have?" with music_theory.key_signature offered)."""
        return await second_look(self.llm, self.store, turn.result, turn.query, turn.surface.catalog.tools[name])

    def _tools(self, turn: ProxyTurn) -> list[dict[str, Any]]:
        """The tools block of this request's model calls: the client's (as tool search shows them)
        and the lane's own where configured."""
        return turn.surface.offered + [tool.openai_schema() for tool in turn.lane_tools.values()]

    async def _ask(self, turn: ProxyTurn) -> ModelReply:
        choice = turn.request.tool_choice
        pinned = turn.force or (choice.name if choice.mode == "function" else None)
        if choice.mode == "none" or turn.answer_next:
            tools: list[dict[str, Any]] = []
        elif pinned in turn.surface.catalog.tools:
            tools = turn.surface.forced_to(pinned)
        else:
            tools = self._tools(turn)
        in_tools = turn.force in {t["function"]["name"] for t in tools}
        if in_tools:
            tool_choice: dict[str, Any] | str | None = forced(turn.force)
        elif choice.mode == "function":
            tool_choice = forced(choice.name)
        else:
            tool_choice = "required" if choice.mode == "required" else None
        several = _several(turn, tools, tool_choice)
        max_tokens = min(turn.request.max_tokens, SEVERAL_CALLS_MAX_TOKENS if several else
                         FORCED_CALL_MAX_TOKENS if in_tools else REPLY_MAX_TOKENS)
        reply = await self.llm.chat(turn.opening + turn.scratch, tools, max_tokens=max_tokens,
                                    temperature=turn.request.temperature,
                                    tool_choice=None if several else tool_choice, response_schema=several)
        turn.force, turn.answer_next = None, False
        count(turn.result, reply)
        return reply

    async def _take_calls(self, turn: ProxyTurn, reply: ModelReply, calls: list[ToolCall]) -> None:
        """Calls to client tools that fit their schemas go to the client (CallsReturned); when a
        reply has none, its bridge steps run here and every call's outcome is told to the model.
        The reply is stored, as the assistant message that made its calls, before they run."""
        if turn.request.tool_choice.mode == "none":
            why = "it made a tool call where none was allowed"
            if self._note(turn, Correction("No tool can be called for this request: answer in words.", None, "none"),
                          held=(reply, why)):
                return
            self._hold(turn, reply, why)
            raise TurnEnded("I could not answer that without a tool call, and none was allowed.", "stop")
        message_id = self.store.add_message(
            turn.result.session_id, "assistant", reply.content, tool_calls=[stored(c) for c in calls],
            **reply.tokens)
        decided: list[ClientCall | Outcome] = []
        try:
            for call in calls:
                decided.append(await self._routed(turn, call, message_id))
        except asyncio.CancelledError:  # the client left: what already ran is recorded
            self._record_ran(turn, message_id, calls, decided)
            raise
        returned = [d for d in decided if isinstance(d, ClientCall)]
        if returned:
            for call, outcome in zip(calls, decided, strict=True):
                if isinstance(outcome, Outcome) and outcome.tool_name not in (SEARCH, DESCRIBE):
                    self._record(turn, message_id, call, outcome)  # kept as evidence
            raise CallsReturned(returned if turn.request.parallel_tool_calls else returned[:1], message_id)
        turn.scratch.append(_assistant(reply, calls))
        for index, (call, outcome) in enumerate(zip(calls, decided, strict=True)):
            assert isinstance(outcome, Outcome)
            key, earlier = turn.ledger.attempt(call.name, call.arguments)
            if turn.ledger.too_many(key):
                self._record_ran(turn, message_id, calls[index:], decided[index:])
                raise TurnEnded(_no_answer(turn.outcomes), "repeated_call")
            if earlier is not None:  # a refusal is told again as it was, not as a failure
                ran = outcome.execution_id  # a lane tool's started row is completed either way
                outcome = earlier if earlier.status == "refused" else repeated(call.name, call.arguments, earlier)
                outcome = replace(outcome, execution_id=ran)
            else:
                turn.ledger.outcomes[key] = outcome
            turn.outcomes.append(outcome)
            self._record(turn, message_id, call, outcome)
            turn.scratch.append({"role": "tool", "tool_call_id": call.id, "content": outcome.for_model})
            if outcome.status == "ok":
                turn.result.tools_executed.append(outcome.tool_name)

    async def _routed(self, turn: ProxyTurn, call: ToolCall, message_id: int) -> ClientCall | Outcome:
        """A call to return, or the outcome the model is told instead. A bridge search (or a lane
        tool, where configured) runs now; its outcome is dropped if another call of the reply goes
        to the client."""
        surface = turn.surface
        if surface.bridged and call.name == CALL:
            target = bridge_target(surface.catalog, surface.direct, call.arguments)
            if isinstance(target, Outcome):
                return target
            tool, arguments = target
            return self._checked(turn, call, tool, arguments, via_bridge=True)
        if surface.is_client_tool(call.name):
            return self._checked(turn, call, surface.catalog.tools[call.name], call.arguments)
        lane_tool = turn.lane_tools.get(call.name)
        if lane_tool is not None:
            unmet = unmet_precondition(lane_tool, call.arguments, turn.query, "\n".join(said(turn.request.messages)))
            if unmet is not None:
                return unmet
        if lane_tool is not None:  # recorded before it runs, as in the agent loop
            started = Call(message_id, call.id, lane_tool.name, False, call.origin, _json_of(call.arguments))
            return await run_recorded(turn.ctx, started, lambda: run_tool(lane_tool, call.arguments, turn.ctx))
        bridge = surface.bridges.get(call.name)
        if bridge is not None:
            return await asyncio.to_thread(run_tool, bridge, call.arguments, turn.ctx)
        return refused(call.name, self._unknown(turn, call), call.arguments)

    def _checked(self, turn: ProxyTurn, call: ToolCall, tool: Tool, arguments: Any, *,
                 via_bridge: bool = False) -> ClientCall | Outcome:
        """The call with its arguments validated and repaired, or the error the model is told; a
        repeated call (History.repeats) is not returned: the model is told the result it got."""
        outcome = run_tool(replace(tool, run=_as_validated), arguments, turn.ctx, via_bridge=via_bridge)
        if outcome.status != "ok":
            return outcome
        outcome = replace(outcome, arguments=json.dumps(
            without_defaults(tool.parameters, json.loads(outcome.arguments)), ensure_ascii=False))
        if turn.history.repeats(tool.name, outcome.arguments):
            earlier = replace(outcome, output=turn.history.result_of(tool.name, outcome.arguments))
            turn.answer_next = True
            return repeated(tool.name, outcome.arguments, earlier)
        return ClientCall(call.id, tool.name, outcome.arguments, via_bridge, call.origin)

    def _unknown(self, turn: ProxyTurn, call: ToolCall) -> str:
        surface = turn.surface
        if not surface.bridged:
            offered = ", ".join(t["function"]["name"] for t in surface.offered) or "none"
            return f"There is no tool named {call.name!r}, so nothing ran. Tools: {offered}"
        found = surface.bridges[SEARCH].run({"query": guessed_task(call.name, call.arguments)}, turn.ctx)
        return f"There is no tool named {call.name!r}, so nothing ran. Hidden tools for it:\n{found}"

    async def _answer_or_correct(self, turn: ProxyTurn, reply: ModelReply) -> None:
        """A reply without calls is the answer, unless it earns a correction (each within its
        lever's budget, ledger.LEVERS): a call was required; it told, spelled or wrote a call it
        did not make; it is empty; it reports an action no call of the conversation backs (the
        model's reading, reading.py, over the client's own tool names). The message stored is what
        the client gets; a reply it does not get is held back."""
        choice, content = turn.request.tool_choice, reply.content
        if choice.mode in ("required", "function"):
            why = "a tool call was required and it made none"
            if self._note(turn, Correction("A tool call is required here: reply with a call, not with text.",
                                           None, "required"), force=choice.name, held=(reply, why)):
                return
            self._hold(turn, reply, why)
            raise TurnEnded("The model did not make the required tool call.", "stop")
        vocabulary = frozenset(turn.surface.catalog.tools)
        facts = self._facts(turn)
        if choice.mode != "none":
            fix = correction(content, facts)
            force = fix.force if fix is not None and fix.force in vocabulary - turn.history.since_user else None
            if fix is not None and self._note(turn, fix, force=force,  # a hidden tool too (forced_to)
                                              held=(reply, UNMADE_CALL)):
                return
        if call_shaped(content, vocabulary):
            why = "a tool call written as text"
            if self._note(turn, Correction("That was not a valid tool call, so nothing ran. Make the call as a "
                                           "tool call, or answer in words.", None, "call-shaped"),
                          held=(reply, why)):
                return
            self._hold(turn, reply, why)
            raise TurnEnded("I could not make a valid tool call for that request.", "stop")
        if not content.strip():
            why = "the model gave no answer"
            if self._note(turn, Correction(EMPTY_REPLY, None, "empty"), held=(reply, why)):
                return
            self._hold(turn, reply, why)
            raise TurnEnded(_no_answer(turn.outcomes), "stop")
        if self._lane_named(turn, reply) or await self._declined(turn, reply):
            return
        missing = await self._unbacked(turn, content, facts)
        if missing:  # the conversation's truth beside the model's words; no call is forced on it
            content = f"{content.strip()}\n\n{receipt(missing, turn.history.used_since)}"
        self.store.add_message(turn.result.session_id, "assistant", content, **reply.tokens)
        raise TurnEnded(content, "length" if reply.finish_reason == "length" else "stop",
                        lane_written=False)

    async def _unbacked(self, turn: ProxyTurn, content: str, facts: TurnFacts) -> list[str]:
        """Lever "read" over the client's tools: the actions the reply reports as done that no call
        of this request (or, where this request made none, of the session) backs. A request that
        ran nothing is answered about earlier turns when it reports actions (a summary, "which
        tools did you use?"): seen with Hermes, "Tools I actually used: memory, terminal,
        session_search." on its summary step, each of which ran in an earlier turn."""
        tools = [(name, tool.description) for name, tool in turn.surface.catalog.tools.items()]
        listed = shortlist(tools, {*facts.ran_in_session, *facts.ranked})
        reading, reply = await read_reported(self.llm, content, turn.query, listed)
        count(turn.result, reply)
        self.store.add_lane_call(turn.result.session_id, "read", reply.content, path=reply.path, **reply.tokens)
        return unbacked(reading, facts.ran_in_turn or await asyncio.to_thread(self._ran_in_session, turn, facts))

    def _ran_in_session(self, turn: ProxyTurn, facts: TurnFacts) -> set[str]:
        """The tools a session ran: those its conversation called, those the lane returned to the
        client and got a result for, and the lane's own that ran."""
        session = turn.result.session_id
        returned = {row["tool_name"] for row in self.store.returned_calls(session) if row.get("result") is not None}
        return {*facts.ran_in_session, *returned, *self.store.tools_that_ran(session)}

    def _lane_named(self, turn: ProxyTurn, reply: ModelReply) -> bool:
        """Lever "lane-names": a reply that names the lane's bridges (a client has no tool_search of
        the lane's) is told to answer without them, once; then the lane's own account ends the
        turn. True when the turn goes on to another model call."""
        named = turn.surface.bridges_named(reply.content)
        if not named:
            return False
        why = "it named the lane's own tools"
        note = (f"Your reply named {', '.join(named)}, which only you can use: the user does not have them. "
                "Answer the user without naming them, or call a tool.")
        if self._note(turn, Correction(note, None, "lane-names"), held=(reply, why)):
            return True
        self._hold(turn, reply, why)
        raise TurnEnded(_no_answer(turn.outcomes), "stop")

    async def _declined(self, turn: ProxyTurn, reply: ModelReply) -> bool:
        """Lever "declined": where nothing ran for the request under tool_choice auto, a reply
        that declines it or tells the user how to do it themselves (the model's yes-probability,
        decide.decline_probability: no word of it is matched) is not the answer while a client
        tool does it: the decision is asked again with that reply in view, and a client tool it
        picks (never one that ran for the request) is forced. True when one is."""
        lane_ran = any(o.tool_name not in RESERVED_NAMES for o in turn.outcomes)  # a bridge search may have
        if turn.request.tool_choice.mode != "auto" or turn.history.since_user or lane_ran \
                or not turn.surface.catalog.tools or not lever_on("declined", await self.llm.capabilities()) \
                or not turn.ledger.take(Correction(None, None, "declined")):
            return False  # asked once a request, whatever it finds; never without logprobs
        probability, asked = await decline_probability(self.llm, turn.query, reply.content)
        count(turn.result, asked)
        shown = "none" if probability is None else f"{probability:.2f}"
        self.store.add_lane_call(turn.result.session_id, "declined", f"yes {shown}", path=asked.path, **asked.tokens)
        if probability is None or probability < DECLINES:
            return False
        tools = decision_listing(turn.surface, turn.query)
        context = earlier_facts(_as_rows(turn.request.messages))
        picked = await self._decided(turn, tools, [], context, draft=reply.content)
        if picked is None:
            return False
        turn.force = picked
        self._hold(turn, reply, "it declined the request or told how, where a client tool does it")
        return True

    def _note(self, turn: ProxyTurn, fix: Correction, *, force: str | None = None,
              held: tuple[ModelReply, str] | None = None) -> bool:
        """Tells the model what went wrong (fix.note; or only forces its next call, without a
        note), within the lever's budget: True when done now (the turn goes on to another model
        call; the reply in `held`, with why, is then held back before the note), False when the
        budget is spent."""
        if not turn.ledger.take(fix):
            return False
        turn.force = force
        if held is not None:
            self._hold(turn, *held)
        if fix.note:
            self.store.add_message(turn.result.session_id, "system", fix.note, lane_note=True)
            turn.scratch.append({"role": "system", "content": fix.note})
        return True

    def _hold(self, turn: ProxyTurn, reply: ModelReply, why: str) -> None:
        """Holds the reply back: the client never gets it, so it is kept with the lane's own model
        calls, with why, not as a message."""
        self.store.add_lane_call(turn.result.session_id, HELD, reply.content, reason=why, path=reply.path,
                                 **reply.tokens)

    def _facts(self, turn: ProxyTurn) -> TurnFacts:
        tools = turn.surface.catalog.tools
        return TurnFacts(turn.query, {n: t.parameters for n, t in tools.items()},
                         {name for _, name, _ in turn.history.calls}, turn.history.since_user,
                         ranked=tuple(h.name for h in turn.surface.catalog.search(turn.query, READ_RANKED)[0]))

    def _record(self, turn: ProxyTurn, message_id: int, call: ToolCall, outcome: Outcome) -> None:
        self.store.add_tool_result(
            turn.result.session_id, message_id, outcome.for_model, tool_call_id=call.id,
            tool_name=outcome.tool_name, via_bridge=outcome.via_bridge, origin=call.origin,
            arguments=outcome.arguments, status=outcome.status,
            result=outcome.output if outcome.status == "ok" else None,
            error=None if outcome.status == "ok" else outcome.output,
            started_at=outcome.started_at, duration_ms=outcome.duration_ms,
            execution_id=outcome.execution_id)

    def _record_ran(self, turn: ProxyTurn, message_id: int, calls: list[ToolCall],
                    decided: list[ClientCall | Outcome]) -> None:
        """Completes the started rows of lane tools that ran but will not be told to the model
        (the turn ends first): a started row never stays 'running' for a tool that ended."""
        for call, outcome in zip(calls, decided, strict=False):  # decided may stop short
            if isinstance(outcome, Outcome) and outcome.execution_id is not None:
                self._record(turn, message_id, call, outcome)

    def _returned(self, turn: ProxyTurn, calls: list[ClientCall], message_id: int) -> ProxyResult:
        """The calls go to the client, recorded under the model's reply that made them."""
        for call in calls:
            self.store.add_returned_call(
                turn.result.session_id, message_id, tool_call_id=call.id, tool_name=call.name,
                via_bridge=call.via_bridge, origin=call.origin, arguments=call.arguments)
        turn.result.tool_calls = [c.wire() for c in calls]
        turn.result.finish_reason = "tool_calls"
        return turn.result

    def _finish(self, turn: ProxyTurn, end: TurnEnded) -> ProxyResult:
        if end.lane_written:
            self.store.add_message(turn.result.session_id, "assistant", end.content, lane_note=True)
        turn.result.content, turn.result.finish_reason = end.content, end.reason
        return turn.result


def continued_session(store: Store, given_id: str | None,
                      messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """(session id, the request's messages the store does not hold yet). A stateless client that
    sends back results of calls the lane returned continues that session; with X-Session-Id the
    session is the header's. A continued session stores what came after the last assistant
    message (the tool results and a new user message); a new one, the whole conversation."""
    result_ids = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    session_id = given_id or store.session_of_returned_calls(result_ids)
    if session_id is None or not store.messages(session_id):
        return session_id or new_session_id(), messages
    assistants = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    if assistants:
        return session_id, messages[assistants[-1] + 1:]
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    return session_id, messages[users[-1]:]


def unanswerable_results(messages: list[dict[str, Any]]) -> list[str]:
    """tool_call_ids of role=tool messages that answer no call an earlier assistant message made."""
    made: set[str] = set()
    stray = []
    for message in messages:
        made.update(call["id"] for call in message.get("tool_calls") or [])
        if message["role"] == "tool" and message["tool_call_id"] not in made:
            stray.append(message["tool_call_id"])
    return stray


def _no_answer(outcomes: list[Outcome]) -> str:
    """The answer the lane writes when the model gave none: what ran inside the lane, by name and
    status only (the agent's fallback quotes results and errors, whose schema examples are
    call-shaped JSON, and no call may reach a client as text); the lane's bridges are never named
    to a client."""
    outcomes = [o for o in outcomes if o.tool_name not in RESERVED_NAMES]
    if not outcomes:
        return "The model gave no answer to that, and made no tool call."
    steps = ", ".join(f"{o.tool_name} ({o.status})" for o in outcomes)
    return f"The model gave no final answer. Steps it took inside the lane: {steps}."


def _json_of(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def _as_validated(arguments: dict[str, Any], ctx: ToolContext) -> str:
    """A client tool's stand-in body: the lane never runs it; reaching here means the arguments
    passed the client's schema (run_tool validated and repaired them)."""
    return json.dumps(arguments, ensure_ascii=False)


def _several(turn: ProxyTurn, tools: list[dict[str, Any]], tool_choice: dict[str, Any] | str | None
             ) -> dict[str, Any] | None:
    """Where a call is forced (`tool_choice`) and the client allows parallel calls, the schema of
    a reply of one or more calls (toolcalls.several_calls_schema) that replaces the forced one:
    asked for the same function on several inputs, or for several functions, the model writes
    every call, each under its tool's schema. The decision's (or the client's) tool leads the
    list of variants; a named tool_choice admits that tool alone."""
    if tool_choice is None or not turn.request.parallel_tool_calls:
        return None
    if isinstance(tool_choice, dict):
        first = tool_choice["function"]["name"]
        if turn.request.tool_choice.mode == "function":
            tools = [t for t in tools if t["function"]["name"] == first]
        return several_calls_schema(tools, first)
    return several_calls_schema(tools)


def _calls_of(reply: ModelReply, surface: ClientSurface) -> list[ToolCall]:
    """Native calls, else calls written as text (JSON, or Python-style); else calls made unmistakably (tagged, fenced or
    the whole reply) whose arguments do not fit, or to a tool no one has: each is answered with
    what is wrong (the arguments' error, or the tools that fit the guess) and corrected."""
    if reply.tool_calls:
        return distinct(reply.tool_calls)
    return distinct(extract_calls(reply.content, surface.parameters_of)
                    or python_calls(reply.content, surface.parameters_of) or unmistakable_calls(reply.content))


def _history(messages: list[dict[str, Any]]) -> History:
    calls: list[tuple[str, str, str]] = []
    results: dict[str, str] = {}
    before_user = 0
    for message in messages:
        if message["role"] == "user":
            before_user = len(calls)
        for call in message.get("tool_calls") or []:
            function = call["function"]
            calls.append((call["id"], function["name"], function.get("arguments") or ""))
        if message["role"] == "tool":
            results[message["tool_call_id"]] = message.get("content") or ""
    return History(calls, results, before_user)


def decision_listing(surface: ClientSurface, query: str) -> list[tuple[str, str]]:
    """The client's tools as the decision lists them, as (name, description): in tool search's
    order for `query` (the rest after, in the client's order), while their lines fit
    DECIDE_LIST_TOKENS. With tool search on, only the tools offered directly and search's
    CLIENT_DESCRIBED best hidden ones keep a description; the others are listed by name alone (a
    name such as `fillFuelTank` still says what it does: search's best alone missed it for
    "refuel the vehicle"), so the question costs a fraction of the tools block it stands for."""
    catalog = surface.catalog
    hits, _ = catalog.search(query, len(catalog.tools))
    order = list(dict.fromkeys([*(hit.name for hit in hits), *catalog.tools]))
    hidden_best = [name for name in order if name not in surface.direct][:CLIENT_DESCRIBED]
    described = set(catalog.tools) if not surface.bridged else {*surface.direct, *hidden_best}
    listing: list[tuple[str, str]] = []
    budget = DECIDE_LIST_TOKENS
    for name in order:
        description = catalog.tools[name].description if name in described else ""
        budget -= estimate_tokens(listed_tool(name, description))
        if budget < 0:
            break
        listing.append((name, description))
    return listing


def _as_rows(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A client's conversation as the store's rows read (history.earlier_facts): each result
    named by the call it answers."""
    names = _call_names(messages)
    return [{**m, "tool_name": names.get(m.get("tool_call_id", ""))} for m in messages]


def _call_names(messages: list[dict[str, Any]]) -> dict[str, str]:
    """tool_call_id -> the function each assistant call of the conversation named."""
    return {call["id"]: call["function"]["name"] for m in messages for call in m.get("tool_calls") or []}


def _model_messages(messages: list[dict[str, Any]], bridged: bool) -> list[dict[str, Any]]:
    """The client's conversation as the model reads it; when tool search is on, the bridge
    protocol joins the client's system message (or opens the conversation)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        role = message["role"]
        if role == "tool":
            out.append({"role": "tool", "tool_call_id": message["tool_call_id"],
                        "content": message.get("content") or ""})
            continue
        item: dict[str, Any] = {"role": role, "content": message.get("content") or ""}
        if message.get("tool_calls"):
            item["tool_calls"] = [{"id": c["id"], "type": "function", "function": c["function"]}
                                  for c in message["tool_calls"]]
        out.append(item)
    if bridged:
        if out and out[0]["role"] == "system":
            out[0] = {**out[0], "content": f"{out[0]['content']}\n\n{BRIDGE}".strip()}
        else:
            out.insert(0, {"role": "system", "content": BRIDGE})
    return out


def _assistant(reply: ModelReply, calls: list[ToolCall]) -> dict[str, Any]:
    """The model's reply as it reads it back: a call salvaged from text is in tool_calls now."""
    wire = [{k: v for k, v in stored(c).items() if k != "origin"} for c in calls]
    salvaged = any(c.origin == "content" for c in calls)
    return {"role": "assistant", "content": "" if salvaged else reply.content, "tool_calls": wire}

