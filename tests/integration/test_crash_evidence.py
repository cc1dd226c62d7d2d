"""Evidence survives a crash. A real `lane shim` is killed with SIGKILL in the middle of a tool
call, of a model call and of a burst of tool results; each time the store passes
`PRAGMA integrity_check`, keeps the "really ran" rule (a finished tool_executions row and its
role='tool' message exist together or not at all; a tool that was running keeps its 'running'
row), and a new shim on the same store serves the session."""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import count
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes.scripted_model import Reply, ScriptedModel, call, text
from tests.integration.llm_server import free_port, start_lane, stop, wait_healthy

SESSION = "crash-1"


@contextmanager
def lane_shim(home: Path, model: ScriptedModel) -> Iterator[tuple[str, Any]]:
    """`lane shim` on a free port, in its own process group; yields its URL and process."""
    port, log = free_port(), home.parent / f"shim-{time.monotonic_ns()}.log"
    proc = start_lane(["shim", "--llm-url", model.url, "--port", str(port), "--home", str(home)],
                      log, env={"LANE_API_KEY": "", "LANE_LLM_TIMEOUT": "60"})
    try:
        wait_healthy(f"http://127.0.0.1:{port}/health", proc, log)
        yield f"http://127.0.0.1:{port}", proc
    finally:
        stop(proc, signal.SIGINT)


def ask(url: str, content: str) -> httpx.Response:
    return httpx.post(f"{url}/v1/chat/completions", timeout=60, headers={"X-Session-Id": SESSION},
                      json={"messages": [{"role": "user", "content": content}]})


def kill_mid_turn(home: Path, model: ScriptedModel, until: Callable[[], bool], request: str = "go") -> None:
    """Start a turn, wait until `until()` holds (the shim is inside the step under test), then
    SIGKILL the shim's whole process group."""
    with lane_shim(home, model) as (url, proc):
        turn = threading.Thread(target=lambda: _ignore_errors(ask, url, request), daemon=True)
        turn.start()
        wait_for(until)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        turn.join(70)


def _ignore_errors(function: Callable[..., Any], *args: Any) -> None:
    try:
        function(*args)
    except httpx.HTTPError:
        pass  # the shim was killed under this request


def wait_for(condition: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the shim never reached the step under test"
        time.sleep(0.02)


def rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db, timeout=10) as reader:
        return reader.execute(sql).fetchall()


def evidence_problems(db: Path) -> list[tuple[Any, ...]]:
    """Finished executions without their tool message, and tool messages without their execution
    (a 'running' row is a run the shim never saw end: it has no result)."""
    return rows(db, """
        SELECT 'execution without its tool message', e.id FROM tool_executions e
         WHERE e.status != 'running' AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.role = 'tool'
                           AND m.session_id = e.session_id AND m.tool_call_id = e.tool_call_id)
        UNION ALL
        SELECT 'tool message without its execution', m.id FROM messages m WHERE m.role = 'tool'
           AND NOT EXISTS (SELECT 1 FROM tool_executions e WHERE e.session_id = m.session_id
                           AND e.tool_call_id = m.tool_call_id)""")


def assert_store_survived(home: Path, model: ScriptedModel) -> None:
    db = home / "state.db"
    assert rows(db, "PRAGMA integrity_check") == [("ok",)]
    assert evidence_problems(db) == []
    with lane_shim(home, model) as (url, _):
        again = ask(url, "are you back?")
    assert again.status_code == 200, again.text
    assert again.json()["choices"][0]["message"]["content"] == "back"
    assert rows(db, "PRAGMA integrity_check") == [("ok",)]
    assert evidence_problems(db) == []


def assistant_calls(db: Path) -> int:
    if not db.exists():
        return 0
    return rows(db, "SELECT count(*) FROM messages WHERE role = 'assistant' "
                    "AND tool_calls IS NOT NULL")[0][0]


def test_sigkill_during_a_tool_call(tmp_path: Path) -> None:
    home = tmp_path / "home"
    pid_file = home / "workspace" / "sleeper.pid"
    script = [call("terminal", {"command": "echo $$ > sleeper.pid && exec sleep 60"}),
              text("back")]
    with ScriptedModel(script) as model:
        try:
            # a request the terminal fits: a pick the tool index does not rank is asked again
            kill_mid_turn(home, model, pid_file.exists, "run the sleeper command in the terminal")
        finally:
            if pid_file.exists():  # the terminal's command runs in a group of its own
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
        db = home / "state.db"
        assert assistant_calls(db) == 1
        # written before the command started, it never finished: the run is on record
        assert rows(db, "SELECT tool_name, status FROM tool_executions") == [("terminal", "running")]
        assert_store_survived(home, model)


@pytest.mark.parametrize("step", ["decision", "answer"])
def test_sigkill_during_a_model_call(tmp_path: Path, step: str) -> None:
    """Killed while the lane waits for its decision (the turn's first model call), or for the
    answer it composes after deciding that no tool is needed."""
    home = tmp_path / "home"
    decisions = count()

    def decision(body: dict[str, Any]) -> Reply:
        return Reply(hang=True) if step == "decision" and next(decisions) == 0 else text('{"next": "answer"}')

    script = [Reply(hang=True), text("back")] if step == "answer" else [text("back")]
    with ScriptedModel(script, decision=decision) as model:
        waiting = model.decide_requests if step == "decision" else model.requests
        kill_mid_turn(home, model, lambda: len(waiting) == 1)
        db = home / "state.db"
        # the user's message, no answer, and the lane's own decision only once it had its reply
        assert rows(db, "SELECT role FROM messages WHERE lane_prompt = 0") == [("user",)]
        assert rows(db, "SELECT purpose, content FROM lane_calls") == (
            [] if step == "decision" else [("decide", '{"next": "answer"}')])
        assert_store_survived(home, model)


@pytest.mark.parametrize("results_before_kill", [1, 7, 16])
def test_sigkill_while_tool_results_are_written(tmp_path: Path, results_before_kill: int) -> None:
    """A hundred quick calls in the reply to the forced todo call: the kill lands somewhere in a
    stream of tool results (or, at the latest, while the answer is awaited)."""
    home, task = tmp_path / "home", count()

    def decision(body: dict[str, Any]) -> Reply:
        asked = body["messages"][-1]["content"]
        return text('{"next": "answer"}' if "are you back?" in asked else '{"next": "todo"}')

    def busy(body: dict[str, Any]) -> Reply:
        if body["messages"][-1].get("content") == "are you back?":
            return text("back")
        if not body.get("tools"):  # the answer, after the calls
            return Reply(hang=True)
        calls = [{"name": "todo", "arguments": {"action": "set", "items": [f"task {next(task)}"]}}
                 for _ in range(100)]
        return Reply(tool_calls=calls)

    db = home / "state.db"
    with ScriptedModel(busy, decision=decision) as model:
        # a request the todo list fits: a pick the tool index does not rank is asked again
        kill_mid_turn(home, model, lambda: db.exists() and rows(
            db, "SELECT count(*) FROM tool_executions")[0][0] >= results_before_kill,
            "put my tasks on the to-do list")
        assert model.requests[0]["tool_choice"] == {"type": "function", "function": {"name": "todo"}}
        assert_store_survived(home, model)
