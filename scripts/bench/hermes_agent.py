"""Hermes Agent against the lane: the six steps through Hermes's API server, judged from Hermes's store.

    .venv/bin/python scripts/bench/hermes_agent.py --scripted                 # wiring check (a minute)
    OMP_WAIT_POLICY=PASSIVE .venv/bin/python scripts/bench/hermes_agent.py --arms core   # default model

Hermes Agent (PyPI `hermes-agent`, installed on first use into its own venv under
~/.cache/fallback-lane/agents/hermes) runs `hermes gateway run` with its OpenAI-compatible API
server in a throwaway HERMES_HOME per arm; config.yaml names the model as a custom provider
(`context_length` 65536: Hermes refuses a smaller window). The six steps of `lane check`
(stack/check/scenario.py) go to Hermes's /v1/chat/completions in one `X-Hermes-Session-Id`, after
the seed phrase in a session of its own. Arms:

* `raw`: Hermes's default API-server toolset, straight at the llm service (`lane llm`, no shim);
* `full`: the same toolset at the lane's shim (proxy mode: the lane returns Hermes's tool calls);
* `core`: a reduced core set (`platform_toolsets`: terminal, file, memory, session_search, todo) at
  the shim;
* `fallback`: a dead primary provider and the lane in `fallback_providers`: one turn, which must
  complete on the lane (the answer, and the lane's store holding the turn).

A step passes by the rules of `lane check`, read from Hermes's own state.db: a call counts when
its id has a `role='tool'` row whose result is not an error. Each row: the arm, steps passed, the
verdict of each step, wall time, Hermes's API calls and input tokens, and the lane's sessions and
model calls from its store.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import secrets
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from agent_lane import (  # noqa: E402
    AGENTS_CACHE,
    Lane,
    add_agent_lane_options,
    agent_lane,
    all_sessions,
    print_table,
    session_record,
    sessions_since,
)
from lane_run import free_port  # noqa: E402

from stack.check.scenario import DEFAULT_PROMPTS, SEED_PROMPT, Markers  # noqa: E402
from tests.fakes.agent_task_models import HermesSixSteps  # noqa: E402

PACKAGE = "hermes-agent==0.19.0"
ARMS = ("raw", "full", "core", "fallback")
CORE_TOOLSETS = ["terminal", "file", "memory", "session_search", "todo"]
# Hermes's tools a summary may name (its API-server toolset's main ones); step 6 checks each named
# one ran in the session.
HERMES_TOOLS = ("memory", "terminal", "session_search", "read_file", "write_file", "patch", "search_files",
                "todo", "execute_code", "process", "web_search", "web_extract", "delegate_task",
                "skills_list", "skill_view", "cronjob")
HERMES_KEY = "bench-" + secrets.token_hex(12)  # Hermes wants an API-server key of >= 16 characters
COLUMNS = ["arm", "passed", "verdicts", "wall_s", "step_walls", "hermes_calls", "hermes_input",
           "lane_sessions", "lane_model_calls", "note"]


def hermes_binary() -> Path:
    """`hermes` in its own venv under AGENTS_CACHE, installed with pip on first use (with aiohttp,
    which its API server needs); never into the project's venv."""
    folder = AGENTS_CACHE / "hermes"
    binary = folder / "venv" / "bin" / "hermes"
    if not binary.exists():
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "venv", str(folder / "venv")], check=True)
        subprocess.run([str(folder / "venv" / "bin" / "pip"), "install", PACKAGE, "aiohttp"],
                       check=True, stdout=sys.stderr)
    return binary


def hermes_config(arm: str, lane: Lane, key: str, timeout_s: float) -> dict[str, Any]:
    """config.yaml of an arm; a model call may take `timeout_s` (a CPU model is slow)."""
    assert lane.running
    shim = lane.url + "/v1"
    model = {"provider": "custom", "default": "fallback-lane", "api_key": key, "context_length": 65536,
             "base_url": lane.running.llm_url if arm == "raw" else shim}
    config: dict[str, Any] = {"model": model, "providers": {"custom": {
        "request_timeout_seconds": timeout_s, "stale_timeout_seconds": timeout_s}}}
    if arm == "core":
        config["platform_toolsets"] = {"api_server": CORE_TOOLSETS}
    if arm == "fallback":
        # Nothing listens there; and another model name, as Hermes skips a fallback entry with
        # the primary's provider and model.
        model.update(base_url=f"http://127.0.0.1:{free_port()}/v1", default="cloud-model")
        config["fallback_providers"] = [{"provider": "custom", "model": "fallback-lane",
                                         "base_url": shim, "api_key": key}]
    return config


@contextlib.contextmanager
def hermes_gateway(binary: Path, config: dict[str, Any], timeout_s: float) -> Iterator[tuple[str, Path]]:
    """`hermes gateway run` with its API server on a free port in a fresh HERMES_HOME until the
    block ends: (its /v1 URL, its home)."""
    home = Path(tempfile.mkdtemp(prefix="hermes-home-"))
    (home / "config.yaml").write_text(yaml.safe_dump(config))
    port = free_port()
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "HERMES_HOME": str(home),
           "API_SERVER_ENABLED": "true", "API_SERVER_KEY": HERMES_KEY, "API_SERVER_HOST": "127.0.0.1",
           "API_SERVER_PORT": str(port), "HERMES_API_TIMEOUT": str(int(timeout_s))}
    log = (home / "gateway.out").open("w")
    proc = subprocess.Popen([str(binary), "gateway", "run"], env=env, cwd=home, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log_tail = (home / "gateway.out").read_text()[-2000:]
                    raise RuntimeError(f"hermes gateway did not start: {log_tail}") from None
                time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/v1", home
    finally:  # the gateway's whole process group: its terminal tool may have started children
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def ask(url: str, session: str, prompt: str, timeout_s: float) -> tuple[float, str, str]:
    """One user message to Hermes in `session`: (wall seconds, the answer, an error or "")."""
    body = json.dumps({"model": "hermes-agent", "messages": [{"role": "user", "content": prompt}]}).encode()
    request = urllib.request.Request(f"{url}/chat/completions", body, method="POST", headers={
        "Content-Type": "application/json", "Authorization": f"Bearer {HERMES_KEY}",
        "X-Hermes-Session-Id": session})
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            reply = json.load(response)
        return time.monotonic() - started, str(reply["choices"][0]["message"].get("content") or ""), ""
    except (OSError, ValueError, KeyError) as exc:
        detail = exc.read().decode()[:200] if isinstance(exc, urllib.error.HTTPError) else str(exc)[:200]
        return time.monotonic() - started, "", detail


def hermes_steps(db: Path, session: str) -> list[dict[str, Any]]:
    """Hermes's own record of a session, one entry per user message: the calls that count (a
    `role='tool'` row for the call's id whose result is not an error), as (name, arguments,
    result), and the last answer."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        rows = conn.execute("SELECT role, content, tool_calls, tool_call_id FROM messages WHERE session_id=?"
                            " ORDER BY id", (session,)).fetchall()
    results = {r[3]: r[1] or "" for r in rows if r[0] == "tool" and r[3]}
    steps: list[dict[str, Any]] = []
    for role, content, tool_calls, _ in rows:
        if role == "user":
            steps.append({"calls": [], "answer": ""})
        elif role == "assistant" and steps:
            for item in json.loads(tool_calls or "[]"):
                result = results.get(item.get("id"))
                if result is not None and not _is_error(result):
                    function = item.get("function") or {}
                    steps[-1]["calls"].append((function.get("name"), str(function.get("arguments")), result))
            if content:
                steps[-1]["answer"] = content
    return steps


def _is_error(result: str) -> bool:
    """Whether a Hermes tool result reports an error: `{"error": ...}` or `"success": false`."""
    try:
        parsed = json.loads(result)
    except ValueError:
        return result.lstrip().lower().startswith("error")
    return isinstance(parsed, dict) and (bool(parsed.get("error")) or parsed.get("success") is False)


def verdicts(steps: list[dict[str, Any]], markers: Markers, seed_session: str) -> list[bool]:
    """The six steps judged by `lane check`'s rules from Hermes's record."""
    def ran(step: dict[str, Any], name: str, *needles: str) -> bool:
        return any(n == name and all(x in a for x in needles) for n, a, _ in step["calls"])

    steps = (steps + [{"calls": [], "answer": ""}] * 6)[:6]
    used = {n for s in steps for n, _, _ in s["calls"]}
    named = {t for t in HERMES_TOOLS if re.search(rf"\b{t}\b", steps[5]["answer"])}
    found_seed = any(n == "session_search" and seed_session in r for n, _, r in steps[4]["calls"])
    return ["391" in steps[0]["answer"],
            ran(steps[1], "memory", markers.codename),
            markers.codename in steps[2]["answer"],
            ran(steps[3], "terminal") and ran(steps[3], "memory", "42"),
            found_seed and ran(steps[4], "memory", seed_session),
            bool(steps[5]["answer"]) and named <= used]


def run_six(binary: Path, lane: Lane, arm: str, timeout_s: float) -> dict[str, Any]:
    markers = Markers.fresh()
    seed, session = f"seed-{secrets.token_hex(4)}", f"six-{secrets.token_hex(4)}"
    before = all_sessions(lane.db)
    with hermes_gateway(binary, hermes_config(arm, lane, HERMES_KEY, timeout_s), timeout_s) as (url, home):
        _, _, error = ask(url, seed, markers.render(SEED_PROMPT), timeout_s)
        walls, errors = [], [error] if error else []
        for prompt in DEFAULT_PROMPTS:
            wall, _, error = ask(url, session, markers.render(prompt), timeout_s)
            walls.append(wall)
            errors += [error] if error else []
        judged = verdicts(hermes_steps(home / "state.db", session), markers, seed)
        usage = _hermes_usage(home / "state.db", session)
    return {"arm": arm, "passed": f"{sum(judged)}/6", "verdicts": "".join("P" if v else "F" for v in judged),
            "wall_s": f"{sum(walls):.0f}", "step_walls": ",".join(f"{w:.0f}" for w in walls), **usage,
            **_lane_side(lane, before), "note": (errors[0] if errors else "-")[:70]}


def run_fallback(binary: Path, lane: Lane, timeout_s: float) -> dict[str, Any]:
    """One turn with a dead primary: passes when Hermes answers right and the lane's store has it."""
    before = all_sessions(lane.db)
    with hermes_gateway(binary, hermes_config("fallback", lane, HERMES_KEY, timeout_s), timeout_s) as (url, home):
        session = f"fallback-{secrets.token_hex(4)}"
        wall, answer, error = ask(url, session, DEFAULT_PROMPTS[0], timeout_s)
        usage = _hermes_usage(home / "state.db", session)
    lane_side = _lane_side(lane, before)
    passed = "391" in answer and lane_side["lane_sessions"] > 0
    return {"arm": "fallback", "passed": f"{int(passed)}/1", "verdicts": "P" if passed else "F",
            "wall_s": f"{wall:.0f}", "step_walls": f"{wall:.0f}", **usage, **lane_side,
            "note": (error or answer.replace("\n", " "))[:70]}


def _hermes_usage(db: Path, session: str) -> dict[str, Any]:
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        calls, tokens = conn.execute("SELECT coalesce(sum(api_call_count), 0), coalesce(sum(input_tokens), 0)"
                                     " FROM session_model_usage WHERE session_id=?", (session,)).fetchone()
    return {"hermes_calls": calls, "hermes_input": tokens}


def _lane_side(lane: Lane, before: set[str]) -> dict[str, Any]:
    records = [session_record(lane.db, s) for s in sessions_since(lane.db, before)] if lane.db.exists() else []
    return {"lane_sessions": len(records), "lane_model_calls": sum(r["model_calls"] for r in records)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    add_agent_lane_options(parser)
    parser.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated, of {', '.join(ARMS)}")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per step (default 1800)")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    if unknown := set(arms) - set(ARMS):
        parser.error(f"unknown arms: {', '.join(sorted(unknown))}")
    binary = hermes_binary()
    rows = []
    with agent_lane(parser, args, fake=HermesSixSteps()) as lane:
        for arm in arms:
            rows.append(run_fallback(binary, lane, args.timeout) if arm == "fallback"
                        else run_six(binary, lane, arm, args.timeout))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
        print_table(rows, COLUMNS)
        print(f"lane store: {lane.db}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0 if all(r["passed"].split("/")[0] == r["passed"].split("/")[1] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
