"""The lane's one bound on user text before its regexes and word lists read it.

Python's `re` backtracks, and a search tries every start position: a pattern such as
`[\\w.+-]+@...` costs the square of the length of an unbroken word, so one 40,000-character word
held the shim for seconds (and a search holds the GIL: no other thread, and no /health, runs
meanwhile). Bounded first, every such scan is linear in the text: no word is longer than
MAX_WORD_CHARS (what a URL or a path needs), no run of blanks longer than MAX_BLANK_CHARS, and a
longer text keeps its head and tail (where a request says what it wants), MAX_TEXT_CHARS in all.
"""

from __future__ import annotations

import re

MAX_TEXT_CHARS = 16_384
MAX_WORD_CHARS = 256
MAX_BLANK_CHARS = 8

# Linear: a run shorter than the bound fails after at most the bound's steps from each start.
_LONG_WORD = re.compile(rf"\S{{{MAX_WORD_CHARS + 1},}}")
_LONG_BLANK = re.compile(rf"\s{{{MAX_BLANK_CHARS + 1},}}")


def bounded(text: str, max_chars: int = MAX_TEXT_CHARS) -> str:
    """`text` as the lane's text scans read it (the module says why); unchanged when within."""
    if len(text) > max_chars:
        half = max_chars // 2
        text = f"{text[:half]}\n{text[-half:]}"
    text = _LONG_WORD.sub(lambda word: word.group(0)[:MAX_WORD_CHARS], text)
    return _LONG_BLANK.sub(lambda blank: blank.group(0)[:MAX_BLANK_CHARS], text)
