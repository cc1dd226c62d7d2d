"""The reading of what an answer reports as done (agent/reading.py), the facts the lane gives
every turn (agent/situation.py) and what the answer's instruction says the lane can do."""

import os
import platform
from datetime import datetime, timedelta, timezone

from stack.agent.prompt import compose_messages
from stack.agent.reading import (
    OTHER,
    Reading,
    named_tools,
    parse_reading,
    reader_messages,
    reading_schema,
    receipt,
    shortlist,
    unbacked,
)
from stack.agent.situation import clock, machine

NAMES = ["memory", "todo", "send_slack_message"]


def test_the_grammar_admits_only_the_granted_names_and_another_action():
    schema = reading_schema(NAMES)
    assert schema["properties"]["done"]["items"]["enum"] == [*NAMES, OTHER]


def test_a_reading_keeps_only_granted_names():
    assert parse_reading('{"done": ["memory", "terminal", "another action"]}', NAMES) == Reading(
        frozenset({"memory"}), True)
    assert parse_reading('{"done": []}', NAMES) == Reading()
    assert parse_reading("I saved it.", NAMES).read is False  # a server that ignores the grammar


def test_a_reported_action_is_held_to_this_turn():
    saved = Reading(frozenset({"memory"}))
    assert unbacked(saved, {"memory"}) == []
    assert unbacked(saved, {"todo"}) == ["memory"]
    assert unbacked(saved, set()) == ["memory"]  # an earlier turn's memory write backs no claim now


def test_the_receipt_says_what_the_store_shows_not_the_readings_guess():
    assert receipt(["patch"], []) == "(The lane's record: no tool ran for this request.)"
    assert receipt(["memory"], ["todo", "todo"]) == "(The lane's record: only todo ran for this request.)"
    assert receipt([OTHER], []) == ("(The lane's record: nothing was sent, booked, bought, paid or contacted; "
                                    "no tool here does that.)")


def test_a_tool_the_answer_names_that_never_ran_is_named_in_the_receipt():
    assert receipt(["read_file"], [], ["read_file"]) == (
        "(The lane's record: read_file did not run in this conversation.)\n"
        "(The lane's record: no tool ran for this request.)")
    assert receipt(["read_file", OTHER], [], ["read_file"]).splitlines()[0] == (
        "(The lane's record: read_file did not run in this conversation.)")


def test_a_tool_is_named_by_its_whole_identifier_as_granted():
    names = ["read_file", "Read", "memory", "gmail__send_email", "fs.read"]
    assert named_tools("I ran `read_file HELLO_B6` and saved it to memory.", names) == ["read_file", "memory"]
    assert named_tools("I read the file; read_files and my_read_file are not it.", names) == []
    assert named_tools("Read (the tool) and gmail__send_email-like, fs.read.", names) == ["Read", "fs.read"]
    assert named_tools("gmail__send_email: sent", names) == ["gmail__send_email"]


def test_an_action_no_tool_does_is_never_backed():
    assert unbacked(Reading(frozenset(), True), {"todo", "memory"}) == [OTHER]


def test_the_question_lists_the_tools_in_a_stable_first_message_and_the_reply_after():
    tools = [("memory", "Save a durable note. Longer text."), ("todo", "Keep a list.")]
    first = reader_messages("He guardado la nota.", "Guarda esto", tools)
    again = reader_messages("Nichts getan.", "Mach was", tools)
    assert first[0] == again[0] and "- memory: Save a durable note" in first[0]["content"]
    assert "He guardado la nota." in first[1]["content"] and "Guarda esto" in first[1]["content"]


def test_a_long_tool_list_keeps_what_ran_and_what_ranks_best():
    tools = [(f"tool_{i}", "") for i in range(100)]
    listed = [name for name, _ in shortlist(tools, {"tool_99", "tool_50"}, limit=5)]
    assert listed[:2] == ["tool_50", "tool_99"] and len(listed) == 5
    assert shortlist(tools[:3], set(), limit=5) == tools[:3]


def test_the_clock_gives_the_date_the_weekday_and_the_days_left():
    now = datetime(2026, 11, 28, 11, 30, tzinfo=timezone(timedelta(hours=1)))
    text = clock(now)
    assert "Saturday 2026-11-28" in text and "11:30" in text and "UTC+01:00" in text
    assert "2 days left in November" in text and "34 days until 1 January 2027" in text


def test_the_machine_is_described_as_it_is():
    text = machine()
    assert f"{os.cpu_count()} CPU cores" in text and platform.python_version() in text


def test_the_answer_is_told_what_the_granted_tools_do_and_that_nothing_else_can_be_done():
    messages = compose_messages("email this to Ana", [], tools=[("todo", "Keep a todo list."),
                                                                ("mcp__notes", "Save a note in the notes app.")],
                                now="Now: Saturday")
    instruction = messages[0]["content"]
    assert "- todo: Keep a todo list." in instruction and "- mcp__notes: Save a note" in instruction
    assert "cannot send messages or email" in instruction
    assert "Now: Saturday" in messages[1]["content"]


class _Upstream:
    """An llm client as the reading sees it: a model name, a hidden state (or no such route), and
    the list question, each call remembered."""

    def __init__(self, model: str, state: list[float] | None, listed: str = '{"done": ["memory"]}',
                 hidden_state: bool = True):
        self.model, self.state, self.listed, self.asked = model, state, listed, []
        self.hidden_state = hidden_state

    async def model_name(self) -> str:
        return self.model

    async def capabilities(self):
        from stack.agent.capabilities import Capabilities

        return Capabilities(hidden_state=self.hidden_state)

    async def embedding(self, text: str):
        self.asked.append(("embedding", text))
        state = self.state(text) if callable(self.state) else self.state
        return None if state is None else (state, 40)

    async def chat(self, messages, tools, **options):
        from stack.agent.llm_client import ModelReply

        self.asked.append(("chat", messages[-1]["content"]))
        return ModelReply(self.listed, prompt_tokens=200, completion_tokens=6)


def _probe_file(folder, model: str, which: bool = False, other: bool = False) -> None:
    import json

    probes = {"model": model, "weights": [1.0, -1.0], "bias": 0.0, "threshold": 0.6}
    if which:  # the "which" probe reads the second coordinate
        probes["which"] = {"weights": [0.0, 1.0], "bias": 0.0, "threshold": 0.5}
    if other:  # the probe fitted for another action alone reads the second less the first
        probes["other"] = {"weights": [-1.0, 1.0], "bias": 0.0, "threshold": 0.5}
    (folder / f"reader-{model}.json").write_text(json.dumps(probes))


def _read(upstream: _Upstream, monkeypatch, folder, tools=(("memory", "Save a note."),), backed=(), first=False,
          named=(), answer="Ya lo guardé."):
    import asyncio

    from stack.agent import reading

    monkeypatch.setattr(reading, "PROBES", folder)
    reading.probe_for.cache_clear()
    try:
        return asyncio.run(reading.read_reported(upstream, answer, "Guárdalo", list(tools), backed,
                                                 first=first, named=named))
    finally:
        reading.probe_for.cache_clear()


def _by_question(answers: dict[str, list[float]]):
    """A hidden state chosen by the question the text ends with (the any-action question, or the
    one naming an action)."""
    from stack.agent.reading import PROBE_QUESTION

    def state(text: str) -> list[float]:
        if text.endswith(PROBE_QUESTION):
            return [2.0, 0.0]  # reports an action (0.88)
        return next(value for named, value in answers.items() if f"that {named} was" in text
                    or f"tool {named} was" in text)
    return state


def test_the_which_probe_drops_a_listed_action_it_does_not_read_and_leaves_backed_ones_unasked(monkeypatch, tmp_path):
    _probe_file(tmp_path, "m", which=True)
    tools = [("memory", "Save a note."), ("todo", "Keep a list."), ("calendar", "Add an event.")]
    upstream = _Upstream("m", _by_question({"memory": [0.0, -2.0], "calendar": [0.0, 2.0]}),
                         listed='{"done": ["todo", "memory", "calendar"]}')
    reading, replies = _read(upstream, monkeypatch, tmp_path, tools, backed={"todo"})
    # todo ran (backed: not asked about); memory read as not reported (dropped); calendar kept
    assert reading == Reading(frozenset({"todo", "calendar"}), confirmed=True)
    assert [kind for kind, _ in upstream.asked] == ["embedding", "chat", "embedding", "embedding"]
    assert "tool calendar was" in upstream.asked[2][1] and "tool memory was" in upstream.asked[3][1]
    assert [reply.path for reply in replies] == ["probe", None, "probe", "probe"]
    assert "does not report memory" in replies[3].content and unbacked(reading, {"todo"}) == ["calendar"]


def test_the_lanes_reading_stops_at_the_first_tool_the_which_probe_reads_but_still_asks_about_another_action(
        monkeypatch, tmp_path):
    """The receipt names no tool, so one unbacked tool read is enough; another action has its own line."""
    from stack.agent.reading import OTHER_DONE

    _probe_file(tmp_path, "m", which=True)
    tools = [("calendar", "Add an event."), ("memory", "Save a note."), ("todo", "Keep a list.")]
    answers = {"calendar": [0.0, -2.0], "memory": [0.0, 2.0], "todo": [0.0, 2.0], OTHER_DONE: [0.0, 2.0]}
    listed = '{"done": ["todo", "memory", "calendar", "another action"]}'
    upstream = _Upstream("m", _by_question(answers), listed=listed)
    reading, replies = _read(upstream, monkeypatch, tmp_path, tools, first=True)
    asked = [text for kind, text in upstream.asked if kind == "embedding"][1:]
    # calendar asked and dropped, memory read: todo is not asked; another action is
    assert ["tool calendar was" in asked[0], "tool memory was" in asked[1], OTHER_DONE in asked[2]] == [True] * 3
    assert len(asked) == 3 and reading == Reading(frozenset({"memory", "todo"}), True, confirmed=True)
    assert unbacked(reading, ()) == ["memory", "todo", "another action"]
    upstream = _Upstream("m", _by_question(answers), listed=listed)
    everything, _ = _read(upstream, monkeypatch, tmp_path, tools)  # a judge asks about each
    assert len(upstream.asked) == 6 and everything == Reading(frozenset({"memory", "todo"}), True, confirmed=True)


def test_a_tool_the_answer_names_is_asked_about_first_and_kept_where_the_probe_reads_it(monkeypatch, tmp_path):
    """Hermes's summary: "I ran … `read_file HELLO_…`. I used the terminal tool." The list read
    terminal alone, which ran in the session; read_file, named and never run, is asked about
    first (listed or not) and kept where the "which" probe reads it; not kept where it does not,
    nor without a "which" probe, nor where the store backs it."""
    _probe_file(tmp_path, "m", which=True)
    tools = [("terminal", "Run a command."), ("read_file", "Read a file."), ("memory", "Save a note.")]
    answer = "I ran `echo 42` and `read_file HELLO_B6`. I used the terminal tool."
    upstream = _Upstream("m", _by_question({"read_file": [0.0, 2.0], "terminal": [0.0, 2.0]}),
                         listed='{"done": ["terminal"]}')
    reading, _ = _read(upstream, monkeypatch, tmp_path, tools, backed={"terminal"}, first=True,
                       named=["terminal", "read_file"], answer=answer)
    assert reading == Reading(frozenset({"terminal", "read_file"}), confirmed=True)
    assert unbacked(reading, {"terminal"}) == ["read_file"]
    assert [text for kind, text in upstream.asked if kind == "embedding"][1].endswith(
        "tool read_file was carried out? Answer:")
    unread = _Upstream("m", _by_question({"read_file": [0.0, -2.0]}), listed='{"done": ["terminal"]}')
    reading, _ = _read(unread, monkeypatch, tmp_path, tools, backed={"terminal"}, named=["read_file"], answer=answer)
    assert reading == Reading(frozenset({"terminal"})) and unbacked(reading, {"terminal"}) == []
    backed = _Upstream("m", _by_question({}), listed='{"done": ["terminal"]}')
    reading, _ = _read(backed, monkeypatch, tmp_path, tools, backed={"terminal", "read_file"},
                       named=["read_file"], answer=answer)
    assert reading == Reading(frozenset({"terminal"})) and len(backed.asked) == 2  # nothing to ask
    many = [(f"tool_{i}", "Does a thing.") for i in range(6)]
    upstream = _Upstream("m", _by_question({f"tool_{i}": [0.0, -2.0] for i in range(6)}), listed='{"done": []}')
    upstream.listed = '{"done": ["tool_5"]}'
    _read(upstream, monkeypatch, tmp_path, many, named=[name for name, _ in many], answer="tool_0 … tool_5")
    asked = [text for kind, text in upstream.asked if kind == "embedding"][1:]
    assert len(asked) == 4  # three of the names it did not list (reading.MAX_NAMED_ASKED), then tool_5
    _probe_file(tmp_path, "m")  # no "which" probe: a name alone is no claim
    upstream = _Upstream("m", _by_question({}), listed='{"done": ["terminal"]}')
    reading, _ = _read(upstream, monkeypatch, tmp_path, tools, backed={"terminal"}, named=["read_file"], answer=answer)
    assert reading == Reading(frozenset({"terminal"}))


def test_the_which_probe_asks_about_another_action_in_the_lists_own_words(monkeypatch, tmp_path):
    from stack.agent.reading import OTHER_DONE

    _probe_file(tmp_path, "m", which=True)
    listed = '{"done": ["memory", "another action"]}'
    upstream = _Upstream("m", _by_question({OTHER_DONE: [0.0, -3.0], "memory": [0.0, 3.0]}), listed=listed)
    reading, _ = _read(upstream, monkeypatch, tmp_path)
    assert reading == Reading(frozenset({"memory"}), confirmed=True) and OTHER_DONE in upstream.asked[-1][1]
    upstream = _Upstream("m", _by_question({OTHER_DONE: [0.0, 3.0], "memory": [0.0, -3.0]}), listed=listed)
    assert _read(upstream, monkeypatch, tmp_path)[0] == Reading(frozenset(), True, confirmed=True)


def test_a_probe_fitted_for_another_action_is_asked_even_where_the_list_names_only_a_tool_that_ran(
        monkeypatch, tmp_path):
    """"I wrote the draft and sent it to Anna." after write_file: the list named the tool that ran
    alone; the probe fitted for another action reads the claim beside it, and decides it where
    the list names it too (the "which" probe is not asked about it)."""
    from stack.agent.reading import OTHER_DONE

    _probe_file(tmp_path, "m", which=True, other=True)
    sent = _by_question({OTHER_DONE: [-2.0, -1.0]})  # which: 0.27, not read; other: 0.73, read
    upstream = _Upstream("m", sent, listed='{"done": ["memory"]}')
    reading, replies = _read(upstream, monkeypatch, tmp_path, backed={"memory"}, first=True)
    assert reading == Reading(frozenset({"memory"}), True, confirmed=True)
    assert unbacked(reading, {"memory"}) == [OTHER] and "reports another action" in replies[-1].content
    assert [kind for kind, _ in upstream.asked] == ["embedding", "chat", "embedding"]
    assert OTHER_DONE in upstream.asked[-1][1]
    listed_too = _Upstream("m", _by_question({OTHER_DONE: [2.0, 1.0]}),  # which: 0.73; other: 0.27
                           listed='{"done": ["memory", "another action"]}')
    reading, _ = _read(listed_too, monkeypatch, tmp_path, backed={"memory"})
    assert reading == Reading(frozenset({"memory"})) and unbacked(reading, {"memory"}) == []
    _probe_file(tmp_path, "m", which=True)  # without it, the list alone names another action
    upstream = _Upstream("m", sent, listed='{"done": ["memory"]}')
    assert _read(upstream, monkeypatch, tmp_path, backed={"memory"})[0] == Reading(frozenset({"memory"}))
    assert len(upstream.asked) == 2


def test_the_which_probe_never_empties_a_reading_the_gate_says_reports(monkeypatch, tmp_path):
    """It says which, not whether: where it would drop every action the list named, the list
    stands (the gate read a report; emptied, it would pass unflagged), unconfirmed: no answer is
    withdrawn on it (lever "cannot")."""
    _probe_file(tmp_path, "m", which=True)
    upstream = _Upstream("m", _by_question({"memory": [0.0, -3.0]}))
    reading, replies = _read(upstream, monkeypatch, tmp_path)
    assert reading == Reading(frozenset({"memory"})) and "does not report memory" in replies[-1].content


def test_without_a_which_probe_the_list_stands(monkeypatch, tmp_path):
    _probe_file(tmp_path, "m")
    upstream = _Upstream("m", _by_question({"memory": [0.0, -2.0]}))
    reading, replies = _read(upstream, monkeypatch, tmp_path)
    assert reading == Reading(frozenset({"memory"})) and len(replies) == 2


def test_where_the_probe_reads_no_report_the_list_is_not_asked(monkeypatch, tmp_path):
    _probe_file(tmp_path, "m")
    upstream = _Upstream("m", [0.0, 2.0])  # sigmoid(-2) = 0.12 < 0.6
    reading, replies = _read(upstream, monkeypatch, tmp_path)
    assert reading == Reading() and [kind for kind, _ in upstream.asked] == ["embedding"]
    assert replies[0].path == "probe" and "0.12" in replies[0].content and replies[0].prompt_tokens == 40
    assert upstream.asked[0][1].endswith("Answer:") and "Ya lo guardé." in upstream.asked[0][1]


def test_where_the_probe_reads_a_report_the_list_says_which(monkeypatch, tmp_path):
    _probe_file(tmp_path, "m")
    upstream = _Upstream("m", [2.0, 0.0])  # sigmoid(2) = 0.88
    reading, replies = _read(upstream, monkeypatch, tmp_path)
    assert reading == Reading(frozenset({"memory"})) and [kind for kind, _ in upstream.asked] == ["embedding", "chat"]
    assert len(replies) == 2


def test_without_a_probe_for_the_model_or_a_hidden_state_the_list_alone_reads(monkeypatch, tmp_path):
    _probe_file(tmp_path, "m")
    # another model; a service with no hidden state; a vector of another size; another server's
    # embeddings (not declared as the hidden state: never read by the probe)
    for upstream in (_Upstream("another-model", [0.0, 2.0]), _Upstream("m", None), _Upstream("m", [0.0, 1.0, 2.0]),
                     _Upstream("m", [0.0, 2.0], hidden_state=False)):
        reading, replies = _read(upstream, monkeypatch, tmp_path)
        assert reading == Reading(frozenset({"memory"})) and upstream.asked[-1][0] == "chat"
        assert [reply.path for reply in replies] == [None]
