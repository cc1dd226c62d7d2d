"""`run_python`: a Python snippet run in the workspace, under the terminal's rules.

The snippet is written to a private temporary file and run with the lane's own interpreter in
isolated mode (-I: no user site-packages, no PYTHONPATH) through the `terminal` tool itself, so it
gets exactly the terminal's workspace, timeout, process-group kill and output cap.
"""

from __future__ import annotations

import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

from . import terminal
from .base import Tool, ToolContext, ToolError, object_schema, with_plain_floats

MAX_CODE_CHARS = 100_000

_TERMINAL = next(tool for tool in terminal.TOOLS if tool.name == "terminal")


def _run_python(arguments: dict[str, Any], ctx: ToolContext) -> str:
    code: str = arguments["code"]
    if not code.strip():
        raise ToolError("code is empty")
    if len(code) > MAX_CODE_CHARS:
        raise ToolError(f"code is longer than {MAX_CODE_CHARS} characters; write it to a file instead")
    with tempfile.TemporaryDirectory(prefix="lane-python-") as folder:
        script = Path(folder) / "snippet.py"
        script.write_text(code, encoding="utf-8")
        command = f"{shlex.quote(sys.executable)} -I {shlex.quote(str(script))}"
        terminal_arguments: dict[str, Any] = {"command": command}
        if "timeout" in arguments:
            terminal_arguments["timeout"] = arguments["timeout"]
        return with_plain_floats(_TERMINAL.run(terminal_arguments, ctx))


TOOLS: list[Tool] = [
    Tool(
        name="run_python",
        description="Run a Python 3 script in the workspace and return its exit code and output "
                    "(print what you want to see). Standard library available; killed on timeout.",
        parameters=object_schema(
            {
                "code": {"type": "string", "description": "The Python source to run."},
                "timeout": {"type": "number", "description": "Seconds before the run is killed."},
            },
            ["code"],
        ),
        run=_run_python,
    )
]
