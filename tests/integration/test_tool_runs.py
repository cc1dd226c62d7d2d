"""Every tool run leaves a row, whatever happens to its turn: written before the command starts,
completed after; a client that leaves mid-command stops the command's whole process group, the
row says 'abandoned', and the session stays locked until then. Real HTTP, real shell, real store."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from stack.tools.registry import Registry
from stack.tools.terminal import TOOLS as TERMINAL
from tests.fakes.scripted_model import Reply, call, text
from tests.integration.test_api_chat import Lane, running_lane, wait_for
from tests.unit.test_tool_terminal import alive, gone_within

SLEEPER = "sleep 30 & echo $! > child.pid; echo $$ > shell.pid; sleep 30"


def terminal_lane(tmp_path: Path, script: Any, **overrides: Any):
    return running_lane(tmp_path, script, registry=Registry(TERMINAL), core_tools=("terminal",), **overrides)


def executions(lane: Lane) -> list[tuple[str, str]]:
    return lane.rows("SELECT tool_name, status FROM tool_executions ORDER BY id")


def test_a_row_says_running_while_the_command_runs_and_ok_after(tmp_path):
    script = [call("terminal", {"command": "touch started; sleep 1; echo finished"}), text("It finished.")]
    with terminal_lane(tmp_path, script) as lane:
        workspace = lane.settings.workspace
        answered: list[httpx.Response] = []
        turn = threading.Thread(target=lambda: answered.append(lane.chat("run the sleeper in the terminal")))
        turn.start()
        assert wait_for(lambda: (workspace / "started").exists(), 10)
        assert executions(lane) == [("terminal", "running")]
        assert lane.rows("SELECT count(*) FROM messages WHERE role = 'tool'") == [(0,)]
        turn.join(20)
        assert answered[0].status_code == 200
        assert executions(lane) == [("terminal", "ok")]
        [(result, duration)] = lane.rows("SELECT result, duration_ms FROM tool_executions")
        assert "finished" in result and duration >= 1000


def test_a_client_that_leaves_mid_command_stops_its_group_and_the_row_says_abandoned(tmp_path):
    """The second request on the session waits for the first turn's command to be stopped and
    recorded: when its model call comes, the sleeper is gone and its row is final."""
    seen_by_second: list[Any] = []

    def script(body: dict[str, Any]) -> Reply:
        if body["messages"][-1].get("content") == "and now?":
            seen_by_second.append((lane.rows("SELECT status FROM tool_executions"), alive(child)))
            return text("Nothing is running.")
        return call("terminal", {"command": SLEEPER})

    with terminal_lane(tmp_path, script, decision=lambda body: text(
            '{"next": "answer"}' if "and now?" in body["messages"][-1]["content"] else '{"next": "terminal"}')) as lane:
        workspace = lane.settings.workspace

        def leave_early() -> None:
            with pytest.raises(httpx.ReadTimeout):
                lane.client.post("/v1/chat/completions", headers={"X-Session-Id": "busy"}, timeout=2.0,
                                 json={"messages": [{"role": "user", "content": "run the sleeper in the terminal"}]})

        first = threading.Thread(target=leave_early)
        first.start()
        assert wait_for(lambda: (workspace / "shell.pid").exists() and (workspace / "child.pid").exists(), 10)
        child, shell = (int((workspace / name).read_text()) for name in ("child.pid", "shell.pid"))
        second = lane.chat("and now?", session="busy")  # sent while the first still waits
        first.join(10)
        assert second.status_code == 200, second.text
        assert seen_by_second == [([("abandoned",)], False)]
        assert gone_within(shell, 2) and gone_within(child, 2)
        [(status, error)] = lane.rows("SELECT status, error FROM tool_executions")
        assert status == "abandoned" and "the client left" in error
        assert lane.rows("SELECT content FROM messages WHERE role = 'tool'")[0][0].startswith("ABANDONED")


def test_a_lone_surrogate_in_the_arguments_does_not_lose_the_run(tmp_path):
    """A model's arguments with JSON's "\\udcff" (a lone surrogate): the command ran, so its row
    must be stored, with the character replaced."""
    raw = '{"command": "echo ran \\udcff"}'
    with terminal_lane(tmp_path, [call("terminal", raw), text("It ran.")]) as lane:
        response = lane.chat("run echo in the terminal")
        assert response.status_code == 200, response.text
        [(status, arguments)] = lane.rows("SELECT status, arguments FROM tool_executions")
        assert status == "ok" and arguments == '{"command": "echo ran \ufffd"}'


def test_a_tool_time_limit_stops_a_command_that_asked_for_more(tmp_path):
    script = [call("terminal", {"command": "sleep 20", "timeout": 60}), text("It timed out.")]
    with terminal_lane(tmp_path, script, tool_timeout_s=1.0) as lane:
        response = lane.chat("run the sleeper in the terminal")
        assert response.status_code == 200
        [(status, error)] = lane.rows("SELECT status, error FROM tool_executions")
        assert status == "error" and "timed out after 1 s" in error


def test_the_lane_home_is_private_once_the_shim_starts(tmp_path):
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    with running_lane(home, [text("hi")]) as lane:
        assert lane.chat("hi").status_code == 200
        assert home.stat().st_mode & 0o777 == 0o700
        assert {p.name: p.stat().st_mode & 0o777 for p in home.glob("state.db*")} == {
            "state.db": 0o600, "state.db-wal": 0o600, "state.db-shm": 0o600}


@pytest.fixture(autouse=True)
def _no_sleeper_left(tmp_path):
    yield
    for pid_file in tmp_path.glob("**/*.pid"):
        try:
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
