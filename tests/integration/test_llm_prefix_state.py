"""The warmed prefix's KV state on disk, through `lane llm` on the real SmolLM2-135M: written when a
prefix is first evaluated, keyed by model and tokens, restored by a restart instead of evaluated,
and never restored for another prefix or another model file. Plumbing only: sources, files and
`cached_tokens`, and a restored state answering as the evaluated one did (greedy decoding)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.llm_server import SMOLLM2, TEST_THREADS, free_port, start_lane, stop, wait_healthy

pytestmark = pytest.mark.real_model

SYSTEM = "You are a terse assistant. " + " ".join(f"Rule {i}: answer in at most {i + 3} words." for i in range(30))
TOOLS = [{"type": "function", "function": {
    "name": "memory", "description": "Save a note for later sessions.",
    "parameters": {"type": "object", "properties": {"note": {"type": "string"}}, "required": ["note"]}}}]


@contextmanager
def serve(folder: Path, state: Path, model: str | Path = SMOLLM2, cache_mb: int = 64) -> Iterator[str]:
    port = free_port()
    log = folder / f"llm-{port}.log"
    proc = start_lane(["llm", "--model", str(model), "--port", str(port), "--max-tokens", "8", "--ctx", "2048",
                       "--threads", TEST_THREADS, "--cache-mb", str(cache_mb), "--state-dir", str(state)], log)
    try:
        wait_healthy(f"http://127.0.0.1:{port}/health", proc, log)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)


def warm(url: str, system: str = SYSTEM) -> dict[str, Any]:
    reply = httpx.post(f"{url}/v1/lane/warm", timeout=120,
                       json={"messages": [{"role": "system", "content": system}], "tools": TOOLS})
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


def ask(url: str, question: str) -> tuple[str, int]:
    """The answer and its cached prompt tokens, for a conversation opening with SYSTEM and TOOLS."""
    reply = httpx.post(f"{url}/v1/chat/completions", timeout=120, json={
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}],
        "tools": TOOLS, "temperature": 0, "max_tokens": 8})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    return body["choices"][0]["message"]["content"], body["usage"]["prompt_tokens_details"]["cached_tokens"]


def test_a_restart_restores_the_saved_prefix_instead_of_evaluating_it(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with serve(tmp_path, state) as url:
        first = warm(url)
        assert first["source"] == "evaluated" and first["saved"]
        assert first["prefix_tokens"] > 300
        again = warm(url)
        assert (again["source"], again["saved"], again["prefix_tokens"]) == ("context", False, first["prefix_tokens"])
        answer, cached = ask(url, "hello")
        assert cached >= first["prefix_tokens"]
        assert httpx.get(f"{url}/v1/lane/warm").json()["prefixes"] == [first, again]
    saved = list(state.glob("*.kv"))
    assert len(saved) == 1
    with serve(tmp_path, state) as url:  # the llm restarted alone: it restores what it saved at start
        restarted_answer, cached = ask(url, "hello")
        assert cached >= first["prefix_tokens"]
        assert restarted_answer == answer, "a restored prefix must answer as the evaluated one did"
        rewarmed = warm(url)
        assert (rewarmed["source"], rewarmed["saved"]) == ("context", False)  # the ask left it there
    with serve(tmp_path, state, cache_mb=0) as url:  # no RAM cache: warming reads the file itself
        restored = warm(url)
        assert (restored["source"], restored["saved"]) == ("disk", False)
        assert restored["prefix_tokens"] == first["prefix_tokens"]
        assert ask(url, "hello") == (answer, cached)
    assert list(state.glob("*.kv")) == saved


def test_another_prefix_or_model_file_is_evaluated_not_restored(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with serve(tmp_path, state) as url:
        assert warm(url)["source"] == "evaluated"
        changed = warm(url, SYSTEM + " Never use tools.")
        assert changed["source"] == "evaluated" and changed["saved"]
    assert len(list(state.glob("*.kv"))) == 2
    other_model = tmp_path / "same-weights-another-file.gguf"
    shutil.copyfile(SMOLLM2, other_model)
    with serve(tmp_path, state, other_model) as url:
        other = warm(url)
        assert other["source"] == "evaluated" and other["saved"]
    assert len(list(state.glob("*.kv"))) == 3


def test_a_prefix_longer_than_the_window_is_refused(tmp_path: Path) -> None:
    with serve(tmp_path, tmp_path / "state") as url:
        reply = httpx.post(f"{url}/v1/lane/warm", timeout=120,
                           json={"messages": [{"role": "system", "content": "word " * 3000}]})
        assert reply.status_code == 400
        assert reply.json()["error"]["code"] == "context_length_exceeded"
    assert not list((tmp_path / "state").glob("*.kv"))


# An agent's own system prompt, long enough (> 1,024 tokens) that the llm saves its opening unasked.
AGENT_SYSTEM = "You are a coding agent. " + " ".join(
    f"Rule {i}: when the user asks about file number {i}, read it before answering." for i in range(70))


def ask_agent(url: str, question: str) -> dict[str, Any]:
    reply = httpx.post(f"{url}/v1/chat/completions", timeout=180, json={
        "messages": [{"role": "system", "content": AGENT_SYSTEM}, {"role": "user", "content": question}],
        "tools": TOOLS, "temperature": 0, "max_tokens": 8})
    assert reply.status_code == 200, reply.text
    return dict(reply.json()["usage"])


def test_a_clients_long_opening_is_saved_unasked_and_restored_after_a_restart(tmp_path: Path) -> None:
    """An agent never calls the lane's warm-up route: the llm keeps its opening (system prompt and
    tools) itself once it has seen it twice, so its first request after a restart evaluates only
    its new messages."""
    state = tmp_path / "state"
    with serve(tmp_path, state) as url:
        first = ask_agent(url, "hello")
        assert first["prompt_tokens"] > 1100
        assert list(state.glob("*.kv")) == []  # seen once: it may be a one-off
        ask_agent(url, "and then?")
    saved = list(state.glob("*.kv"))
    assert len(saved) == 1
    with serve(tmp_path, state, cache_mb=0) as url:  # restarted, no RAM cache: the file itself
        again = ask_agent(url, "what does rule 3 say?")
        evaluated = again["prompt_tokens"] - again["prompt_tokens_details"]["cached_tokens"]
        assert again["prompt_tokens_details"]["cached_tokens"] > 1000
        assert evaluated < 40, again  # the new user message and the template's tail, not the opening
    assert list(state.glob("*.kv")) == saved  # not written again


def test_a_short_opening_is_not_saved(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with serve(tmp_path, state) as url:
        for question in ("hello", "hello again"):
            reply = httpx.post(f"{url}/v1/chat/completions", timeout=120, json={
                "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": question}],
                "temperature": 0, "max_tokens": 4})
            assert reply.status_code == 200, reply.text
    assert list(state.glob("*.kv")) == []


def test_a_system_message_written_anew_each_time_is_not_saved_but_the_stable_one_before_it_is(tmp_path: Path) -> None:
    """The lane's own answer question: a long stable instruction, then the turn's facts (new every
    turn) as a second system message. The stable part is kept; each turn's facts are not."""
    state = tmp_path / "state"
    with serve(tmp_path, state) as url:
        for turn in range(3):
            reply = httpx.post(f"{url}/v1/chat/completions", timeout=180, json={
                "messages": [{"role": "system", "content": AGENT_SYSTEM},
                             {"role": "system", "content": f"Facts of turn {turn}: " + "it is late. " * 40},
                             {"role": "user", "content": "hello"}],
                "temperature": 0, "max_tokens": 4})
            assert reply.status_code == 200, reply.text
    assert len(list(state.glob("*.kv"))) == 1
