"""The correction policy: what the lane does when a small model's reply is not a good end of its
turn, decided from plain data (the reply's shape, the store, the model's own reading of it).

Every lever is listed, with its budget, in ledger.LEVERS. Here: a call the reply told, spelled or
wrote as a command without making it (lever "call"). An action the reply reports that no execution
backs gets the lane's receipt (reading.receipt), unless the model reads the tool it reports as
fitting the request better than a reply in words (lever "claimed", answers._claimed).
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..tools.validation import example_arguments
from .answer_check import TurnFacts
from .ledger import Correction
from .toolcalls import described_call

_CALL_NAME = re.compile(r'"name"\s*:\s*"([^"]+)"')
# Code in a reply: a fenced block's body, or inline code. A line of it that starts with a tool's
# name and goes on with arguments, one of them a word of the user's message (their file, not a
# how-to's placeholder), is that tool's call written as a command for the user to run.
# Seen on the 1.5B model with a client's shell-named tools, the decision having said "answer":
# "you can use the 'cp' command to copy the file ... ```bash\ncp project_analysis.txt
# project_archive/\n```" (BFCL even ids; nothing ran, the turn ended).
_CODE = re.compile(r"```[^\n`]*\n(.*?)(?:```|$)|`([^`\n]+)`", re.DOTALL)
_COMMAND = re.compile(r"^\s*(?:\$\s*)?([A-Za-z_][\w.-]*)\s+\S")


def correction(content: str, facts: TurnFacts) -> Correction | None:
    """The correction for a reply that made no call, or None when its shape earns none: a call it
    told or spelled without making it. A tool merely mentioned, as in "I can save notes or run
    commands", is not a call to force."""
    text = content.strip()
    return _unmade_call(text, facts) if text else None


def _unmade_call(text: str, facts: TurnFacts) -> Correction | None:
    """A call the reply told or spelled without making it."""
    offered = facts.offered
    described = described_call(text, offered.get)
    if described is not None and described.name not in facts.ran_in_turn:
        arguments = json.dumps(described.arguments, ensure_ascii=False)
        return Correction(f"You described a call to {described.name} but did not make it, so nothing ran. "
                          f'To run it, reply with only:\n<tool_call>\n{{"name": "{described.name}", '
                          f'"arguments": {arguments}}}\n</tool_call>', described.name)
    spelled = [n for n in _CALL_NAME.findall(text) if n in offered]
    if spelled:
        return Correction(f"That was not a valid call, so {spelled[0]} did not run. To call a tool, reply "
                          f"with only:\n{call_example(spelled[0], offered[spelled[0]])}", spelled[0])
    asked = _names(facts.request)
    command = next(((line.strip(), match[1]) for line in commands(text)
                    if (match := _COMMAND.match(line)) and match[1] in offered
                    and match[1] not in facts.ran_in_turn and asked & _names(line[match.end(1):])), None)
    if command is not None:
        line, name = command
        return Correction(f"You wrote `{line}` as a command for the user to run, so nothing ran. "
                          f"Make it a call of the tool {name}.", name)
    return None


def _names(text: str) -> set[str]:
    """Words of at least three characters, a file name whole ("report.txt"): what a command's
    arguments share with the request that asked for it."""
    return set(re.findall(r"[\w.-]{3,}", text.lower()))


def commands(text: str) -> list[str]:
    """The lines of a reply's code: its fenced blocks' lines and its inline code spans."""
    return [line for block, inline in _CODE.findall(text) for line in (block.splitlines() if block else [inline])]


def call_example(name: str, schema: dict[str, Any]) -> str:
    arguments = json.dumps(example_arguments(schema), ensure_ascii=False)
    return f'<tool_call>\n{{"name": "{name}", "arguments": {arguments}}}\n</tool_call>'


def named_in(tool: str, request: str) -> bool:
    """Whether every word of a tool's name is in the request ("search my past sessions" names
    session_search), plurals included: the user chose the tool, so promotion offers none beside it."""
    words = {w.rstrip("s") for w in re.findall(r"[a-z]+", request.lower())}
    return all(part.rstrip("s") in words for part in re.findall(r"[a-z]+", tool.lower()))
