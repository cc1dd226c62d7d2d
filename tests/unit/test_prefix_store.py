"""The prefix states on disk are found only by their own model and exact tokens, a file that does
not hold what its name promises is refused, and only the newest few are kept. The RAM cache never
lets a conversation supersede, nor evicts first, a pinned (warmed) prefix."""

from __future__ import annotations

import os
from pathlib import Path

from stack.llm.prefix_store import KEEP, PrefixStore, model_key
from stack.llm.prompt_cache import PromptCache


def test_a_state_is_found_by_its_model_and_exact_tokens(tmp_path: Path) -> None:
    store = PrefixStore(tmp_path, "model-a")
    store.save([1, 2, 3], b"state-123")
    assert store.load([1, 2, 3]) == b"state-123"
    assert store.load([1, 2]) is None
    assert store.load([1, 2, 3, 4]) is None
    assert PrefixStore(tmp_path, "model-b").load([1, 2, 3]) is None


def test_the_saved_states_of_a_model_are_listed_newest_first(tmp_path: Path) -> None:
    store = PrefixStore(tmp_path, "model-a")
    os.utime(store.save([1, 2], b"old"), (1000, 1000))
    store.save([3, 4, 5], b"new")
    PrefixStore(tmp_path, "model-b").save([6], b"other model")
    os.replace(store.save([7], b"renamed"), store.path_for([8]))  # its name promises other tokens
    assert store.saved() == [((3, 4, 5), b"new"), ((1, 2), b"old")]


def test_a_file_that_does_not_hold_its_prefix_is_refused_and_removed(tmp_path: Path) -> None:
    store = PrefixStore(tmp_path, "model-a")
    path = store.save([1, 2, 3], b"state")
    other = PrefixStore(tmp_path, "model-a").path_for([7, 8, 9])
    os.replace(path, other)  # a name promising [7, 8, 9] over a file holding [1, 2, 3]
    assert store.load([7, 8, 9]) is None
    assert not other.exists()
    store.path_for([4]).write_bytes(b"not a state")
    assert store.load([4]) is None


def test_the_model_key_follows_the_file_and_the_runtime(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"weights")
    key = model_key(model, "llama-cpp-python 1")
    assert key == model_key(model, "llama-cpp-python 1")
    assert key != model_key(model, "llama-cpp-python 2")
    model.write_bytes(b"other weights")
    assert key != model_key(model, "llama-cpp-python 1")


def test_only_the_newest_states_are_kept(tmp_path: Path) -> None:
    store = PrefixStore(tmp_path, "model-a")
    for i in range(KEEP + 2):
        path = store.save([i], b"state")
        os.utime(path, (1000 + i, 1000 + i))
    store.save([99], b"state")
    assert len(list(tmp_path.glob("*.kv"))) == KEEP
    assert store.has([99]) and not store.has([0])


def test_a_pinned_prefix_outlives_the_conversations_that_grow_from_it() -> None:
    cache = PromptCache(budget_bytes=10_000)
    prefix = list(range(100))
    cache.put(prefix, b"p" * 1000, pinned=True)
    cache.put(prefix + [1000], b"c" * 1000)  # shares over 90 % of the prefix: would supersede it
    cache.put(prefix, b"x", pinned=False)  # an unpinned copy never replaces the pin
    assert cache.pinned(prefix) is not None and cache.pinned(prefix).state == b"p" * 1000
    for i in range(12):  # other conversations fill the budget: unpinned ones go first
        cache.put([5000 + i] * 50, b"o" * 1000)
    assert cache.pinned(prefix) is not None
