"""One arm of the check: seed an earlier session, send the steps, judge each from the store.

Seeding goes through the shim, as a real turn in its own session, rather than as rows written into
SQLite: the check stays a read-only client of the store (it can judge a store it may not write),
the messages and their FTS index are written by the code that writes every other session, and
finding the seed in `--db` afterwards proves that `--db` is the store this shim writes, before any
step's verdict depends on it. The seed turn's answer does not matter, only its stored user message.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable

from ..store.claims import BUILTIN_TOOLS
from .client import PROFILE_OF_ARM, LaneUnreachable, ShimClient
from .evidence import Mark, StoreReader, StoreUnreadable
from .scenario import SEED_PROMPT, Markers
from .verdicts import Context, judge, unexecuted_tool_text

# The seed turn needs its user message stored, not a long answer.
SEED_MAX_TOKENS = 32
SEED_WAIT_S = 3.0

Progress = Callable[[str], None]


@dataclass
class StepResult:
    step: int
    prompt: str
    passed: bool
    reason: str
    wall_s: float
    prompt_tokens: int
    model_calls: int
    executed: list[str]
    unexecuted_tool_text: bool
    hallucinated: list[str] = field(default_factory=list)
    timed_out: bool = False
    cached_tokens: int = 0
    # Why each reply of the model the lane held back (lane_calls, purpose 'held') was not passed on.
    held_back: list[str] = field(default_factory=list)

    @property
    def evaluated_tokens(self) -> int:
        """Prompt tokens the model had to read again: the cost of a turn on a laptop CPU."""
        return self.prompt_tokens - self.cached_tokens

    def as_json(self) -> dict[str, Any]:
        return {"step": self.step, "verdict": "pass" if self.passed else "fail",
                "wall_s": round(self.wall_s, 3), "prompt_tokens": self.prompt_tokens,
                "cached_tokens": self.cached_tokens, "evaluated_tokens": self.evaluated_tokens,
                "model_calls": self.model_calls, "executed": self.executed,
                "unexecuted_tool_text": self.unexecuted_tool_text, "reason": self.reason,
                "hallucinated": self.hallucinated, "timed_out": self.timed_out,
                "held_back": self.held_back, "prompt": self.prompt}


@dataclass
class ArmResult:
    arm: str
    session_id: str
    seed_session_id: str
    markers: Markers
    steps: list[StepResult] = field(default_factory=list)

    @property
    def passed(self) -> int:
        return sum(1 for s in self.steps if s.passed)

    @property
    def total(self) -> int:
        return len(self.steps)

    @property
    def prompt_tokens(self) -> int:
        return sum(s.prompt_tokens for s in self.steps)

    @property
    def cached_tokens(self) -> int:
        return sum(s.cached_tokens for s in self.steps)

    @property
    def evaluated_tokens(self) -> int:
        return self.prompt_tokens - self.cached_tokens

    @property
    def wall_s(self) -> float:
        return sum(s.wall_s for s in self.steps)

    @property
    def model_calls(self) -> int:
        return sum(s.model_calls for s in self.steps)

    def as_json(self) -> dict[str, Any]:
        return {"passed": self.passed, "total": self.total,
                "steps": [s.as_json() for s in self.steps],
                "arm": self.arm, "profile": PROFILE_OF_ARM[self.arm],
                "session_id": self.session_id, "seed_session_id": self.seed_session_id,
                "codename": self.markers.codename, "phrase": self.markers.phrase,
                "totals": {"prompt_tokens": self.prompt_tokens, "cached_tokens": self.cached_tokens,
                           "evaluated_tokens": self.evaluated_tokens, "wall_s": round(self.wall_s, 3),
                           "model_calls": self.model_calls}}


def run_arm(client: ShimClient, reader: StoreReader, arm: str, prompts: tuple[str, ...], *,
            progress: Progress = lambda line: None) -> ArmResult:
    """Raises LaneUnreachable or StoreUnreadable when the lane or its store cannot be used."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    run_id = f"{stamp}-{secrets.token_hex(3)}"
    result = ArmResult(arm, f"check-{arm}-{run_id}", f"check-seed-{arm}-{run_id}", Markers.fresh())
    _seed(client, reader, result)
    progress(f"arm {arm}: seeded {result.seed_session_id}; session {result.session_id}")
    for number, template in enumerate(prompts, start=1):
        step = _run_step(client, reader, result, number, result.markers.render(template))
        result.steps.append(step)
        progress(f"arm {arm} step {number}/{len(prompts)}: {'pass' if step.passed else 'FAIL'}"
                 f" in {step.wall_s:.1f}s: {step.reason}")
    return result


def _seed(client: ShimClient, reader: StoreReader, result: ArmResult) -> None:
    phrase = result.markers.phrase
    reply = client.turn(result.seed_session_id, result.markers.render(SEED_PROMPT),
                        arm=result.arm, max_tokens=SEED_MAX_TOKENS)
    deadline = time.monotonic() + SEED_WAIT_S
    while not reader.session_contains(result.seed_session_id, phrase):
        if time.monotonic() > deadline:
            if reply.error and not reply.timed_out:
                raise LaneUnreachable(f"the shim did not take the seed turn: {reply.error}")
            raise StoreUnreadable(
                f"the shim took the seed turn but {reader.path} has no session"
                f" {result.seed_session_id}: --db is not the store this shim writes")
        time.sleep(0.1)


def _run_step(client: ShimClient, reader: StoreReader, result: ArmResult, number: int,
              prompt: str) -> StepResult:
    mark = reader.mark(result.session_id)
    reply = client.turn(result.session_id, prompt, arm=result.arm)
    rows = reader.rows_since(result.session_id, mark)
    # Re-read rather than carried over: rows a timed-out turn wrote after its step count too.
    earlier = tuple(e for e in reader.rows_since(result.session_id, Mark(0, 0)).ran
                    if e.id <= mark.execution_id)
    vocabulary = BUILTIN_TOOLS | reader.known_tool_names()
    context = Context(result.markers, result.seed_session_id, result.arm, earlier, vocabulary)
    judgement = judge(number, rows, context)
    passed, reason = judgement.passed, judgement.reason
    if reply.error:
        passed, reason = False, f"{reply.error}; the store shows: {judgement.reason}"
    return StepResult(
        step=number, prompt=prompt, passed=passed, reason=reason, wall_s=reply.wall_s,
        prompt_tokens=reply.prompt_tokens if reply.prompt_tokens is not None else rows.prompt_tokens,
        cached_tokens=reply.cached_tokens,
        model_calls=reply.model_calls if reply.model_calls is not None else rows.model_calls,
        executed=[e.tool_name for e in rows.ran],
        unexecuted_tool_text=bool(unexecuted_tool_text(rows, vocabulary)),
        hallucinated=list(judgement.hallucinated), timed_out=reply.timed_out,
        held_back=[c.reason or "" for c in rows.held_back])

