"""The agent loop against a scripted model over real HTTP, asserting the store with SQL."""

import asyncio
import json
import sqlite3
import time

import pytest

from stack.agent.llm_client import LlmClient, LlmTimeout
from stack.agent.loop import Agent
from stack.config import Settings
from stack.store import Store
from stack.tools.base import Tool, ToolError, object_schema
from stack.tools.registry import Registry
from tests.fakes.scripted_model import Reply, ScriptedModel, call, text


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


@pytest.fixture
def lane(tmp_path):
    settings = Settings(home=tmp_path, tool_search="off", llm_timeout_s=2.0, max_iterations=4)
    store = Store(settings.db_path)
    yield settings, store
    store.close()


def run(settings, store, script, user="hi", decision='{"next": "answer"}', **kwargs):
    async def go():
        with ScriptedModel(script, decision=decision) as model:
            llm = LlmClient(model.url, model=None, timeout_s=settings.llm_timeout_s)
            try:
                agent = Agent(settings, store, Registry(TOOLS), llm)
                session = store.create_session()
                result = await agent.run_turn(session, [{"role": "user", "content": user}], **kwargs)
                return result, model
            finally:
                await llm.aclose()
    return asyncio.run(go())


def rows(settings, sql, *params):
    with sqlite3.connect(settings.db_path) as db:
        return db.execute(sql, params).fetchall()


def test_native_call_runs_and_is_recorded(lane):
    settings, store = lane
    result, model = run(settings, store, [call("add", {"a": 2, "b": 3}), text("It is 5.")])
    assert result.content == "It is 5."
    assert result.tools_executed == ["add"]
    assert result.model_calls == 2  # the call and the answer: a request of one task is done once a tool ran
    assert rows(settings, "SELECT tool_name, status, origin, via_bridge, result FROM tool_executions"
                ) == [("add", "ok", "native", 0, "5")]
    tool_rows = rows(settings, "SELECT m.content FROM messages m JOIN tool_executions e"
                     " ON e.tool_call_id = m.tool_call_id WHERE m.role = 'tool'")
    assert tool_rows == [("5",)]
    # the second request carried the tool result back to the model
    assert any(m.get("role") == "tool" and m["content"] == "5" for m in model.requests[1]["messages"])
    assert model.requests[0]["stream"] is True


@pytest.mark.parametrize("written", [
    '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>',
    '{"name": "add", "arguments": {"a": 2, "b": 3}}',
    'Let me add.\n```json\n{"name": "add", "arguments": {"a": 2, "b": "3"}}\n```',
])
def test_call_written_as_text_runs_with_origin_content(lane, written):
    settings, store = lane
    result, _ = run(settings, store, [text(written), text("5")])
    assert result.tools_executed == ["add"]
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
    result, model = run(settings, store, [call("launch_rockets", {}), text("Sorry.")])
    assert rows(settings, "SELECT tool_name, status FROM tool_executions") == [
        ("launch_rockets", "refused")]
    tool_message = [m for m in model.requests[1]["messages"] if m["role"] == "tool"][0]
    assert "unknown tool" in tool_message["content"]
    assert result.tools_executed == []


def test_broken_arguments_get_the_schema_back(lane):
    settings, store = lane
    result, model = run(settings, store, [call("add", '{"a": 2, "b": '), text("ok")])
    status, error = rows(settings, "SELECT status, error FROM tool_executions")[0]
    assert status == "error"
    assert "not valid JSON" in error and '"required":["a","b"]' in error
    tool_message = [m for m in model.requests[1]["messages"] if m["role"] == "tool"][0]
    assert tool_message["content"].startswith("ERROR:")


def test_arguments_double_encoded_as_a_string_are_an_error(lane):
    settings, store = lane
    run(settings, store, [call("add", json.dumps(json.dumps({"a": 1, "b": 2}))), text("ok")])
    status, error = rows(settings, "SELECT status, error FROM tool_executions")[0]
    assert status == "error" and "not a string that contains JSON" in error


def test_schema_violation_names_the_path_and_gives_an_example(lane):
    settings, store = lane
    run(settings, store, [call("add", {"a": "two", "b": 3}), text("ok")])
    error = rows(settings, "SELECT error FROM tool_executions")[0][0]
    assert "at a:" in error and '"example"' not in error and "example:" in error


def test_tool_failure_and_tool_bug_are_errors_not_crashes(lane):
    settings, store = lane
    result, _ = run(settings, store, [Reply(tool_calls=[{"name": "fail", "arguments": {}},
                                                        {"name": "crash", "arguments": {}}]),
                                      text("Both failed.")])
    assert result.content == "Both failed."
    assert rows(settings, "SELECT tool_name, status FROM tool_executions ORDER BY id") == [
        ("fail", "error"), ("crash", "error")]


def test_iteration_limit_ends_with_an_honest_message(lane):
    settings, store = lane
    counter = iter(range(100))
    result, _ = run(settings, store, lambda body: call("add", {"a": next(counter), "b": 1}))
    assert result.finish_reason == "iteration_limit"
    assert "without reaching a final answer" in result.content
    assert result.model_calls == settings.max_iterations


def test_clarify_ends_the_turn_with_the_question(lane):
    settings, store = lane
    result, model = run(settings, store, [call("clarify", {"question": "Which file?"}),
                                          text("never sent")])
    assert result.content == "Which file?" and result.finish_reason == "clarify"
    assert len(model.requests) == 1


def test_generation_cap_clamps_requested_max_tokens(lane):
    settings, store = lane
    _, model = run(settings, store, [text("ok")], max_tokens=10**6)
    assert model.requests[0]["max_tokens"] == settings.max_tokens


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
        with ScriptedModel([text("fits")], n_ctx=2048) as model:
            llm = LlmClient(model.url, model="pinned-name", timeout_s=settings.llm_timeout_s)
            agent = Agent(settings, store, Registry(TOOLS), llm)
            await agent.run_turn(session, [{"role": "user", "content": "the new question"}])
            await llm.aclose()
            return model.requests[0]

    sent = asyncio.run(go())
    contents = [m["content"] for m in sent["messages"]]
    assert contents[0].startswith("You are") and contents[-1] == "the new question"
    assert not any(c.startswith("old question 0") for c in contents)
    assert (len(json.dumps(sent["messages"])) + len(json.dumps(sent["tools"]))) // 4 <= 2048
    assert sent["model"] == "pinned-name"
    # every stored message is still in the store: only the request was trimmed
    assert len(store.messages(session)) >= 13


def system_notes(settings):
    return [r[0] for r in rows(settings, "SELECT content FROM messages WHERE role = 'system'"
                               " AND lane_prompt = 0 ORDER BY id")]


def test_an_identical_call_runs_once_and_a_third_attempt_ends_the_turn(lane):
    settings, store = lane
    result, model = run(settings, store, lambda body: call("add", {"a": 2, "b": 3}))
    assert rows(settings, "SELECT tool_name, status FROM tool_executions ORDER BY id") == [
        ("add", "ok"), ("add", "refused")]
    refusal = rows(settings, "SELECT content FROM messages WHERE role = 'tool' ORDER BY id")[1][0]
    assert "this exact call ran earlier in this turn and returned: 5" in refusal
    assert result.finish_reason == "repeated_call" and len(model.requests) == 3
    assert result.content.strip() and "add returned 5" in result.content
    assert result.tools_executed == ["add"]


def test_an_identical_failing_call_is_never_made_three_times(lane):
    settings, store = lane
    result, _ = run(settings, store, lambda body: call("fail", {}))
    assert rows(settings, "SELECT status, error FROM tool_executions ORDER BY id") == [
        ("error", "the disk is on fire"),
        ("refused", "Not run: this exact call already failed in this turn with: the disk is on fire\n"
                    "Do not repeat it. Call a tool with different arguments, or tell the user what failed.")]
    assert "fail error: the disk is on fire" in result.content


def test_a_tool_merely_mentioned_is_no_call_to_force(lane):
    settings, store = lane
    prose = text("You can call the add function with a=2 and b=3 to get the sum.")
    result, model = run(settings, store, [prose, text("never sent")])
    assert len(model.requests) == 1 and len(model.decide_requests) == 1
    assert system_notes(settings) == [] and result.content == prose.content
    assert rows(settings, "SELECT * FROM tool_executions") == []


def test_a_tool_named_by_an_everyday_word_in_prose_is_no_call_to_correct(lane):
    settings, store = lane
    question = text("Could you clarify which file you mean?")
    result, model = run(settings, store, [question, text("never sent")])
    assert len(model.requests) == 1 and system_notes(settings) == []
    assert result.content == question.content


def test_a_corrected_model_that_then_calls_runs_the_tool(lane):
    settings, store = lane
    result, _ = run(settings, store, [text('{"name": "add", "a": "two", "b": 3}'),
                                      call("add", {"a": 2, "b": 3}), text("It is 5.")])
    assert "That was not a valid call, so add did not run" in system_notes(settings)[0]
    assert result.tools_executed == ["add"] and result.content == "It is 5."


def test_naming_a_tool_that_already_ran_in_the_session_is_no_claim_to_correct(lane):
    settings, store = lane
    result, model = run(settings, store, [call("add", {"a": 2, "b": 3}), text("I used add: 5.")])
    assert system_notes(settings) == [] and len(model.requests) == 2
    assert result.content == "I used add: 5."


def test_an_empty_final_answer_is_written_again_from_the_request_and_the_results(lane):
    settings, store = lane
    result, model = run(settings, store, [call("add", {"a": 2, "b": 3}), text(""), text("It is 5.")],
                        user="2 plus 3?")
    assert result.content == "It is 5." and result.model_calls == 3  # call, "", rewrite
    compose = model.requests[2]
    # the results as facts, then the user's own message to answer
    assert "tools" not in compose and compose["messages"][-1] == {"role": "user", "content": "2 plus 3?"}
    assert "- add (ok): 5" in compose["messages"][-2]["content"]
    assert system_notes(settings) == ["Answer not passed on: the model gave no answer"]
    last = rows(settings, "SELECT role, content, lane_note FROM messages ORDER BY id DESC LIMIT 1")[0]
    assert last == ("assistant", "It is 5.", 0)


def test_an_answer_that_stays_empty_is_the_lane_s_account_of_what_ran(lane):
    settings, store = lane
    result, model = run(settings, store, [call("add", {"a": 2, "b": 3}), text(""), text("  ")])
    assert len(model.requests) == 3 and result.finish_reason == "stop"
    assert result.content == ("I could not write a reliable answer. What ran for this request:\n"
                              "- add returned 5\n(The model's reply was not passed on: the model gave no answer.)")
    last = rows(settings, "SELECT role, content, lane_note FROM messages ORDER BY id DESC LIMIT 1")[0]
    assert last == ("assistant", result.content, 1)


def test_a_call_told_in_prose_is_shown_back_as_the_exact_call_to_make(lane):
    settings, store = lane
    prose = text('I called the "add" function with the arguments {"a": 2, "b": 3, "c": null}.')
    result, model = run(settings, store, [prose, call("add", {"a": 2, "b": 3}), text("5")])
    note = system_notes(settings)[0]
    assert note.startswith("You described a call to add but did not make it, so nothing ran.")
    assert note.endswith('<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>')
    assert result.tools_executed == ["add"] and result.content == "5"


def test_notes_of_earlier_turns_are_not_sent_again(lane):
    settings, store = lane
    spelled = text('{"name": "add", "a": "two", "b": 3}')

    async def two_turns():
        with ScriptedModel([spelled, call("add", {"a": 2, "b": 3}), text("5"), text("Hello.")]) as model:
            llm = LlmClient(model.url, model=None, timeout_s=2.0)
            agent = Agent(settings, store, Registry(TOOLS), llm)
            session = store.create_session()
            await agent.run_turn(session, [{"role": "user", "content": "sum 2 and 3"}])
            await agent.run_turn(session, [{"role": "user", "content": "hi"}])
            await llm.aclose()
            return model

    model = asyncio.run(two_turns())
    assert len(system_notes(settings)) == 1  # stored, as evidence
    second_turn = model.requests[3]["messages"]
    assert [(m["role"], m["content"]) for m in second_turn[1:]] == [
        ("user", "sum 2 and 3"), ("assistant", ""), ("tool", "5"), ("assistant", "5"), ("user", "hi")]


def run_turns(settings, store, script, users):
    async def go():
        with ScriptedModel(script) as model:
            llm = LlmClient(model.url, model=None, timeout_s=2.0)
            agent = Agent(settings, store, Registry(TOOLS), llm)
            session = store.create_session()
            results = [await agent.run_turn(session, [{"role": "user", "content": u}]) for u in users]
            await llm.aclose()
            return results, model
    return asyncio.run(go())


def test_an_answer_copied_from_an_earlier_turn_stands_but_leaves_the_record(lane):
    settings, store = lane
    script = [text("391"), text("391"), text("Hello.")]
    results, model = run_turns(settings, store, script, ["17 * 23?", "What is my codename?", "hi"])
    assert results[1].content == "391" and not system_notes(settings)  # it may be right: no correction
    third_turn = model.requests[2]["messages"]
    assert [(m["role"], m["content"]) for m in third_turn[1:]] == [
        ("user", "17 * 23?"), ("assistant", "391"), ("user", "What is my codename?"), ("user", "hi")]


def test_corrected_replies_and_copied_errors_leave_the_record(lane):
    settings, store = lane
    script = [text(""), text("Hi there."), call("fail", {}), text("ERROR: the disk is on fire"),
              text("Bye.")]
    results, model = run_turns(settings, store, script, ["hello", "do the thing", "bye"])
    assert results[0].content == "Hi there." and results[1].content == "ERROR: the disk is on fire"
    last_turn = model.requests[4]["messages"]
    assert [(m["role"], m["content"]) for m in last_turn[1:]] == [
        ("user", "hello"), ("assistant", "Hi there."), ("user", "do the thing"), ("user", "bye")]


def test_an_answer_from_the_model_s_own_head_gets_the_tool_its_decision_names(lane):
    settings, store = lane
    result, model = run(settings, store, [text("5"), call("add", {"a": 2, "b": 3}), text("It is 5.")],
                        user="what do two and three make together?", decision='{"next": "add"}')
    decide = model.decide_requests[0]
    choices = decide["response_format"]["json_schema"]["schema"]["properties"]["next"]["enum"]
    assert sorted(choices) == ["add", "answer", "clarify", "crash", "fail"]
    assert "what do two and three make together?" in decide["messages"][-1]["content"]
    assert "The request still needs add" in system_notes(settings)[0]
    assert [r.get("tool_choice") for r in model.requests] == [
        None, {"type": "function", "function": {"name": "add"}}, None]
    assert result.tools_executed == ["add"] and result.content == "It is 5."
    # after add ran, a request of one task is done: no second question
    assert rows(settings, "SELECT purpose, content FROM lane_calls") == [("decide", '{"next": "add"}')]
    assert result.model_calls == 4  # the answer, the decision, the forced call, the answer


def test_a_claim_that_a_tool_ran_forces_that_tool_once(lane):
    settings, store = lane
    result, model = run(settings, store, [text("I used add for that: 5."), call("add", {"a": 2, "b": 3}),
                                          text("It is 5.")], user="2 plus 3?")
    assert [r.get("tool_choice") for r in model.requests] == [
        None, {"type": "function", "function": {"name": "add"}}, None]
    assert system_notes(settings)[0].startswith('You wrote "I used add for that: 5.", but add has not run')
    assert result.tools_executed == ["add"] and result.content == "It is 5."


def test_a_claim_that_still_did_not_run_never_reaches_the_user(lane):
    settings, store = lane
    claim = text("I used add for that: 5.")
    result, model = run(settings, store, [claim, claim, text("I used add, and it gave 5.")], user="2 plus 3?")
    assert len(model.requests) == 3 and model.decide_requests == []  # a claim is no answer to judge
    assert "I used add" not in result.content
    assert result.content.startswith("No tool ran for this request, so I have no checked answer")
    assert "add did something that did not run" in result.content
    notes = system_notes(settings)
    assert [n for n in notes if n.startswith("Answer not passed on")] == [
        "Answer not passed on: it says add did something that did not run"] * 2
    assert rows(settings, "SELECT * FROM tool_executions") == []


def test_a_claim_about_the_session_is_held_to_the_session(lane):
    settings, store = lane
    script = [call("add", {"a": 2, "b": 3}), text("5"), text("I used add earlier.")]
    results, model = run_turns(settings, store, script, ["2 plus 3?", "which tools did you use so far?"])
    assert results[1].content == "I used add earlier." and results[1].tools_executed == []
    assert not [n for n in system_notes(settings) if n.startswith("Answer not passed on")]


@pytest.mark.parametrize("answer, problem", [
    ("I'm sorry, but I need more information to answer your question.", "a stock apology"),
    ("what is 2 plus 3", "the request echoed back"),
    ("Do not call it again. Reply to the user now with that result.", "the lane's own note copied"),
    ("Done!", "it leaves out what the tools returned"),
])
def test_an_answer_that_gives_the_user_nothing_is_written_again(lane, answer, problem):
    settings, store = lane
    result, model = run(settings, store, [call("add", {"a": 2, "b": 3}), text(answer), text("It is 5.")],
                        user="what is 2 plus 3")
    assert result.content == "It is 5."
    assert [n for n in system_notes(settings) if problem in n and n.startswith("Answer not passed on")]


def test_a_call_written_as_text_twice_never_reaches_the_user(lane):
    settings, store = lane
    spelled = text('{"name": "add", "a": "two", "b": 3}')
    result, model = run(settings, store, [spelled, spelled, text("It is 5.")], user="2 plus 3?")
    notes = system_notes(settings)
    assert notes[0].startswith("That was not a valid call, so add did not run")
    assert notes[1] == "Answer not passed on: a tool call written as text"
    assert result.content == "It is 5." and model.requests[1]["tool_choice"]["function"]["name"] == "add"


def test_after_a_tool_ran_the_decision_names_the_request_s_next_step(lane):
    settings, store = lane
    result, model = run(settings, store, [call("add", {"a": 2, "b": 3}), text("5"),
                                          call("clarify", {"question": "Saved?"})],
                        user="add 2 and 3, then check the sum with me", decision='{"next": "clarify"}')
    assert "- add (ok): 5" in model.decide_requests[0]["messages"][-1]["content"]
    assert model.requests[2]["tool_choice"] == {"type": "function", "function": {"name": "clarify"}}
    assert result.tools_executed == ["add", "clarify"] and result.finish_reason == "clarify"


def test_a_decision_for_a_tool_that_already_ran_is_no_correction(lane):
    settings, store = lane
    result, model = run(settings, store, [call("add", {"a": 2, "b": 3}), text("5")],
                        user="add 2 and 3, then tell me the sum", decision='{"next": "add"}')
    assert len(model.decide_requests) == 1 and result.content == "5" and len(model.requests) == 2


def test_a_request_of_one_task_is_done_once_a_tool_ran_for_it(lane):
    settings, store = lane
    result, model = run(settings, store, [call("add", {"a": 2, "b": 3}), text("It is 5.")],
                        user="what do two and three make together?", decision='{"next": "clarify"}')
    assert model.decide_requests == [] and result.content == "It is 5."
    assert result.tools_executed == ["add"] and len(model.requests) == 2


def test_a_decision_for_a_tool_that_cannot_be_called_is_no_correction(lane):
    settings, store = lane
    result, model = run(settings, store, [text("Hello!")], user="hi", decision='{"next": "answer"}')
    assert result.content == "Hello!" and len(model.requests) == 1 and system_notes(settings) == []




def test_a_call_that_only_names_another_mode_for_the_same_values_is_not_run_again(lane):
    settings, store = lane
    noted = Tool("note", "Keep a note.", object_schema(
        {"action": {"type": "string", "enum": ["add", "replace"]}, "text": {"type": "string"}},
        ["action", "text"]), lambda arguments, ctx: f"{arguments['action']}: {arguments['text']}")
    script = [call("note", {"action": "add", "text": "dentist on 3 March"}),
              call("note", {"action": "replace", "text": "dentist on 3 March"}), text("Noted: dentist on 3 March.")]

    async def go():
        with ScriptedModel(script) as model:
            llm = LlmClient(model.url, model=None, timeout_s=2.0)
            agent = Agent(settings, store, Registry([noted]), llm)
            result = await agent.run_turn(store.create_session(), [{"role": "user", "content": "note it"}])
            await llm.aclose()
            return result

    result = asyncio.run(go())
    assert result.tools_executed == ["note"]
    assert [r[0] for r in rows(settings, "SELECT status FROM tool_executions ORDER BY id")] == ["ok", "refused"]


def test_a_next_step_is_chosen_among_the_index_s_best_tools_that_have_not_run(lane):
    settings, store = lane
    script = [call("add", {"a": 2, "b": 3}), text("It is 5."), text("It is 5, nothing else.")]
    result, model = run(settings, store, script, user="add 2 and 3, and then have it go wrong",
                        decision='{"next": "answer"}')
    first = model.decide_requests[0]
    choices = first["response_format"]["json_schema"]["schema"]["properties"]["next"]["enum"]
    assert "add" not in choices and "answer" in choices and 2 <= len(choices) <= 4  # three at most
    assert result.tools_executed == ["add"] and result.content == "It is 5."


def test_a_fact_label_copied_to_the_front_of_the_answer_never_reaches_the_user_or_the_record(lane):
    settings, store = lane
    script = [text("The assistant answered: Hello!"), text("Hi again.")]
    results, model = run_turns(settings, store, script, ["hi", "hi once more"])
    assert results[0].content == "Hello!"
    second_turn = model.requests[1]["messages"]
    assert [(m["role"], m["content"]) for m in second_turn[1:]] == [
        ("user", "hi"), ("assistant", "Hello!"), ("user", "hi once more")]


def test_a_next_step_the_request_names_is_forced_without_a_question(lane):
    settings, store = lane
    script = [call("add", {"a": 2, "b": 3}), text("It is 5."), call("clarify", {"question": "ok?"})]
    result, model = run(settings, store, script, user="add 2 and 3, then clarify the result with me")
    assert model.decide_requests == []
    assert model.requests[2]["tool_choice"] == {"type": "function", "function": {"name": "clarify"}}
    assert result.tools_executed == ["add", "clarify"]
