"""Proxy answers that help (issue 55, item 8): a refusal or a how-to where a client tool does the
job is not the answer; after a tool result the answer is built from it unless the decision picks
the step the request names next; the lane's bridges are never named to a client; and no
correction makes a client run a call its user did not ask for."""

import json
import re

import pytest

from tests.fakes.scripted_model import Reply, call, literal_reading, text
from tests.integration.test_api_chat import running_lane
from tests.integration.test_proxy import CP, TIME, WEATHER, _many_tools, only_call

ANSWER = Reply(content='{"next": "answer"}')
COPY_ES = [{"role": "user", "content": "Pon una copia de report.txt en la carpeta archive."}]
TERMINAL = {"type": "function", "function": {
    "name": "terminal", "description": "Run a shell command and return its output.",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}
# Hermes's memory tool: `action` is required.
MEMORY = {"type": "function", "function": {
    "name": "memory", "description": "Save a note to memory for later.",
    "parameters": {"type": "object", "properties": {
        "action": {"type": "string", "enum": ["add", "replace", "remove"]}, "content": {"type": "string"}},
        "required": ["action", "content"]}}}


def decisions(*picks):
    """The decision question answered with each pick in turn (then "answer")."""
    asked = []

    def decide(body):
        asked.append(body)
        pick = picks[len(asked) - 1] if len(asked) <= len(picks) else "answer"
        return Reply(content=json.dumps({"next": pick}))
    return decide


def ran(call_id, name, arguments, result):
    return [{"role": "assistant", "content": None, "tool_calls": [{
        "id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]},
        {"role": "tool", "tool_call_id": call_id, "content": result}]


def with_tools_a_call(made, words):
    """A model that calls where it is offered tools and answers in words where it is not."""
    return lambda body: made if body.get("tools") else text(words)


def purposes(lane):
    return [purpose for purpose, in lane.rows("SELECT purpose FROM lane_calls ORDER BY id")]


# (a) a refusal or a how-to where a client tool fits

def test_a_refusal_where_a_client_tool_does_it_asks_the_decision_again_and_calls_it(tmp_path):
    refusal = "Lo siento, no puedo copiar archivos; hazlo tú con el explorador de archivos."
    made = call("cp", {"source": "report.txt", "destination": "archive/"})
    with running_lane(tmp_path, [text(refusal), made], decision=decisions("answer", "cp")) as lane:
        lane.model.declines = 0.9
        response = lane.chat(messages=COPY_ES, tools=[CP, WEATHER]).json()
        assert only_call(response)[:2] == ("cp", {"source": "report.txt", "destination": "archive/"})
        # The decision asked again saw the refusal; the refusal is held back, not a message.
        assert refusal in lane.model.decide_requests[1]["messages"][-1]["content"]
        # (the Spanish message is ranked in English first: lever "english")
        assert purposes(lane) == ["english", "decide", "fit", "declined", "decide", "held"]
        assert lane.rows("SELECT count(*) FROM messages WHERE content = ?", refusal) == [(0,)]


def test_a_refusal_no_client_tool_does_is_the_answer(tmp_path):
    """Asked again, the decision says "answer" (nothing fits): the refusal is passed on."""
    refusal = "I cannot book flights: none of my tools does that."
    with running_lane(tmp_path, [text(refusal)], decision=ANSWER) as lane:
        lane.model.declines = 0.9
        reply = lane.chat(messages=[{"role": "user", "content": "Book me a flight to Oslo."}],
                          tools=[WEATHER, TIME]).json()
        assert reply["choices"][0]["message"]["content"] == refusal
        assert len(lane.model.decide_requests) == 2


def test_an_answer_that_does_what_was_asked_is_not_asked_again(tmp_path):
    answer = "A CPU runs a few tasks fast; a GPU runs many small ones at once."
    with running_lane(tmp_path, [text(answer)], decision=ANSWER) as lane:
        reply = lane.chat(messages=[{"role": "user", "content": "CPU or GPU: what's the difference?"}],
                          tools=[WEATHER, TIME]).json()
        assert reply["choices"][0]["message"]["content"] == answer
        assert len(lane.model.decide_requests) == 1 and len(lane.model.decline_requests) == 1


# (b) after a tool result, the answer built from it, or the step the request names next

def test_after_a_result_the_answer_is_built_from_it_not_another_call(tmp_path):
    """The decision says "answer" once get_weather's result is in; the lane's second look (which
    a model would answer "fits" for get_time too) is not asked: no needless call."""
    ask = [{"role": "user", "content": "How warm is it in Paris?"}]
    history = ask + ran("w1", "get_weather", {"city": "Paris"}, "21 C, sunny")
    with running_lane(tmp_path, with_tools_a_call(call("get_time", {"city": "Paris"}), "21 C and sunny in Paris."),
                      decision=ANSWER) as lane:
        lane.model.fit = 0.95
        reply = lane.chat(messages=history, tools=[TIME, WEATHER]).json()["choices"][0]
        assert "tool_calls" not in reply["message"]
        assert lane.model.fit_requests == []


def test_an_answer_request_offers_no_tools_and_carries_no_note_on_finding_them(tmp_path):
    """Seen with Hermes on the 1.5B model: its transcript, with the lane's note on hidden tools
    joined to its system prompt, drew "I'm sorry, but I can't assist with that." after every result;
    replayed without the note, no refusal. A request that offers no tools carries no such note."""
    system = {"role": "system", "content": "You are Hermes Agent. Keep responses brief and natural."}
    ask = [system, {"role": "user", "content": "Please remember: my project codename is LANTERN-9574."}]
    history = ask + ran("m1", "memory", {"action": "add", "content": "codename LANTERN-9574"},
                        '{"success": true, "message": "Entry added."}')
    with running_lane(tmp_path, [text("I saved the codename LANTERN-9574.")], decision=ANSWER) as lane:
        reply = lane.chat(messages=history, tools=[TERMINAL, MEMORY, *_many_tools(20)]).json()["choices"][0]
        assert reply["message"]["content"] == "I saved the codename LANTERN-9574."
        sent = lane.model.requests[-1]
        assert not sent.get("tools") and sent["messages"][0]["content"] == system["content"]
        assert all("tool_search" not in (m.get("content") or "") for m in sent["messages"])
        assert [m["role"] for m in sent["messages"]][-1] == "tool"


@pytest.mark.parametrize("copy", ["terminal (ok): /dev/sda1 40G 12G", "(no answer)"])
def test_an_answer_that_copies_a_line_of_the_facts_is_held_back_for_the_lanes_account(tmp_path, copy):
    """Seen with Codex on the 1.5B model: the answer written from exec_command's result was the
    facts' own line, "exec_command (ok): Chunk ID: 7cc5a0 …", label and all; seen with Hermes,
    twice in one run: "(no answer)", how the model is shown an earlier answer that was the lane's
    account. Each is held back (lever "lane-note") and the client gets the lane's account of
    what its tools returned."""
    ask = [{"role": "user", "content": "How full is the disk?"}]
    history = ask + ran("t1", "terminal", {"command": "df -h"}, "/dev/sda1 40G 12G")
    with running_lane(tmp_path, [text(copy)], decision=ANSWER) as lane:
        reply = lane.chat(messages=history, tools=[TERMINAL, MEMORY]).json()["choices"][0]
        assert reply["message"]["content"] == ("The model gave no final answer.\nWhat your tools returned for "
                                               "this request:\n- terminal: /dev/sda1 40G 12G")
        assert lane.rows("SELECT content, reason FROM lane_calls WHERE purpose = 'held'") == [
            (copy, "it copied the lane's own note")]


@pytest.mark.parametrize(("answer", "passed_on"), [
    ("The command prints `e262f88f`.", False),  # the output reversed: not what it returned
    ("It printed 88f262de.", True),
    ("Der Befehl gibt `88f262de` aus.", True),  # any language: the value is what counts
    ("It printed 25 characters.", True),  # a number may be worked out from a result
])
def test_an_answer_after_a_result_stating_an_id_it_does_not_hold_is_held_back_for_the_lanes_account(
        tmp_path, answer, passed_on):
    """Seen with Claude Code on the 1.5B model: Bash printed `88f262de` and the answer reported
    `e262f88f`. An answer that states an identifier none of the results, the request or the
    calls holds is held back (lever "carry"); the client gets the lane's account, which quotes
    them. A number may be worked out from a result (Claude Code's line count "25" from a listing
    numbered from 0) and is passed on."""
    ask = [{"role": "user", "content": "Run `cat .token | rev` and tell me exactly what it prints."}]
    history = ask + ran("b1", "terminal", {"command": "cat .token | rev"}, "88f262de")
    with running_lane(tmp_path, [text(answer)], decision=ANSWER, reading=literal_reading) as lane:
        content = lane.chat(messages=history, tools=[TERMINAL, MEMORY]).json()["choices"][0]["message"]["content"]
        held = lane.rows("SELECT content, reason FROM lane_calls WHERE purpose = 'held'")
        if passed_on:
            assert content == answer and held == []
        else:
            assert content == ("The model gave no final answer.\nWhat your tools returned for this request:\n"
                               "- terminal: 88f262de")
            assert held == [(answer, "it states e262f88f, which no result holds")]


def test_a_request_naming_two_steps_gets_the_second_called_with_its_required_arguments(tmp_path):
    """"Run X, then save the output": after the terminal's result the decision picks memory; the
    call returned carries every argument its schema requires (a call without `action` is
    corrected inside the lane, the client never sees it)."""
    ask = [{"role": "user", "content": "Run `df -h`, then save the output to memory."}]
    history = ask + ran("t1", "terminal", {"command": "df -h"}, "/dev/sda1 40G 12G")
    script = [call("memory", {"content": "/dev/sda1 40G 12G"}),
              call("memory", {"action": "add", "content": "/dev/sda1 40G 12G"})]
    with running_lane(tmp_path, script, decision=decisions("memory")) as lane:
        reply = lane.chat(messages=history, tools=[TERMINAL, MEMORY], parallel_tool_calls=False).json()
        assert only_call(reply)[:2] == ("memory", {"action": "add", "content": "/dev/sda1 40G 12G"})
        assert "action" in lane.model.requests[1]["messages"][-1]["content"]  # told what was missing


def test_after_the_first_of_two_tasks_the_client_decision_reads_the_part_not_done_yet(tmp_path):
    """No tool name is a word of "… y luego guarda lo que imprima en las notas": the decision
    after the terminal's result is shown that part of the message, and its pick is called."""
    ask = [{"role": "user", "content": "Ejecuta `df -h` en la consola y luego guarda lo que imprima en las notas."}]
    history = ask + ran("t1", "terminal", {"command": "df -h"}, "/dev/sda1 40G 12G")
    with running_lane(tmp_path, [call("memory", {"action": "add", "content": "/dev/sda1 40G 12G"})],
                      decision=decisions("memory")) as lane:
        reply = lane.chat(messages=history, tools=[TERMINAL, MEMORY], parallel_tool_calls=False).json()
        assert only_call(reply)[:2] == ("memory", {"action": "add", "content": "/dev/sda1 40G 12G"})
        asked = lane.model.decide_requests[0]["messages"][-1]["content"]
        assert "The part of the message not done yet: guarda lo que imprima en las notas." in asked


def test_after_the_first_of_two_tasks_a_client_tool_the_rendering_names_is_called_with_no_question(tmp_path):
    ask = [{"role": "user", "content": "Ejecuta `df -h` en la consola y luego guarda lo que imprima en la memoria."}]
    history = ask + ran("t1", "terminal", {"command": "df -h"}, "/dev/sda1 40G 12G")
    with running_lane(tmp_path, [call("memory", {"action": "add", "content": "/dev/sda1 40G 12G"})]) as lane:
        lane.model.english = "Run `df -h` in the console and then save what it prints in memory."
        reply = lane.chat(messages=history, tools=[TERMINAL, MEMORY], parallel_tool_calls=False).json()
        assert only_call(reply)[:2] == ("memory", {"action": "add", "content": "/dev/sda1 40G 12G"})
        assert lane.model.decide_requests == []


def test_a_message_in_another_language_is_listed_for_the_decision_in_its_english_order(tmp_path):
    """Lever "english" in proxy mode: the client's tools are listed best match first for the
    model's English rendering of a German message (the index reads English), the decision reads
    the rendering beside the user's words, and the client's next request with the same message
    (after the result) is not rendered again."""
    german = "Muss ich heute Abend in Paris eine Jacke mitnehmen, bei dem Regen?"
    english = "Do I need to take a jacket in Paris tonight, with the rain? (the weather)"
    with running_lane(tmp_path, [call("get_weather", {"city": "Paris"}), text("Rain, 9 °C: yes.")],
                      decision=decisions("get_weather", "answer")) as lane:
        lane.model.english = english
        ask = [{"role": "user", "content": german}]
        reply = lane.chat(messages=ask, tools=[CP, TIME, WEATHER]).json()
        assert only_call(reply)[:2] == ("get_weather", {"city": "Paris"})
        first = lane.model.decide_requests[0]["messages"]
        assert first[0]["content"].index("- get_weather") < first[0]["content"].index("- cp")
        assert f"(In English: {english})" in first[-1]["content"]
        lane.chat(messages=ask + ran(only_call(reply)[2], "get_weather", {"city": "Paris"}, "rain, 9 C"),
                  tools=[CP, TIME, WEATHER])
        assert [german in r["messages"][-1]["content"] for r in lane.model.english_requests] == [True]
        assert purposes(lane).count("english") == 1


# (b2) a pick the model doubts, weighed against its next pick

WARM = [{"role": "user", "content": "How warm is it in Paris?"}]


def test_a_doubted_pick_is_swapped_for_the_tool_that_fits_better(tmp_path):
    """The decision echoes a word into get_time; asked about get_time alone the model doubts it
    (fit 0.05, under DOUBTS), so the listed tools are weighed too: get_weather fits (0.95) and is
    the call returned; cp (0.05) is not, nor is a reply in words (0.05); the decision is not asked
    again."""
    with running_lane(tmp_path, [call("get_weather", {"city": "Paris"})],
                      decision=decisions("get_time")) as lane:
        reply = lane.chat(messages=WARM, tools=[CP, TIME, WEATHER]).json()
        assert only_call(reply)[:2] == ("get_weather", {"city": "Paris"})
        assert purposes(lane)[:5] == ["decide", "doubt", "doubt", "doubt", "doubt"]
        asked = fitted(lane)
        assert asked[0] == "get_time" and sorted(asked[1:3]) == ["cp", "get_weather"]
        assert asked[3:] == ["reply_in_words"]
        assert len(lane.model.decide_requests) == 1


def fitted(lane):
    """The names the fit question was asked about, in order."""
    return [re.search(r"^Function: (\S+)", r["messages"][-1]["content"], re.MULTILINE).group(1)
            for r in lane.model.fit_requests]


def test_before_any_result_a_doubted_pick_loses_to_a_reply_in_words_that_fits_better(tmp_path):
    """A thank-you with a messaging tool among the client's: the decision picks post_message, the
    model doubts it (0.40) and fits the other tool no better (0.30), while a reply in words, asked
    about the same way, fits better (0.75): no call; the reply is in words and the client's tool
    never runs."""
    post = {"type": "function", "function": {
        "name": "post_message", "description": "Post a message to a chat channel.",
        "parameters": {"type": "object", "properties": {"channel": {"type": "string"}, "text": {"type": "string"}},
                       "required": ["channel", "text"]}}}
    thanks = [{"role": "user", "content": "Merci beaucoup, bon week-end !"}]
    with running_lane(tmp_path, with_tools_a_call(call("post_message", {"channel": "general", "text": "Merci"}),
                                                  "Avec plaisir, bon week-end !"),
                      decision=decisions("post_message")) as lane:
        lane.model.fit = {"post_message": 0.40, "get_weather": 0.30, "reply_in_words": 0.75}
        reply = lane.chat(messages=thanks, tools=[post, WEATHER]).json()["choices"][0]
        assert "tool_calls" not in reply["message"] and reply["finish_reason"] == "stop"
        assert reply["message"]["content"] == "Avec plaisir, bon week-end !"
        assert fitted(lane) == ["post_message", "get_weather", "reply_in_words"]


def test_a_reply_in_words_the_doubt_lever_chose_is_not_read_as_declining(tmp_path):
    """The reply in words that won the weighing is short and hesitant, and the model would read
    it as declining (0.9): it is the answer all the same; the decision is not asked again."""
    post = {"type": "function", "function": {
        "name": "post_message", "description": "Post a message to a chat channel.",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}}
    rude = [{"role": "user", "content": "Is it rude to post in the team channel on a Friday at five?"}]
    with running_lane(tmp_path, with_tools_a_call(call("post_message", {"text": "hi"}), "A bit, maybe."),
                      decision=decisions("post_message", "post_message")) as lane:
        lane.model.fit = {"post_message": 0.40, "reply_in_words": 0.75}
        lane.model.declines = 0.9
        reply = lane.chat(messages=rude, tools=[post, WEATHER]).json()["choices"][0]
        assert "tool_calls" not in reply["message"] and reply["message"]["content"] == "A bit, maybe."
        assert len(lane.model.decide_requests) == 1 and lane.model.decline_requests == []


def test_after_a_result_a_reply_in_words_is_not_weighed(tmp_path):
    """After a result the bar is decide.FITS, as before: a reply in words is not asked about."""
    history = WARM + ran("w1", "get_weather", {"city": "Paris"}, "21 C, sunny")
    made = call("cp", {"source": "a.txt", "destination": "b.txt"})
    with running_lane(tmp_path, with_tools_a_call(made, "21 C and sunny."), decision=decisions("get_time")) as lane:
        lane.model.fit = {"get_time": 0.5, "cp": 0.85, "reply_in_words": 0.99}
        reply = lane.chat(messages=history, tools=[CP, TIME, WEATHER]).json()
        assert only_call(reply)[0] == "cp" and "reply_in_words" not in fitted(lane)


def test_a_doubted_pick_stays_where_the_others_fit_worse(tmp_path):
    with running_lane(tmp_path, [call("get_weather", {"city": "Paris"})],
                      decision=decisions("get_weather")) as lane:
        lane.model.fit = {"get_weather": 0.5, "get_time": 0.2}
        reply = lane.chat(messages=WARM, tools=[TIME, WEATHER]).json()
        assert only_call(reply)[:2] == ("get_weather", {"city": "Paris"})
        assert len(lane.model.decide_requests) == 1 and fitted(lane) == ["get_weather", "get_time", "reply_in_words"]


def test_after_a_result_a_doubted_pick_with_nothing_trusted_left_is_the_answer(tmp_path):
    """get_weather answered; the decision picks get_time, which the model doubts, and cp fits no
    better: the answer is written from the result. get_weather, which ran, is not weighed."""
    history = WARM + ran("w1", "get_weather", {"city": "Paris"}, "21 C, sunny")
    with running_lane(tmp_path, with_tools_a_call(call("get_weather", {"city": "Paris"}), "21 C and sunny."),
                      decision=decisions("get_time")) as lane:
        lane.model.fit = {"get_weather": 0.95}
        reply = lane.chat(messages=history, tools=[CP, TIME, WEATHER]).json()["choices"][0]
        assert "tool_calls" not in reply["message"] and reply["message"]["content"] == "21 C and sunny."
        assert fitted(lane) == ["get_time", "cp"]


def test_a_pick_the_message_names_is_not_doubted(tmp_path):
    """"Use the terminal …, then save the output to memory": the decision picks terminal, whose
    fit reads low beside memory's; the user named it, so it is called first, and no fit is asked."""
    ask = [{"role": "user", "content": "Use the terminal to run `echo $((6*7))`, then save the output to memory."}]
    with running_lane(tmp_path, [call("terminal", {"command": "echo $((6*7))"})],
                      decision=decisions("terminal")) as lane:
        lane.model.fit = {"terminal": 0.3, "memory": 0.9}
        reply = lane.chat(messages=ask, tools=[TERMINAL, MEMORY]).json()
        assert only_call(reply)[:2] == ("terminal", {"command": "echo $((6*7))"})
        assert lane.model.fit_requests == [] and "doubt" not in purposes(lane)


STEP_4 = [{"role": "user", "content": "Use the terminal to run `echo $((6*7))`, then save the output to memory."}]


def test_after_a_result_the_one_step_the_message_names_next_is_called(tmp_path):
    """The terminal's result is back; memory, named by the user and not yet run, is called with
    no question asked (the decision would have said "answer")."""
    ask = STEP_4 + ran("t1", "terminal", {"command": "echo $((6*7))"}, "42")
    with running_lane(tmp_path, [call("memory", {"action": "add", "content": "42"})], decision=ANSWER) as lane:
        reply = lane.chat(messages=ask, tools=[TERMINAL, MEMORY, WEATHER]).json()
        assert only_call(reply)[:2] == ("memory", {"action": "add", "content": "42"})
        assert lane.model.decide_requests == []


def test_after_every_named_step_ran_the_answer_is_next(tmp_path):
    ask = STEP_4 + ran("t1", "terminal", {"command": "echo $((6*7))"}, "42") \
        + ran("m1", "memory", {"action": "add", "content": "42"}, "Entry added.")
    # the decision, were it asked, would pick the terminal once more (seen with Hermes)
    with running_lane(tmp_path, with_tools_a_call(call("terminal", {"command": "echo $((6*7))"}),
                                                  "Saved 42 to memory."), decision=decisions("terminal")) as lane:
        reply = lane.chat(messages=ask, tools=[TERMINAL, MEMORY]).json()["choices"][0]
        assert "tool_calls" not in reply["message"] and reply["message"]["content"].startswith("Saved 42")
        assert lane.model.decide_requests == []  # two tasks, two tools ran: no question


def test_a_single_task_naming_another_tool_is_not_given_a_second_step(tmp_path):
    """One task ("… the memory usage"): its tool ran, so the words naming `memory` call nothing."""
    ask = [{"role": "user", "content": "Use the terminal to show the memory usage."}] \
        + ran("t1", "terminal", {"command": "free -h"}, "Mem: 2.0Gi")
    with running_lane(tmp_path, [text("2.0 GiB of memory.")], decision=ANSWER) as lane:
        reply = lane.chat(messages=ask, tools=[TERMINAL, MEMORY]).json()["choices"][0]
        assert "tool_calls" not in reply["message"]
        assert len(lane.model.decide_requests) == 1


def test_two_named_steps_left_are_left_to_the_decision(tmp_path):
    search_files = {"type": "function", "function": {
        "name": "search_files", "description": "Search files in the workspace.",
        "parameters": {"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]}}}
    write_file = {"type": "function", "function": {
        "name": "write_file", "description": "Write a file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                       "required": ["path", "content"]}}}
    ask = [{"role": "user", "content": "Use the terminal to search the logs, then write the file notes.txt with it."}] \
        + ran("t1", "terminal", {"command": "grep -r error logs"}, "error 1")
    made = call("write_file", {"path": "notes.txt", "content": "error 1"})
    with running_lane(tmp_path, [made], decision=decisions("write_file")) as lane:
        reply = lane.chat(messages=ask, tools=[TERMINAL, search_files, write_file]).json()
        assert only_call(reply)[0] == "write_file"
        assert len(lane.model.decide_requests) == 1


def test_a_pick_that_fits_is_not_weighed(tmp_path):
    with running_lane(tmp_path, [call("get_weather", {"city": "Paris"})],
                      decision=decisions("get_weather")) as lane:
        reply = lane.chat(messages=WARM, tools=[TIME, WEATHER]).json()
        assert only_call(reply)[0] == "get_weather"
        assert len(lane.model.decide_requests) == 1 and len(lane.model.fit_requests) == 1


# (c) the lane's own tools are never named to a client

def test_a_reply_naming_the_lanes_bridges_is_answered_again_without_them(tmp_path):
    named = "I could look that up with tool_search, then run it through tool_call."
    tools = _many_tools(60) + [WEATHER]
    ask = [{"role": "user", "content": "Tell me something nice."}]
    with running_lane(tmp_path, [text(named), text("You are doing great.")], decision=ANSWER) as lane:
        reply = lane.chat(messages=ask, tools=tools).json()["choices"][0]
        assert reply["message"]["content"] == "You are doing great."
        assert "tool_search" in lane.model.requests[1]["messages"][-1]["content"]  # the note


def test_the_lanes_own_account_names_no_bridge(tmp_path):
    named = "Use tool_describe first."
    tools = _many_tools(60) + [WEATHER]
    ask = [{"role": "user", "content": "Tell me something nice."}]
    script = [call("tool_search", {"query": "nice things"}), text(named), text(named)]
    with running_lane(tmp_path, script, decision=ANSWER) as lane:
        content = lane.chat(messages=ask, tools=tools).json()["choices"][0]["message"]["content"]
        assert not any(name in content for name in ("tool_search", "tool_describe", "tool_call")), content


# (d) no correction makes a client run a call its user did not ask for

SESSION = ([{"role": "user", "content": "Remember my codename FALCON-7."}]
           + ran("m1", "memory", {"action": "add", "content": "codename FALCON-7"}, "saved")
           + [{"role": "assistant", "content": "Saved."},
              {"role": "user", "content": "Use the terminal to print the date."}]
           + ran("t1", "terminal", {"command": "date"}, "Sat Nov 28")
           + [{"role": "assistant", "content": "It is Saturday."},
              {"role": "user", "content": "Summarize what you did and list every tool you actually used."}])


def test_a_summary_of_earlier_turns_is_held_to_the_session(tmp_path):
    summary = "I saved your codename and printed the date. Tools I actually used: memory, terminal."
    with running_lane(tmp_path, [text(summary)], decision=ANSWER, reading=literal_reading) as lane:
        reply = lane.chat(messages=SESSION, tools=[TERMINAL, MEMORY]).json()["choices"][0]
        assert "tool_calls" not in reply["message"]
        assert reply["message"]["content"] == summary  # both ran in the session: no receipt
        assert lane.rows("SELECT count(*) FROM returned_calls") == [(0,)]


def test_a_summary_claiming_a_tool_the_session_never_ran_gets_the_receipt(tmp_path):
    search = {"type": "function", "function": {
        "name": "session_search", "description": "Search past sessions.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}
    summary = "Tools I actually used: memory, terminal, session_search."
    with running_lane(tmp_path, [text(summary)], decision=ANSWER, reading=literal_reading) as lane:
        lane.model.fit = {"reply_in_words": 0.6}  # every tool 0.05: lever "claimed" calls none
        reply = lane.chat(messages=SESSION, tools=[TERMINAL, MEMORY, search]).json()["choices"][0]
        assert "tool_calls" not in reply["message"]
        assert reply["message"]["content"] == (  # the tool it names that never ran, named back
            f"{summary}\n\n(The lane's record: session_search did not run in this conversation.)\n"
            "(The lane's record: no tool ran for this request.)")


def test_after_a_result_an_answer_claiming_another_tool_calls_nothing(tmp_path):
    """Lever "claimed" is not asked once a client tool ran for the message: the answer reports
    memory, which did not run, and the model would fit memory well; it gets the receipt, and
    the client is made to run nothing its user did not ask for."""
    ask = [{"role": "user", "content": "Run `date` in the terminal."}]
    history = ask + ran("t1", "terminal", {"command": "date"}, "Sat Nov 28")
    answer = "It is Sat Nov 28; I saved that to memory."
    with running_lane(tmp_path, with_tools_a_call(call("memory", {"action": "add", "content": "Sat"}), answer),
                      decision=ANSWER, reading=literal_reading) as lane:
        lane.model.fit = {"memory": 0.79, "reply_in_words": 0.1}
        reply = lane.chat(messages=history, tools=[TERMINAL, MEMORY]).json()["choices"][0]
        assert "tool_calls" not in reply["message"]
        assert reply["message"]["content"].startswith(answer + "\n\n(The lane's record:")
        assert "claimed" not in purposes(lane)


def test_a_tool_that_ran_for_the_request_is_not_forced_again(tmp_path):
    """After the terminal and memory both ran for the request, a decision of "answer" is the
    answer: no second look (which would call the terminal again, seen with Hermes)."""
    ask = [{"role": "user", "content": "Run `df -h` as a shell command, show its output, and keep a note of it."}]
    history = (ask + ran("t1", "terminal", {"command": "df -h"}, "/dev/sda1 40G 12G")
               + ran("m1", "memory", {"action": "add", "content": "/dev/sda1 40G 12G"}, "saved"))
    with running_lane(tmp_path, with_tools_a_call(call("terminal", {"command": "df -h"}), "Done: 12G used, saved."),
                      decision=ANSWER) as lane:
        lane.model.fit = 0.95
        reply = lane.chat(messages=history, tools=[TERMINAL, MEMORY]).json()["choices"][0]
        assert "tool_calls" not in reply["message"]
        assert reply["message"]["content"] == "Done: 12G used, saved."
