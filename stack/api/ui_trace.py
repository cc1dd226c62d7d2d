"""One session as the trace page shows it: turns, each a user message followed by what the lane
did for it, model call by model call, with the tool executions each call led to.

Built from the store's own rows (messages, tool_executions and lane_calls, DESIGN.md's public
schema) by the store's own rule of what "really ran": an ok execution whose result went back in a tool message.
Tool-call-shaped text that did not run is found with the same detector the six-step check uses
(stack/store/claims.py), so the page and the check never disagree about it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..store import HELD
from ..store.claims import BUILTIN_TOOLS, unexecuted_text_calls


@dataclass(frozen=True)
class ToolRun:
    """One tool_executions row, and whether its result went back to the model."""
    row: dict[str, Any]
    reported: bool

    @property
    def really_ran(self) -> bool:
        return self.row["status"] == "ok" and self.reported

    @property
    def recovered(self) -> bool:
        """Salvaged from the model's text rather than a native tool call."""
        return self.row["origin"] == "content"

    @property
    def via_bridge(self) -> bool:
        return bool(self.row["via_bridge"])


@dataclass
class ModelCall:
    """An assistant message the model wrote (it has token counts), with what it led to; or a model
    call the lane made for itself or a reply it held back (a lane_calls row, its `purpose` set;
    `held_back` then), which leads to nothing."""
    message: dict[str, Any]
    runs: list[ToolRun] = field(default_factory=list)
    # Names of tool calls written as text in its content that did not run.
    unexecuted: list[str] = field(default_factory=list)
    # Proxy mode: returned_calls rows, the calls this reply handed to the client to run.
    returned: list[dict[str, Any]] = field(default_factory=list)
    # From the row stored before it to this one: the model call's wall time, give or take the
    # lane's own few milliseconds (the store keeps no separate timing for model calls).
    wall_s: float | None = None
    purpose: str | None = None

    @property
    def path(self) -> str | None:
        """The form a lane call took upstream (lane_calls.path: "schema", "tool", "text",
        "logprobs"; agent/constrained.py): which path a turn's decisions and readings took."""
        return self.message.get("path") if self.purpose else None

    @property
    def held_back(self) -> bool:
        """A reply the lane did not pass on (its why: the row's `reason`)."""
        return self.purpose == HELD


@dataclass
class Turn:
    # None for what a stateless request stored before its first user message (its system prompt).
    user: dict[str, Any] | None
    number: int = 0
    # In stored order: ModelCall for each model call, the message dict for anything else the
    # lane stored in the turn (its notes, an answer it wrote, a client's system message).
    steps: list[ModelCall | dict[str, Any]] = field(default_factory=list)
    last_at: str | None = None

    @property
    def wall_s(self) -> float | None:
        """From the user's message to the turn's last stored row: what the client waited."""
        if not self.user or not self.last_at:
            return None
        return _seconds(self.user["created_at"], self.last_at)

    @property
    def model_calls(self) -> list[ModelCall]:
        return [s for s in self.steps if isinstance(s, ModelCall)]


def session_trace(messages: list[dict[str, Any]], executions: list[dict[str, Any]],
                  lane_calls: Sequence[dict[str, Any]] = (),
                  returned: Sequence[dict[str, Any]] = ()) -> list[Turn]:
    """The session's turns, oldest first. The lane's own system prompt is left out (it is the same
    for every session); tool messages show through the executions they report; the lane's own
    model calls show where they were made (after the message their after_message_id names)."""
    reported = {m["tool_call_id"] for m in messages if m["role"] == "tool" and m["tool_call_id"]}
    runs_by_message: dict[int, list[ToolRun]] = {}
    for row in executions:
        run = ToolRun(row, row["tool_call_id"] in reported)
        runs_by_message.setdefault(row["message_id"], []).append(run)
    returned_by_message: dict[int, list[dict[str, Any]]] = {}
    for row in returned:
        returned_by_message.setdefault(row["message_id"], []).append(row)

    turns: list[Turn] = []
    calls: list[ModelCall] = []
    previous_at: str | None = None
    for message, purpose in _in_stored_order(messages, lane_calls):
        stored_before, previous_at = previous_at, message["created_at"]
        if purpose is not None:
            if not turns:
                turns.append(Turn(None))
            turns[-1].last_at = message["created_at"]
            own = ModelCall(message, wall_s=_seconds(stored_before, message["created_at"]), purpose=purpose)
            turns[-1].steps.append(own)
            if own.held_back:  # the model's reply: its call-shaped text is read as any reply's
                calls.append(own)
            continue
        if message.get("lane_prompt"):
            continue
        if message["role"] == "user":
            number = sum(t.user is not None for t in turns) + 1
            turns.append(Turn(message, number, last_at=message["created_at"]))
            continue
        if not turns:  # a stateless request's system message comes before its first user message
            turns.append(Turn(None))
        turn = turns[-1]
        turn.last_at = message["created_at"]
        if message["role"] == "tool":
            continue
        if _is_model_call(message):
            call = ModelCall(message, runs_by_message.get(message["id"], []),
                             wall_s=_seconds(stored_before, message["created_at"]),
                             returned=returned_by_message.get(message["id"], []))
            calls.append(call)
            turn.steps.append(call)
        else:
            turn.steps.append(message)
    _mark_unexecuted(calls, {row["tool_name"] for row in executions if row["status"] != "refused"})
    return turns


def _in_stored_order(messages: list[dict[str, Any]], lane_calls: Sequence[dict[str, Any]]
                     ) -> Iterator[tuple[dict[str, Any], str | None]]:
    """Messages (purpose None) and lane calls (their purpose), each lane call right after the
    message it followed."""
    following: dict[int | None, list[dict[str, Any]]] = {}
    for call in lane_calls:
        following.setdefault(call["after_message_id"], []).append(call)
    for call in following.pop(None, []):
        yield call, call["purpose"]
    for message in messages:
        yield message, None
        for call in following.pop(message["id"], []):
            yield call, call["purpose"]
    for calls in following.values():  # after a message this list lacks: shown last
        for call in calls:
            yield call, call["purpose"]


def _seconds(start: str | None, end: str) -> float | None:
    if start is None:
        return None
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def _is_model_call(message: dict[str, Any]) -> bool:
    return message["role"] == "assistant" and message.get("prompt_tokens") is not None


def _mark_unexecuted(calls: list[ModelCall], seen_tools: set[str]) -> None:
    """The check's rule (verdicts.unexecuted_tool_text) per model call: call-shaped text in a
    message from which no salvaged call really ran, or in a reply held back. Numbered by their
    place in `calls`: a held-back reply's id is a lane call's, not a message's."""
    ran_from_text = {i for i, c in enumerate(calls)
                     if any(r.recovered and r.really_ran for r in c.runs)
                     or any(row["origin"] == "content" for row in c.returned)}
    found = unexecuted_text_calls(((i, c.message["content"] or "") for i, c in enumerate(calls)),
                                  ran_from_text, BUILTIN_TOOLS | seen_tools)
    for i, call in enumerate(calls):
        call.unexecuted = found.get(i, [])
