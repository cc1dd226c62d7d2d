"""A real ToolContext for tool tests: settings under a temporary LANE_HOME, a real store, one
session."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from stack.config import Settings
from stack.store import Store
from stack.tools.base import ToolContext


def make_tool_context(home: Path, session_id: str = "s1", **settings: Any) -> ToolContext:
    """The caller closes `context.store`."""
    lane = Settings(home=home, **settings)
    store = Store(lane.db_path)
    store.create_session(session_id)
    return ToolContext(lane, store, session_id)


@contextmanager
def tool_context(home: Path, session_id: str = "s1", **settings: Any) -> Iterator[ToolContext]:
    context = make_tool_context(home, session_id, **settings)
    try:
        yield context
    finally:
        context.store.close()
