"""todo (a per-session list in the store) and clarify (a question that ends the turn)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stack.config import Settings
from stack.store import Store
from stack.tools import clarify, todo
from stack.tools.base import ToolContext
from stack.tools.execute import Outcome, run_tool


@pytest.fixture
def store(tmp_path: Path):
    settings = Settings(home=tmp_path / "home")
    db = Store(settings.db_path)
    db.create_session("s1")
    db.create_session("s2")
    yield db
    db.close()


def context(store: Store, session_id: str = "s1") -> ToolContext:
    return ToolContext(Settings(home=store.path.parent), store, session_id)


def do(ctx: ToolContext, **arguments) -> Outcome:
    return run_tool(todo.TOOLS[0], arguments, ctx)


def test_set_mark_done_and_read(store):
    ctx = context(store)
    assert do(ctx, action="read").output == "(the todo list is empty)"
    outcome = do(ctx, action="set", items=["run tests", "fix  bug\n", "commit"])
    assert outcome.output == "1. [ ] run tests\n2. [ ] fix bug\n3. [ ] commit"
    done = do(ctx, action="done", numbers=[1, 3])
    assert (done.status, done.output) == ("ok", "1. [x] run tests\n2. [ ] fix bug\n3. [x] commit")
    assert store.todos("s1") == [("run tests", True), ("fix bug", False), ("commit", True)]
    assert do(ctx, action="read").output == done.output


def test_add_appends_and_set_replaces(store):
    """A task added keeps the ones before it (the user's list is not lost); set starts over."""
    ctx = context(store)
    do(ctx, action="add", items=["buy milk"])
    do(ctx, action="done", numbers=[1])
    outcome = do(ctx, action="add", items=["call  Dekker", "pay rent"])
    assert outcome.output == "1. [x] buy milk\n2. [ ] call Dekker\n3. [ ] pay rent"
    assert do(ctx, action="set", items=["only this"]).output == "1. [ ] only this"


def test_lists_are_per_session(store):
    do(context(store, "s1"), action="set", items=["mine"])
    assert do(context(store, "s2"), action="read").output == "(the todo list is empty)"


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"action": "done", "numbers": [4]}, "no item numbered 4 (valid: 1-2)"),
        ({"action": "done", "numbers": [0, 2]}, "no item numbered 0"),
        ({"action": "done"}, "done needs numbers"),
        ({"action": "set"}, "set needs items"),
        ({"action": "set", "items": ["ok", "  "]}, "must not be empty"),
        ({"action": "set", "items": ["x"] * (todo.MAX_ITEMS + 1)}, f"at most {todo.MAX_ITEMS} items"),
        ({"action": "add", "items": ["x"] * (todo.MAX_ITEMS - 1)}, f"at most {todo.MAX_ITEMS} items"),
        ({"action": "add"}, "add needs items"),
    ],
)
def test_bad_calls_are_errors_and_keep_the_list(store, arguments, message):
    ctx = context(store)
    do(ctx, action="set", items=["a", "b"])
    outcome = do(ctx, **arguments)
    assert outcome.status == "error" and message in outcome.output
    assert store.todos("s1") == [("a", False), ("b", False)]


def test_clarify_sets_the_question_for_the_agent(store):
    ctx = context(store)
    outcome = run_tool(clarify.TOOLS[0], {"question": "  Which file do you mean?  "}, ctx)
    assert outcome.status == "ok"
    assert ctx.question_for_user == "Which file do you mean?"


def test_clarify_needs_a_question(store):
    ctx = context(store)
    assert run_tool(clarify.TOOLS[0], {"question": " "}, ctx).status == "error"
    assert run_tool(clarify.TOOLS[0], {}, ctx).status == "error"
    assert ctx.question_for_user is None
