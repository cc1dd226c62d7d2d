"""The executor's guards: every tool has an outer time limit, and a run awaited by a turn leaves
its execution row before it starts, and an 'abandoned' one when the turn is cancelled."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from stack.tools.base import Tool, ToolContext, object_schema
from stack.tools.execute import Call, run_recorded, run_tool
from tests.fakes.tool_context import tool_context


@pytest.fixture
def ctx(tmp_path: Path):
    with tool_context(tmp_path / "home", tool_timeout_s=0.5) as context:
        yield context


def sleeper(seconds: float, *, heeds_stop: bool) -> Tool:
    """A tool that sleeps, watching ctx.stop (as the terminal does) or not (a stuck library call)."""
    def run(arguments: dict, ctx: ToolContext) -> str:
        if heeds_stop:
            return "stopped" if ctx.stop.wait(seconds) else "slept"
        time.sleep(seconds)
        return "slept"
    return Tool("nap", "Sleep.", object_schema({}), run)


@pytest.mark.parametrize("heeds_stop", [True, False])
def test_no_tool_outlives_the_tool_time_limit(ctx, heeds_stop):
    started = time.monotonic()
    outcome = run_tool(sleeper(30, heeds_stop=heeds_stop), {}, ctx)
    elapsed = time.monotonic() - started
    if heeds_stop:  # told to stop at the limit, it ended itself
        assert (outcome.status, outcome.output) == ("ok", "stopped")
    else:
        assert outcome.status == "error" and "time limit of 0.5 s (LANE_TOOL_TIMEOUT)" in outcome.output
    assert elapsed < 0.5 + 1 + 5 + 1  # the limit, its margin and the grace a tool gets to end itself
    assert not ctx.stop.is_set()  # the next call starts unstopped


def test_a_quick_tool_is_not_held_by_the_limit(ctx):
    started = time.monotonic()
    assert run_tool(sleeper(0.01, heeds_stop=False), {}, ctx).output == "slept"
    assert time.monotonic() - started < 0.3


def _assistant(ctx: ToolContext) -> int:
    return ctx.store.add_message(ctx.session_id, "assistant", "", tool_calls=[{"id": "c1"}])


def test_the_row_is_written_before_the_tool_runs(ctx):
    seen = []
    message_id = _assistant(ctx)

    def run(arguments: dict, tool_ctx: ToolContext) -> str:
        seen.extend(e["status"] for e in tool_ctx.store.executions(tool_ctx.session_id))
        return "done"

    tool = Tool("look", "Look.", object_schema({}), run)
    call = Call(message_id, "c1", "look", False, "native", "{}")
    outcome = asyncio.run(run_recorded(ctx, call, lambda: run_tool(tool, {}, ctx)))
    assert seen == ["running"]
    assert outcome.output == "done" and outcome.execution_id == ctx.store.executions(ctx.session_id)[0]["id"]


def test_a_cancelled_run_is_stopped_waited_for_and_recorded_abandoned(ctx):
    message_id = _assistant(ctx)
    ended = threading.Event()

    def run(arguments: dict, tool_ctx: ToolContext) -> str:
        tool_ctx.stop.wait(30)
        time.sleep(0.2)  # cleaning up after being told to stop
        ended.set()
        return "stopped"

    tool = Tool("look", "Look.", object_schema({}), run)
    call = Call(message_id, "c1", "look", False, "native", "{}")

    async def cancelled() -> None:
        task = asyncio.create_task(run_recorded(ctx, call, lambda: run_tool(tool, {}, ctx)))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert ended.is_set()  # the cancellation waited for the tool to end

    asyncio.run(cancelled())
    [row] = ctx.store.executions(ctx.session_id)
    assert row["status"] == "abandoned" and "the client left" in row["error"]
    [message] = [m for m in ctx.store.messages(ctx.session_id) if m["role"] == "tool"]
    assert message["content"].startswith("ABANDONED")
