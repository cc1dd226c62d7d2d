"""Turning tool definitions and queries into the words BM25 compares.

Tool names are code (`get_accounts_list`, `createIssue`, `github__search_code`), queries are
speech ("find the open tickets"), so both go through one pipeline: split snake and camel case,
lower-case, drop filler words, strip common English suffixes. Stemming here is a deliberately
small suffix stripper: it only has to map a query's word and a description's word onto the same
form, not produce linguistic stems, and it keeps the default install free of extra packages.
"""

from __future__ import annotations

import functools
import re

from ..text_bounds import bounded
from .wordlists import entries

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
# Scripts written without spaces between words (Chinese, Japanese kana, Thai, Lao, Khmer, Myanmar):
# each of their letters counts as a word, so a Chinese request is not one "word" too short to
# count or to split into tasks.
_UNSPACED = ("\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf"
             "\u4e00-\u9fff\uf900-\ufaff")
_WORD = re.compile(rf"[{_UNSPACED}]|[^\W_{_UNSPACED}]+")
# "on-call" / "on call" is one word in tool names (`get_current_oncall_users`).
_ONCALL = re.compile(r"\bon[\s-]call\b", re.IGNORECASE)

# Filler words (data/stopwords.txt) and groups of words for the same thing (data/synonyms.txt;
# no word is in two groups).
STOPWORDS = frozenset(word for line in entries("stopwords.txt") for word in line.split())
_SYNONYM_GROUPS = tuple(entries("synonyms.txt"))

# Where one request holds several tasks: "find the page and leave a comment on it".
_CLAUSE_BREAK = re.compile(
    r"\s*(?:[;,，；、]|\b(?:and then|and also|then|and|also|after that|afterwards|"
    r"y luego|y|et puis|et|und dann|und|e poi|e)\b)\s*", re.IGNORECASE)

_SUFFIXES = (("sses", "ss"), ("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", ""))


def split_words(text: str) -> list[str]:
    """Words of any text, code identifiers split into their parts, lower-cased."""
    return [w.lower() for w in _WORD.findall(_CAMEL.sub(" ", _ONCALL.sub("oncall", text)))]


@functools.lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """create/created/creating -> creat, issue/issues -> issu, entries -> entry."""
    if len(word) <= 3 or not word.isascii():
        return word
    for suffix, replacement in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "s" and word.endswith(("ss", "us", "is")):
                break
            if suffix == "es" and not word.endswith(("shes", "ches", "xes", "zes")):
                continue
            word = word[: -len(suffix)] + replacement
            break
    if len(word) > 4 and word.endswith("e") and not word.endswith("ee"):
        word = word[:-1]
    return word


def tokens(text: str) -> list[str]:
    """The BM25 terms of a text: split, filler words dropped, stemmed."""
    return [stem(w) for w in split_words(text) if w not in STOPWORDS]


def _synonym_table() -> dict[str, frozenset[str]]:
    table: dict[str, set[str]] = {}
    for group in _SYNONYM_GROUPS:
        members = {stem(w) for w in group.split()}
        for member in members:
            table.setdefault(member, set()).update(members)
    return {word: frozenset(others - {word}) for word, others in table.items()}


SYNONYMS = _synonym_table()


def expansions(terms: list[str]) -> list[str]:
    """Related terms of a query's terms that the query does not already contain."""
    present = set(terms)
    extra: dict[str, None] = {}
    for term in terms:
        for other in SYNONYMS.get(term, ()):
            if other not in present:
                extra[other] = None
    return list(extra)


def clauses(text: str) -> list[str]:
    """The tasks of a request that holds more than one, each with at least two content words;
    [] for a single task."""
    parts = [part for part in _CLAUSE_BREAK.split(bounded(text)) if part and len(tokens(part)) >= 2]
    return parts if len(parts) >= 2 else []
