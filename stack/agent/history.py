"""Stored messages to the messages of a model request, within a token budget.

The store keeps everything; the model gets the newest exchanges that fit. Cuts fall on user
messages, so a tool result is never sent without the call that asked for it. The budget itself
(context_of, prompt_room) is reckoned here too, the same for the agent's stored conversation and
a proxy client's own.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from ..token_estimate import estimate_tokens


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


def conversation(rows: list[dict[str, Any]], budget_tokens: int,
                 failed_calls: frozenset[str] | set[str] = frozenset()) -> list[dict[str, Any]]:
    """The stored conversation as the model reads it, newest exchanges first to be kept when the
    whole does not fit. `failed_calls`: ids of calls that errored or were refused."""
    return fitted([openai_message(row) for row in _clean_record(rows, failed_calls)], budget_tokens)[0]


def fitted(messages: list[dict[str, Any]], budget: int) -> tuple[list[dict[str, Any]], int]:
    """The conversation within `budget` tokens, and how many of its messages were left out: the
    leading system messages, the latest user message and everything after it are always kept;
    earlier exchanges (a user message and what answered it, calls with their results) go whole,
    oldest first. Histories grow with every request (OpenAI-style clients send all of it); past
    the model's context the llm could only refuse the request."""
    head = 0
    while head < len(messages) and messages[head]["role"] == "system":
        head += 1
    users = [i for i in range(head, len(messages)) if messages[i]["role"] == "user"]
    cuts = [head, *users] if users else [head]
    for cut in cuts[:-1]:
        kept = messages[:head] + messages[cut:]
        if estimate_tokens(kept) <= budget:
            return kept, cut - head
    return messages[:head] + messages[cuts[-1]:], cuts[-1] - head


def context_of(configured: int, upstream: int | None) -> int:
    """The context a request has: the configured one, or the upstream's where it reports less."""
    return min(configured, upstream or configured)


def prompt_room(context: int, cap: int) -> int:
    """What a request's prompt (tools, notes, conversation) may take of `context`. The llm service
    generates into whatever room is left, so a quarter of the window is enough to keep free;
    reserving the whole cap would starve history on an 8k model."""
    return context - min(cap, context // 4)


def _clean_record(rows: list[dict[str, Any]], failed_calls: frozenset[str] | set[str]) -> list[dict[str, Any]]:
    """What the model reads of a session. Never the lane's system prompts (the agent sends the
    current one). Of earlier turns, only what happened: the user's words, the calls that ran with
    their results, each turn's answer; not the lane's notes (promoted tools, corrections, answers it
    wrote for a silent model), failed or refused calls, or replies that were no answer, which were
    about that turn, and a small model copies whatever pattern its history shows. The current turn
    is sent whole. (The lane's own model calls, a decision, and the answers it held back are not
    messages: the store keeps them in lane_calls, so they never reach the model. Seen before: shown
    "The file beta.csv has 4 lines." and why it was held back, the forced terminal call ran
    `hostname` for "how many lines in beta.csv"; after the request alone it writes the command the
    request needs.)"""
    users = [i for i, row in enumerate(rows) if row["role"] == "user"]
    current = users[-1] if users else len(rows)
    not_answers = _not_answers(rows[:current], failed_calls)
    return [row for i, row in enumerate(rows)
            if not row.get("lane_prompt") and i not in not_answers
            and (i >= current or not _noise(row, failed_calls))]


def _not_answers(rows: list[dict[str, Any]], failed_calls: frozenset[str] | set[str]) -> set[int]:
    """The replies without calls that were not their turn's answer: any before the turn's last (the
    lane corrected it), an empty one, and one that copies word for word an earlier turn's answer or
    the error of a call that failed (measured: "391" became the answer to every later request)."""
    dropped: set[int] = set()
    answered: set[str] = set()
    starts = [i for i, row in enumerate(rows) if row["role"] == "user"]
    for start, end in pairwise([*starts, len(rows)]):
        turn = range(start, end)
        replies = [i for i in turn if rows[i]["role"] == "assistant" and not rows[i].get("tool_calls")
                   and not rows[i].get("lane_note")]
        if not replies:
            continue
        errors = [rows[i]["content"] or "" for i in turn
                  if rows[i]["role"] == "tool" and rows[i].get("tool_call_id") in failed_calls]
        dropped.update(replies[:-1])
        answer = (rows[replies[-1]]["content"] or "").strip()
        if not answer or answer in answered or any(answer in error for error in errors):
            dropped.add(replies[-1])
        answered.add(answer)
    return dropped


def _noise(row: dict[str, Any], failed_calls: frozenset[str] | set[str]) -> bool:
    if row.get("lane_note"):
        return True
    if row["role"] == "tool":
        return row.get("tool_call_id") in failed_calls
    calls = row.get("tool_calls") or []
    return bool(calls) and all(call.get("id") in failed_calls for call in calls)


FACT_CHARS = 160


def said(rows: list[dict[str, Any]]) -> list[str]:
    """What a conversation said, for a tool's precondition (tools/base.py): the user's messages,
    the answers, and the results of the tools that ran; not the model's calls, nor what the lane
    refused or a tool failed on (their text quotes the call's own values)."""
    return [row["content"] for row in rows if isinstance(row.get("content"), str)
            and (row["role"] == "user" or (row["role"] == "assistant" and not row.get("tool_calls")
                                         and not row.get("lane_note"))
                 or (row["role"] == "tool" and not row["content"].startswith(("REFUSED:", "ERROR:"))))]


# The label of an earlier turn's result in those facts ("  memory returned: saved"): an answer that
# starts with it copies the lane's facts (answer_check.copies_facts).
RETURNED = "returned:"


def earlier_facts(rows: list[dict[str, Any]], turns: int = 3) -> str:
    """The last few finished turns as facts (what was asked, what ran and returned, what was
    answered: nothing where the model's answer was held back and the user got the lane's own
    account instead, whose words a small model would copy), for the lane's own questions: a small
    model reads them as context rather than as replies to copy."""
    rows = [row for row in rows if not (row.get("lane_prompt") or
                                        (row.get("lane_note") and row["role"] != "assistant"))]
    starts = [i for i, row in enumerate(rows) if row["role"] == "user"]
    lines = []
    for start, end in list(pairwise([*starts, len(rows)]))[-turns - 1:-1]:
        turn = rows[start:end]
        lines.append(f"- The user said: {_short(turn[0]['content'])}")
        lines += [f"  {row.get('tool_name') or 'a tool'} {RETURNED} {_short(row['content'])}"
                  for row in turn if row["role"] == "tool"]
        answers = [row for row in turn if row["role"] == "assistant" and not row.get("tool_calls")]
        if answers and (answers[-1]["content"] or "").strip() and not answers[-1].get("lane_note"):
            lines.append(f"  The assistant answered: {_short(answers[-1]['content'])}")
    return "\n".join(lines)


def _short(text: str | None) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= FACT_CHARS else flat[:FACT_CHARS] + "…"
