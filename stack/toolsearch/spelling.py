"""Reading a misspelt query word as the catalog word the user meant ("lsit" -> "list").

Only words absent from the catalog are corrected, only to a catalog word one edit away (two for
long words), where swapping two neighbouring letters counts as one edit. Ties go to the word the
catalog uses most. A real word the catalog lacks is left alone: "stuck" is not a typo of "stack".
Real words are the whole words of the embedder's WordPiece vocabulary (data/minilm-vocab.txt,
shipped with the package, so BM25 alone has it too): 20,000 words people write, learnt from data
rather than kept by hand, and their regular inflections: the vocabulary keeps mostly base forms,
and "replicas", "mails" or "pager" read as "replaces", "fails" and "page" sent the search to
other tools.
"""

from __future__ import annotations

import functools
from collections import Counter
from typing import Iterable

from .embedding import VOCAB_PATH

MIN_LENGTH = 4
LONG_WORD = 8
CANDIDATES = 60


@functools.lru_cache(maxsize=1)
def real_words() -> frozenset[str]:
    """Whole lower-case words of the WordPiece vocabulary (no pieces, marks or digits)."""
    lines = VOCAB_PATH.read_text(encoding="utf-8").splitlines()
    return frozenset(w for w in lines if w.isalpha() and w.isascii() and w.islower())


def is_real(word: str) -> bool:
    """A word of the vocabulary, or a regular inflection of one ("replicas", "hogging", "pager")."""
    words = real_words()
    return word in words or any(len(base) >= 3 and base in words for base in _bases(word))


def _bases(word: str) -> list[str]:
    """What `word` could be inflected from: "mails" -> mail, "boxes" -> box, "queries" -> query,
    "hogging" -> hog, "pager" -> page. Only regular English endings, so "acess" stays a typo."""
    bases = []
    if word.endswith("ies"):
        bases.append(word[:-3] + "y")
    if word.endswith("es") and word[:-2].endswith(("s", "x", "z", "ch", "sh")):
        bases.append(word[:-2])
    elif word.endswith("s") and not word.endswith("ss"):
        bases.append(word[:-1])
    for ending in ("ing", "ed", "er"):
        if word.endswith(ending):
            stem = word[: -len(ending)]
            bases += [stem, stem + "e"]
            if len(stem) > 2 and stem[-1] == stem[-2]:
                bases.append(stem[:-1])
    if word.endswith("ly"):
        bases.append(word[:-2])
    return bases


class Speller:
    """Candidates come from two indexes: shared character trigrams (good for long words) and
    shared one-letter deletions (catches "lsit" -> "list", which share no trigram)."""

    def __init__(self, words: Iterable[str]):
        self.frequency = Counter(w for w in words if len(w) >= MIN_LENGTH - 1 and w.isascii())
        self._grams: dict[str, list[str]] = {}
        self._deletions: dict[str, list[str]] = {}
        for word in self.frequency:
            for gram in trigrams(word):
                self._grams.setdefault(gram, []).append(word)
            if len(word) < LONG_WORD:
                for variant in deletions(word) | {word}:
                    self._deletions.setdefault(variant, []).append(word)

    def correct(self, word: str) -> str | None:
        """The intended catalog word, or None when the word is known or has no close neighbour."""
        if (len(word) < MIN_LENGTH or not word.isascii() or word in self.frequency
                or is_real(word)):
            return None
        limit = 2 if len(word) >= LONG_WORD else 1
        shared: Counter[str] = Counter()
        for gram in trigrams(word):
            shared.update(self._grams.get(gram, ()))
        candidates = {c for c, _ in shared.most_common(CANDIDATES)}
        for variant in deletions(word) | {word}:
            candidates.update(self._deletions.get(variant, ()))
        best: tuple[int, bool, int, str] | None = None
        for candidate in candidates:
            if abs(len(candidate) - len(word)) > limit:
                continue
            distance = edit_distance(word, candidate, limit)
            if distance <= limit:
                # Typing rarely gets the first letter wrong: "marge" is merge, not large.
                key = (distance, candidate[0] != word[0], -self.frequency[candidate], candidate)
                best = key if best is None or key < best else best
        return best[3] if best else None


def trigrams(word: str) -> set[str]:
    padded = f" {word} "
    return {padded[i:i + 3] for i in range(len(padded) - 2)}


def deletions(word: str) -> set[str]:
    return {word[:i] + word[i + 1:] for i in range(len(word))}


def edit_distance(a: str, b: str, limit: int) -> int:
    """Edits (insert, delete, substitute, swap neighbours) from a to b; limit + 1 once above."""
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        current = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                current[j] = min(current[j], previous2[j - 2] + 1)
        if min(current) > limit:
            return limit + 1
        previous2, previous = previous, current
    return previous[-1]
