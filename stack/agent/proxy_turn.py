"""One proxy-mode request as it runs: its state, how it is opened within the model's context, and
the two things every part of it may do (tell the model what went wrong; end without an answer).

Opening a turn decides what the model reads for the whole request: the client's tools as tool
search shows them (checked to fit the context, or the request is refused with why), the lane's own
tools where configured, and the client's conversation cut to what fits beside them
(history.fitted, the budget reckoned as the agent's is).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from typing import Any

from ..config import Settings
from ..store import Store
from ..token_estimate import estimate_tokens
from ..tools.base import RESERVED_NAMES, Tool, ToolContext
from ..tools.execute import Outcome
from ..tools.registry import Registry, granted_tools, split_core
from ..toolsearch.client_tools import ClientSurface, client_surface, needs_search
from ..toolsearch.surface import Profile
from ..wire import ApiError
from .answer_check import call_shaped
from .answers import english_of
from .client_history import NO_FINAL_ANSWER, ClientHistory, client_history, model_messages
from .english import index_text
from .history import context_of, fitted, prompt_room
from .ledger import Correction, TurnLedger, preview
from .llm_client import LlmClient, ModelReply
from .prompt import BRIDGE
from .proxy_request import ProxyRequest, ProxyResult
from .records import hold, latest_request
from .turn import ReadsRequest, TurnEnded

# Kept free beside the conversation for the lane's notes and the bridge steps of a request.
NOTES_ROOM = 400


@dataclass
class ProxyTurn(ReadsRequest):
    result: ProxyResult
    request: ProxyRequest
    surface: ClientSurface
    history: ClientHistory
    query: str
    ctx: ToolContext
    llm: LlmClient
    opening: list[dict[str, Any]]  # the lane's note (when bridged) and the client's messages
    lane_tools: dict[str, Tool] = field(default_factory=dict)  # run by the lane (proxy_lane_tools)
    scratch: list[dict[str, Any]] = field(default_factory=list)  # this request's own steps
    ledger: TurnLedger = field(default_factory=TurnLedger)
    outcomes: list[Outcome] = field(default_factory=list)
    force: str | None = None
    # The optional choices (`enum` properties) the forced call must also say: those a failed call of
    # the same tool left out (lever "failed": Hermes's `memory` without `action`).
    must_say: tuple[str, ...] = ()
    # After a call that repeats itself (ClientHistory.repeats) the next model call gets no tools:
    # seen on Qwen2.5-Coder-1.5B, told "already done", it made the same call again rather than answer.
    answer_next: bool = False
    answering: bool = False  # the reply in hand was asked for as an answer (answer_next): it may make no call
    # Lever "doubt" weighed a reply in words above every tool: that reply is not then read as
    # declining the request (lever "declined"), which would ask the decision again.
    words_chosen: bool = False
    left_out: int = 0  # the client's oldest messages not shown to the model (fitted)
    english: str = ""  # the user's message in English where they wrote in another language (english.py)

    @property
    def store(self) -> Store:
        return self.ctx.store


async def open_turn(settings: Settings, store: Store, llm: LlmClient, registry: Registry | None,
                    session_id: str, request: ProxyRequest, profile: Profile) -> ProxyTurn:
    """The request's turn, or ApiError 400 where its tools, or its latest user message, do not fit
    the model's context beside the reply."""
    history = client_history(request.messages)
    query = latest_request(request.messages)
    result, ledger = ProxyResult(session_id, "", "stop"), _answered_calls(history)
    english = await english_of(llm, store, result, ledger, query)
    context = context_of(settings.context_tokens, await llm.context_window())
    search = profile == "search" and needs_search(request.tools, settings, context)
    surface = await asyncio.to_thread(
        client_surface, request.tools, settings, search=search, used_before=history.used_before,
        used_since=history.used_since, query=index_text(query, english), pinned=request.tool_choice.name)
    room = prompt_room(context, request.max_tokens)
    if estimate_tokens(surface.offered) > room:
        raise ApiError(400, f"the request's tools take about {estimate_tokens(surface.offered)} tokens, "
                            f"more than the model's context of {context} leaves for them; send fewer "
                            "tools, or let the lane search them (without X-Lane-Tools: full, with "
                            "LANE_PROXY_TOOL_SEARCH on)", code="tools_too_large")
    lane_tools = _lane_tools(settings, registry, surface)
    budget = room - estimate_tokens(surface.offered) - estimate_tokens(
        [tool.openai_schema() for tool in lane_tools.values()]) - NOTES_ROOM
    opening, left_out = fitted(model_messages(request.messages, surface.bridged), budget)
    if estimate_tokens(opening) > budget:
        raise ApiError(400, f"the latest user message and what follows it take about "
                            f"{estimate_tokens(opening)} tokens, more than the model's context of {context} "
                            "leaves beside the tools and the reply; send a shorter conversation",
                       code="context_length_exceeded")
    if surface.bridged and store.last_lane_prompt(session_id) != BRIDGE:
        store.add_message(session_id, "system", BRIDGE, lane_prompt=True)
    temperature = settings.temperature if request.temperature is None else request.temperature
    return ProxyTurn(result, replace(request, temperature=temperature), surface, history, query,
                     ToolContext(settings, store, session_id), llm, opening, lane_tools, ledger=ledger,
                     left_out=left_out, english=english)


def _answered_calls(history: ClientHistory) -> TurnLedger:
    """A ledger that counts the calls the client already ran for the user's latest message, with
    their results: the model's first repeat of one is told its result (ledger.repeated), the
    second ends the turn with the lane's account (no_answer) instead of going round again. Seen
    with Claude Code on the 1.5B model: `Write` ran, then was written again twice, then "I don't
    have any information about the task", five model calls after the result."""
    ledger = TurnLedger()
    for call_id, name, arguments in history.calls[history.before_user:]:
        if call_id in history.results:
            key, _ = ledger.attempt(name, arguments)
            ledger.outcomes[key] = Outcome(name, "ok", history.results[call_id], arguments, "", 0.0)
    return ledger


def _lane_tools(settings: Settings, registry: Registry | None, surface: ClientSurface) -> dict[str, Tool]:
    """The lane's core tools, only where configured, and never under a name the client uses."""
    if not settings.proxy_lane_tools or registry is None:
        return {}
    core, _ = split_core(granted_tools(registry, settings), settings)
    return {name: tool for name, tool in core.items()
            if surface.parameters_of(name) is None and name not in RESERVED_NAMES}


def note(turn: ProxyTurn, fix: Correction, *, force: str | None = None,
         held_back: tuple[ModelReply, str] | None = None) -> bool:
    """Tells the model what went wrong (fix.note; or only forces its next call, without a note),
    within the lever's budget: True when done now (the turn goes on to another model call; the
    reply in `held_back`, with why, is then held back before the note), False when the budget is
    spent."""
    if not turn.ledger.take(fix):
        return False
    turn.force = force
    if held_back is not None:
        hold(turn.store, turn.result.session_id, *held_back)
    if fix.note:
        turn.store.add_message(turn.result.session_id, "system", fix.note, lane_note=True)
        turn.scratch.append({"role": "system", "content": fix.note})
    return True


def corrected(turn: ProxyTurn, fix: Correction, reply: ModelReply, why: str, ending: str, *,
              force: str | None = None) -> None:
    """The reply held back with why, and the model told `fix` (note); once the lever's budget is
    spent, the turn ends with `ending`, the lane's own words, instead."""
    if not note(turn, fix, force=force, held_back=(reply, why)):
        hold(turn.store, turn.result.session_id, reply, why)
        raise TurnEnded(ending, "stop")


def no_answer(turn: ProxyTurn) -> str:
    """The answer the lane writes when the model gave none: what the client's tools returned for
    the user's latest message (a result quoted unless it is call-shaped: no call may reach a
    client as text), and what ran inside the lane, by name and status only (errors carry schema
    examples, call-shaped JSON); the lane's bridges are never named to a client."""
    history = turn.history
    vocabulary = frozenset(turn.surface.catalog.tools)
    returned, answered = [], set()
    for call_id, name, _ in history.calls[history.before_user:]:
        result = preview(history.results.get(call_id, ""))
        if call_id in history.results:
            answered.add(name)  # its repeats, refused here, are told by its result
            returned.append(f"- {name}: {result}" if result and not call_shaped(result, vocabulary)
                            else f"- {name} returned a result")
    outcomes = [o for o in turn.outcomes if o.tool_name not in RESERVED_NAMES
                and not (o.status == "refused" and o.tool_name in answered)]
    parts = [NO_FINAL_ANSWER]
    if returned:
        parts.append("What your tools returned for this request:\n" + "\n".join(returned))
    if outcomes:
        parts.append("Steps it took inside the lane: " + ", ".join(f"{o.tool_name} ({o.status})" for o in outcomes)
                     + ".")
    if len(parts) == 1:
        return "The model gave no answer to that, and made no tool call."
    return "\n".join(parts)
