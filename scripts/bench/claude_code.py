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

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from agent_lane import (  # noqa: E402
    Lane, Task, add_agent_lane_options, agent_lane, all_sessions, npm_client, print_table,
    session_record, sessions_since, three_tasks,
)

PACKAGE = "@anthropic-ai/claude-code@2.1.328"
COLUMNS = ["phase", "task", "verdict", "wall_s", "turns", "is_error", "lane_sessions", "model_calls",
           "peak_prompt", "returned", "answered", "answer"]


def run_task(claude: Path, lane: Lane, task: Task, workdir: Path, timeout_s: float) -> dict[str, Any]:
    """One `claude -p` run of `task` in `workdir`; its row."""
    home = Path(tempfile.mkdtemp(prefix="claude-home-"))
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "ANTHROPIC_BASE_URL": lane.url,
           "ANTHROPIC_API_KEY": os.environ.get("LANE_API_KEY", "lane-local-key"),
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
           "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1", "API_TIMEOUT_MS": str(int(timeout_s * 1000))}
    before = all_sessions(lane.db)
    lane.begin(task.command)
    started = time.monotonic()
    try:
        done = subprocess.run([str(claude), "-p", task.prompt, "--output-format", "json",
                               "--allowedTools", "Write,Edit,Bash"],
                              cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout_s)
        stdout, stderr = done.stdout, done.stderr
    except subprocess.TimeoutExpired as exc:
        stdout, stderr = str(exc.stdout or ""), "timeout"
    wall = time.monotonic() - started
    record = _client_record(stdout)
    answer = str(record.get("result", ""))
    row: dict[str, Any] = {"task": task.name, "verdict": "pass" if task.judge(workdir, answer) else "fail",
                           "wall_s": f"{wall:.1f}", "turns": record.get("num_turns", "-"),
                           "is_error": record.get("is_error", stderr.strip()[-80:] or "?"),
                           "answer": answer.replace("\n", " ")[:60]}
    sessions = sessions_since(lane.db, before)
    row["lane_sessions"] = len(sessions)
    records = [session_record(lane.db, s) for s in sessions]
    row["model_calls"] = sum(r["model_calls"] for r in records)
    row["peak_prompt"] = max((r["prompt_tokens"] for r in records), default=0)
    row["returned"] = ",".join(name for r in records for name in r["returned"]) or "-"
    row["answered"] = sum(r["answered"] for r in records)
    return row


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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    add_agent_lane_options(parser)
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per task (default 1800)")
    parser.add_argument("--seed", type=int, default=int(time.time()), help="random values of the tasks")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    claude = npm_client("claude-code", PACKAGE, "claude")
    rows = []
    with agent_lane(parser, args) as lane:
        for phase in ("cold", "restarted"):
            workdir = Path(tempfile.mkdtemp(prefix=f"claude-{phase}-"))
            tasks = three_tasks(workdir, args.seed)
            for task in tasks if phase == "cold" else tasks[:1]:
                rows.append({"phase": phase, **run_task(claude, lane, task, workdir, args.timeout)})
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
            if phase == "cold":
                lane.restart()
        rows.append({"phase": "store", "task": str(lane.db)})
    print_table(rows, COLUMNS)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0 if all(r.get("verdict") == "pass" for r in rows[:-1]) else 1


if __name__ == "__main__":
    sys.exit(main())
