"""Running one tool call and describing what happened, for the model and for the store.

Every path through here ends in an Outcome, never an exception: a tool failure is something to
report to the model and record, not a reason for the turn to crash.

Two guards live here, in the one place every call passes: `run_tool` gives every tool, built-in
or MCP, an outer time limit (LANE_TOOL_TIMEOUT), so no tool holds a turn past it; and
`run_recorded` (what a turn awaits) writes the call's execution row before it runs, and when the
turn is cancelled (its client left) stops the tool, waits for it to end and records it as
'abandoned', so the session's lock is held until the tool is really over.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Literal

from ..store import now_iso
from .base import Tool, ToolContext, ToolError, ToolRefused
from .validation import explain_schema, parse_arguments, validate_arguments

log = logging.getLogger("lane.tools")

Status = Literal["ok", "error", "refused", "abandoned"]

# A tool that keeps its time limit itself (the terminal, with the output so far) is not told to
# stop until this long after it.
LIMIT_MARGIN_S = 1.0
# Told to stop (its time is up, or its client left), a tool gets this long to end before the turn
# goes on without it.
STOP_GRACE_S = 5.0
_WATCH_S = 0.05


@dataclass(frozen=True)
class Outcome:
    tool_name: str
    status: Status
    output: str  # the result on success, the reason otherwise
    arguments: str  # JSON of the arguments as executed (after coercion when they parsed)
    started_at: str
    duration_ms: float
    via_bridge: bool = False
    # The tool_executions row written before the tool ran (run_recorded), which the turn's
    # record completes; None when nothing was written ahead (a refusal, a repeated call).
    execution_id: int | None = None

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
        return finish("ok", within_limit(tool, arguments, ctx))
    except ToolRefused as exc:
        return finish("refused", str(exc))
    except ToolError as exc:
        return finish("error", str(exc))
    except Exception as exc:  # a tool's bug is reported, never raised into the turn
        log.exception("tool %s failed", tool.name)
        return finish("error", f"{tool.name} failed: {type(exc).__name__}: {exc}")


def within_limit(tool: Tool, arguments: dict[str, Any], ctx: ToolContext) -> str:
    """`tool.run` in a thread of its own, given LANE_TOOL_TIMEOUT. A tool still running a moment
    past it (LIMIT_MARGIN_S: a tool that keeps the limit itself, as the terminal does, reports its
    own timeout first) is told to stop (ctx.stop) and given STOP_GRACE_S to end; so is one whose
    turn set ctx.stop. One that has not ended then is left behind: the call is an error and the
    turn goes on. The tool's own exception is raised here."""
    limit = ctx.settings.tool_timeout_s
    stop = ctx.stop
    done = threading.Event()
    result: list[str] = []
    failure: list[BaseException] = []

    def work() -> None:
        try:
            result.append(tool.run(arguments, ctx))
        except BaseException as exc:  # handed to the waiting thread, which raises it
            failure.append(exc)
        finally:
            done.set()

    threading.Thread(target=work, name=f"tool-{tool.name}", daemon=True).start()
    tell_at = time.monotonic() + limit + LIMIT_MARGIN_S
    give_up_at: float | None = None
    timed_out = False
    while not done.wait(_WATCH_S):
        now = time.monotonic()
        if give_up_at is None and (stop.is_set() or now >= tell_at):
            timed_out = not stop.is_set()
            stop.set()
            give_up_at = now + STOP_GRACE_S
        if give_up_at is not None and now >= give_up_at:
            ctx.stop = threading.Event()  # the next call starts unstopped
            if timed_out:
                raise ToolError(f"{tool.name} did not finish within its time limit of {limit:g} s "
                                "(LANE_TOOL_TIMEOUT) and was stopped")
            raise ToolError(f"{tool.name} was told to stop and did not; the turn went on without it")
    if stop.is_set():
        ctx.stop = threading.Event()
    if failure:
        raise failure[0]
    return result[0]


@dataclass(frozen=True)
class Call:
    """What the store records of a call before it runs (Store.start_execution)."""

    message_id: int  # the assistant row that made it
    tool_call_id: str
    tool_name: str  # the tool it reaches (never the bridge, where it is known)
    via_bridge: bool
    origin: str
    arguments: str


async def run_recorded(ctx: ToolContext, call: Call, dispatch: Callable[[], Outcome]) -> Outcome:
    """`dispatch()` (which runs the call through run_tool) in a worker thread, its execution row
    written first, status 'running'. The returned Outcome carries that row's id for the turn's
    record to complete. When the awaiting task is cancelled, the tool is told to stop, waited
    for (the session's lock stays held meanwhile), recorded as 'abandoned', and the
    cancellation goes on."""
    execution_id = ctx.store.start_execution(
        ctx.session_id, call.message_id, tool_call_id=call.tool_call_id, tool_name=call.tool_name,
        via_bridge=call.via_bridge, origin=call.origin, arguments=call.arguments)
    worker = asyncio.ensure_future(asyncio.to_thread(dispatch))
    try:
        outcome = await asyncio.shield(worker)
    except asyncio.CancelledError:
        ctx.stop.set()
        outcome = await _ended(worker)
        ctx.store.add_tool_result(
            ctx.session_id, call.message_id, f"ABANDONED: {_ABANDONED}", execution_id=execution_id,
            tool_call_id=call.tool_call_id, tool_name=outcome.tool_name, via_bridge=outcome.via_bridge,
            origin=call.origin, arguments=outcome.arguments, status="abandoned", result=None,
            error=f"{_ABANDONED}\n{outcome.output}", started_at=outcome.started_at,
            duration_ms=outcome.duration_ms)
        raise
    return replace(outcome, execution_id=execution_id)


_ABANDONED = "the client left while the tool ran; it was stopped"


async def _ended(worker: asyncio.Future[Outcome]) -> Outcome:
    """The worker's outcome, waited for through any further cancellation."""
    while True:
        try:
            return await asyncio.shield(worker)
        except asyncio.CancelledError:
            if worker.done():
                return worker.result()


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
