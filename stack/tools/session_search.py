"""The `session_search` tool: full-text search over past sessions (FTS5 in the session store).

The calling session is left out unless asked for: the model already has its own conversation in
context, and matching its own question would crowd out the past session it is looking for.
"""

from __future__ import annotations

from typing import Any

from ..store import SearchHit
from .base import Tool, ToolContext, ToolError, nothing, object_schema

DEFAULT_LIMIT = 5
MAX_LIMIT = 10


def _date(created_at: str) -> str:
    """'2025-01-31T12:34:56.789+00:00' -> '2025-01-31 12:34 UTC'."""
    return created_at[:16].replace("T", " ") + " UTC" if len(created_at) >= 16 else created_at


def _session_search(arguments: dict[str, Any], ctx: ToolContext) -> str:
    query = arguments["query"].strip()
    if not query:
        raise ToolError("query is empty; give words to search for")
    include_current = arguments.get("include_current", False)
    hits = ctx.store.search_messages(
        query,
        exclude_session=None if include_current else ctx.session_id,
        limit=arguments.get("limit", DEFAULT_LIMIT),
        asked_in=ctx.session_id,
    )
    if not hits:
        scope = "sessions" if include_current else "past sessions"
        # a note the answer need not pass on (base.says_nothing): seen, "The dentist's appointment
        # is at 10 o'clock." (from the notes) held back for leaving out "no past sessions match"
        return nothing(f"no {scope} match {query!r}")
    return "\n\n".join(_hit_text(hit) for hit in hits)


def _hit_text(hit: SearchHit) -> str:
    """One session as labelled lines, its id first, for a small model to copy the value its label
    names ("the id of the session"). Under a count line ("1 matching session:") with the id inside
    a sentence, Qwen2.5-Coder-1.5B answered "the session id is 1" and saved the matched note."""
    snippet = " ".join(hit.snippet.split())
    lines = [f"session id: {hit.session_id}", f"date: {_date(hit.created_at)}"]
    title = (hit.title or "").strip().removesuffix("…").strip()
    if title and not snippet.startswith(title):  # a title that is the snippet's start adds nothing
        lines.append(f"title: {hit.title}")
    return "\n".join([*lines, f"matched ({hit.role}): {snippet}"])


TOOLS: list[Tool] = [
    Tool(
        name="session_search",
        description="Search the messages of past sessions; returns session ids, dates and snippets.",
        parameters=object_schema(
            {
                "query": {"type": "string", "description": "Words or phrase to find."},
                "include_current": {"type": "boolean", "description": "Also search this session."},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
            },
            ["query"],
        ),
        run=_session_search,
    )
]
