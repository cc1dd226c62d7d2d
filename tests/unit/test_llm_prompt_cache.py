"""The prompt cache's bookkeeping: longest-prefix lookup, superseded entries, the RAM budget."""

from __future__ import annotations

from stack.llm.prompt_cache import PromptCache, common_prefix

STATE = b"x" * 1000  # an entry's size is its state plus 4 bytes per token


def test_best_is_the_entry_with_the_longest_common_prefix() -> None:
    cache = PromptCache(budget_bytes=10_000)
    cache.put([1, 2, 3, 4], STATE)
    cache.put([1, 2, 9, 9, 9], STATE)
    entry, length = cache.best([1, 2, 9, 9, 5])
    assert entry is not None and entry.tokens == (1, 2, 9, 9, 9) and length == 4
    assert cache.best([7, 7]) == (None, 0)


def test_a_grown_conversation_replaces_its_older_state() -> None:
    cache = PromptCache(budget_bytes=100_000)
    opening = list(range(100))
    cache.put(opening + [500], STATE)  # ...its reply as generated
    cache.put(opening + [600, 601, 602], STATE)  # the reply re-rendered, a tool result, the next reply
    assert [len(e.tokens) for e in cache.entries] == [103]
    other = list(range(50)) + [900] * 50  # shares half of the opening: another conversation
    cache.put(other, STATE)
    assert len(cache.entries) == 2


def test_the_budget_drops_the_least_recently_used_entries_first() -> None:
    cache = PromptCache(budget_bytes=3 * (len(STATE) + 4 * 3))
    for first in (10, 20, 30):
        cache.put([first, 1, 1], STATE)
    oldest, _ = cache.best([10, 1, 1])
    assert oldest is not None
    cache.touch(oldest)  # used again: now the 20 entry is the oldest
    cache.put([40, 1, 1], STATE)
    assert sorted(e.tokens[0] for e in cache.entries) == [10, 30, 40]
    assert cache.used_bytes <= cache.budget_bytes


def test_a_state_larger_than_the_budget_is_not_kept_and_zero_turns_the_cache_off() -> None:
    cache = PromptCache(budget_bytes=500)
    cache.put([1, 2, 3], STATE)
    assert cache.entries == []
    off = PromptCache(budget_bytes=0)
    off.put([1], b"")
    assert off.entries == []


def test_common_prefix() -> None:
    assert common_prefix([1, 2, 3], [1, 2, 4, 5]) == 2
    assert common_prefix([], [1]) == 0
    assert common_prefix((1, 2), [1, 2]) == 2
