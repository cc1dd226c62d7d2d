"""What the store says happened: a read-only view of the session store for the check.

Plain sqlite3 with a `mode=ro` URI, not stack.store: the check must be able to judge a store it may
not write (another user's lane, a copy), and it must read the public schema of DESIGN.md exactly as
any outside SQL would, so a change to Store's helpers cannot quietly change a verdict.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..store import HELD  # lane_calls.purpose of a reply the lane held back: the schema's word

_NEEDED_COLUMNS = {
    "sessions": {"id"},
    "messages": {"id", "session_id", "role", "content", "tool_call_id", "prompt_tokens"},
    "tool_executions": {"id", "session_id", "message_id", "tool_call_id", "tool_name",
                        "via_bridge", "origin", "arguments", "status", "result"},
}


class StoreUnreadable(RuntimeError):
    """The store is missing, unreadable or not a fallback-lane store; the message says which."""


@dataclass(frozen=True)
class Execution:
    id: int
    message_id: int | None
    tool_call_id: str | None
    tool_name: str
    via_bridge: bool
    origin: str
    arguments: str
    status: str
    result: str
    # A role=tool message with this call's id exists: the result went back to the model.
    reported: bool

    @property
    def really_ran(self) -> bool:
        """DESIGN.md: an ok execution row and a tool message carrying its result."""
        return self.status == "ok" and self.reported


@dataclass(frozen=True)
class Message:
    id: int
    role: str
    content: str
    prompt_tokens: int | None
    # Stores written before lane_calls kept the lane's own model calls here (`messages.lane_call`,
    # e.g. an old store's 'restate'): a model call, but no answer to the client.
    lane_call: str | None = None


@dataclass(frozen=True)
class LaneCall:
    """A model call the lane made for itself (`lane_calls`: a decision), or a reply it held back
    (purpose 'held', with its `reason`): it counts as a model call of the step, and answers
    nothing."""
    purpose: str
    prompt_tokens: int | None
    content: str = ""
    reason: str | None = None

    @property
    def held_back(self) -> bool:
        return self.purpose == HELD


@dataclass(frozen=True)
class Mark:
    """The highest row ids of a session before a step: everything above them is the step's."""
    message_id: int
    execution_id: int


@dataclass
class StepRows:
    messages: list[Message] = field(default_factory=list)
    executions: list[Execution] = field(default_factory=list)
    lane_calls: list[LaneCall] = field(default_factory=list)

    @property
    def answer(self) -> str:
        """The last assistant message with text: what the client was answered."""
        for message in reversed(self.messages):
            if message.role == "assistant" and not message.lane_call and message.content.strip():
                return message.content
        return ""

    @property
    def held_back(self) -> list[LaneCall]:
        """The model's replies the lane did not pass on, with why."""
        return [c for c in self.lane_calls if c.held_back]

    @property
    def ran(self) -> list[Execution]:
        return [e for e in self.executions if e.really_ran]

    @property
    def model_calls(self) -> int:
        return len(self.lane_calls) + sum(
            1 for m in self.messages if m.role == "assistant" and m.prompt_tokens is not None)

    @property
    def prompt_tokens(self) -> int:
        return sum(c.prompt_tokens or 0 for c in self.lane_calls) + sum(
            m.prompt_tokens or 0 for m in self.messages if m.role == "assistant")


class StoreReader:
    def __init__(self, path: Path):
        self.path = path
        if not path.is_file():
            raise StoreUnreadable(f"no session store at {path}")
        try:
            self._db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=10)
            self._db.row_factory = sqlite3.Row
            self._check_schema()
        except sqlite3.DatabaseError as exc:
            raise StoreUnreadable(f"cannot read session store {path}: {exc}") from exc

    def _check_schema(self) -> None:
        for table, columns in _NEEDED_COLUMNS.items():
            present = {row["name"] for row in self._db.execute(f"PRAGMA table_info({table})")}
            if table == "messages":  # stores written before the lane made calls of its own lack it
                self._has_lane_call = "lane_call" in present
            missing = columns - present
            if missing:
                raise StoreUnreadable(
                    f"{self.path} is not a fallback-lane session store"
                    f" (table {table} lacks {', '.join(sorted(missing))})")
        self._has_lane_calls = bool(self._db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'lane_calls'").fetchone())
        # Stores written before held-back replies left `messages` lack it (and keep them there).
        self._has_reason = "reason" in {
            row["name"] for row in self._db.execute("PRAGMA table_info(lane_calls)")}

    def close(self) -> None:
        self._db.close()

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        try:
            return self._db.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as exc:
            raise StoreUnreadable(f"cannot read session store {self.path}: {exc}") from exc

    def mark(self, session_id: str) -> Mark:
        row = self._rows(
            """SELECT (SELECT coalesce(max(id), 0) FROM messages WHERE session_id = ?),
                      (SELECT coalesce(max(id), 0) FROM tool_executions WHERE session_id = ?)""",
            (session_id, session_id))[0]
        return Mark(row[0], row[1])

    def rows_since(self, session_id: str, mark: Mark) -> StepRows:
        lane_call = "lane_call" if self._has_lane_call else "NULL AS lane_call"
        messages = [
            Message(r["id"], r["role"], r["content"] or "", r["prompt_tokens"], r["lane_call"])
            for r in self._rows(
                f"SELECT id, role, content, prompt_tokens, {lane_call} FROM messages"
                " WHERE session_id = ? AND id > ? ORDER BY id", (session_id, mark.message_id))
        ]
        executions = [
            Execution(r["id"], r["message_id"], r["tool_call_id"], r["tool_name"],
                      bool(r["via_bridge"]), r["origin"], r["arguments"] or "", r["status"],
                      r["result"] or "", bool(r["reported"]))
            for r in self._rows(
                """SELECT e.*, EXISTS(SELECT 1 FROM messages m
                                      WHERE m.session_id = e.session_id AND m.role = 'tool'
                                        AND m.tool_call_id = e.tool_call_id) AS reported
                   FROM tool_executions e WHERE e.session_id = ? AND e.id > ? ORDER BY e.id""",
                (session_id, mark.execution_id))
        ]
        reason = "reason" if self._has_reason else "NULL AS reason"
        lane_calls = [LaneCall(r["purpose"], r["prompt_tokens"], r["content"] or "", r["reason"]) for r in self._rows(
            f"SELECT purpose, prompt_tokens, content, {reason} FROM lane_calls WHERE session_id = ?"
            " AND after_message_id > ? ORDER BY id", (session_id, mark.message_id))
        ] if self._has_lane_calls else []
        return StepRows(messages, executions, lane_calls)

    def session_contains(self, session_id: str, text: str) -> bool:
        rows = self._rows(
            "SELECT 1 FROM messages WHERE session_id = ? AND instr(content, ?) > 0 LIMIT 1",
            (session_id, text))
        return bool(rows)

    def known_tool_names(self) -> set[str]:
        """Every tool name this store has seen called, ok or not: the vocabulary of real tools
        beyond the built-in ones (MCP tools included)."""
        return {r[0] for r in self._rows(
            "SELECT DISTINCT tool_name FROM tool_executions WHERE status != 'refused'")}


def arguments_of(execution: Execution) -> dict[str, Any]:
    try:
        value = json.loads(execution.arguments)
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}
