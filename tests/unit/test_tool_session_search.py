"""session_search over a real store: past sessions found by FTS5, the calling one left out."""

from __future__ import annotations

from pathlib import Path

import pytest

from stack.config import Settings
from stack.store import Store
from stack.tools import session_search
from stack.tools.base import ToolContext
from stack.tools.execute import Outcome, run_tool

TOOL = session_search.TOOLS[0]


@pytest.fixture
def ctx(tmp_path: Path):
    settings = Settings(home=tmp_path / "home")
    store = Store(settings.db_path)
    store.create_session("past-1", title="zebra talk")
    store.add_message("past-1", "user", "Tell me about the striped zebra migration")
    store.add_message("past-1", "assistant", "Zebras migrate across the Serengeti.")
    store.create_session("past-2")
    store.add_message("past-2", "user", "What is the capital of France?")
    store.create_session("current")
    store.add_message("current", "user", "Search my past sessions for zebra")
    yield ToolContext(settings, store, "current")
    store.close()


def search(ctx: ToolContext, **arguments) -> Outcome:
    return run_tool(TOOL, arguments, ctx)


def test_a_hit_gives_session_id_date_and_snippet(ctx):
    outcome = search(ctx, query="zebra")
    assert outcome.status == "ok"
    lines = outcome.output.splitlines()
    assert lines[0] == "1 matching session:"
    created = ctx.store.session("past-1")["created_at"]
    day, clock = created[:10], created[11:16]
    assert lines[1].startswith(f'- session past-1 ({day} {clock} UTC) "zebra talk", user: ')
    assert ">>zebra<<" in lines[1]
    assert "current" not in outcome.output


def test_the_calling_session_is_included_on_request(ctx):
    outcome = search(ctx, query="zebra", include_current=True)
    ids = {line.split()[2] for line in outcome.output.splitlines()[1:]}
    assert ids == {"past-1", "current"}


def test_no_match_is_said_plainly(ctx):
    outcome = search(ctx, query="photosynthesis")
    assert (outcome.status, outcome.output) == ("ok", "no past sessions match 'photosynthesis'")


def test_limit_caps_the_hits(ctx):
    for n in range(4):
        ctx.store.create_session(f"extra-{n}")
        ctx.store.add_message(f"extra-{n}", "user", "another zebra story")
    lines = search(ctx, query="zebra", limit=2).output.splitlines()
    assert lines[0] == "2 matching sessions:" and len(lines) == 3
    assert search(ctx, query="zebra", limit=50).status == "error"  # over the schema's maximum


@pytest.mark.parametrize("query", ['zebra AND (', 'NEAR("x"', '"unbalanced', "col:zebra*"])
def test_search_syntax_in_the_query_is_just_text(ctx, query):
    outcome = search(ctx, query=query)
    assert outcome.status == "ok"
    if "zebra" in query:
        assert "past-1" in outcome.output


def test_empty_query_is_an_error(ctx):
    assert search(ctx, query="   ").status == "error"
