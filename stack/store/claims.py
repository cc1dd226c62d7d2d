"""What a model's words claim: tool names it mentions and tool calls it wrote as text.

Only used to *describe* claims; a claim never makes a step pass. The store decides what ran; these
patterns find what the model said ran (or wrote as a call) so the check and the trace page can show
the difference. It lives beside the store, not in check/, because both read stored messages with
it and api/ may not import check/.
"""

from __future__ import annotations

import re
from typing import Iterable

# Tools of every lane (DESIGN.md): the core families and the three bridges. Tools seen in the store
# (MCP tools, deferred built-ins) are added by the caller.
BUILTIN_TOOLS = frozenset({
    "memory", "terminal", "session_search", "read_file", "write_file", "search_files", "patch",
    "todo", "clarify", "tool_search", "tool_describe", "tool_call",
})

# Everyday words that are also tool names: counted only when written as a name (backticks, a call,
# a JSON field, right after a verb of use: "I used calculate"), not when they are just English in
# a sentence. Seen: "I ran the Python script to calculate the average ..." after run_python ran,
# held back as a claim that `calculate` ran.
_PLAIN_WORDS = frozenset({"patch", "todo", "clarify", "calculate"})
_USED_AS_NAME = (r"\b(?:ran|run|used|called|invoked|executed)\s+(?:the\s+)?"
                 r"(?:[\w`-]+(?:,\s*(?:and\s+)?|\s+and\s+)){{0,4}}`?{}(?![\w-])")  # "used memory and calculate"

_TAGS = re.compile(r"<tool_call>|</tool_call>|<function[=>]|\[TOOL_CALLS\]|<\|python_tag\|>",
                   re.IGNORECASE)
_JSON_CALL = re.compile(
    r'"(?:name|tool|tool_name|function)"\s*:\s*"(?P<name>[A-Za-z_][\w.-]*)"\s*,\s*'
    r'"(?:arguments|parameters|args|input|params)"\s*:')
_FUNCTION_TAG = re.compile(r"<function=(?P<name>[A-Za-z_][\w.-]*)")
_CALL_EXPR = re.compile(r"\b(?P<name>[A-Za-z_][\w.]*)\(\s*(?:[A-Za-z_]\w*\s*=|[\"'{])")
_BACKTICKED = re.compile(r"`(?P<name>[a-z][a-z0-9_]*)`")
# A snake_case word that is a file's name ("shop_nov.csv", "/tmp/lane_home") is no tool's: seen, "I
# ran the Python script to sum the amount column in shop_nov.csv" held back as a claim that
# "shop_nov" ran. Each part of a name begins with a letter: a part that begins with a digit makes a
# token of another kind (an architecture, "x86_64", copied from the facts the lane gives each turn;
# an encoding, "utf_8"; a version).
_SNAKE = re.compile(r"(?<![\w/.-])(?P<name>[a-z][a-z0-9]*(?:_[a-z][a-z0-9]*)+)(?![\w/-]|\.\w)")


def text_tool_calls(content: str, vocabulary: frozenset[str] = BUILTIN_TOOLS) -> list[str]:
    """Names of the tool calls written as text in content ('?' for a tag without a readable
    name); empty when the content holds nothing shaped like a call."""
    names = [m.group("name") for m in _JSON_CALL.finditer(content)]
    names += [m.group("name") for m in _FUNCTION_TAG.finditer(content)]
    names += [m.group("name") for m in _CALL_EXPR.finditer(content)
              if _looks_like_tool(m.group("name"), vocabulary)]
    if not names and _TAGS.search(content):
        names.append("?")
    return list(dict.fromkeys(names))


def unexecuted_text_calls(assistant_messages: Iterable[tuple[int, str]], ran_from_text: set[int],
                          vocabulary: frozenset[str] = BUILTIN_TOOLS) -> dict[int, list[str]]:
    """Per assistant message id, the tool calls written as text in its content that did not run:
    shaped like a call, in a message from which no salvaged call really ran (`ran_from_text`: ids
    of the messages with an origin='content' execution that really ran). Messages without such
    text are left out."""
    found: dict[int, list[str]] = {}
    for message_id, content in assistant_messages:
        if message_id not in ran_from_text:
            names = text_tool_calls(content, vocabulary)
            if names:
                found[message_id] = names
    return found


def named_tools(content: str, vocabulary: frozenset[str] = BUILTIN_TOOLS) -> set[str]:
    """Every tool name the text mentions: known tool names as words or in backticks, snake_case
    identifiers (how tool names are written; a summary has little other use for them), and the
    names in tool-call-shaped text."""
    names = {name for name in text_tool_calls(content, vocabulary) if name != "?"}
    names |= {m.group("name") for m in _BACKTICKED.finditer(content)
              if m.group("name") in vocabulary}
    names |= {m.group("name") for m in _SNAKE.finditer(content)}
    lowered = content.lower()
    # Only names the text contains are matched as words: a client's 4,096 tools were 4,096 regexes
    # compiled and run per answer, on the event loop.
    for name in (name for name in vocabulary if name.lower() in lowered):
        plain = rf"(?<![\w-]){re.escape(name.lower())}(?![\w-])"
        if re.search(_USED_AS_NAME.format(re.escape(name.lower())) if name in _PLAIN_WORDS else plain, lowered):
            names.add(name)
    return names


def _looks_like_tool(name: str, vocabulary: frozenset[str]) -> bool:
    return name in vocabulary or "_" in name.strip("_")
