"""OpenAI's `logprobs` and the hidden state (/v1/embeddings) from `lane llm` on the real
SmolLM2-135M, and the first token's alternatives as the lane's own client reads them from a
stream."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator

import httpx
import pytest

from stack.agent.llm_client import LlmClient
from tests.integration.llm_server import lane_llm

pytestmark = pytest.mark.real_model

SEA = [{"role": "user", "content": "Tell me about the sea."}]


@pytest.fixture(scope="module")
def llm_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with lane_llm(tmp_path_factory.mktemp("llm")) as url:
        yield url


def chat(url: str, **body: object) -> httpx.Response:
    return httpx.post(f"{url}/v1/chat/completions",
                      json={"messages": SEA, "temperature": 0, "max_tokens": 6, **body}, timeout=60)


def test_each_generated_token_comes_with_its_likeliest_alternatives(llm_url: str) -> None:
    reply = chat(llm_url, logprobs=True, top_logprobs=3).json()
    choice = reply["choices"][0]
    tokens = choice["logprobs"]["content"]
    assert len(tokens) == reply["usage"]["completion_tokens"] == 6
    assert "".join(t["token"] for t in tokens) == choice["message"]["content"]
    for token in tokens:
        rivals = [r["logprob"] for r in token["top_logprobs"]]
        assert len(rivals) == 3 and rivals == sorted(rivals, reverse=True)
        assert all(lp <= 0 for lp in rivals) and sum(math.exp(lp) for lp in rivals) <= 1 + 1e-6
        # greedy decoding takes the likeliest token
        assert token["top_logprobs"][0]["token"] == token["token"]
        assert token["logprob"] == pytest.approx(rivals[0])
        assert bytes(token["bytes"]).decode("utf-8", errors="replace") == token["token"]


def test_no_logprobs_unless_asked_and_a_bad_count_is_refused(llm_url: str) -> None:
    assert "logprobs" not in chat(llm_url).json()["choices"][0]
    refused = chat(llm_url, logprobs=True, top_logprobs=50)
    assert refused.status_code == 400 and "top_logprobs" in refused.text


def test_the_client_reads_the_first_token_s_alternatives_from_a_stream(llm_url: str) -> None:
    question = [{"role": "system", "content": "Answer yes or no."},
                {"role": "user", "content": "Can a weather tool tell tomorrow's forecast for Lyon?"}]

    async def ask():
        llm = LlmClient(f"{llm_url}/v1", model=None, timeout_s=60)
        try:
            return await llm.chat(question, [], max_tokens=1, temperature=0.0, top_logprobs=10)
        finally:
            await llm.aclose()

    reply = asyncio.run(ask())
    assert reply.completion_tokens == 1 and len(reply.logprobs) == 1
    alternatives = reply.logprobs[0]
    assert 1 < len(alternatives) <= 11 and reply.content in alternatives
    assert all(logprob <= 0 for logprob in alternatives.values())


def test_the_hidden_state_a_probe_reads_comes_from_the_embeddings_route(llm_url: str) -> None:
    """`lane llm` declares `hidden_state` and gives the last token's state on /v1/embeddings; two
    texts give two states, one text the same state twice; a bad body is a 400, not a crash."""

    async def ask():
        llm = LlmClient(f"{llm_url}/v1", model=None, timeout_s=60)
        try:
            return (await llm.capabilities(), await llm.embedding("I saved the note. Was anything done? Answer:"),
                    await llm.embedding("The sea is blue. Was anything done? Answer:"),
                    await llm.embedding("I saved the note. Was anything done? Answer:"))
        finally:
            await llm.aclose()

    capabilities, (saved, tokens), (sea, _), (again, _) = asyncio.run(ask())
    assert capabilities.hidden_state and capabilities.paths()["reading"] == "probe"
    assert len(saved) == len(sea) == 576 and tokens > 5  # SmolLM2-135M's width
    assert saved != sea and max(abs(a - b) for a, b in zip(saved, again, strict=True)) < 1e-3
    bad = httpx.post(f"{llm_url}/v1/embeddings", json={"input": ["a", "b"]}, timeout=30)
    assert bad.status_code == 400 and "input" in bad.json()["error"]["message"]
