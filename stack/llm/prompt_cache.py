"""The KV state of recent prompts, kept in RAM so that more than one conversation stays warm.

On a laptop CPU a turn costs the prompt the model must evaluate, not the tokens it writes: llama.cpp
reuses the longest common token prefix with the context's current contents and evaluates only the
rest. One context holds one prefix, so a second client, the check's seed session, or two arms
taking turns would each throw the other's prefix away. This cache keeps the KV cells of recent
prompts (llama.cpp's per-sequence state: only the cells in use, no logits), restores the entry that
shares the longest prefix with a new prompt when it beats what the context already holds, and drops
the least recently used entries to stay within its RAM budget. A pinned entry (a stable prefix the
lane warmed at start, prefix_state.py) is never superseded by the conversations that grow from it
and goes last when over budget: every new session starts from it.
"""

from __future__ import annotations

import ctypes
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from llama_cpp import Llama

SEQUENCE = 0
# A newer state that shares this much of an older one's tokens is the same conversation grown (it
# differs only where a generated reply was re-rendered from the store): the older one is dropped.
SUPERSEDED_SHARE = 0.9


@dataclass
class CachedPrompt:
    tokens: tuple[int, ...]
    state: bytes
    last_used: float = field(default_factory=time.monotonic)
    pinned: bool = False

    @property
    def size(self) -> int:
        return len(self.state) + 4 * len(self.tokens)


class PromptCache:
    """Saved KV states keyed by their tokens, within `budget_bytes` (0 turns the cache off)."""

    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = budget_bytes
        self.entries: list[CachedPrompt] = []

    @property
    def used_bytes(self) -> int:
        return sum(entry.size for entry in self.entries)

    def best(self, tokens: Sequence[int]) -> tuple[CachedPrompt | None, int]:
        """The entry sharing the longest prefix with `tokens`, and that prefix's length."""
        best: CachedPrompt | None = None
        best_length = 0
        for entry in self.entries:
            length = common_prefix(entry.tokens, tokens)
            if length > best_length:
                best, best_length = entry, length
        return best, best_length

    def put(self, tokens: Sequence[int], state: bytes, *, pinned: bool = False) -> None:
        """Keep a state; the entries it supersedes are replaced, the oldest go when over budget
        (unpinned ones first)."""
        entry = CachedPrompt(tuple(tokens), state, pinned=pinned)
        if entry.size > self.budget_bytes or (not pinned and self.pinned(entry.tokens)):
            return
        self.entries = [e for e in self.entries if e.tokens != entry.tokens and (
            e.pinned or common_prefix(e.tokens, entry.tokens) < SUPERSEDED_SHARE * len(e.tokens))]
        self.entries.append(entry)
        self.entries.sort(key=lambda e: (e.pinned, e.last_used))
        while self.used_bytes > self.budget_bytes:
            self.entries.pop(0)

    def pinned(self, tokens: Sequence[int]) -> CachedPrompt | None:
        """The pinned entry holding exactly `tokens`, if any."""
        key = tuple(tokens)
        return next((e for e in self.entries if e.pinned and e.tokens == key), None)

    def touch(self, entry: CachedPrompt) -> None:
        entry.last_used = time.monotonic()


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    length = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        length += 1
    return length


def context_tokens(llm: Llama) -> tuple[int, ...]:
    """The tokens whose KV cells the context holds now."""
    return tuple(int(t) for t in llm.input_ids[: llm.n_tokens])


def save_state(llm: Llama) -> bytes:
    """The context's KV cells for its one sequence (no logits: the next prompt's last token is
    always evaluated again, which refreshes them)."""
    from llama_cpp import llama_cpp

    size = llama_cpp.llama_state_seq_get_size(llm.ctx, SEQUENCE)
    buffer = (ctypes.c_uint8 * size)()
    written = llama_cpp.llama_state_seq_get_data(llm.ctx, buffer, size, SEQUENCE)
    return bytes(memoryview(buffer)[:written])


def truncate(llm: Llama, n_tokens: int) -> None:
    """Drop the context's cells after its first `n_tokens` (so that a saved state holds only those)."""
    from llama_cpp import llama_cpp

    llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(llm.ctx), SEQUENCE, n_tokens, -1)
    llm.n_tokens = min(llm.n_tokens, n_tokens)


def load_state(llm: Llama, entry: CachedPrompt) -> bool:
    """Put a saved state back into the context; False (context emptied) when llama.cpp refuses."""
    from llama_cpp import llama_cpp

    buffer = (ctypes.c_uint8 * len(entry.state)).from_buffer_copy(entry.state)
    llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(llm.ctx), SEQUENCE, -1, -1)
    if llama_cpp.llama_state_seq_set_data(llm.ctx, buffer, len(entry.state), SEQUENCE) == 0:
        llm.n_tokens = 0
        return False
    llm.input_ids[: len(entry.tokens)] = entry.tokens
    llm.n_tokens = len(entry.tokens)
    llm._requires_eval = True  # the logits are not restored: generate() evaluates a token again
    return True
