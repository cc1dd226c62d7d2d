"""Which tool names a summary mentions: the check's judge of step 6 ("name each tool that ran").

Only the check uses this, to fail a step whose summary names a tool the store shows never ran; the
lane passes answers on without it. The names a client or the lane gives tools are identifiers, so
most are found by their shape; the few that are also everyday English words count only where they
are written as a name, which makes the judge lenient (never stricter) in other languages.
"""

from __future__ import annotations

import re

from ..store.claims import BUILTIN_TOOLS, text_tool_calls

# Everyday words that are also tool names: counted only when written as a name (backticks, a call,
# a JSON field, right after a verb of use: "I used calculate"), not when they are just English in
# a sentence. Seen: "I ran the Python script to calculate the average ..." after run_python ran,
# held back as a claim that `calculate` ran.
_PLAIN_WORDS = frozenset({"patch", "todo", "clarify", "calculate"})
_USED_AS_NAME = (r"\b(?:ran|run|used|called|invoked|executed)\s+(?:the\s+)?"
                 r"(?:[\w`-]+(?:,\s*(?:and\s+)?|\s+and\s+)){{0,4}}`?{}(?![\w-])")  # "used memory and calculate"

_BACKTICKED = re.compile(r"`(?P<name>[a-z][a-z0-9_]*)`")
# A snake_case word that is a file's name ("shop_nov.csv", "/tmp/lane_home") is no tool's: seen, "I
# ran the Python script to sum the amount column in shop_nov.csv" held back as a claim that
# "shop_nov" ran. Each part of a name begins with a letter: a part that begins with a digit makes a
# token of another kind (an architecture, "x86_64", copied from the facts the lane gives each turn;
# an encoding, "utf_8"; a version).
_SNAKE = re.compile(r"(?<![\w/.-])(?P<name>[a-z][a-z0-9]*(?:_[a-z][a-z0-9]*)+)(?![\w/-]|\.\w)")


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
