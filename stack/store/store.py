"""SQLite session store: every message and every tool execution, committed as it happens.

One connection per Store, shared by the shim's threads behind a lock; WAL lets readers (the check
script, `lane sessions`, a person's sqlite3 shell) read while the shim writes. Every write commits
at once, so a crash loses at most the model call in flight. A tool's execution row is written
before the tool runs (status 'running') and completed after, so nothing runs unrecorded.

The store holds every conversation: the database and its WAL files are created readable by their
owner only (0600). Text that cannot be encoded as UTF-8 (a lone surrogate a model or a client sent)
is stored with the bad code points replaced, never refused: by then the tool may have run.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import threading
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

from .schema import MIGRATIONS


class StoreError(RuntimeError):
    """The store cannot be opened or is not a fallback-lane store."""


# lane_calls.purpose of a model reply the lane held back (not passed on), with its `reason`:
# `messages` holds only the replies the client got (DESIGN.md, the session store).
HELD = "held"


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def new_session_id() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%d_%H%M%S_") + uuid.uuid4().hex[:8]


@dataclass(frozen=True)
class SearchHit:
    session_id: str
    created_at: str
    title: str | None
    role: str
    snippet: str


# The database and the files SQLite keeps beside it (WAL mode): all of them hold conversations.
PRIVATE_FILE_MODE = 0o600
_SIDE_FILES = ("", "-wal", "-shm", "-journal")


class Store:
    def __init__(self, path: Path | str):
        self.path = Path(path)
        if str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            _create_private(self.path)
        try:
            self._db = sqlite3.connect(str(path), check_same_thread=False, timeout=10)
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._lock = threading.RLock()
            self._migrate()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot open session store {path}: {exc}") from exc
        if str(path) != ":memory:":
            self._make_private()

    def _make_private(self) -> None:
        """The database and its WAL files readable by their owner only. SQLite creates the WAL
        files with the database's mode, so this mends a store an older lane created."""
        for suffix in _SIDE_FILES:
            try:
                os.chmod(f"{self.path}{suffix}", PRIVATE_FILE_MODE)
            except (FileNotFoundError, PermissionError):
                continue

    def _migrate(self) -> None:
        with self._lock:
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version > len(MIGRATIONS):
                raise StoreError(
                    f"{self.path} has schema version {version}, newer than this lane knows"
                )
            for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
                self._db.executescript(f"BEGIN; {script}; PRAGMA user_version = {number}; COMMIT;")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _write(self, sql: str, params: tuple[Any, ...] = ()) -> int:
        with self._lock, self._db:
            return self._db.execute(sql, storable(params)).lastrowid or 0

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    def ping(self) -> None:
        """Raises when the store cannot be read. Through a connection of its own, so /health
        never waits for the lock behind a long write (a conversation of 100,000 messages)."""
        if str(self.path) == ":memory:":
            self._read("SELECT 1")
            return
        probe = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, timeout=1)
        try:
            probe.execute("SELECT count(*) FROM sessions WHERE 0").fetchall()
        finally:
            probe.close()

    # sessions

    def create_session(
        self,
        session_id: str | None = None,
        *,
        source: str = "api",
        title: str | None = None,
        model: str | None = None,
    ) -> str:
        session_id = session_id or new_session_id()
        self._write(
            "INSERT OR IGNORE INTO sessions(id, created_at, source, title, model)"
            " VALUES (?, ?, ?, ?, ?)",
            (session_id, now_iso(), source, title, model),
        )
        return session_id

    def memory_snapshot(self, session_id: str, read_memory: Callable[[], str]) -> str:
        """The memory this session started with: taken (with `read_memory`) on first use, then
        the same text for every later turn of the session."""
        rows = self._read("SELECT memory_snapshot FROM sessions WHERE id = ?", (session_id,))
        if rows and rows[0]["memory_snapshot"] is not None:
            return str(rows[0]["memory_snapshot"])
        self._write("UPDATE sessions SET memory_snapshot = ? WHERE id = ? AND memory_snapshot IS NULL",
                    (read_memory(), session_id))
        rows = self._read("SELECT memory_snapshot FROM sessions WHERE id = ?", (session_id,))
        return str(rows[0]["memory_snapshot"] or "") if rows else ""

    def session(self, session_id: str) -> dict[str, Any] | None:
        rows = self._read("SELECT * FROM sessions WHERE id = ?", (session_id,))
        return dict(rows[0]) if rows else None

    def list_sessions(self, limit: int = 50) -> list[dict[str, Any]]:
        rows = self._read(
            """SELECT s.*,
                      (SELECT count(*) FROM messages m WHERE m.session_id = s.id) AS messages,
                      (SELECT count(*) FROM tool_executions e
                        WHERE e.session_id = s.id AND e.status = 'ok') AS ok_executions,
                      (SELECT count(*) FROM returned_calls r
                        WHERE r.session_id = s.id) AS returned_calls
               FROM sessions s ORDER BY s.created_at DESC, s.rowid DESC LIMIT ?""",
            (limit,),
        )
        return [dict(row) for row in rows]

    # messages

    def add_message(
        self,
        session_id: str,
        role: str,
        content: str | None,
        *,
        tool_calls: list[dict[str, Any]] | None = None,
        tool_call_id: str | None = None,
        tool_name: str | None = None,
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
        cached_tokens: int | None = None,
        lane_prompt: bool = False,
        lane_note: bool = False,
    ) -> int:
        return self._write(_INSERT_MESSAGE, _message_row(
            session_id, role, content, tool_calls=tool_calls, tool_call_id=tool_call_id,
            tool_name=tool_name, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
            cached_tokens=cached_tokens, lane_prompt=lane_prompt, lane_note=lane_note))

    def add_messages(self, session_id: str, messages: list[dict[str, Any]], *,
                     client_results: bool = False) -> None:
        """Many messages in one transaction (a client's whole conversation: 100,000 messages is
        a legal request), all of them or none, and one commit instead of one per row. Each item
        holds `role`, `content` and any of add_message's keywords. With `client_results`, a
        role=tool message is linked to the returned call it answers, as add_client_result does."""
        with self._lock, self._db:
            for message in messages:
                fields = {k: v for k, v in message.items() if k not in ("role", "content")}
                row = storable(_message_row(session_id, message["role"], message.get("content"), **fields))
                message_id = self._db.execute(_INSERT_MESSAGE, row).lastrowid
                if client_results and message["role"] == "tool":
                    self._db.execute(_LINK_RESULT, storable(
                        (message_id, message.get("content"), session_id, message.get("tool_call_id"))))

    def messages(self, session_id: str) -> list[dict[str, Any]]:
        rows = self._read(
            "SELECT * FROM messages WHERE session_id = ? ORDER BY id", (session_id,)
        )
        return [_decoded(row) for row in rows]

    def last_lane_prompt(self, session_id: str) -> str | None:
        rows = self._read(
            "SELECT content FROM messages WHERE session_id = ? AND lane_prompt = 1"
            " ORDER BY id DESC LIMIT 1",
            (session_id,),
        )
        return rows[0]["content"] if rows else None

    # the lane's own model calls (a decision) and the replies it held back: evidence, not
    # conversation

    def add_lane_call(self, session_id: str, purpose: str, content: str, *, prompt_tokens: int,
                      completion_tokens: int, cached_tokens: int, reason: str | None = None,
                      path: str | None = None) -> int:
        """One lane_calls row, placed after the session's last message (schema.py says why);
        `reason`: why a reply was held back (purpose HELD); `path`: the form the call took
        upstream (agent/constrained.py)."""
        return self._write(
            "INSERT INTO lane_calls(session_id, after_message_id, purpose, content, prompt_tokens,"
            " completion_tokens, cached_tokens, created_at, reason, path)"
            " VALUES (?, (SELECT max(id) FROM messages WHERE session_id = ?), ?, ?, ?, ?, ?, ?, ?, ?)",
            (session_id, session_id, purpose, content, prompt_tokens, completion_tokens,
             cached_tokens, now_iso(), reason, path))

    def lane_calls(self, session_id: str) -> list[dict[str, Any]]:
        """In the order they were made: a held-back reply an older store kept in `messages` moved
        here after the calls made later (schema.py), so ids alone do not say it."""
        rows = self._read("SELECT * FROM lane_calls WHERE session_id = ? ORDER BY created_at, id",
                          (session_id,))
        return [dict(row) for row in rows]

    # tool executions

    def start_execution(self, session_id: str, message_id: int, *, tool_call_id: str,
                        tool_name: str, via_bridge: bool, origin: str, arguments: str) -> int:
        """The row of a call about to run, status 'running', written before anything runs: a
        shim that dies mid-run leaves it, and add_tool_result(execution_id=...) completes it.
        `tool_name` is the name the call was made with (the bridge's, until it is resolved)."""
        return self._write(_INSERT_EXECUTION, _execution_row(
            session_id, message_id, tool_call_id=tool_call_id, tool_name=tool_name,
            via_bridge=via_bridge, origin=origin, arguments=arguments, status="running",
            result=None, error=None, started_at=now_iso(), duration_ms=None))

    def add_tool_result(self, session_id: str, message_id: int, content: str, *,
                        execution_id: int | None = None, **execution: Any) -> int:
        """The role='tool' message the model reads and its tool_executions row (fields:
        `_execution_row`; `message_id` is the assistant row that made the call), in one
        transaction: a crash leaves both or neither, so an ok row always has its result message,
        which is what "really ran" means. With `execution_id` (start_execution's row) that row
        is completed, keeping its started_at; else a new row is written. Returns the row's id."""
        row = storable(_execution_row(session_id, message_id, **execution))
        with self._lock, self._db:
            self._db.execute(_INSERT_MESSAGE, storable(_message_row(
                session_id, "tool", content, tool_call_id=execution["tool_call_id"],
                tool_name=execution["tool_name"])))
            if execution_id is not None:
                self._db.execute(_COMPLETE_EXECUTION, (*row[3:10], row[11], execution_id))
                return execution_id
            return self._db.execute(_INSERT_EXECUTION, row).lastrowid or 0

    def failed_call_ids(self, session_id: str) -> set[str]:
        """tool_call_ids of a session's calls that did not run ok (error or refused)."""
        rows = self._read("SELECT tool_call_id FROM tool_executions WHERE session_id = ? AND status != 'ok'",
                          (session_id,))
        return {row["tool_call_id"] for row in rows if row["tool_call_id"]}

    def tools_that_ran(self, session_id: str) -> set[str]:
        """Names of the tools that ran (status ok) in a session."""
        rows = self._read("SELECT DISTINCT tool_name FROM tool_executions WHERE session_id = ? AND status = 'ok'",
                          (session_id,))
        return {row["tool_name"] for row in rows}

    def executions(self, session_id: str) -> list[dict[str, Any]]:
        rows = self._read(
            "SELECT * FROM tool_executions WHERE session_id = ? ORDER BY id", (session_id,)
        )
        return [dict(row) for row in rows]

    # calls returned to a proxy-mode client (the client runs them; the lane never did)

    def add_returned_call(self, session_id: str, message_id: int, *, tool_call_id: str,
                          tool_name: str, via_bridge: bool, origin: str, arguments: str) -> int:
        return self._write(
            "INSERT INTO returned_calls(session_id, message_id, tool_call_id, tool_name,"
            " via_bridge, origin, arguments, returned_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (session_id, message_id, tool_call_id, tool_name, int(via_bridge), origin, arguments,
             now_iso()))

    def returned_calls(self, session_id: str) -> list[dict[str, Any]]:
        rows = self._read("SELECT * FROM returned_calls WHERE session_id = ? ORDER BY id",
                          (session_id,))
        return [dict(row) for row in rows]

    def session_of_returned_calls(self, tool_call_ids: list[str]) -> str | None:
        """The session that returned the latest of these calls (a stateless client sending its
        tools' results back continues that session); None when the lane returned none of them."""
        if not tool_call_ids:
            return None
        marks = ",".join("?" * len(tool_call_ids))
        rows = self._read(f"SELECT session_id FROM returned_calls WHERE tool_call_id IN ({marks})"
                          " ORDER BY id DESC LIMIT 1", tuple(tool_call_ids))
        return str(rows[0]["session_id"]) if rows else None

    # OpenAI Responses API ids (api/responses_api.py)

    def add_response(self, response_id: str, session_id: str, conversation: list[dict[str, Any]]) -> None:
        self._write("INSERT INTO responses(id, session_id, conversation, created_at) VALUES (?, ?, ?, ?)",
                    (response_id, session_id, json.dumps(conversation, ensure_ascii=False), now_iso()))

    def response(self, response_id: str) -> tuple[str, list[dict[str, Any]]] | None:
        """(session id, conversation) of a stored response; None when there is none by that id."""
        rows = self._read("SELECT session_id, conversation FROM responses WHERE id = ?", (response_id,))
        return (str(rows[0]["session_id"]), json.loads(rows[0]["conversation"])) if rows else None

    def recorded_counts(self) -> tuple[dict[str, int], int]:
        """(tool executions by status, calls returned to clients) over the whole store: what
        `GET /metrics` reports as having run."""
        rows = self._read("SELECT status, count(*) AS n FROM tool_executions GROUP BY status")
        returned = self._read("SELECT count(*) AS n FROM returned_calls")
        return {row["status"]: int(row["n"]) for row in rows}, int(returned[0]["n"])

    def add_client_result(self, session_id: str, tool_call_id: str, content: str | None,
                          tool_name: str | None) -> int:
        """The client's role=tool message, linked to the returned call it answers (if the lane
        returned one by that id in this session)."""
        with self._lock, self._db:
            message_id = self._db.execute(_INSERT_MESSAGE, storable(_message_row(
                session_id, "tool", content, tool_call_id=tool_call_id,
                tool_name=tool_name))).lastrowid or 0
            self._db.execute(_LINK_RESULT, storable((message_id, content, session_id, tool_call_id)))
            return message_id

    # search

    def search_messages(
        self, query: str, *, exclude_session: str | None = None, limit: int = 5,
        asked_in: str | None = None,
    ) -> list[SearchHit]:
        """FTS5 over message content; one hit per session, best match first, and the user's own
        words before anything else that matched.

        A small model copies what a hit shows into its next call (measured: a past session's
        memory call, shown as the hit's snippet, became the next call; the highlight marks around
        the phrase became part of what it saved). So a hit shows what the user wrote where the
        user's words match, never a message that is a tool call (its result, a message of its
        own, is searched) nor the lane's own prompts or notes, and no marks (the lane's own model
        calls are not messages: lane_calls). `asked_in`, the session asking: its latest user message
        (the request being answered) and what followed it are not searched (seen: "9:30 there = what in Berlin"
        searched for "9:30 there" and matched itself)."""
        match = _fts_query(query)
        if not match:
            return []
        rows = self._read(
            """SELECT m.session_id, s.created_at, s.title, m.role,
                      snippet(messages_fts, 0, '', '', '…', 24) AS snippet,
                      bm25(messages_fts) AS rank
               FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid
               JOIN sessions s ON s.id = m.session_id
               WHERE messages_fts MATCH ? AND m.lane_prompt = 0 AND m.lane_note = 0
                 AND m.tool_calls IS NULL
                 AND (? IS NULL OR m.session_id != ?)
                 AND (? IS NULL OR m.session_id != ? OR m.id < COALESCE((
                      SELECT MAX(id) FROM messages WHERE session_id = ? AND role = 'user'), m.id + 1))
               ORDER BY m.role != 'user', rank LIMIT ?""",
            (match, exclude_session, exclude_session, asked_in, asked_in, asked_in, limit * 8),
        )
        hits: dict[str, SearchHit] = {}
        for row in rows:
            if row["session_id"] not in hits:
                hits[row["session_id"]] = SearchHit(
                    row["session_id"], row["created_at"], row["title"], row["role"],
                    row["snippet"],
                )
        return list(hits.values())[:limit]

    # todos

    def replace_todos(self, session_id: str, items: list[tuple[str, bool]]) -> None:
        with self._lock, self._db:
            self._db.execute("DELETE FROM todos WHERE session_id = ?", (session_id,))
            self._db.executemany(
                "INSERT INTO todos(session_id, position, text, done) VALUES (?, ?, ?, ?)",
                [storable((session_id, i, text, int(done))) for i, (text, done) in enumerate(items)],
            )

    def todos(self, session_id: str) -> list[tuple[str, bool]]:
        rows = self._read(
            "SELECT text, done FROM todos WHERE session_id = ? ORDER BY position", (session_id,)
        )
        return [(row["text"], bool(row["done"])) for row in rows]


_INSERT_MESSAGE = """INSERT INTO messages(session_id, role, content, tool_calls, tool_call_id,
    tool_name, prompt_tokens, completion_tokens, cached_tokens, created_at, lane_prompt, lane_note)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"""

_INSERT_EXECUTION = """INSERT INTO tool_executions(session_id, message_id, tool_call_id, tool_name,
    via_bridge, origin, arguments, status, result, error, started_at, duration_ms)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"""

_LINK_RESULT = """UPDATE returned_calls SET result_message_id = ?, result = ?
    WHERE session_id = ? AND tool_call_id = ? AND result_message_id IS NULL"""

# Completes a started row: the `_execution_row` values from tool_name to error, then duration_ms.
_COMPLETE_EXECUTION = """UPDATE tool_executions SET tool_name = ?, via_bridge = ?, origin = ?,
    arguments = ?, status = ?, result = ?, error = ?, duration_ms = ? WHERE id = ?"""

_SURROGATE = re.compile("[\ud800-\udfff]")


def storable(values: tuple[Any, ...]) -> tuple[Any, ...]:
    """`values` with every lone surrogate in their text replaced by U+FFFD: SQLite stores UTF-8,
    and a surrogate (JSON's "\\ud800", from a model's arguments or a client's message) cannot be
    encoded. Replaced rather than refused: a tool's row is written after the tool ran."""
    if not any(isinstance(v, str) and _SURROGATE.search(v) for v in values):
        return values
    return tuple(_SURROGATE.sub("\ufffd", v) if isinstance(v, str) else v for v in values)


def _create_private(path: Path) -> None:
    """Creates the database file, owner-only, before SQLite opens it (SQLite gives the WAL
    files the database's mode); an existing file is left to Store._make_private."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE))
    except (FileExistsError, IsADirectoryError, PermissionError):
        pass


def _message_row(session_id: str, role: str, content: str | None, **fields: Any) -> tuple[Any, ...]:
    """The `_INSERT_MESSAGE` values; `fields` are `Store.add_message`'s keywords, absent ones null."""
    calls = fields.get("tool_calls")
    return (session_id, role, content, json.dumps(calls) if calls else None,
            fields.get("tool_call_id"), fields.get("tool_name"), fields.get("prompt_tokens"),
            fields.get("completion_tokens"), fields.get("cached_tokens"), now_iso(),
            int(bool(fields.get("lane_prompt"))), int(bool(fields.get("lane_note"))))


def _execution_row(
    session_id: str,
    message_id: int,
    *,
    tool_call_id: str,
    tool_name: str,
    via_bridge: bool,
    origin: str,
    arguments: str,
    status: str,
    result: str | None,
    error: str | None,
    started_at: str,
    duration_ms: float | None,
) -> tuple[Any, ...]:
    return (session_id, message_id, tool_call_id, tool_name, int(via_bridge), origin, arguments,
            status, result, error, started_at, duration_ms)


def _decoded(row: sqlite3.Row) -> dict[str, Any]:
    item = dict(row)
    if item.get("tool_calls"):
        item["tool_calls"] = json.loads(item["tool_calls"])
    return item


def _fts_query(text: str) -> str:
    """Quote each word so user text can never be read as FTS5 syntax; words are OR-ed when the
    whole phrase is not required, which suits the short queries small models write."""
    words = [w for w in _words(text) if w]
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words)


def _words(text: str) -> Iterator[str]:
    word: list[str] = []
    for char in text:
        if char.isalnum() or char == "_":
            word.append(char)
        elif word:
            yield "".join(word)
            word = []
    if word:
        yield "".join(word)
