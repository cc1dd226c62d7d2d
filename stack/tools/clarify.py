"""The `clarify` tool: the model asks the user a question instead of guessing.

It only records the question on the context; the agent loop sees `question_for_user` set, ends the
turn and answers the user with that question.
"""

from __future__ import annotations

from typing import Any

from .base import Tool, ToolContext, ToolError, object_schema


def _clarify(arguments: dict[str, Any], ctx: ToolContext) -> str:
    question = arguments["question"].strip()
    if not question:
        raise ToolError("question is empty")
    ctx.question_for_user = question
    return "The question will be shown to the user; the turn ends here."


TOOLS: list[Tool] = [
    Tool(
        name="clarify",
        description="Ask the user a question when the request is unclear; ends your turn.",
        parameters=object_schema({"question": {"type": "string"}}, ["question"]),
        run=_clarify,
    )
]
