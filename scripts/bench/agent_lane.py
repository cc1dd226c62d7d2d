"""Shared by the benchmarks that run a real agent client (Claude Code, Codex, Hermes) against the
lane: the lane itself (a real model through `lane up`, or the scripted model of
tests/fakes/agent_task_models.py behind a real `lane shim` for a quick wiring check), its restart,
what the lane's store recorded for a session, clients installed into their own cache folder, and
the table every such benchmark prints.

The client is always a real program in a throwaway HOME; only the model may be scripted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from lane_run import ROOT, RunningLane, add_lane_options, free_port, lane_process, lane_settings, lane_up

from tests.fakes.agent_task_models import ShellTasks  # noqa: E402

AGENTS_CACHE = Path(os.environ.get("LANE_AGENTS_CACHE", Path.home() / ".cache" / "fallback-lane" / "agents"))


def add_agent_lane_options(parser: argparse.ArgumentParser) -> None:
    """--scripted (the wiring check) or the real model's options of lane_run."""
    parser.add_argument("--scripted", action="store_true",
                        help="serve the scripted model (tests/fakes/agent_task_models.py) behind a real "
                             "`lane shim`: checks the wiring in seconds, judges no model")
    parser.add_argument("--delay", type=float, default=0.0, metavar="S",
                        help="with --scripted: every model reply waits S seconds, as a slow model's "
                             "would (do the client's timeouts and the lane's keep-alives hold?)")
    add_lane_options(parser)


def npm_client(name: str, package: str, binary: str) -> Path:
    """The client's executable, installed with npm into AGENTS_CACHE/NAME on first use (never into
    the project's venv or node_modules)."""
    folder = AGENTS_CACHE / name
    path = folder / "node_modules" / ".bin" / binary
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(folder), package],
                       check=True, stdout=sys.stderr)
    return path


@dataclass
class Lane:
    """A lane being benchmarked: its URL, state folder and store; `restart()` stops it and starts
    it again on the same state folder (store and saved prefixes kept)."""

    start: Callable[[Path | None], contextlib.AbstractContextManager[RunningLane]]
    fake: Any = None
    running: RunningLane | None = None
    _stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    @property
    def url(self) -> str:
        assert self.running
        return self.running.url

    @property
    def db(self) -> Path:
        assert self.running
        return self.running.home / "state.db"

    def up(self) -> "Lane":
        self.running = self._stack.enter_context(self.start(self.running.home if self.running else None))
        return self

    def restart(self) -> None:
        self._stack.close()
        self._stack = contextlib.ExitStack()
        self.up()

    def close(self) -> None:
        self._stack.close()

    def begin(self, command: str) -> None:
        """Tell the scripted model (if any) which command the next task needs."""
        if self.fake:
            self.fake.begin(command)


@contextlib.contextmanager
def agent_lane(parser: argparse.ArgumentParser, args: argparse.Namespace,
               env: dict[str, str] | None = None, fake: Any = None) -> Iterator[Lane]:
    """The lane the options ask for, up until the block ends. `fake`: the scripted model's policy
    object for --scripted (`model()`, `begin(command)`); the shell tasks' by default."""
    extra = dict(env or {})
    if args.scripted:
        fake = fake or ShellTasks()
        fake.delay_s = args.delay
        with fake.model() as model:
            lane = Lane(lambda home: _scripted_shim(model.url, home, extra), fake).up()
            try:
                yield lane
            finally:
                lane.close()
        return
    settings = {**lane_settings(parser, args), **extra}
    lane = Lane(lambda home: lane_up(model=args.model, ctx=args.ctx, threads=args.threads,
                                     env=settings, home=home)).up()
    try:
        yield lane
    finally:
        lane.close()


@contextlib.contextmanager
def _scripted_shim(model_url: str, home: Path | None, env: dict[str, str]) -> Iterator[RunningLane]:
    home = home or Path(tempfile.mkdtemp(prefix="lane-agents-"))
    port = free_port()
    config = home / "none.yaml"
    config.write_text("{}\n")
    environment = {**os.environ, "LANE_HOME": str(home), "LANE_CONFIG": str(config),
                   "LANE_TOOL_EXAMPLES": "false", "PYTHONPATH": str(ROOT), **env}
    environment.pop("LANE_DB", None)
    log = home / f"shim-{port}.log"
    with lane_process("lane shim", ["shim", "--llm-url", model_url, "--port", str(port), "--home", str(home)],
                      environment, log, f"http://127.0.0.1:{port}/health"):
        yield RunningLane(f"http://127.0.0.1:{port}", home, environment, log, model_url)


def session_record(db: Path, session: str) -> dict[str, Any]:
    """What the lane's store holds for one session: its requests' model calls and tokens, the calls
    returned to the client (and answered), and the tools the lane itself ran."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        def one(sql: str) -> Any:
            return conn.execute(sql, (session,)).fetchone()[0]
        return {
            "model_calls": one("SELECT count(*) FROM messages WHERE session_id=? AND role='assistant'"
                               " AND prompt_tokens IS NOT NULL")
                           + one("SELECT count(*) FROM lane_calls WHERE session_id=? AND purpose != 'held'"),
            "prompt_tokens": one("SELECT coalesce(max(prompt_tokens), 0) FROM messages WHERE session_id=?"),
            "returned": [r[0] for r in conn.execute(
                "SELECT tool_name FROM returned_calls WHERE session_id=? ORDER BY id", (session,))],
            "answered": one("SELECT count(result_message_id) FROM returned_calls WHERE session_id=?"),
            "lane_ran": [r[0] for r in conn.execute(
                "SELECT tool_name FROM tool_executions WHERE session_id=? AND status='ok' ORDER BY id",
                (session,))],
        }


def sessions_since(db: Path, before: set[str]) -> list[str]:
    """Sessions the store gained since `before` (a client that sends no session id starts one per
    request, or keeps one per conversation)."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        rows = conn.execute("SELECT id FROM sessions ORDER BY created_at, rowid").fetchall()
    return [r[0] for r in rows if r[0] not in before]


def all_sessions(db: Path) -> set[str]:
    if not db.exists():
        return set()
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        return {r[0] for r in conn.execute("SELECT id FROM sessions")}


def print_table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    """One line per row under a header; missing cells print as '-'."""
    cells = [[str(row.get(c, "-")) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) if cells else len(c) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)))
    for r in cells:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)))


@dataclass(frozen=True)
class Task:
    """One small task for a coding agent, judged on disk or from its answer, never from its claims.

    `command` is what the scripted model runs for it (the wiring check only)."""

    name: str
    prompt: str
    command: str
    judge: Callable[[Path, str], bool]


def three_tasks(workdir: Path, seed: int) -> list[Task]:
    """The three tasks of the agent benchmarks, set up in `workdir`: create a file with given
    content; report the line count of a given file; run a shell command and report what it prints.
    Values are random per run (`seed`), so an answer from the model's own head fails."""
    import random
    import re

    rng = random.Random(seed)
    word = f"lane-{rng.randrange(10**5, 10**6)}"
    lines = rng.randrange(7, 40)
    (workdir / "data.txt").write_text("".join(f"row {i} {rng.random():.6f}\n" for i in range(lines)))
    token = f"{rng.randrange(16**8):08x}"
    (workdir / ".token").write_text(token + "\n")

    def has_number(answer: str, number: int) -> bool:
        return str(number) in re.findall(r"\d+", answer)

    return [
        Task("write_file", f"Create a file named notes.txt in the current directory whose only line is: {word}",
             f"printf '%s\\n' '{word}' > notes.txt",
             lambda wd, _answer: (wd / "notes.txt").is_file()
             and (wd / "notes.txt").read_text().strip() == word),
        Task("line_count", "How many lines does the file data.txt in the current directory have? "
             "Reply with just the number.", "wc -l < data.txt",
             lambda _wd, answer: has_number(answer, lines)),
        Task("run_command", "Run the shell command `cat .token | rev` and tell me exactly what it prints.",
             "cat .token | rev", lambda _wd, answer: token[::-1] in answer),
    ]


def run_client(argv: list[str], env: dict[str, str], lane: Lane, task: Task, workdir: Path,
               timeout_s: float) -> tuple[float, str, str]:
    """Run one client process on `task` in `workdir`: (wall seconds, stdout, stderr)."""
    lane.begin(task.command)
    started = time.monotonic()
    try:
        done = subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout_s)
        stdout, stderr = done.stdout, done.stderr
    except subprocess.TimeoutExpired as exc:
        stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else str(exc.stdout or "")
        stderr = "timeout"
    return time.monotonic() - started, stdout, stderr


def store_columns(lane: Lane, before: set[str]) -> dict[str, Any]:
    """The store's side of a row: the sessions a client run made, their model calls, peak prompt
    tokens, the calls returned to the client and how many of them got their result back."""
    records = [session_record(lane.db, s) for s in sessions_since(lane.db, before)]
    return {"lane_sessions": len(records),
            "model_calls": sum(r["model_calls"] for r in records),
            "peak_prompt": max((r["prompt_tokens"] for r in records), default=0),
            "returned": ",".join(name for r in records for name in r["returned"]) or "-",
            "answered": sum(r["answered"] for r in records),
            "lane_ran": ",".join(name for r in records for name in r["lane_ran"]) or "-"}


def run_phases(lane: Lane, seed: int, prefix: str,
               run: Callable[[Task, Path], dict[str, Any]]) -> list[dict[str, Any]]:
    """The three tasks on the lane as started (the first request cold), then a restart of the lane
    (same state folder) and the first task again; one row per run, printed as it ends."""
    rows: list[dict[str, Any]] = []
    for phase in ("cold", "restarted"):
        workdir = Path(tempfile.mkdtemp(prefix=f"{prefix}-{phase}-"))
        tasks = three_tasks(workdir, seed)
        for task in tasks if phase == "cold" else tasks[:1]:
            before = all_sessions(lane.db)
            row = {"phase": phase, "task": task.name, **run(task, workdir)}
            row["verdict"] = "pass" if task.judge(workdir, str(row.get("answer", ""))) else "fail"
            row.update(store_columns(lane, before))
            row["answer"] = str(row.get("answer", "")).replace("\n", " ")[-60:]
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
        if phase == "cold":
            lane.restart()
    return rows


def finish(rows: list[dict[str, Any]], columns: list[str], lane: Lane, json_path: Path | None) -> int:
    """Print the table (and the store's path), write the rows as JSON; 0 when every task passed."""
    print_table(rows, columns)
    print(f"store: {lane.db}")
    if json_path:
        json_path.write_text(json.dumps(rows, indent=1))
    return 0 if rows and all(r.get("verdict") == "pass" for r in rows) else 1


def task_bench(doc: str, argv: list[str] | None, client: tuple[str, str, str], columns: list[str],
               run_task: Callable[[Path, Lane, Task, Path, float], dict[str, Any]]) -> int:
    """The main of a three-task client bench (claude_code.py, codex_cli.py): `client` is the npm
    name, package and binary; `run_task(binary, lane, task, workdir, timeout_s)` runs one task."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=doc)
    add_agent_lane_options(parser)
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per task (default 1800)")
    parser.add_argument("--seed", type=int, default=int(time.time()), help="random values of the tasks")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    binary = npm_client(*client)
    with agent_lane(parser, args) as lane:
        rows = run_phases(lane, args.seed, client[0].split("-")[0],
                          lambda task, workdir: run_task(binary, lane, task, workdir, args.timeout))
        return finish(rows, columns, lane, args.json)
