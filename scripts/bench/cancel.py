#!/usr/bin/env python3
"""How fast does the llm service get free after a client walks away?

For stream and non-stream: start a runaway generation (a reply that `response_format` holds to a
JSON array of 20,000 integers, so it cannot end early on any build), abort the client after
--abort-after seconds, then at once send a one-token probe. "free after" is the probe's latency
minus its baseline: its latency right after the same runaway prompt finished normally (same cache
state), i.e. the time the server still spent on the abandoned generation. Target: <= 1 s.

    .venv/bin/python scripts/bench/cancel.py                 # starts `lane llm` (SmolLM2) itself
    .venv/bin/python scripts/bench/cancel.py --url http://127.0.0.1:8081 --runs 5
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from stack.llm.model import embedded_model_path  # noqa: E402
from tests.integration.llm_server import RUNAWAY  # noqa: E402

PROBE = {"messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 1, "temperature": 0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="a running llm service (default: start `lane llm` on a free port)")
    parser.add_argument("--model", help="GGUF for the started server (default: embedded SmolLM2-135M)")
    parser.add_argument("--threads", type=int, help="llama.cpp threads of the started server (default: all cores)")
    parser.add_argument("--runs", type=int, default=3, help="aborts per mode (default 3)")
    parser.add_argument("--abort-after", type=float, default=1.5, help="seconds before the client leaves")
    args = parser.parse_args()

    server = None
    url = args.url
    if url is None:
        url, server = start_server(args.model, args.threads)
    try:
        idle = statistics.median(baseline_seconds(url) for _ in range(3))
        print(f"server {url}; probe after a finished runaway prompt: {idle:.3f} s")
        for mode in ("non-stream", "stream"):
            free = []
            for _ in range(args.runs):
                abort_runaway(url, stream=mode == "stream", after_s=args.abort_after)
                free.append(max(0.0, probe_seconds(url) - idle))
            print(
                f"{mode:>10}: free after abort  median {statistics.median(free):.3f} s  "
                f"max {max(free):.3f} s  (runs: {', '.join(f'{f:.3f}' for f in free)})"
            )
    finally:
        if server is not None:
            server.send_signal(signal.SIGTERM)
            server.wait(15)
    return 0


def start_server(model: str | None, threads: int | None) -> tuple[str, subprocess.Popen[bytes]]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [sys.executable, "-m", "stack.cli", "llm", "--port", str(port)]
    # SmolLM2 unless told otherwise: without --model the lane would serve its default model.
    command += ["--model", model or str(embedded_model_path())] + (["--threads", str(threads)] if threads else [])
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return url, proc
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"lane llm did not become healthy on {url}")


def abort_runaway(url: str, *, stream: bool, after_s: float) -> None:
    if not stream:
        try:
            httpx.post(f"{url}/v1/chat/completions", json=RUNAWAY, timeout=after_s)
        except httpx.ReadTimeout:
            return
        raise SystemExit("the runaway request finished before the abort; lower --abort-after")
    started = time.monotonic()
    with httpx.stream("POST", f"{url}/v1/chat/completions", json={**RUNAWAY, "stream": True}, timeout=60) as reply:
        for _line in reply.iter_lines():
            if time.monotonic() - started >= after_s:
                return
    raise SystemExit("the runaway stream ended before the abort; lower --abort-after")


def baseline_seconds(url: str) -> float:
    httpx.post(f"{url}/v1/chat/completions", json={**RUNAWAY, "max_tokens": 1}, timeout=300).raise_for_status()
    return probe_seconds(url)


def probe_seconds(url: str) -> float:
    started = time.monotonic()
    reply = httpx.post(f"{url}/v1/chat/completions", json=PROBE, timeout=300)
    reply.raise_for_status()
    return time.monotonic() - started


if __name__ == "__main__":
    sys.exit(main())
