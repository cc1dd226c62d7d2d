"""Proxy mode through real HTTP: a request with `tools` gets the client's tool calls back, never
runs the lane's own tools, and the store tells calls returned to the client from calls the lane ran."""

import json
import re
import subprocess
import sys

import httpx
import pytest

from stack.tools.calculator import TOOLS as CALCULATOR
from stack.tools.registry import Registry
from tests.fakes.scripted_model import Reply, call, demanded, forced_name, literal_reading, text
from tests.integration.test_api_chat import TOOLS, running_lane, sse_events, wait_for

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "Current local time in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                    "hours_ahead": {"type": "integer"}},
                   "required": ["city"]}}}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


def offered(body):
    return [t["function"]["name"] for t in body.get("tools") or []]


def only_call(reply):
    [returned] = reply["choices"][0]["message"]["tool_calls"]
    return returned["function"]["name"], json.loads(returned["function"]["arguments"]), returned["id"]


def test_two_call_task_returns_calls_and_continues_from_the_clients_history(tmp_path):
    script = [call("get_weather", {"city": "Paris"}), call("get_time", {"city": "Paris"}),
              text("Sunny, and it is noon in Paris.")]
    with running_lane(tmp_path, script) as lane:
        first = lane.chat(messages=ASK, tools=[WEATHER, TIME])
        assert first.status_code == 200, first.text
        reply = first.json()
        assert reply["choices"][0]["finish_reason"] == "tool_calls"
        assert reply["choices"][0]["message"]["content"] is None
        name, arguments, call_id = only_call(reply)
        assert (name, arguments) == ("get_weather", {"city": "Paris"})
        session = first.headers["x-session-id"]
        # The lane's own tools (add, ask_user) are neither offered nor run.
        assert offered(lane.model.requests[0]) == ["get_weather", "get_time"]

        history = ASK + [reply["choices"][0]["message"],
                         {"role": "tool", "tool_call_id": call_id, "content": "sunny, 21 C"}]
        second = lane.chat(messages=history, tools=[WEATHER, TIME])
        name, arguments, time_id = only_call(second.json())
        assert name == "get_time"
        # Stateless client, one session: the results it sent back continue the session that
        # returned the call.
        assert second.headers["x-session-id"] == session
        history += [second.json()["choices"][0]["message"],
                    {"role": "tool", "tool_call_id": time_id, "content": "12:00"}]
        third = lane.chat(messages=history, tools=[WEATHER, TIME])
        assert third.json()["choices"][0]["message"] == {"role": "assistant",
                                                         "content": "Sunny, and it is noon in Paris."}
        assert third.json()["choices"][0]["finish_reason"] == "stop"
        assert third.headers["x-session-id"] == session
        # The model read the client's history, tool results included.
        sent = lane.model.requests[2]["messages"]
        assert [m["role"] for m in sent] == ["user", "assistant", "tool", "assistant", "tool"]
        assert sent[2]["content"] == "sunny, 21 C"

        assert lane.rows("SELECT source FROM sessions") == [("proxy",)]
        assert lane.rows("SELECT tool_name, arguments, via_bridge, origin, result FROM returned_calls"
                         " WHERE session_id = ? ORDER BY id", session) == [
            ("get_weather", '{"city": "Paris"}', 0, "native", "sunny, 21 C"),
            ("get_time", '{"city": "Paris"}', 0, "native", "12:00")]
        assert lane.rows("SELECT count(*) FROM tool_executions") == [(0,)]
        assert [r for r, _ in lane.history(session)] == [
            "user", "assistant", "tool", "assistant", "tool", "assistant"]
        shown = lane.client.get(f"/v1/sessions/{session}").json()
        assert [c["tool_name"] for c in shown["returned_calls"]] == ["get_weather", "get_time"]
        page = lane.client.get(f"/ui/sessions/{session}").text
        assert page.count("returned to client") == 2 + 1  # two calls, and the legend
        assert "client&#x27;s result: sunny, 21 C" in page or "client's result: sunny, 21 C" in page
        listed = subprocess.run([sys.executable, "-m", "stack.cli", "sessions", "--db",
                                 str(lane.settings.db_path), session], capture_output=True, text=True)
        assert "calls returned to the client, which runs them (2)" in listed.stdout, listed.stderr
        assert "result: sunny, 21 C" in listed.stdout
        listing = subprocess.run([sys.executable, "-m", "stack.cli", "sessions", "--db",
                                  str(lane.settings.db_path)], capture_output=True, text=True).stdout
        assert listing.splitlines()[1].split()[3:7] == ["proxy", "6", "0", "2"], listing


def test_streamed_reply_carries_tool_call_deltas(tmp_path):
    with running_lane(tmp_path, [call("get_weather", {"city": "Rome"})]) as lane:
        response = lane.chat(messages=ASK, tools=[WEATHER], stream=True)
        events = sse_events(response.text)
        deltas = [e["choices"][0]["delta"] for e in events[:-1] if e["choices"]]
        calls = [d["tool_calls"][0] for d in deltas if d.get("tool_calls")]
        assert [(c["index"], c["function"]["name"], json.loads(c["function"]["arguments"]))
                for c in calls] == [(0, "get_weather", {"city": "Rome"})]
        assert not any(d.get("content") for d in deltas)
        assert events[-2]["choices"][0]["finish_reason"] == "tool_calls"
        assert events[-1] == "[DONE]"


def test_a_call_written_as_text_is_returned_as_a_tool_call(tmp_path):
    written = 'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
    with running_lane(tmp_path, [text(written)]) as lane:
        reply = lane.chat(messages=ASK, tools=[WEATHER]).json()
        assert only_call(reply)[:2] == ("get_weather", {"city": "Oslo"})
        assert reply["choices"][0]["message"]["content"] is None
        assert lane.rows("SELECT origin FROM returned_calls") == [("content",)]


def test_arguments_are_repaired_where_unambiguous_and_a_bad_call_is_corrected_inside(tmp_path):
    script = [call("get_time", {"town": "Paris"}), call("get_time", {"city": "Paris", "hours_ahead": "3"})]
    with running_lane(tmp_path, script) as lane:
        reply = lane.chat(messages=ASK, tools=[TIME]).json()
        # The client sees only the good call, its "3" repaired to the integer the schema wants.
        assert only_call(reply)[:2] == ("get_time", {"city": "Paris", "hours_ahead": 3})
        # The model was told what was wrong with the first.
        told = lane.model.requests[1]["messages"][-1]
        assert told["role"] == "tool" and "city" in told["content"] and "ERROR" in told["content"]
        assert lane.rows("SELECT tool_name, status FROM tool_executions") == [("get_time", "error")]
        assert lane.rows("SELECT arguments FROM returned_calls") == [('{"city": "Paris", "hours_ahead": 3}',)]


def test_an_optional_argument_set_to_its_declared_default_is_left_out(tmp_path):
    """The model fills in a schema's defaults ("format": "json") that the request never asked
    for: the client gets the call without them; a value that differs from the default, and a
    required argument, stay."""
    contact = {"type": "function", "function": {
        "name": "get_contact", "description": "A contact's details.",
        "parameters": {"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string", "default": "me"},
            "format": {"type": "string", "enum": ["json", "xml"], "default": "json"},
            "verbose": {"type": "boolean", "default": False},
            "limit": {"type": "integer", "default": 1}}}}}
    script = [call("get_contact", {"name": "me", "format": "json", "verbose": False, "limit": 2})]
    with running_lane(tmp_path, script) as lane:
        reply = lane.chat(messages=[{"role": "user", "content": "my contact, two of them"}], tools=[contact]).json()
        assert only_call(reply)[:2] == ("get_contact", {"name": "me", "limit": 2})
        assert lane.rows("SELECT arguments FROM returned_calls") == [('{"name": "me", "limit": 2}',)]


def test_an_optional_text_nobody_gave_is_left_out(tmp_path):
    """Seen with Hermes on the 1.5B model: session_search(query, session_id="...") failed in
    Hermes ("session_id not found: ..."). An optional string none of whose words the conversation
    holds is left out ("...", "f00dcafe"); one the model composed from its words (any case), a
    choice among the schema's values and a required one stay."""
    search = {"type": "function", "function": {"name": "session_search", "description": "Search past sessions.",
              "parameters": {"type": "object", "required": ["query"], "properties": {
                  "query": {"type": "string"}, "session_id": {"type": "string"}, "role": {"type": "string"},
                  "sort": {"type": "string", "enum": ["newest", "oldest"]}, "window": {"type": "integer"},
                  "note": {"type": "string"}}}}}
    made = {"query": "lunch plans", "session_id": "...", "role": "USER said lunch", "sort": "newest", "window": 10,
            "note": "f00dcafe"}
    with running_lane(tmp_path, [call("session_search", made)]) as lane:
        reply = lane.chat(messages=[{"role": "user", "content": "find what the user said about lunch plans"}],
                          tools=[search]).json()
        assert only_call(reply)[1] == {"query": "lunch plans", "role": "USER said lunch", "sort": "newest",
                                       "window": 10}


def test_tool_choice_is_passed_to_the_model(tmp_path):
    with running_lane(tmp_path, [call("get_time", {"city": "Oslo"}), call("get_weather", {"city": "Oslo"}),
                                 text("No tools needed.")]) as lane:
        named = {"type": "function", "function": {"name": "get_time"}}
        lane.chat(messages=ASK, tools=[WEATHER, TIME], tool_choice=named)
        lane.chat(messages=ASK, tools=[WEATHER, TIME], tool_choice="required")
        reply = lane.chat(messages=ASK, tools=[WEATHER, TIME], tool_choice="none").json()
        # Parallel calls allowed (the default): a forced reply is a list of calls, to the named tool alone.
        choices = [demanded(r) for r in lane.model.requests]
        assert choices == [{"several": ["get_time"]}, {"several": ["get_weather", "get_time"]}, None]
        assert offered(lane.model.requests[2]) == []
        assert reply["choices"][0]["message"]["content"] == "No tools needed."


def test_parallel_tool_calls_false_returns_one_call(tmp_path):
    both = Reply(tool_calls=[{"name": "get_weather", "arguments": {"city": "Paris"}},
                             {"name": "get_weather", "arguments": {"city": "Rome"}}])
    ask = [{"role": "user", "content": "What is the weather in Paris and in Rome?"}]
    with running_lane(tmp_path, [both, both]) as lane:
        one = lane.chat(messages=ask, tools=[WEATHER], parallel_tool_calls=False).json()
        two = lane.chat(messages=ask, tools=[WEATHER]).json()
        assert len(one["choices"][0]["message"]["tool_calls"]) == 1
        assert len(two["choices"][0]["message"]["tool_calls"]) == 2


def test_no_call_shaped_text_reaches_the_client(tmp_path):
    guess = text('{"name": "weather_lookup", "arguments": {"city": "Paris"}}')
    with running_lane(tmp_path, [guess, guess, guess, guess]) as lane:
        reply = lane.chat(messages=ASK, tools=[WEATHER]).json()
        content = reply["choices"][0]["message"]["content"]
        assert "tool_calls" not in reply["choices"][0]["message"]
        assert '"name"' not in content and "{" not in content
        # The model was told there is no such tool, with the tools there are.
        assert "no tool named 'weather_lookup'" in lane.model.requests[1]["messages"][-1]["content"]
        # Made again, the call is told the same refusal (not that it "failed").
        assert lane.model.requests[2]["messages"][-1]["content"] == lane.model.requests[1]["messages"][-1]["content"]
        assert ("weather_lookup", "refused") in lane.rows("SELECT tool_name, status FROM tool_executions")


@pytest.mark.parametrize("words, tool_fits_better", [(0.5, True), (0.78, True), (0.85, False)])
def test_an_answer_claiming_a_call_never_made_is_made_true_or_carries_the_lanes_receipt(tmp_path, words,
                                                                                        tool_fits_better):
    """Lever "claimed": the reply says get_weather ran (0.75), and nothing ran. Where the model
    reads get_weather as fitting the request better than a reply in words, or within
    decide.CLAIM_TIE of it (0.78: a tie goes to the action the reply reports; both under
    decide.FITS, so the second look called nothing), the claim is held back and the call returned
    to the client; where a reply in words fits clearly better, the answer is passed on with the
    lane's receipt."""
    claim = "I called get_weather and it is sunny."
    script = [text(claim), call("get_weather", {"city": "Paris"})]
    with running_lane(tmp_path, script, reading=literal_reading) as lane:
        lane.model.fit = {"get_weather": 0.75, "reply_in_words": words}
        reply = lane.chat(messages=ASK, tools=[WEATHER]).json()["choices"][0]
        kept = lane.rows("SELECT purpose FROM lane_calls WHERE purpose IN ('claimed', 'held') ORDER BY id")
        if tool_fits_better:
            assert only_call({"choices": [reply]})[:2] == ("get_weather", {"city": "Paris"})
            assert kept == [("claimed",), ("claimed",), ("held",)]
            assert lane.rows("SELECT count(*) FROM messages WHERE content = ?", claim) == [(0,)]
        else:
            assert "tool_calls" not in reply["message"]
            assert reply["message"]["content"] == (  # the tool it names is named back
                f"{claim}\n\n(The lane's record: get_weather did not run in this conversation.)\n"
                "(The lane's record: no tool ran for this request.)")
            assert kept == [("claimed",), ("claimed",)]


def test_a_claim_naming_the_wrong_tool_calls_the_one_that_fits_the_request_best(tmp_path):
    """Lever "claimed" weighs the tool the reading names and search's best match for the
    request: the reply says get_time ran for a weather question and nothing ran; get_weather
    fits the request better than get_time and than a reply in words, so get_weather is called."""
    claim = "I called get_time: it is sunny in Paris."
    with running_lane(tmp_path, [text(claim), call("get_weather", {"city": "Paris"})],
                      reading=literal_reading) as lane:
        lane.model.fit = {"get_time": 0.3, "get_weather": 0.75, "reply_in_words": 0.5}
        reply = lane.chat(messages=ASK, tools=[TIME, WEATHER]).json()
        assert only_call(reply)[:2] == ("get_weather", {"city": "Paris"})
        asked = lane.rows("SELECT content FROM lane_calls WHERE purpose = 'claimed' ORDER BY id")
        assert [row[0].split(":")[0] for row in asked] == ["get_time", "get_weather", "reply_in_words"]
        assert lane.rows("SELECT reason FROM lane_calls WHERE purpose = 'held'") == \
            [("it reports get_time as done, which did not run for this request",)]


CP = {"type": "function", "function": {
    "name": "cp", "description": "Copy a file to another file or folder.",
    "parameters": {"type": "object", "properties": {"source": {"type": "string"}, "destination": {"type": "string"}},
                   "required": ["source", "destination"]}}}
COPY = [{"role": "user", "content": "Put a copy of report.txt in the archive folder."}]
HOW_TO = "You can use the 'cp' command:\n\n```bash\ncp report.txt archive/\n```\n\nThat copies it."


@pytest.mark.parametrize("ran", [False, True])
def test_a_call_written_as_a_command_for_the_user_is_made(tmp_path, ran):
    """Lever "call": a reply that writes a client tool's call as a command in its code (seen on the
    1.5B model, the decision having said "answer") is corrected: the tool is forced, the model is
    shown the command, and the client gets the call. Where that tool ran for the request, the
    same words are an answer."""
    made = call("cp", {"source": "report.txt", "destination": "archive/"})
    arguments = json.dumps(made.tool_calls[0]["arguments"])
    messages = COPY + ([{"role": "assistant", "content": None, "tool_calls": [{
        "id": "c0", "type": "function", "function": {"name": "cp", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": "c0", "content": "{}"}] if ran else [])
    with running_lane(tmp_path, [text(HOW_TO), made], decision="answer") as lane:
        reply = lane.chat(messages=messages, tools=[CP, WEATHER]).json()
        if ran:
            assert reply["choices"][0]["message"]["content"] == HOW_TO and len(lane.model.requests) == 1
            return
        assert only_call(reply)[:2] == ("cp", {"source": "report.txt", "destination": "archive/"})
        forced_call = lane.model.requests[1]
        assert forced_name(forced_call) == "cp"
        assert "`cp report.txt archive/`" in forced_call["messages"][-1]["content"]
        assert lane.rows("SELECT tool_name FROM returned_calls") == [("cp",)]


def _answered(call_id, arguments='{"city": "Paris"}', result="sunny"):
    return [{"role": "assistant", "content": None, "tool_calls": [{
        "id": call_id, "type": "function", "function": {"name": "get_weather", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": call_id, "content": result}]


def test_the_call_just_answered_is_not_returned_again(tmp_path):
    again = call("get_weather", {"city": "Paris"})
    with running_lane(tmp_path, [again, text("Sunny."), again]) as lane:
        reply = lane.chat(messages=ASK + _answered("c0"), tools=[WEATHER]).json()
        assert reply["choices"][0]["message"]["content"] == "Sunny."
        told = lane.model.requests[1]["messages"][-1]
        assert told["role"] == "tool" and "Already done" in told["content"] and "sunny" in told["content"]
        assert offered(lane.model.requests[1]) == []  # the next reply is an answer, in words
        assert lane.rows("SELECT count(*) FROM returned_calls") == [(0,)]
        # Asked again in a later user message, the same call is a new question: it is returned.
        later = ASK + _answered("c0") + [{"role": "assistant", "content": "Sunny."},
                                         {"role": "user", "content": "And now?"}]
        assert only_call(lane.chat(messages=later, tools=[WEATHER]).json())[0] == "get_weather"


def test_a_call_written_as_text_where_the_answer_was_due_is_not_returned(tmp_path):
    """After a result, the decision said "answer" and the reply was asked for with no tools; the
    model wrote a call as text anyway (seen with Hermes: `memory` written again after it had
    succeeded, five rounds): it is told to answer, once, and its answer is passed on."""
    again = text('{"name": "get_weather", "arguments": {"city": "Rome"}}')
    with running_lane(tmp_path, [again, text("It is sunny in Paris.")], decision="answer") as lane:
        reply = lane.chat(messages=ASK + _answered("c0"), tools=[WEATHER]).json()
        assert reply["choices"][0]["message"]["content"] == "It is sunny in Paris."
        assert reply["choices"][0]["message"].get("tool_calls") is None
        assert lane.rows("SELECT count(*) FROM returned_calls") == [(0,)]
        assert lane.rows("SELECT reason FROM lane_calls WHERE reason IS NOT NULL") == [
            ("it wrote a call where the answer was due",)]
        assert all(not r.get("tools") for r in lane.model.requests)


SHELL = {"type": "function", "function": {
    "name": "exec_command", "description": "Runs a shell command.",
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}}


def test_a_call_that_does_the_rest_of_the_request_where_the_answer_was_due_is_returned(tmp_path):
    """The first call did part of what was asked (seen with Codex on the 1.5B model: `touch
    notes.txt` for a file whose only line is given); written where the answer was due, a call of
    the same tool that carries words of the request the first did not is the rest of the request,
    and goes to the client. The same tool again saying nothing new is still held (test above)."""
    asked = [{"role": "user", "content": "Create a file named notes.txt whose only line is: lane-431859"}]
    touched = [{"role": "assistant", "content": None, "tool_calls": [{
        "id": "c0", "type": "function", "function": {"name": "exec_command",
                                                     "arguments": '{"cmd": "touch notes.txt"}'}}]},
        {"role": "tool", "tool_call_id": "c0", "content": "exit code 0"}]
    rest = text('{"name": "exec_command", "arguments": {"cmd": "echo lane-431859 > notes.txt"}}')
    with running_lane(tmp_path, [rest, text("never asked")], decision="answer") as lane:
        reply = lane.chat(messages=asked + touched, tools=[SHELL]).json()
        assert only_call(reply)[:2] == ("exec_command", {"cmd": "echo lane-431859 > notes.txt"})
        assert lane.rows("SELECT tool_name FROM returned_calls") == [("exec_command",)]
        assert lane.rows("SELECT count(*) FROM lane_calls WHERE reason IS NOT NULL") == [(0,)]
        # The same call once more, after its own result: nothing of the request is new in it.
        done = touched + [reply["choices"][0]["message"],
                          {"role": "tool", "tool_call_id": only_call(reply)[2], "content": "exit code 0"}]
    again = text('{"name": "exec_command", "arguments": {"cmd": "cat notes.txt"}}')
    with running_lane(tmp_path / "again", [again, text("notes.txt holds lane-431859.")], decision="answer") as lane:
        reply = lane.chat(messages=asked + done, tools=[SHELL]).json()
        assert reply["choices"][0]["message"]["content"].startswith("notes.txt holds lane-431859.")
        assert lane.rows("SELECT reason FROM lane_calls WHERE reason IS NOT NULL") == [
            ("it wrote a call where the answer was due",)]


def test_a_call_repeated_after_its_result_twice_ends_with_that_result(tmp_path):
    """Told once that the call already ran, the model writes it again: the turn ends with the
    lane's account of the client's result, not another round (seen with Claude Code on the 1.5B
    model: five model calls after the result, then "I don't have any information")."""
    again = text('{"name": "get_weather", "arguments": {"city": "Paris"}}')
    with running_lane(tmp_path, [again, again, text("never asked")]) as lane:
        reply = lane.chat(messages=ASK + _answered("c0", result="sunny, 21 C"), tools=[WEATHER]).json()
        assert reply["choices"][0]["message"]["content"].endswith("- get_weather: sunny, 21 C")
        assert reply["choices"][0]["message"].get("tool_calls") is None
        assert len(lane.model.requests) == 2
        assert lane.rows("SELECT count(*) FROM returned_calls") == [(0,)]


def test_a_reply_that_copies_the_lanes_note_is_not_passed_on(tmp_path):
    """Told that its repeat already ran ("... Do not call it again."), the model answered with
    the result and that note (seen with Codex on the 1.5B model): the client gets the lane's
    account of its tools' results, and no further model call is made."""
    again = call("get_weather", {"city": "Paris"})
    copied = text("sunny, 21 C\nDo not call it again.")
    with running_lane(tmp_path, [again, copied, text("never asked")]) as lane:
        reply = lane.chat(messages=ASK + _answered("c0", result="sunny, 21 C"), tools=[WEATHER]).json()
        content = reply["choices"][0]["message"]["content"]
        assert "Do not call it again" not in content and content.endswith("- get_weather: sunny, 21 C")
        assert len(lane.model.requests) == 2
        held = lane.rows("SELECT reason FROM lane_calls WHERE content LIKE '%Do not call it again%'")
        assert held == [("it copied the lane's own note",)]


def test_the_lanes_earlier_account_is_not_shown_to_the_model_as_its_answer(tmp_path):
    """A client sends the conversation back with the lane's own account as an assistant message:
    the model reads "(no answer)" in its place (seen with Hermes: the model copied the account,
    888 tokens, instead of answering)."""
    account = "The model gave no final answer.\nWhat your tools returned for this request:\n- get_weather: sunny"
    earlier = ASK + _answered("c0") + [{"role": "assistant", "content": account},
                                       {"role": "user", "content": "thanks, and tomorrow?"}]
    with running_lane(tmp_path, [text("I cannot tell tomorrow's weather.")], decision="answer") as lane:
        lane.chat(messages=earlier, tools=[WEATHER])
        shown = [m["content"] for m in lane.model.requests[-1]["messages"] if m["role"] == "assistant"]
        assert "(no answer)" in shown and not any("gave no final answer" in (c or "") for c in shown)
        stored = lane.rows("SELECT content FROM messages WHERE role = 'assistant'")
        assert (account,) in stored  # the record keeps what the client sent


def test_a_repeat_is_a_repeat_however_its_numbers_are_spelled(tmp_path):
    """The lane returns a `number` as 1.0; a client sends the call back as 1: the model's same
    call again is still the call just answered (seen with Claude Code: returned 36 times)."""
    search = {"type": "function", "function": {"name": "find", "description": "Find things.", "parameters": {
        "type": "object", "properties": {"query": {"type": "string"}, "max_results": {"type": "number"}},
        "required": ["query"]}}}
    sent_back = [{"role": "assistant", "content": None, "tool_calls": [{"id": "c0", "type": "function", "function": {
        "name": "find", "arguments": '{"query": "x", "max_results": 1}'}}]},
        {"role": "tool", "tool_call_id": "c0", "content": "nothing found"}]
    again = text('{"name": "find", "arguments": {"query": "x", "max_results": 1.0}}')
    with running_lane(tmp_path, [again, again, text("never asked")]) as lane:
        reply = lane.chat(messages=[{"role": "user", "content": "find x"}, *sent_back], tools=[search]).json()
        assert reply["choices"][0]["message"].get("tool_calls") is None
        assert reply["choices"][0]["message"]["content"].endswith("- find: nothing found")
        assert lane.rows("SELECT count(*) FROM returned_calls") == [(0,)]


def _stuck_on_weather(then: str):
    """A decision that picks get_weather whenever it may, else `then`."""
    def decide(body):
        choices = body["response_format"]["json_schema"]["schema"]["properties"]["next"]["enum"]
        return Reply(content=json.dumps({"next": "get_weather" if "get_weather" in choices else then}))
    return decide


@pytest.mark.parametrize("then", ["answer", "get_time"])
def test_a_decision_for_the_tool_just_answered_is_asked_again_without_it(tmp_path, then):
    """Lever "decide": after a call came back, a pick of that same tool (seen on the 1.5B model: the
    same call made again, ls after ls, where cd came next) is asked once more among the others;
    the second pick is forced, or "answer" is written in words."""
    script = [call("get_time", {"city": "Paris"})] if then == "get_time" else [text("It is sunny in Paris.")]
    with running_lane(tmp_path, script, decision=_stuck_on_weather(then)) as lane:
        response = lane.chat(messages=ASK + _answered("c0"), tools=[WEATHER, TIME]).json()
        first, second = [d["response_format"]["json_schema"]["schema"]["properties"]["next"]["enum"]
                         for d in lane.model.decide_requests]
        assert "get_weather" in first and "get_weather" not in second and {"get_time", "answer"} <= set(second)
        # asked whether "sunny" reports a failure (lever "failed"): it does not
        asked = [p for p, _ in lane.rows("SELECT purpose, content FROM lane_calls")]
        assert asked[:4] == ["decide", "failed", "failed", "decide"]  # "did it fail?", "did it do its job?"
        if then == "get_time":
            assert only_call(response)[:2] == ("get_time", {"city": "Paris"})
        else:  # no second look at the tool just answered: it was the pick already
            assert response["choices"][0]["message"]["content"] == "It is sunny in Paris."
            assert lane.model.requests[0].get("tools") in (None, [])
        assert lane.rows("SELECT tool_name FROM returned_calls") == ([("get_time",)] if then == "get_time" else [])


def test_a_tool_whose_call_failed_is_called_again_with_the_error_in_view(tmp_path):
    """Lever "failed": the decision picks the tool just answered and the model reads its result
    as a failure: that tool is forced again, not asked among the others (seen with Hermes:
    `memory` without its `action`, "Unknown action 'None'", then "I don't have a tool named
    'None'"). A result it does not read as a failure keeps the old way (the test above)."""
    error = '{"error": "Unknown city \'Pariss\'", "success": false}'
    with running_lane(tmp_path, [call("get_weather", {"city": "Paris"})], decision=_stuck_on_weather("answer")) as lane:
        lane.model.failed = 0.9
        response = lane.chat(messages=ASK + _answered("c0", '{"city": "Pariss"}', error), tools=[WEATHER, TIME]).json()
        assert only_call(response)[:2] == ("get_weather", {"city": "Paris"})
        assert len(lane.model.decide_requests) == 1
        failed, worked = lane.model.failed_requests
        assert all("Unknown city" in asked["messages"][-1]["content"] for asked in (failed, worked))
        assert [c for c, in lane.rows("SELECT content FROM lane_calls WHERE purpose = 'failed'")][0] == \
            "get_weather: yes 0.90"


def test_a_tool_called_twice_for_the_message_is_not_retried_again(tmp_path):
    """Seen with Hermes: memory retried, its "Entry already exists" read as a failure, retried
    again, round after round. Twice for one user message, the tool is asked among the others."""
    error = '{"error": "Unknown city", "success": false}'
    twice = ASK + _answered("c0", '{"city": "Pariss"}', error) + _answered("c1", '{"city": "Paaris"}', error)
    with running_lane(tmp_path, [text("I could not get the weather.")], decision=_stuck_on_weather("answer")) as lane:
        lane.model.failed = 0.9
        response = lane.chat(messages=twice, tools=[WEATHER, TIME]).json()
        assert response["choices"][0]["message"]["content"] == "I could not get the weather."
        assert lane.model.failed_requests == [] and len(lane.model.decide_requests) == 2


def test_the_retry_of_a_failed_call_must_say_the_choices_it_left_out(tmp_path):
    """Hermes's `memory` requires only `target`; sent without its optional `action` (an enum) it
    fails. Its retry is decoded with `action` required too; free text stays optional."""
    memory = {"type": "function", "function": {"name": "memory", "description": "Save a note.", "parameters": {
        "type": "object", "required": ["target"], "properties": {
            "action": {"type": "string", "enum": ["add", "replace", "remove"]},
            "target": {"type": "string", "enum": ["memory", "user"]},
            "content": {"type": "string"}, "old_text": {"type": "string"}}}}}
    sent = [{"role": "user", "content": "remember that my codename is TUNDRA"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c0", "type": "function", "function": {
                "name": "memory", "arguments": '{"target": "user", "content": "TUNDRA"}'}}]},
            {"role": "tool", "tool_call_id": "c0", "content": "Unknown action 'None'. Use: add, replace, remove"}]
    def decide(body):
        return Reply(content=json.dumps({"next": "memory"}))
    retry = call("memory", {"action": "add", "target": "user", "content": "TUNDRA"})
    with running_lane(tmp_path, [retry], decision=decide) as lane:
        lane.model.failed = 0.9
        response = lane.chat(messages=sent, tools=[memory]).json()
        assert only_call(response)[1] == {"action": "add", "target": "user", "content": "TUNDRA"}
        [forced] = [r for r in lane.model.requests if r.get("tools")]
        [schema] = [t["function"]["parameters"] for t in forced["tools"] if t["function"]["name"] == "memory"]
        assert schema["required"] == ["target", "action"]


def test_a_forced_call_says_every_mode_its_schema_leaves_optional_without_a_default(tmp_path):
    """Seen with Hermes: `memory` was called without `action` at every step (its schema requires
    only `target`) and failed each time. A forced call's grammar requires an optional enum with no
    default; one with a default, and free text, stay optional."""
    memory = {"type": "function", "function": {"name": "memory", "description": "Save a note.", "parameters": {
        "type": "object", "required": ["target"], "properties": {
            "action": {"type": "string", "enum": ["add", "replace", "remove"]},
            "target": {"type": "string", "enum": ["memory", "user"]},
            "scope": {"type": "string", "enum": ["session", "global"], "default": "global"},
            "content": {"type": "string"}}}}}
    made = call("memory", {"action": "add", "target": "user", "content": "TUNDRA"})
    with running_lane(tmp_path, [made], decision=lambda body: Reply(content=json.dumps({"next": "memory"}))) as lane:
        response = lane.chat(messages=[{"role": "user", "content": "remember that my codename is TUNDRA"}],
                             tools=[memory, WEATHER]).json()
        assert only_call(response)[0] == "memory"
        [forced] = [r for r in lane.model.requests if r.get("tools")]
        [schema] = [t["function"]["parameters"] for t in forced["tools"] if t["function"]["name"] == "memory"]
        assert schema["required"] == ["target", "action"]
        assert memory["function"]["parameters"]["required"] == ["target"]  # the client's schema is not changed


def test_the_other_tool_picked_after_a_result_is_called_only_when_it_fits(tmp_path):
    """A real action in someone else's agent: the second pick is looked at again (lever "fit"),
    and a tool the model does not think fits is not called (seen with Claude Code: Write ran,
    then ScheduleWakeup was picked among the others and run)."""
    with running_lane(tmp_path, [text("It is sunny in Paris.")], decision=_stuck_on_weather("get_time")) as lane:
        lane.model.fit = 0.05
        response = lane.chat(messages=ASK + _answered("c0"), tools=[WEATHER, TIME]).json()
        assert response["choices"][0]["message"]["content"] == "It is sunny in Paris."
        assert "Function: get_time" in lane.model.fit_requests[0]["messages"][-1]["content"]
        assert lane.rows("SELECT count(*) FROM returned_calls") == [(0,)]


def _many_tools(count):
    return [{"type": "function", "function": {
        "name": f"service_{i}_action", "description": f"Runs action number {i} of an unrelated service "
                                                      "with a long description to take room." * 3,
        "parameters": {"type": "object", "properties": {"value": {"type": "string"}}}}}
        for i in range(count)]


def test_many_client_tools_are_reached_through_search_and_returned_as_the_real_tool(tmp_path):
    tools = _many_tools(60) + [WEATHER]
    # The decision (promotion put get_weather in the tools block) forces get_weather; the forced
    # call comes through the bridge with a wrong argument, and after the error the model searches.
    script = [call("tool_call", {"name": "get_weather", "arguments": {"town": "Paris"}}),
              call("tool_search", {"query": "weather for a city"}),
              call("tool_call", {"name": "get_weather", "arguments": {"city": "Paris"}}),
              text("Sunny in Paris.")]
    with running_lane(tmp_path, script) as lane:
        first = lane.chat(messages=ASK, tools=tools)
        name, arguments, call_id = only_call(first.json())
        assert (name, arguments) == ("get_weather", {"city": "Paris"})
        decision = lane.model.decide_requests[0]
        assert "get_weather" in decision["response_format"]["json_schema"]["schema"]["properties"]["next"]["enum"]
        # The forced call is offered its own tool alone; the open reply after its error, the bridges.
        assert offered(lane.model.requests[0]) == ["get_weather"]
        assert forced_name(lane.model.requests[0]) == "get_weather"
        seen = offered(lane.model.requests[1])
        assert seen[:3] == ["tool_search", "tool_describe", "tool_call"] and len(seen) < 10
        # The search ran inside the lane; the model read its answer.
        assert "get_weather" in lane.model.requests[2]["messages"][-1]["content"]
        assert lane.rows("SELECT tool_name, status FROM tool_executions") == [
            ("get_weather", "error"), ("tool_search", "ok")]
        assert lane.rows("SELECT tool_name, via_bridge FROM returned_calls") == [("get_weather", 1)]

        history = ASK + [first.json()["choices"][0]["message"],
                         {"role": "tool", "tool_call_id": call_id, "content": "sunny"}]
        lane.chat(messages=history, tools=tools)
        # A tool the conversation used is offered directly from then on.
        assert "get_weather" in listed(lane.model.decide_requests[1])


def test_a_forced_call_carries_the_tools_in_use_and_its_own_not_the_bridges_or_promotion(tmp_path):
    """The bridges and promotion's picks serve an open reply; a call the decision (or a named
    tool_choice) forces can name no other tool, so with tool search on they are left out of its
    tools block (prompt tokens the model would read for nothing), while the tools the
    conversation called stay; an open reply still gets them all, and without tool search a forced
    call sees every tool."""
    tools = _many_tools(60) + [WEATHER, TIME]
    with running_lane(tmp_path, [call("get_time", {"city": "Paris"})]) as lane:
        lane.chat(messages=ASK, tools=tools)
        assert offered(lane.model.requests[0]) == ["get_time"]
    with running_lane(tmp_path / "named", [call("get_weather", {"city": "Paris"})]) as lane:
        lane.chat(messages=ASK, tools=tools, tool_choice={"type": "function", "function": {"name": "get_weather"}})
        assert offered(lane.model.requests[0]) == ["get_weather"]
    with running_lane(tmp_path / "used", [call("get_weather", {"city": "Paris"})]) as lane:
        used = {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_time", "arguments": '{"city": "Oslo"}'}}]}
        lane.chat(messages=[{"role": "user", "content": "Time in Oslo?"}, used,
                            {"role": "tool", "tool_call_id": "c1", "content": "09:00"}, *ASK], tools=tools)
        assert offered(lane.model.requests[0]) == ["get_time", "get_weather"]
    with running_lane(tmp_path / "open", [call("get_time", {"city": "Paris"})]) as lane:
        lane.chat(messages=ASK, tools=tools, tool_choice="required")
        seen = offered(lane.model.requests[0])
        assert seen[:3] == ["tool_search", "tool_describe", "tool_call"]
        assert "get_weather" in seen  # promoted for "weather in Paris"
    with running_lane(tmp_path / "off", [call("get_time", {"city": "Paris"})], proxy_tool_search=False) as lane:
        lane.chat(messages=ASK, tools=tools[-8:])
        assert len(offered(lane.model.requests[0])) == 8


def test_two_thousand_tools_are_served_through_search(tmp_path):
    with running_lane(tmp_path, [call("get_weather", {"city": "Paris"})]) as lane:
        response = lane.chat(messages=ASK, tools=_many_tools(1999) + [WEATHER])
        assert response.status_code == 200, response.text
        assert len(offered(lane.model.requests[0])) < 10


def test_two_thousand_tools_without_search_are_a_clear_400(tmp_path):
    with running_lane(tmp_path, [call("get_weather", {"city": "Paris"})]) as lane:
        tools = _many_tools(1999) + [WEATHER]
        response = lane.chat(messages=ASK, tools=tools, headers={"X-Lane-Tools": "full"})
        assert response.status_code == 400, response.text
        assert response.json()["error"]["code"] == "tools_too_large"
        streamed = lane.chat(messages=ASK, tools=tools, headers={"X-Lane-Tools": "full"}, stream=True)
        errors = [e for e in sse_events(streamed.text) if isinstance(e, dict) and "error" in e]
        assert [e["error"]["code"] for e in errors] == ["tools_too_large"]
        assert lane.model.requests == []


def test_a_client_tool_named_like_a_bridge_is_the_clients_own(tmp_path):
    own = {"type": "function", "function": {"name": "tool_search", "description": "Search my tools.",
                                            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}
    with running_lane(tmp_path, [call("tool_search", {"q": "x"})]) as lane:
        reply = lane.chat(messages=[{"role": "user", "content": "search my tools for x"}],
                          tools=_many_tools(60) + [own]).json()
        assert only_call(reply)[:2] == ("tool_search", {"q": "x"})
        assert "tool_call" not in offered(lane.model.requests[0])


def test_missing_parameters_are_repaired_to_an_empty_object(tmp_path):
    bare = {"type": "function", "function": {"name": "ping"}}
    with running_lane(tmp_path, [call("ping", {})]) as lane:
        reply = lane.chat(messages=ASK, tools=[bare]).json()
        assert only_call(reply)[:2] == ("ping", {})
        assert lane.model.requests[0]["tools"][0]["function"]["parameters"] == {"type": "object",
                                                                                "properties": {}}


def test_too_many_tools_is_a_clear_400(tmp_path):
    with running_lane(tmp_path, [], proxy_max_tools=10) as lane:
        response = lane.chat(messages=ASK, tools=_many_tools(11))
        assert response.status_code == 400
        assert response.json()["error"]["code"] == "too_many_tools"
        assert lane.model.requests == []


def test_the_lanes_own_tools_never_run_for_a_client_by_default(tmp_path):
    with running_lane(tmp_path, [call("add", {"a": 1, "b": 2}), text("Done.")]) as lane:
        reply = lane.chat(messages=ASK, tools=[WEATHER]).json()
        assert reply["choices"][0]["message"]["content"] == "Done."
        assert listed(lane.model.decide_requests[0]) == ["get_weather"]
        assert lane.rows("SELECT tool_name, status FROM tool_executions") == [("add", "refused")]
        assert lane.rows("SELECT count(*) FROM returned_calls") == [(0,)]


def test_the_lanes_own_tools_run_inside_the_lane_where_configured(tmp_path):
    script = [call("add", {"a": 1, "b": 2}), call("get_weather", {"city": "Paris"})]
    with running_lane(tmp_path, script, proxy_lane_tools=True) as lane:
        reply = lane.chat(messages=ASK, tools=[WEATHER]).json()
        assert only_call(reply)[0] == "get_weather"
        assert offered(lane.model.requests[0]) == ["get_weather", "add", "ask_user"]
        assert lane.model.requests[1]["messages"][-1] == {
            "role": "tool", "tool_call_id": lane.model.requests[1]["messages"][-2]["tool_calls"][0]["id"],
            "content": "3"}
        assert lane.rows("SELECT tool_name, status FROM tool_executions") == [("add", "ok")]
        assert reply["usage"]["lane"]["tools_executed"] == ["add"]


def test_a_lane_tool_s_precondition_holds_in_proxy_mode(tmp_path):
    script = [call("calculate", {"expression": "8"}), call("calculate", {"expression": "18 * 3"}),
              call("get_weather", {"city": "Paris"})]
    registry = Registry([*TOOLS, *CALCULATOR])
    with running_lane(tmp_path, script, registry=registry, proxy_lane_tools=True,
                      core_tools=("add", "calculate")) as lane:
        asked = [{"role": "user", "content": "How many legs does a spider have? And what is 18 times 3?"}]
        reply = lane.chat(messages=asked, tools=[WEATHER]).json()
        assert only_call(reply)[0] == "get_weather"
        assert lane.rows("SELECT tool_name, status, coalesce(result, error) FROM tool_executions") == [
            ("calculate", "refused", "not run: no number of '8' is one the user or a tool gave, so there is "
                                     "nothing to compute; answer from what you know"),
            ("calculate", "ok", "54")]


def test_client_disconnect_cancels_a_proxy_turn(tmp_path):
    with running_lane(tmp_path, [Reply(hang=True)], llm_timeout_s=60) as lane:
        with pytest.raises(httpx.ReadTimeout):
            lane.client.post("/v1/chat/completions", timeout=0.5,
                             json={"messages": ASK, "tools": [WEATHER]})
        assert wait_for(lambda: lane.model.disconnects >= 1), "upstream call outlived its client"


def test_generation_and_iterations_are_capped(tmp_path):
    search = call("tool_search", {"query": "weather"})
    with running_lane(tmp_path, lambda body: search, max_tokens=256, max_iterations=3) as lane:
        reply = lane.chat(messages=ASK, tools=_many_tools(60) + [WEATHER], max_tokens=100_000).json()
        assert [r["max_tokens"] for r in lane.model.requests] == [256] * 3
        # The same search a third time ends the turn; its answer says what ran, and is no call.
        assert reply["choices"][0]["finish_reason"] in ("stop", "length")
        assert "tool_calls" not in reply["choices"][0]["message"]
        # the decision ("answer": the script is no list to follow), the second look and three replies
        assert reply["usage"]["lane"]["model_calls"] == 5
        assert lane.model.decide_requests[0]["max_tokens"] < 256


def test_the_offered_tools_only_grow_at_the_end_within_a_users_request(tmp_path):
    tools = _many_tools(60) + [WEATHER, TIME]
    script = [call("tool_call", {"name": "get_time", "arguments": {"city": "Paris"}}),
              call("get_weather", {"city": "Paris"}), text("Noon and sunny."), text("Bye.")]
    with running_lane(tmp_path, script) as lane:
        ask = [{"role": "user", "content": "What is the weather in Paris, and the local time there?"}]
        first = lane.chat(messages=ask, tools=tools).json()["choices"][0]["message"]
        history = ask + [first, {"role": "tool", "tool_call_id": first["tool_calls"][0]["id"],
                                 "content": "12:00"}]
        second = lane.chat(messages=history, tools=tools).json()["choices"][0]["message"]
        history += [second, {"role": "tool", "tool_call_id": second["tool_calls"][0]["id"],
                             "content": "sunny"}]
        lane.chat(messages=history, tools=tools)
        lane.chat(messages=history + [{"role": "assistant", "content": "Noon and sunny."},
                                      {"role": "user", "content": "Thanks!"}], tools=tools)
        first, second = [offered(r) for r in lane.model.requests if r.get("tools")]
        # The hidden tool the first decision chose is offered for its call; the next call's
        # tools block begins as this one did (the prompt cache keeps it) and grew at its end.
        assert first == ["get_time"]
        assert second == ["get_time", "get_weather"]
        # A new user message: what was called before it is listed, described, in the decision.
        assert {"get_time", "get_weather"} <= set(listed(lane.model.decide_requests[-1]))


def test_the_decision_lists_the_best_match_first_and_hidden_tools_by_name(tmp_path):
    """A small model leans towards the first lines it reads: the tools that match the request
    come first. With tool search on, tools neither offered nor among search's best are listed by
    name alone, and the grammar still admits every listed name."""
    tools = _many_tools(60) + [WEATHER, TIME]
    with running_lane(tmp_path, [text("Noon.")]) as lane:
        lane.chat(messages=[{"role": "user", "content": "What is the local time in Lima?"}], tools=tools)
        [decision] = lane.model.decide_requests
        lines = decision["messages"][0]["content"].split("\n")
        tool_lines = [line for line in lines if line.startswith("- ")]
        assert tool_lines[0] == "- get_time: Current local time in a city."
        # Worded for a client's tools: not the agent's "this computer" and its tools' jobs.
        assert "computer" not in decision["messages"][0]["content"]
        # ... and the name asked for by a slot no tool name starts with, "answer" first (decide.CLIENT_REPLY)
        assert decision["messages"][-1]["content"].endswith('{"next": X}, where X is "answer" or one tool\'s name.')
        assert "- service_59_action" in tool_lines  # hidden, not among search's best: its name only
        choices = decision["response_format"]["json_schema"]["schema"]["properties"]["next"]["enum"]
        assert set(choices) == {line[2:].split(":")[0] for line in tool_lines} | {"answer"}
    with running_lane(tmp_path / "off", [text("Noon.")], proxy_tool_search=False) as lane:
        lane.chat(messages=[{"role": "user", "content": "What is the local time in Lima?"}], tools=tools[-8:])
        [decision] = lane.model.decide_requests
        # Search off: every tool described, the best match still first.
        assert listed(decision)[0] == "get_time" and len(listed(decision)) == 8


def test_a_fenced_call_that_does_not_fit_is_corrected_not_answered(tmp_path):
    fenced = text('```json\n{"name": "get_time", "arguments": {"town": "Paris"}}\n```')
    with running_lane(tmp_path, [fenced, call("get_time", {"city": "Paris"})]) as lane:
        reply = lane.chat(messages=ASK, tools=[TIME]).json()
        assert only_call(reply)[:2] == ("get_time", {"city": "Paris"})
        assert lane.rows("SELECT tool_name, status, origin FROM tool_executions") == [
            ("get_time", "error", "content")]
        told = lane.model.requests[1]["messages"]
        assert told[-2]["content"] == "" and told[-2]["tool_calls"][0]["function"]["name"] == "get_time"
        assert "city" in told[-1]["content"]


def test_a_python_style_call_is_returned_as_a_tool_call(tmp_path):
    with running_lane(tmp_path, [text('[get_time(city="Paris", hours_ahead="2")]')]) as lane:
        reply = lane.chat(messages=ASK, tools=[TIME]).json()
        assert only_call(reply)[:2] == ("get_time", {"city": "Paris", "hours_ahead": 2})
        assert reply["choices"][0]["message"]["content"] is None


def test_the_lanes_own_answer_quotes_no_call(tmp_path):
    """A model that repeats a bad call until the breaker ends the turn: the answer the lane writes
    names what happened without the error's schema example (call-shaped JSON)."""
    with running_lane(tmp_path, lambda body: call("get_time", {"town": "Paris"})) as lane:
        reply = lane.chat(messages=ASK, tools=[TIME]).json()
        content = reply["choices"][0]["message"]["content"]
        assert "get_time (error)" in content
        assert not re.search(r'"name"\s*:|\w\(\s*\w+\s*=|<tool_call>', content), content
        assert lane.rows("SELECT count(*) FROM returned_calls") == [(0,)]


def test_a_session_header_keeps_one_stored_session_without_duplicates(tmp_path):
    with running_lane(tmp_path, [call("get_weather", {"city": "Paris"}), text("Sunny.")]) as lane:
        first = lane.chat(messages=ASK, tools=[WEATHER], session="px-1").json()["choices"][0]["message"]
        history = ASK + [first, {"role": "tool", "tool_call_id": first["tool_calls"][0]["id"],
                                 "content": "sunny"}]
        second = lane.chat(messages=history, tools=[WEATHER], session="px-1")
        assert second.headers["x-session-id"] == "px-1"
        assert lane.history("px-1") == [("user", "What is the weather in Paris?"), ("assistant", ""),
                                        ("tool", "sunny"), ("assistant", "Sunny.")]
        assert lane.rows("SELECT result FROM returned_calls WHERE session_id = 'px-1'") == [("sunny",)]


def test_an_empty_reply_is_asked_for_an_answer_once(tmp_path):
    with running_lane(tmp_path, [text(""), text("Sunny."), text(""), text("")]) as lane:
        history = ASK + _answered("c0")
        assert lane.chat(messages=history, tools=[WEATHER]).json()["choices"][0]["message"]["content"] == "Sunny."
        assert "Your reply was empty" in lane.model.requests[1]["messages"][-1]["content"]
        # Empty again after the note: the lane answers itself with what the client's tool returned.
        again = lane.chat(messages=history, tools=[WEATHER]).json()["choices"][0]["message"]["content"]
        assert again == ("The model gave no final answer.\nWhat your tools returned for this request:\n"
                         "- get_weather: sunny")
        # The store's assistant rows are what the client got; the empty replies were held back.
        assert lane.rows("SELECT content FROM messages WHERE role = 'assistant' AND tool_calls IS NULL"
                         " ORDER BY id") == [("Sunny.",), (again,)]
        assert lane.rows("SELECT content, reason, prompt_tokens > 0 FROM lane_calls WHERE purpose = 'held'"
                         " ORDER BY id") == [("", "the model gave no answer", 1)] * 3


def test_a_reply_reporting_what_no_call_did_is_stored_as_the_client_got_it(tmp_path):
    """The lane adds a line to a reply that reports an action nothing did (the reading says so,
    here scripted): the stored answer is that, not the model's words alone beside another row."""
    named = "Sunny in Paris. I have emailed you the forecast."
    with running_lane(tmp_path, [text(named)], decision=Reply(content='{"next": "answer"}'),
                      reading=text('{"done": ["get_weather", "another action"]}')) as lane:
        response = lane.chat(messages=ASK + _answered("c0"), tools=[WEATHER, TIME])
        got = response.json()["choices"][0]["message"]["content"]
        assert got == (f"{named}\n\n(The lane's record: nothing was sent, booked, bought, paid or contacted; "
                       "no tool here does that.)")
        session = response.headers["x-session-id"]
        assert lane.rows("SELECT content, prompt_tokens > 0 FROM messages WHERE session_id = ?"
                         " AND role = 'assistant' AND tool_calls IS NULL", session) == [(got, 1)]
        assert lane.rows("SELECT count(*) FROM lane_calls WHERE purpose = 'held'") == [(0,)]
        [read] = lane.model.reading_requests  # over the client's own tool names
        assert read["response_format"]["json_schema"]["schema"]["properties"]["done"]["items"]["enum"] == [
            "get_weather", "get_time", "another action"]


def test_an_open_reply_is_capped_below_the_lanes_own_cap(tmp_path):
    """A reply the decision did not force, here under tool_choice "required", is held to 1,024
    tokens whatever the client asks: on two cores the lane's own cap (4,096) outlasts a timeout."""
    with running_lane(tmp_path, [call("get_weather", {"city": "Paris"})], max_tokens=4096) as lane:
        reply = lane.chat(messages=ASK, tools=[WEATHER], tool_choice="required", max_tokens=100_000).json()
        assert only_call(reply)[0] == "get_weather"
        assert lane.model.requests[0]["max_tokens"] == 1024


def test_a_request_no_client_tool_fits_is_answered_in_words(tmp_path):
    """The decision says "answer": the reply is written with no tools offered, and the client
    gets words, not a call; the decision is one of the lane's own calls in the store."""
    script = [text("A CPU runs a few tasks fast; a GPU runs many small ones at once.")]
    with running_lane(tmp_path, script, decision=Reply(content='{"next": "answer"}')) as lane:
        ask = [{"role": "user", "content": "What is the difference between a CPU and a GPU?"}]
        reply = lane.chat(messages=ask, tools=[WEATHER, TIME]).json()["choices"][0]
        assert reply["finish_reason"] == "stop" and "tool_calls" not in reply["message"]
        assert reply["message"]["content"].startswith("A CPU runs")
        assert listed(lane.model.decide_requests[0]) == ["get_weather", "get_time"]
        assert lane.model.requests[0].get("tools") in (None, [])
        assert lane.model.requests[0]["max_tokens"] == 1024  # a reply in words is capped
        assert lane.rows("SELECT purpose, content FROM lane_calls") == [
            ("decide", '{"next": "answer"}'), ("fit", "get_weather: yes 0.05"), ("declined", "yes 0.05"),
            ("read", '{"done": []}')]
        [fit] = lane.model.fit_requests  # asked about the best match alone, for one token's logprobs
        assert "Function: get_weather" in fit["messages"][-1]["content"] and "get_time" not in str(fit)
        assert fit["max_tokens"] == 1 and fit["logprobs"] is True


@pytest.mark.parametrize("probability, called", [(0.9, True), (0.8, True), (0.6, False)])
def test_an_answer_decided_where_the_best_match_fits_calls_it(tmp_path, probability, called):
    """Lever "fit": the decision answers in words a request the one tool offered was made for (a
    key signature, with music_theory_key_signature offered); the model, asked about that tool
    alone, gives it at least decide.FITS: the client gets the call, not the model's own answer."""
    key = {"type": "function", "function": {
        "name": "music_theory_key_signature", "description": "Return the key signature of a major or minor scale.",
        "parameters": {"type": "object", "properties": {"key": {"type": "string"}, "scale_type": {"type": "string"}},
                       "required": ["key"]}}}
    script = [call("music_theory_key_signature", {"key": "C#", "scale_type": "major"}) if called
              else text("C# major has seven sharps.")]
    with running_lane(tmp_path, script, decision=Reply(content='{"next": "answer"}')) as lane:
        lane.model.fit = probability
        ask = [{"role": "user", "content": "What key signature does C# major have?"}]
        response = lane.chat(messages=ask, tools=[key]).json()
        reply = response["choices"][0]
        purposes = [purpose for purpose, _ in lane.rows("SELECT purpose, content FROM lane_calls")]
        assert purposes[:2] == ["decide", "fit"]
        if called:
            assert reply["finish_reason"] == "tool_calls"
            assert only_call(response)[:2] == ("music_theory_key_signature", {"key": "C#", "scale_type": "major"})
            assert forced_name(lane.model.requests[0]) == "music_theory_key_signature"
        else:
            assert "tool_calls" not in reply["message"] and reply["message"]["content"].startswith("C# major")
            assert lane.model.requests[0].get("tools") in (None, [])


def test_a_hidden_client_tool_the_decision_picks_is_offered_for_the_forced_call(tmp_path):
    def hidden_pick(body):
        shown = set(listed(body))
        choices = body["response_format"]["json_schema"]["schema"]["properties"]["next"]["enum"]
        return Reply(content=json.dumps({"next": next(c for c in choices if c not in shown and c != "answer")}))

    tools = _many_tools(60) + [WEATHER]
    ask = [{"role": "user", "content": "Run the action of an unrelated service with a long description, value v"}]
    with running_lane(tmp_path, lambda body: call(forced_name(body), {"value": "v"}),
                      decision=hidden_pick) as lane:
        reply = lane.chat(messages=ask, tools=tools).json()
        name, arguments, _ = only_call(reply)
        assert name.startswith("service_") and arguments == {"value": "v"}
        assert f"\n- {name}\n" in lane.model.decide_requests[0]["messages"][0]["content"]  # by name alone
        forced_call = lane.model.requests[0]
        seen = offered(forced_call)
        # offered by its own schema (not forced through the bridge)
        assert seen == [name]
        assert name not in listed(lane.model.decide_requests[0])
        assert forced_name(forced_call) == name
        assert lane.rows("SELECT tool_name, via_bridge FROM returned_calls") == [(name, 0)]


def listed(decision: dict) -> list[str]:
    """The tools a decision question lists in its first message ("- name: description")."""
    return re.findall(r"^- ([\w.-]+): ", decision["messages"][0]["content"], re.MULTILINE)


def _long_history(exchanges: int) -> list[dict]:
    history = [{"role": "system", "content": "You are a weather assistant."}]
    for i in range(exchanges):
        history += [{"role": "user", "content": f"Question {i}: " + "tell me about the weather " * 40},
                    {"role": "assistant", "content": f"Answer {i}: " + "it was sunny " * 40}]
    return history + ASK


def test_a_history_beyond_the_context_loses_its_oldest_exchanges_not_the_request(tmp_path):
    with running_lane(tmp_path, [call("get_weather", {"city": "Paris"})], context_tokens=4096) as lane:
        response = lane.chat(messages=_long_history(40), tools=[WEATHER])
        assert response.status_code == 200, response.text
        assert only_call(response.json())[:2] == ("get_weather", {"city": "Paris"})
        sent = lane.model.requests[0]["messages"]
        assert sent[0]["content"] == "You are a weather assistant." and sent[-1] == ASK[0]
        assert "Question 0:" not in json.dumps(sent) and "Question 39:" in json.dumps(sent)
        assert sent[1]["role"] == "user"  # whole exchanges went, never half of one
        notes = lane.rows("SELECT content FROM messages WHERE lane_note = 1")
        assert any("not shown the oldest" in n for (n,) in notes)
        # Nothing the client sent is lost from the store.
        assert lane.rows("SELECT count(*) FROM messages WHERE content LIKE 'Question 0:%'") == [(1,)]


def test_a_latest_message_beyond_the_context_is_a_clear_400(tmp_path):
    with running_lane(tmp_path, [], context_tokens=2048) as lane:
        huge = [{"role": "user", "content": "weather " * 4000}]
        response = lane.chat(messages=huge, tools=[WEATHER])
        assert response.status_code == 400
        assert response.json()["error"]["code"] == "context_length_exceeded"
        assert lane.model.requests == []


def test_the_decision_reads_what_ran_since_the_request_and_earlier_turns(tmp_path):
    with running_lane(tmp_path, [text("It is sunny in Paris.")]) as lane:
        history = [{"role": "user", "content": "Hi, I am planning a trip."},
                   {"role": "assistant", "content": "Nice! Where to?"},
                   *ASK,
                   {"role": "assistant", "content": "", "tool_calls": [
                       {"id": "c1", "type": "function", "function": {"name": "get_weather",
                                                                     "arguments": '{"city": "Paris"}'}}]},
                   {"role": "tool", "tool_call_id": "c1", "content": "sunny, 21 C"}]
        reply = lane.chat(messages=history, tools=[WEATHER, TIME]).json()["choices"][0]
        assert reply["message"]["content"] == "It is sunny in Paris."
        question = lane.model.decide_requests[0]["messages"][-1]["content"]
        assert "- The user said: Hi, I am planning a trip." in question
        assert "The user's message: What is the weather in Paris?" in question
        assert "- get_weather (ok): sunny, 21 C" in question


def test_with_search_on_the_decision_still_names_every_tool_of_a_short_list(tmp_path):
    """Tool search hides most of 20 client tools from the tools block; the decision names all of
    them (search's best with their descriptions), so a tool search missed can still be chosen."""
    tools = [{"type": "function", "function": {
        "name": f"tool_{i}", "description": f"Does job {i} with a description long enough to take room. " * 4,
        "parameters": {"type": "object", "properties": {"value": {"type": "string"}}}}} for i in range(20)]
    with running_lane(tmp_path, [text("Nothing to do.")], context_tokens=8192,
                      decision=Reply(content='{"next": "answer"}')) as lane:
        lane.chat(messages=ASK, tools=tools)
        question = lane.model.decide_requests[0]["messages"][0]["content"]
        named = re.findall(r"^- ([\w.-]+)", question, re.MULTILINE)
        assert sorted(named) == sorted(f"tool_{i}" for i in range(20))
        assert 0 < len(listed(lane.model.decide_requests[0])) < 20
