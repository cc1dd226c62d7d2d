"""The rows a turn writes (agent/records.py), one way for the agent loop and proxy mode: the
request's messages, the lane's own model calls and held-back replies (lane_calls, not messages),
the answer the user gets, and the lane's own account; and the context budget both modes share."""

from stack.agent.client_history import as_rows
from stack.agent.history import context_of, prompt_room
from stack.agent.llm_client import ModelReply
from stack.agent.records import answered, finished, hold, incoming, kept, latest_request
from stack.agent.turn import TurnEnded, TurnResult
from stack.store import HELD, Store

CONVERSATION = [
    {"role": "user", "content": "weather in Paris?"},
    {"role": "assistant", "content": None,
     "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "sunny", "name": "what the client called it"},
]


def test_a_client_result_is_stored_under_the_tool_its_call_named():
    rows = as_rows(CONVERSATION[2:], CONVERSATION)
    assert rows == [{"role": "tool", "content": "sunny", "tool_calls": None, "tool_call_id": "c1",
                     "tool_name": "get_weather"}]
    assert incoming(CONVERSATION[2])["tool_name"] == "what the client called it"  # agent mode: its own name
    assert incoming({"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
                    )["content"] == "a\nb"


def test_the_latest_user_message_is_the_request():
    assert latest_request(CONVERSATION + [{"role": "user", "content": "and Rome?"}]) == "and Rome?"
    assert latest_request([{"role": "system", "content": "x"}]) == ""


def test_what_a_client_wraps_in_markup_around_its_users_words_is_not_the_request():
    reminder = "<system-reminder>\nEnd commit messages with a trailer.\n- a list\n</system-reminder>"
    context = '<environment_context cwd="/w">\n  <shell>bash</shell>\n</environment_context>'
    blocks = [{"type": "text", "text": reminder}, {"type": "text", "text": "Erstelle die Datei a.txt"}]
    assert latest_request([{"role": "user", "content": blocks}]) == "Erstelle die Datei a.txt"
    assert latest_request([{"role": "user", "content": f"{context}\n\nlist the files\n{reminder}"}]) == "list the files"
    # Markup inside the user's own words, or nothing left besides it, stays the request.
    assert latest_request([{"role": "user", "content": "make <b>this</b> bold"}]) == "make <b>this</b> bold"
    assert latest_request([{"role": "user", "content": reminder}]) == reminder
    inline = "<note>\nkeep this\n</other>\nplease"
    assert latest_request([{"role": "user", "content": inline}]) == inline


def test_lane_calls_are_counted_kept_apart_and_the_answer_is_a_message(tmp_path):
    store = Store(tmp_path / "state.db")
    store.create_session("s1")
    result = TurnResult("s1", "", "stop")
    store.add_message("s1", "user", "weather in Paris?")
    decision = ModelReply('{"tool": "get_weather"}', prompt_tokens=100, completion_tokens=5, cached_tokens=80)
    kept(store, result, "decide", decision)
    kept(store, result, "fit", ModelReply("", prompt_tokens=50, completion_tokens=1), "get_weather: yes 0.91")
    hold(store, "s1", ModelReply("I can't check the weather."), "it declined")
    end = answered(store, "s1", "Sunny in Paris.", ModelReply("Sunny", finish_reason="length", prompt_tokens=7))
    assert (end.content, end.reason, end.lane_written) == ("Sunny in Paris.", "length", False)
    assert (result.model_calls, result.prompt_tokens, result.cached_tokens) == (2, 150, 80)
    assert result.peak_prompt_tokens == 100
    calls = store.lane_calls("s1")
    assert [(c["purpose"], c["content"], c["reason"]) for c in calls] == [
        ("decide", '{"tool": "get_weather"}', None), ("fit", "get_weather: yes 0.91", None),
        (HELD, "I can't check the weather.", "it declined")]
    assert [m["content"] for m in store.messages("s1") if m["role"] == "assistant"] == ["Sunny in Paris."]
    store.close()


def test_the_lanes_own_account_is_stored_and_the_models_answer_is_not_stored_twice(tmp_path):
    store = Store(tmp_path / "state.db")
    store.create_session("s1")
    result = finished(store, TurnResult("s1", "", "stop"), TurnEnded("Nothing ran.", "stop"), "iteration_limit")
    assert (result.content, result.finish_reason) == ("Nothing ran.", "iteration_limit")
    finished(store, TurnResult("s1", "", "stop"), TurnEnded("the model's", "stop", lane_written=False))
    rows = store.messages("s1")
    assert [(m["content"], bool(m["lane_note"])) for m in rows] == [("Nothing ran.", True)]
    store.close()


def test_the_prompt_keeps_a_quarter_of_the_context_free_at_most():
    assert context_of(8192, None) == 8192 and context_of(8192, 4096) == 4096 and context_of(4096, 32768) == 4096
    assert prompt_room(8192, 4096) == 6144  # the cap would take half: a quarter is kept
    assert prompt_room(8192, 512) == 7680
