"""The real agent clients (Claude Code, Codex CLI, Hermes Agent) against a real `lane shim` with the
scripted model: every request shape they send, the calls the lane returns to them, their tool
results coming back, and the store's rows. Each runs only where its client is already installed in
~/.cache/fallback-lane/agents (the benchmark installs it on first use: `--scripted` once)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bench_scripts import bench_script

pytestmark = pytest.mark.slow


def installed(path: str) -> Path:
    with bench_script("agent_lane") as lane:
        binary = Path(lane.AGENTS_CACHE) / path
    if not binary.exists():
        pytest.skip(f"{binary} is not installed (run its benchmark with --scripted once)")
    return binary


@pytest.mark.parametrize(("script", "binary", "returned"), [
    ("claude_code", "claude-code/node_modules/.bin/claude", "Bash"),
    ("codex_cli", "codex/node_modules/.bin/codex", "exec_command"),
])
def test_coding_agent_runs_three_tasks_through_the_lane(script: str, binary: str, returned: str,
                                                        tmp_path: Path) -> None:
    installed(binary)
    report = tmp_path / "rows.json"
    with bench_script(script) as bench:
        code = bench.main(["--scripted", "--timeout", "120", "--json", str(report)])
    rows = json.loads(report.read_text())
    assert code == 0, rows
    assert [(r["phase"], r["task"], r["verdict"]) for r in rows] == [
        ("cold", "write_file", "pass"), ("cold", "line_count", "pass"), ("cold", "run_command", "pass"),
        ("restarted", "write_file", "pass")]
    # The lane returned the client's own shell tool, and its result came back, in every task; the
    # lane ran none of its own tools for a proxy client.
    assert all(r["returned"] == returned and r["answered"] == 1 and r["lane_ran"] == "-" for r in rows)


def test_hermes_six_steps_through_the_lane_and_as_its_fallback(tmp_path: Path) -> None:
    installed("hermes/venv/bin/hermes")
    report = tmp_path / "rows.json"
    with bench_script("hermes_agent") as bench:
        code = bench.main(["--scripted", "--arms", "core,fallback", "--timeout", "120", "--json", str(report)])
    rows = {r["arm"]: r for r in json.loads(report.read_text())}
    assert code == 0, rows
    assert rows["core"]["verdicts"] == "PPPPPP" and rows["core"]["lane_model_calls"] > 0
    # A dead primary: the turn completed on the lane, which recorded it.
    assert rows["fallback"]["verdicts"] == "P" and rows["fallback"]["lane_sessions"] >= 1
