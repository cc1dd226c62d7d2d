"""`lane llm --max-tokens 64` on the real SmolLM2-135M: the cap holds whatever the client asks."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from tests.integration.llm_server import RUNAWAY, lane_llm

pytestmark = pytest.mark.real_model

CAP = 64


@pytest.fixture(scope="module")
def llm_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with lane_llm(tmp_path_factory.mktemp("llm"), "--max-tokens", str(CAP)) as url:
        yield url


def chat(url: str, **body: object) -> dict:
    reply = httpx.post(f"{url}/v1/chat/completions", json={**RUNAWAY, **body}, timeout=60)
    assert reply.status_code == 200, reply.text
    return reply.json()


def test_a_request_for_100000_tokens_gets_at_most_the_cap(llm_url: str) -> None:
    reply = chat(llm_url, max_tokens=100_000)
    assert reply["usage"]["completion_tokens"] <= CAP
    assert reply["choices"][0]["finish_reason"] == "length"
    assert reply["choices"][0]["message"]["content"]


@pytest.mark.parametrize("asked", [None, 0, -5])
def test_missing_zero_or_negative_max_tokens_become_the_cap(llm_url: str, asked: int | None) -> None:
    body = {} if asked is None else {"max_tokens": asked}
    reply = chat(llm_url, **body)
    assert 0 < reply["usage"]["completion_tokens"] <= CAP
    assert reply["choices"][0]["finish_reason"] == "length"


def test_a_smaller_max_tokens_is_honoured(llm_url: str) -> None:
    reply = chat(llm_url, max_tokens=5)
    assert reply["usage"]["completion_tokens"] == 5
    assert reply["choices"][0]["finish_reason"] == "length"


def test_stream_is_capped_and_ends_with_a_usage_chunk(llm_url: str) -> None:
    body = {**RUNAWAY, "max_tokens": 100_000, "stream": True,
            "stream_options": {"include_usage": True}}
    events = []
    with httpx.stream("POST", f"{llm_url}/v1/chat/completions", json=body, timeout=60) as reply:
        assert reply.status_code == 200
        for line in reply.iter_lines():
            if line.startswith("data: "):
                events.append(line[len("data: "):])
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finishes[-1] == "length" and all(f is None for f in finishes[:-1])
    usage = chunks[-1]["usage"]
    assert chunks[-1]["choices"] == []
    assert 0 < usage["completion_tokens"] <= CAP
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert text.strip()


def test_stream_without_include_usage_has_no_usage_chunk(llm_url: str) -> None:
    body = {**RUNAWAY, "max_tokens": 3, "stream": True}
    with httpx.stream("POST", f"{llm_url}/v1/chat/completions", json=body, timeout=60) as reply:
        payloads = [line[6:] for line in reply.iter_lines() if line.startswith("data: ")]
    assert payloads[-1] == "[DONE]"
    assert all("usage" not in json.loads(p) for p in payloads[:-1])


def test_health_and_models_describe_the_loaded_model(llm_url: str) -> None:
    assert httpx.get(f"{llm_url}/health").json()["status"] == "ok"
    model = httpx.get(f"{llm_url}/v1/models").json()["data"][0]
    assert model["id"].startswith("SmolLM2-135M")
    assert model["meta"]["max_tokens"] == CAP


@pytest.mark.parametrize(
    "body, needle",
    [
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "wizard", "content": "x"}]}, "role"),
        ({**RUNAWAY, "max_tokens": "many"}, "max_tokens"),
        ({**RUNAWAY, "stream": "yes"}, "stream"),
        ({**RUNAWAY, "temperature": 9}, "temperature"),
    ],
)
def test_bad_requests_get_a_400_with_an_openai_error(llm_url: str, body: dict, needle: str) -> None:
    reply = httpx.post(f"{llm_url}/v1/chat/completions", json=body, timeout=10)
    assert reply.status_code == 400
    assert needle in reply.json()["error"]["message"]


def test_a_body_that_is_not_json_gets_a_400(llm_url: str) -> None:
    reply = httpx.post(f"{llm_url}/v1/chat/completions", content=b"{not json", timeout=10)
    assert reply.status_code == 400
    assert reply.json()["error"]["code"] == "invalid_json"
