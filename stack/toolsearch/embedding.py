"""Sentence embeddings for tool search, when an embedding model is installed.

The default install has none: BM25 alone serves. `default_embedder()` loads the first backend it
finds, once per process (loading a model costs seconds; the vectors of a catalog are cheap to
recompute and are not cached across catalogs).
"""

from __future__ import annotations

import functools
import logging
from typing import Protocol, Sequence

import numpy as np

log = logging.getLogger("lane.toolsearch")


class Embedder(Protocol):
    name: str

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One L2-normalised row per text."""
        ...


@functools.lru_cache(maxsize=1)
def default_embedder() -> Embedder | None:
    return None
