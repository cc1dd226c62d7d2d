"""Claude Code (headless) against the lane: three small tasks, judged on disk or from the answer.

    .venv/bin/python scripts/bench/claude_code.py --scripted     # wiring check, scripted model (seconds)
    OMP_WAIT_POLICY=PASSIVE .venv/bin/python scripts/bench/claude_code.py   # the default model, two threads

Claude Code (npm `@anthropic-ai/claude-code`, installed on first use into
~/.cache/fallback-lane/agents/claude-code) runs as `claude -p TASK --output-format json` in a
throwaway HOME and a fresh working folder, with ANTHROPIC_BASE_URL at the lane's shim and
`--allowedTools Write,Edit,Bash`. It sends POST /v1/messages?beta=true, streaming, with its own
tools: proxy mode. The three tasks (scripts/bench/agent_lane.py `three_tasks`) run on a cold lane;
then the lane restarts (same state folder) and the first task runs again. Each row: the verdict
(on disk, or the answer against a value only the tool could give), wall time, Claude Code's own
turn count and is_error, and from the lane's store the model calls, peak prompt tokens and the
calls returned to Claude Code (with how many got their result back).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from agent_lane import (  # noqa: E402
    Lane,
    Task,
    run_client,
    task_bench,
)

PACKAGE = "@anthropic-ai/claude-code@2.1.328"
COLUMNS = ["phase", "task", "verdict", "wall_s", "turns", "is_error", "lane_sessions", "model_calls",
           "peak_prompt", "returned", "answered", "answer"]


def run_task(claude: Path, lane: Lane, task: Task, workdir: Path, timeout_s: float) -> dict[str, Any]:
    """One `claude -p` run of `task` in `workdir`, in a throwaway HOME: the client's side of its row."""
    home = Path(tempfile.mkdtemp(prefix="claude-home-"))
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "ANTHROPIC_BASE_URL": lane.url,
           "ANTHROPIC_API_KEY": os.environ.get("LANE_API_KEY", "lane-local-key"),
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
           "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1",
           "API_TIMEOUT_MS": str(int(timeout_s * 1000))}
    wall, stdout, stderr = run_client([str(claude), "-p", task.prompt, "--output-format", "json",
                                       "--allowedTools", "Write,Edit,Bash"], env, lane, task, workdir, timeout_s)
    record = _client_record(stdout)
    return {"wall_s": f"{wall:.1f}", "turns": record.get("num_turns", "-"),
            "is_error": record.get("is_error", stderr.strip()[-80:] or "?"),
            "answer": str(record.get("result", ""))}


def _client_record(stdout: str) -> dict[str, Any]:
    """Claude Code's own JSON result (the last JSON line it printed), or {}."""
    for line in reversed(stdout.strip().splitlines()):
        try:
            parsed = json.loads(line)
        except ValueError:
            continue
        if isinstance(parsed, dict):
            return parsed
    return {}


def main(argv: list[str] | None = None) -> int:
    return task_bench(__doc__, argv, ("claude-code", PACKAGE, "claude"), COLUMNS, run_task)


if __name__ == "__main__":
    sys.exit(main())
