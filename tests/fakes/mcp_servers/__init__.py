"""MCP servers for tests: a scripted raw JSON-RPC server, and where the real reference servers live.

The real servers (`mcp-server-time`, `mcp-server-git`, from tests/requirements.txt) are console
scripts installed next to the test interpreter.
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path
from typing import Any, Callable

RAW_SERVER = Path(__file__).with_name("raw_server.py")


def raw_server(*flags: str, **settings: Any) -> dict[str, Any]:
    """An `mcp_servers` entry that runs the scripted raw server over stdio."""
    return {"command": sys.executable, "args": [str(RAW_SERVER), *flags], **settings}


def real_server_command(script: str) -> str | None:
    """The path of an installed reference server, or None when it is not installed."""
    beside = Path(sys.executable).with_name(script)
    return str(beside) if beside.exists() else shutil.which(script)


def wait_until(predicate: Callable[[], Any], timeout: float = 20.0, step: float = 0.05) -> Any:
    """Poll until predicate() is truthy and return its value; fail loudly on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"condition not met within {timeout} s")
