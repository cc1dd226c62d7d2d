"""The prompt cache on the real SmolLM2-135M through `lane llm`: two conversations that take turns
both stay warm, the answers are the ones an uncached model gives, and `cached_tokens` says so."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.integration.llm_server import SMOLLM2, TEST_THREADS, free_port, start_lane, stop, wait_healthy

pytestmark = pytest.mark.real_model


def serve(tmp_path_factory: pytest.TempPathFactory, cache_mb: int) -> Iterator[str]:
    port = free_port()
    folder = tmp_path_factory.mktemp("llm")
    # its own state folder: a conversation's opening seen twice is saved there, and one saved by an
    # earlier run would make the first request of this one look cached
    proc = start_lane(["llm", "--model", SMOLLM2, "--port", str(port), "--max-tokens", "12", "--ctx", "2048",
                       "--threads", TEST_THREADS, "--cache-mb", str(cache_mb), "--state-dir", str(folder / "state")],
                      folder / "llm.log")
    try:
        wait_healthy(f"http://127.0.0.1:{port}/health", proc, folder / "llm.log")
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)


@pytest.fixture(scope="module")
def cached_llm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from serve(tmp_path_factory, cache_mb=256)


@pytest.fixture(scope="module")
def uncached_llm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from serve(tmp_path_factory, cache_mb=0)


def conversation(name: str, turns: int) -> list[dict[str, str]]:
    facts = " ".join(f"{name} fact {i} is {i * 7}." for i in range(40))
    messages = [{"role": "system", "content": f"You are {name}'s assistant. {facts}"}]
    for turn in range(turns):
        messages += [{"role": "user", "content": f"Question {turn}: what is fact {turn}?"},
                     {"role": "assistant", "content": f"Fact {turn} is {turn * 7}."}]
    return messages + [{"role": "user", "content": "And the next one?"}]


def ask(url: str, messages: list[dict[str, str]]) -> tuple[str, int, int]:
    reply = httpx.post(f"{url}/v1/chat/completions", timeout=120,
                       json={"messages": messages, "temperature": 0, "max_tokens": 12})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    usage = body["usage"]
    return (body["choices"][0]["message"]["content"], usage["prompt_tokens"],
            usage["prompt_tokens_details"]["cached_tokens"])


def test_two_alternating_conversations_both_stay_cached(cached_llm: str, uncached_llm: str) -> None:
    answers = {}
    for turns in (1, 2):
        for name in ("Ada", "Brian"):  # each request evicts the other's prefix from the context
            answer, prompt, cached = ask(cached_llm, conversation(name, turns))
            answers[name, turns] = answer
            if turns == 1:
                assert cached < prompt // 2, "a cold conversation cannot be mostly cached"
            else:
                # everything up to the new exchange comes from the saved state
                assert cached > prompt * 0.7, (name, prompt, cached)
    for (name, turns), answer in answers.items():
        fresh, _, cached = ask(uncached_llm, conversation(name, turns))
        assert answer == fresh, "a restored state must give the same greedy answer as a fresh one"


def test_the_cache_off_still_reuses_the_live_prefix(uncached_llm: str) -> None:
    ask(uncached_llm, conversation("Cleo", 1))
    _, prompt, cached = ask(uncached_llm, conversation("Cleo", 2))
    assert prompt * 0.7 < cached < prompt
