"""Stored messages to the messages of a model request, within a token budget.

The store keeps everything; the model gets the newest exchanges that fit. Cuts fall on user
messages, so a tool result is never sent without the call that asked for it.
"""

from __future__ import annotations

import json
from typing import Any


def openai_message(row: dict[str, Any]) -> dict[str, Any]:
    role = row["role"]
    if role == "tool":
        return {"role": "tool", "tool_call_id": row["tool_call_id"] or "",
                "content": row["content"] or ""}
    message: dict[str, Any] = {"role": role, "content": row["content"] or ""}
    if role == "assistant" and row.get("tool_calls"):
        calls = [{k: v for k, v in call.items() if k != "origin"} for call in row["tool_calls"]]
        message["tool_calls"] = calls
        if any(call.get("origin") == "content" for call in row["tool_calls"]):
            # The text was the call; it is in tool_calls now, and repeating it teaches nothing.
            message["content"] = ""
    return message


def conversation(rows: list[dict[str, Any]], budget_tokens: int) -> list[dict[str, Any]]:
    """The stored conversation (the lane's own system prompts left out), newest exchanges first
    to be kept when the whole does not fit."""
    messages = [openai_message(row) for row in _without_past_notes(rows)]
    starts = [i for i, m in enumerate(messages) if m["role"] == "user"] or [0]
    # The opening system messages (a client's own) survive a cut; later ones belong to their turn.
    opening = [m for m in messages[:starts[0]] if m["role"] == "system"]
    for start in starts:
        kept = messages[start:]
        if estimate_tokens(kept) <= budget_tokens or start == starts[-1]:
            return opening + kept
    return messages


def _without_past_notes(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows the model reads: not the lane's system prompts (the agent sends the current one),
    and not the notes the lane added inside earlier turns (promoted tools, corrections): they were
    about that turn, and a small model copies whatever pattern its history shows."""
    users = [i for i, row in enumerate(rows) if row["role"] == "user"]
    first, last = (users[0], users[-1]) if users else (len(rows), len(rows))
    return [row for i, row in enumerate(rows) if not row.get("lane_prompt")
            and not (row["role"] == "system" and first < i < last)]


def estimate_tokens(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False)) // 4
