"""The hand-kept word lists of tool search, read from data files shipped with the package.

Stopwords, synonym groups and the glossary are data that people extend (a language, a product's
shorthand, a verb a catalog uses), not code: they live in data/*.txt, one entry a line, where a
change is a one-line diff that needs no Python. Each list is read once, when the module that uses
it is imported (tokens.py, glossary.py); tests/unit/test_toolsearch_wordlists.py keeps their
invariants (no word in two synonym groups, no stopword a task word, no glossary word rewritten).
"""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).parent / "data"


def entries(name: str) -> list[str]:
    """The entries of data/`name`: a line each, `#` starting a comment, blank lines skipped, and an
    indented line going on with the entry above it."""
    found: list[str] = []
    for raw in (DATA / name).read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0]
        if not line.strip():
            continue
        if line[0].isspace() and found:
            found[-1] += " " + line.strip()
        else:
            found.append(line.strip())
    return found
