"""A client that leaves frees the real llama.cpp server within about a second, streaming or not,
and concurrent requests queue instead of killing each other (SmolLM2-135M, default cap 4096)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.llm_server import RUNAWAY, SMOLLM2, TEST_THREADS, free_port, start_lane, stop, wait_healthy

pytestmark = pytest.mark.real_model

SHORT = {"messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 8}
ABORT_AFTER_S = 1.5
# The next request after a cancel took a median 0.37-0.49 s here (three runs of each case, two
# shared cores, 2026-11-26); 10x that, still far below a runaway that fills the cap (tens of s).
FREE_WITHIN_S = 6.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    port = free_port()
    log = tmp_path_factory.mktemp("llm") / "llm.log"
    proc = start_lane(["llm", "--model", SMOLLM2, "--port", str(port), "--ctx", "8192", "--threads", TEST_THREADS], log)
    try:
        wait_healthy(f"http://127.0.0.1:{port}/health", proc, log)
        yield f"http://127.0.0.1:{port}", log
    finally:
        stop(proc)


def next_request_seconds(url: str) -> float:
    started = time.monotonic()
    reply = httpx.post(f"{url}/v1/chat/completions", json=SHORT, timeout=FREE_WITHIN_S)
    assert reply.status_code == 200, reply.text
    assert reply.json()["usage"]["completion_tokens"] >= 1
    return time.monotonic() - started


def cancelled_lines(log: Path) -> list[str]:
    return [line for line in log.read_text().splitlines() if "cancelled=True" in line]


def wait_for_new_cancel_line(log: Path, before: int) -> str:
    deadline = time.monotonic() + FREE_WITHIN_S
    while time.monotonic() < deadline:
        lines = cancelled_lines(log)
        if len(lines) > before:
            return lines[-1]
        time.sleep(0.05)
    raise AssertionError(f"no cancelled request was logged:\n{log.read_text()[-2000:]}")


def test_a_non_stream_client_that_times_out_frees_the_server(server: tuple[str, Path]) -> None:
    url, log = server
    before = len(cancelled_lines(log))
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{url}/v1/chat/completions", json=RUNAWAY, timeout=ABORT_AFTER_S)
    assert next_request_seconds(url) < FREE_WITHIN_S
    line = wait_for_new_cancel_line(log, before)
    assert "stream=False" in line


def test_a_stream_client_that_disconnects_frees_the_server(server: tuple[str, Path]) -> None:
    url, log = server
    before = len(cancelled_lines(log))
    started = time.monotonic()
    pieces = 0
    with httpx.stream("POST", f"{url}/v1/chat/completions", json={**RUNAWAY, "stream": True}, timeout=30) as reply:
        assert reply.status_code == 200
        for line in reply.iter_lines():
            pieces += line.startswith("data: ")
            if time.monotonic() - started > ABORT_AFTER_S:
                break
    assert pieces > 1
    assert next_request_seconds(url) < FREE_WITHIN_S
    line = wait_for_new_cancel_line(log, before)
    assert "stream=True" in line


def test_concurrent_requests_queue_and_all_complete(server: tuple[str, Path]) -> None:
    url, _log = server
    replies: list[httpx.Response] = []

    def ask(i: int) -> None:
        body = {"messages": [{"role": "user", "content": f"Count to {i + 3}."}], "max_tokens": 12}
        replies.append(httpx.post(f"{url}/v1/chat/completions", json=body, timeout=60))

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [r.status_code for r in replies] == [200, 200, 200]
    assert all(1 <= r.json()["usage"]["completion_tokens"] <= 12 for r in replies)


def test_a_client_that_leaves_during_a_long_prompt_frees_the_server(server: tuple[str, Path]) -> None:
    """About 6,000 prompt tokens take tens of seconds to evaluate here; the abort callback stops
    llama.cpp mid-prompt instead of finishing it for nobody."""
    url, log = server
    before = len(cancelled_lines(log))
    long_prompt = {"messages": [{"role": "user", "content": "alpha beta gamma delta " * 1500}], "max_tokens": 4}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{url}/v1/chat/completions", json=long_prompt, timeout=ABORT_AFTER_S)
    assert next_request_seconds(url) < FREE_WITHIN_S
    line = wait_for_new_cancel_line(log, before)
    assert "completion=0" in line
