"""What a turn writes to the store, written one way for the agent loop and for proxy mode.

The store is the truth about what ran (DESIGN.md), so each kind of row is written by one function
here: the request's messages, the model's reply that made calls, a call's result and execution
row, the lane's own model calls (lane_calls, with the reply held back and why), the answer the
user gets and the lane's own account when the model gave none. Both modes used to keep a copy of
each; a column added to one kind of row is now added once.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from ..store import HELD, Store, new_session_id
from ..tools.execute import Outcome
from .llm_client import ModelReply
from .toolcalls import ToolCall, stored
from .turn import TurnEnded, TurnResult, count


def text_of(content: Any) -> str | None:
    """OpenAI content is a string, null, or a list of parts; the store keeps the text."""
    if content is None or isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content if isinstance(part, dict))


# A part of a user message that is one markup element from its own line to its own line, any tag
# name: what an agent wraps around its user's words (Claude Code's `<system-reminder>` blocks about
# commit attribution before "Create a file …", Codex's `<environment_context>`), not what the user
# asks. Seen on the default model: with the reminder read as the request, Claude Code's "Create a
# file named notes.txt …" was answered in words three times of three. A shape, no word of it.
_ENVELOPE = re.compile(r"^<([A-Za-z][\w.:-]*)(?:[ \t][^>\n]*)?>[ \t]*\n.*?\n</\1>[ \t]*(?:\n|\Z)", re.M | re.S)


def latest_request(messages: list[dict[str, Any]]) -> str:
    """What the turn is asked: the text of the latest user message ("" where there is none),
    without the parts its client wrapped in markup (_ENVELOPE) unless nothing else is left. The
    stored message keeps them: they are part of the conversation, not of the question."""
    text = next((text_of(m.get("content")) or "" for m in reversed(messages) if m.get("role") == "user"), "")
    return _ENVELOPE.sub("", text).strip() or text


def incoming(message: dict[str, Any], call_names: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A request's message as Store.add_messages takes it. With `call_names` (tool_call_id -> the
    function the call named: a client's conversation, client_history.call_names), a result is
    stored under the tool whose call it answers; without, under the message's own `name`."""
    tool_name = message.get("name")
    if call_names is not None and message["role"] == "tool":
        tool_name = call_names.get(message["tool_call_id"])
    return {"role": message["role"], "content": text_of(message.get("content")),
            "tool_calls": message.get("tool_calls"), "tool_call_id": message.get("tool_call_id"),
            "tool_name": tool_name}


def continued_session(store: Store, given_id: str | None,
                      messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """(session id, the request's messages the store does not hold yet), for a client that sends
    its whole conversation (proxy mode). A stateless client that sends back results of calls the
    lane returned continues that session; with X-Session-Id the session is the header's. A
    continued session stores what came after the last assistant message (the tool results and a
    new user message); a new one, the whole conversation."""
    result_ids = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    session_id = given_id or store.session_of_returned_calls(result_ids)
    if session_id is None or not store.messages(session_id):
        return session_id or new_session_id(), messages
    assistants = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    if assistants:
        return session_id, messages[assistants[-1] + 1:]
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    return session_id, messages[users[-1]:]


def calls_made(store: Store, session_id: str, reply: ModelReply, calls: list[ToolCall]) -> int:
    """The model's reply that made `calls`, stored before any of them runs; its message id."""
    return store.add_message(session_id, "assistant", reply.content, tool_calls=[stored(c) for c in calls],
                             **reply.tokens)


def record_outcome(store: Store, session_id: str, message_id: int, call: ToolCall, outcome: Outcome) -> None:
    """A call's result as the model reads it, with its tool_executions row (completing the row
    written before it ran, where there is one)."""
    store.add_tool_result(
        session_id, message_id, outcome.for_model, tool_call_id=call.id, tool_name=outcome.tool_name,
        via_bridge=outcome.via_bridge, origin=call.origin, arguments=outcome.arguments,
        status=outcome.status, result=outcome.output if outcome.status == "ok" else None,
        error=None if outcome.status == "ok" else outcome.output,
        started_at=outcome.started_at, duration_ms=outcome.duration_ms,
        execution_id=outcome.execution_id)


def kept(store: Store, result: TurnResult, purpose: str, reply: ModelReply, content: str | None = None) -> None:
    """A question the lane asked its model for itself (a decision, a second look, a reading):
    counted in the turn, kept in lane_calls under `purpose` (its reply, or `content`)."""
    count(result, reply)
    _lane_call(store, result.session_id, purpose, reply.content if content is None else content, reply)


def hold(store: Store, session_id: str, reply: ModelReply, why: str) -> None:
    """A reply the user does not get (already counted): kept in lane_calls with why, never a
    message."""
    _lane_call(store, session_id, HELD, reply.content, reply, reason=why)


def answered(store: Store, session_id: str, content: str, reply: ModelReply) -> TurnEnded:
    """The model's answer as the user gets it, stored; the end of the turn that carries it."""
    store.add_message(session_id, "assistant", content, **reply.tokens)
    return TurnEnded(content, "length" if reply.finish_reason == "length" else "stop", lane_written=False)


def finished(store: Store, result: TurnResult, end: TurnEnded, reason: str | None = None) -> TurnResult:
    """The turn's result: the lane's own account stored where the lane wrote it (the model's own
    answer is stored already); `reason` where the caller knows it better than `end`."""
    if end.lane_written:
        store.add_message(result.session_id, "assistant", end.content, lane_note=True)
    result.content, result.finish_reason = end.content, reason or end.reason
    return result


def _lane_call(store: Store, session_id: str, purpose: str, content: str, reply: ModelReply,
               reason: str | None = None) -> None:
    store.add_lane_call(session_id, purpose, content, reason=reason, path=reply.path, **reply.tokens)
