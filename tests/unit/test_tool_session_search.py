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
    created = ctx.store.session("past-1")["created_at"]
    day, clock = created[:10], created[11:16]
    assert outcome.output == (f"session id: past-1\ndate: {day} {clock} UTC\ntitle: zebra talk\n"
                              "matched (user): Tell me about the striped zebra migration")


def test_a_title_that_repeats_the_match_is_left_out(ctx):
    ctx.store.create_session("past-3", title="Keep the okapi file")
    ctx.store.add_message("past-3", "user", "Keep the okapi file")
    assert search(ctx, query="okapi").output.splitlines()[2:] == ["matched (user): Keep the okapi file"]


def test_a_title_that_is_the_start_of_the_match_is_left_out(ctx):
    """A title cut from a long first message would show a cut word ("Ostrowsk") for a small model
    to copy; the match holds the whole message."""
    message = "For the record: the plumber who fixed the boiler last winter was called Ostrowski, and he charged 180."
    ctx.store.create_session("past-4", title=message[:75] + " …")
    ctx.store.add_message("past-4", "user", message)
    assert search(ctx, query="plumber").output.splitlines()[2:] == [f"matched (user): {message}"]


def test_the_calling_session_is_included_on_request(ctx):
    outcome = search(ctx, query="zebra", include_current=True)
    ids = {line.split(": ")[1] for line in outcome.output.splitlines() if line.startswith("session id")}
    assert ids == {"past-1"}  # the current session's only match is the request itself
    ctx.store.add_message("current", "assistant", "A zebra's stripes are unique.")
    ctx.store.add_message("current", "user", "and search this chat for zebra too")
    outcome = search(ctx, query="zebra", include_current=True)  # an earlier message of this chat
    assert "session id: current" in outcome.output and "search this chat" not in outcome.output


def test_the_request_being_answered_does_not_match_itself(ctx):
    """Seen: "9:30 there = what in Berlin" searched this chat for "9:30 there" and found itself."""
    ctx.store.add_message("current", "user", "9:30 there = what in Berlin")
    outcome = search(ctx, query="9:30 there", include_current=True)
    assert outcome.output == "(no sessions match '9:30 there')"


def test_no_match_is_said_plainly(ctx):
    outcome = search(ctx, query="photosynthesis")
    assert (outcome.status, outcome.output) == ("ok", "(no past sessions match 'photosynthesis')")


def test_limit_caps_the_hits(ctx):
    for n in range(4):
        ctx.store.create_session(f"extra-{n}")
        ctx.store.add_message(f"extra-{n}", "user", "another zebra story")
    hits = search(ctx, query="zebra", limit=2).output.split("\n\n")
    assert len(hits) == 2 and all(hit.startswith("session id: ") for hit in hits)
    assert search(ctx, query="zebra", limit=50).status == "error"  # over the schema's maximum


@pytest.mark.parametrize("query", ['zebra AND (', 'NEAR("x"', '"unbalanced', "col:zebra*"])
def test_search_syntax_in_the_query_is_just_text(ctx, query):
    outcome = search(ctx, query=query)
    assert outcome.status == "ok"
    if "zebra" in query:
        assert "past-1" in outcome.output


def test_empty_query_is_an_error(ctx):
    assert search(ctx, query="   ").status == "error"
