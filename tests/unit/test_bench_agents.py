"""The judges of the agent-client benchmarks (scripts/bench/claude_code.py, codex_cli.py,
hermes_agent.py) and their scripted model's call shapes: a judge that passes a guessed answer, or
counts a tool call whose result was an error, would make the clients' numbers lie."""

from __future__ import annotations

import json
import sqlite3
import tomllib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from stack.check.scenario import Markers
from tests.bench_scripts import bench_script
from tests.fakes.agent_task_models import ShellTasks, _arguments


@pytest.fixture(scope="module")
def lane_bench():
    with bench_script("agent_lane") as module:
        yield module


@pytest.fixture(scope="module")
def hermes():
    with bench_script("hermes_agent") as module:
        yield module


def test_write_file_task_is_judged_on_disk(lane_bench, tmp_path: Path) -> None:
    write = lane_bench.three_tasks(tmp_path, seed=1)[0]
    word = write.prompt.rsplit(": ", 1)[1]
    assert not write.judge(tmp_path, f"Created notes.txt with {word}")  # a claim is not a file
    (tmp_path / "notes.txt").write_text(word + " and more\n")
    assert not write.judge(tmp_path, "")
    (tmp_path / "notes.txt").write_text(word + "\n")
    assert write.judge(tmp_path, "")


def test_line_count_and_command_need_the_values_only_the_tools_give(lane_bench, tmp_path: Path) -> None:
    _, count, command = lane_bench.three_tasks(tmp_path, seed=7)
    lines = len((tmp_path / "data.txt").read_text().splitlines())
    token = (tmp_path / ".token").read_text().strip()
    assert count.judge(tmp_path, f"The file has {lines} lines.")
    assert not count.judge(tmp_path, f"The file has {lines}0 lines.")  # a number is read whole
    assert not count.judge(tmp_path, f"It has {lines + 1} lines.")
    assert command.judge(tmp_path, f"It printed `{token[::-1]}`")
    assert not command.judge(tmp_path, f"It printed {token}")
    # Fresh values per seed: an answer remembered from another run fails.
    other = tmp_path / "other"
    other.mkdir()
    lane_bench.three_tasks(other, seed=8)
    assert (other / ".token").read_text() != (tmp_path / ".token").read_text()


@pytest.mark.parametrize(("schema", "expected"), [
    ({"properties": {"command": {"type": "string"}}}, {"command": "ls"}),  # Claude Code's Bash
    ({"properties": {"command": {"type": "array"}}}, {"command": ["bash", "-lc", "ls"]}),  # Codex `shell`
    ({"properties": {"cmd": {"type": "string"}}}, {"cmd": "ls"}),  # Codex `exec_command`
])
def test_scripted_model_calls_each_clients_shell_in_its_own_shape(schema, expected) -> None:
    assert _arguments(schema, "ls") == expected


def test_scripted_model_runs_the_command_once_then_answers_with_its_output() -> None:
    fake = ShellTasks()
    fake.begin("wc -l < data.txt")
    tools = [{"type": "function", "function": {"name": "Bash", "parameters": {
        "properties": {"command": {"type": "string"}}}}}]
    first = fake.reply({"tools": tools, "messages": [{"role": "user", "content": "count"}]})
    assert first.tool_calls == [{"name": "Bash", "arguments": {"command": "wc -l < data.txt"}}]
    later = fake.reply({"tools": tools, "messages": [{"role": "user", "content": "count"},
                                                     {"role": "tool", "content": "12\n"}]})
    assert (later.tool_calls, later.content) == (None, "12")


def hermes_db(path: Path, session: str, rows: list[tuple[str, str, Any, str | None]]) -> Path:
    """A store with Hermes's messages columns that the judge reads."""
    db = path / "state.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT,"
                     " role TEXT, content TEXT, tool_call_id TEXT, tool_calls TEXT)")
        for role, content, calls, call_id in rows:
            conn.execute("INSERT INTO messages (session_id, role, content, tool_calls, tool_call_id)"
                         " VALUES (?, ?, ?, ?, ?)", (session, role, content, json.dumps(calls) if calls else None,
                                                     call_id))
    return db


def tool_call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def six_rows(markers: Markers, seed: str, *, memory_result: str = '{"success": true}',
             summary: str = "I used memory, terminal and session_search.") -> list[tuple[str, str, Any, str | None]]:
    memory = {"action": "add", "target": "memory"}
    return [
        ("user", "17*23", None, None), ("assistant", "391", None, None),
        ("user", "remember", None, None),
        ("assistant", "", [tool_call("c1", "memory", {**memory, "content": markers.codename})], None),
        ("tool", memory_result, None, "c1"), ("assistant", "Saved.", None, None),
        ("user", "codename?", None, None), ("assistant", f"It is {markers.codename}.", None, None),
        ("user", "terminal", None, None),
        ("assistant", "", [tool_call("c2", "terminal", {"command": "echo $((6*7))"})], None),
        ("tool", '{"output": "42", "exit_code": 0}', None, "c2"),
        ("assistant", "", [tool_call("c3", "memory", {**memory, "content": "output 42"})], None),
        ("tool", '{"success": true}', None, "c3"), ("assistant", "Done.", None, None),
        ("user", "search", None, None),
        ("assistant", "", [tool_call("c4", "session_search", {"query": markers.phrase})], None),
        ("tool", json.dumps({"results": [{"session_id": seed}]}), None, "c4"),
        ("assistant", "", [tool_call("c5", "memory", {**memory, "content": f"session {seed}"})], None),
        ("tool", '{"success": true}', None, "c5"), ("assistant", "Saved the id.", None, None),
        ("user", "summarize", None, None), ("assistant", summary, None, None),
    ]


def test_hermes_six_steps_judged_from_its_own_store(hermes, tmp_path: Path) -> None:
    markers = Markers.fresh()
    db = hermes_db(tmp_path, "six", six_rows(markers, "seed-1"))
    assert hermes.verdicts(hermes.hermes_steps(db, "six"), markers, "seed-1") == [True] * 6


def test_hermes_call_with_an_error_result_does_not_count(hermes, tmp_path: Path) -> None:
    markers = Markers.fresh()
    db = hermes_db(tmp_path, "six", six_rows(markers, "seed-1",
                                             memory_result='{"success": false, "error": "memory full"}'))
    judged = hermes.verdicts(hermes.hermes_steps(db, "six"), markers, "seed-1")
    assert judged == [True, False, True, True, True, True]  # memory ran ok in step 4, so step 6 holds


def test_hermes_summary_naming_a_tool_that_never_ran_fails(hermes, tmp_path: Path) -> None:
    markers = Markers.fresh()
    db = hermes_db(tmp_path, "six", six_rows(markers, "seed-1",
                                             summary="I used memory, terminal and web_search."))
    judged = hermes.verdicts(hermes.hermes_steps(db, "six"), markers, "seed-1")
    assert judged == [True] * 5 + [False]


def test_hermes_search_must_find_the_seeded_session(hermes, tmp_path: Path) -> None:
    markers = Markers.fresh()
    db = hermes_db(tmp_path, "six", six_rows(markers, "seed-other"))
    judged = hermes.verdicts(hermes.hermes_steps(db, "six"), markers, "seed-1")
    assert judged[4] is False and judged[:4] == [True] * 4


def readme_block(language: str, after: str) -> str:
    """The first ```LANGUAGE block of the README after the line holding `after`."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    rest = readme[readme.index(after):]
    start = rest.index(f"```{language}\n") + len(language) + 4
    return rest[start:rest.index("```", start)]


def test_readme_codex_config_is_what_the_bench_runs() -> None:
    readme = tomllib.loads(readme_block("toml", "**Codex CLI**"))
    with bench_script("codex_cli") as codex:
        ran = tomllib.loads(codex.CONFIG.format(url="http://127.0.0.1:8642", timeout_ms=1800000))
    assert (readme["model"], readme["model_provider"]) == (ran["model"], ran["model_provider"])
    provider = readme["model_providers"]["lane"]
    assert provider.items() <= ran["model_providers"]["lane"].items()


def test_readme_hermes_config_is_what_the_bench_runs(hermes) -> None:
    readme = yaml.safe_load(readme_block("yaml", "**Hermes Agent**").replace("KEY", "lane-key"))
    lane = SimpleNamespace(url="http://127.0.0.1:8642", running=SimpleNamespace(llm_url="http://127.0.0.1:8081/v1"))
    ran = hermes.hermes_config("core", lane, "lane-key", 1800)
    assert readme == ran
