"""The `todo` tool: a per-session checklist, the user's chores or the model's steps of a task.

Its description names chores and errands: the decision's index (answers.INDEX_AGREES) re-asked a
right `todo` pick among search's best for "I've got a few chores today: ... Could you keep track of
them for me?", where "A checklist for this session's task" ranked below session_search.

The list lives in the session store (todos table), so it survives the turn and is visible to
`lane sessions`; each call returns the whole list so the model always sees its current state.
"add" appends: with only "set" (replace the list), asked to add one task the model passed that task
alone and the user's earlier items were gone (seen on the second held-out actions file, Dutch: a
second item replaced the first).
"""

from __future__ import annotations

from typing import Any

from .base import Tool, ToolContext, ToolError, nothing, object_schema

MAX_ITEMS = 50
MAX_ITEM_CHARS = 500


def render(items: list[tuple[str, bool]]) -> str:
    if not items:
        return nothing("the todo list is empty")
    return "\n".join(f"{n}. [{'x' if done else ' '}] {text}" for n, (text, done) in enumerate(items, 1))


def _todo(arguments: dict[str, Any], ctx: ToolContext) -> str:
    action = arguments["action"]
    store, session = ctx.store, ctx.session_id
    if action in ("add", "set"):
        if "items" not in arguments:
            raise ToolError(f"{action} needs items: the tasks, in order")
        texts = [" ".join(item.split()) for item in arguments["items"]]
        if any(not text for text in texts):
            raise ToolError("todo items must not be empty")
        kept = store.todos(session) if action == "add" else []
        if len(kept) + len(texts) > MAX_ITEMS or any(len(text) > MAX_ITEM_CHARS for text in texts):
            raise ToolError(f"at most {MAX_ITEMS} items of at most {MAX_ITEM_CHARS} characters")
        store.replace_todos(session, [*kept, *((text, False) for text in texts)])
    elif action == "done":
        numbers = arguments.get("numbers") or []
        items = store.todos(session)
        if not numbers:
            raise ToolError("done needs numbers: the 1-based numbers of the finished items")
        wrong = [n for n in numbers if not 1 <= n <= len(items)]
        if wrong:
            valid = f"1-{len(items)}" if items else "none, the list is empty"
            raise ToolError(f"no item numbered {', '.join(map(str, wrong))} (valid: {valid})")
        marked = set(numbers)
        store.replace_todos(session, [(t, d or n in marked) for n, (t, d) in enumerate(items, 1)])
    return render(store.todos(session))


TOOLS: list[Tool] = [
    Tool(
        name="todo",
        description=("A to-do list of tasks, chores or errands: add them, tick them off by number, "
                     "or read what is open."),
        parameters=object_schema(
            {
                "action": {"type": "string", "enum": ["add", "done", "read", "set"]},
                "items": {"type": "array", "items": {"type": "string"},
                          "description": "Tasks to add (add), or the whole new list (set)."},
                "numbers": {
                    "type": "array",
                    "items": {"type": "integer"},
                    "description": "Numbers of finished items (done).",
                },
            },
            ["action"],
        ),
        run=_todo,
    )
]
