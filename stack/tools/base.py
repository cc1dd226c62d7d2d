"""What a tool is, what it gets when it runs, and how it says it failed.

A tool is plain data plus one synchronous function. The agent runs tools in a worker thread, so a
tool may block (a subprocess, a file, an MCP call handed to its own event loop) without stalling
the shim. A tool reports failure by raising ToolError (recorded as status 'error') or ToolRefused
(status 'refused'); any other exception is caught by the executor and recorded as an error too.

A thread cannot be killed, so a tool that may run long watches `ToolContext.stop` (set when its
time limit, LANE_TOOL_TIMEOUT, passes or its client leaves) and ends its own work: the terminal
kills its command's process group, search_files its matcher process.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..config import Settings
from ..store import Store

RESERVED_NAMES = frozenset({"tool_search", "tool_describe", "tool_call"})


def nothing(what: str) -> str:
    """The result of a tool that found nothing to show, "(the todo list is empty)": a fact the
    model reads, written so that the answer check knows it need not be passed on (says_nothing)."""
    return f"({what})"


def says_nothing(result: str) -> bool:
    """Whether a result is wholly such a note (nothing)."""
    text = result.strip()
    return text.startswith("(") and text.endswith(")") and "(" not in text[1:-1] and ")" not in text[1:-1]


# Scripts written without spaces between words (Han, kana): each character counts as a word.
_UNSPACED = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_WORD = re.compile(f"[{_UNSPACED}]|[^\\W_{_UNSPACED}]+")


def plain_words(text: str) -> str:
    """Text as its lower-cased words and numbers, one space apart, in any script: how the lane
    compares what the model wrote with what the user wrote (an echo, a question that is the
    request again) and with what a tool returned. Letters of every script count (it once kept
    only a-z: every answer in Russian or Japanese was "the request echoed back", both sides
    empty); a character of a script written without spaces is a word of its own."""
    return " ".join(_WORD.findall(text.lower()))


_DIGITS = re.compile(r"\d+(?:[.,]\d+)*")
# A message that spells a number in words may be the source of any number in a call.
_NUMBER_WORDS = frozenset(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety "
    "hundred thousand million billion half quarter third dozen twice double triple percent".split())


# Code the user quotes: a fenced block or an inline span.
_CODE_SPAN = re.compile(r"```[^\n`]*\n?(.*?)```|`([^`\n]+)`", re.DOTALL)


def code_spans(text: str) -> list[str]:
    """The code a message quotes in backticks (fenced blocks and inline spans), each as written."""
    return [fenced or inline for fenced, inline in _CODE_SPAN.findall(text)]


def outside_code(text: str) -> str:
    """The message with the code it quotes left out: its own words."""
    return _CODE_SPAN.sub(" ", text)


def numbers_in(text: str) -> set[float]:
    """The numbers written with digits in `text` ("1,250" is 1250)."""
    found = set()
    for digits in _DIGITS.findall(text):
        try:
            found.add(float(digits.replace(",", "")))
        except ValueError:
            continue
    return found


def spells_a_number(text: str) -> bool:
    """Whether `text` writes a number in words ("three", "a dozen", "half")."""
    return bool(_NUMBER_WORDS & set(re.findall(r"[a-z]+", text.lower())))


# A float as Python prints it, with the binary rounding showing: 15 or more significant digits.
_LONG_FLOAT = re.compile(r"(?<![\w.])-?\d+\.\d{8,}(?![\w.])")


def with_plain_floats(output: str) -> str:
    """`output` with each float whose printed form shows binary rounding ("6.400000000000001",
    "38.400000000000006") followed by the number it stands for ("(≈ 6.4)"). Seen on the 1.5B
    model: after a script printed 6.400000000000001 as an average, its answer said 19.20."""
    def plain(match: re.Match[str]) -> str:
        shown = match.group(0)
        meant = f"{round(float(shown), 12):.12g}"  # short only where the tail was rounding
        return f"{shown} (≈ {meant})" if len(meant) <= len(shown) - 8 else shown
    return _LONG_FLOAT.sub(plain, output)


class ToolError(Exception):
    """The tool ran and failed, or its arguments were wrong: the model is told why."""


class ToolRefused(Exception):
    """The lane will not run this call (outside the workspace, not granted, recursion...)."""


@dataclass
class ToolContext:
    settings: Settings
    store: Store
    session_id: str
    # Set by `clarify`: the turn ends and this question is the answer to the user.
    question_for_user: str | None = None
    # Set by the agent once a tool ran ok in this turn: the call is a step the model chose after
    # the request's first one. write_file then deletes no line of an existing file.
    later_step: bool = False
    # Set when the running tool is to stop: its time limit passed (tools.execute.run_tool) or the
    # turn was cancelled because its client left (tools.execute.run_recorded).
    stop: threading.Event = field(default_factory=threading.Event)

    @property
    def workspace(self) -> Path:
        return self.settings.workspace


ToolFunction = Callable[[dict[str, Any], ToolContext], str]
# A check of a decided call against what the conversation said: the arguments, the user's latest
# message, and the rest (earlier messages, tool results, the notes) as one text; the reason the
# lane does not run it, or None.
Precondition = Callable[[dict[str, Any], str, str], str | None]


BUILTIN = "builtin"


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    run: ToolFunction
    # BUILTIN or the MCP server the tool comes from; the catalog shows it as the source.
    source: str = BUILTIN
    # Checked before a call of this tool runs (tools.execute.unmet_precondition: in the agent loop
    # and for the lane's tools in proxy mode; lever "operands").
    precondition: Precondition | None = None
    # Whether the user's message could want this tool at all; the agent's decision does not offer
    # it for one that cannot (lever "operands"). None: any message may.
    wanted_by: Callable[[str], bool] | None = None
    # Whether its result only confirms a change the request asked for ("wrote 76 bytes to
    # list.txt"): where a tool that found something out ran in the same turn, the answer must pass
    # on what that one found (agent.answers.facts_of). Seen: asked what a packing list held, the
    # model read it, wrote it back unchanged, and answered "I found the file lisbon_packing.txt
    # and read it.", which shared the file's name with the write.
    confirms: bool = False

    @property
    def server(self) -> str:
        """The MCP server the tool comes from, "" for the lane's own tools."""
        return "" if self.source == BUILTIN else self.source

    def openai_schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


def object_schema(
    properties: dict[str, Any], required: list[str] | tuple[str, ...] = (),
    example: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON schema of a tool's arguments: an object that admits no unknown keys. An `example`
    (JSON Schema's `examples`) is what error messages and corrections show the model."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }
    if example is not None:
        schema["examples"] = [example]
    return schema
