"""`run_python`: a Python snippet run in the workspace, under the terminal's rules.

The snippet is written to a private temporary file and run with the lane's own interpreter in
isolated mode (-I: no user site-packages, no PYTHONPATH) through the `terminal` tool itself, so it
gets exactly the terminal's workspace, timeout, process-group kill and output cap. As in a Python
prompt, a snippet that ends with an expression prints its value.
"""

from __future__ import annotations

import ast
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

from . import terminal
from .base import Tool, ToolContext, ToolError, code_spans, object_schema, with_plain_floats

MAX_CODE_CHARS = 100_000

_TERMINAL = next(tool for tool in terminal.TOOLS if tool.name == "terminal")


def shown_last(code: str) -> str:
    """The snippet, printing the value of its last statement when that is an expression other than
    a call of print (None is not printed), as a Python prompt shows it: seen on the 1.5B model,
    `sum(range(10))` and `len(words)` as a whole snippet, which prints nothing. Code that does not
    parse is left as it is, for the interpreter to report."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code
    last = tree.body[-1] if tree.body else None
    if not isinstance(last, ast.Expr) or (isinstance(last.value, ast.Call) and isinstance(last.value.func, ast.Name)
                                          and last.value.func.id == "print"):
        return code
    lines = code.splitlines()
    head = "\n".join(lines[:last.lineno - 1] + [lines[last.lineno - 1][:last.col_offset]])
    expression = ast.get_source_segment(code, last.value) or ast.unparse(last.value)
    return f"{head}__value = ({expression})\nif __value is not None:\n    print(__value)\n"  # lines keep their numbers


def _run_python(arguments: dict[str, Any], ctx: ToolContext) -> str:
    code: str = arguments["code"]
    if not code.strip():
        raise ToolError("code is empty")
    if len(code) > MAX_CODE_CHARS:
        raise ToolError(f"code is longer than {MAX_CODE_CHARS} characters; write it to a file instead")
    with tempfile.TemporaryDirectory(prefix="lane-python-") as folder:
        script = Path(folder) / "snippet.py"
        script.write_text(shown_last(code), encoding="utf-8")
        command = f"{shlex.quote(sys.executable)} -I {shlex.quote(str(script))}"
        terminal_arguments: dict[str, Any] = {"command": command}
        if "timeout" in arguments:
            terminal_arguments["timeout"] = arguments["timeout"]
        return with_plain_floats(_TERMINAL.run(terminal_arguments, ctx))


def python_or_none_given(request: str) -> bool:
    """Whether the message may want Python run: it quotes no code, or some code it quotes is
    Python. Code that does not parse as Python fails as a script: seen on the 1.5B model, "run
    `echo $((6*7))` in the shell" ran run_python with that line and got a SyntaxError, in German,
    Spanish and French (the six steps, 2026-11-29). (Much shell parses as Python too, `df -h`
    and `uname -r`: those are still offered.)"""
    quoted = code_spans(request)
    return not quoted or any(_parses(code) for code in quoted)


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return True


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
        wanted_by=python_or_none_given,
    )
]
