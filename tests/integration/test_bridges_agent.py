"""The bridges inside the real agent loop: a scripted model over HTTP searches, calls through
tool_call and breaks the rules; the store is read back with SQL."""

import asyncio
import json
import sqlite3

import pytest

from stack.agent.llm_client import LlmClient
from stack.agent.loop import Agent
from stack.config import Settings
from stack.store import Store
from stack.tools.base import Tool, object_schema
from stack.tools.registry import Registry
from tests.fakes.scripted_model import ScriptedModel, call, text

NOTES: list[str] = []


def _remember(arguments, ctx):
    NOTES.append(arguments["text"])
    return "saved"


def _convert(arguments, ctx):
    return f"{arguments['amount'] * 2} {arguments['to']}"


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


def run(settings, store, script, user="convert 21 EUR to USD", tools=(CORE, CONVERT, SECRET)):
    async def go():
        with ScriptedModel(script) as model:
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


def tool_messages(model, request):
    return [m["content"] for m in model.requests[request]["messages"] if m["role"] == "tool"]


def test_search_then_call_through_the_bridge_is_recorded_under_the_real_name(lane):
    settings, store = lane
    result, model = run(settings, store, [
        call("tool_search", {"query": "convert currency"}),
        call("tool_call", {"name": "currency_convert", "arguments": {"amount": "21", "to": "USD"}}),
        text("42 USD"),
    ])
    offered = [t["function"]["name"] for t in model.requests[0]["tools"]]
    assert offered == ["memory", "tool_search", "tool_describe", "tool_call"]
    assert "currency_convert(amount: number, to: string)" in tool_messages(model, 1)[0]
    assert executions(settings) == [
        ("tool_search", "ok", 0, '{"query": "convert currency"}'),
        ("currency_convert", "ok", 1, '{"amount": 21, "to": "USD"}'),
    ]
    assert result.tools_executed == ["tool_search", "currency_convert"]
    assert tool_messages(model, 2)[-1] == "42 USD"


def test_bad_arguments_through_the_bridge_are_an_error_with_the_schema(lane):
    settings, store = lane
    _, model = run(settings, store, [
        call("tool_call", {"name": "currency_convert", "arguments": {"amount": "lots"}}),
        text("sorry"),
    ])
    [(name, status, via_bridge, _)] = executions(settings)
    assert (name, status, via_bridge) == ("currency_convert", "error", 1)
    message = tool_messages(model, 1)[0]
    assert message.startswith("ERROR: invalid arguments for currency_convert")
    assert '"required":["amount","to"]' in message and '"arguments": {"amount": 1' in message


def test_recursion_core_and_out_of_scope_calls_are_refused_under_tool_call(lane):
    settings, store = lane
    narrow = settings.with_overrides(tools_subset=("memory", "currency_convert"))
    run(narrow, store, [
        call("tool_call", {"name": "tool_call", "arguments": {}}),
        call("tool_call", {"name": "memory", "arguments": {"text": "x"}}),
        call("tool_call", {"name": "delete_everything", "arguments": {}}),
        call("delete_everything", {}),
        text("done"),
    ])
    rows = executions(narrow)
    assert [(r[0], r[1], r[2]) for r in rows] == [
        ("tool_call", "refused", 0), ("tool_call", "refused", 0), ("tool_call", "refused", 0),
        ("delete_everything", "refused", 0)]
    assert NOTES == []


def test_promoted_tool_is_offered_and_called_directly(lane):
    settings, store = lane
    result, model = run(settings, store, [
        call("currency_convert", {"amount": 5, "to": "JPY"}), text("10 JPY")],
        user="Please convert 5 EUR into JPY currency")
    # Offered after the user's message, not in `tools`: the tools block stays the same every turn.
    first = model.requests[0]
    offered = [t["function"]["name"] for t in first["tools"]]
    assert offered == ["memory", "tool_search", "tool_describe", "tool_call"]
    user_at = next(i for i, m in enumerate(first["messages"]) if m["role"] == "user")
    note = first["messages"][user_at + 1]
    assert note["role"] == "system" and '"name": "currency_convert"' in note["content"]
    assert "delete_everything" not in json.dumps(first)
    assert model.requests[1]["messages"][: len(first["messages"])] == first["messages"]
    assert executions(settings) == [("currency_convert", "ok", 0, json.dumps(
        {"amount": 5, "to": "JPY"}))]
    assert result.tools_executed == ["currency_convert"]


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


def test_promotion_costs_no_model_call_of_its_own(lane):
    settings, store = lane
    result, model = run(settings, store, [text("ok")], user=CURRENCY_REQUEST, tools=CURRENCY_TOOLS)
    assert promoted_in(model.requests[0]) == ["currency_convert", "exchange_rates"]
    assert result.model_calls == 2  # the answer and the decision
    with sqlite3.connect(settings.db_path) as db:
        purposes = db.execute("SELECT purpose FROM lane_calls WHERE session_id = ?",
                              (result.session_id,)).fetchall()
    assert purposes == [("decide",)]


def test_a_core_tool_the_user_names_keeps_promotion_out_of_the_turn(lane):
    settings, store = lane
    _, model = run(settings, store, [text("ok")],
                   user="Please convert 5 EUR into JPY currency and keep it in memory")
    first = model.requests[0]
    assert [t["function"]["name"] for t in first["tools"]] == ["memory", "tool_search", "tool_describe", "tool_call"]
    assert not [m for m in first["messages"] if m["role"] == "system" and "currency_convert" in m["content"]]


def test_a_guessed_tool_name_written_as_text_is_answered_with_the_hidden_tools_for_it(lane):
    settings, store = lane
    guess = '```json\n{"name": "currency", "arguments": {"action": "convert", "amount": 21}}\n```'
    result, model = run(settings, store, [
        text(guess),
        call("tool_call", {"name": "currency_convert", "arguments": {"amount": 21, "to": "USD"}}),
        text("42 USD"),
    ])
    assert executions(settings)[0][:3] == ("currency", "refused", 0)
    assert executions(settings)[1][:3] == ("currency_convert", "ok", 1)
    told = tool_messages(model, 1)[0]
    assert told.startswith("REFUSED: There is no tool named 'currency', so nothing ran.")
    assert told.split("\n")[1].startswith("- currency_convert(amount: number, to: string):")
    assert told.endswith("Call one: tool_call(name, arguments={...}).")
    forced = {"type": "function", "function": {"name": "tool_call"}}
    assert model.requests[1].get("tool_choice") == forced  # the next call runs one of the hits
    assert model.requests[2].get("tool_choice") != forced
    assert result.content == "42 USD"


def test_a_guessed_native_call_is_told_what_search_finds_for_its_name_and_arguments(lane):
    settings, store = lane
    result, model = run(settings, store, [call("fx_exchange", {"to": "USD"}), text("Sorry.")])
    assert executions(settings) == [("fx_exchange", "refused", 0, '{"to": "USD"}')]
    told = tool_messages(model, 1)[0]
    assert told.split("\n")[1].startswith("- currency_convert(")  # the best hit first
    assert result.tools_executed == []


def test_a_guess_that_search_cannot_answer_confidently_forces_nothing(lane):
    settings, store = lane
    guess = '```json\n{"name": "weather", "arguments": {"city": "Paris"}}\n```'
    result, model = run(settings, store, [text(guess), text("I cannot check the weather.")],
                        user="what's the weather in Paris?")
    assert executions(settings) == [("weather", "refused", 0, '{"city": "Paris"}')]
    assert "Low confidence" in tool_messages(model, 1)[0]
    assert model.requests[1].get("tool_choice") is None  # no hidden tool is run on a hunch
    assert result.content == "I cannot check the weather."
