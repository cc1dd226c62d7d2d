"""Running one tool call and describing what happened, for the model and for the store.

Every path through here ends in an Outcome, never an exception: a tool failure is something to
report to the model and record, not a reason for the turn to crash.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any, Literal

from ..store import now_iso
from .base import Tool, ToolContext, ToolError, ToolRefused
from .validation import explain_schema, parse_arguments, validate_arguments

log = logging.getLogger("lane.tools")

Status = Literal["ok", "error", "refused"]


@dataclass(frozen=True)
class Outcome:
    tool_name: str
    status: Status
    output: str  # the result on success, the reason otherwise
    arguments: str  # JSON of the arguments as executed (after coercion when they parsed)
    started_at: str
    duration_ms: float
    via_bridge: bool = False

    @property
    def for_model(self) -> str:
        """What the model reads in the tool message."""
        if self.status == "ok":
            return self.output
        return f"{self.status.upper()}: {self.output}"


def refused(tool_name: str, reason: str, arguments: Any = None, *, via_bridge: bool = False) -> Outcome:
    return Outcome(tool_name, "refused", reason, _as_json(arguments), now_iso(), 0.0, via_bridge)


def run_tool(tool: Tool, raw_arguments: Any, ctx: ToolContext, *, via_bridge: bool = False) -> Outcome:
    started_at, clock = now_iso(), time.perf_counter()
    arguments_json = _as_json(raw_arguments)

    def finish(status: Status, output: str) -> Outcome:
        elapsed = (time.perf_counter() - clock) * 1000
        return Outcome(tool.name, status, output, arguments_json, started_at, elapsed, via_bridge)

    try:
        arguments = parse_arguments(raw_arguments)
    except ToolError as exc:
        return finish("error", f"{exc}\n{explain_schema(tool.name, tool.parameters)}")
    try:
        arguments = validate_arguments(tool.name, tool.parameters, arguments)
        arguments_json = _as_json(arguments)
        return finish("ok", tool.run(arguments, ctx))
    except ToolRefused as exc:
        return finish("refused", str(exc))
    except ToolError as exc:
        return finish("error", str(exc))
    except Exception as exc:  # a tool's bug is reported, never raised into the turn
        log.exception("tool %s failed", tool.name)
        return finish("error", f"{tool.name} failed: {type(exc).__name__}: {exc}")


def unmet_precondition(tool: Tool, raw_arguments: Any, request: str, context: str, *,
                       via_bridge: bool = False) -> Outcome | None:
    """The refusal of a call whose tool's precondition the conversation does not meet (the
    request, and `context`: what else it said); None when it may run, or when its arguments do
    not parse (run_tool then reports that)."""
    if tool.precondition is None:
        return None
    try:
        reason = tool.precondition(parse_arguments(raw_arguments), request, context)
    except ToolError:
        return None
    return None if reason is None else refused(tool.name, reason, raw_arguments, via_bridge=via_bridge)


def _as_json(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments if arguments is not None else {}, ensure_ascii=False)
