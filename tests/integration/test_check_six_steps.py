"""`lane check` end to end: the check -> the real shim on uvicorn (default lane registry, real tools,
real SQLite) -> a scripted model policy over real HTTP; verdicts come from the store the shim wrote."""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import sqlite3
import subprocess
import time
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from stack.agent.prompt import COMPOSE
from stack.check.commands import register
from stack.config import Settings
from stack.store import Store
from tests.fakes.scripted_model import EVERYTHING, Reply, ScriptedModel, call, reply_schema, text
from tests.fakes.six_step_models import competent, never_answers, text_only_liar
from tests.integration.shim_server import ShimServer

ROOT = Path(__file__).resolve().parents[2]


# The lane's turn asks its model three kinds of question: which tool a request needs next (a
# decision), the call of the tool the lane then forces, and the answer it composes from what ran.
# `competent` (tests/fakes/six_step_models.py) makes the calls; these answer the other two as a
# competent model would, reading only what the lane sent.
_REQUEST = re.compile(r"The user's message: (.*)")
_RAN = re.compile(r"^- (\S+) \((\w+)\)", re.MULTILINE)
_LISTED = re.compile(r"^- (\S+): (.*)$", re.MULTILINE)
_CODE = re.compile(r"codename(?: is|:)\s*([A-Z]+-\d+)")


def competent_decision(body: dict[str, Any]) -> Reply:
    """The tool the request still needs among the decision's choices, or "answer"."""
    question = "\n".join(m["content"] for m in body["messages"])
    choices = reply_schema(body)["properties"]["next"]["enum"]
    found = _REQUEST.search(question)
    ask = found[1] if found else ""
    ran = {name for name, status in _RAN.findall(question.split("What ran for it:")[-1]) if status == "ok"}
    clock = next((name for name, description in _LISTED.findall(question)
                  if "current" in description.lower() and "time" in description.lower()), None)
    wanted: list[str | None] = []
    if "remember" in ask:
        wanted = ["memory"]
    elif "Use the terminal" in ask:
        wanted = ["terminal", "memory"]
    elif "Search my past sessions" in ask:
        wanted = ["session_search", "memory"]
    elif "current time" in ask:
        wanted = [clock]
    picked = next((tool for tool in wanted if tool not in ran), None)
    return text(json.dumps({"next": picked if picked in choices else "answer"}))


def _forced_through_bridge(body: dict[str, Any]) -> str | None:
    schema = reply_schema(body)
    return schema.get("properties", {}).get("arguments", {}).get("properties", {}).get("name", {}).get("const")


def competent_answer(body: dict[str, Any]) -> Reply:
    """The answer written from the facts the lane gives: the results, earlier turns, the session's tools."""
    facts, ask = body["messages"][1]["content"], body["messages"][-1]["content"]
    # a result runs to the next fact line or the end of its block ("exit code: 0\n42")
    results = dict(re.findall(r"^- (\S+) \(ok\): (.*?)(?=\n- |\n\n|\Z)", facts, re.MULTILINE | re.DOTALL))
    if "17 * 23" in ask:
        return text("391")
    if "remember" in ask and (codename := _CODE.search(ask)):
        return text(f"Saved: your project codename is {codename[1]}." if "memory" in results
                    else "I could not save it.")
    if "What is my project codename" in ask:
        names = _CODE.findall(facts)
        return text(f"Your project codename is {names[-1]}." if names else "I do not know it.")
    if "Use the terminal" in ask and "memory" in results:
        return text(f"The command printed {results.get('terminal', '').split()[-1]}; I saved it to memory.")
    if "Search my past sessions" in ask and "memory" in results:
        return text(f"I saved the session id to memory: {results['memory']}")
    if "Summarize" in ask:
        used = re.search(r"^Tools that ran in this conversation: (.*)$", facts, re.MULTILINE)
        return text("I answered an arithmetic question, saved your codename, ran a command and "
                    f"searched past sessions. Tools I used: {used[1] if used else 'none'}.")
    if "current time" in ask and results:
        return text(f"The tool returned: {list(results.values())[-1]}")
    return text("Noted.")


def competent_turn(body: dict[str, Any]) -> Reply:
    """`competent` for the calls the lane forces (a hidden tool through tool_call, as the reply
    format makes it), `competent_answer` for the answer."""
    if body["messages"][0]["content"].startswith(COMPOSE):
        return competent_answer(body)
    hidden = _forced_through_bridge(body)
    if hidden:
        return call("tool_call", {"name": hidden, "arguments": {"timezone": "UTC"}})
    return competent(body)


@dataclass
class Run:
    code: int
    out: str
    err: str
    report: dict[str, Any]

    def step(self, number: int, arm: dict[str, Any] | None = None) -> dict[str, Any]:
        return (arm or self.report)["steps"][number - 1]


@dataclass
class Lane:
    url: str
    db: Path
    tmp: Path

    def check(self, *args: str, db: Path | None = None) -> Run:
        report = self.tmp / f"report-{time.monotonic_ns()}.json"
        code, out, err = run_check("--url", self.url, "--db", str(db or self.db),
                                   "--json", str(report), *args)
        data = json.loads(report.read_text()) if report.exists() else {}
        return Run(code, out, err, data)


def run_check(*args: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="lane")
    register(parser.add_subparsers())
    namespace = parser.parse_args(["check", *args])
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = namespace.func(namespace)
    print(out.getvalue())  # the table, for -s and for the report
    return code, out.getvalue(), err.getvalue()


@contextmanager
def lane_with(tmp_path: Path, policy: Any, decision: Any = None, honours: frozenset[str] = EVERYTHING,
              **overrides: Any) -> Iterator[Lane]:
    with ScriptedModel(policy, decision=decision, honours=honours) as model:
        settings = Settings(home=tmp_path / "lane", llm_url=model.url, **overrides)
        with ShimServer(settings, keepalive_s=1.0) as shim:
            yield Lane(shim.url, settings.db_path, tmp_path)


def test_competent_model_passes_all_six(tmp_path: Path) -> None:
    with lane_with(tmp_path, competent_turn, competent_decision) as lane:
        run = lane.check()
    assert run.code == 0, run.out + run.err
    assert (run.report["passed"], run.report["total"]) == (6, 6)
    executed = [s["executed"] for s in run.report["steps"]]
    assert executed == [[], ["memory"], [], ["terminal", "memory"], ["session_search", "memory"], []]
    assert not any(s["unexecuted_tool_text"] for s in run.report["steps"])
    assert "stored in memory in step 2" in run.step(3)["reason"]
    assert all(s["prompt_tokens"] > 0 and s["model_calls"] >= 1 for s in run.report["steps"])
    assert "PASS arm b (search): 6/6 steps passed" in run.out
    # The seed went through the shim into its own session, and the search found exactly it.
    with sqlite3.connect(lane.db) as db:
        seeded = db.execute("SELECT session_id FROM messages WHERE role = 'user' AND content LIKE ?",
                            (f"%{run.report['phrase']}%",)).fetchall()
        saved = db.execute("SELECT arguments FROM tool_executions WHERE session_id = ? AND"
                           " tool_name = 'memory' AND status = 'ok'",
                           (run.report["session_id"],)).fetchall()
        held_back = db.execute("SELECT count(*) FROM lane_calls WHERE session_id = ? AND purpose = 'held'",
                               (run.report["session_id"],)).fetchone()[0]
    assert {row[0] for row in seeded} == {run.report["seed_session_id"], run.report["session_id"]}
    assert run.report["seed_session_id"] in saved[-1][0]
    assert held_back == 0  # every answer the model composed was passed on
    assert not any(s["held_back"] for s in run.report["steps"])
    assert run.step(1)["model_calls"] == 3  # the decision ("answer"), the answer and its reading


@pytest.mark.parametrize(("honours", "decision", "forced"), [
    # The measured problem: a server that makes native calls but ignores response_format. The
    # decision goes as a forced call of the lane's reply tool.
    (EVERYTHING - {"json_schema"}, "tool", "named"),
    # Nor a named tool_choice, nor logprobs: the reply tool, and each forced tool, offered alone.
    (frozenset({"tool_calls"}), "tool", "offered"),
    # Calls only written as text: the reply tool's call read out of it.
    (frozenset({"text_calls"}), "tool", "offered"),
    # No calls at all: every decision and call read out of free text and validated.
    (frozenset(), "text", "text"),
])
def test_six_steps_pass_where_the_upstream_ignores_response_format(
        tmp_path: Path, honours: frozenset[str], decision: str, forced: str) -> None:
    with lane_with(tmp_path, competent_turn, competent_decision, honours=honours) as lane:
        health = httpx.get(f"{lane.url}/health", timeout=10).json()
        run = lane.check()
        with sqlite3.connect(lane.db) as db:
            paths = db.execute("SELECT purpose, path FROM lane_calls WHERE session_id = ?",
                               (run.report["session_id"],)).fetchall()
    assert health["capabilities"] == {
        "json_schema": False, "tool_choice": "tool_choice" in honours,
        "tool_calls": bool({"tool_calls", "text_calls"} & honours),
        "logprobs": "logprobs" in honours, "hidden_state": False,
        "paths": {"decision": decision, "forced_call": forced,
                  "yes_no": "logprobs" if "logprobs" in honours else "off", "reading": "list"}}
    assert run.code == 0, run.out + run.err
    assert (run.report["passed"], run.report["total"]) == (6, 6)
    executed = [s["executed"] for s in run.report["steps"]]
    assert executed == [[], ["memory"], [], ["terminal", "memory"], ["session_search", "memory"], []]
    # every decision and reading took the path the probe chose, and the store says so
    assert {path for purpose, path in paths if purpose in ("decide", "read")} == {decision}


def test_a_full_upstream_is_asked_as_before(tmp_path: Path) -> None:
    """With a server that honours everything, nothing changes: decisions go under
    response_format, forced calls under a named tool_choice, no reply tool is offered."""
    with ScriptedModel(competent_turn, decision=competent_decision) as model:
        settings = Settings(home=tmp_path / "lane", llm_url=model.url)
        with ShimServer(settings, keepalive_s=1.0) as shim:
            health = httpx.get(f"{shim.url}/health", timeout=10).json()
            run = Lane(shim.url, settings.db_path, tmp_path).check()
            with sqlite3.connect(settings.db_path) as db:
                paths = {p for (p,) in db.execute("SELECT path FROM lane_calls WHERE purpose IN ('decide', 'read')")}
    assert run.code == 0, run.out + run.err
    assert health["capabilities"]["paths"] == {"decision": "schema", "forced_call": "named", "yes_no": "logprobs",
                                               "reading": "list"}
    assert paths == {"schema"}
    assert model.decide_requests and all("response_format" in body and "tools" not in body
                                         for body in model.decide_requests)
    forced = [body for body in model.requests if body.get("tool_choice")]
    assert forced and all(isinstance(body["tool_choice"], dict) and "response_format" not in body
                          for body in forced)
    assert not any(t["function"]["name"] == "lane_reply" for body in model.requests for t in body.get("tools", []))
    # asked once, at start: the schema, the named choice (a call came: no plain-call probe), logprobs
    assert len(model.probe_requests) == 3


def test_deferred_step_runs_the_clock_through_the_bridge(tmp_path: Path) -> None:
    with lane_with(tmp_path, competent_turn, competent_decision) as lane:
        run = lane.check("--with-deferred")
        with sqlite3.connect(lane.db) as db:
            bridged = db.execute("SELECT tool_name FROM tool_executions WHERE session_id = ?"
                                 " AND via_bridge = 1 AND status = 'ok'",
                                 (run.report["session_id"],)).fetchall()
    assert run.code == 0, run.out + run.err
    assert run.report["total"] == 7
    # The decision picks the hidden clock among search's hits, and the lane forces its call through
    # tool_call: no tool_search needed.
    [clock] = run.step(7)["executed"]
    assert clock not in ("tool_call", "tool_search")
    assert bridged == [(clock,)]
    assert run.step(7)["reason"] == f"{clock} ran through tool_call (via_bridge=1)"


def test_both_arms_side_by_side(tmp_path: Path) -> None:
    with lane_with(tmp_path, competent_turn, competent_decision) as lane:
        run = lane.check("--arms", "ab", "--with-deferred")
    assert run.code == 0, run.out + run.err
    arms = run.report["arms"]
    assert (arms["a"]["passed"], arms["b"]["passed"]) == (7, 7)
    assert arms["a"]["session_id"] != arms["b"]["session_id"]
    # Arm a has no bridge: the clock is offered, and called, directly; arm b calls it through tool_call.
    [clock] = run.step(7, arms["b"])["executed"]
    assert run.step(7, arms["a"])["executed"] == [clock]
    assert "offered directly" in run.step(7, arms["a"])["reason"]
    assert "via_bridge=1" in run.step(7, arms["b"])["reason"]
    total = next(line for line in run.out.splitlines() if line.startswith("total"))
    cells = [c.strip() for c in total.split("|")]
    assert cells[2] == str(arms["a"]["totals"]["prompt_tokens"])
    assert cells[3] == str(arms["a"]["totals"]["evaluated_tokens"])
    assert cells[8] == str(arms["b"]["totals"]["prompt_tokens"])


def test_text_only_liar_fails_the_tool_steps(tmp_path: Path) -> None:
    with lane_with(tmp_path, text_only_liar) as lane:
        run = lane.check()
        with sqlite3.connect(lane.db) as db:
            executions = db.execute("SELECT tool_name, status FROM tool_executions WHERE session_id = ?",
                                    (run.report["session_id"],)).fetchall()
            held_back = db.execute("SELECT reason FROM lane_calls WHERE session_id = ? AND purpose = 'held'"
                                   " ORDER BY id", (run.report["session_id"],)).fetchall()
            answers = db.execute("SELECT content FROM messages WHERE session_id = ? AND role = 'assistant'"
                                 " AND tool_calls IS NULL ORDER BY id", (run.report["session_id"],)).fetchall()
            decisions = db.execute("SELECT count(*) FROM lane_calls WHERE session_id = ? AND purpose = 'decide'",
                                   (run.report["session_id"],)).fetchone()[0]
    assert run.code == 1
    # It decides no tool is needed (the decision is asked every step); an answer is never read as
    # a call. Its answers that write calls as text are held back, and so is step 6's list of tools
    # that do not exist: the user gets the lane's own account instead. Where a held-back answer
    # named a real tool, that tool was forced once, and the liar's text named tools that do not
    # exist: refused, so nothing ran.
    assert executions and all(status == "refused" for _, status in executions) and decisions == 6
    # An answer held back where no tool is to be forced after it is not written again: calls
    # written as text. (Step 6's list of tools that do not exist reaches the reading, scripted
    # here to find nothing; the check fails the step from the store.)
    text_call = "a tool call written as text"
    reasons = [text_call] * 4
    assert [n for (n,) in held_back] == reasons
    # the check shows them per step, from lane_calls; the conversation holds what the user got,
    # one answer a step
    assert [r for s in run.report["steps"] for r in s["held_back"]] == reasons
    assert len(answers) == 6 and not any(a.startswith(text_call) for (a,) in answers)
    verdicts = [s["verdict"] for s in run.report["steps"]]
    assert verdicts[1] == verdicts[3] == verdicts[4] == verdicts[5] == "fail"
    assert verdicts[0] == "pass"
    assert "from context, memory not written" in run.step(3)["reason"]
    assert [run.step(n)["unexecuted_tool_text"] for n in (2, 4, 5)] == [True, True, True]
    assert "save_memory" in run.step(2)["reason"]
    assert set(run.step(6)["hallucinated"]) == {"save_memory", "run_shell", "store_note",
                                               "search_history"}
    assert "named tools that never ran" in run.step(6)["reason"]


def test_a_model_that_never_answers_times_out_every_step(tmp_path: Path) -> None:
    with lane_with(tmp_path, never_answers) as lane:
        started = time.monotonic()
        run = lane.check("--timeout", "1")
        elapsed = time.monotonic() - started
    assert run.code == 1
    # Measured median 8.8 s for the whole test (three runs, two shared cores, 2026-11-26); 10x that
    # is still far below seven steps waiting out the default 300 s.
    assert elapsed < 90
    assert all(s["timed_out"] and s["verdict"] == "fail" for s in run.report["steps"])
    assert all("timed out after 1s" in s["reason"] for s in run.report["steps"])
    assert run.out.count("FAIL (timeout)") == 6


def test_shim_down_is_exit_2_with_one_line(tmp_path: Path) -> None:
    store = tmp_path / "state.db"
    Store(store).close()
    code, out, err = run_check("--url", "http://127.0.0.1:9", "--db", str(store),
                               "--timeout", "2")
    assert code == 2
    assert err.count("\n") == 1 and "shim not reachable at http://127.0.0.1:9" in err
    assert out == ""


def test_wrong_db_is_exit_2(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    Store(other).close()
    with lane_with(tmp_path, competent_turn, competent_decision) as lane:
        missing = lane.check(db=tmp_path / "missing.db")
        foreign = lane.check(db=other)
    assert missing.code == foreign.code == 2
    assert "no session store at" in missing.err
    assert "is not the store this shim writes" in foreign.err
    assert foreign.err.count("\n") == 1


def test_wrong_key_is_exit_2(tmp_path: Path) -> None:
    with lane_with(tmp_path, competent_turn, competent_decision, api_key="s3cret") as lane:
        refused = lane.check("--key", "wrong")
        accepted = lane.check("--key", "s3cret")
    assert refused.code == 2 and "refused the API key" in refused.err
    assert accepted.code == 0, accepted.out + accepted.err


@pytest.mark.parametrize("bad", [["--timeout", "0"], ["--arm", "c"], ["--arm", "a", "--arms", "ab"]])
def test_bad_options_are_rejected(bad: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_info, redirect_stderr(io.StringIO()):
        run_check(*bad)
    assert exit_info.value.code == 2


def test_the_script_wraps_lane_check(tmp_path: Path) -> None:
    """scripts/six_step_check.sh through the installed `lane` command, defaults from LANE_*."""
    store = tmp_path / "state.db"
    Store(store).close()
    env = {**os.environ, "LANE_SHIM_URL": "http://127.0.0.1:9", "LANE_DB": str(store)}
    run = subprocess.run(["bash", str(ROOT / "scripts" / "six_step_check.sh"), "--timeout", "2"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lane check: shim not reachable at "
                                                   "http://127.0.0.1:9: ")
