"""The calls of a proxy-mode reply: which go to the client, and what the model is told instead.

A call to a client tool whose arguments fit its schema (validated and repaired where that cannot
change their meaning, tools/validation.py; an optional one set to its declared default left out)
is returned to the client, also when the model reached it through the lane's tool_call bridge. A
bridge search, and a lane tool where Settings.proxy_lane_tools allows one, runs here; a call that
does not fit, to a tool no one has, or that repeats itself is told to the model, which corrects
it: the client never sees a bad call, nor a bridge.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Any

from ..tools.base import Tool, ToolContext
from ..tools.execute import Call, Outcome, refused, run_recorded, run_tool, unmet_precondition
from ..tools.validation import sourced_share, without_defaults, without_unsourced
from ..toolsearch.bridges import CALL, DESCRIBE, SEARCH, bridge_target
from ..toolsearch.client_tools import ClientSurface
from ..toolsearch.surface import guessed_task
from .client_history import read_back
from .history import said
from .ledger import Correction, repeated
from .llm_client import ModelReply
from .proxy_request import CallsReturned, ClientCall, ProxyResult
from .proxy_turn import ProxyTurn, corrected, no_answer
from .records import calls_made, latest_request, record_outcome, text_of
from .toolcalls import ToolCall, distinct, extract_calls, python_calls, unmistakable_calls
from .turn import TurnEnded


def calls_of(reply: ModelReply, surface: ClientSurface) -> list[ToolCall]:
    """Native calls, else calls written as text (JSON, or Python-style); else calls made unmistakably (tagged, fenced or
    the whole reply) whose arguments do not fit, or to a tool no one has: each is answered with
    what is wrong (the arguments' error, or the tools that fit the guess) and corrected."""
    if reply.tool_calls:
        return distinct(reply.tool_calls)
    return distinct(extract_calls(reply.content, surface.parameters_of)
                    or python_calls(reply.content, surface.parameters_of) or unmistakable_calls(reply.content))


async def take_calls(turn: ProxyTurn, reply: ModelReply, calls: list[ToolCall]) -> None:
    """Calls to client tools that fit their schemas go to the client (CallsReturned); when a
    reply has none, its bridge steps run here and every call's outcome is told to the model.
    The reply is stored, as the assistant message that made its calls, before they run."""
    if turn.request.tool_choice.mode == "none":
        corrected(turn, Correction("No tool can be called for this request: answer in words.", None, "none"),
                  reply, "it made a tool call where none was allowed",
                  "I could not answer that without a tool call, and none was allowed.")
        return
    # after a result, offered no tools, it wrote another call of a tool that already ran for the
    # message, saying nothing of the request that the calls so far did not (a repeat is told its
    # result, ledger.py; a next step, "then save it", or the rest of the request is made)
    history = turn.history
    if turn.answering and any(c.name in history.since_user and not history.repeats(c.name, c.arguments)
                              and not history.goes_further(c.json_arguments(), latest_request(turn.request.messages))
                              for c in calls):
        corrected(turn, Correction("Answer the user now in words, from the tool results above; make no call.",
                                   None, "none"), reply, "it wrote a call where the answer was due", no_answer(turn))
        turn.answer_next = True
        return
    message_id = calls_made(turn.store, turn.result.session_id, reply, calls)
    decided: list[ClientCall | Outcome] = []
    try:
        for call in calls:
            decided.append(await _routed(turn, call, message_id))
    except asyncio.CancelledError:  # the client left: what already ran is recorded
        _record_ran(turn, message_id, calls, decided)
        raise
    decided = _told_first(turn, decided)
    returned = [d for d in decided if isinstance(d, ClientCall)]
    if returned:
        for call, outcome in zip(calls, decided, strict=True):
            if isinstance(outcome, Outcome) and outcome.tool_name not in (SEARCH, DESCRIBE):
                _record(turn, message_id, call, outcome)  # kept as evidence
        raise CallsReturned(returned if turn.request.parallel_tool_calls else returned[:1], message_id)
    turn.scratch.append(read_back(reply, calls))
    for index, (call, outcome) in enumerate(zip(calls, decided, strict=True)):
        assert isinstance(outcome, Outcome)
        key, earlier = turn.ledger.attempt(call.name, call.arguments)
        if turn.ledger.too_many(key):
            _record_ran(turn, message_id, calls[index:], decided[index:])
            raise TurnEnded(no_answer(turn), "repeated_call")
        if earlier is not None:  # a refusal is told again as it was, not as a failure
            ran = outcome.execution_id  # a lane tool's started row is completed either way
            outcome = earlier if earlier.status == "refused" else repeated(call.name, call.arguments, earlier)
            outcome = replace(outcome, execution_id=ran)
        else:
            turn.ledger.outcomes[key] = outcome
        turn.outcomes.append(outcome)
        _record(turn, message_id, call, outcome)
        turn.scratch.append({"role": "tool", "tool_call_id": call.id, "content": outcome.for_model})
        if outcome.status == "ok":
            turn.result.tools_executed.append(outcome.tool_name)


def returned(turn: ProxyTurn, calls: list[ClientCall], message_id: int) -> ProxyResult:
    """The calls go to the client, recorded under the model's reply that made them."""
    for call in calls:
        turn.store.add_returned_call(
            turn.result.session_id, message_id, tool_call_id=call.id, tool_name=call.name,
            via_bridge=call.via_bridge, origin=call.origin, arguments=call.arguments)
    turn.result.tool_calls = [c.wire() for c in calls]
    turn.result.finish_reason = "tool_calls"
    return turn.result


async def _routed(turn: ProxyTurn, call: ToolCall, message_id: int) -> ClientCall | Outcome:
    """A call to return, or the outcome the model is told instead. A bridge search (or a lane
    tool, where configured) runs now; its outcome is dropped if another call of the reply goes
    to the client."""
    surface = turn.surface
    if surface.bridged and call.name == CALL:
        target = bridge_target(surface.catalog, surface.direct, call.arguments)
        if isinstance(target, Outcome):
            return target
        tool, arguments = target
        return _checked(turn, call, tool, arguments, via_bridge=True)
    if surface.is_client_tool(call.name):
        return _checked(turn, call, surface.catalog.tools[call.name], call.arguments)
    lane_tool = turn.lane_tools.get(call.name)
    if lane_tool is not None:
        unmet = unmet_precondition(lane_tool, call.arguments, turn.query, "\n".join(said(turn.request.messages)))
        if unmet is not None:
            return unmet
    if lane_tool is not None:  # recorded before it runs, as in the agent loop
        started = Call(message_id, call.id, lane_tool.name, False, call.origin, call.json_arguments())
        return await run_recorded(turn.ctx, started, lambda: run_tool(lane_tool, call.arguments, turn.ctx))
    bridge = surface.bridges.get(call.name)
    if bridge is not None:
        return await asyncio.to_thread(run_tool, bridge, call.arguments, turn.ctx)
    return refused(call.name, _unknown(turn, call), call.arguments)


def _checked(turn: ProxyTurn, call: ToolCall, tool: Tool, arguments: Any, *,
             via_bridge: bool = False) -> ClientCall | Outcome:
    """The call with its arguments validated and repaired, or the error the model is told; a
    repeated call (ClientHistory.repeats) is not returned: the model is told the result it got."""
    outcome = run_tool(replace(tool, run=_as_validated), arguments, turn.ctx, via_bridge=via_bridge)
    if outcome.status != "ok":
        return outcome
    arguments = without_defaults(tool.parameters, json.loads(outcome.arguments))
    outcome = replace(outcome, arguments=json.dumps(without_unsourced(tool.parameters, arguments, _said(turn)),
                                                    ensure_ascii=False))
    if turn.history.repeats(tool.name, outcome.arguments):
        earlier = replace(outcome, output=turn.history.result_of(tool.name, outcome.arguments))
        turn.answer_next = True
        return repeated(tool.name, outcome.arguments, earlier)
    return ClientCall(call.id, tool.name, outcome.arguments, via_bridge, call.origin)


# A call after the first of a reply whose texts the conversation holds less of than this is
# not returned (validation.sourced_share).
SOURCED_SHARE = 0.5


def _told_first(turn: ProxyTurn, decided: list[ClientCall | Outcome]) -> list[ClientCall | Outcome]:
    """Lever "waits": the reply's calls less each client call after its first whose texts the conversation
    mostly does not hold (validation.sourced_share): a call that waits for an earlier one's
    result, written before it came back, guesses it, and a client would act on the guess. The
    guess is kept as a refused outcome, recorded with the reply; the client gets the calls before
    it, and the next step once their results are back."""
    clients = [item for item in decided if isinstance(item, ClientCall)]
    if len(clients) < 2:
        return decided
    said, first = _said(turn), clients[0]
    kept: list[ClientCall | Outcome] = []
    for item in decided:
        if (isinstance(item, ClientCall) and item is not first
                and sourced_share(turn.surface.catalog.tools[item.name].parameters, json.loads(item.arguments),
                                  said) < SOURCED_SHARE):
            item = refused(item.name, "Not returned: its values come from no message yet (it waits for "
                           "the result of the calls before it).", item.arguments, via_bridge=item.via_bridge)
        kept.append(item)
    return kept


def _said(turn: ProxyTurn) -> str:
    """The conversation's text a call's values may come from: the request's messages (the
    client's instructions and its tools' results included) and the calls made before."""
    return "\n".join([*(text_of(m.get("content")) or "" for m in turn.request.messages),
                      *(given for _, _, given in turn.history.calls)])


def _as_validated(arguments: dict[str, Any], ctx: ToolContext) -> str:
    """A client tool's stand-in body: the lane never runs it; reaching here means the arguments
    passed the client's schema (run_tool validated and repaired them)."""
    return json.dumps(arguments, ensure_ascii=False)


def _unknown(turn: ProxyTurn, call: ToolCall) -> str:
    surface = turn.surface
    if not surface.bridged:
        offered = ", ".join(t["function"]["name"] for t in surface.offered) or "none"
        return f"There is no tool named {call.name!r}, so nothing ran. Tools: {offered}"
    found = surface.bridges[SEARCH].run({"query": guessed_task(call.name, call.arguments)}, turn.ctx)
    return f"There is no tool named {call.name!r}, so nothing ran. Hidden tools for it:\n{found}"


def _record(turn: ProxyTurn, message_id: int, call: ToolCall, outcome: Outcome) -> None:
    record_outcome(turn.store, turn.result.session_id, message_id, call, outcome)


def _record_ran(turn: ProxyTurn, message_id: int, calls: list[ToolCall], decided: list[ClientCall | Outcome]) -> None:
    """Completes the started rows of lane tools that ran but will not be told to the model (the
    turn ends first): a started row never stays 'running' for a tool that ended."""
    for call, outcome in zip(calls, decided, strict=False):  # decided may stop short
        if isinstance(outcome, Outcome) and outcome.execution_id is not None:
            _record(turn, message_id, call, outcome)
