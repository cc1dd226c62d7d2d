"""The check's output: the table people already read, side by side for the two arms, and JSON."""

from __future__ import annotations

from typing import Any

from .client import PROFILE_OF_ARM
from .runner import ArmResult, StepResult

TEXT_MARK = "*"
_FOOTNOTE = f"{TEXT_MARK} the model wrote tool calls as text that did not run"


def arm_table(arm: ArmResult) -> str:
    header = ["step", "wall", "prompt tok", "evaluated", "model calls", "executed?", "verdict"]
    rows = [[str(s.step), _wall(s.wall_s), str(s.prompt_tokens), str(s.evaluated_tokens),
             str(s.model_calls), _executed(s), f"{_verdict(s)}: {s.reason}"] for s in arm.steps]
    lines = [_title(arm), *_grid(header, rows, right={1, 2, 3, 4}), summary_line(arm)]
    if any(s.unexecuted_tool_text for s in arm.steps):
        lines.append(_FOOTNOTE)
    return "\n".join(lines)


def side_by_side(a: ArmResult, b: ArmResult) -> str:
    header = ["step"]
    for arm in (a, b):
        tag = arm.arm.upper()
        header += [f"{tag} wall", f"{tag} prompt tok", f"{tag} evaluated", f"{tag} calls",
                   f"{tag} executed?", f"{tag} verdict"]
    rows = []
    for step_a, step_b in zip(a.steps, b.steps, strict=False):
        row = [str(step_a.step)]
        for step in (step_a, step_b):
            row += [_wall(step.wall_s), str(step.prompt_tokens), str(step.evaluated_tokens),
                    str(step.model_calls), _executed(step), _verdict(step)]
        rows.append(row)
    totals = ["total"]
    for arm in (a, b):
        totals += [_wall(arm.wall_s), str(arm.prompt_tokens), str(arm.evaluated_tokens),
                   str(arm.model_calls), "", f"{arm.passed}/{arm.total}"]
    rows.append(totals)
    lines = [_title(a), _title(b), *_grid(header, rows, right={1, 2, 3, 4, 7, 8, 9, 10})]
    lines += [summary_line(a), summary_line(b)]
    for arm in (a, b):
        lines += [f"  {arm.arm.upper()} step {s.step}: {s.reason}" for s in arm.steps if not s.passed]
    if any(s.unexecuted_tool_text for arm in (a, b) for s in arm.steps):
        lines.append(_FOOTNOTE)
    return "\n".join(lines)


def summary_line(arm: ArmResult) -> str:
    verdict = "PASS" if arm.passed == arm.total else "FAIL"
    return (f"{verdict} arm {arm.arm} ({PROFILE_OF_ARM[arm.arm]}): {arm.passed}/{arm.total} steps"
            f" passed · prompt tokens {arm.prompt_tokens} (evaluated {arm.evaluated_tokens})"
            f" · wall {arm.wall_s:.1f}s"
            f" · model calls {arm.model_calls}")


def as_json(arms: list[ArmResult]) -> dict[str, Any]:
    if len(arms) == 1:
        return arms[0].as_json()
    return {"passed": sum(a.passed for a in arms), "total": sum(a.total for a in arms),
            "arms": {a.arm: a.as_json() for a in arms}}


def _title(arm: ArmResult) -> str:
    return (f"arm {arm.arm} (X-Lane-Tools: {PROFILE_OF_ARM[arm.arm]}) session {arm.session_id}"
            f" · seed {arm.seed_session_id} · codename {arm.markers.codename}"
            f" · phrase {arm.markers.phrase}")


def _executed(step: StepResult) -> str:
    names = ",".join(dict.fromkeys(step.executed)) or "none"
    return names + (TEXT_MARK if step.unexecuted_tool_text else "")


def _verdict(step: StepResult) -> str:
    if step.timed_out:
        return "FAIL (timeout)"
    return "pass" if step.passed else "FAIL"


def _wall(seconds: float) -> str:
    return f"{seconds:.1f}s"


def _grid(header: list[str], rows: list[list[str]], *, right: set[int]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    # The last column (reasons) is left ragged rather than padding every line to the longest.
    widths[-1] = 0

    def line(cells: list[str]) -> str:
        return " | ".join(c.rjust(w) if i in right else c.ljust(w)
                          for i, (c, w) in enumerate(zip(cells, widths, strict=False))).rstrip()

    rule = "-+-".join("-" * (w or len(header[-1])) for w in widths)
    return [line(header), rule, *map(line, rows)]
