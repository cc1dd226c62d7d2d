"""The terminal tool: real shell commands in the workspace, timeouts, output cap, no orphans."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from stack.tools import confine, terminal
from stack.tools.base import ToolContext
from stack.tools.execute import Outcome, run_tool
from tests.fakes.tool_context import make_tool_context, tool_context

TOOL = terminal.TOOLS[0]


@pytest.fixture
def ctx(tmp_path: Path):
    with tool_context(tmp_path / "home") as context:
        yield context


def run(command: str, ctx: ToolContext, **extra) -> Outcome:
    return run_tool(TOOL, {"command": command, **extra}, ctx)


def alive(pid: int) -> bool:
    """True while the process exists and is not a zombie waiting to be reaped."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return not alive(pid)


def test_runs_in_the_workspace_and_reports_exit_code_and_output(ctx):
    outcome = run("pwd; echo out; echo err >&2", ctx)
    assert outcome.status == "ok"
    lines = outcome.output.splitlines()
    assert lines[0] == "exit code: 0"
    assert Path(lines[1]) == ctx.settings.workspace.resolve()
    assert lines[2:] == ["out", "err"]


def test_non_zero_exit_is_a_normal_result(ctx):
    outcome = run("echo failing; exit 3", ctx)
    assert (outcome.status, outcome.output) == ("ok", "exit code: 3\nfailing\n")


def test_a_command_that_wants_an_interactive_terminal_is_an_error_that_says_how_to_run_it(ctx):
    outcome = run("echo 'top: failed tty get' >&2; exit 1", ctx)
    assert outcome.status == "error"
    assert "wants an interactive terminal" in outcome.output and "top -b -n 1" in outcome.output
    assert outcome.output.endswith("it printed:\ntop: failed tty get\n")
    printed = run("echo 'stdin: not a tty'", ctx)  # it exited 0: its output
    assert printed.status == "ok" and printed.output == "exit code: 0\nstdin: not a tty\n"


def test_no_output_is_said_plainly_and_stdin_is_closed(ctx):
    assert run("true", ctx).output == "exit code: 0\n(no output)"
    started = time.monotonic()
    assert run("cat", ctx, timeout=5).output == "exit code: 0\n(no output)"
    assert time.monotonic() - started < 2


def test_timeout_is_an_error_kills_the_group_and_keeps_partial_output(ctx):
    ws = ctx.settings.workspace
    started = time.monotonic()
    outcome = run("sleep 30 & echo $! > child.pid; echo started; sleep 30", ctx, timeout=1)
    elapsed = time.monotonic() - started
    assert outcome.status == "error"
    assert "timed out after 1 s" in outcome.output
    assert "started" in outcome.output
    assert elapsed < 10  # measured median 1.0 s (five runs, two shared cores); the sleeps take 30
    assert gone_within(int((ws / "child.pid").read_text()), 2)


def test_background_processes_do_not_outlive_the_command(ctx):
    outcome = run("sleep 30 > /dev/null 2>&1 & echo $!", ctx, timeout=5)
    assert outcome.status == "ok"
    pid = int(outcome.output.splitlines()[1])
    assert gone_within(pid, 2)


def test_output_cap_keeps_head_and_tail_and_marks_the_cut(tmp_path):
    context = make_tool_context(tmp_path / "home", terminal_output_bytes=1024)
    outcome = run("seq 1 100000", context)
    assert outcome.status == "ok"
    body = outcome.output.split("\n", 1)[1]
    head, rest = body.split("\n[... ", 1)
    marker, tail = rest.split(" ...]\n", 1)
    assert head.startswith("1\n2\n3\n")
    assert tail.endswith("99999\n100000\n")
    total = len("".join(f"{n}\n" for n in range(1, 100001)))
    assert len(head.encode()) + len(tail.encode()) == 1024
    assert marker == f"{total - 1024} bytes of output cut"
    context.store.close()


def test_output_under_the_cap_is_not_marked(tmp_path):
    context = make_tool_context(tmp_path / "home", terminal_output_bytes=1024)
    outcome = run("printf 'x%.0s' $(seq 1 1024)", context)
    assert outcome.output == "exit code: 0\n" + "x" * 1024
    context.store.close()


def test_timeout_above_the_maximum_is_lowered(tmp_path):
    context = make_tool_context(tmp_path / "home", terminal_max_timeout_s=1.0)
    outcome = run("echo hi", context, timeout=500)
    assert outcome.status == "ok"
    assert outcome.output.startswith("exit code: 0 (timeout lowered to the maximum, 1 s)")
    slow = run("sleep 5", context, timeout=500)
    assert slow.status == "error" and "timed out after 1 s" in slow.output
    context.store.close()


@pytest.mark.parametrize("given", [{}, {"timeout": 0}, {"timeout": -3}])
def test_default_timeout_comes_from_settings_and_zero_means_the_default(tmp_path, given):
    context = make_tool_context(tmp_path / "home", terminal_timeout_s=0.5)
    started = time.monotonic()
    outcome = run("sleep 30", context, **given)
    assert outcome.status == "error" and "timed out after 0.5 s" in outcome.output
    assert time.monotonic() - started < 6  # measured median 0.51 s (five runs, two shared cores)
    context.store.close()


@pytest.mark.parametrize("arguments", [{"command": "   "}, {"command": "true", "timeout": "soon"}])
def test_bad_arguments_are_errors(ctx, arguments):
    assert run_tool(TOOL, arguments, ctx).status == "error"


def test_the_api_key_is_not_visible_to_commands(ctx, monkeypatch):
    monkeypatch.setenv("LANE_API_KEY", "sk-secret")
    monkeypatch.setenv("LANE_VISIBLE", "yes")
    outcome = run('echo "[$LANE_API_KEY][$LANE_VISIBLE]"', ctx)
    assert outcome.output == "exit code: 0\n[][yes]\n"


def test_a_process_that_leaves_the_group_cannot_hold_the_call_open(ctx):
    started = time.monotonic()
    outcome = run("setsid sleep 20 & echo $!; echo done", ctx, timeout=5)
    try:
        assert outcome.status == "ok"
        assert outcome.output.splitlines()[2] == "done"
        assert time.monotonic() - started < terminal._READER_GRACE_S + 2
    finally:
        os.kill(int(outcome.output.splitlines()[1]), 9)


@pytest.mark.parametrize("given", [{}, {"timeout": 500}])
def test_the_tool_time_limit_caps_the_default_and_any_asked_timeout(tmp_path, given):
    """LANE_TOOL_TIMEOUT=1: `sleep 20` without a timeout, or asking for 500 s, stops at 1 s."""
    context = make_tool_context(tmp_path / "home", tool_timeout_s=1.0)
    started = time.monotonic()
    outcome = run("sleep 20", context, **given)
    assert outcome.status == "error" and "timed out after 1 s" in outcome.output
    assert time.monotonic() - started < 5
    context.store.close()


def test_a_stopped_call_kills_its_command_group_at_once(ctx):
    """ToolContext.stop is what a turn whose client left sets: the command and its children end."""
    ws = ctx.settings.workspace
    threading.Timer(0.5, ctx.stop.set).start()
    started = time.monotonic()
    outcome = run("sleep 30 & echo $! > child.pid; sleep 30", ctx, timeout=60)
    assert outcome.status == "error" and "stopped" in outcome.output
    assert time.monotonic() - started < 5
    assert gone_within(int((ws / "child.pid").read_text()), 2)
    assert not ctx.stop.is_set()  # the next call starts unstopped


def test_where_the_lane_keeps_its_key_and_store_is_not_in_the_environment(ctx, monkeypatch):
    for name in ("LANE_HOME", "LANE_DB", "LANE_CONFIG"):
        monkeypatch.setenv(name, "/somewhere")
    outcome = run('echo "[$LANE_HOME][$LANE_DB][$LANE_CONFIG]"', ctx)
    assert outcome.output == "exit code: 0\n[][][]\n"


needs_landlock = pytest.mark.skipif(not confine.available(), reason="this kernel offers no Landlock")


@needs_landlock
def test_commands_cannot_read_or_write_the_lanes_own_files(tmp_path):
    home = tmp_path / "home"
    with tool_context(home) as context:
        context.store.add_message("s1", "user", "my secret codename")
        (home / "api_key").write_text("sk-secret\n")
        (home / "workspace").mkdir(exist_ok=True)
        outcome = run("cat ../api_key; grep -c codename ../state.db ../state.db-wal; echo x >> ../state.db; "
                      "cd .. && cat api_key; echo mine > workspace/note.txt && cat workspace/note.txt", context)
    assert outcome.status == "ok"
    assert "sk-secret" not in outcome.output and "codename" not in outcome.output
    assert outcome.output.count("Permission denied") == 5
    assert outcome.output.rstrip().endswith("mine")
    assert (home / "api_key").read_text() == "sk-secret\n"


@needs_landlock
def test_a_store_outside_the_home_is_out_of_reach_too(tmp_path):
    elsewhere = tmp_path / "data" / "lane.db"
    with tool_context(tmp_path / "home", db=elsewhere) as context:
        context.store.add_message("s1", "user", "my secret codename")
        (tmp_path / "data" / "notes.txt").write_text("readable\n")
        outcome = run(f"cat {elsewhere} {elsewhere}-wal | grep -c codename; cat {tmp_path}/data/notes.txt", context)
    assert outcome.output.count("Permission denied") == 2 and "readable" in outcome.output


def test_confinement_can_be_turned_off(tmp_path):
    with tool_context(tmp_path / "home", terminal_confine=False) as context:
        (tmp_path / "home" / "api_key").write_text("sk-secret\n")
        assert "sk-secret" in run("cat ../api_key", context).output
