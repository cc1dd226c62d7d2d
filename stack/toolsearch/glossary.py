"""A small cross-language glossary: the words people use for tool tasks in Spanish, French,
German, Portuguese and Italian, mapped to the English words tool descriptions use.

Tool catalogs are written in English and the default embedder (all-MiniLM-L6-v2) is English-only,
so "crea una rama" has no word in common with `create_branch`, neither for BM25 nor for the
embedder. Each known word adds its English reading to the query and is kept itself: many are
English words too ("base", "canal", "pasta", "dossier"), and "query the knowledge base" must still
be searched with "base". Unknown words pass unchanged.
Keys are lower-case and without accents.

The same goes for the shorthand people type for products and things, in any language: "k8s" is
Kubernetes and "gh" GitHub in every catalog, and neither BM25 nor the embedder can tell.
Both kinds of entry are kept in data/glossary.txt (wordlists.py).
"""

from __future__ import annotations

import unicodedata

from .wordlists import entries


def _fold(word: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFD", word.lower())
                   if unicodedata.category(c) != "Mn")


def _glossary() -> dict[str, tuple[str, ...]]:
    """data/glossary.txt: "english words: the words people write for them" a line."""
    glossary: dict[str, tuple[str, ...]] = {}
    for entry in entries("glossary.txt"):
        meanings, _, words = entry.partition(":")
        for word in words.split():
            glossary[_fold(word)] = glossary.get(_fold(word), ()) + tuple(meanings.split())
    return glossary


GLOSSARY = _glossary()


def english(word: str) -> tuple[str, ...]:
    """The English words a foreign task word stands for, or () when it is not in the glossary."""
    return GLOSSARY.get(_fold(word), ())


def english_gloss(words: list[str]) -> list[str]:
    """English readings of the glossary words among `words`, in order, without repeats."""
    seen: dict[str, None] = {}
    for word in words:
        for meaning in english(word):
            seen.setdefault(meaning, None)
    return list(seen)
