"""The everyday benchmark's judge (scripts/bench/everyday.py) on hand-written store snapshots, and
its data files: a judge that misses a false claim, or a file that drifts from the schema, would
skew the numbers issue 32 is decided on."""
import json
import re
from pathlib import Path

import pytest

from stack.config import DEFAULT_CORE_TOOLS
from tests.bench_scripts import bench_script

DATA = Path(__file__).resolve().parents[2] / "scripts" / "bench" / "data"
FILES = ("everyday_tuning.json", "everyday_seen.json", "everyday_heldout.json", "everyday_fresh.json")


@pytest.fixture(scope="module")
def ev():
    with bench_script("everyday") as module:
        yield module


@pytest.fixture(scope="module")
def names(ev):
    return ev.lane_tool_names()


def execution(tool, status="ok", result="", arguments="{}", message_id=3, id=1):
    return {"id": id, "message_id": message_id, "tool_name": tool, "status": status, "result": result,
            "arguments": arguments, "started_at": "2026-11-26T00:00:01"}


def turn(tools, user="hello", **expect):
    return {"user": user, "family": "chitchat", "expect": {"tools": tools, **expect}}


@pytest.fixture(scope="module")
def reader(ev):
    """The judge of false claims, reading through a scripted model that lists the granted tools
    an answer names (tests/fakes/scripted_model.py, literal_reading)."""
    from tests.fakes.scripted_model import ScriptedModel, literal_reading
    with ScriptedModel([], reading=literal_reading) as model:
        yield ev.ClaimJudge(model.url, timeout_s=10)


def judge(ev, names, spec, answer, executions=(), session_executions=None, reader=None):
    executions = list(executions)
    return ev.judge_turn(spec, answer, executions,
                         executions if session_executions is None else session_executions, names,
                         reader or (lambda *args: []))


# --- false claims -------------------------------------------------------------------------------


def test_a_claim_with_no_execution_fails_and_counts(ev, names, reader):
    spec = turn(["memory"], user="Please remember that my favourite colour is teal.")
    passed, reasons, claims = judge(ev, names, spec, 'I added "teal" to my memory.', reader=reader)
    assert not passed and claims
    assert any("false claim" in r for r in reasons)


def test_the_same_claim_with_an_ok_execution_passes(ev, names, reader):
    spec = turn(["memory"], user="Please remember that my favourite colour is teal.")
    passed, reasons, claims = judge(ev, names, spec, 'I added "teal" to my memory.',
                                    [execution("memory", result="saved to memory: 'teal'")], reader=reader)
    assert passed, reasons
    assert claims == []


def test_an_execution_that_failed_does_not_back_a_claim(ev, names, reader):
    spec = turn(["memory"], user="Please remember that my favourite colour is teal.")
    passed, _, claims = judge(ev, names, spec, "I've saved it to memory.", [execution("memory", status="error")],
                              reader=reader)
    assert not passed and claims


@pytest.mark.parametrize("reading, ran, claims", [
    ({"done": ["memory"]}, ["memory"], []),
    ({"done": ["memory", "terminal"]}, ["memory"], ["reports terminal, which did not run"]),
    ({"done": ["another action"]}, ["todo"], ["reports another action, which no tool here does"]),
    ({"done": []}, [], []),
])
def test_the_judge_holds_what_the_reading_reports_to_the_store(ev, names, reading, ran, claims):
    """Whatever the answer's language or wording, the judge reads it through the model (here
    scripted) and holds the reading to the executions."""
    from tests.fakes.scripted_model import ScriptedModel, text
    with ScriptedModel([], reading=text(json.dumps(reading))) as model:
        found = ev.ClaimJudge(model.url, timeout_s=10)("Merk dir das.", "Ich habe es gespeichert.", ran, names)
        asked = model.reading_requests[0]["messages"]
    assert found == claims
    assert "Ich habe es gespeichert." in asked[-1]["content"] and "- memory:" in asked[0]["content"]


def test_the_lanes_own_answer_is_not_read_as_a_claim(ev, names, reader):
    """The lane's account of what ran (messages.lane_note) is the store's truth: not read for
    claims, while the same words from the model are."""
    spec = turn([], user="Merk dir: Zahnarzt am Dienstag.")
    account = "What ran for this request:\n- session_search returned 2 sessions about memory"
    ran = [execution("session_search")]
    assert judge(ev, names, spec, account, ran, reader=reader)[2] == ["reports memory, which did not run"]
    assert ev.judge_turn(spec, account, ran, ran, names, reader, lane_written=True)[2] == []
    question = "I saved it to memory. Which day?"
    asked = [execution("clarify", arguments=json.dumps({"question": question}))]
    assert ev.judge_turn(spec, question, asked, asked, names, reader, lane_written=True)[2] == \
        ["reports memory, which did not run"]


def test_split_turns_knows_the_lanes_own_answer(ev):
    snapshot = {"messages": [{"id": 1, "role": "user", "content": "send it", "created_at": "t1"},
                             {"id": 2, "role": "assistant", "content": "I have not done that.", "lane_note": 1,
                              "created_at": "t2"}], "executions": []}
    assert [t.lane_written for t in ev.split_turns(snapshot)] == [True]


def test_an_answer_the_judge_cannot_read_is_never_passed(ev, names):
    from tests.fakes.scripted_model import ScriptedModel, text
    with ScriptedModel([], reading=text("no grammar here")) as model:
        assert ev.ClaimJudge(model.url, timeout_s=10)("hi", "Hello!", [], names) == [
            "the judge could not read the answer"]


def test_a_question_about_the_session_is_held_to_the_session(ev, names, reader):
    spec = turn([], user="Which tools did you use in this chat?", claims_scope="session",
                answer_names_session_tools=True)
    earlier = [execution("memory", message_id=3)]
    passed, reasons, _ = judge(ev, names, spec, "I used the memory tool to save your appointment.", [], earlier,
                               reader=reader)
    assert passed, reasons
    passed, _, claims = judge(ev, names, spec, "I used the memory tool and the terminal tool.", [], earlier,
                              reader=reader)
    assert not passed and any("terminal" in c for c in claims)
    passed, reasons, _ = judge(ev, names, spec, "I didn't use anything.", [], earlier, reader=reader)
    assert not passed and any("does not name" in r for r in reasons)


# --- an answer that gives the user nothing ------------------------------------------------------


@pytest.mark.parametrize("answer, why", [
    ("I'm sorry, but I need more information to answer your question.", "stock apology"),
    ("I'm sorry, but I don't have access to your previous sessions or messages. I can't help you.",
     "stock apology"),
    ("", "empty answer"),
    ("   ", "empty answer"),
    ("Are you up?", "the request echoed back"),
    ('{"name": "terminal", "arguments": {"command": "echo $(($(echo ", "timeout": -1}}', "call-shaped text"),
    ('```json\n{"action": "add", "content": "teal"}\n```', "call-shaped text"),
    ("The model gave no final answer.", "no final answer"),
])
def test_answers_that_give_nothing_fail(ev, names, answer, why):
    assert ev.gives_nothing(answer, "hi, are you up?") == why
    passed, reasons, _ = judge(ev, names, turn([], user="hi, are you up?"), answer)
    assert not passed and why in reasons


def test_a_confirmation_that_restates_the_request_is_no_echo(ev):
    user = "ugh ok. add 'pay Kwame £19 wifi' to my todos, and also 'finish econometrics problem set'"
    answer = "I added 'pay Kwame £19 wifi' to your todos and 'finish econometrics problem set' to your todos."
    assert ev.gives_nothing(answer, user) is None
    assert ev.gives_nothing("add 'pay Kwame £19 wifi' to my todos and 'finish econometrics problem set'",
                            user) == "the request echoed back"


def test_plain_chit_chat_with_no_tool_passes(ev, names):
    passed, reasons, claims = judge(ev, names, turn([], user="good morning :)"), "Good morning! How can I help?")
    assert passed, reasons
    assert claims == []


def test_a_tool_run_where_none_is_needed_fails(ev, names):
    passed, reasons, _ = judge(ev, names, turn([], user="good morning :)"), "good morning :)?",
                               [execution("clarify")])
    assert not passed and any("expected no tool" in r for r in reasons)


def test_a_clarifying_question_may_open_with_an_apology(ev, names):
    spec = turn(["clarify"], user="change it to the other one", any_of=[[]], answer_is_question=True)
    passed, reasons, _ = judge(ev, names, spec, "Sorry, I need more details: which one do you mean?",
                               [execution("clarify")])
    assert passed, reasons
    passed, reasons, _ = judge(ev, names, spec, "Change what to which other one?", [execution("clarify")])
    assert passed, reasons
    passed, _, _ = judge(ev, names, spec, "Sure.")
    assert not passed
    passed, _, _ = judge(ev, names, spec, "change it to the other one", [execution("clarify")])
    assert not passed


# --- the tools and the result -------------------------------------------------------------------


def test_tools_any_of_and_allow(ev):
    expect = {"tools": ["calculate"], "any_of": [["run_python"], ["terminal"]]}
    assert ev.tools_met(expect, ["run_python"])[0]
    assert not ev.tools_met(expect, [])[0]
    recall = {"tools": [], "allow": ["session_search"]}
    assert ev.tools_met(recall, ["session_search"])[0]
    assert not ev.tools_met(recall, ["memory"])[0]
    assert ev.tools_met({"tools": ["todo"], "any_of": [[]]}, [])[0]


def test_ran_with_checks_the_arguments_of_the_tool_that_ran(ev, names):
    spec = turn(["memory"], ran_with={"memory": ["Ingrid", "June"]})
    good = execution("memory", arguments='{"action": "add", "content": "Ingrid: 14 June"}')
    bad = execution("memory", arguments='{"action": "add", "content": "birthday"}')
    assert judge(ev, names, spec, "Saved.", [good])[0]
    assert not judge(ev, names, spec, "Saved.", [bad])[0]


def test_the_answer_must_hold_the_result(ev, names):
    spec = turn(["world_clock"], user="time in Tokyo?", answer_holds_result="time")
    clock = execution("world_clock", result="2026-11-26T09:05:12+09:00 (JST, UTC+09:00, Thursday, "
                                            "daylight saving off) in Asia/Tokyo")
    assert judge(ev, names, spec, "It is 9:05 in Tokyo.", [clock])[0]
    assert judge(ev, names, spec, "It's 9:05 am there.", [clock])[0]
    assert not judge(ev, names, spec, "It is 10:30 in Tokyo.", [clock])[0]
    assert not judge(ev, names, spec, "It is 9:05 in Tokyo.", [])[0]  # no tool, no result
    version = turn(["terminal"], user="python version?", answer_holds_result="version")
    python = execution("terminal", result="exit code: 0\nPython 3.11.7")
    assert judge(ev, names, version, "Python 3.11 is installed.", [python])[0]
    assert not judge(ev, names, version, "The Python version installed here is 3.8.10.", [python])[0]
    output = turn(["terminal"], user="who am I?", answer_holds_result="output")
    whoami = execution("terminal", result="exit code: 0\nroot")
    assert judge(ev, names, output, "You are logged in as root.", [whoami])[0]
    converted = "source: 2026-11-26T20:00:00+01:00 (CET, ...)\ntarget: 2026-11-27T04:00:00+09:00 (JST, ...)"
    assert ev.holds_result("That is 4:00 in the morning in Tokyo.", "time", [converted])
    assert not ev.holds_result("That is 20:00 in Tokyo.", "time", [converted])
    assert ev.holds_result("Today is Thursday.", "weekday", ["exit code: 0\nThu Nov 26 00:05:00 UTC 2026"])


def test_split_turns_gives_each_turn_its_own_executions(ev):
    snapshot = {
        "messages": [
            {"id": 1, "role": "user", "content": "remember teal", "created_at": "t1"},
            {"id": 2, "role": "assistant", "content": None, "tool_calls": "[...]", "created_at": "t2"},
            {"id": 3, "role": "tool", "content": "saved", "created_at": "t3"},
            {"id": 4, "role": "assistant", "content": "Saved.", "created_at": "t4"},
            {"id": 5, "role": "user", "content": "decided", "lane_call": "decide", "created_at": "t5"},
            {"id": 6, "role": "user", "content": "what colour?", "created_at": "t6"},
            {"id": 7, "role": "assistant", "content": "Teal.", "created_at": "t7"},
        ],
        "executions": [execution("memory", message_id=2, id=1), execution("terminal", message_id=7, id=2)],
    }
    first, second = ev.split_turns(snapshot)
    assert ev.ok_names(first.executions) == ["memory"] and first.answer == "Saved."
    assert ev.ok_names(second.executions) == ["terminal"] and second.answer == "Teal."


# --- the data -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def benches(ev):
    return {name: ev.load_bench(DATA / name) for name in FILES}


def test_the_files_follow_the_schema(ev, names, benches):
    for name, bench in benches.items():
        assert ev.validate(bench, names) == [], name
    assert benches["everyday_heldout.json"]["heldout"] is True
    assert benches["everyday_tuning.json"]["heldout"] is False
    assert benches["everyday_seen.json"]["heldout"] is False  # read while tuning: no longer held out


def test_enough_turns_and_every_family(ev, benches):
    turns = {name: [t for _, _, t in ev.turns_of(bench)] for name, bench in benches.items()}
    assert sum(len(ts) for ts in turns.values()) >= 60
    assert len(turns["everyday_heldout.json"]) >= 24
    for name, ts in turns.items():
        assert {t["family"] for t in ts} == ev.FAMILIES, name
        assert any(t.get("refers_back") for t in ts), name
        voices = {s["voice"] for s in benches[name]["sessions"]}
        assert len(voices) >= 4, name


def test_every_core_tool_and_deferred_builtin_is_expected_somewhere(ev, benches):
    expected = {tool for bench in benches.values() for _, _, t in ev.turns_of(bench)
                for option in [t["expect"]["tools"], *t["expect"].get("any_of", [])] for tool in option}
    assert set(DEFAULT_CORE_TOOLS) - {"patch", "search_files"} <= expected | {"clarify"}
    assert {"patch", "search_files", "clarify"} <= expected
    assert ev.DEFERRED_BUILTINS <= expected


def test_most_turns_do_not_spell_a_tool_name(ev, names, benches):
    words = [t["user"] for bench in benches.values() for _, _, t in ev.turns_of(bench)]
    spelled = [w for w in words if any(re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", w, re.IGNORECASE)
                                       for n in names)]
    assert len(spelled) <= len(words) // 10, spelled


def test_web_pages_and_placeholders(ev, benches):
    for bench in benches.values():
        for _, _, t in ev.turns_of(bench):
            if "{web_url}" in t["user"]:
                page = re.search(r"\{web_url\}/(\S+?)(?=[\s?]|$)", t["user"]).group(1)
                assert page in bench["web_pages"], page
        json.dumps(bench)


# --- the runner against a shim with a scripted model --------------------------------------------


def test_run_file_drives_the_shim_and_judges_from_its_store(ev, names, tmp_path):
    from stack.config import Settings
    from stack.tools.registry import build_registry
    from tests.fakes.scripted_model import ScriptedModel, call, text
    from tests.integration.shim_server import ShimServer

    def decision(body):  # the lane's question: which tool the request needs
        return text('{"next": "memory"}' if "teal" in body["messages"][-1]["content"] else '{"next": "answer"}')

    def script(body):  # the forced call, or the composed answer
        if body.get("tool_choice"):
            return call("memory", {"action": "add", "content": "favourite colour: teal"})
        if "teal" in body["messages"][-1]["content"]:
            return text("Saved: your favourite colour is teal.")
        return text("Hello! How can I help?")

    bench = {"path": "inline.json", "heldout": True, "sessions": [{"id": "s1", "voice": "terse", "turns": [
        {"user": "hi there", "family": "chitchat", "expect": {"tools": []}},
        {"user": "please keep in mind that my favourite colour is teal", "family": "memory_save",
         "setup": {"files": {"a.txt": "x\n"}},
         "expect": {"tools": ["memory"], "ran_with": {"memory": ["teal"]}}},
    ]}]}
    with ScriptedModel(script, decision=decision) as model:
        settings = Settings(home=tmp_path, llm_url=model.url)
        with ShimServer(settings, registry=build_registry()) as shim:
            lane = ev.Lane(shim.url, key=None, profile="search", timeout_s=30)
            verdicts = ev.run_file(lane, bench, run_id="t", web_url="http://127.0.0.1:9", home=tmp_path,
                                   limit=None, tool_names=names, judge=ev.ClaimJudge(model.url, timeout_s=10),
                                   progress=lambda line: None)
    assert [(v.passed, v.ran) for v in verdicts] == [(True, []), (True, ["memory"])], verdicts
    # the decision, the answer and its reading; the decision, the forced call, the answer and its reading
    assert [v.model_calls for v in verdicts] == [3, 4]
    assert [v.answer for v in verdicts] == ["Hello! How can I help?", "Saved: your favourite colour is teal."]
    assert (tmp_path / "workspace" / "a.txt").read_text() == "x\n"
    result = ev.summary(verdicts)
    assert (result["passed"], result["total"], result["false_claims"]) == (2, 2, 0)
    assert result["files"]["inline.json"]["heldout"] is True
