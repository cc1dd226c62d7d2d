"""The memory tool: entries persisted under LANE_HOME and shown to the system prompt."""

from __future__ import annotations

from pathlib import Path

import pytest

from stack.config import Settings
from stack.tools import memory
from stack.tools.base import ToolContext
from stack.tools.execute import Outcome, run_tool
from tests.fakes.tool_context import tool_context

TOOL = memory.TOOLS[0]


@pytest.fixture
def ctx(tmp_path: Path):
    with tool_context(tmp_path / "home") as context:
        yield context


def mem(ctx: ToolContext, **arguments) -> Outcome:
    return run_tool(TOOL, arguments, ctx)


def test_add_persists_and_reaches_the_system_prompt(ctx, tmp_path):
    assert memory.read_memory(ctx.settings) == ""
    outcome = mem(ctx, action="add", content="Project codename is BLUE-HERON")
    assert outcome.status == "ok"
    assert outcome.output == "saved to memory: 'Project codename is BLUE-HERON'"  # no numbers to copy
    mem(ctx, action="add", content="The answer was 42")
    # A new settings object on the same home sees the same memory: it lives on disk.
    again = Settings(home=tmp_path / "home")
    assert memory.read_memory(again) == "- Project codename is BLUE-HERON\n- The answer was 42"
    assert ctx.settings.memory_path.read_text() == "Project codename is BLUE-HERON\n\nThe answer was 42\n"


def test_multi_line_entries_stay_one_entry(ctx):
    mem(ctx, action="add", content="shopping:\n\n  milk\n\n\neggs\n")
    mem(ctx, action="add", content="second")
    assert memory.read_entries(ctx.settings.memory_path) == ["shopping:\n  milk\neggs", "second"]
    assert memory.read_memory(ctx.settings) == "- shopping:\n    milk\n  eggs\n- second"


def test_adding_the_same_entry_twice_keeps_one(ctx):
    mem(ctx, action="add", content="same")
    assert mem(ctx, action="add", content="same").output == "already in memory: 'same'; nothing changed"
    assert memory.read_entries(ctx.settings.memory_path) == ["same"]


def test_replace_and_remove_by_part_of_the_text(ctx):
    mem(ctx, action="add", content="codename is RED")
    mem(ctx, action="add", content="favourite colour is green")
    outcome = mem(ctx, action="replace", old_text="codename", content="codename is BLUE")
    assert (outcome.status, outcome.output) == ("ok", "replaced 'codename is RED' with 'codename is BLUE'")
    removed = mem(ctx, action="remove", old_text="COLOUR")
    assert (removed.status, removed.output) == ("ok", "removed 'favourite colour is green'")
    assert memory.read_entries(ctx.settings.memory_path) == ["codename is BLUE"]


def test_replacing_an_entry_with_itself_is_an_error_that_says_so(ctx):
    mem(ctx, action="add", content="rent is 1,150 EUR")
    outcome = mem(ctx, action="replace", old_text="rent is 1,150 EUR", content="rent is 1,150 EUR")
    assert outcome.status == "error" and "nothing changed" in outcome.output
    assert memory.read_entries(ctx.settings.memory_path) == ["rent is 1,150 EUR"]


@pytest.mark.parametrize("content", ["4471", "bike lock code", "Bike lock: 4471"])
def test_a_replace_that_only_drops_text_is_an_error_and_keeps_the_entry(ctx, content):
    """Seen: asked "what was my bike lock code again", the model replaced the note with '4471'."""
    mem(ctx, action="add", content="Bike lock code: 4471")
    outcome = mem(ctx, action="replace", old_text="bike lock code", content=content)
    assert outcome.status == "error" and "it would only drop text" in outcome.output and '"remove"' in outcome.output
    assert memory.read_entries(ctx.settings.memory_path) == ["Bike lock code: 4471"]


def test_a_replace_that_changes_a_word_or_adds_one_runs(ctx):
    mem(ctx, action="add", content="Bike lock code: 4471")
    assert mem(ctx, action="replace", old_text="bike", content="Bike lock code: 5520").status == "ok"
    assert mem(ctx, action="replace", old_text="bike", content="Bike lock code: 5520 (blue lock)").status == "ok"
    assert memory.read_entries(ctx.settings.memory_path) == ["Bike lock code: 5520 (blue lock)"]


def test_a_replace_in_another_script_that_changes_a_word_runs(ctx):
    """Words were once a-z only: every Cyrillic replace "added nothing" and was refused."""
    mem(ctx, action="add", content="Встреча в Москве")
    assert mem(ctx, action="replace", old_text="Встреча", content="Встреча в Париже").status == "ok"
    outcome = mem(ctx, action="replace", old_text="Встреча", content="Встреча")
    assert outcome.status == "error" and "it would only drop text" in outcome.output
    assert memory.read_entries(ctx.settings.memory_path) == ["Встреча в Париже"]


def test_exact_entry_wins_over_entries_that_contain_it(ctx):
    mem(ctx, action="add", content="tea")
    mem(ctx, action="add", content="tea with milk")
    assert mem(ctx, action="remove", old_text="tea").output == "removed 'tea'"
    assert memory.read_entries(ctx.settings.memory_path) == ["tea with milk"]


def test_replace_or_remove_of_unknown_text_is_an_error_listing_entries(ctx):
    mem(ctx, action="add", content="alpha")
    for action in ("replace", "remove"):
        outcome = mem(ctx, action=action, old_text="gamma", content="x")
        assert outcome.status == "error"
        assert "no memory entry contains 'gamma'" in outcome.output and "- alpha" in outcome.output
    assert memory.read_entries(ctx.settings.memory_path) == ["alpha"]


def test_ambiguous_text_is_an_error_and_changes_nothing(ctx):
    mem(ctx, action="add", content="port 8080 for web")
    mem(ctx, action="add", content="port 5432 for db")
    outcome = mem(ctx, action="remove", old_text="port")
    assert outcome.status == "error" and "matches 2 entries" in outcome.output
    assert len(memory.read_entries(ctx.settings.memory_path)) == 2


@pytest.mark.parametrize(
    "arguments, field",
    [
        ({"action": "add"}, "content"),
        ({"action": "add", "content": "  \n "}, "content"),
        ({"action": "replace", "old_text": "a"}, "content"),
    ],
)
def test_missing_text_is_an_error(ctx, arguments, field):
    mem(ctx, action="add", content="a")
    outcome = run_tool(TOOL, arguments, ctx)
    assert outcome.status == "error" and f"{field} is required" in outcome.output


@pytest.mark.parametrize("action", ["replace", "remove"])
def test_a_change_without_old_text_says_how_to_add_instead(ctx, action):
    """Measured: a 1.5B model asked to save something called replace with an empty old_text."""
    outcome = run_tool(TOOL, {"action": action, "old_text": "", "content": "42"}, ctx)
    assert outcome.status == "error"
    assert outcome.output.startswith(f"{action} needs old_text, a part of the entry to {action}.")
    assert '{"action": "add", "content": "<the text to remember>"}' in outcome.output


def test_unknown_action_is_rejected_by_the_schema(ctx):
    outcome = mem(ctx, action="forget")
    assert outcome.status == "error" and "action" in outcome.output


def test_the_size_cap_is_a_clear_error_and_keeps_the_file(ctx):
    mem(ctx, action="add", content="x" * (memory.MEMORY_MAX_CHARS - 10))
    before = ctx.settings.memory_path.read_text()
    outcome = mem(ctx, action="add", content="one more entry that does not fit")
    assert outcome.status == "error"
    assert f"limit of {memory.MEMORY_MAX_CHARS}" in outcome.output
    assert ctx.settings.memory_path.read_text() == before
    grow = mem(ctx, action="replace", old_text="xxx", content="y" * (memory.MEMORY_MAX_CHARS + 1))
    assert grow.status == "error"
    assert ctx.settings.memory_path.read_text() == before


def test_a_hand_edited_file_is_read_as_entries(ctx):
    ctx.settings.memory_path.parent.mkdir(parents=True, exist_ok=True)
    ctx.settings.memory_path.write_text("\n\nfirst fact\r\n\r\n\n  second fact  \n")
    assert memory.read_memory(ctx.settings) == "- first fact\n- second fact"


def test_there_is_no_read_the_error_shows_how_to_add(ctx):
    outcome = mem(ctx, action="read", content="42")
    assert outcome.status == "error"
    assert "'read' is not one of ['add', 'replace', 'remove']" in outcome.output
    assert '"action": "add"' in outcome.output
    assert memory.read_entries(ctx.settings.memory_path) == []


def test_replacing_an_entry_that_is_not_there_says_how_to_add_the_content(ctx):
    mem(ctx, action="add", content="ORCHID-7304")
    outcome = mem(ctx, action="replace", old_text="session check-seed-b", content="check-seed-b-1")
    assert outcome.status == "error" and outcome.output.startswith("no memory entry contains")
    assert outcome.output.endswith('To save it as a new entry instead: {"action": "add", "content": "check-seed-b-1"}')
    assert memory.read_entries(ctx.settings.memory_path) == ["ORCHID-7304"]


def test_the_fill_level_is_told_only_once_memory_is_three_quarters_full(ctx):
    mem(ctx, action="add", content="x" * 3100)
    outcome = mem(ctx, action="add", content="last one")
    assert outcome.status == "ok" and outcome.output.startswith("saved to memory: 'last one' (memory ")
    assert f"/{memory.MEMORY_MAX_CHARS} characters full)" in outcome.output
