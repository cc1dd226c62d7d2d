"""The `terminal` tool: one shell command in the workspace, with a timeout and an output cap.

The command runs in its own session (process group) so that a timeout, and the end of the command,
can kill everything it started: no orphan keeps running, or keeps the output pipe open, after the
call returns (a child that starts a session of its own, `setsid`, escapes the group). Output is
read as it comes and only its head and tail are kept, so a command that prints gigabytes costs the
shim a fixed amount of memory. Its timeout is never above LANE_TOOL_TIMEOUT, and the command is
killed as soon as the turn tells it to stop (ToolContext.stop: its client left).
"""

from __future__ import annotations

import functools
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from ..config import Settings
from . import confine
from .base import Tool, ToolContext, ToolError, nothing, object_schema
from .files import workspace_root

log = logging.getLogger("lane.tools")

# Variables the model's commands have no business reading: the key, and where the lane keeps it
# and its store.
_HIDDEN_ENV = ("LANE_API_KEY", "LANE_HOME", "LANE_DB", "LANE_CONFIG")
_READER_GRACE_S = 2.0
# How often a running command's wait looks whether the turn asked it to stop.
_STOP_POLL_S = 0.05


class CappedOutput:
    """Keeps the first and last bytes of a stream, and how many bytes were dropped between."""

    def __init__(self, cap: int):
        self.head_cap = cap // 2
        self.tail_cap = cap - self.head_cap
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def feed(self, chunk: bytes) -> None:
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        self.tail += chunk
        excess = len(self.tail) - self.tail_cap
        if excess > 0:
            del self.tail[:excess]
            self.dropped += excess

    def text(self) -> str:
        head = self.head.decode("utf-8", "replace")
        tail = self.tail.decode("utf-8", "replace")
        if not self.dropped:
            return head + tail
        return f"{head}\n[... {self.dropped} bytes of output cut ...]\n{tail}"


def _pump(stream: IO[bytes], output: CappedOutput) -> None:
    """Reads until every writer has closed the pipe; the reader owns the pipe and closes it."""
    fd = stream.fileno()
    try:
        for chunk in iter(lambda: os.read(fd, 65536), b""):
            output.feed(chunk)
    finally:
        stream.close()


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@functools.cache
def _landlock() -> bool:
    available = confine.available() > 0
    if not available:
        log.warning("this kernel offers no Landlock: terminal commands can read the lane's key and store "
                    "(README, security notes)")
    return available


def _confined(settings: Settings) -> list[str]:
    """The prefix that runs a command unable to read or write $LANE_HOME (the key, the store, the
    notes) or the store's files, the workspace excepted (confine.py); none where Landlock is
    missing or LANE_TERMINAL_CONFINE is off."""
    if not settings.terminal_confine or not _landlock():
        return []
    db = settings.db_path.resolve()
    protected = [settings.home.resolve(), *(Path(f"{db}{suffix}") for suffix in ("", "-wal", "-shm"))]
    options = [arg for path in protected for arg in ("--protect", str(path))]
    return [sys.executable, "-I", "-S", confine.__file__, *options,
            "--allow", str(workspace_root(settings)), "--"]


def _shell() -> list[str]:
    bash = shutil.which("bash")
    return [bash, "-c"] if bash else ["/bin/sh", "-c"]


# What a program prints when it wants an interactive terminal, which commands here never have
# (stdin is /dev/null, the output a pipe). Seen on the 1.5B model: `top` for "what's eating the CPU
# right now", which printed "top: failed tty get", was made again as it was, and the answer was
# made up.
_NEEDS_TTY = re.compile(r"failed tty get|not a tty|inappropriate ioctl for device|error opening terminal|"
                        r"output is not to a terminal|must be run from a terminal", re.IGNORECASE)


def _terminal(arguments: dict[str, Any], ctx: ToolContext) -> str:
    command: str = arguments["command"]
    if not command.strip():
        raise ToolError("command is empty")
    settings, stop = ctx.settings, ctx.stop
    # 0 (or less) means the default: small models fill every optional field, and write 0 for "none".
    requested = float(arguments.get("timeout") or 0)
    timeout = requested if requested > 0 else settings.terminal_timeout_s
    # Every tool's time limit (LANE_TOOL_TIMEOUT) caps the terminal's own maximum and default.
    most = min(settings.terminal_max_timeout_s, settings.tool_timeout_s)
    clamped = requested > most
    timeout = min(timeout, most)
    env = {k: v for k, v in os.environ.items() if k not in _HIDDEN_ENV}
    output = CappedOutput(settings.terminal_output_bytes)
    try:
        process = subprocess.Popen(
            [*_confined(settings), *_shell(), command],
            cwd=workspace_root(settings),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
    except OSError as exc:
        raise ToolError(f"could not start the shell: {exc}") from exc
    assert process.stdout is not None
    reader = threading.Thread(target=_pump, args=(process.stdout, output), daemon=True)
    reader.start()
    try:
        timed_out, stopped = _wait(process, timeout, stop)
    finally:
        # Whatever the command left running in its group goes too, or it would hold the pipe open.
        _kill_group(process)
        process.wait()
        # A process that left the group (setsid) may still hold the pipe: stop waiting for it.
        reader.join(_READER_GRACE_S)
    text = output.text() or nothing("no output")
    if stopped:
        raise ToolError(f"the command was stopped (the turn ended) and killed; output so far:\n{text}")
    if timed_out:
        raise ToolError(f"command timed out after {timeout:g} s and was killed; output so far:\n{text}")
    if process.returncode != 0 and _NEEDS_TTY.search(text):
        raise ToolError("the command wants an interactive terminal, which commands run here do not have: run "
                        "it non-interactively instead (e.g. `top -b -n 1`, `ps aux --sort=-%cpu | head`); "
                        f"it printed:\n{text}")
    note = f" (timeout lowered to the maximum, {timeout:g} s)" if clamped else ""
    return f"exit code: {process.returncode}{note}\n{text}"


def _wait(process: subprocess.Popen[bytes], timeout: float, stop: threading.Event) -> tuple[bool, bool]:
    """Waits for the command to end: (timed out, told to stop), at most one of them true."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            process.wait(timeout=max(0.0, min(_STOP_POLL_S, deadline - time.monotonic())))
            return False, False
        except subprocess.TimeoutExpired:
            if stop.is_set():
                return False, True
            if time.monotonic() >= deadline:
                return True, False


_NONZERO = re.compile(r"^exit code: -?[1-9]\d*\b")


def exited_nonzero(output: str) -> bool:
    """Whether a command's result (terminal's, run_python's) says it exited non-zero: it ran, and
    what it was for may not have happened."""
    return _NONZERO.match(output) is not None


TOOLS: list[Tool] = [
    Tool(
        name="terminal",
        description="Run a shell command on this computer and return its output: hostname, disk, folders, versions.",
        parameters=object_schema(
            {
                "command": {"type": "string"},
                "timeout": {"type": "number",
                            "description": "Seconds before the command is killed (0: the default)."},
            },
            ["command"],
        ),
        run=_terminal,
    )
]
