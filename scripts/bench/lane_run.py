"""Shared by the benchmarks that run a real model through the lane: `lane_up` starts `lane up` in
a fresh state folder for as long as a block runs; `run_check` runs `lane check` against it and
returns the check's JSON report.

Every run gets its own LANE_HOME (store, memory, workspace), so runs never see each other's
memory or sessions, and the llm starts cold.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tool_pack_server import pack_servers  # noqa: E402  (scripts/bench, this script's folder)

from stack.launch import LaunchFailed, wait_healthy  # noqa: E402

# Serves real MCP tool schemas as the lane.yaml server `pack` (its tools read `pack__NAME`), or
# one catalog server's share of them (`--server github`).
TOOL_PACK_SERVER = Path(__file__).with_name("tool_pack_server.py")
DEFAULT_MODEL = ROOT / "models" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"


def add_lane_options(parser: argparse.ArgumentParser) -> None:
    """The options of every benchmark that runs a real model through `lane up`; the defaults are
    the conditions of issue 9 (Qwen2.5-Coder-1.5B, ctx 16384, two threads, LANE_MAX_TOKENS=1024)."""
    parser.add_argument("--model", default=str(DEFAULT_MODEL))
    parser.add_argument("--ctx", type=int, default=16384)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=1024, help="LANE_MAX_TOKENS")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="an extra LANE_* setting for the lane, e.g. LANE_PROMOTE_TOOLS=0")


def lane_settings(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, str]:
    """The LANE_* settings those options give; stops with how to fetch the model when it is missing."""
    if not Path(args.model).is_file():
        parser.error(f"{args.model} is missing; scripts/fetch_model.sh --qwen-coder-1.5b fetches it")
    return {"LANE_MAX_TOKENS": str(args.max_tokens), **dict(item.split("=", 1) for item in args.env)}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def tool_pack_config(home: Path, count: int, *, by_server: bool = False) -> Path:
    """A lane.yaml in `home` whose MCP server `pack` serves `count` real tool schemas, so both A/B
    arms carry a deferred set as large as a real deployment's; its path, for LANE_CONFIG. With
    `by_server`, the same tools come from one server per catalog server, named like it."""
    def server(*only: str) -> dict[str, Any]:
        return {"command": sys.executable,
                "args": [str(TOOL_PACK_SERVER), "--count", str(count), *only]}

    servers = ({name: server("--server", name) for name in pack_servers(count)} if by_server
               else {"pack": server()})
    config = home / "lane.yaml"
    config.write_text(yaml.safe_dump({"mcp_servers": servers}))
    return config


@dataclass(frozen=True)
class RunningLane:
    url: str
    home: Path
    env: dict[str, str]
    log: Path
    llm_url: str = ""  # the llm service's OpenAI base URL (…/v1)


@contextlib.contextmanager
def lane_up(*, model: str | None, ctx: int, threads: int, env: dict[str, str],
            log_dir: Path | None = None, tool_pack: int = 0,
            pack_by_server: bool = False, examples: Path | None = None,
            home: Path | None = None) -> Iterator[RunningLane]:
    """`lane up` in a fresh LANE_HOME until the block ends. `tool_pack` > 0 adds that many real
    MCP tool schemas (scripts/bench/tool_pack_server.py) as the deferred server `pack`, or as one
    server per catalog server with `pack_by_server`. `examples`: an example-request book the lane
    starts with, as if its model had written it (`lane examples --book`). `home`: a LANE_HOME to
    start again (a restart of a lane that served before) instead of a fresh one."""
    home = home or Path(tempfile.mkdtemp(prefix="lane-bench-"))
    if examples:
        shutil.copyfile(examples, home / "tool_examples.json")
    log_dir = log_dir or home
    llm_port, shim_port = free_port(), free_port()
    if tool_pack:
        config = tool_pack_config(home, tool_pack, by_server=pack_by_server)
    else:
        config = home / "none.yaml"
        config.write_text("{}\n")
    environment = {**os.environ, "LANE_HOME": str(home), "LANE_CONFIG": str(config),
                   "LANE_PORT": str(shim_port), **env}
    environment.pop("LANE_DB", None)
    up_args = ["up", "--llm-port", str(llm_port), "--port", str(shim_port), "--ctx", str(ctx),
               "--threads", str(threads), "--home", str(home)] + (["--model", model] if model else [])
    log_path = log_dir / f"lane-up-{shim_port}.log"
    with lane_process("lane up", up_args, environment, log_path,
                      f"http://127.0.0.1:{shim_port}/health", stop_s=30):
        yield RunningLane(f"http://127.0.0.1:{shim_port}", home, environment, log_path,
                          f"http://127.0.0.1:{llm_port}/v1")


@contextlib.contextmanager
def lane_process(name: str, args: list[str], env: dict[str, str], log_path: Path, health_url: str, *,
                 tree: Path = ROOT, stop_s: float = 15) -> Iterator[None]:
    """`python -m stack.cli ARGS` run from `tree` (first on the path, ahead of the project venv's
    editable install, so an older revision's tree runs its own code) until the block ends,
    entered once `health_url` answers; its output goes to `log_path`."""
    with log_path.open("w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "stack.cli", *args], cwd=tree, env=env,
                                stdout=log, stderr=subprocess.STDOUT)
        try:
            try:
                wait_healthy(name, health_url, proc, threading.Event(), 300)
            except LaunchFailed as exc:
                raise RuntimeError(f"{exc}:\n{log_path.read_text()[-2000:]}") from None
            yield
        finally:
            proc.terminate()
            try:
                proc.wait(stop_s)
            except subprocess.TimeoutExpired:
                proc.kill()


def run_check(*, model: str | None, ctx: int, threads: int, env: dict[str, str],
              check_args: list[str], step_timeout_s: int, log_dir: Path | None = None,
              tool_pack: int = 0) -> dict[str, Any]:
    """`lane up` + `lane check --json`; the check's report, with the llm/shim log path added."""
    with lane_up(model=model, ctx=ctx, threads=threads, env=env, log_dir=log_dir,
                 tool_pack=tool_pack) as lane:
        report_path = lane.home / "check.json"
        subprocess.run([sys.executable, "-m", "stack.cli", "check", "--url", lane.url,
                        "--db", str(lane.home / "state.db"), "--timeout", str(step_timeout_s),
                        "--json", str(report_path), *check_args],
                       cwd=ROOT, env=lane.env, check=False)
        report = json.loads(report_path.read_text())
    report["log"] = str(lane.log)
    report["db"] = str(lane.home / "state.db")
    return report


def arms_of(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{arm: arm report} whether the check ran one arm or both."""
    if "arms" in report:
        return report["arms"]
    return {report["arm"]: report}
