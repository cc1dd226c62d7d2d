"""`GET /metrics`: the shim's Prometheus metrics, in the text exposition format (0.0.4).

Written by hand rather than with prometheus_client: a dozen series do not justify a dependency.
What the shim counts itself (requests, turns, their model calls and tokens, latency) starts at zero
with the process, as Prometheus counters do. Tool executions and returned calls are read from the
store when scraped: the store is where the lane records what ran, so the metric cannot disagree
with it (they count every row the store holds, which is still a counter: rows are never deleted).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator, Literal

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse

from ..agent.llm_client import LlmError, LlmTimeout
from ..agent.turn import TurnResult
from ..agent.warmup import WarmUp
from ..store import Store
from ..wire import ApiError

Api = Literal["chat", "messages", "responses"]
# A request refused before its mode was known (bad JSON, bad messages) is counted under this mode.
NO_MODE = "none"
# Seconds; a turn on two cores takes from under a second (an answer) to minutes (several tools).
LATENCY_BUCKETS = (0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
WARM_STATES = ("waiting", "warming", "ok", "unsupported", "failed")
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass
class Histogram:
    buckets: tuple[float, ...] = LATENCY_BUCKETS
    counts: list[int] = field(default_factory=lambda: [0] * len(LATENCY_BUCKETS))
    total: float = 0.0
    count: int = 0

    def observe(self, value: float) -> None:
        for index, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[index] += 1
        self.total += value
        self.count += 1


@dataclass
class Metrics:
    """The shim's counters; one per app (app.state.metrics)."""

    requests: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # (api, mode, status)
    model_calls: int = 0
    tokens: Counter[str] = field(default_factory=Counter)  # prompt | cached | completion
    latency: dict[tuple[str, str], Histogram] = field(default_factory=dict)  # (api, mode)
    in_flight: int = 0

    @contextmanager
    def refusals(self, api: Api) -> Iterator[None]:
        """Counts a request refused while it is read (a 4xx before any turn starts)."""
        try:
            yield
        except ApiError as error:
            self.requests[(api, NO_MODE, str(error.status))] += 1
            raise

    def watch(self, task: asyncio.Task[TurnResult], api: Api, mode: str) -> None:
        """Counts the turn when it ends, however it ends: streamed or not, answered, failed or
        cancelled because its client left (499)."""
        started = time.monotonic()
        self.in_flight += 1

        def done(finished: asyncio.Task[TurnResult]) -> None:
            self.in_flight -= 1
            status = _status(finished)
            self.requests[(api, mode, str(status))] += 1
            self.latency.setdefault((api, mode), Histogram()).observe(time.monotonic() - started)
            if status == 200:
                result = finished.result()
                self.model_calls += result.model_calls
                self.tokens.update(prompt=result.prompt_tokens, cached=result.cached_tokens,
                                   completion=result.completion_tokens)

        task.add_done_callback(done)

    def render(self, store: Store, warm_state: str) -> str:
        executions, returned = store.recorded_counts()
        lines: list[str] = []
        _family(lines, "lane_requests_total", "counter",
                "Requests by API (chat, messages, responses), mode (agent, proxy; none when refused "
                "before a turn) and status (the HTTP status, or the error's in a stream; 499 client left).",
                [({"api": a, "mode": m, "status": s}, n) for (a, m, s), n in sorted(self.requests.items())])
        _family(lines, "lane_model_calls_total", "counter", "Model calls of finished turns.",
                [({}, self.model_calls)])
        _family(lines, "lane_tokens_total", "counter",
                "Tokens of finished turns: prompt, cached (prompt tokens served from the llm's cache) "
                "and completion.",
                [({"kind": kind}, self.tokens[kind]) for kind in ("prompt", "cached", "completion")])
        _family(lines, "lane_tool_executions_total", "counter",
                "Tool executions recorded in the store, by status.",
                [({"status": status}, executions.get(status, 0)) for status in ("ok", "error", "refused")])
        _family(lines, "lane_returned_calls_total", "counter",
                "Calls returned to proxy-mode clients, recorded in the store.", [({}, returned)])
        _family(lines, "lane_turns_in_flight", "gauge",
                "Turns running or waiting for the model (the llm serves one at a time).",
                [({}, self.in_flight)])
        _family(lines, "lane_warm", "gauge",
                "Warm-up of the stable prompt prefix: 1 for the current state.",
                [({"state": state}, int(state == warm_state)) for state in WARM_STATES])
        lines += ["# HELP lane_turn_seconds Wall time of a turn, from its start to its end.",
                  "# TYPE lane_turn_seconds histogram"]
        for (api, mode), histogram in sorted(self.latency.items()):
            labels = {"api": api, "mode": mode}
            for bound, count in zip(histogram.buckets, histogram.counts, strict=True):
                lines.append(_sample("lane_turn_seconds_bucket", {**labels, "le": f"{bound:g}"}, count))
            lines.append(_sample("lane_turn_seconds_bucket", {**labels, "le": "+Inf"}, histogram.count))
            lines.append(_sample("lane_turn_seconds_sum", labels, histogram.total))
            lines.append(_sample("lane_turn_seconds_count", labels, histogram.count))
        return "\n".join(lines) + "\n"


def _status(task: asyncio.Task[TurnResult]) -> int:
    if task.cancelled():
        return 499
    error = task.exception()
    if error is None:
        return 200
    if isinstance(error, LlmTimeout):
        return 504
    if isinstance(error, LlmError):
        return 502
    return error.status if isinstance(error, ApiError) else 500


def _family(lines: list[str], name: str, kind: str, help: str,
            samples: list[tuple[dict[str, str], float]]) -> None:
    lines += [f"# HELP {name} {help}", f"# TYPE {name} {kind}"]
    lines += [_sample(name, labels, value) for labels, value in samples]


def _sample(name: str, labels: dict[str, str], value: float) -> str:
    text = ",".join(f'{key}="{_escaped(val)}"' for key, val in labels.items())
    number = str(value) if isinstance(value, int) else repr(float(value))
    return f"{name}{{{text}}} {number}" if text else f"{name} {number}"


def _escaped(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


metrics_routes = APIRouter()


@metrics_routes.get("/metrics")
async def metrics(request: Request) -> PlainTextResponse:
    state = request.app.state
    warm: WarmUp = state.warm
    return PlainTextResponse(state.metrics.render(state.store, warm.state), media_type=CONTENT_TYPE)
