"""Tool calls a model wrote as text: shapes of calls (tags, JSON, call expressions), no words.

The store decides what ran; these shapes find what the model wrote as a call instead, so the
check, the trace page and the answer check can show the difference. It lives beside the store, not
in check/, because all three read stored messages with it and api/ may not import check/.
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

_TAGS = re.compile(r"<tool_call>|</tool_call>|<function[=>]|\[TOOL_CALLS\]|<\|python_tag\|>",
                   re.IGNORECASE)
_JSON_CALL = re.compile(
    r'"(?:name|tool|tool_name|function)"\s*:\s*"(?P<name>[A-Za-z_][\w.-]*)"\s*,\s*'
    r'"(?:arguments|parameters|args|input|params)"\s*:')
_FUNCTION_TAG = re.compile(r"<function=(?P<name>[A-Za-z_][\w.-]*)")
_CALL_EXPR = re.compile(r"\b(?P<name>[A-Za-z_][\w.]*)\(\s*(?:[A-Za-z_]\w*\s*=|[\"'{])")



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


def _looks_like_tool(name: str, vocabulary: frozenset[str]) -> bool:
    return name in vocabulary or "_" in name.strip("_")
