"""How long the first "hello" takes: after a fresh install, after a restart, and on a warm lane.

    flock /tmp/lane-model.lock .venv/bin/python scripts/bench/first_answer.py \\
        --model models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
    ... --pythonpath /tmp/native-site     # the lane's processes import another llama_cpp build

Runs `lane up` on a new home (nothing saved: a fresh install) and times
* cold: the start until the shim is healthy (model load plus the stable prefixes' own evaluation,
  reported by the llm service's GET /v1/lane/warm), then "hello" in a new session;
* warm: "hello" again in another new session, on the lane that just served;
* restart: `lane up` again on the same home (the prefixes' KV state restored from disk), then "hello";
* at once: `lane up` on another new home, with "hello" sent the moment the shim accepts it, before
  it is healthy: the request waits for the warm-up (it needs the same prefix), so its wall time
  from the start is compared with the prefixes' own evaluation.
Each "hello" is the whole HTTP request through the agent (every model call of the turn); its
model calls, prompt tokens and cached prompt tokens come from the response's `usage`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
HELLO = "hello"


@dataclass
class Hello:
    wall_s: float
    model_calls: int
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int  # generation, not the prompt, is then most of what is left
    answer: str


@dataclass
class Case:
    name: str
    healthy_s: float | None = None  # from `lane up` until the shim's /health is 200
    prefixes: list[dict[str, Any]] = field(default_factory=list)  # what the llm warmed, in order
    hello: Hello | None = None
    hello_from_start_s: float | None = None  # only for "at once"


class Lane:
    """`lane up` on free ports, its output in `log`; stopped with SIGTERM (its children with it)."""

    def __init__(self, args: argparse.Namespace, home: Path, log: Path) -> None:
        self.port, self.llm_port = _free_port(), _free_port()
        self.url, self.llm_url = f"http://127.0.0.1:{self.port}", f"http://127.0.0.1:{self.llm_port}"
        env = {**os.environ}
        if args.max_tokens:
            env["LANE_MAX_TOKENS"] = str(args.max_tokens)
        if args.pythonpath:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [args.pythonpath, env.get("PYTHONPATH")]))
        command = [sys.executable, "-m", "stack.cli", "up", "--model", args.model, "--home", str(home),
                   "--port", str(self.port), "--llm-port", str(self.llm_port), "--threads", str(args.threads),
                   "--ctx", str(args.ctx), "--startup-timeout", "900"]
        self.started = time.monotonic()
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)

    def wait_healthy(self, timeout_s: float) -> float:
        deadline = self.started + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"lane up exited with {self.proc.returncode}")
            try:
                if httpx.get(f"{self.url}/health", timeout=5).status_code == 200:
                    return time.monotonic() - self.started
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"the lane was not healthy after {timeout_s:.0f} s")

    def wait_listening(self, timeout_s: float) -> None:
        deadline = self.started + timeout_s
        while time.monotonic() < deadline:
            try:
                httpx.get(f"{self.url}/health", timeout=5)
                return
            except httpx.HTTPError:
                time.sleep(0.05)
        raise RuntimeError("the shim never listened")

    def prefixes(self) -> list[dict[str, Any]]:
        return list(httpx.get(f"{self.llm_url}/v1/lane/warm", timeout=10).json()["prefixes"])

    def hello(self, timeout_s: float) -> Hello:
        started = time.monotonic()
        response = httpx.post(f"{self.url}/v1/chat/completions", timeout=timeout_s,
                              headers={"X-Session-Id": f"first-answer-{uuid.uuid4().hex[:8]}"},
                              json={"model": "fallback-lane", "messages": [{"role": "user", "content": HELLO}]})
        wall = time.monotonic() - started
        response.raise_for_status()
        body = response.json()
        usage = body["usage"]
        return Hello(round(wall, 2), usage["lane"]["model_calls"], usage["prompt_tokens"],
                     (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0),
                     usage["completion_tokens"], body["choices"][0]["message"]["content"] or "")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


def run(args: argparse.Namespace, work: Path) -> list[Case]:
    log = work / "lane.log"
    home = work / "home"
    cold, warm, restart, at_once = Case("cold"), Case("warm"), Case("restart"), Case("at once")
    lane = Lane(args, home, log)
    try:
        cold.healthy_s = round(lane.wait_healthy(args.timeout), 2)
        cold.prefixes = lane.prefixes()
        cold.hello = lane.hello(args.timeout)
        warm.hello = lane.hello(args.timeout)
    finally:
        lane.stop()
    lane = Lane(args, home, log)
    try:
        restart.healthy_s = round(lane.wait_healthy(args.timeout), 2)
        restart.prefixes = lane.prefixes()
        restart.hello = lane.hello(args.timeout)
    finally:
        lane.stop()
    if args.at_once:
        lane = Lane(args, work / "home-at-once", log)
        try:
            lane.wait_listening(args.timeout)
            at_once.hello = lane.hello(args.timeout)
            at_once.hello_from_start_s = round(time.monotonic() - lane.started, 2)
            at_once.prefixes = lane.prefixes()
            at_once.healthy_s = round(lane.wait_healthy(args.timeout), 2)
        finally:
            lane.stop()
    return [cold, at_once, restart, warm] if args.at_once else [cold, restart, warm]


def table(cases: list[Case]) -> str:
    lines = [f"{'case':<8} {'healthy s':>9} {'prefixes (tokens source s)':<40} {'hello s':>7} {'from start':>10}"
             f" {'calls':>5} {'prompt':>6} {'cached':>6} {'generated':>9}  answer"]
    for case in cases:
        prefixes = ", ".join(f"{p['prefix_tokens']} {p['source']} {p['seconds']:.1f}" for p in case.prefixes) or "-"
        hello = case.hello
        lines.append(
            f"{case.name:<8} {_num(case.healthy_s):>9} {prefixes:<40} {_num(hello and hello.wall_s):>7}"
            f" {_num(case.hello_from_start_s):>10} {hello.model_calls if hello else '-':>5}"
            f" {hello.prompt_tokens if hello else '-':>6} {hello.cached_tokens if hello else '-':>6}"
            f" {hello.completion_tokens if hello else '-':>9}"
            f"  {(hello.answer if hello else '')[:60]!r}")
    evaluated = sum(p["seconds"] for p in cases[0].prefixes if p["source"] == "evaluated")
    lines.append(f"the prefixes' own evaluation on the cold start: {evaluated:.1f} s "
                 "(seconds include waiting for the model)")
    return "\n".join(lines)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="GGUF file (the default model: models/qwen2.5-coder-...)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--ctx", type=int, default=16384)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds for each start and each request")
    parser.add_argument("--max-tokens", type=int, help="LANE_MAX_TOKENS (default: the lane's)")
    parser.add_argument("--pythonpath", help="prepended to the lane processes' PYTHONPATH (another llama_cpp build)")
    parser.add_argument("--no-at-once", dest="at_once", action="store_false",
                        help="skip the second cold start with hello sent before the lane is healthy")
    parser.add_argument("--json", type=Path, help="also write the cases as JSON here")
    parser.add_argument("--keep", action="store_true", help="keep the temporary homes and the log")
    args = parser.parse_args()
    args.model = str(Path(args.model).resolve())
    work = Path(tempfile.mkdtemp(prefix="first-answer-"))
    # Killed (a timeout, flock's holder) it still stops the lane it started: `finally` runs.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        cases = run(args, work)
    finally:
        if not args.keep:
            import shutil

            shutil.rmtree(work, ignore_errors=True)
    build = args.pythonpath or "the environment's llama_cpp"
    print(f"model {Path(args.model).name} · threads {args.threads} · ctx {args.ctx} · llama_cpp: {build}"
          + (f" · work {work}" if args.keep else ""))
    print(table(cases))
    if args.json:
        args.json.write_text(json.dumps([asdict(c) for c in cases], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
