"""The agent's turn against a scripted model over real HTTP, asserting the store with SQL.

Each step the lane asks a decision (answered from the scripted model's `decision` channel, by
default the tool of the script's next reply), forces that tool's call (the script's next reply),
runs it, and at the end composes the answer (the script's next reply), held to the store.
"""

import asyncio
import dataclasses
import json
import re
import sqlite3
import time

import pytest

from stack.agent.answer_check import CANNOT, CANNOT_INSTEAD, NOT_DONE
from stack.agent.llm_client import LlmClient, LlmError, LlmTimeout
from stack.agent.loop import FORCED_CALL_MAX_TOKENS, Agent
from stack.agent.reading import OTHER
from stack.config import Settings
from stack.store import Store
from stack.tools.base import Tool, ToolError, object_schema
from stack.tools.calculator import TOOLS as CALCULATOR
from stack.tools.registry import Registry
from tests.fakes.scripted_model import Reply, ScriptedModel, call, literal_reading, text


def _add(arguments, ctx):
    return str(arguments["a"] + arguments["b"])


def _fail(arguments, ctx):
    raise ToolError("the disk is on fire")


def _crash(arguments, ctx):
    raise RuntimeError("bug in tool")


def _ask(arguments, ctx):
    ctx.question_for_user = arguments["question"]
    return "asked"


NUMBER = {"type": "integer"}
TOOLS = [
    Tool("add", "Add two integers.", object_schema({"a": NUMBER, "b": NUMBER}, ["a", "b"]), _add),
    Tool("fail", "Always fails.", object_schema({}), _fail),
    Tool("crash", "Has a bug.", object_schema({}), _crash),
    Tool("clarify", "Ask the user.", object_schema({"question": {"type": "string"}}, ["question"]),
         _ask),
]
FORCED_ADD = {"type": "function", "function": {"name": "add"}}


@pytest.fixture
def lane(tmp_path):
    settings = Settings(home=tmp_path, tool_search="off", llm_timeout_s=2.0, max_iterations=4)
    store = Store(settings.db_path)
    yield settings, store
    store.close()


def run(settings, store, script, user="hi", decision=None, tools=TOOLS, fit=None, reading=None, english=None,
        **kwargs):
    async def go():
        with ScriptedModel(script, decision=decision, fit=fit, reading=reading, english=english) as model:
            llm = LlmClient(model.url, model=None, timeout_s=settings.llm_timeout_s)
            try:
                agent = Agent(settings, store, Registry(tools), llm)
                session = store.create_session()
                result = await agent.run_turn(session, [{"role": "user", "content": user}], **kwargs)
                return result, model
            finally:
                await llm.aclose()
    return asyncio.run(go())


def run_turns(settings, store, script, users, decision=None, fit=None, reading=None, tools=TOOLS):
    async def go():
        with ScriptedModel(script, decision=decision, fit=fit, reading=reading) as model:
            llm = LlmClient(model.url, model=None, timeout_s=2.0)
            agent = Agent(settings, store, Registry(tools), llm)
            session = store.create_session()
            results = [await agent.run_turn(session, [{"role": "user", "content": u}]) for u in users]
            await llm.aclose()
            return results, model
    return asyncio.run(go())


def rows(settings, sql, *params):
    with sqlite3.connect(settings.db_path) as db:
        return db.execute(sql, params).fetchall()


def system_notes(settings):
    return [r[0] for r in rows(settings, "SELECT content FROM messages WHERE role = 'system'"
                               " AND lane_prompt = 0 ORDER BY id")]


def held_back(settings):
    """Why each reply the lane held back was not passed on (lane_calls, purpose 'held')."""
    return [r[0] for r in rows(settings, "SELECT reason FROM lane_calls WHERE purpose = 'held' ORDER BY id")]


def choices_of(decide_request):
    return decide_request["response_format"]["json_schema"]["schema"]["properties"]["next"]["enum"]


def decide_then(first, after):
    """A decision that names `first` before any tool ran in the turn, and `after` once one did."""
    def decide(body):
        nothing_ran = "Nothing has run for it yet." in body["messages"][-1]["content"]
        return Reply(json.dumps({"next": first if nothing_ran else after}))
    return decide


def history(request):
    """A forced call's messages after the system prompt, as (role, content)."""
    return [(m["role"], m["content"]) for m in request["messages"][1:]]


def test_native_call_runs_and_is_recorded(lane):
    settings, store = lane
    result, model = run(settings, store, [call("add", {"a": 2, "b": 3}), text("It is 5.")],
                        user="2 plus 3?")
    assert result.content == "It is 5." and result.finish_reason == "stop"
    assert result.tools_executed == ["add"]
    # the decision, the call, the answer and its reading: one task is done once a tool ran
    assert result.model_calls == 4
    assert rows(settings, "SELECT tool_name, status, origin, via_bridge, result FROM tool_executions"
                ) == [("add", "ok", "native", 0, "5")]
    tool_rows = rows(settings, "SELECT m.content FROM messages m JOIN tool_executions e"
                     " ON e.tool_call_id = m.tool_call_id WHERE m.role = 'tool'")
    assert tool_rows == [("5",)]
    assert rows(settings, "SELECT purpose, content FROM lane_calls") == [("decide", '{"next": "add"}'),
                                                                         ("read", '{"done": []}')]
    forced_call, compose = model.requests
    assert forced_call["tool_choice"] == FORCED_ADD and forced_call["stream"] is True
    # the answer is composed without tools: the results as facts, then the user's own message
    assert "tools" not in compose and "tool_choice" not in compose
    assert compose["messages"][-1] == {"role": "user", "content": "2 plus 3?"}
    assert "- add (ok): 5" in compose["messages"][-2]["content"]
    last = rows(settings, "SELECT role, content, lane_note FROM messages ORDER BY id DESC LIMIT 1")[0]
    assert last == ("assistant", "It is 5.", 0)


@pytest.mark.parametrize("written", [
    '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>',
    '{"name": "add", "arguments": {"a": 2, "b": 3}}',
    'Let me add.\n```json\n{"name": "add", "arguments": {"a": 2, "b": "3"}}\n```',
])
def test_call_written_as_text_runs_with_origin_content(lane, written):
    settings, store = lane
    result, model = run(settings, store, [text(written), text("5")])
    assert model.requests[0]["tool_choice"] == FORCED_ADD
    assert result.tools_executed == ["add"] and result.content == "5"
    assert rows(settings, "SELECT tool_name, status, origin FROM tool_executions") == [
        ("add", "ok", "content")]
    stored = rows(settings, "SELECT tool_calls FROM messages WHERE role='assistant' AND tool_calls"
                  " IS NOT NULL")
    assert json.loads(stored[0][0])[0]["function"]["name"] == "add"


def test_text_that_only_looks_like_a_call_is_not_executed(lane):
    settings, store = lane
    result, _ = run(settings, store, [text('I called {"name": "web_search", "arguments": {}} and '
                                           'the answer is 5.')])
    assert result.tools_executed == []
    assert rows(settings, "SELECT count(*) FROM tool_executions") == [(0,)]


def test_unknown_tool_is_refused_and_reported_to_the_model(lane):
    settings, store = lane
    result, model = run(settings, store, [call("launch_rockets", {}), text("I cannot launch rockets.")],
                        decision='{"next": "add"}')
    assert rows(settings, "SELECT tool_name, status FROM tool_executions") == [
        ("launch_rockets", "refused")]
    compose = model.requests[1]
    assert "- launch_rockets (refused): unknown tool 'launch_rockets'" in compose["messages"][-2]["content"]
    assert result.tools_executed == [] and result.content == "I cannot launch rockets."


def test_broken_arguments_get_the_schema_back_and_the_call_is_made_once_more(lane):
    settings, store = lane
    result, model = run(settings, store, [call("add", '{"a": 2, "b": '), call("add", {"a": 2, "b": 3}),
                                          text("It is 5.")])
    assert rows(settings, "SELECT status FROM tool_executions ORDER BY id") == [("error",), ("ok",)]
    error = rows(settings, "SELECT error FROM tool_executions ORDER BY id")[0][0]
    assert "not valid JSON" in error and '"required":["a","b"]' in error
    retry = model.requests[1]
    assert retry["tool_choice"] == FORCED_ADD  # the retry, asked with the error in view
    tool_message = [m for m in retry["messages"] if m["role"] == "tool"][0]
    assert tool_message["content"].startswith("ERROR:")
    assert result.tools_executed == ["add"] and result.content == "It is 5."
    assert len(model.decide_requests) == 1  # a retry needs no decision


def test_arguments_double_encoded_as_a_string_are_an_error(lane):
    settings, store = lane
    run(settings, store, [call("add", json.dumps(json.dumps({"a": 1, "b": 2}))),
                          call("add", {"a": 1, "b": 2}), text("3")])
    status, error = rows(settings, "SELECT status, error FROM tool_executions ORDER BY id")[0]
    assert status == "error" and "not a string that contains JSON" in error


def test_schema_violation_names_the_path_and_gives_an_example(lane):
    settings, store = lane
    run(settings, store, [call("add", {"a": "two", "b": 3}), call("add", {"a": 2, "b": 3}), text("5")])
    error = rows(settings, "SELECT error FROM tool_executions ORDER BY id")[0][0]
    assert "at a:" in error and '"example"' not in error and "example:" in error


def test_a_failed_call_is_made_once_more_then_the_answer_is_composed(lane):
    settings, store = lane
    result, model = run(settings, store, [call("add", {"a": "two", "b": 3}),
                                          call("add", {"a": "two", "b": "three"}),
                                          text("I could not add those.")], user="add two and three")
    assert rows(settings, "SELECT tool_name, status FROM tool_executions ORDER BY id") == [
        ("add", "error"), ("add", "error")]
    assert [r.get("tool_choice") for r in model.requests] == [FORCED_ADD, FORCED_ADD, None]
    facts = model.requests[2]["messages"][-2]["content"]
    assert facts.count("- add (error):") == 2
    assert result.content == "I could not add those." and result.tools_executed == []


def test_where_every_call_failed_the_decision_is_asked_among_the_other_tools(lane):
    settings, store = lane

    def decide(body):  # the failing tool while it is offered, then add, then the answer
        choices = choices_of(body)
        return Reply(json.dumps({"next": next(n for n in ("fail", "add", "answer") if n in choices)}))

    result, model = run(settings, store, [call("fail", {}), call("fail", {}), call("add", {"a": 2, "b": 3}),
                                          text("2 plus 3 is 5.")],
                        user="add 2 to 3 although it always fails", decision=decide)
    assert rows(settings, "SELECT tool_name, status FROM tool_executions ORDER BY id") == [
        ("fail", "error"), ("fail", "refused"), ("add", "ok")]
    # the first question offered both; after the failure, the tool the request names needs none
    assert {"add", "fail"} <= set(choices_of(model.decide_requests[0]))
    assert result.content == "2 plus 3 is 5." and result.tools_executed == ["add"]


def _shell(arguments, ctx):
    command = arguments["command"]
    return "exit code: 0\n3 files\n" if command == "ls | wc -l" else f"exit code: 127\n{command}: not found\n"


SHELL = Tool("sh", "Run a shell command.", object_schema({"command": {"type": "string"}}, ["command"]), _shell)


def test_a_command_that_ran_and_failed_is_not_made_again(lane):
    """On the everyday dev files the 1.5B model wrote the same failing command again all six times
    it was asked to retry one (`top`, `wc -l` of a file name it guessed): a command that ran is
    answered from, exit code and all."""
    settings, store = lane
    answer = "count-files: not found (exit code 127)."
    result, model = run(settings, store, [call("sh", {"command": "count-files"}), text(answer)],
                        user="how many files are here", decision='{"next": "sh"}', tools=[*TOOLS, SHELL])
    assert rows(settings, "SELECT tool_name, status FROM tool_executions ORDER BY id") == [("sh", "ok")]
    assert [r.get("tool_choice", {}).get("function", {}).get("name") for r in model.requests] == ["sh", None]
    assert result.content == answer


def test_tool_failure_and_tool_bug_are_errors_not_crashes(lane):
    settings, store = lane
    result, model = run(settings, store, [Reply(tool_calls=[{"name": "fail", "arguments": {}},
                                                            {"name": "crash", "arguments": {}}]),
                                          text("Giving up."), text("Both failed.")])
    assert result.content == "Both failed."
    assert rows(settings, "SELECT tool_name, status FROM tool_executions ORDER BY id") == [
        ("fail", "error"), ("crash", "error")]
    # the last failed call was forced once more; its reply made no call
    assert model.requests[1]["tool_choice"] == {"type": "function", "function": {"name": "crash"}}
    assert "- crash (error): crash failed: RuntimeError: bug in tool" in model.requests[2]["messages"][-2]["content"]


def test_steps_running_out_still_composes_the_answer_with_finish_reason_iteration_limit(lane):
    settings, store = lane
    settings = dataclasses.replace(settings, max_iterations=2)
    result, model = run(settings, store, [call("add", {"a": 2, "b": 3}), call("crash", {}),
                                          text("5, and crash failed.")],
                        user="add 2 and 3, then run crash", decision=decide_then("add", "answer"))
    assert rows(settings, "SELECT tool_name, status FROM tool_executions ORDER BY id") == [
        ("add", "ok"), ("crash", "error")]
    # two steps: the decided add, then crash (the request names it); no step left to retry crash
    assert [r.get("tool_choice", {}).get("function", {}).get("name") for r in model.requests] == [
        "add", "crash", None]
    assert result.finish_reason == "iteration_limit" and result.content == "5, and crash failed."
    assert result.model_calls == 5  # the decision, two calls, the answer and its reading


@pytest.mark.parametrize("question, reader", [("Which Marta?", "nothing"),
                                              ("I sent Marta the text. Anything else?", "other")])
def test_a_question_to_the_user_is_held_to_the_store_like_an_answer(lane, question, reader):
    """A clarify call's question is the model's words: where its reading reports an action that
    did not run, the user gets the lane's own answer, and the question is kept with why."""
    settings, store = lane
    result, model = run(settings, store, [call("clarify", {"question": question})], user="text Marta",
                        reading=other_action if reader == "other" else None)
    if reader == "nothing":
        assert result.content == question and result.finish_reason == "clarify" and held_back(settings) == []
    else:
        assert result.content == f"{NOT_DONE} {CANNOT}" and result.finish_reason == "stop"
        assert held_back(settings) == ["it reports an action that did not run"]
        assert rows(settings, "SELECT content FROM messages WHERE role = 'assistant' AND lane_note = 1") == \
            [(result.content,)]


def test_clarify_ends_the_turn_with_the_question(lane):
    settings, store = lane
    result, model = run(settings, store, [call("clarify", {"question": "Which file?"}),
                                          text("never sent")])
    assert result.content == "Which file?" and result.finish_reason == "clarify"
    assert len(model.requests) == 1  # the forced call; no answer composed
    last = rows(settings, "SELECT role, content, lane_note FROM messages ORDER BY id DESC LIMIT 1")[0]
    assert last == ("assistant", "Which file?", 1)


def test_generation_cap_clamps_requested_max_tokens(lane):
    settings, store = lane
    _, model = run(settings, store, [call("add", {"a": 2, "b": 3}), text("5")], max_tokens=10**6)
    forced_call, compose = model.requests
    assert forced_call["max_tokens"] == min(settings.max_tokens, FORCED_CALL_MAX_TOKENS)
    assert compose["max_tokens"] == min(settings.max_tokens, 400)
    _, model = run(settings, store, [call("add", {"a": 2, "b": 3}), text("5")], max_tokens=10)
    assert [r["max_tokens"] for r in model.requests] == [10, 10]


def test_a_model_that_never_stops_is_cancelled_and_the_session_stays_usable(lane):
    settings, store = lane

    async def go():
        with ScriptedModel([Reply(hang=True), text("back")]) as model:
            llm = LlmClient(model.url, model=None, timeout_s=settings.llm_timeout_s)
            agent = Agent(settings, store, Registry(TOOLS), llm)
            session = store.create_session()
            started = time.monotonic()
            with pytest.raises(LlmTimeout):
                await agent.run_turn(session, [{"role": "user", "content": "go on forever"}])
            elapsed = time.monotonic() - started
            await asyncio.sleep(0.3)
            disconnects = model.disconnects
            second = await agent.run_turn(session, [{"role": "user", "content": "hello?"}])
            await llm.aclose()
            return elapsed, disconnects, second, session

    elapsed, disconnects, second, session = asyncio.run(go())
    # Measured median about 2.2 s (the 2 s timeout, then the cancel; three runs, two shared cores);
    # 10x that still fails a model call left running, which hangs forever.
    assert elapsed < 22
    assert disconnects == 1  # the upstream stream was closed, not left running
    assert second.content == "back"
    roles = [r[0] for r in rows(settings, "SELECT role FROM messages WHERE session_id = ? AND"
                                " lane_prompt = 0 ORDER BY id", session)]
    assert roles == ["user", "user", "assistant"]


def test_a_model_error_in_the_decision_reaches_the_caller(lane):
    settings, store = lane

    def broken(body):
        raise RuntimeError("the model server broke")

    with pytest.raises(LlmError):
        run(settings, store, [text("never sent")], decision=broken)
    assert rows(settings, "SELECT role FROM messages WHERE lane_prompt = 0") == [("user",)]
    assert rows(settings, "SELECT count(*) FROM lane_calls") == [(0,)]


def test_usage_is_summed_over_the_turn(lane):
    settings, store = lane
    result, _ = run(settings, store, [call("add", {"a": 1, "b": 2}), text("3")])
    prompt_tokens = rows(settings, "SELECT sum(t), max(t) FROM (SELECT prompt_tokens t FROM messages"
                         " WHERE role='assistant' UNION ALL SELECT prompt_tokens FROM lane_calls)")[0]
    assert result.prompt_tokens == prompt_tokens[0] > 0
    assert result.peak_prompt_tokens == prompt_tokens[1]


def test_history_is_trimmed_to_the_context_the_llm_service_reports(lane):
    settings, store = lane
    session = store.create_session()
    for n in range(6):
        store.add_message(session, "user", f"old question {n} " + "x" * 2000)
        store.add_message(session, "assistant", f"old answer {n} " + "y" * 2000)

    async def go():
        with ScriptedModel([call("add", {"a": 2, "b": 3}), text("5")], n_ctx=2048) as model:
            llm = LlmClient(model.url, model="pinned-name", timeout_s=settings.llm_timeout_s)
            agent = Agent(settings, store, Registry(TOOLS), llm)
            await agent.run_turn(session, [{"role": "user", "content": "the new question"}])
            await llm.aclose()
            return model.requests[0]

    sent = asyncio.run(go())
    assert sent["tool_choice"] == FORCED_ADD
    contents = [m["content"] for m in sent["messages"]]
    assert contents[0].startswith("You are") and contents[-1] == "the new question"
    assert any(c.startswith("old question 5") for c in contents)
    assert not any(c.startswith("old question 0") for c in contents)
    assert (len(json.dumps(sent["messages"])) + len(json.dumps(sent["tools"]))) // 4 <= 2048
    assert sent["model"] == "pinned-name"
    # every stored message is still in the store: only the request was trimmed
    assert len(store.messages(session)) >= 13


def test_an_identical_call_runs_once_and_a_third_attempt_ends_the_turn(lane):
    settings, store = lane
    same = {"name": "add", "arguments": {"a": 2, "b": 3}}
    result, model = run(settings, store, [Reply(tool_calls=[same, same, same]), text("never sent")])
    assert rows(settings, "SELECT tool_name, status FROM tool_executions ORDER BY id") == [
        ("add", "ok"), ("add", "refused")]
    refusal = rows(settings, "SELECT content FROM messages WHERE role = 'tool' ORDER BY id")[1][0]
    assert "this exact call ran earlier in this turn and returned: 5" in refusal
    assert result.finish_reason == "repeated_call" and len(model.requests) == 1
    assert result.content.strip() and "add returned 5" in result.content
    assert result.tools_executed == ["add"]


def test_an_identical_failing_call_is_never_made_three_times(lane):
    settings, store = lane
    result, model = run(settings, store, lambda body: call("fail", {}), decision='{"next": "fail"}')
    assert rows(settings, "SELECT status, error FROM tool_executions ORDER BY id") == [
        ("error", "the disk is on fire"),
        ("refused", "Not run: this exact call already failed in this turn with: the disk is on fire\n"
                    "Do not repeat it. Call a tool with different arguments, or tell the user what failed.")]
    assert len(model.requests) == 3  # the call, its retry, the answer (a call again: no answer, not written again)
    assert "fail error: the disk is on fire" in result.content
    assert "the model gave no answer" in result.content


def run_note_tool(settings, store, run, script):
    """One turn of "note it" with a tool `note` (action add or replace, and a text) that runs `run`."""
    noted = Tool("note", "Keep a note.", object_schema(
        {"action": {"type": "string", "enum": ["add", "replace"]}, "text": {"type": "string"}},
        ["action", "text"]), run)

    async def go():
        with ScriptedModel(script) as model:
            llm = LlmClient(model.url, model=None, timeout_s=2.0)
            agent = Agent(settings, store, Registry([noted]), llm)
            result = await agent.run_turn(store.create_session(), [{"role": "user", "content": "note it"}])
            await llm.aclose()
            return result

    return asyncio.run(go())


def test_a_call_that_only_names_another_mode_for_the_same_values_is_not_run_again(lane):
    settings, store = lane
    script = [Reply(tool_calls=[
                  {"name": "note", "arguments": {"action": "add", "text": "dentist on 3 March"}},
                  {"name": "note", "arguments": {"action": "replace", "text": "dentist on 3 March"}}]),
              text("Noted: dentist on 3 March.")]
    result = run_note_tool(settings, store, lambda arguments, ctx: f"{arguments['action']}: {arguments['text']}",
                           script)
    assert result.tools_executed == ["note"] and result.content == "Noted: dentist on 3 March."
    assert [r[0] for r in rows(settings, "SELECT status FROM tool_executions ORDER BY id")] == ["ok", "refused"]


def test_after_a_failed_call_the_same_values_in_another_mode_run(lane):
    """memory replace X whose old_text matched nothing, then add X: the add may well succeed."""
    settings, store = lane

    def keep(arguments, ctx):
        if arguments["action"] == "replace":
            raise ToolError("no entry contains that text")
        return f"added: {arguments['text']}"

    replace = {"name": "note", "arguments": {"action": "replace", "text": "supper club folder"}}
    script = [Reply(tool_calls=[replace, {"name": "note", "arguments": {"action": "add", "text": "supper club folder"}},
                                replace]),
              text("Noted: supper club folder.")]
    result = run_note_tool(settings, store, keep, script)
    assert result.tools_executed == ["note"]
    assert rows(settings, "SELECT status, result FROM tool_executions ORDER BY id") == [
        ("error", None), ("ok", "added: supper club folder"), ("refused", None)]


# The decision


def test_the_decision_chooses_among_every_tool_and_its_tool_is_forced(lane):
    settings, store = lane
    result, model = run(settings, store, [call("add", {"a": 2, "b": 3}), text("It is 5.")],
                        user="what do two and three make together?", decision='{"next": "add"}')
    decide = model.decide_requests[0]
    assert sorted(choices_of(decide)) == ["add", "answer", "clarify", "crash", "fail"]
    assert "what do two and three make together?" in decide["messages"][-1]["content"]
    assert decide["temperature"] == 0.0 and "tools" not in decide
    assert [r.get("tool_choice") for r in model.requests] == [FORCED_ADD, None]
    assert result.tools_executed == ["add"] and result.content == "It is 5."
    # after add ran, a request of one task is done: no second question
    assert rows(settings, "SELECT purpose, content FROM lane_calls") == [("decide", '{"next": "add"}'),
                                                                         ("read", '{"done": []}')]
    assert system_notes(settings) == []


def test_a_decision_to_answer_runs_nothing_and_composes_the_answer(lane):
    settings, store = lane
    result, model = run(settings, store, [text("Hello!")], user="hi", decision='{"next": "answer"}')
    assert result.content == "Hello!" and len(model.requests) == 1 and system_notes(settings) == []
    assert "Nothing has run for the user's last message yet." in model.requests[0]["messages"][-2]["content"]
    assert rows(settings, "SELECT count(*) FROM tool_executions") == [(0,)]


def test_a_forced_reply_cut_by_the_cap_is_not_made_again(lane):
    settings, store = lane
    runaway = Reply(content='{"name": "add", "arguments": {"a": "1111111111', finish_reason="length")
    result, model = run(settings, store, [runaway, text("I could not work that out.")],
                        user="2 plus 3?", decision='{"next": "add"}')
    assert [r.get("tool_choice") for r in model.requests] == [FORCED_ADD, None]
    assert rows(settings, "SELECT count(*) FROM tool_executions") == [(0,)]


def test_a_forced_reply_without_a_call_is_forced_once_more_then_never_again(lane):
    settings, store = lane
    spelled = text('{"name": "add", "a": "two", "b": 3}')  # call-shaped, but not a valid call
    result, model = run(settings, store, [spelled, spelled, text("I could not work that out.")],
                        user="2 plus 3?", decision='{"next": "add"}')
    assert rows(settings, "SELECT count(*) FROM tool_executions") == [(0,)]
    # retried once; asked again (nothing ran yet), the decision names add once more: given once per tool
    assert len(model.decide_requests) == 2
    assert [r.get("tool_choice") for r in model.requests] == [FORCED_ADD, FORCED_ADD, None]
    assert result.content == "I could not work that out." and result.tools_executed == []


def test_the_decision_and_the_answer_read_the_notes_as_they_are_now(lane):
    settings, store = lane
    settings.memory_path.parent.mkdir(parents=True, exist_ok=True)
    settings.memory_path.write_text("My locker code is 4410\n")

    async def go():
        with ScriptedModel([text("Your locker code is 4410."), text("It is 4410.")]) as model:
            llm = LlmClient(model.url, model=None, timeout_s=2.0)
            agent = Agent(settings, store, Registry(TOOLS), llm)
            session = store.create_session()
            first = await agent.run_turn(session, [{"role": "user", "content": "what's my locker code?"}])
            settings.memory_path.write_text("My locker code is 1234\n")  # changed mid-session
            await agent.run_turn(session, [{"role": "user", "content": "and the code again?"}])
            await llm.aclose()
            return first, model

    first, model = asyncio.run(go())
    assert first.content == "Your locker code is 4410." and first.tools_executed == []
    kept = "Notes the user asked you to keep:\n- My locker code is 4410"
    # the decision can see that the notes answer the request, so no tool is needed
    assert model.decide_requests[0]["messages"][-1]["content"].startswith(kept + "\n\n")
    assert kept in model.requests[0]["messages"][1]["content"]
    # a note saved during the session ("remind me, what's my code?" right after saving it) is
    # read by the next turn's decision and answer
    now = "Notes the user asked you to keep:\n- My locker code is 1234"
    assert model.decide_requests[1]["messages"][-1]["content"].startswith(now + "\n\n")
    assert now in model.requests[1]["messages"][1]["content"]


def test_after_a_tool_ran_the_decision_names_the_request_s_next_step(lane):
    settings, store = lane
    result, model = run(settings, store, [call("add", {"a": 2, "b": 3}),
                                          call("clarify", {"question": "Is 5 right?"})],
                        user="add 2 and 3, then check the sum with me")
    assert len(model.decide_requests) == 2
    assert "- add (ok): 5" in model.decide_requests[1]["messages"][-1]["content"]
    assert "add" not in choices_of(model.decide_requests[1])
    assert model.requests[1]["tool_choice"] == {"type": "function", "function": {"name": "clarify"}}
    assert result.tools_executed == ["add", "clarify"] and result.finish_reason == "clarify"
    assert result.content == "Is 5 right?"


def test_a_decision_for_a_tool_that_already_ran_is_no_step(lane):
    settings, store = lane
    result, model = run(settings, store, [call("add", {"a": 2, "b": 3}), text("It is 5.")],
                        user="add 2 and 3, then tell me the sum", decision='{"next": "add"}')
    assert result.content == "It is 5." and len(model.requests) == 2
    assert rows(settings, "SELECT tool_name, status FROM tool_executions") == [("add", "ok")]


def test_a_request_of_one_task_is_done_once_a_tool_ran_for_it(lane):
    settings, store = lane
    result, model = run(settings, store, [call("add", {"a": 2, "b": 3}), text("It is 5.")],
                        user="what do two and three make together?", decision=decide_then("add", "clarify"))
    assert len(model.decide_requests) == 1 and result.content == "It is 5."
    assert result.tools_executed == ["add"] and len(model.requests) == 2


def test_a_request_of_two_tasks_is_done_once_two_tools_ran_for_it(lane):
    """Seen on the six steps: after the terminal and memory had done "run `echo $((6*7))`, then save
    the output to memory", the decision was asked again and named run_python, which ran."""
    settings, store = lane
    double = Tool("double", "Double an integer.", object_schema({"n": NUMBER}, ["n"]),
                  lambda arguments, ctx: str(2 * arguments["n"]))
    script = [call("add", {"a": 2, "b": 3}), call("double", {"n": 5}), text("5, doubled 10.")]
    result, model = run(settings, store, script, user="add 2 and 3, then double the sum",
                        decision=decide_then("add", "clarify"), tools=[*TOOLS, double])
    assert result.tools_executed == ["add", "double"] and result.content == "5, doubled 10."
    assert len(model.decide_requests) == 1  # double is named: forced; then both tasks are done
    assert result.finish_reason == "stop"


def test_a_tool_the_request_names_is_still_called_after_as_many_tools_as_tasks_ran(lane):
    """Seen: "Run `echo $((6*7))` in the terminal and then store whatever it prints in memory" ran
    run_python (the model's pick), then memory (named): two tools for two tasks, and the terminal,
    which the user named, is still to run."""
    settings, store = lane
    double = Tool("double", "Double an integer.", object_schema({"n": NUMBER}, ["n"]),
                  lambda arguments, ctx: str(2 * arguments["n"]))
    script = [call("add", {"a": 2, "b": 2}), call("double", {"n": 4}), call("fail", {}), call("fail", {}),
              text("8, and fail failed.")]
    result, model = run(settings, store, script, user="double the number 4, then fail on purpose",
                        decision=decide_then("add", "answer"), tools=[*TOOLS, double])
    assert [r["tool_choice"]["function"]["name"] for r in model.requests[:3]] == ["add", "double", "fail"]
    assert rows(settings, "SELECT tool_name, status FROM tool_executions ORDER BY id")[:3] == [
        ("add", "ok"), ("double", "ok"), ("fail", "error")]


def test_a_next_step_is_chosen_among_the_index_s_best_tools_that_have_not_run(lane):
    settings, store = lane
    script = [call("add", {"a": 2, "b": 3}), text("It is 5.")]
    result, model = run(settings, store, script, user="add 2 and 3, and then have it go wrong",
                        decision=decide_then("add", "answer"))
    choices = choices_of(model.decide_requests[1])
    assert "add" not in choices and "answer" in choices and 2 <= len(choices) <= 4  # three at most
    assert result.tools_executed == ["add"] and result.content == "It is 5."


def test_after_the_first_of_two_tasks_the_decision_reads_the_part_not_done_yet(lane):
    """Seen on the six steps in Spanish: after the terminal printed 42 for "… en la terminal y
    luego guarda lo que imprima en la memoria" the decision, reading the whole request, picked
    calculate. The second question now shows the request's part not done, in its own words."""
    settings, store = lane
    script = [call("add", {"a": 2, "b": 3}), text("It is 5.")]
    user = "suma 2 y 3 y luego haz que falle a propósito"
    result, model = run(settings, store, script, user=user, decision=decide_then("add", "answer"))
    first, second = (r["messages"][-1]["content"] for r in model.decide_requests[:2])
    assert "not done yet" not in first
    assert "The part of the message not done yet: haz que falle a propósito" in second
    assert result.tools_executed == ["add"]


def test_a_next_step_the_request_names_is_forced_without_a_question(lane):
    settings, store = lane
    script = [call("add", {"a": 2, "b": 3}), call("clarify", {"question": "ok?"})]
    result, model = run(settings, store, script, user="add 2 and 3, then clarify the result with me",
                        decision=decide_then("add", "answer"))
    assert len(model.decide_requests) == 1  # only the first step's
    assert model.requests[1]["tool_choice"] == {"type": "function", "function": {"name": "clarify"}}
    assert result.tools_executed == ["add", "clarify"]


def test_a_failed_step_retried_once_does_not_block_the_request_s_next_one(lane):
    settings, store = lane
    script = [call("add", {"a": 2, "b": 3}), call("crash", {}), call("crash", {}), call("fail", {})]
    result, model = run(settings, store, script, user="add 2 and 3, then run crash, then run fail",
                        decision=decide_then("add", "answer"))
    assert [(n, s) for n, s in rows(settings, "SELECT tool_name, status FROM tool_executions ORDER BY id")] == [
        ("add", "ok"), ("crash", "error"), ("crash", "refused"), ("fail", "error")]  # the retry was identical
    assert [r["tool_choice"]["function"]["name"] for r in model.requests[:4]] == ["add", "crash", "crash", "fail"]


# The answer, held to the store


def test_a_composed_answer_that_merely_mentions_a_tool_is_passed_on(lane):
    settings, store = lane
    prose = text("You can call the add function with a=2 and b=3 to get the sum.")
    result, model = run(settings, store, [prose, text("never sent")])
    assert len(model.requests) == 1 and len(model.decide_requests) == 1
    assert system_notes(settings) == [] and result.content == prose.content
    assert rows(settings, "SELECT * FROM tool_executions") == []


def test_a_tool_named_by_an_everyday_word_in_an_answer_is_no_claim(lane):
    settings, store = lane
    question = text("Could you clarify which file you mean?")
    result, model = run(settings, store, [question, text("never sent")])
    assert len(model.requests) == 1 and system_notes(settings) == []
    assert result.content == question.content


def test_naming_a_tool_that_ran_is_no_claim(lane):
    settings, store = lane
    result, model = run(settings, store, [call("add", {"a": 2, "b": 3}), text("I used add: 5.")])
    assert system_notes(settings) == [] and len(model.requests) == 2
    assert result.content == "I used add: 5."


def test_an_empty_answer_is_the_lane_s_account_of_what_ran(lane):
    settings, store = lane
    result, model = run(settings, store, [call("add", {"a": 2, "b": 3}), text(""), text("never sent")])
    assert len(model.requests) == 2 and result.finish_reason == "stop" and result.model_calls == 3
    assert result.content == ("I could not write a reliable answer. What ran for this request:\n"
                              "- add returned 5\n(The model's reply was not passed on: the model gave no answer.)")
    assert held_back(settings) == ["the model gave no answer"]  # not written again
    last = rows(settings, "SELECT role, content, lane_note FROM messages ORDER BY id DESC LIMIT 1")[0]
    assert last == ("assistant", result.content, 1)


@pytest.mark.parametrize("fit", [{"add": 0.3, "reply_in_words": 0.6}, {"add": 0.9, "reply_in_words": 0.3}])
def test_an_answer_recalling_a_tool_of_an_earlier_turn_carries_the_lanes_receipt(lane, fit):
    """The reading (a literal reader here) finds add named as done in the second turn, where
    nothing ran; add ran in the first: the user gets the answer with the store's truth beside it
    (a recall is not withdrawn), and no call is forced, even where add fits better than words:
    the answer recalls that run (lever "claimed" leaves a summary of earlier turns alone)."""
    settings, store = lane
    results, model = run_turns(settings, store, [call("add", {"a": 2, "b": 3}), text("5"),
                                                 text("I used add for that: 5.")],
                               ["2 plus 3?", "how did you get that?"], reading=literal_reading, fit=fit)
    assert results[1].content == "I used add for that: 5.\n\n(The lane's record: no tool ran for this request.)"
    assert results[1].tools_executed == [] and len(rows(settings, "SELECT * FROM tool_executions")) == 1
    assert held_back(settings) == []


NOTE = Tool("note", "Keep a note.", object_schema({"text": {"type": "string"}}, ["text"]),
            lambda arguments, ctx: f"wrote {len(arguments['text'])} characters down", confirms=True)


@pytest.mark.parametrize("answer, recall", [
    ("Your note says: dentist Friday.", True),  # what the earlier run held
    ("Noted in note: book a table at Marcel's for Saturday evening.", False),  # this request's words
    ("I wrote that down for you.", False),  # only the earlier result's receipt words ("wrote")
])
def test_an_earlier_run_backs_a_recall_of_what_it_held_not_this_requests_words(lane, answer, recall):
    """note ran in the first turn; in the second nothing runs and the answer reports note as
    done. Repeating what that run held (its argument values) is a recall, which keeps the
    receipt; naming note with the request's own words, or sharing only the words of the lane's
    confirmation ("wrote … down"), reports acting on this request: the lane's own answer."""
    settings, store = lane
    noted = '{"done": ["note"]}'
    script = [call("note", {"text": "dentist Friday"}), text("Done: wrote 14 characters down."), text(answer)]
    results, model = run_turns(settings, store, script,
                               ["note: dentist Friday", "book a table at Marcel's for Saturday evening"],
                               reading=lambda body: Reply(content=noted), fit={"note": 0.2, "reply_in_words": 0.8},
                               tools=[*TOOLS, NOTE])
    assert results[1].tools_executed == []
    if recall:
        assert results[1].content == f"{answer}\n\n(The lane's record: no tool ran for this request.)"
        assert held_back(settings) == []
    else:
        assert results[1].content == f"{NOT_DONE} {CANNOT}"
        assert held_back(settings) == ["it reports an action that did not run"]


@pytest.mark.parametrize("answer, called", [
    ("I crossed off dentist Friday.", True),  # repeats what the earlier run held: weighed
    ("I used note earlier: dentist Friday.", False),  # an account of the earlier run, naming it
])
def test_an_answer_repeating_an_earlier_run_is_weighed_where_the_tool_fits_unless_it_names_that_run(lane, answer,
                                                                                                   called):
    """note ran in the first turn; the second asks for note's job again and nothing runs. An
    answer that repeats what the earlier run held but does not name it may report doing what the
    request asks (seen in Swedish: "… removed the item "kattmat"." where todo had added it and
    nothing ran): where note fits the request better than words it is called (lever "claimed").
    An answer that names the earlier run is an account of it: the receipt, no call."""
    settings, store = lane
    script = [call("note", {"text": "dentist Friday"}), text("Done: wrote 14 characters down."), text(answer),
              call("note", {"text": "dentist Friday done"}), text("Noted (19 characters): dentist Friday done.")]
    results, model = run_turns(settings, store, script, ["note: dentist Friday", "dentist is done, note that"],
                               reading=lambda body: Reply(content='{"done": ["note"]}'),
                               fit={"note": 0.8, "reply_in_words": 0.3}, tools=[*TOOLS, NOTE])
    if called:
        assert results[1].tools_executed == ["note"]
        assert results[1].content == "Noted (19 characters): dentist Friday done."
    else:
        assert results[1].tools_executed == []
        assert results[1].content == f"{answer}\n\n(The lane's record: no tool ran for this request.)"


@pytest.mark.parametrize("confirmed, recalled", [(True, False), (False, False), (False, True), (True, True)])
def test_an_answer_claiming_a_tool_that_never_ran_is_the_lanes_own_answer(lane, monkeypatch, confirmed, recalled):
    """Lever "cannot": the answer reports add as done, add never ran in the session, and the
    model reads a reply in words as fitting better than add: the claim is held back and the user
    gets the lane's own words that nothing was done, whether or not the "which" probe confirmed
    the reading. Repeating what a note the request is about holds (a recall: "5" is in memory),
    the answer keeps the receipt, confirmed or not."""
    settings, store = lane
    if confirmed:
        confirming(monkeypatch)
    if recalled:
        settings.memory_path.parent.mkdir(parents=True, exist_ok=True)
        settings.memory_path.write_text("2 plus 3 was 5 when I worked it out yesterday\n")
    result, model = run(settings, store, [text("I used add for that: 5.")], user="2 plus 3?",
                        decision='{"next": "answer"}', reading=literal_reading, fit={"add": 0.3, "reply_in_words": 0.6})
    assert result.tools_executed == []
    if recalled:
        assert result.content == "I used add for that: 5.\n\n(The lane's record: no tool ran for this request.)"
        assert held_back(settings) == []
    else:
        assert result.content == f"{NOT_DONE} {CANNOT}"
        assert held_back(settings) == ["it reports an action that did not run"]
        assert rows(settings, "SELECT content, lane_note FROM messages WHERE role = 'assistant'") == \
            [(result.content, 1)]


@pytest.mark.parametrize("fit, called", [({"add": 0.9, "reply_in_words": 0.3}, True),
                                         ({"add": 0.62, "reply_in_words": 0.66}, True),
                                         ({"add": 0.6, "reply_in_words": 0.8}, False)])
def test_a_tool_the_answer_claims_is_called_where_it_fits_the_request_better_than_words(lane, monkeypatch, fit, called):
    """Lever "claimed": the answer reports add, which did not run. Where the model reads add as
    fitting "2 plus 3?" better than a reply in words, or within decide.CLAIM_TIE of it (0.62
    against 0.66: a tie goes to the action the answer reports), that answer is held back, add is
    called, and the answer is written from its result; where words fit clearly better, the lane's
    own answer that nothing was done."""
    settings, store = lane
    confirming(monkeypatch)
    result, model = run(settings, store, [text("I used add for that: 5."), call("add", {"a": 2, "b": 3}),
                                          text("The sum is 5.")],
                        user="2 plus 3?", decision='{"next": "answer"}', reading=literal_reading, fit=fit)
    asked = [re.search(r"^Function: (\S+)", r["messages"][-1]["content"], re.MULTILINE)[1] for r in model.fit_requests]
    assert asked == ["add", "reply_in_words"]
    purposes = [r[0] for r in rows(settings, "SELECT purpose FROM lane_calls WHERE purpose = 'claimed'")]
    assert purposes == ["claimed", "claimed"]
    if called:
        assert result.tools_executed == ["add"] and result.content == "The sum is 5."
        assert held_back(settings) == ["it reports add as done, which did not run for this request"]
        assert rows(settings, "SELECT content FROM messages WHERE role = 'assistant' AND content != ''") == \
            [("The sum is 5.",)]
    else:
        assert result.tools_executed == [] and result.content == f"{NOT_DONE} {CANNOT}"
        assert held_back(settings) == ["it reports an action that did not run"]


# Tools about other things, so that the index's best three for a request are a choice.
ELSEWHERE = [Tool(name, description, object_schema({}), lambda arguments, ctx: "ok")
             for name, description in (("weather", "Current weather for a city."),
                                       ("timer", "Start a countdown timer."),
                                       ("contacts", "Look up a contact's phone number or address."))]


def test_a_claimed_tool_the_index_does_not_rank_for_the_request_is_not_called(lane, monkeypatch):
    """Lever "claimed" weighs only a tool the index ranks among its best for the request: asked
    to tell Bob something, the answer reports add as done and the model's fit question says add
    fits better than words (a 1.5B model says so of a file write for a text message), but the
    index finds nothing of add in the request: nothing is called, the claim is withdrawn."""
    settings, store = lane
    confirming(monkeypatch)
    result, model = run(settings, store, [text("I used add and told Bob."), call("add", {"a": 2, "b": 3}),
                                          text("The sum is 5.")],
                        user="tell Bob I will be late for lunch", decision='{"next": "answer"}',
                        reading=literal_reading, fit={"add": 0.9, "reply_in_words": 0.3}, tools=[*TOOLS, *ELSEWHERE])
    assert result.tools_executed == [] and rows(settings, "SELECT * FROM tool_executions") == []
    assert result.content == f"{NOT_DONE} {CANNOT}"
    assert model.fit_requests == []


MUL = Tool("mul", "Multiply two integers.", object_schema({"a": NUMBER, "b": NUMBER}, ["a", "b"]),
          lambda arguments, ctx: str(arguments["a"] * arguments["b"]))


@pytest.mark.parametrize("answer, reader", [("I added them and emailed the sum to Bob: 5.", "other"),
                                            ("I used add and fail: 5.", "literal")])
def test_beside_a_tool_that_ran_an_answer_reporting_what_did_not_run_is_the_lanes_account(lane, answer, reader):
    """Lever "cannot" where a tool ran for the request: the answer also reports an action no
    tool does, or a tool that never ran in the session. The user would read the claim beside
    what ran, so the claim is held back and the user gets the lane's own account: what it cannot
    do where the answer reported such an action, then each tool that ran with its result."""
    settings, store = lane
    result, model = run(settings, store, [call("add", {"a": 2, "b": 3}), text(answer)], user="2 plus 3?",
                        reading=other_action if reader == "other" else literal_reading,
                        fit={"reply_in_words": 0.6})  # every tool 0.05: no claimed tool fits
    ran = "What ran for this request:\n- add returned 5"
    assert result.tools_executed == ["add"]
    assert result.content == (f"{CANNOT}\n\n{ran}" if reader == "other" else ran)
    assert held_back(settings) == ["it reports an action that did not run"]
    assert rows(settings, "SELECT content, lane_note FROM messages WHERE role = 'assistant' AND content != ''") == \
        [(result.content, 1)]


def test_beside_a_tool_that_ran_an_answer_recalling_a_tool_of_an_earlier_turn_keeps_the_receipt(lane):
    """Where every action the answer reports that did not run for the request is a tool that ran
    earlier in the session and the answer names it or repeats what it held, the answer may recall
    that turn: passed on with the store's truth."""
    settings, store = lane
    results, model = run_turns(settings, store, [call("mul", {"a": 2, "b": 3}), text("6"),
                                                 call("add", {"a": 6, "b": 1}), text("I used mul, then add: 7.")],
                               ["2 times 3?", "plus 1?"], reading=literal_reading, fit=0.1, tools=[*TOOLS, MUL])
    assert results[1].tools_executed == ["add"]
    assert results[1].content == "I used mul, then add: 7.\n\n(The lane's record: only add ran for this request.)"
    assert held_back(settings) == []


def test_of_the_tools_an_answer_claims_the_one_ranked_best_for_the_request_is_weighed(lane, monkeypatch):
    """Lever "claimed" where the reading names two tools that did not run: the one the index ranks
    best for "multiply 2 and 3" (mul) is weighed against a reply in words and called, not the
    first by name (add)."""
    settings, store = lane
    confirming(monkeypatch)
    result, model = run(settings, store, [text("I used add and mul: 6."), call("mul", {"a": 2, "b": 3}),
                                          text("The product is 6.")],
                        user="multiply 2 and 3", decision='{"next": "answer"}', reading=literal_reading,
                        fit={"mul": 0.9, "add": 0.9, "reply_in_words": 0.3}, tools=[*TOOLS, MUL])
    asked = [re.search(r"^Function: (\S+)", r["messages"][-1]["content"], re.MULTILINE)[1] for r in model.fit_requests]
    assert asked == ["mul", "reply_in_words"]
    assert result.tools_executed == ["mul"] and result.content == "The product is 6."
    assert held_back(settings) == ["it reports mul as done, which did not run for this request"]


TODO_AND_FILES = [Tool(name, f"The {name} tool.", object_schema({}), lambda arguments, ctx: "ok")
                  for name in ("todo", "write_file")]


def confirming(monkeypatch):
    """A reader whose "which" probe reads what the list names (Reading.confirmed): the scripted
    model has no hidden state for a probe."""
    from stack.agent import reading

    listed = reading.read_reported

    async def read(*args, **kwargs):
        found, replies = await listed(*args, **kwargs)
        return dataclasses.replace(found, confirmed=bool(found.tools or found.other)), replies
    monkeypatch.setattr(reading, "read_reported", read)


def other_action(body):
    """A reader that reads every reply as reporting an action no granted tool does."""
    return Reply(json.dumps({"done": [OTHER]}))


@pytest.mark.parametrize("tools, expected", [(TOOLS, f"{NOT_DONE} {CANNOT}"),
                                             (TOOLS + TODO_AND_FILES, f"{NOT_DONE} {CANNOT}{CANNOT_INSTEAD}")])
def test_an_answer_reporting_an_action_no_tool_does_is_the_lanes_own_answer(lane, monkeypatch, tools, expected):
    """Lever "cannot": the reading says the answer reports an action none of the tools does: the
    model's claim is held back and the user gets the lane's own words (what it can do instead
    where those tools are granted); no tool is looked at or called for it."""
    settings, store = lane
    confirming(monkeypatch)
    result, model = run(settings, store, [text("I sent Marta the text.")], user="text Marta that dinner is at 8",
                        decision='{"next": "answer"}', reading=other_action, fit=0.99, tools=tools)
    assert result.content == expected and result.tools_executed == []
    assert held_back(settings) == ["it reports an action that did not run"] and model.fit_requests == []
    assert rows(settings, "SELECT content, lane_note FROM messages WHERE role = 'assistant'") == [(expected, 1)]


WEATHER = Tool("weather", "Current weather for a city.", object_schema({"city": {"type": "string"}}, ["city"]),
               lambda arguments, ctx: "sunny")


def first_pick(pick):
    """A scripted decision: before anything ran, `pick(choices)`; after, "answer"."""
    def decide(body):
        if "Nothing has run for it yet." not in body["messages"][-1]["content"]:
            return Reply('{"next": "answer"}')
        return Reply(json.dumps({"next": pick(choices_of(body))}))
    return decide


@pytest.mark.parametrize("user, asked_again", [("2 plus 3?", True), ("2 plus 3? ask the weather tool", False)])
def test_a_pick_the_index_does_not_rank_is_asked_again_among_the_tools_it_ranks_best(lane, user, asked_again):
    """The model picks a tool none of whose words the request shares: the index's best four are
    the choices of a second question; a tool the request names is not second-guessed."""
    settings, store = lane
    decide = first_pick(lambda choices: "weather" if "weather" in choices else "add")
    result, model = run(settings, store, [call("add", {"a": 2, "b": 3}), text("5")], user=user, decision=decide,
                        tools=[*TOOLS, WEATHER])
    decisions = [choices_of(r) for r in model.decide_requests]
    tails = [r["messages"][-1]["content"] for r in model.decide_requests]
    # The question ends with its choices spelled out, even where they are every tool it lists:
    # without them the decision said "answer" to more tool requests (measured: docs/measurements.md).
    assert "TOOL one of " + ", ".join(decisions[0][:-1]) in tails[0]
    if asked_again:
        assert result.tools_executed == ["add"]
        assert "weather" in decisions[0] and "weather" not in decisions[1] and "add" in decisions[1]
        assert len(decisions[1]) == 4 + 1  # the index's best four and "answer"
        assert "TOOL one of " + ", ".join(decisions[1][:-1]) in tails[1]
    else:
        assert len(decisions) == 1 and "weather" in decisions[0]


@pytest.mark.parametrize("fit, kept", [(0.9, True), (0.3, False)])
def test_a_pick_the_index_does_not_rank_is_kept_when_the_model_says_it_fits(lane, fit, kept):
    """A pick outside the index's best four (the index reads English words; seen: a German "please
    remember …" picked memory, and asked again among the index's best ran todo) is asked about
    alone (lever "doubt"): kept at fit 0.9, asked again among the index's best at 0.3."""
    settings, store = lane
    decide = first_pick(lambda choices: "weather" if "weather" in choices else "add")
    script = [call("weather", {"city": "Oslo"}), text("Sunny.")] if kept else [call("add", {"a": 2, "b": 3}), text("5")]
    result, model = run(settings, store, script, user="2 plus 3?", decision=decide,
                        tools=[*TOOLS, WEATHER], fit={"weather": fit})
    asked = [re.search(r"^Function: (\S+)", r["messages"][-1]["content"], re.MULTILINE).group(1)
             for r in model.fit_requests]
    assert asked[0] == "weather"
    assert result.tools_executed == (["weather"] if kept else ["add"])
    assert len(model.decide_requests) == (1 if kept else 2)
    assert rows(settings, "SELECT content FROM lane_calls WHERE purpose = 'doubt'") == [(f"weather: yes {fit:.2f}",)]


CITY = object_schema({"city": {"type": "string"}}, ["city"])
OSLO_TOOLS = [Tool(name, description, CITY, lambda arguments, ctx: "the Munch museum") for name, description in (
    ("city_guide", "Sights and museums of a city such as Oslo or Bergen."),
    ("ferry_times", "Ferry departures from Oslo to Kiel."), ("train_times", "Trains between Oslo and Bergen."),
    ("hotel_search", "Hotels in Oslo, Bergen or Tromsø."))]
GERMAN = "Regnet es morgen früh in Oslo, brauche ich einen Schirm?"


@pytest.mark.parametrize("rendered", [True, False])
def test_a_request_in_another_language_is_ranked_by_the_index_in_english(lane, rendered):
    """The index reads English words: for the German request it knows only "Oslo", so the
    model's pick (weather) is outside its best four (tools for Oslo) and, not trusted, asked
    again among them (city_guide runs). With the model's English rendering (lever "english") the
    index ranks weather too, and the pick is kept without a question; the decision reads the
    rendering beside the user's words."""
    settings, store = lane
    english = "Is rain in the weather forecast for Oslo tomorrow morning, do I need an umbrella?" if rendered else None
    decide = first_pick(lambda choices: "weather" if "weather" in choices else "city_guide")
    script = [call("weather", {"city": "Oslo"}), text("Sonnig.")] if rendered else \
        [call("city_guide", {"city": "Oslo"}), text("Das Munch-Museum.")]
    result, model = run(settings, store, script, user=GERMAN, decision=decide,
                        tools=[*TOOLS, WEATHER, *OSLO_TOOLS], fit=0.05, english=english)
    assert [GERMAN in r["messages"][-1]["content"] for r in model.english_requests] == [True]
    assert rows(settings, "SELECT content FROM lane_calls WHERE purpose = 'english'") == [(english or GERMAN,)]
    first = model.decide_requests[0]["messages"][-1]["content"]
    assert (f"(In English: {english})" in first) is rendered
    assert result.tools_executed == (["weather"] if rendered else ["city_guide"])
    assert len(model.fit_requests) == (0 if rendered else 1)


@pytest.mark.parametrize("rendered", [True, False])
def test_a_tool_the_rendering_names_is_the_next_step_with_no_question(lane, rendered):
    """After the first of two tasks, a tool the English rendering names ("… the weather in
    Oslo" for "… el tiempo en Oslo") is called as one the user's words name would be: no
    decision is asked. Without a rendering the decision is asked (and here picks it too)."""
    settings, store = lane
    english = "Add 2 and 3, and then tell me the weather in Oslo" if rendered else None
    script = [call("add", {"a": 2, "b": 3}), call("weather", {"city": "Oslo"}), text("5; sol en Oslo.")]
    result, model = run(settings, store, script, user="Suma 2 más 3 y luego dime qué tiempo hace en Oslo",
                        tools=[*TOOLS, WEATHER], english=english)
    assert result.tools_executed == ["add", "weather"]
    assert len(model.decide_requests) == (1 if rendered else 2)


def test_the_rendering_s_tasks_are_done_in_a_language_the_clause_split_does_not_know(lane):
    """Dutch "en" is no conjunction the clause split knows: the user's words alone are one task,
    and the turn was done after the first tool. The rendering holds two: the second runs."""
    settings, store = lane
    script = [call("add", {"a": 2, "b": 3}), call("weather", {"city": "Oslo"}), text("5; zon in Oslo.")]
    result, _ = run(settings, store, script,
                    user="Reken even 2 plus 3 uit en zoek daarna op hoe het weer morgen in Oslo wordt",
                    tools=[*TOOLS, WEATHER],
                    english="Work out 2 plus 3 and then look up what the weather will be like in Oslo tomorrow")
    assert result.tools_executed == ["add", "weather"]


def test_an_english_request_is_not_rendered(lane):
    settings, store = lane
    result, model = run(settings, store, [call("add", {"a": 2, "b": 3}), text("5")],
                        user="could you add 2 and 3 for me, please?")
    assert model.english_requests == [] and result.tools_executed == ["add"]
    assert rows(settings, "SELECT * FROM lane_calls WHERE purpose = 'english'") == []


def test_a_pick_the_request_does_not_name_is_asked_again_among_those_it_names(lane):
    """"Use the terminal to ..." decided as run_python: the user named the tool, so the choice is
    asked again among the tools the request names and the pick."""
    settings, store = lane
    decide = first_pick(lambda choices: "add" if len(choices) == 3 else "weather")
    result, model = run(settings, store, [call("add", {"a": 2, "b": 3}), text("5")],
                        user="use the add tool on 2 and 3", decision=decide, tools=[*TOOLS, WEATHER])
    assert result.tools_executed == ["add"]
    assert [choices_of(r) for r in model.decide_requests][1] == ["add", "weather", "answer"]





def test_a_claim_about_the_session_is_held_to_the_session(lane):
    settings, store = lane
    script = [call("add", {"a": 2, "b": 3}), text("5"), text("I used add earlier.")]
    results, model = run_turns(settings, store, script, ["2 plus 3?", "which tools did you use so far?"])
    assert results[1].content == "I used add earlier." and results[1].tools_executed == []
    assert held_back(settings) == []
    assert "Tools that ran in this conversation: add" in model.requests[2]["messages"][-2]["content"]


@pytest.mark.parametrize("answer, problem", [
    ("what is 2 plus 3", "the request echoed back"),
    ("Do not call it again. Reply to the user now with that result.", "the lane's own note copied"),
    ("Done!", "it leaves out what the tools returned"),
    ('{"name": "add", "a": "two", "b": 3}', "a tool call written as text"),
])
def test_an_answer_that_gives_the_user_nothing_is_not_passed_on(lane, answer, problem):
    settings, store = lane
    result, model = run(settings, store, [call("add", {"a": 2, "b": 3}), text(answer), text("never sent")],
                        user="what is 2 plus 3")
    assert len(model.requests) == 2  # not written again: told why, the 1.5B model wrote the same again
    assert result.content.startswith("I could not write a reliable answer. What ran for this request:\n"
                                      "- add returned 5\n(The model's reply was not passed on: ")
    assert problem in result.content
    assert [reason for reason in held_back(settings) if problem in reason]
    # the conversation holds the answer the user got; the model's answers stay in the store as
    # evidence, with the lane's own model calls
    answers = rows(settings, "SELECT content, lane_note FROM messages WHERE role = 'assistant'"
                   " AND tool_calls IS NULL ORDER BY id")
    assert answers == [(result.content, 1)]
    assert rows(settings, "SELECT content FROM lane_calls WHERE purpose = 'held' ORDER BY id") == [(answer,)]


def test_an_answer_held_back_is_kept_apart_from_the_conversation_and_not_written_again(lane):
    """An answer held back (here the request echoed) is not written again (told why, the 1.5B
    model wrote the same answer again in 23 of 25 turns); the user gets the lane's account, and
    the store reads as the conversation: the held answer is a lane call, with why and its cost."""
    settings, store = lane
    script = [text("Spiders have eight legs."), text("and an ant?"), text("never sent")]
    results, model = run_turns(settings, store, script, ["how many legs does a spider have", "and an ant?"],
                               fit=0.1)
    assert results[1].content.startswith("No tool ran for this request") and len(model.requests) == 2
    assert held_back(settings) == ["the request echoed back"]
    [session] = {r.session_id for r in results}
    assert rows(settings, "SELECT content FROM messages WHERE session_id = ? AND role = 'assistant'", session) == [
        ("Spiders have eight legs.",), (results[1].content,)]
    assert rows(settings, "SELECT content, reason, prompt_tokens > 0, completion_tokens > 0 FROM lane_calls"
                " WHERE session_id = ? AND purpose = 'held'", session) == [
        ("and an ant?", "the request echoed back", 1, 1)]
    assert system_notes(settings) == []
    assert sum(r.model_calls for r in results) == rows(  # each model call counted once, in one place
        settings, "SELECT (SELECT count(*) FROM messages WHERE role = 'assistant' AND prompt_tokens IS NOT NULL)"
        " + (SELECT count(*) FROM lane_calls)")[0][0]


def test_a_fact_label_copied_to_the_front_of_the_answer_never_reaches_the_user_or_the_record(lane):
    settings, store = lane
    script = [text("The assistant answered: Hello!"), call("add", {"a": 2, "b": 3}), text("It is 5.")]
    results, model = run_turns(settings, store, script, ["hi", "add 2 and 3"])
    assert results[0].content == "Hello!"
    assert history(model.requests[1]) == [("user", "hi"), ("assistant", "Hello!"), ("user", "add 2 and 3")]


# What later turns read of earlier ones


def test_notes_of_earlier_turns_are_not_sent_again(lane):
    settings, store = lane
    script = [call("add", {"a": 2, "b": 3}), text(""), text(""), call("add", {"a": 4, "b": 5}), text("It is 9.")]
    results, model = run_turns(settings, store, script, ["sum 2 and 3", "add 4 and 5"])
    assert results[1].content == "It is 9."
    assert held_back(settings) == ["the model gave no answer"] * 2  # stored, as evidence
    # neither the note nor the lane's own answer nor the empty reply is sent with the next turn
    assert history(model.requests[3]) == [
        ("user", "sum 2 and 3"), ("assistant", ""), ("tool", "5"), ("user", "add 4 and 5")]
    earlier = model.requests[4]["messages"][-2]["content"]
    assert "add returned: 5" in earlier
    assert "Answer not passed on" not in earlier and "I could not write" not in earlier


def test_an_answer_held_back_is_not_an_earlier_turn_s_answer(lane):
    settings, store = lane
    apology = "I'm sorry, but I need more information to answer your question."
    script = [call("add", {"a": 2, "b": 3}), text(apology), call("add", {"a": 4, "b": 5}), text("It is 9.")]
    results, model = run_turns(settings, store, script, ["sum 2 and 3", "add 4 and 5"])
    assert results[0].content.startswith("I could not write a reliable answer")
    earlier = model.requests[3]["messages"][-2]["content"]
    assert "add returned: 5" in earlier and "need more information" not in earlier


def test_an_answer_copied_from_an_earlier_turn_stands_but_leaves_the_record(lane):
    settings, store = lane
    script = [text("391"), text("391"), call("add", {"a": 2, "b": 3}), text("It is 5.")]
    results, model = run_turns(settings, store, script, ["17 * 23?", "What is my codename?", "add 2 and 3"])
    assert results[1].content == "391" and not system_notes(settings)  # it may be right: not held back
    assert history(model.requests[2]) == [
        ("user", "17 * 23?"), ("assistant", "391"), ("user", "What is my codename?"), ("user", "add 2 and 3")]


def test_answers_held_back_and_copied_errors_leave_the_record(lane):
    settings, store = lane
    script = [text(""), call("fail", {}), call("fail", {}), text("ERROR: the disk is on fire"),
              call("add", {"a": 2, "b": 3}), text("It is 5.")]
    # the second look finds no tool that fits "hello" (the next reply, another turn's, calls one)
    results, model = run_turns(settings, store, script, ["hello", "do the thing", "add 2 and 3"], fit=0.1)
    assert results[0].content.startswith("No tool ran for this request")
    assert results[1].content == "ERROR: the disk is on fire"
    assert model.requests[4]["tool_choice"] == FORCED_ADD
    assert history(model.requests[4]) == [("user", "hello"), ("user", "do the thing"), ("user", "add 2 and 3")]


def test_the_clients_system_message_reaches_the_composed_answer(lane):
    settings, store = lane

    async def go():
        with ScriptedModel([text("Bonjour !")], decision='{"next": "answer"}') as model:
            llm = LlmClient(model.url, model=None, timeout_s=2.0)
            try:
                agent = Agent(settings, store, Registry(TOOLS), llm)
                session = store.create_session()
                result = await agent.run_turn(session, [{"role": "system", "content": "Always answer in French."},
                                                        {"role": "user", "content": "hi"}])
                return result, model
            finally:
                await llm.aclose()

    result, model = asyncio.run(go())
    assert result.content == "Bonjour !"
    compose = model.requests[0]["messages"]
    assert compose[1] == {"role": "system", "content": "Always answer in French."}
    assert compose[-1] == {"role": "user", "content": "hi"}


def run_calculator(settings, store, script, user, decision):
    async def go():
        with ScriptedModel(script, decision=decision) as model:
            llm = LlmClient(model.url, model=None, timeout_s=settings.llm_timeout_s)
            try:
                agent = Agent(settings, store, Registry([*TOOLS, *CALCULATOR]), llm)
                result = await agent.run_turn(store.create_session(), [{"role": "user", "content": user}])
                return result, model
            finally:
                await llm.aclose()
    return asyncio.run(go())


@pytest.mark.parametrize("made", [call("calculate", {"expression": "8"}),
                                  text('{"name": "calculate", "arguments": {"expression": "8"}}')])
def test_a_computation_of_numbers_nobody_gave_is_not_run_and_the_request_is_answered(lane, made):
    settings, store = lane
    # a call written as text holds its own numbers: they are the model's, not the conversation's
    # (the message gives a number, 2, so the decision offers calculate: Tool.wanted_by)
    result, model = run_calculator(settings, store, [made, text("A spider has 8 legs.")],
                                   "my 2 kids ask: how many legs does a spider have?", '{"next": "calculate"}')
    assert result.content == "A spider has 8 legs." and result.tools_executed == []
    assert rows(settings, "SELECT tool_name, status FROM tool_executions") == [("calculate", "refused")]
    # asked again, the decision named calculate once more: the decide lever is given once per tool
    assert len(model.decide_requests) == 2
    assert "Nothing has run for the user's last message yet." in model.requests[-1]["messages"][-2]["content"]


@pytest.mark.parametrize("user, expression, result", [
    ("what's 18% of 250?", "0.18 * 250", "45"),
    ("what is twelve times seven?", "12 * 7", "84"),
    ("add 1,250 and 3", "1250 + 3", "1253"),
])
def test_a_computation_of_the_user_s_numbers_runs(lane, user, expression, result):
    settings, store = lane
    turn, _ = run_calculator(settings, store, [call("calculate", {"expression": expression}), text("Done.")],
                             user, '{"next": "calculate"}')
    assert rows(settings, "SELECT status, result FROM tool_executions") == [("ok", result)]
    assert turn.tools_executed == ["calculate"]


def test_a_file_name_the_model_respelled_is_written_as_the_user_spelled_it(tmp_path):
    """Asked for shoping.txt, the 1.5B model wrote shopping.txt; the file the user named is the one
    written, and the stored call says so."""
    from stack.tools.files import TOOLS as FILES

    settings = Settings(home=tmp_path, tool_search="off", llm_timeout_s=2.0, max_iterations=4)
    store = Store(settings.db_path)
    write = next(tool for tool in FILES if tool.name == "write_file")
    script = [call("write_file", {"path": "shopping.txt", "content": "flour\neggs\n"}), text("Wrote shoping.txt.")]
    result, _ = run(settings, store, script, user="make a new file shoping.txt with flour and eggs",
                    decision='{"next": "write_file"}', tools=[*TOOLS, write])
    ran = store.executions(store.list_sessions()[0]["id"])
    store.close()
    assert result.tools_executed == ["write_file"] and json.loads(ran[0]["arguments"])["path"] == "shoping.txt"
    assert (settings.workspace / "shoping.txt").read_text() == "flour\neggs\n"
    assert not (settings.workspace / "shopping.txt").exists()


def test_a_number_no_tool_gave_after_the_tool_failed_never_reaches_the_user(lane):
    settings, store = lane
    script = [call("fail", {}), call("fail", {}), text("The total is 156, computed and saved."),
              text("The total is 156.")]
    result, _ = run(settings, store, script, user="multiply 12 by 13 for me", decision=decide_then("fail", "answer"))
    assert result.content.startswith("I could not write a reliable answer.")
    assert "The total is 156" not in result.content
    assert "it states 156, which no result holds" in result.content


def test_a_number_the_notes_hold_may_be_stated_after_a_tool_ran(lane):
    settings, store = lane
    settings.memory_path.parent.mkdir(parents=True, exist_ok=True)
    settings.memory_path.write_text("the rent of 1,150 EUR is due on the 3rd\n")
    script = [call("add", {"a": 2, "b": 3}), text("The rent of 1,150 EUR is due on the 3rd; 2 and 3 make 5.")]
    result, _ = run(settings, store, script, user="add 2 and 3, and when is the rent due?",
                    decision=decide_then("add", "answer"))
    assert result.content == "The rent of 1,150 EUR is due on the 3rd; 2 and 3 make 5."


def packing_list(tmp_path):
    """A lane whose workspace holds packing.txt (two lines)."""
    settings = Settings(home=tmp_path, tool_search="off", llm_timeout_s=2.0, max_iterations=4)
    settings.workspace.mkdir(parents=True, exist_ok=True)
    (settings.workspace / "packing.txt").write_text("passport\nsunscreen\n")
    return settings, Store(settings.db_path)


def read_then_write(settings, store, written, answer):
    """A turn for a chatty request that reads packing.txt, then, as a later step the decision
    chose, writes `written` over it, and answers `answer`."""
    from stack.tools.files import TOOLS as FILES

    script = [call("read_file", {"path": "packing.txt"}),
              call("write_file", {"path": "packing.txt", "content": written}), text(answer)]
    steps = iter(["read_file", "write_file"])
    result, _ = run(settings, store, script, user="I'm off to Lisbon, and I keep a list in packing.txt, what's on it?",
                    decision=lambda body: Reply(json.dumps({"next": next(steps, "answer")})), fit=0.0,
                    tools=[*TOOLS, *(t for t in FILES if t.name in ("read_file", "write_file"))])
    return result


def test_a_later_step_that_would_blank_a_file_the_request_asked_to_read_is_refused(tmp_path):
    """Seen: asked what a packing list held, the 1.5B model read it, then chose todo and
    write_file as further steps and wrote "the todo list is empty" over the list."""
    settings, store = packing_list(tmp_path)
    result = read_then_write(settings, store, "the todo list is empty", "It holds passport and sunscreen.")
    ran = [(e["tool_name"], e["status"]) for e in store.executions(store.list_sessions()[0]["id"])]
    store.close()
    assert ran == [("read_file", "ok"), ("write_file", "refused")]
    assert (settings.workspace / "packing.txt").read_text() == "passport\nsunscreen\n"
    assert result.content == "It holds passport and sunscreen."


@pytest.mark.parametrize("fit, ran", [(0.9, ["add"]), (0.5, [])])
def test_a_held_back_answer_with_nothing_run_gets_a_second_look_at_the_best_tool(lane, fit, ran):
    """Seen: "free disk space?" decided "answer", and the answer gave the user nothing (here the
    request echoed back)."""
    settings, store = lane
    script = [text("sum of two and three?"), call("add", {"a": 2, "b": 3}), text("It is 5.")]
    result, model = run(settings, store, script, user="sum of two and three?", decision='{"next": "answer"}',
                        fit=fit)
    [asked] = model.fit_requests
    assert "Function: add" in asked["messages"][-1]["content"]
    assert result.tools_executed == ran
    assert (result.content == "It is 5.") is bool(ran)
    assert rows(settings, "SELECT content FROM lane_calls WHERE purpose = 'fit'") == [(f"add: yes {fit:.2f}",)]


def test_the_second_look_reads_a_follow_up_with_the_message_before_it(lane):
    """Seen: "and what about Paris?" after a question about the time in Tokyo decided "answer"."""
    settings, store = lane
    script = [call("add", {"a": 2, "b": 3}), text("It is 5."), text("and with four?"),
              call("add", {"a": 4, "b": 3}), text("It is 7.")]
    results, model = run_turns(settings, store, script, ["add 2 and 3", "and with four?"], fit=0.9)
    [asked] = model.fit_requests
    assert "User's message: and with four?\n(Their message before it: add 2 and 3)" in asked["messages"][-1]["content"]
    assert results[1].content == "It is 7." and results[1].tools_executed == ["add"]





def test_an_answer_that_passes_on_only_a_writes_result_is_held_back_when_a_read_found_something(tmp_path):
    settings, store = packing_list(tmp_path)
    result = read_then_write(settings, store, "passport\nsunscreen\n", "I found the file packing.txt and read it.")
    store.close()
    assert result.tools_executed == ["read_file", "write_file"]
    assert result.content.startswith("I could not write a reliable answer.") and "passport" in result.content


def test_a_line_range_nobody_asked_for_is_not_read(tmp_path):
    """Asked to read a three-line file back, the 1.5B model called read_file(offset=1, limit=1) and
    the user got its first line: the range is left out, the whole file is read, and the store
    keeps both the model's call and the arguments that ran."""
    from stack.tools.files import TOOLS as FILES

    settings = Settings(home=tmp_path, tool_search="off", llm_timeout_s=2.0, max_iterations=4)
    store = Store(settings.db_path)
    settings.workspace.mkdir(parents=True, exist_ok=True)
    (settings.workspace / "groceries.txt").write_text("apples\nrice\nsoap\n")
    read = next(tool for tool in FILES if tool.name == "read_file")
    script = [call("read_file", {"path": "groceries.txt", "offset": 1, "limit": 1}),
              text("It says apples, rice and soap.")]
    result, _ = run(settings, store, script, user="now read groceries.txt back to me please",
                    decision=decide_then("read_file", "answer"), tools=[*TOOLS, read])
    session = store.list_sessions()[0]["id"]
    [ran] = store.executions(session)
    [asked] = [m for m in store.messages(session) if m.get("tool_calls")]
    store.close()
    assert json.loads(ran["arguments"]) == {"path": "groceries.txt"}
    assert "rice" in ran["result"] and "soap" in ran["result"]
    assert json.loads(asked["tool_calls"][0]["function"]["arguments"])["limit"] == 1
    assert result.tools_executed == ["read_file"]


@pytest.mark.parametrize("user, offered", [("which python version is installed here?", False),
                                           ("how much is 12.5% of 368?", True),
                                           ("what is twelve times seven?", True),
                                           ("lance `expr 40 + 2` dans le terminal", False),
                                           ("in `notes.txt`, how much is 3 times 4?", True)])
def test_the_decision_offers_calculate_only_for_a_message_that_gives_a_number(lane, user, offered):
    """Seen: "And which Python version is installed here?" decided as calculate, and so did "run
    `echo $((6*7))` in the shell": a number inside the code a message quotes is that code's. A tool
    whose own check says the message cannot want it (Tool.wanted_by) is not among the choices."""
    settings, store = lane
    _, model = run(settings, store, [text("3.11")], user=user, decision=first_pick(lambda choices: "answer"),
                   tools=[*TOOLS, *CALCULATOR])
    assert ("calculate" in choices_of(model.decide_requests[0])) is offered
    assert "add" in choices_of(model.decide_requests[0])


@pytest.mark.parametrize("user, offered", [("python: the sum of the squares of 1 to 100", True),
                                           ("run `print(sum(range(10)))` with python", True),
                                           ("führ mal `ls -la | grep '^d' | wc -l` aus", False),
                                           ("run `echo $((6*7))` and then `print(6*7)`", True)])
def test_the_decision_offers_run_python_only_where_the_code_quoted_is_python(lane, user, offered):
    """Seen: "run `echo $((6*7))` in the shell" ran run_python with that line (a SyntaxError), in
    three languages: code the message quotes that is not Python is not run as Python."""
    from stack.tools.python_exec import TOOLS as PYTHON

    settings, store = lane
    _, model = run(settings, store, [text("ok")], user=user, decision=first_pick(lambda choices: "answer"),
                   tools=[*TOOLS, *PYTHON])
    assert ("run_python" in choices_of(model.decide_requests[0])) is offered


def test_a_tool_the_message_cannot_want_stays_listed_in_the_decisions_cached_prefix(lane):
    """calculate offered directly (tool search off) is listed in the decision's first message for
    every request, so that message stays one cached prefix; only the choices leave it out."""
    settings, store = lane
    _, model = run(settings, store, [text("hi")], user="which python is this?",
                   decision=first_pick(lambda choices: "answer"), tools=[*TOOLS, *CALCULATOR])
    first = model.decide_requests[0]["messages"][0]["content"]
    assert "- calculate:" in first and "calculate" not in choices_of(model.decide_requests[0])
