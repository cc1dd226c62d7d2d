"""The bridges inside the real agent loop: the lane's decision picks a hidden tool and forces its
call through tool_call, and a scripted model over HTTP searches, guesses and breaks the rules in
its forced replies; the store is read back with SQL."""

import asyncio
import json
import sqlite3

import pytest

from stack.agent.llm_client import LlmClient
from stack.agent.loop import Agent
from stack.config import Settings
from stack.store import Store
from stack.tools.base import Tool, object_schema
from stack.tools.calculator import TOOLS as CALCULATOR
from stack.tools.registry import Registry
from tests.fakes.scripted_model import Reply, ScriptedModel, call, text

NOTES: list[str] = []


def _remember(arguments, ctx):
    NOTES.append(arguments["text"])
    return "saved"


def _convert(arguments, ctx):
    return f"{arguments['amount'] * 2:g} {arguments['to']}"


CORE = Tool("memory", "Save a note.", object_schema({"text": {"type": "string"}}, ["text"]),
            _remember)
CONVERT = Tool("currency_convert", "Convert an amount of money between currencies.",
               object_schema({"amount": {"type": "number"}, "to": {"type": "string"}},
                             ["amount", "to"]), _convert, "fx")
SECRET = Tool("delete_everything", "Delete every file in the account.", object_schema({}),
              lambda a, c: "gone", "danger")


@pytest.fixture
def lane(tmp_path):
    settings = Settings(home=tmp_path, core_tools=("memory",), llm_timeout_s=5.0,
                        max_iterations=6)
    store = Store(settings.db_path)
    yield settings, store
    store.close()


def run(settings, store, script, user="convert 21 EUR to USD", tools=(CORE, CONVERT, SECRET),
        decision=None):
    async def go():
        with ScriptedModel(script, decision=decision) as model:
            llm = LlmClient(model.url, model=None, timeout_s=settings.llm_timeout_s)
            try:
                agent = Agent(settings, store, Registry(list(tools)), llm)
                session = store.create_session()
                result = await agent.run_turn(session, [{"role": "user", "content": user}])
                return result, model
            finally:
                await llm.aclose()
    return asyncio.run(go())


def executions(settings):
    with sqlite3.connect(settings.db_path) as db:
        return db.execute("SELECT tool_name, status, via_bridge, arguments FROM tool_executions"
                          " ORDER BY id").fetchall()


def stored(settings, column):
    """One column (result, error, origin) of every execution, in order."""
    with sqlite3.connect(settings.db_path) as db:
        return [row[0] for row in db.execute(f"SELECT {column} FROM tool_executions ORDER BY id")]


def tool_messages(model, request):
    return [m["content"] for m in model.requests[request]["messages"] if m["role"] == "tool"]


def bridged_target(request):
    """The hidden tool a request forces through tool_call (its response format), if any."""
    schema = (request.get("response_format") or {}).get("json_schema", {}).get("schema", {})
    return schema.get("properties", {}).get("arguments", {}).get("properties", {}).get("name", {}).get("const")


def facts(request):
    """What a composed answer is written from: its question's second message (no tools offered)."""
    assert not request.get("tools") and [m["role"] for m in request["messages"]] == ["system", "system", "user"]
    return request["messages"][1]["content"]


def bridged(name, arguments):
    """A call through tool_call as the bridge's reply format makes the model write it: as text."""
    return text(json.dumps({"name": "tool_call", "arguments": {"name": name, "arguments": arguments}}))


def test_a_hidden_tool_the_decision_picks_is_forced_through_the_bridge(lane):
    settings, store = lane
    result, model = run(settings, store, [
        bridged("currency_convert", {"amount": "21", "to": "USD"}), text("That is 42 USD.")])
    [decision] = model.decide_requests
    assert "- currency_convert: Convert an amount" in decision["messages"][-1]["content"].split("Other tools")[1]
    assert "currency_convert" in decision["response_format"]["json_schema"]["schema"]["properties"]["next"]["enum"]
    forced, composed = model.requests
    assert [t["function"]["name"] for t in forced["tools"]] == ["memory", "tool_search", "tool_describe", "tool_call"]
    assert "tool_choice" not in forced and bridged_target(forced) == "currency_convert"
    arguments = forced["response_format"]["json_schema"]["schema"]["properties"]["arguments"]
    assert arguments["properties"]["arguments"] == CONVERT.parameters  # decoded under the tool's schema
    assert executions(settings) == [("currency_convert", "ok", 1, '{"amount": 21, "to": "USD"}')]
    assert stored(settings, "origin") == ["content"]
    assert "- currency_convert (ok): 42 USD" in facts(composed)
    assert result.tools_executed == ["currency_convert"]
    assert result.content == "That is 42 USD."


def test_search_then_call_through_the_bridge_is_recorded_under_the_real_name(lane):
    settings, store = lane
    both = Reply(tool_calls=[
        {"name": "tool_search", "arguments": {"query": "convert currency"}},
        {"name": "tool_call", "arguments": {"name": "currency_convert", "arguments": {"amount": "21", "to": "USD"}}}])
    result, model = run(settings, store, [both, text("42 USD")], decision='{"next": "currency_convert"}')
    assert executions(settings) == [
        ("tool_search", "ok", 0, '{"query": "convert currency"}'),
        ("currency_convert", "ok", 1, '{"amount": 21, "to": "USD"}'),
    ]
    assert "currency_convert(amount: number, to: string)" in stored(settings, "result")[0]
    assert result.tools_executed == ["tool_search", "currency_convert"]
    assert len(model.requests) == 2 and "- currency_convert (ok): 42 USD" in facts(model.requests[1])
    assert result.content == "42 USD"


def test_bad_arguments_through_the_bridge_are_an_error_with_the_schema(lane):
    settings, store = lane
    _, model = run(settings, store, [
        call("tool_call", {"name": "currency_convert", "arguments": {"amount": "lots"}}),
        text("sorry"),
    ])
    [(name, status, via_bridge, _)] = executions(settings)
    assert (name, status, via_bridge) == ("currency_convert", "error", 1)
    # the failed call is forced once more, the model having read the error with the schema
    assert bridged_target(model.requests[1]) == "currency_convert"
    message = tool_messages(model, 1)[0]
    assert message.startswith("ERROR: invalid arguments for currency_convert")
    assert '"required":["amount","to"]' in message and '"arguments": {"amount": 1' in message
    assert bridged_target(model.requests[2]) is None and "(error)" in facts(model.requests[2])


def test_recursion_core_and_out_of_scope_calls_are_refused_under_tool_call(lane):
    settings, store = lane
    narrow = settings.with_overrides(tools_subset=("memory", "currency_convert"))
    rule_breaking = Reply(tool_calls=[
        {"name": "tool_call", "arguments": {"name": "tool_call", "arguments": {}}},
        {"name": "tool_call", "arguments": {"name": "memory", "arguments": {"text": "x"}}},
        {"name": "tool_call", "arguments": {"name": "delete_everything", "arguments": {}}},
        {"name": "delete_everything", "arguments": {}}])
    result, model = run(narrow, store, [rule_breaking, text("done")], decision='{"next": "currency_convert"}')
    rows = executions(narrow)
    assert [(r[0], r[1], r[2]) for r in rows] == [
        ("tool_call", "refused", 0), ("tool_call", "refused", 0), ("tool_call", "refused", 0),
        ("delete_everything", "refused", 0)]
    errors = stored(narrow, "error")
    assert "recursion" in errors[0] and "memory is offered directly" in errors[1]
    assert "no hidden tool named 'delete_everything'" in errors[2]
    assert "delete_everything" not in json.dumps(model.decide_requests)  # out of scope: never offered
    assert NOTES == [] and result.tools_executed == []
    assert len(model.requests) == 2  # refusals are not retried: the answer is composed next


def test_promoted_tool_is_offered_and_called_directly(lane):
    settings, store = lane
    result, model = run(settings, store, [
        call("currency_convert", {"amount": 5, "to": "JPY"}), text("10 JPY")],
        user="Please convert 5 EUR into JPY currency")
    # Offered after the user's message, not in `tools`: the tools block stays the same every turn.
    first, composed = model.requests
    offered = [t["function"]["name"] for t in first["tools"]]
    assert offered == ["memory", "tool_search", "tool_describe", "tool_call"]
    user_at = next(i for i, m in enumerate(first["messages"]) if m["role"] == "user")
    note = first["messages"][user_at + 1]
    assert note["role"] == "system" and '"name": "currency_convert"' in note["content"]
    assert "delete_everything" not in json.dumps(first)
    # Not in `tools`, so its call is forced as the bridge's reply format; a direct call still runs.
    assert bridged_target(first) == "currency_convert" and "tool_choice" not in first
    assert executions(settings) == [("currency_convert", "ok", 0, json.dumps(
        {"amount": 5, "to": "JPY"}))]  # "amount" is a number: a whole one is sent as written
    assert result.tools_executed == ["currency_convert"]
    assert "- currency_convert (ok): 10 JPY" in facts(composed)


RATES = Tool("exchange_rates", "List today's exchange rates of a currency.",
             object_schema({"currency": {"type": "string"}}, ["currency"]), lambda a, c: "1.1",
             "bank")
# A request two hidden tools of one source answer equally well.
CURRENCY_REQUEST = "how much is 5 EUR in JPY currency?"
CURRENCY_TOOLS = (CORE, CONVERT, RATES)


def promoted_in(request):
    notes = [m["content"] for m in request["messages"] if m["role"] == "system"][1:]
    return sorted(name for name in ("currency_convert", "exchange_rates")
                  if any(f'"name": "{name}"' in note for note in notes))


def promotion_notes(settings, session):
    with sqlite3.connect(settings.db_path) as db:
        return [row[0] for row in db.execute(
            "SELECT content FROM messages WHERE session_id = ? AND role = 'system' AND lane_note = 1"
            " AND content LIKE 'Also available for this request%'", (session,))]


def test_promotion_costs_no_model_call_of_its_own(lane):
    settings, store = lane
    result, model = run(settings, store, [call("currency_convert", {"amount": 5, "to": "JPY"}), text("10 JPY")],
                        user=CURRENCY_REQUEST, tools=CURRENCY_TOOLS)
    assert promoted_in(model.requests[0]) == ["currency_convert", "exchange_rates"]
    assert len(promotion_notes(settings, result.session_id)) == 1
    assert result.model_calls == 4  # the decision, the call, the answer and its reading
    with sqlite3.connect(settings.db_path) as db:
        purposes = db.execute("SELECT purpose FROM lane_calls WHERE session_id = ?",
                              (result.session_id,)).fetchall()
    assert purposes == [("decide",), ("read",)]


def test_a_core_tool_the_user_names_keeps_promotion_out_of_the_turn(lane):
    settings, store = lane
    result, model = run(settings, store, [call("memory", {"text": "5 EUR in JPY"}), text("Saved: 5 EUR in JPY.")],
                        user="Please convert 5 EUR into JPY currency and keep it in memory")
    first = model.requests[0]
    assert first["tool_choice"] == {"type": "function", "function": {"name": "memory"}}
    assert [t["function"]["name"] for t in first["tools"]] == ["memory", "tool_search", "tool_describe", "tool_call"]
    assert not [m for m in first["messages"] if m["role"] == "system" and "currency_convert" in m["content"]]
    assert promotion_notes(settings, result.session_id) == []


def test_a_guessed_tool_name_written_as_text_is_answered_with_the_hidden_tools_for_it(lane):
    settings, store = lane
    guess = '```json\n{"name": "currency", "arguments": {"action": "convert", "amount": 21}}\n```'
    result, model = run(settings, store, [text(guess), text("I could not convert it.")],
                        decision='{"next": "currency_convert"}')
    assert executions(settings) == [("currency", "refused", 0, '{"action": "convert", "amount": 21}')]
    assert stored(settings, "origin") == ["content"]
    told = stored(settings, "error")[0]
    assert told.startswith("There is no tool named 'currency', so nothing ran.")
    assert told.split("\n")[1].startswith("- currency_convert(amount: number, to: string):")
    # No hidden tool is forced after a guess: the answer is composed, knowing what was refused.
    forced, composed = model.requests
    assert "currency (refused): There is no tool named 'currency'" in facts(composed)
    assert result.tools_executed == [] and result.content == "I could not convert it."


def test_a_guessed_native_call_is_told_what_search_finds_for_its_name_and_arguments(lane):
    settings, store = lane
    result, model = run(settings, store, [call("fx_exchange", {"to": "USD"}), text("Sorry.")],
                        decision='{"next": "currency_convert"}')
    assert executions(settings) == [("fx_exchange", "refused", 0, '{"to": "USD"}')]
    told = stored(settings, "error")[0]
    assert told.split("\n")[1].startswith("- currency_convert(")  # the best hit first
    assert result.tools_executed == [] and len(model.requests) == 2


def test_a_guess_that_search_cannot_answer_confidently_forces_nothing(lane):
    settings, store = lane
    guess = '```json\n{"name": "weather", "arguments": {"city": "Paris"}}\n```'
    # the decision takes search's weak hit; the forced reply guesses a tool that does not exist
    result, model = run(settings, store, [text(guess), text("I cannot check the weather.")],
                        user="what's the weather in Paris?", decision='{"next": "currency_convert"}')
    assert executions(settings) == [("weather", "refused", 0, '{"city": "Paris"}')]
    assert "Low confidence" in stored(settings, "error")[0]
    forced, composed = model.requests  # no hidden tool is run on a hunch: the answer comes next
    assert bridged_target(forced) == "currency_convert"
    assert "weather (refused)" in facts(composed)
    assert len(model.decide_requests) == 1
    assert result.content == "I cannot check the weather."


def test_a_hidden_tool_s_precondition_holds_through_the_bridge(lane):
    settings, store = lane
    result, model = run(settings, store, [bridged("calculate", {"expression": "8"}), text("Eight.")],
                        user="my 2 kids ask: how many legs does a spider have?", tools=(CORE, *CALCULATOR),
                        decision='{"next": "calculate"}')
    assert bridged_target(model.requests[0]) == "calculate"
    assert executions(settings) == [("calculate", "refused", 1, '{"expression": "8"}')]
    assert result.tools_executed == [] and result.content == "Eight."


def test_a_number_nobody_gave_is_left_out_of_a_call_through_the_bridge(lane):
    settings, store = lane
    rounded = Tool("currency_convert", "Convert an amount of money between currencies.",
                   object_schema({"amount": {"type": "number"}, "to": {"type": "string"},
                                  "decimals": {"type": "integer"}}, ["amount", "to"]), _convert, "fx")
    run(settings, store, [bridged("currency_convert", {"amount": 21, "to": "USD", "decimals": 7}),
                          text("That is 42 USD.")], tools=(CORE, rounded, SECRET))
    [(name, status, via_bridge, arguments)] = executions(settings)
    assert (name, status, via_bridge) == ("currency_convert", "ok", 1)
    assert json.loads(arguments) == {"amount": 21, "to": "USD"}
