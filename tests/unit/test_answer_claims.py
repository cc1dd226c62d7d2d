"""What an answer claims was done (store/claims.py) and what the agent holds back (corrections.faults)."""

import asyncio
import dataclasses

import pytest

from stack.agent.corrections import TurnFacts, asks_about_session, faults, unsourced_numbers, with_session_record
from stack.store.claims import BUILTIN_TOOLS, claimed_tools, unbacked_claims
from stack.tools.terminal import exited_nonzero

VOCABULARY = BUILTIN_TOOLS | {"world_clock", "calculate", "run_python"}


@pytest.mark.parametrize("answer, backed_by", [
    ('I added "teal" to my memory.', {"memory"}),
    ('I added "Hello, world!" to my memory.', {"memory"}),
    ("Got it, I'll remember that your favourite colour is teal.", {"memory"}),
    ("I ran the world_clock tool with the timezone argument set to 'Asia/Tokyo'.", {"world_clock"}),
    ("I ran the percentage tool with the numerator set to 12.5.", {"percentage"}),
    ("The calculate tool gave 46.", {"calculate"}),
    ("The file notes.txt has been created with the line hello lane.", {"write_file"}),
    ("I searched your past sessions and found the id.", {"session_search"}),
    ("I found the plumber's name in our earlier conversations: Mr Novak.", {"session_search"}),
    ("The files in the workspace were listed using the shell.", {"terminal"}),
    ("I wrote down that the plumber comes on Friday.", {"memory"}),
    ('I wrote "flour eggs milk" to list.txt.', {"write_file"}),
    ("I opened list.txt and it says flour.", {"read_file"}),
    ("I read it back to you.", {"read_file"}),  # nothing was read: seen after "read it back to me"
    ("Sure, here's what I read back to you: - Bike lock code: 4471", {"read_file"}),  # the notes, as a file
    ('I searched for files containing "eggs".', {"search_files"}),
    ("I renamed notes_old.txt to notes.txt.", {"terminal"}),
    ("I've marked the bank call as done.", {"todo"}),  # seen with nothing run
    ("I found the recipe.txt file and read it.", {"read_file"}),  # seen for "read it back to me"
    ("I ticked the van off.", {"todo"}),
    ("I read the last message back to you.", {"read_file"}),  # seen for "read it back to me", nothing run
    ("The bank appointment is now done.", {"todo"}),  # seen for "mark it on my list", nothing run
    ("I found the invoice number in the notes_fresh folder to be 12345.", {"read_file"}),  # seen, nothing run
    # seen, nothing run, for "Called the bank just now, so that one's done"
    ("The task of returning the library books is done.", {"todo"}),
    # seen with nothing run, for "note that somewhere for when I ask later"
    ("I noted the information about the recipes_nov folder for the supper club.", {"memory"}),
    ("I saved the note as a new entry.", {"memory"}),  # seen, the memory call refused
    ("I have saved the recipe, so you can find it later.", {"memory"}),  # a hedge after the claim
])
def test_a_statement_that_work_was_done_is_a_claim(answer, backed_by):
    claims = claimed_tools(answer, VOCABULARY)
    assert claims and any(backed_by <= tools for _, tools in claims)


def test_a_file_renamed_is_not_backed_by_writing_a_file():
    answer = "I renamed notes_old.txt to notes.txt."
    assert unbacked_claims(answer, {"write_file"}, VOCABULARY)
    assert not unbacked_claims(answer, {"terminal"}, VOCABULARY)


@pytest.mark.parametrize("answer", ["I sent the webpage to her.", "I've booked a table for two at 8.",
                                    "I have emailed the report to Marta."])
def test_work_outside_the_computer_is_a_claim_only_a_tool_for_it_backs(answer):
    [(_, tools)] = claimed_tools(answer, VOCABULARY)
    assert tools == frozenset()  # no built-in tool sends, books or mails
    assert unbacked_claims(answer, set(VOCABULARY), VOCABULARY)
    with_mail = VOCABULARY | {"mail__send_message", "calendar__book_table"}
    assert unbacked_claims(answer, {"mail__send_message", "calendar__book_table"}, with_mail) == []


def test_an_invented_tool_named_as_used_is_a_claim_nothing_backs():
    answer = "Tools used: save_memory, run_shell, memory."
    claims = claimed_tools(answer, VOCABULARY)
    assert {frozenset({"save_memory"}), frozenset({"run_shell"}), frozenset({"memory"})} <= {t for _, t in claims}
    assert [t for _, t in unbacked_claims(answer, {"memory"}, VOCABULARY)] == [
        frozenset({"run_shell"}), frozenset({"save_memory"})]


def test_each_tool_named_as_used_is_its_own_claim():
    claims = claimed_tools("I used memory and terminal in this session.", VOCABULARY)
    assert sorted(tools for _, tools in claims) == [frozenset({"memory"}), frozenset({"terminal"})]


@pytest.mark.parametrize("answer", [
    "I can save notes to memory, run commands and read files.",
    "Should I save it to memory?",
    "I did not run the command.",
    "You can use the terminal to run commands.",
    "Run ls in the terminal to see them.",
    "The answer is 391.",
    "Hello! How can I help you today?",
    "I can send it to her if you give me a tool for email.",
    "I read books about it.",
    "The task was done by the team in March.",
])
def test_capability_questions_negations_and_plain_answers_claim_nothing(answer):
    assert claimed_tools(answer, VOCABULARY) == []


def test_a_claim_is_backed_by_any_tool_that_does_that_work():
    answer = "The file notes.txt has been created."
    assert unbacked_claims(answer, {"terminal"}, VOCABULARY) == []
    assert unbacked_claims(answer, {"memory"}, VOCABULARY)


def facts(request="2 plus 3?", ran=(), results=(), session=(), offered=("memory", "calculate")):
    return TurnFacts(request, {name: {} for name in offered}, set(session), set(ran),
                     asks_about_session(request), tuple(results))


NARRATED = "it tells of the user or the assistant instead of answering"


@pytest.mark.parametrize("answer, problem", [
    ("", "the model gave no answer"),
    ("I'm sorry, but I need more information to answer your question.", "a stock apology"),
    ("I'm sorry, but I don't have enough information to answer your question.", "a stock apology"),
    ("2 plus 3?", "the request echoed back"),
    ('{"name": "calculate", "arguments": {"expression": "2+3"}}', "a tool call written as text"),
    ("Already done: this exact call ran earlier in this turn and returned: 5", "the lane's own note copied"),
    ("Answer not passed on: a stock apology", "the lane's own note copied"),
    ("http_fetch (ok): HTTP 200 OK; text/html", "the lane's own note copied"),  # a fact line, cut short
    ("session_search ran for the user's last message.", "the lane's own note copied"),  # the answer prompt's header
    ("I saved it to memory.", "it says memory did something that did not run"),
    ("I sent the page to her.", "it says something was done that no tool here can do"),
    ("The user asked for the free disk space on their computer.", NARRATED),
    ("The assistant will send the information to Ingrid.", NARRATED),
])
def test_an_answer_that_gives_nothing_or_claims_is_held_back(answer, problem):
    assert problem in faults(answer, facts())


PROMISE = "it promises to do something, and nothing was done"


@pytest.mark.parametrize("answer", ["I understand. I will change the birthday to July 14th.", "I'll remember that!",
                                    "Sure, let me look that up for you.", "OK, I'm going to rename it now.",
                                    "Sure, I can read it back to you."])
def test_a_promise_where_nothing_was_done_is_held_back(answer):
    assert PROMISE in faults(answer, facts())


@pytest.mark.parametrize("answer, done", [
    ("Let me know if you need anything else.", ()),
    ("I'll gladly help: which file do you mean?", ()),  # it asks
    ("Hello! How can I assist you today?", ()),
    ("Sure, I can help with that. Spiders have eight legs.", ()),
    ("The sum is 5. I will keep it in mind.", ("5",)),  # something was done
])
def test_no_promise_where_the_answer_asks_or_a_tool_ran(answer, done):
    assert PROMISE not in faults(answer, facts(ran=("calculate",) if done else (), results=done))


@pytest.mark.parametrize("answer", ["The user you are logged in as is root.", "The assistant here runs on your laptop.",
                                    "You asked for 2 plus 3: it is 5."])
def test_an_answer_about_a_user_account_or_the_assistant_is_no_narration(answer):
    assert NARRATED not in faults(answer, facts())


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


def test_a_question_about_the_session_holds_claims_to_the_session():
    question = "which tools did you use so far?"
    assert faults("I used memory earlier.", facts(question, session={"memory"})) == []
    assert faults("I used memory.", facts(question, session={"memory"})) == []
    # asked something else, a claim that does not point back is held to this turn
    assert faults("I used memory.", facts("what is 2 plus 3?", session={"memory"}))


def test_a_fact_label_copied_to_the_front_of_an_answer_is_dropped():
    from stack.agent.corrections import unlabelled

    assert unlabelled("The assistant answered: 42") == "42"
    assert unlabelled("Assistant: hello there") == "hello there"
    assert unlabelled("The answer is 42.") == "The answer is 42."


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
    from stack.agent.corrections import unlabelled
    assert unlabelled(answer, results) == (passed or answer)
    ran = {name for name, _ in results}
    held = faults(unlabelled(answer, results), facts(ran=ran, results=tuple(o for _, o in results)))
    assert ("the lane's own note copied" in held) is (passed is None)


def test_a_long_result_is_not_passed_on_whole_for_a_copy_of_its_start():
    from stack.agent.corrections import WHOLE_RESULT_CHARS, unlabelled
    page = "HTTP 200 OK; text/html\n" + "word " * WHOLE_RESULT_CHARS
    assert unlabelled("http_fetch (ok): HTTP 200 OK; text/html", [("http_fetch", page)]).startswith("http_fetch")


def test_every_note_the_lane_writes_to_the_model_is_held_back_when_copied(tmp_path):
    """The repeat breaker's results (which the composed answer reads as what ran), the lane's own
    account given for an answer held back, and proxy mode's corrections."""
    from stack.agent.answers import composed_answer
    from stack.agent.corrections import correction, repeated
    from stack.agent.llm_client import ModelReply
    from stack.agent.turn import Turn, TurnResult
    from stack.config import Settings
    from stack.store import Store
    from stack.tools.base import ToolContext
    from stack.tools.execute import Outcome

    f = facts("2 plus 3?", offered=("memory", "calculate"))
    notes = [correction("I saved it to memory.", f).note,
             correction('I called the calculate function with {"expression": "2+3"}.', f).note,
             correction('{"name": "calculate", "expression": "2+3"}', f).note,
             correction("You are logged in as alice.", facts("who am I?", offered=("terminal",))).note]
    for status in ("ok", "error"):
        earlier = Outcome("calculate", status, "5", "{\"expression\": \"2+3\"}", "2026-11-26T00:00:00", 1.0)
        notes.append(repeated("calculate", {"expression": "2+3"}, earlier).output)

    class Apologetic:
        async def chat(self, messages, tools, **options):
            return ModelReply(content="I'm sorry, but I need more information.", tool_calls=[],
                              finish_reason="stop", prompt_tokens=1, completion_tokens=1, cached_tokens=0)

    settings = Settings(home=tmp_path)
    store = Store(settings.db_path)
    session = store.create_session("s")
    store.add_message(session, "user", "2 plus 3?")
    turn = Turn(TurnResult(session, "", "stop"), "2 plus 3?", "search", 64, 0.0,
                ToolContext(settings, store, session))
    ended, _ = asyncio.run(composed_answer(Apologetic(), store, turn, f))
    assert ended.content.startswith("No tool ran for this request")  # the lane's own account
    # held back with why, kept with the lane's own model calls: no note of it in the conversation
    assert [(c["purpose"], c["reason"]) for c in store.lane_calls(session)] == [("held", "a stock apology")]
    assert not [m for m in store.messages(session) if m.get("lane_note")]
    notes.append(ended.content)
    store.close()
    assert all(notes)
    for note in notes:
        assert "the lane's own note copied" in faults(note, f), note


def test_a_repeat_is_the_same_text_under_another_mode_but_numbers_keep_their_places():
    from stack.agent.corrections import TurnLedger

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


@pytest.mark.parametrize("answer, checker", [
    ('You are logged in as the user named "your_username".', "terminal"),
    ("The full path of the current directory is `/home/your_username`.", "terminal"),
    ("The Python version installed on this machine is 3.8.10.", "terminal"),
    ("This machine is called dev-box-01.", "terminal"),
    ("The current time in Paris is 10:43 AM (UTC+02:00).", "world_clock"),
    ("It's 14:05 right now.", "world_clock"),
    ("Today is Friday, the 27th.", "world_clock"),
    ("The day of the week is Friday.", "world_clock"),  # seen after only session_search ran
    ("The year is 2026.", "world_clock"),  # seen for "What year is it? Check with the date command"
    ("The year 1969 is when people first walked on the moon.", None),
    ("The number of lines in beta.csv is 10.", "terminal"),
    ("notes.txt contains three lines: apples, rice, soap.", "terminal"),
    ("The files in the workspace are alpha.txt and beta.csv.", "terminal"),
    ("The folder contains the files: notes.txt, notes_old.txt, and session_search.log.", "terminal"),
    ("The banana bread recipe is approximately 10 lines long.", "terminal"),
    ("A sonnet is 14 lines long.", None),
    ("A folder has room for many files.", None),
    ("Python 3.12 was released in October 2023.", None),
    ("The boiling point of water is 212 °F.", None),
    ("A hexagon has 6 sides.", None),
    ("Your dentist appointment is on March 3rd at 10:30.", None),
    ("You're welcome! Enjoy your groceries.txt list.", None),
    ("I can run shell commands in your workspace, like listing files.", None),
])
def test_a_fact_about_the_machine_its_clock_or_its_files_is_unchecked_only_when_nothing_ran(answer, checker):
    from stack.agent.corrections import TurnFacts, correction, unchecked_fact_tools

    offered = {"terminal": {}, "world_clock": {}}
    nothing_ran = TurnFacts("q", offered, set(), set())
    assert (unchecked_fact_tools(answer, nothing_ran) or (None,))[0] == checker
    fix = correction(answer, nothing_ran)
    assert (fix.force, fix.kind) == (checker, "fact") if checker else fix is None
    if checker == "world_clock":  # a lane without the clock checks the time with a command
        fix = correction(answer, TurnFacts("q", {"terminal": {}}, set(), set()))
        assert fix is not None and fix.force == "terminal"
    after_a_command = TurnFacts("q", offered, {"terminal"}, {"terminal"}, results=("alice",))
    assert unchecked_fact_tools(answer, after_a_command) is None
    after_another_tool = TurnFacts("q", offered, {"session_search"}, {"session_search"}, results=("s1",))
    assert (unchecked_fact_tools(answer, after_another_tool) or (None,))[0] == checker


@pytest.mark.parametrize("request_, answer, record", [
    # seen: calculate had run too, and the answer named only memory
    ("Which things did you actually do for me in this chat, with which tools?",
     "I saved the home wifi password to memory.", "calculate, memory"),
    ("which tools did you run in this conversation?", "I used memory and calculate.", None),  # names them all
    ("what did I say about the router earlier?", "It is in the hallway cupboard.", None),  # not about its work
    ("Which tools you really used in this chat?", "None.", "calculate, memory"),
    ("which of ur tools did u use for those answers", "I used memory.", "calculate, memory"),  # texting's "u"
])
def test_a_question_about_the_assistants_work_gets_the_sessions_record(request_, answer, record):
    turn = TurnFacts(request_, {}, {"memory", "calculate", "tool_search"}, set(), asks_about_session(request_))
    expected = answer if record is None else f"{answer}\n(From this chat's record, the tools that ran: {record}.)"
    assert with_session_record(answer, turn) == expected


def test_a_question_in_texting_voice_about_the_session_is_held_to_the_session():
    """Seen: "I used the terminal for the hostname ..." held back (and the terminal run again)
    because "did u use" did not read as a question about the session."""
    request_ = "which of ur tools did u use for those answers"
    assert asks_about_session(request_)
    turn = TurnFacts(request_, {"terminal": {}}, {"terminal"}, set(), asks_about_session(request_))
    assert faults("I used the terminal for the hostname and the git version.", turn) == []


def test_where_a_tool_found_something_out_the_answer_passes_that_on_not_a_write():
    """Seen: the list was read, then written back unchanged, and the answer, "I found the file
    lisbon_packing.txt and read it.", shared only the file's name with the write's result."""
    read, wrote = "passport\nsunscreen\ntram card", "wrote 28 bytes to lisbon_packing.txt"
    turn = TurnFacts("what's on lisbon_packing.txt so far?", {"read_file": {}, "write_file": {}},
                     {"read_file", "write_file"}, {"read_file", "write_file"}, results=(read, wrote), to_carry=(read,))
    assert "it leaves out what the tools returned" in faults("I found the file lisbon_packing.txt and read it.", turn)
    assert faults("It holds passport, sunscreen and a tram card.", turn) == []


def test_a_file_name_in_snake_case_is_no_tool_named_as_used():
    """Seen: held back as a claim that "shop_nov" ran."""
    answer = "I ran the Python script to sum the amount column in the file shop_nov.csv. The total is 38.40."
    assert unbacked_claims(answer, {"run_python"}, VOCABULARY) == []
    assert unbacked_claims("I ran shop_nov for you.", {"run_python"}, VOCABULARY)  # a name, not a file


PLUMBER = ("- The user said: I think I mentioned a plumber once\n  session_search returned: matched (user): "
           "the plumber was called Ostrowski, and he charged 180 euros.\n  The assistant answered: I found Ostrowski.")


@pytest.mark.parametrize("answer, stray", [
    ("I found Ostrowski charged $100 for the plumber service.", "100"),  # seen
    ("Ostrowski is a plumber. He charged 300.", "300"),
    ("Ostrowski charged 180 euros.", None),
    ("He charged 250 euros.", None),  # names nothing of the earlier turns: not held to them
    ("A grown-up human has 206 bones.", None),
])
def test_with_nothing_run_an_answer_that_draws_on_earlier_turns_holds_their_numbers(answer, stray):
    held = faults(answer, TurnFacts("And how much did he charge?", {}, set(), set(), False, (), PLUMBER))
    assert held == ([f"it states {stray}, which no result holds"] if stray else [])


def test_a_note_kept_somewhere_is_backed_by_any_tool_that_keeps_one():
    answer = "I noted the information about the recipes_nov folder for the supper club."
    assert unbacked_claims(answer, set(), VOCABULARY)
    assert unbacked_claims(answer, {"world_clock"}, VOCABULARY)
    for keeper in ("memory", "todo", "write_file"):
        assert unbacked_claims(answer, {keeper}, VOCABULARY) == []
    assert claimed_tools("I can save notes for you.", VOCABULARY) == []


def test_ive_noted_the_thing_is_backed_by_a_todo_and_ive_noted_it_by_memory_alone():
    """Seen: "jot down the 9 December appointment somewhere" ran todo, and "I've noted the 9
    December appointment for you." was held to memory, which was then forced to save it again.
    "I've noted it" stays memory's, as the everyday bench's judge reads it."""
    assert unbacked_claims("I've noted the 9 December appointment for you.", {"todo"}, VOCABULARY) == []
    assert unbacked_claims("I've noted the 9 December appointment for you.", set(), VOCABULARY)
    for memory_only in ("I've noted it.", "I made a note of that.", "Got it, I'll remember."):
        assert [tools for _, tools in unbacked_claims(memory_only, {"todo"}, VOCABULARY)] == [frozenset({"memory"})]


@pytest.mark.parametrize("answer, claimed", [
    # seen after run_python ran: "calculate" is a verb here, not the tool
    ("I ran the Python script to calculate the average amount in shop_nov.csv: about 6.4.", []),
    ("I used calculate: 5.", ["calculate"]),
    ("I ran the calculate tool.", ["calculate"]),
    ("I used todo to keep the list.", ["todo"]),
    ("I used memory, run_python and calculate.", ["calculate"]),
    ("You could patch the file or calculate it by hand.", []),
])
def test_a_tool_named_by_an_everyday_word_is_named_only_as_a_name(answer, claimed):
    vocabulary = frozenset({"calculate", "run_python", "todo", "patch"})
    assert [sorted(tools)[0] for _, tools in unbacked_claims(answer, {"run_python"}, vocabulary)] == claimed


MV_FAILED = "exit code: 1\nmv: cannot stat '/root/workspace/freelance/invoice.txt': No such file or directory\n"


@pytest.mark.parametrize("answer, held", [
    # seen on the 1.5B model after this `mv`: the work claimed, the command's failure left out
    ("I found the file 'invoice.txt' in the freelance folder and moved it to the 'notes_fresh' folder.", True),
    ("I have moved invoice.txt to the other folder.", True),
    ("I ran the command, and mv says it cannot stat invoice.txt: no such file or directory.", False),
    ("I searched the folder: there is no invoice.txt, mv says no such file or directory.", False),
])
def test_a_command_that_exited_non_zero_backs_that_it_ran_not_that_its_work_got_done(answer, held):
    failed = TurnFacts("ok now move it to the other folder", {"terminal": {}, "read_file": {}}, {"terminal"},
                       {"terminal"}, results=(MV_FAILED,), unfinished=frozenset({"terminal"}))
    assert any("did something that did not run" in p for p in faults(answer, failed)) is held
    assert not any("did something that did not run" in p
                   for p in faults(answer, dataclasses.replace(failed, unfinished=frozenset())))


def test_exit_codes_other_than_zero_are_unfinished_work():
    assert exited_nonzero(MV_FAILED) and exited_nonzero("exit code: -9\n") and exited_nonzero("exit code: 10\n")
    assert not exited_nonzero("exit code: 0\nfine") and not exited_nonzero("exit code: 01\n")
    assert not exited_nonzero("the exit code: 1 of another") and not exited_nonzero("exit code: 0 (timeout lowered)\n")


def _facts(request: str, ran_in_session: set[str], ran_in_turn: set[str] = frozenset()) -> TurnFacts:
    return TurnFacts(request, {name: {} for name in VOCABULARY}, set(ran_in_session), set(ran_in_turn),
                     asks_about_session(request))


def test_a_claim_is_held_to_this_turn_unless_the_request_asks_about_the_session():
    request = "I forget the password of wifi at home, you know it?"
    earlier = "I saved it earlier: the home wifi password is kettle-moon-42."
    assert any("memory" in f for f in faults(earlier, _facts(request, {"memory"})))
    assert not any("did not run" in f for f in faults(earlier, _facts("what did you save earlier?", {"memory"})))


@pytest.mark.parametrize("answer", ["I used the tools to find it.", "I used several different tools in this chat."])
def test_tools_said_to_be_used_without_a_name_are_backed_by_any_tool_that_ran(answer):
    from stack.agent.corrections import correction

    question = "which tools did you use in this chat?"
    assert "it says tools ran, and none did" in faults(answer, _facts(question, set()))
    assert faults(answer, _facts(question, {"world_clock"})) == []
    assert correction(answer, _facts(question, set())) is None  # no tool is meant: none is forced
    assert claimed_tools("I can use the tools you need.", VOCABULARY) == []


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


def test_a_claim_forces_the_tool_the_index_ranks_best_of_those_that_would_back_it():
    from stack.agent.corrections import correction

    offered = {name: {} for name in VOCABULARY}
    request = "now show me what's in the folder"
    fix = correction("I found the folder.", TurnFacts(request, offered, set(), set(),
                                                      ranked=("write_file", "terminal", "search_files")))
    assert fix is not None and fix.force == "terminal"
    unranked = correction("I found the folder.", TurnFacts(request, offered, set(), set()))
    assert unranked is not None and unranked.force == "read_file"  # by name, where the index says nothing


RECALL = "By the way, what was my dentist's name again? I told you about him after my appointment."


@pytest.mark.parametrize("answer, held", [
    ("Your dentist's name was Dr. John Smith.", True),  # seen, nothing run: nobody said it
    ("Your dentist's name is Dr Okonkwo.", False),
    ("Your dentist is Dr Okonkwo, and the crown costs 640 euros.", False),
    ("Your dentist is Dr Okonkwo, and the crown costs 720 euros.", True),
])
def test_an_answer_to_what_the_user_told_holds_only_what_the_conversation_said(answer, held):
    from stack.agent.corrections import recalls

    assert recalls(RECALL) and recalls("And who did I say was collecting me from the airport?")
    assert not recalls("what's the capital of France again?")
    facts = TurnFacts(RECALL, {}, set(), set(),
                      user_said=("ugh, Dr Okonkwo says I need a crown on a lower molar, 640 euros",))
    assert bool(faults(answer, facts)) is held
    # a knowledge question holds its answer to nothing said
    knowledge = TurnFacts("what's the capital of France again?", {}, set(), set())
    assert faults("The capital of France is Paris.", knowledge) == []


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
