"""Warming a stable prefix: the part of a prompt that every conversation of a kind begins with.

The shim's first model call of any session begins with the lane's system prompt and its tools
block, rendered by the model's own chat template. `stable_prefix` finds those tokens without knowing the template:
it renders the opening messages followed by two different probe messages (a user one and a system
one, the two kinds that can come next) and keeps what both renderings share. `hold` then puts
that prefix's KV cells into the context by the cheapest route: the context already has them, the
RAM cache has them, the disk has them (prefix_store.py), or, failing all three, evaluating them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable, Literal

from stack.llm.prompt_cache import (
    CachedPrompt,
    PromptCache,
    common_prefix,
    context_tokens,
    load_state,
    save_state,
    truncate,
)
from stack.llm.protocol import ChatRequest

if TYPE_CHECKING:
    from llama_cpp import Llama

    from stack.llm.prefix_store import PrefixStore

Source = Literal["context", "memory", "disk", "evaluated"]
PROBES = ({"role": "user", "content": "probe a"}, {"role": "system", "content": "probe b"})


@dataclass(frozen=True)
class Warmed:
    """What one warm-up did: the prefix's length, where its KV cells came from, how long it took
    (waiting for the model included), and whether its state was written to disk now."""

    prefix_tokens: int
    source: Source
    seconds: float
    saved: bool = False


def stable_prefix(request: ChatRequest, tokenize: Callable[[ChatRequest], list[int]]) -> list[int]:
    """The tokens every prompt that opens with `request.messages` (and its tools) starts with."""
    first, second = (tokenize(replace(request, messages=[*request.messages, probe])) for probe in PROBES)
    return first[: common_prefix(first, second)]


def hold(llm: Llama, prefix: list[int], cache: PromptCache, store: PrefixStore | None) -> tuple[Source, bytes | None]:
    """Make the context hold `prefix` (and nothing after it when its state must be saved); the
    source of its cells, and its state when it is not yet pinned in RAM and on disk."""
    needs_state = cache.pinned(prefix) is None or (store is not None and not store.has(prefix))
    size = len(prefix)
    if common_prefix(context_tokens(llm), prefix) == size:
        if not needs_state:
            return "context", None
        truncate(llm, size)
        return "context", save_state(llm)
    entry, shared = cache.best(prefix)
    if entry is not None and shared == size and load_state(llm, entry):
        truncate(llm, size)
        return "memory", save_state(llm) if needs_state else None
    saved = store.load(prefix) if store is not None else None
    if saved is not None and load_state(llm, CachedPrompt(tuple(prefix), saved)):
        return "disk", saved
    reused = common_prefix(context_tokens(llm), prefix)
    llm.n_tokens = reused  # eval() drops the cells after n_tokens first
    llm.eval(prefix[reused:])
    return "evaluated", save_state(llm)
