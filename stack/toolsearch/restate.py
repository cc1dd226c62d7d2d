"""Restatement: the request retold as the tool it needs, in a tool description's words.

A user writes their situation ("Acme is leaving us, stop charging them"), a foreign language, a
typo or three sentences of context before the ask; a tool's description says "Cancel a customer's
subscription". Example requests (examples.py) bring tools closer to users' words; this brings the
request closer to tools' words: the lane's own model, asked once per request, names what the tool
must do ("cancel a customer's subscription in Stripe"), one line per task. Search ranks by the
request and its restatement together (retrieval.py), so a restatement that loses a detail the
request had costs little, and a request the model cannot read is searched as it was.

This module words the question, asks it of whichever model it is given (asking.py) and reads the
answer; the agent asks at the start of a turn (agent/reading.py), and `lane restate`
(model_commands.py) for a file of queries.
"""

from __future__ import annotations

from .asking import A, ChatModel
from .examples import answer_lines

# One line per task, each a short tool description: 40 tokens hold three.
RESTATE_MAX_TOKENS = 40
MAX_LINES = 3
MAX_LINE_WORDS = 20
MAX_REQUEST_CHARS = 2000

INSTRUCTION = (
    "You help an assistant pick a software tool. Read the user's message and write, in a tool "
    "description's plain words, what the tool must do: a verb and its object, and the product or "
    "service when the message names or implies one. Under 12 words. If the message asks for "
    "several things, write one line for each. Nothing else.")
# Worked answers (no tool of any catalog the lane ships or measures): a situation, a product
# implied by its jargon, and two tasks in one message.
SHOTS = (
    ("I land in Lyon on Saturday, should I pack an umbrella?",
     "get the weather forecast for a city"),
    ("Tom Li and T. Li are the same customer in the CRM, sort that out",
     "merge two duplicate contact records in the CRM"),
    ("book me a table for four at Luigi's tonight and text Sam the time",
     "make a restaurant reservation\nsend a text message to a contact"),
)


def restate_messages(request: str) -> list[dict[str, str]]:
    """The chat that asks a model to restate one request (a long one cut to its first
    MAX_REQUEST_CHARS characters: the ask rarely hides after that much context)."""
    messages = [{"role": "system", "content": INSTRUCTION}]
    for user, answer in SHOTS:
        messages += [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]
    return [*messages, {"role": "user", "content": request.strip()[:MAX_REQUEST_CHARS]}]


async def ask_restatement(model: ChatModel[A], request: str) -> A:
    """The model's restatement of a request, as the agent asks at the start of a turn and
    `lane restate` for a query file."""
    return await model.chat(restate_messages(request), [], max_tokens=RESTATE_MAX_TOKENS,
                            temperature=0.0)


def parse_restatement(text: str) -> tuple[str, ...]:
    """The task lines of a model's answer: list marks and quotes stripped; an introduction
    ("Here is what the tool must do:") and runaway prose are no task."""
    lines: list[str] = []
    for line in answer_lines(text):
        words = line.split()
        if not words or line.endswith(":") or len(words) > MAX_LINE_WORDS or line in lines:
            continue
        lines.append(line)
        if len(lines) == MAX_LINES:
            break
    return tuple(lines)
