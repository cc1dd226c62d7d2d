"""The `clarify` tool: the model asks the user a question instead of guessing.

It only records the question on the context; the agent loop sees `question_for_user` set, ends the
turn and answers the user with that question.
"""

from __future__ import annotations

import difflib
from typing import Any

from .base import Tool, ToolContext, ToolError, object_schema, plain_words

# How alike a question and the user's message may be before the question is the message again
# ("Change what to which other one?" against "change it to the other one" is 0.82: a real question).
SAME_WORDS = 0.9


def _clarify(arguments: dict[str, Any], ctx: ToolContext) -> str:
    question = arguments["question"].strip()
    if not question:
        raise ToolError("question is empty")
    ctx.question_for_user = question
    return "The question will be shown to the user; the turn ends here."


def asks_something_new(arguments: dict[str, Any], request: str, context: str) -> str | None:
    """Why a question is not one for the user: it is their own message again. Seen on the 1.5B
    model after a page it fetched held the answer: clarify("Could you pull up <url> and tell me
    when they open on Saturday?"), the user's request word for word, shown to them as the answer.
    None when it may be asked."""
    question = arguments.get("question")
    said, asked = plain_words(question if isinstance(question, str) else ""), plain_words(request)
    if not said or not asked or difflib.SequenceMatcher(None, said, asked).ratio() < SAME_WORDS:
        return None
    return ("not asked: that question is the user's own message; answer it from the results you "
            "have, or call the tool it needs")


TOOLS: list[Tool] = [
    Tool(
        name="clarify",
        description="Ask the user a question when the request is unclear; ends your turn.",
        parameters=object_schema({"question": {"type": "string"}}, ["question"]),
        run=_clarify,
        precondition=asks_something_new,
    )
]
