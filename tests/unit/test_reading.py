"""The reading of what an answer reports as done (agent/reading.py), the facts the lane gives
every turn (agent/situation.py) and what the answer's instruction says the lane can do."""

import os
import platform
from datetime import datetime, timedelta, timezone

from stack.agent.prompt import compose_messages
from stack.agent.reading import (
    OTHER,
    Reading,
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
