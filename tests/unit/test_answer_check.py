"""The answer check (agent/answer_check.py): what holds an answer back by its shape and the store,
in any language; and the correction policy's shape-read levers (agent/corrections.py)."""

import asyncio
import dataclasses

import pytest

from stack.agent.answer_check import TurnFacts, faults, numbers_in, unsourced_ids, unsourced_numbers


def facts(request="2 plus 3?", ran=(), results=(), session=(), offered=("memory", "calculate")):
    return TurnFacts(request, {name: {} for name in offered}, set(session), set(ran), tuple(results))


@pytest.mark.parametrize("answer, problem", [
    ("", "the model gave no answer"),
    ("2 plus 3?", "the request echoed back"),
    ('{"name": "calculate", "arguments": {"expression": "2+3"}}', "a tool call written as text"),
    ('<tool_call>{"name": "calculate"}', "a tool call written as text"),
    ("Already done: this exact call ran earlier in this turn and returned: 5", "the lane's own note copied"),
    ("Answer not passed on: a stock apology", "the lane's own note copied"),
    ("http_fetch (ok): HTTP 200 OK; text/html", "the lane's own note copied"),  # a fact line, cut short
    ("session_search ran for the user's last message.", "the lane's own note copied"),  # the answer prompt's header
])
def test_an_answer_that_gives_nothing_is_held_back_by_its_shape(answer, problem):
    assert problem in faults(answer, facts())


@pytest.mark.parametrize("answer", [
    "I saved it to memory.", "He guardado la nota en tu memoria.", "Ich habe die E-Mail an Anna geschickt.",
    "I'm sorry, but I need more information to answer your question.", "The user asked for the disk space.",
    'Your config is {"name": "demo", "version": 2}.',
])
def test_the_words_of_an_answer_alone_hold_nothing_back(answer):
    """What an answer says was done is the reading's to judge (reading.py), in any language: no
    word list of the answer check decides it."""
    assert faults(answer, facts()) == []


@pytest.mark.parametrize("request_, answer", [
    ("Reply with just ACK 7f3a", "ACK 7f3a"),
    ("Antworte nur mit: OK-42", "OK-42"),
    ("Say exactly this back to me: hello world, it is a fine day today", "hello world, it is a fine day today"),
])
def test_an_answer_the_request_asks_for_word_for_word_is_passed_on(request_, answer):
    assert faults(answer, facts(request_)) == []


@pytest.mark.parametrize("text, numbers", [
    ("1,234.5 and 46 in 2026", [1234.5, 46.0, 2026.0]),
    ("3,5 Liter", [3.0, 5.0]),
    ("version 3.11.7", [3.11]),
    ("no digits", []),
])
def test_numbers_are_read_from_digits_in_any_language(text, numbers):
    assert [value for value, _ in numbers_in(text)] == numbers


def test_an_answer_must_carry_what_the_tools_returned():
    assert faults("Done!", facts(ran={"calculate"}, results=("5",))) == [
        "it leaves out what the tools returned"]
    assert faults("It is 5.", facts(ran={"calculate"}, results=("5",))) == []
    # a result that says there is nothing need not be passed on
    assert faults("Your codename is QUASAR-ZETA.", facts(ran={"todo"}, results=("(the todo list is empty)",))) == []
    assert faults("Your codename is QUASAR-ZETA.", facts(ran={"todo"}, results=("1. [ ] call the bank",))) == [
        "it leaves out what the tools returned"]


@pytest.mark.parametrize("answer, carried", [
    ("You are logged in as vm.", True),   # a result of one short word is carried by that word
    ("You are logged in as alice.", False),
    ("The command ran with exit code 0.", False),  # the status line is not what the command printed
])
def test_a_command_s_output_is_what_must_be_carried(answer, carried):
    result = facts("which user am I logged in as? command line pls", ran={"terminal"}, results=("exit code: 0\nvm\n",),
                   offered=("terminal",))
    assert ("it leaves out what the tools returned" not in faults(answer, result)) is carried


DF = ("exit code: 0\nFilesystem      Size  Used Avail Use% Mounted on\ntmpfs            24G  4.0K   24G   1% /dev/shm\n"
      "/dev/vda        252G   31G   71G  31% /")


@pytest.mark.parametrize("answer, carried", [
    ("The free disk space on this machine is 71GB.", True),  # seen held back twice: "71GB" is no word of "71G"
    ("Il reste 71 Go sur /.", True),
    ("The free disk space on this machine is 75GB.", False),
    ("Your booking for 4 people at 8pm is noted.", False),  # the earlier turn's numbers
])
def test_a_number_is_carried_by_its_value_whatever_unit_is_written_onto_it(answer, carried):
    result = TurnFacts("Free disk space on this machine?", {"terminal": {}}, {"terminal"}, {"terminal"},
                       results=(DF,), earlier="- The user said: Book a table. 4 people, 8pm.")
    assert ("it leaves out what the tools returned" not in faults(answer, result)) is carried


TOKYO = "2026-11-27T12:46:15+09:00 (JST, UTC+09:00, Friday, daylight saving off) in Asia/Tokyo"
PARIS = "2026-11-27T04:47:31+01:00 (CET, UTC+01:00, Friday, daylight saving off) in Europe/Paris"


@pytest.mark.parametrize("answer, carried", [
    ("It is 4:47 in the morning in Paris.", True),
    (f"world_clock returned: {TOKYO}", False),  # the earlier turn's result copied: shares only "2026", "friday"
    ("It is Friday, 2026.", False),
])
def test_a_result_is_carried_by_what_earlier_turns_did_not_already_say(answer, carried):
    earlier = f"- The user said: what time is it in Tokyo?\n  world_clock returned: {TOKYO}"
    result = TurnFacts("and what about Paris?", {"world_clock": {}}, {"world_clock"}, {"world_clock"},
                       results=(PARIS,), earlier=earlier)
    assert ("it leaves out what the tools returned" not in faults(answer, result)) is carried


SYDNEY = ("07:06 (7:06 AM), Saturday 28 November 2026, in Australia/Sydney (AEDT, UTC+11:00, daylight saving on); "
          "ISO 2026-11-28T07:06:22+11:00")


@pytest.mark.parametrize("answer, carried", [
    ("The day of the week is Saturday.", True),  # seen, held back: the user had said "saturday" before
    ("The pool is open on Saturday from 08:00 to 18:00.", False),  # the earlier turn's answer again
])
def test_a_word_the_user_wrote_earlier_is_no_sign_of_a_copied_result(answer, carried):
    asked = "pls look on http://127.0.0.1/pool.html when is the swiming pool open on saturday?"
    earlier = (f"- The user said: {asked}\n  http_fetch returned: Saturday: 08:00 - 18:00\n"
               "  You answered: The swimming pool is open on Saturday from 08:00 to 18:00.")
    request = "my sister lives in Sydney, which day of week is it there now?"
    result = TurnFacts(request, {"world_clock": {}}, {"world_clock"}, {"world_clock"}, results=(SYDNEY,),
                       earlier=earlier, user_said=(asked, request))
    assert ("it leaves out what the tools returned" not in faults(answer, result)) is carried


def test_an_earlier_answer_s_common_words_are_no_sign_of_a_copied_result():
    """Seen (other words 1, step 3): the decision called memory for "Remind me, what's the codename
    of my project?", memory said it already held the codename, and the right answer was held back
    for "your", a word of the lane's earlier answer."""
    said = "Keep this in mind for later on: the codename of my project is JUNIPER-8331."
    earlier = (f"- The user said: {said}\n  memory returned: saved to memory: 'JUNIPER-8331'\n"
               "  The assistant answered: The codename of your project is JUNIPER-8331.")
    request = "Remind me, what's the codename of my project?"
    result = TurnFacts(request, {"memory": {}}, {"memory"}, {"memory"},
                       results=("already in memory: 'JUNIPER-8331'; nothing changed",), earlier=earlier,
                       user_said=(said, request))
    assert faults("The codename of your project is JUNIPER-8331.", result) == []
    assert faults("The codename of your project is QUASAR-1.", result) == ["it leaves out what the tools returned"]


PARIS_LATER = "2026-11-27T08:09:02+01:00 (CET, UTC+01:00, Friday, daylight saving off) in Europe/Paris"


@pytest.mark.parametrize("request_, results, answer, stray", [
    # seen: `wc -l` printed 4, the answer said 11 (alpha.txt's size in an earlier turn's `ls -la`)
    ("how many lines in beta.csv", ("exit code: 0\n4 beta.csv",), "The file beta.csv has 11 lines.", ["11"]),
    ("how many lines in beta.csv", ("exit code: 0\n4 beta.csv",), "The file beta.csv has 4 lines.", []),
    # seen: a time mixed from the earlier turn's result and this one's
    ("and what about Paris?", (PARIS_LATER,), "It is 16:09 in Paris.", ["16:09"]),
    ("and what about Paris?", (PARIS_LATER,), "It is 8:09 am in Paris (UTC+01:00), Friday 27 November 2026.", []),
    ("and what about Paris?", (PARIS_LATER,), "It is 08:09:02 in Paris.", []),
    ("what time is it in Tokyo", (TOKYO,), "It is 12:46 pm in Tokyo.", []),
    ("what time is it in Tokyo", (TOKYO,), "It is 12:46 am in Tokyo.", ["12:46 am"]),
    # rounded, reformatted and the request's own numbers pass; a computed total does not
    ("sqrt 2 to 6 decimals", ("1.4142135623730951",), "The square root of 2 is 1.414214.", []),
    ("how much is 12.5% of 368", ("46.0",), "12.5% of 368 is 46.", []),
    ("2 to the power of 40", ("1099511627776",), "2^40 is 1,099,511,627,776.", []),
    ("17.5% tip on 86.40", ("15.120000000000001",), "The tip is 15.12, so 101.52 in all.", ["101.52"]),
    # a count of what the result lists, in one digit, is the answer's own
    ("which files mention eggs", ("recipe.txt:3: 2 eggs\nshoping.txt:2: eggs",),
     "2 files mention eggs: recipe.txt and shoping.txt.", []),
    ("which python is installed", ("exit code: 0\nPython 3.11.2",), "Python 3.8.10 is installed.", ["3.8"]),
])
def test_a_number_no_result_holds_is_not_passed_on(request_, results, answer, stray):
    earlier = (f"- The user said: what time is it in Tokyo?\n  world_clock returned: {TOKYO}\n"
               "- The user said: list the files\n  terminal returned: -rw-r--r-- 1 root root 11 Nov 27 alpha.txt")
    turn = TurnFacts(request_, {"terminal": {}}, {"terminal"}, {"terminal"}, results=results, earlier=earlier)
    assert unsourced_numbers(answer, turn) == stray
    assert any("which no result holds" in problem for problem in faults(answer, turn)) is bool(stray)


def test_numbers_are_not_held_to_results_when_no_tool_ran():
    assert faults("A leap year has 366 days.", facts("how many days in a leap year?")) == []


def test_a_number_stated_after_the_tool_for_it_failed_is_not_passed_on():
    """Seen: calculate failed on "sum(primes(1000))", and the answer was "The sum of all primes
    under 1000 is calculated and saved as 76127."."""
    failed = TurnFacts("quick script pls: sum of all primes under 1000", {"calculate": {}}, set(), set(),
                       failed=frozenset({"calculate"}))
    answer = "The sum of all primes under 1000 is calculated and saved as 76127."
    assert unsourced_numbers(answer, failed) == ["76127"]
    assert "it states 76127, which no result holds" in faults(answer, failed)


def test_a_number_the_user_wrote_in_an_earlier_message_is_a_source():
    """Seen: "The sum of all primes under 1000 is 76127." held back for 1000, which the user's
    previous message gave ("... primes under 1000", then "and how many are there? run it too")."""
    turn = TurnFacts("and how many are there? run it too", {"run_python": {}}, {"run_python"}, {"run_python"},
                     results=("exit code: 0\n76127",),
                     user_said=("quick script pls: sum of all primes under 1000", "and how many are there?"))
    assert unsourced_numbers("The sum of all primes under 1000 is 76127.", turn) == []


def test_a_tools_name_is_not_what_it_returned():
    """Seen: "session_search ran." was the answer, sharing "session" with the result."""
    result = TurnFacts("keep track of my chores", {"session_search": {}}, {"session_search"}, {"session_search"},
                       results=("session id: s-1\ndate: 2026-11-27 07:27 UTC\nmatched (user): chores",))
    assert "it leaves out what the tools returned" in faults("session_search ran.", result)
    assert faults("Your chores came up in session s-1.", result) == []


def test_line_numbers_of_a_search_need_not_be_carried():
    earlier = ("- The user said: make shoping.txt with flour eggs milk\n  write_file returned: wrote 15 bytes to "
               "shoping.txt\n- The user said: open recipe.txt\n  read_file returned: 200 g flour 2 eggs")
    result = TurnFacts("which of my files mention eggs", {"search_files": {}}, {"search_files"}, {"search_files"},
                       results=("recipe.txt:3: 2 eggs\nshoping.txt:2: eggs",), earlier=earlier)
    assert faults("The files that mention eggs are recipe.txt and shoping.txt.", result) == []


def test_a_result_that_repeats_an_earlier_one_is_carried_by_any_of_its_words():
    earlier = "- The user said: put apples, rice in list.txt\n  write_file returned: wrote 12 bytes to list.txt"
    result = TurnFacts("read it back", {"read_file": {}}, {"read_file"}, {"read_file"},
                       results=("apples, rice",), earlier=earlier)
    assert faults("list.txt holds apples and rice.", result) == []


def test_a_command_that_printed_nothing_need_not_be_carried():
    result = facts("make the folder reports", ran={"terminal"}, results=("exit code: 0\n(no output)",),
                   offered=("terminal",))
    assert faults("Done: the folder reports is there.", result) == []


def test_a_fact_label_copied_to_the_front_of_an_answer_is_dropped():
    from stack.agent.answer_check import unlabelled

    assert unlabelled("The assistant answered: 42") == "42"
    assert unlabelled("Assistant: hello there") == "hello there"
    assert unlabelled("The answer is 42.") == "The answer is 42."


@pytest.mark.parametrize("answer, session, copied", [
    # an earlier turn's line of the facts (history.earlier_facts), for a tool of the lane's
    ("write_file returned: REFUSED: not written: this would delete 5 of the 5 lines of todo.txt", {"write_file"}, True),
    ("- memory returned: saved 'dentist Friday'", {"memory"}, True),
    # refused in an earlier turn, so it never ran; its line was still among the facts
    ("write_file returned: REFUSED: not written: this would delete 5 of the 5 lines of todo.txt", set(), True),
    # the same shape for what is no tool of the lane's, or plain words: the user's answer
    ("The file returned: wrote 16 bytes to todo.txt", set(), False),
    ("notes returned: wrote 16 bytes to todo.txt", set(), False),
    ("It returned: 5", {"calculate"}, False),
    ("calculate returned 5, so the total is 5.", {"calculate"}, False),
])
def test_an_answer_that_is_an_earlier_turns_fact_line_is_held_back(answer, session, copied):
    """Asked to tick off an item where nothing ran, the 1.5B model answered with a line of the
    facts it was shown, an earlier turn's result with its label: the lane's words, not an answer."""
    problems = faults(answer, facts("kattmaten har jag köpt nu så bocka av den", session=session,
                                    offered=("write_file", "memory", "calculate")))
    assert ("the lane's own note copied" in problems) is copied


LIST = "1. [ ] book the van\n2. [ ] pack the kitchen"


@pytest.mark.parametrize("answer, results, passed", [
    ("todo (ok): 1. [ ] book the van\n2. [ ] pack the kitchen", [("todo", LIST)], LIST),
    ("- terminal (ok): exit code: 0\nhost-7", [("terminal", "exit code: 0\nhost-7\n")], "exit code: 0\nhost-7"),
    # the label and the start of a result that goes on: the result, whole
    ("read_file (ok): passport", [("read_file", "passport\nphone charger\nsunscreen\n")],
     "passport\nphone charger\nsunscreen"),
    ("todo (ok): 1. [ ] book the van", [("todo", LIST)], LIST),
    ("http_fetch (ok): HTTP 200 OK; text/html", [("http_fetch", "HTTP 200 OK; text/html\nOpen 9:30 to 13:00")],
     "HTTP 200 OK; text/html\nOpen 9:30 to 13:00"),
    # only a status line, a tool that did not run in this turn, a failure: the label stays (held back)
    ("http_fetch (ok): HTTP 200 OK; text/html", [("http_fetch", "HTTP 200 OK; text/html")], None),
    ("terminal (ok): exit code: 0", [("terminal", "exit code: 0")], None),
    ("todo (ok): 1. [ ] book the van", [("memory", "saved")], None),
    ("terminal (error): no such file", [("terminal", "no such file")], None),
])
def test_a_result_s_label_is_dropped_where_the_result_follows_it(answer, results, passed):
    from stack.agent.answer_check import unlabelled
    assert unlabelled(answer, results) == (passed or answer)
    ran = {name for name, _ in results}
    held = faults(unlabelled(answer, results), facts(ran=ran, results=tuple(o for _, o in results)))
    assert ("the lane's own note copied" in held) is (passed is None)


def test_a_long_result_is_not_passed_on_whole_for_a_copy_of_its_start():
    from stack.agent.answer_check import WHOLE_RESULT_CHARS, unlabelled
    page = "HTTP 200 OK; text/html\n" + "word " * WHOLE_RESULT_CHARS
    assert unlabelled("http_fetch (ok): HTTP 200 OK; text/html", [("http_fetch", page)]).startswith("http_fetch")


def test_every_note_the_lane_writes_to_the_model_is_held_back_when_copied(tmp_path):
    """The repeat breaker's results (which the composed answer reads as what ran), the lane's own
    account given for an answer held back, its receipt beside an answer, and the corrections'
    notes."""
    from stack.agent.answers import composed_answer
    from stack.agent.corrections import correction
    from stack.agent.ledger import repeated
    from stack.agent.llm_client import ModelReply
    from stack.agent.reading import OTHER, receipt
    from stack.agent.turn import Turn, TurnResult
    from stack.config import Settings
    from stack.store import Store
    from stack.tools.base import ToolContext
    from stack.tools.execute import Outcome

    f = facts("2 plus 3?", offered=("memory", "calculate"))
    notes = [receipt(["memory", OTHER], ["calculate"]),
             correction('I called the calculate function with {"expression": "2+3"}.', f).note,
             correction('{"name": "calculate", "expression": "2+3"}', f).note]
    for status in ("ok", "error"):
        earlier = Outcome("calculate", status, "5", "{\"expression\": \"2+3\"}", "2026-11-26T00:00:00", 1.0)
        notes.append(repeated("calculate", {"expression": "2+3"}, earlier).output)

    class Silent:
        async def chat(self, messages, tools, **options):
            return ModelReply(content="", tool_calls=[], finish_reason="stop", prompt_tokens=1,
                              completion_tokens=1, cached_tokens=0)

    settings = Settings(home=tmp_path)
    store = Store(settings.db_path)
    session = store.create_session("s")
    store.add_message(session, "user", "2 plus 3?")
    turn = Turn(TurnResult(session, "", "stop"), "2 plus 3?", "search", 64, 0.0,
                ToolContext(settings, store, session))
    ended, _ = asyncio.run(composed_answer(Silent(), store, turn, no_tools(settings), f))
    assert ended.content.startswith("No tool ran for this request")  # the lane's own account
    # held back with why, kept with the lane's own model calls: no note of it in the conversation
    assert [(c["purpose"], c["reason"]) for c in store.lane_calls(session)] == [("held", "the model gave no answer")]
    assert not [m for m in store.messages(session) if m.get("lane_note")]
    notes.append(ended.content)
    store.close()
    assert all(notes)
    for note in notes:
        assert "the lane's own note copied" in faults(note, f), note


RECEIPT = "Ich habe es gespeichert.\n\n(The lane's record: no tool ran for this request.)"
NOT_DONE_ANSWER = ("I have not done that: no tool ran for this request. I cannot send messages or email, book, buy, "
                   "pay, call or contact anyone: none of my tools does that.")


SAVED = "Notiz gespeichert: Friseur am Montag"


@pytest.mark.parametrize("session, confirmed, runs, notes, expected", [
    ({"memory"}, True, (("memory", SAVED),), (), RECEIPT),
    ({"memory"}, True, (("memory", "Friseur am Montag"),), (), NOT_DONE_ANSWER),
    ({"calculate"}, False, (("calculate", SAVED),), (), RECEIPT),
    ({"calculate"}, False, (("calculate", "Friseur am Montag"),), (), NOT_DONE_ANSWER),
    ({"calculate"}, True, (("calculate", SAVED),), (), RECEIPT),
    ({"calculate"}, True, (("calculate", "Friseur am Montag"),), (), NOT_DONE_ANSWER),
    (set(), True, (), ("Zahnarzt gespeichert",), RECEIPT),
    (set(), True, (), (SAVED,), NOT_DONE_ANSWER),
])
def test_an_unbacked_report_gets_the_lanes_receipt_or_the_lanes_own_answer(tmp_path, monkeypatch, session, confirmed,
                                                                            runs, notes, expected):
    """The reading (here scripted) says the answer reports memory, which did not run for the
    request and which this turn cannot call. Where the answer repeats a word of what an earlier
    memory run held, of what another tool's earlier run held, or of a note the request is about (a
    recall, whether or not the "which" probe confirmed the list), the answer reaches the user with
    the store's truth beside it; otherwise, even where memory ran earlier for something else or a
    note holds the word, the lane's own answer that nothing was done (lever "cannot"). Nothing is
    forced (where the tool can be called, lever "claimed" weighs it: tests/integration/test_agent_loop.py)."""
    from stack.agent import reading
    from stack.agent.answers import composed_answer
    from stack.agent.llm_client import ModelReply
    from stack.agent.turn import Turn, TurnResult
    from stack.config import Settings
    from stack.store import Store
    from stack.tools.base import ToolContext

    f = dataclasses.replace(facts("Merk dir: Zahnarzt am 3. März", offered=("memory", "calculate"), session=session),
                            descriptions=(("memory", "Save a note."), ("calculate", "Do arithmetic.")),
                            runs=runs, notes=notes)

    class Claiming:
        async def model_name(self):
            return "a-model-no-probe-was-fitted-for"

        async def chat(self, messages, tools, **options):
            content = '{"done": ["memory"]}' if options.get("response_schema") else "Ich habe es gespeichert."
            return ModelReply(content=content, tool_calls=[], finish_reason="stop", prompt_tokens=1,
                              completion_tokens=1, cached_tokens=0)

    settings = Settings(home=tmp_path)
    store = Store(settings.db_path)
    session_id = store.create_session("s")
    turn = Turn(TurnResult(session_id, "", "stop"), f.request, "search", 64, 0.0,
                ToolContext(settings, store, session_id))
    listed = reading.read_reported

    async def read(*args, **kwargs):  # a "which" probe that confirms the list, or none
        found, replies = await listed(*args, **kwargs)
        return dataclasses.replace(found, confirmed=confirmed), replies
    monkeypatch.setattr(reading, "read_reported", read)
    ended, fix = asyncio.run(composed_answer(Claiming(), store, turn, no_tools(settings), f))
    store.close()
    assert ended.content == expected
    assert fix is None and ended.lane_written == (expected.startswith("I have not"))


def test_a_repeat_is_the_same_text_under_another_mode_but_numbers_keep_their_places():
    from stack.agent.ledger import TurnLedger

    note = {"properties": {"action": {"enum": ["add", "replace"]}, "content": {"type": "string"},
                           "old_text": {"type": "string"}}}
    ledger = TurnLedger()
    first, _ = ledger.attempt("memory", {"action": "add", "content": "dentist 3 March"}, note)
    again, _ = ledger.attempt("memory", {"action": "replace", "content": "dentist 3 March",
                                         "old_text": "dentist 3 March"}, note)
    assert first == again
    numbers = {"properties": {"a": {"type": "number"}, "b": {"type": "number"}}}
    keys = {ledger.attempt("sub", args, numbers)[0] for args in ({"a": 5, "b": 3}, {"a": 3, "b": 5}, {"a": 5})}
    assert len(keys) == 3


def test_where_a_tool_found_something_out_the_answer_passes_that_on_not_a_write():
    """Seen: the list was read, then written back unchanged, and the answer, "I found the file
    lisbon_packing.txt and read it.", shared only the file's name with the write's result."""
    read, wrote = "passport\nsunscreen\ntram card", "wrote 28 bytes to lisbon_packing.txt"
    turn = TurnFacts("what's on lisbon_packing.txt so far?", {"read_file": {}, "write_file": {}},
                     {"read_file", "write_file"}, {"read_file", "write_file"}, results=(read, wrote), to_carry=(read,))
    assert "it leaves out what the tools returned" in faults("I found the file lisbon_packing.txt and read it.", turn)
    assert faults("It holds passport, sunscreen and a tram card.", turn) == []


def test_a_note_already_kept_passes_on_its_entry(tmp_path):
    from stack.config import Settings
    from stack.tools.base import ToolContext
    from stack.tools.memory import TOOLS as MEMORY_TOOLS

    settings = Settings(home=tmp_path)
    ctx = ToolContext(settings, None, "s")  # type: ignore[arg-type]
    [memory] = [t for t in MEMORY_TOOLS if t.name == "memory"]
    memory.run({"action": "add", "content": "Home wifi password: kettle-moon-42"}, ctx)
    again = memory.run({"action": "add", "content": "Home wifi password: kettle-moon-42"}, ctx)
    facts = TurnFacts("I forget the password of wifi at home, you know it?", {"memory": {}}, {"memory"},
                      {"memory"}, results=(again,))
    assert faults("The password for your home wifi is kettle-moon-42.", facts) == []
    assert faults("I'm not sure.", facts)  # says nothing of what is kept


@pytest.mark.parametrize("reply, forced", [
    ("Try this:\n```bash\ncp notes.txt backup/\n```", "cp"),
    ("Run `$ cp notes.txt backup/` and it is done.", "cp"),
    ("You can use the `cp` command for that.", None),  # a tool named, no call written
    ("```python\nprint(sorted([3, 1]))\n```", None),  # code, but no tool's name leads a line
    ("cp notes.txt backup/ copies it.", None),  # prose, not code
    ("```\nls -a\n```", None),  # a command of a tool the lane was not given
    ("Like this:\n```bash\ncp SOURCE DESTINATION\n```", None),  # a how-to: no word of the request
])
def test_a_call_written_as_a_command_in_code_forces_its_tool(reply, forced):
    from stack.agent.corrections import correction

    facts = TurnFacts("back up notes.txt", {"cp": {"type": "object"}, "mv": {"type": "object"}}, set(), set())
    fix = correction(reply, facts)
    assert (fix.force if fix is not None else None) == forced
    if forced:
        assert "nothing ran" in fix.note and "cp notes.txt backup/" in fix.note


@pytest.mark.parametrize("request_, answer", [
    ("Какая столица Франции?", "Столица Франции — Париж."),
    ("日本の首都はどこですか？", "東京です。"),
    ("Ποια είναι η πρωτεύουσα της Ελλάδας;", "Η Αθήνα."),
])
def test_an_answer_in_a_script_without_a_to_z_is_no_echo(request_, answer):
    """Words were once a-z only: both sides empty, every such answer was "the request echoed back"."""
    asked = TurnFacts(request_, {"memory": {}}, set(), set())
    assert faults(answer, asked) == [] and faults(request_, asked) == ["the request echoed back"]


@pytest.mark.parametrize("result, answer, carried", [
    ("Москва", "Это Москва.", True),
    ("Москва", "Это Париж.", False),
    ("東京", "首都は東京です。", True),
    ("東京", "わかりません。", False),
])
def test_a_result_in_any_script_is_carried_by_its_words(result, answer, carried):
    asked = TurnFacts("?", {"lookup": {}}, {"lookup"}, {"lookup"}, results=(result,))
    assert ("it leaves out what the tools returned" not in faults(answer, asked)) is carried


@pytest.mark.parametrize("request_, answer, echoed", [
    # the request again in another order, or less a few words
    ("Bitte lies mir die Datei liste.txt vor und zähle ihre Zeilen.",
     "Lies mir bitte die Datei liste.txt vor und zähle ihre Zeilen.", True),
    ("Para terminar, resume esta conversación y di qué herramientas usaste.",
     "Resume esta conversación y di qué herramientas usaste.", True),
    # what the request asks for word for word, or an answer with words of its own
    ("Reply with just the words blue harbour lantern, nothing else.", "blue harbour lantern", False),
    ("Bitte lies mir die Datei liste.txt vor.", "Die Datei liste.txt hat drei Zeilen: Brot, Milch, Eier.", False),
])
def test_an_answer_of_the_request_s_words_is_an_echo_in_any_order(request_, answer, echoed):
    assert ("the request echoed back" in faults(answer, facts(request_))) is echoed


def no_tools(settings):
    """A turn's tool surface with no tool in it."""
    from stack.tools.registry import Registry
    from stack.toolsearch.surface import assemble

    return assemble(Registry([]), settings)


def test_a_report_of_an_earlier_tool_is_a_recall_only_where_it_names_the_tool_or_repeats_its_run():
    """That todo ran earlier is no proof a new item was added: the answer must repeat what its
    run held (argument values or result) beyond the request's words, or name the tool without
    being more about this request than about what ran; a note counts only where the request is
    about it."""
    from stack.agent.answer_check import recalls_note, recalls_run, run_text

    request = "et puis réserve nous une table pour quatre chez Marcel samedi soir"
    todo = run_text('{"action": "set", "items": ["acheter du pain", "colis à la poste"]}',
                    "1. [ ] acheter du pain\n2. [ ] colis à la poste")
    f = dataclasses.replace(facts(request, session={"todo"}), runs=(("todo", todo),),
                            notes=("Marcel prefers the corner table", "Priya's office is on Baker Street"))
    new_item = "Je vous ai ajouté une tâche : Table pour quatre chez Marcel samedi soir."
    assert not recalls_run(new_item, "todo", f)
    assert recalls_run("Votre liste a déjà : acheter du pain.", "todo", f)
    assert recalls_run("J'ai utilisé todo plus tôt.", "todo", f)
    # naming the tool is no recall where the answer is this request's words (about_request)
    assert not recalls_run("Ajouté avec todo : une table pour quatre chez Marcel samedi soir.", "todo", f)
    assert not recalls_run("J'ai utilisé memory plus tôt.", "memory", f)  # memory never ran
    assert not recalls_run("I set the action for you.", "todo", f)  # argument names are not its content
    # the same todo failed for this request: the answer reports that attempt, not the earlier run
    failed = dataclasses.replace(f, failed=frozenset({"todo"}))
    assert not recalls_run("Votre liste a déjà : acheter du pain.", "todo", failed)
    assert recalls_note("Noted: Marcel likes the corner table.", f)
    assert not recalls_note("Noted: Priya's office is on Baker Street.", f)


LOOP = "Rappelé le plombier pour la fuite. Rappelé le colis à la poste. Ajouté du pain à la liste. "


@pytest.mark.parametrize("answer, loops", [
    (LOOP * 3 + "Rappelé le", True),  # cut at the token cap mid-loop
    (LOOP * 2, False),
    ("我已经记下了这个笔记。我已经记下了这个笔记。我已经记下了这个笔记。", True),  # no space after "。"
    ("- buy bread and milk\n- buy bread and eggs\n- buy bread and jam", False),  # a list's lines differ
    ("Ja. Ja. Ja. Das ist alles.", False),  # a word said thrice is no loop of sentences
    ("Der Wert ist 3.5 Meter\nDer Wert ist 3.5 Meter\nDer Wert ist 3.5 Meter", True),
])
def test_an_answer_saying_one_sentence_over_and_over_is_held(answer, loops):
    assert ("it says the same thing over and over" in faults(answer, facts("Réserve une table."))) is loops


@pytest.mark.parametrize(("answer", "sources", "stray"), [
    ("The command prints `e262f88f`.", "Run `cat .token | rev`\n88f262de", ["e262f88f"]),  # copied wrong
    ("It printed 88F262DE.", "Run `cat .token | rev`\n88f262de", []),
    ("The file has 25 lines.", "How many lines?\n0 row 0\n24 row 24", []),  # a count, worked out
    ("Her birthday is on the 14th, at 5pm; 12gb free.", "14 March", []),  # ordinals and units are short
    ("Saved the codename LANTERN-9574.", "Save the codename LANTERN-9574\nEntry added.", []),
])
def test_an_answer_s_identifier_that_no_source_holds_was_copied_wrong(answer, sources, stray):
    assert unsourced_ids(answer, sources) == stray


def test_an_agent_answer_after_results_stating_an_identifier_no_source_holds_is_not_passed_on(monkeypatch):
    """The proxy's check in the agent's faults: one mechanism. The machine's host name (a
    container's is hex) is a source too; the numbers and carry checks pass this one."""
    from stack.agent import answer_check

    monkeypatch.setattr(answer_check, "machine", lambda: "This computer: user me, host name 9c2e4f1a7b3d.")
    turn = TurnFacts("what is the latest commit?", {"terminal": {}}, {"terminal"}, {"terminal"},
                     results=("exit code: 0\n3f9a2c17 Fix the parser",))
    assert faults("The latest commit is 3a9f2c17: Fix the parser.", turn) == [
        "it states 3a9f2c17, which no result holds"]
    assert faults("The latest commit is 3f9a2c17: Fix the parser.", turn) == []
    assert faults("The latest commit is 3f9a2c17: Fix the parser, on 9c2e4f1a7b3d.", turn) == []
    assert faults("The latest commit is c0ffee42.", TurnFacts("hash?", {}, set(), set())) == []  # nothing ran
