"""The answer check: whether a composed answer may reach the user as it is, from its shape and the
store, never from its wording.

What is checked here needs no word list, so it holds in any language: an answer that is empty,
is the user's whole message sent back, copies a note the lane wrote to the model, is a tool call
written as text, leaves out every result of the turn, or states a number or a clock time no
result holds. Whether the answer says something was done is read by the model under a grammar
and held to the store (reading.py). Why each check exists, with what was measured, is in
docs/measurements.md ("The answer check").
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Collection, Sequence

from ..store.claims import text_tool_calls
from ..tools.base import plain_words, says_nothing
from ..tools.execute import Outcome
from .history import RETURNED
from .ledger import preview
from .situation import machine
from .toolcalls import json_values

# An answer of the request's words only, at least this share of them, is the request echoed back.
ECHO_SHARE = 0.8
RESULT_SCAN_CHARS = 4000
# An identifier (unsourced_ids) is at least this long: "14th", "12gb" and "5pm" are not.
ID_CHARS = 6
# A result an answer copied the start of, with its label, is passed on whole up to this size.
WHOLE_RESULT_CHARS = 1500
# A sentence of at least REPEAT_WORDS words said REPEATS times is a loop (repeats_itself).
REPEATS = 3
REPEAT_WORDS = 3
# Shorter words tell little about whether an answer carries a result ("the", "und", "les").
SALIENT_LETTERS = 4
# The fixed words of the notes the lane writes to the model (data: the lane's own sentences, not the
# user's language); a reply holding one copied a note.
LANE_WORDS = ("Do not call it again", "Already done: this exact call", "Not run: this exact call",
              "reply with only:", "a tool only runs when", "but did not make it, so nothing ran",
              "That was not a valid call", "has not run for this request", "has not run for it yet",
              "now with the arguments the request needs", "The latest tool result was",
              "Answer not passed on", "I could not write a reliable answer",
              "so I have no checked answer to give", "The model's reply was not passed on",
              "ran for the user's last message", "Nothing has run for the user's", "The lane's record:",
              "The model gave no final answer", "What your tools returned for this request")
# The labels the lane's own questions put before facts (history.earlier_facts, prompt.turn_facts),
# which a small model copies to the front of its answer ("The assistant answered: 42").
FACT_LABELS = ("the assistant answered:", "the assistant said:", "the user said:", "the user's message:",
               "assistant:")
# The first line the terminal and run_python put before their output: not what they returned.
EXIT_CODE = "exit code:"


@dataclass(frozen=True)
class TurnFacts:
    """What an answer is held to, besides its own words."""

    request: str  # the user's message of this turn
    offered: dict[str, dict[str, Any]]  # each callable tool's argument schema
    ran_in_session: set[str]
    ran_in_turn: set[str]
    results: tuple[str, ...] = ()  # the outputs of the tools that ran ok in this turn
    earlier: str = ""  # what earlier turns said and returned, as the answer's question showed it
    user_said: tuple[str, ...] = ()  # the user's messages in this session and the notes the lane keeps
    failed: frozenset[str] = frozenset()  # the tools that ran and failed in this turn
    # the results the answer must pass on (one of them): those of the tools that found something
    # out, where any ran; empty for all of `results`
    to_carry: tuple[str, ...] = ()
    # the tools the index ranks best for the request, best first: which one a claim forces
    ranked: tuple[str, ...] = ()
    descriptions: tuple[tuple[str, str], ...] = ()  # the granted tools as (name, description)
    # each run of earlier turns as (tool, run_text): its argument values, and its result unless the
    # tool only confirms a change (Tool.confirms): "wrote 53 bytes to …" is the lane's receipt in
    # its own words, which an answer claiming a new write repeats ("I wrote …", seen on the
    # held-out actions file), not what the run held
    runs: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()  # the notes the lane keeps (memory), one entry each

    @cached_property
    def held_words(self) -> frozenset[str]:
        """What earlier turns held, as an answer recalling them would repeat it: the names of the
        tools that ran, the salient words of their runs and of the notes (about_request). Worked
        out once a turn: an answer naming several tools asks for it once each."""
        held = set(plain_words(" ".join(name for name, _ in self.runs)).split())
        for _, run in self.runs:
            held |= _salient(run[:RESULT_SCAN_CHARS])
        for note in self.notes:
            held |= _salient(note)
        return frozenset(held)


def faults(content: str, facts: TurnFacts) -> list[str]:
    """Why an answer may not reach the user as it is, from its shape (empty when it may)."""
    text = content.strip()
    if not text:
        return ["the model gave no answer"]
    problems = []
    if echoes(text, facts.request) and not any(plain_words(text) in plain_words(r) for r in facts.results):
        problems.append("the request echoed back")  # not when a tool returned those words (a note saved)
    if copies_facts(text, {*facts.ran_in_session, *facts.offered}):
        problems.append("the lane's own note copied")
    if repeats_itself(text):
        problems.append("it says the same thing over and over")
    if call_shaped(text, frozenset(facts.offered)):
        problems.append("a tool call written as text")
    if facts.results and not carries(text, facts.to_carry or facts.results, facts.earlier, facts.ran_in_turn,
                                     facts.user_said):
        problems.append("it leaves out what the tools returned")
    stray = unsourced_numbers(text, facts) if facts.results or facts.failed else []
    if facts.results:  # as lever "carry" in proxy mode: an identifier can only be copied
        stray += unsourced_ids(text, "\n".join([facts.request, *facts.user_said, *facts.results, facts.earlier,
                                                *(run for _, run in facts.runs)]))
    if stray:
        problems.append(f"it states {stray[0]}, which no result holds")
    return problems


def echoes(text: str, request: str) -> bool:
    """Whether an answer is the request again: every word of it is a word of the request, and it
    holds at least ECHO_SHARE of the request's words (in any order: seen on the 1.5B model, the
    six steps in German, "Führen Sie den Befehl `echo $((6*7))` auf der Kommandozeile aus und halten
    Sie die Ausgabe … fest." for "Führen Sie bitte auf der Kommandozeile den Befehl … aus und
    halten Sie …", and the summary request less its first two words as the summary). What a
    request asks for word for word is a part of it ("Reply with just ACK 7f3a"), not most of it."""
    said, asked = plain_words(text).split(), plain_words(request).split()
    return bool(said) and set(said) <= set(asked) and len(said) >= ECHO_SHARE * len(asked)


def repeats_itself(text: str) -> bool:
    """Whether a reply says one sentence (or line) of several words REPEATS times or more: a
    small model's loop, run on until the token cap, not an answer. Seen on the held-out actions
    file, asked in French to book a table: "Rappelé le plombier pour la fuite sous l'évier.
    Rappelé le colis à la poste. …" three sentences round and round (todo items of an earlier
    turn, reported as done) until the cap. Sentences end at ".", "!", "?", "。" or a line break in
    any language; a list's lines differ, so a list is no loop."""
    for mark in "。！？":  # full-width marks need no space after them
        text = text.replace(mark, "\n")
    for mark in ".!?":
        text = text.replace(f"{mark} ", "\n")
    pieces = [plain_words(piece) for piece in text.splitlines()]
    seen = Counter(piece for piece in pieces if len(piece.split()) >= REPEAT_WORDS)
    return any(n >= REPEATS for n in seen.values())


def copies_facts(text: str, ran: Collection[str] = ()) -> bool:
    """Whether a reply copies what the lane wrote to the model: a note of its own, or a line of
    the facts an answer is written from, label first ("exec_command (ok): Chunk ID: …"; an
    earlier turn's, of a tool in `ran`: "memory returned: …")."""
    return copies_lane_note(text) or _fact_label(text) is not None or _earlier_fact_line(text, ran)


def copies_lane_note(text: str) -> bool:
    """Whether a reply holds words of a note the lane wrote to the model (LANE_WORDS), which are
    not the user's to read ("Do not call it again.")."""
    return any(words in text for words in LANE_WORDS)


def call_shaped(text: str, vocabulary: frozenset[str] = frozenset()) -> bool:
    """Whether the text holds a tool call written as text: a call tag, a JSON object naming a
    function with its arguments, or a call expression of a tool-like name (store/claims.py: the
    one reader of call syntax, shared with the check and the trace page), or a reply that is a
    JSON object naming something (a call with its arguments flattened)."""
    if text_tool_calls(text, vocabulary):
        return True
    values = json_values(text) if text.startswith("{") else []
    return bool(values) and isinstance(values[0], dict) and isinstance(values[0].get("name"), str)


def carries(text: str, results: tuple[str, ...], earlier: str = "", tools: Collection[str] = (),
            user_said: Sequence[str] = ()) -> bool:
    """Whether the answer shares a number or a longer word with some result, of those the earlier
    turns did not already say (where the result has any): an answer that shares none did not pass
    the result on, nor did one that only copied an earlier turn's result. A result that says there
    is nothing need not be passed on; the names of the tools that ran are not what they returned."""
    said = set(plain_words(text).split()) - set(plain_words(" ".join(tools)).split())
    known = set(plain_words(earlier).split())
    outputs = [_without_exit_code(result[:RESULT_SCAN_CHARS]) for result in results]
    kept = [output for output in outputs if not says_nothing(output)]
    salient = [_salient(output) for output in kept]
    if not kept or any(said & _new(words, known) for words in salient):
        return True
    users = set(plain_words(" ".join(user_said)).split())
    # Numbers only: an earlier answer's "your" or "from" is no copied result (seen, "The codename of
    # your project is JUNIPER-8331." held back where memory had just returned that codename).
    stale = {w for w in said & known - users - set().union(*salient) if w.isdigit()}
    # A number is carried by its value whatever unit is written onto it: "71GB" for df's "71G"
    # (seen on the held-out actions file, a right answer held back twice).
    values = _values(text) - _values(earlier)
    return not stale and (any(said & _new(words, known - users) for words in salient)
                          or any(values & _values(output) for output in kept))


def _values(text: str) -> set[float]:
    return {value for value, _ in numbers_in(text)}


def unsourced_ids(text: str, sources: str) -> list[str]:
    """The identifiers an answer states that `sources` (the results, the request and the calls)
    do not hold: words of at least ID_CHARS characters with at least two letters and two digits
    (a hash, a commit, an order id). A count or a sum may be worked out from a result and be in
    none of them; an identifier can only be copied, so one that is in none was copied wrong.
    Seen with Claude Code on the 1.5B model: Bash printed `88f262de`, the answer said `e262f88f`.
    Letters and digits are shapes, the same in every language. The machine's basics are a source
    too: a container's host name is such a word (situation.machine)."""
    held = set(plain_words(f"{sources}\n{machine()}").split())
    return [word for word in dict.fromkeys(plain_words(text).split())
            if len(word) >= ID_CHARS and word not in held
            and sum(c.isdigit() for c in word) >= 2 and sum(c.isalpha() for c in word) >= 2]


def recalls(text: str, kept: Sequence[str], request: str) -> bool:
    """Whether an answer repeats something the store holds: a number or a longer word (_salient)
    of one of `kept` that the request does not say. Such an answer may be a recall of an earlier
    turn ("Your project codename is TUNDRA-8808." after memory saved it), not a report of a new
    action."""
    said = set(plain_words(text).split()) - set(plain_words(request).split())
    return any(said & _salient(held[:RESULT_SCAN_CHARS]) for held in kept if held)


def recalls_run(text: str, tool: str, facts: TurnFacts) -> bool:
    """Whether an answer reporting `tool` as done may recall an earlier run of it: that tool ran
    in an earlier turn and the answer repeats something its runs held (TurnFacts.runs) that the
    request does not say, or names it without being about this request (about_request: a
    summary of what ran, "I used memory, terminal and session_search."). That the tool ran
    earlier is not enough: seen on the held-out
    actions file, "Je vous ai ajouté une tâche : Table pour quatre chez Marcel …" where todo had
    run for other items two turns before, and nothing added this one. A tool that failed for
    this request is no recall: the answer reports that attempt (seen on the second held-out
    actions file, "I added the task "Buy a gift …"" where this turn's todo call had failed and an
    earlier run held the item)."""
    if tool in facts.failed:
        return False
    runs = [held for name, held in facts.runs if name == tool]
    return bool(runs) and (recalls(text, runs, facts.request) or names_run(text, tool, facts))


def names_run(text: str, tool: str, facts: TurnFacts) -> bool:
    """Whether an answer names `tool` (the caller knows it ran in an earlier turn) without being
    about this request (about_request): an account of what ran ("Tools I used: memory,
    terminal."), not a report of doing what the request asks."""
    named = f" {plain_words(tool)} " in f" {plain_words(text)} "
    return named and not about_request(text, facts)


def about_request(text: str, facts: TurnFacts) -> bool:
    """Whether an answer repeats more of this request's words that nothing earlier held than of
    what earlier turns held (their runs and the names of the tools that made them) beyond the
    request: then it reports acting on this request, not recalling an earlier run, whatever tool
    it names. Seen on both held-out actions files, "saved to memory: "Grab me a seat on the 18:40
    …"" (the request's words, where memory had run a turn before) and "I've added the note to your
    memory: "Domenica il pranzo è alle tredici …"" where only todo ran. A summary of the session
    names the tools that ran and what they held ("Tools I used: memory, terminal."). Words both
    the request and an earlier run hold (a follow-up about the item it added) count for neither,
    nor do the other granted tools' names."""
    held = facts.held_words
    names = set(plain_words(" ".join([*facts.offered, *(n for n, _ in facts.descriptions)])).split()) - held
    said = set(plain_words(text).split()) - names
    asked = set(plain_words(facts.request).split())
    return len(said & _salient(facts.request) - held) > len(said & held - asked)


def recalls_note(text: str, facts: TurnFacts) -> bool:
    """Whether an answer repeats a note the lane keeps that the request is about (the note and the
    request share a number or a longer word). A note the request has nothing to do with is no
    recall: seen on the held-out actions file, asked in Portuguese to text Júlia, "I've added a
    note … about the user's plan to be late to Priya's office …", copied from another session's
    note."""
    asked = set(plain_words(facts.request).split())
    return recalls(text, [note for note in facts.notes if asked & _salient(note)], facts.request)


def run_text(arguments: str | None, result: str | None) -> str:
    """What a run holds that an answer recalling it would repeat: its argument values (not their
    names: "items" is no recall of todo) and its result."""
    values: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif value is not None:
            values.append(str(value))

    for parsed in json_values(arguments or ""):
        walk(parsed)
    return "\n".join([*values, result or ""])


def _without_exit_code(output: str) -> str:
    first, _, rest = output.lstrip().partition("\n")
    return rest if first.lower().startswith(EXIT_CODE) else output


def _new(words: set[str], known: set[str]) -> set[str]:
    """The words of a result that earlier turns did not say, where some are words and not only
    numbers (a search's line numbers are new and beside the point); else all of them."""
    new = words - known
    return new if any(not w.isdigit() for w in new) else words


def _salient(output: str) -> set[str]:
    """The words an answer that passes the output on would share with it: its numbers and longer
    words, or, where it has none, every word it has (a user name "vm" is the whole output)."""
    words = plain_words(output).split()
    return {w for w in words if w.isdigit() or len(w) >= SALIENT_LETTERS} or set(words)


def unsourced_numbers(text: str, facts: TurnFacts) -> list[str]:
    """The numbers of an answer written after tools ran (or failed) that neither this turn's
    results nor what the user wrote hold: a clock time, and a number of two digits or more (or
    with decimals) unless it rounds one they hold. Single digits are let through (a count of what
    a result lists). Digits are the same in every language the lane serves."""
    now = "\n".join([facts.request, *facts.user_said, *facts.results])
    known_times = {(h, m) for h, m, _ in _clock_times(now)}
    stray = [shown for h, m, shown in _clock_times(text) if (h, m) not in known_times]
    values = [value for value, _ in numbers_in(_without_times(now))]
    values += [float(n) for h, m, _ in _clock_times(now) for n in (h, m)]
    for value, shown in numbers_in(_without_times(text)):
        if "." not in shown and value < 10:
            continue
        places = len(shown.split(".")[1]) if "." in shown else 0
        if not any(value == known or round(known, places) == value for known in values):
            stray.append(shown)
    return stray


def numbers_in(text: str) -> list[tuple[float, str]]:
    """Every number written with digits, as (value, as written): "1,234.5", "46", "2026"; a comma
    groups thousands only before three digits."""
    found: list[tuple[float, str]] = []
    i = 0
    while i < len(text):
        if not text[i].isdigit() or (i and (text[i - 1].isdigit() or text[i - 1] == ".")):
            i += 1
            continue
        j = i
        while j < len(text) and (text[j].isdigit() or _joins_digits(text, j)):
            j += 1
        shown = text[i:j]
        groups = shown.split(".")[0].split(",")
        if len(groups) > 1 and not all(len(g) == 3 for g in groups[1:]):
            shown = groups[0]  # "3,5": two numbers, not a thousands group
            j = i + len(shown)
        if shown.count(".") > 1:
            shown = ".".join(shown.split(".")[:2])
            j = i + len(shown)
        found.append((float(shown.replace(",", "")), shown))
        i = j
    return found


def _joins_digits(text: str, j: int) -> bool:
    """A point or a comma between two digits ("1,234", "3.5")."""
    return text[j] in ".," and j + 1 < len(text) and text[j + 1].isdigit()


def _clock_times(text: str) -> list[tuple[int, int, str]]:
    """Clock times ("16:07", "08:09:02", "4:07 pm") as (hour on the 24-hour clock, minute, as written)."""
    times = []
    for i, ch in enumerate(text):
        if ch != ":" or i == 0 or not text[i - 1].isdigit() or not text[i + 1:i + 3].isdigit() \
                or (i + 3 < len(text) and text[i + 3].isdigit()):
            continue
        start = i - 1 if i < 2 or not text[i - 2].isdigit() else i - 2
        if start > 0 and (text[start - 1].isdigit() or text[start - 1] == ":"):
            continue
        hour, minute = int(text[start:i]), int(text[i + 1:i + 3])
        end = _half_day_end(text, i + 3)
        if end:
            hour = hour % 12 + (12 if "p" in text[i + 3:end].lower() else 0)
        if hour < 24 and minute < 60:
            times.append((hour, minute, text[start:end or i + 3]))
    return times


def _half_day_end(text: str, j: int) -> int:
    """Where an "am"/"pm" ("a.m.", "PM") after a clock time at `j` ends, or 0 where none follows."""
    while j < len(text) and text[j] == " ":
        j += 1
    for form in ("a.m.", "p.m.", "am", "pm"):
        end = j + len(form)
        if text[j:end].lower() == form and (end >= len(text) or not text[end].isalpha()):
            return end
    return 0


def _without_times(text: str) -> str:
    for _, _, shown in _clock_times(text):
        text = text.replace(shown, " ")
    return text


def _earlier_fact_line(answer: str, ran: Collection[str]) -> bool:
    """Whether an answer starts with the label of an earlier turn's line of the facts
    ("  read_file returned: ...", history.earlier_facts) for a tool in `ran` (the session's and
    those granted: a refused call has a line too). Seen three times on the third held-out actions
    file, asked in Swedish to tick off an item where nothing ran: the answer was an earlier turn's
    line, "write_file returned: REFUSED: not written: …", and reached the user with the receipt
    (the third time write_file had been refused, not run)."""
    name, sep, _ = answer.lstrip(" -*\t").partition(f" {RETURNED}")
    return bool(sep) and name in ran


def _fact_label(answer: str) -> tuple[str, str, str] | None:
    """The label of a line of the facts the lane writes ("- read_file (ok): ..."), copied to the
    front of an answer, as (tool, status, the rest)."""
    line = answer.lstrip(" -*\t")
    name, sep, rest = line.partition(" (")
    status, sep2, after = rest.partition("):")
    if not sep or not sep2 or status not in ("ok", "error", "refused") or not name \
            or not all(c.isalnum() or c in "_.-" for c in name):
        return None
    return name, status, after


def unlabelled(answer: str, results: Sequence[tuple[str, str]] = ()) -> str:
    """The answer without a label of the facts copied to its front: the conversation's ("The
    assistant answered: 42"), or that of a result of this turn (`results`: the tool's name and
    output of each that ran ok) where more than the result's status line follows (the answer is
    then that result; a copy of the label and a result's first line is that result, whole)."""
    stripped = answer.lstrip(" -\t")
    for prefix in FACT_LABELS:
        if stripped.lower().startswith(prefix):
            answer = stripped[len(prefix):].lstrip()
            break
    label = _fact_label(answer)
    if label is None or label[1] != "ok":
        return answer
    outputs = [output.strip() for name, output in results if name == label[0]]
    if not outputs:
        return answer
    rest = label[2].strip()
    whole = next((o for o in outputs if rest and o.startswith(rest) and len(rest) < len(o) <= WHOLE_RESULT_CHARS),
                 None)
    if whole is not None:
        return whole
    lines = [line for line in rest.splitlines() if line.strip()]
    return rest if lines and not all(_status_line(line) for line in lines) else answer


def _status_line(line: str) -> bool:
    """A result's status line (the terminal's exit code, http_fetch's status): no answer."""
    words = line.strip().split()
    return bool(words) and (line.strip().lower().startswith(EXIT_CODE)
                            or (words[0] == "HTTP" and len(words) > 1 and words[1].isdigit()))


def fallback_answer(outcomes: list[Outcome], unsure: Sequence[str] = ()) -> str:
    """The answer the lane writes, in its own words, when the model wrote none it could pass on:
    what ran with its result, and what failed; never a claim."""
    if not outcomes:
        text = "No tool ran for this request, so I have no checked answer to give."
    else:
        text = "I could not write a reliable answer. " + what_ran(outcomes)
    return text + ("\n(The model's reply was not passed on: " + "; ".join(unsure) + ".)" if unsure else "")


def what_ran(outcomes: Sequence[Outcome]) -> str:
    """The lane's account of this request's executions, from the store alone: each tool with its
    result, or how it failed."""
    return "What ran for this request:\n" + "\n".join(
        f"- {o.tool_name} {'returned' if o.status == 'ok' else o.status + ':'} {preview(o.output)}" for o in outcomes)


# The lane's answer, in its own words, where the model's reports an action that nothing ran for
# (lever "cannot"): what the lane did and can do is the lane's to say, not the model's.
NOT_DONE = "I have not done that: no tool ran for this request."
CANNOT = "I cannot send messages or email, book, buy, pay, call or contact anyone: none of my tools does that."
CANNOT_INSTEAD = " I can keep it as a todo item or write a draft into a file instead."


def cannot_answer(granted: Collection[str], outcomes: Sequence[Outcome] = (), other: bool = True) -> str:
    """What the user gets where the model's answer reports an action that did not run: where no
    tool ran for the request, that it was not done, what the lane cannot do, and what it can do
    instead where those tools are granted; where tools ran (`outcomes`), what the lane cannot do
    where the answer reported such an action (`other`), then what ran with its results."""
    if not outcomes:
        return NOT_DONE + " " + CANNOT + (CANNOT_INSTEAD if {"todo", "write_file"} <= set(granted) else "")
    return (CANNOT + "\n\n" if other else "") + what_ran(outcomes)
