"""Codex CLI (`codex exec`) against the lane: three small tasks, judged on disk or from the answer.

    .venv/bin/python scripts/bench/codex_cli.py --scripted       # wiring check, scripted model (seconds)
    OMP_WAIT_POLICY=PASSIVE .venv/bin/python scripts/bench/codex_cli.py   # the default model, two threads

Codex (npm `@openai/codex`, installed on first use into ~/.cache/fallback-lane/agents/codex) runs
as `codex exec --json TASK` in a throwaway CODEX_HOME whose config.toml makes the lane a model
provider (`wire_api = "responses"`: POST /v1/responses, streaming, with Codex's own tools: proxy
mode). Commands run without Codex's sandbox (`--dangerously-bypass-approvals-and-sandbox`) in a
fresh working folder per phase. The three tasks (scripts/bench/agent_lane.py `three_tasks`) run on
a cold lane; then the lane restarts (same state folder) and the first task runs again. Each row:
the verdict (on disk, or the answer against a value only the tool could give), wall time, Codex's
own record (its commands run, input tokens, an error it reported), and from the lane's store the
model calls, peak prompt tokens and the calls returned to Codex (with how many got their result
back).
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

PACKAGE = "@openai/codex@0.169.0"
COLUMNS = ["phase", "task", "verdict", "wall_s", "commands", "input_tokens", "error", "lane_sessions",
           "model_calls", "peak_prompt", "returned", "answered", "answer"]

CONFIG = """\
model = "fallback-lane"
model_provider = "lane"
approval_policy = "never"

[model_providers.lane]
name = "fallback lane"
base_url = "{url}/v1"
wire_api = "responses"
env_key = "LANE_API_KEY"
stream_idle_timeout_ms = {timeout_ms}
request_max_retries = 0
stream_max_retries = 0
"""


def run_task(codex: Path, lane: Lane, task: Task, workdir: Path, timeout_s: float) -> dict[str, Any]:
    """One `codex exec` run of `task` in `workdir`, in a throwaway CODEX_HOME: the client's side of its row."""
    home = Path(tempfile.mkdtemp(prefix="codex-home-"))
    (home / "config.toml").write_text(CONFIG.format(url=lane.url, timeout_ms=int(timeout_s * 1000)))
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "CODEX_HOME": str(home),
           "LANE_API_KEY": os.environ.get("LANE_API_KEY", "lane-local-key")}
    wall, stdout, stderr = run_client([str(codex), "exec", "--json", "--skip-git-repo-check",
                                       "--dangerously-bypass-approvals-and-sandbox", task.prompt],
                                      env, lane, task, workdir, timeout_s)
    events = _events(stdout)
    answer = next((e["item"].get("text", "") for e in reversed(events)
                   if e.get("type") == "item.completed" and e["item"].get("type") == "agent_message"), "")
    commands = [e["item"].get("command", "") for e in events
                if e.get("type") == "item.completed" and e["item"].get("type") == "command_execution"]
    usage = next((e.get("usage") or {} for e in reversed(events) if e.get("type") == "turn.completed"), {})
    errors = [str(e.get("message") or (e.get("error") or {}).get("message", "")) for e in events
              if e.get("type") in ("error", "turn.failed")]
    return {"wall_s": f"{wall:.1f}", "commands": len(commands), "input_tokens": usage.get("input_tokens", "-"),
            "error": (errors[-1] if errors else ("" if events else stderr.strip()[-80:]))[:80] or "-",
            "answer": answer}


def _events(stdout: str) -> list[dict[str, Any]]:
    """Codex's own record: the JSON events `codex exec --json` printed."""
    events = []
    for line in stdout.splitlines():
        try:
            parsed = json.loads(line)
        except ValueError:
            continue
        if isinstance(parsed, dict):
            events.append(parsed)
    return events


def main(argv: list[str] | None = None) -> int:
    return task_bench(__doc__, argv, ("codex", PACKAGE, "codex"), COLUMNS, run_task)


if __name__ == "__main__":
    sys.exit(main())
