"""KV states of stable prefixes on disk, so that a restarted lane does not read its prompt again.

On two laptop cores the lane's system prompt and tools block (about 1,700 tokens on the default
model) take 30 s or more to evaluate, and every start used to pay that before the first answer. A
saved state is only valid for the model file that computed it and for exactly the tokens it
holds, so a file's name hashes both (`model_key`, `tokens_key`) and its header repeats them: a new
model, a changed prompt or tools block, or another llama-cpp-python finds no file, or a file it
refuses, and the prefix is evaluated again. The most recently used `KEEP` files stay; older ones
go (a state is about 30 KB per token on Qwen2.5-Coder-1.5B, ~50 MB for the default prefix).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import struct
import tempfile
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

log = logging.getLogger("lane.llm")

MAGIC = b"LANEKV1\n"
SUFFIX = ".kv"
KEEP = 16


def model_key(path: Path, runtime: str) -> str:
    """The model file's identity (resolved path, size, modification time) and the runtime that
    reads it (`llama-cpp-python VERSION`): cheap to compute, and any of them changing means the
    saved KV cells may not fit."""
    stat = path.stat()
    identity = f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{runtime}"
    return hashlib.sha256(identity.encode()).hexdigest()[:16]


def tokens_key(tokens: Sequence[int]) -> str:
    return hashlib.sha256(_packed(tokens)).hexdigest()[:24]


@dataclass(frozen=True)
class PrefixStore:
    """The folder of saved prefix states for one model (`model`: its model_key)."""

    directory: Path
    model: str

    def path_for(self, tokens: Sequence[int]) -> Path:
        return self.directory / f"{self.model}-{tokens_key(tokens)}{SUFFIX}"

    def has(self, tokens: Sequence[int]) -> bool:
        return self.path_for(tokens).is_file()

    def load(self, tokens: Sequence[int]) -> bytes | None:
        """The saved state of exactly `tokens` for this model; None when there is none or the file
        does not hold what its name promises (then it is removed)."""
        path = self.path_for(tokens)
        try:
            raw = path.read_bytes()
        except OSError:
            return None
        found = _parse(raw, self.model)
        state = found[1] if found is not None and found[0] == tuple(tokens) else None
        if state is None:
            log.warning("ignoring %s: it does not hold this model's state for this prefix", path)
            path.unlink(missing_ok=True)
            return None
        os.utime(path)  # recently used states are the ones kept
        return state

    def saved(self) -> list[tuple[tuple[int, ...], bytes]]:
        """This model's saved prefixes, newest first (the llm service restores them at start, so
        that a restart of the llm alone, under a running shim, keeps the first answer fast)."""
        found = []
        for path in sorted(self.directory.glob(f"{self.model}-*{SUFFIX}"), key=_mtime, reverse=True):
            try:
                parsed = _parse(path.read_bytes(), self.model)
            except OSError:
                continue
            if parsed is not None and path == self.path_for(parsed[0]):
                found.append(parsed)
        return found

    def save(self, tokens: Sequence[int], state: bytes) -> Path:
        """Write atomically (a crash leaves the old file or none), then keep only the newest KEEP."""
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.path_for(tokens)
        header = json.dumps({"model": self.model, "n_tokens": len(tokens)}).encode()
        fd, temporary = tempfile.mkstemp(dir=self.directory, suffix=".part")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(MAGIC + struct.pack("<I", len(header)) + header + _packed(tokens))
                out.write(state)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        self._prune()
        return path

    def _prune(self) -> None:
        saved = sorted(self.directory.glob(f"*{SUFFIX}"), key=_mtime, reverse=True)
        for old in saved[KEEP:]:
            old.unlink(missing_ok=True)


def _parse(raw: bytes, model: str) -> tuple[tuple[int, ...], bytes] | None:
    """The tokens and state a file holds, when it is a state file of `model`."""
    if not raw.startswith(MAGIC) or len(raw) < len(MAGIC) + 4:
        return None
    start = len(MAGIC) + 4
    (header_size,) = struct.unpack("<I", raw[len(MAGIC):start])
    try:
        header = json.loads(raw[start:start + header_size])
    except ValueError:
        return None
    if not isinstance(header, dict) or header.get("model") != model or not isinstance(header.get("n_tokens"), int):
        return None
    body = start + header_size
    end = body + 4 * header["n_tokens"]
    if len(raw) <= end:  # cut short: no state after the tokens
        return None
    packed = array("i")
    packed.frombytes(raw[body:end])
    state = raw[end:]
    if len(packed) != header["n_tokens"] or not state:
        return None
    return tuple(packed), state


def _packed(tokens: Sequence[int]) -> bytes:
    return array("i", tokens).tobytes()


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
