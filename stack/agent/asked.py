"""A call as the lane runs it, and the request a forced call is made in.

Two weak-model levers act on a call before it runs (ledger.LEVERS): "numbers" leaves out an
optional number argument nobody gave, so the tool's default applies; "operands" refuses a call of
the lane's own tool whose precondition the conversation does not meet. Both read the request and
what the conversation said, never the model's own words.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Callable

from ..config import Settings
from ..store import Store
from ..token_estimate import estimate_tokens
from ..tools.base import ToolError
from ..tools.execute import Call, Outcome, unmet_precondition
from ..tools.memory import read_memory
from ..tools.validation import parse_arguments, without_unasked_numbers
from ..toolsearch.surface import Toolset
from .corrections import named_in
from .history import context_of, conversation, prompt_room, said
from .prompt import memory_note, system_prompt
from .toolcalls import ToolCall


def as_asked(call: ToolCall, toolset: Toolset, query: str, conversation_said: Callable[[], str]) -> ToolCall:
    """The call less the optional numbers nobody gave (lever "numbers"), through the bridge
    too; unchanged when it reaches no tool or its arguments do not parse (the tool says so).
    `conversation_said` reads the whole session: called only where a number is to be weighed."""
    found = toolset.target(call.name, call.arguments)
    if found is None:
        return call
    tool, raw, via_bridge = found
    try:
        arguments = parse_arguments(raw)
    except ToolError:
        return call
    if not any(isinstance(value, (int, float)) and not isinstance(value, bool) for value in arguments.values()):
        return call  # no number to weigh
    kept = without_unasked_numbers(tool.parameters, arguments, query, conversation_said())
    if kept == arguments:
        return call
    sent = {"name": tool.name, "arguments": kept} if via_bridge else kept
    return replace(call, arguments=json.dumps(sent, ensure_ascii=False))


def unasked(call: ToolCall, toolset: Toolset, query: str, conversation_said: Callable[[], str]) -> Outcome | None:
    """The refusal of a call its tool's precondition rejects (lever "operands"), read against
    the request and what the conversation said."""
    found = toolset.target(call.name, call.arguments)
    if found is None or found[0].precondition is None:
        return None
    tool, arguments, via_bridge = found
    return unmet_precondition(tool, arguments, query, conversation_said(), via_bridge=via_bridge)


def said_in(store: Store, settings: Settings, session_id: str) -> str:
    """What the conversation said (its messages, the tool results) and the notes."""
    return "\n".join([*said(store.messages(session_id)), read_memory(settings)])


def request_messages(store: Store, settings: Settings, session_id: str, toolset: Toolset, cap: int,
                     upstream_context: int | None) -> list[dict[str, Any]]:
    """A forced call's messages: the lane's prompt (stored when it changes), the session's memory
    snapshot, and the stored conversation within the context budget."""
    prompt = system_prompt(bridged=toolset.bridged)
    if store.last_lane_prompt(session_id) != prompt:
        store.add_message(session_id, "system", prompt, lane_prompt=True)
    note = memory_note(store.memory_snapshot(session_id, lambda: read_memory(settings)))
    opening = [{"role": "system", "content": text} for text in (prompt, note) if text]
    room = prompt_room(context_of(settings.context_tokens, upstream_context), cap)
    budget = room - estimate_tokens(toolset.offered) - estimate_tokens(opening)
    return opening + conversation(store.messages(session_id), max(budget, 0), store.failed_call_ids(session_id))


def names_an_offered_tool(query: str, toolset: Toolset) -> bool:
    """Whether the user named one of the offered tools: then none is promoted beside it."""
    return any(named_in(t["function"]["name"], query) for t in toolset.offered)


def started(call: ToolCall, toolset: Toolset, message_id: int) -> Call:
    """The execution row of a call about to run: under the tool it reaches, where it reaches one."""
    found = toolset.target(call.name, call.arguments)
    name, via_bridge = (found[0].name, found[2]) if found is not None else (call.name, False)
    return Call(message_id, call.id, name, via_bridge, call.origin, call.json_arguments())
