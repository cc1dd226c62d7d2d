#!/usr/bin/env python3
"""The shim's own time per turn, excluding the model.

N turns go through real HTTP: a client process -> the shim (uvicorn, in this process) -> the agent
-> a scripted model that answers at once (its own process, as a real llm service would be). Each
request's wall time, taken by the client, minus the time the agent spent inside LlmClient.chat
(the model call with its HTTP and stream parsing) is the shim's time: request parsing, session
lock, store writes, system prompt and history, tool surface, the tool itself (a `todo` read in
tool turns) and the response. Three processes, so no one's work waits on another's interpreter lock.

    .venv/bin/python scripts/bench/shim_overhead.py [--turns 200] [--kind text|tool|both] [--json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import httpx  # noqa: E402

from stack.agent.llm_client import LlmClient, ModelReply  # noqa: E402
from stack.config import Settings  # noqa: E402
from stack.tools.registry import build_registry  # noqa: E402
from tests.fakes.scripted_model import Reply, ScriptedModel, call, text  # noqa: E402
from tests.integration.shim_server import ShimServer  # noqa: E402

PROMPTS = {"text": "say hello", "tool": "please use a tool to read my todo list"}


class TimedLlm(LlmClient):
    """The real client, keeping the duration of every model call in order."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.durations: list[float] = []

    async def chat(self, *args: Any, **kwargs: Any) -> ModelReply:
        started = time.perf_counter()
        try:
            return await super().chat(*args, **kwargs)
        finally:
            self.durations.append(time.perf_counter() - started)


def zero_latency_model(body: dict[str, Any]) -> Reply:
    """A tool turn calls `todo` first and answers once the tool result is in the history."""
    last = body["messages"][-1]
    if last["role"] == "user" and "use a tool" in (last.get("content") or ""):
        return call("todo", {"action": "read"})
    return text("Done: nothing to do.")


def serve_model(ports: Any, stop: Any) -> None:
    with ScriptedModel(zero_latency_model) as model:
        ports.put(model.port)
        stop.wait()


def drive(url: str, kind: str, count: int, results: Any) -> None:
    """The client: `count` sequential turns; puts [(wall_s, model_calls)] on `results`."""
    measured = []
    with httpx.Client(base_url=url, timeout=30) as client:
        for index in range(count):
            started = time.perf_counter()
            response = client.post("/v1/chat/completions",
                                   json={"messages": [{"role": "user", "content": PROMPTS[kind]}]},
                                   headers={"X-Session-Id": f"bench-{kind}-{index % 20}"})
            wall = time.perf_counter() - started
            response.raise_for_status()
            measured.append((wall, response.json()["usage"]["lane"]["model_calls"]))
    results.put(measured)


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


def run(kind: str, turns: int, warmup: int) -> dict[str, Any]:
    spawn = multiprocessing.get_context("spawn")
    ports, stop, results = spawn.Queue(), spawn.Event(), spawn.Queue()
    model = spawn.Process(target=serve_model, args=(ports, stop), daemon=True)
    model.start()
    try:
        with tempfile.TemporaryDirectory() as home:
            model_url = f"http://127.0.0.1:{ports.get(timeout=30)}/v1"
            settings = Settings(home=Path(home), llm_url=model_url, model="scripted-model")
            llm = TimedLlm(settings.llm_url, model=settings.model, timeout_s=30)
            with ShimServer(settings, registry=build_registry(), llm=llm) as shim:
                client = spawn.Process(target=drive, args=(shim.url, kind, warmup + turns, results))
                client.start()
                measured = results.get(timeout=600)
                client.join(timeout=10)
    finally:
        stop.set()
        model.join(timeout=10)
    shim_ms, wall_ms, model_ms = [], [], []
    calls = iter(llm.durations)
    for index, (wall, model_calls) in enumerate(measured):
        spent = sum(next(calls) for _ in range(model_calls))
        if index >= warmup:
            wall_ms.append(wall * 1000)
            model_ms.append(spent * 1000)
            shim_ms.append((wall - spent) * 1000)
    expected_calls = 2 if kind == "tool" else 1
    assert all(c == expected_calls for _, c in measured), "the scripted turns did not run as meant"
    return {
        "kind": kind, "turns": turns,
        "shim_p50_ms": round(statistics.median(shim_ms), 2),
        "shim_p95_ms": round(percentile(shim_ms, 95), 2),
        "wall_p50_ms": round(statistics.median(wall_ms), 2),
        "model_p50_ms": round(statistics.median(model_ms), 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--kind", choices=("text", "tool", "both"), default="both")
    parser.add_argument("--json", action="store_true", help="print one JSON line per kind")
    args = parser.parse_args()
    for kind in ("text", "tool") if args.kind == "both" else (args.kind,):
        result = run(kind, args.turns, args.warmup)
        if args.json:
            print(json.dumps(result))
        else:
            print(f"{kind:>4} turns x{result['turns']}: shim p50 {result['shim_p50_ms']} ms, "
                  f"p95 {result['shim_p95_ms']} ms (wall p50 {result['wall_p50_ms']} ms, "
                  f"model calls p50 {result['model_p50_ms']} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
