"""What the lane does when a small model's turn goes wrong, decided from plain data: every lever of
the loop is a Correction, and LEVERS lists them all.

Measured on Qwen2.5-Coder-1.5B through the lane: the model describes a call in prose instead of
making it, writes call-shaped JSON that does not fit the tool, says it saved or ran something that
never ran, answers from its own head where a tool was needed (a note "saved", the machine's Python
version invented), repeats one call until the iterations run out, and ends turns with an empty
answer or a stock apology that later turns then imitate. The store knows what ran; these levers
make the answer agree with it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Collection, Sequence

from ..store.claims import ANY_TOOL, named_tools, text_tool_calls, unbacked_claims
from ..tools.base import RESERVED_NAMES, plain_words, says_nothing
from ..tools.execute import Outcome, refused
from ..tools.validation import example_arguments
from .toolcalls import described_call

# Every lever of the agent loop: the Correction kind, and when it fires. Each is given at most once
# per turn (per tool for "claim", "decide" and "retry"), through TurnLedger.take.
LEVERS: dict[str, str] = {
    "decide": "each step of an agent turn: the model's own constrained choice (agent/decide.py) of "
              "the tool the request needs next, before any tool ran among every offered tool and "
              "search's best hidden ones (a pick the tool index does not rank among its best four "
              "for the request, and the request does not name, asked again among those four), "
              "after one ran only for a request of more than one task (after every call "
              "failed, and its retry was spent, always), "
              "among the tool index's best for it not yet run (one it names needs no question); "
              "that tool's call is then decoded under its schema, once per tool; in proxy mode, "
              "under tool_choice auto, once per request, asked in words for a client's tools "
              "(decide.CLIENT_INSTRUCTION), among the client's tools listed best word "
              "match first (with tool search on, those offered directly and search's best described, "
              "the rest by name): a tool is forced (with tool search on, its call offered only the tools "
              "the conversation called and its own), \"answer\" gets a reply with no tools; a pick "
              "of the tool whose call just came back is asked once more among the others",
    "fit": "proxy mode, where the decision said \"answer\", and an agent turn where nothing ran "
           "and the answer was held back: the tool that matches the request best (the client's; "
           "the index's best for the agent) is called when the model, asked about that one tool, "
           "gives at least decide.FITS probability that it is what the message asks for (one "
           "token's logprobs; answers.second_look)",
    "retry": "an agent turn's call that failed: made once more, the model having read the error",
    "compose": "an agent turn's answer: written from the request, the tool results, earlier turns "
               "as facts and the notes the lane keeps; one that gives the user nothing (empty, a "
               "stock apology, the request echoed, call-shaped text, the lane's own note copied, "
               "the conversation told in the third person: \"The user asked ...\", a promise "
               "where nothing was done: \"I will change it\"), "
               "claims what did not run or, after tools ran, states a time or number their results "
               "and the request do not hold (unsourced_numbers; where nothing ran, an answer that "
               "names what only earlier turns named is held to what they said: draws_on_earlier; an "
               "answer to what the user told before, with nothing run, names and numbers only "
               "what the conversation said: recalls) "
               "is not passed on: the lane says what ran",
    "rewrite": "an agent turn's composed answer held back (lever \"compose\") where no tool is "
               "forced after it: written once more, the model told why the first was held back "
               "(prompt.COMPOSE_AGAIN), and held to the same check",
    "repeat": "an identical call: not run again, told the earlier result; a third ends the turn",
    "operands": "a call of the lane's own tool whose precondition (tools/base.py; calculate: a "
                "number of the expression is one the conversation wrote; clarify: the question is not "
                "the user's own message again; calculate: no fraction nobody gave) the conversation "
                "does not meet: not run (a refused row); the agent then answers in words, proxy "
                "mode tells the model why; and the agent's decision does not offer a tool the "
                "message cannot want (Tool.wanted_by; calculate: the message gives no number)",
    "numbers": "an agent turn's call of the lane's own tool: an optional number argument nobody "
               "gave (not in the conversation's digits, no number spelled in the request) is left "
               "out, so the tool's default applies (validation.without_unasked_numbers; read_file "
               "limit=1 for a whole file); the store keeps the model's call and the arguments that ran",
    "overwrite": "write_file never empties a file that holds something, and in an agent turn's "
                 "later step (after a tool ran ok; ToolContext.later_step) deletes no line of an "
                 "existing file: refused, nothing written (the model read a packing list it was asked "
                 "about, then wrote it over)",
    "call": "a reply (proxy mode) or a composed answer held back (agent) told or spelled a call it "
            "did not make, or wrote one as a command in its code (a line starting with the name of a "
            "tool that did not run, and arguments after it, one a word of the request: "
            "\"```bash\\ncp a.txt archive/```\"): that tool forced (in proxy mode shown the call)",
    "claim": "a reply (proxy mode) or a composed answer held back (agent) says a tool did "
             "something no call of this turn shows: that tool forced once (the model's own "
             "stated intent), the agent's answer then composed again",
    "fact": "an agent turn's composed answer states a fact about this computer while no tool that "
            "checks it ran (the machine: a path, a user name, an installed version; the clock: the current time "
            "or date; a file by name with its size or content): held back, the tool that checks "
            "it (terminal; world_clock for the clock) forced once, the answer composed again",
}

# Asking twice makes a third identical call the end of the turn.
MAX_IDENTICAL_CALLS = 2
RESULT_PREVIEW_CHARS = 300
RESULT_SCAN_CHARS = 4000
# Words too common to show that an answer carries a tool's result.
_COMMON = frozenset("the and for with this that was were are you your from into exit code output "
                    "error file files line lines not has have had its".split())

# An answer that tells of the conversation in the third person, as the facts the lane writes do
# ("The user said: ..."), gives the user nothing. Seen on the 1.5B model, with nothing run: "The
# user asked for the free disk space on their computer.", "The assistant will send the
# information to Ingrid." (a promise nothing keeps).
_NARRATED = re.compile(r"^\W*the (?:user|assistant) (?:asked|asks|said|says|wants|wanted|requested|"
                       r"would like|is asking|will|would|has|can)\b", re.IGNORECASE)
# An answer that says what the assistant is about to do, where nothing was done and the turn ends
# with it: a promise nothing keeps. Seen on the 1.5B model, with nothing run: "I understand. I will
# change the birthday to July 14th." for "change it to the other one" (the first message of a
# session), "I'll remember that!"; "Sure, I can read it back to you." for "can you read it back to
# me ...?" (an offer to do what was asked is no answer). Not "let me know ...", not "Sure, I can
# help", and not an answer that asks something.
_PROMISE = re.compile(r"(?:^|[.!]\s+)(?:(?:(?:ok(?:ay)?|sure|alright|got it|understood|i understand)[,.!]?\s+)?"
                      r"(?:i will|i'll|i am going to|i'm going to|i shall|let me(?! know\b))|"
                      r"(?:ok(?:ay)?|sure|yes|of course|certainly)[,.!]?\s+i can(?!\s+(?:help|assist)\b))\s+\w",
                      re.IGNORECASE)
# A line of the facts the answer is written from ("- http_fetch (ok): HTTP 200 OK; text/html"),
# copied as the answer: seen, cut after its first line, where the opening hours followed.
_FACT_LINE = re.compile(r"^\W*(?P<tool>[A-Za-z_][\w.-]*) \((?P<status>ok|error|refused)\):")
# A result's status line (the terminal's exit code, http_fetch's status and type): it tells the
# user nothing they asked for.
_STATUS_LINE = re.compile(r"^\s*(?:exit code: -?\d+|HTTP \d{3}\b.*)$", re.IGNORECASE)
_CALL_NAME = re.compile(r'"name"\s*:\s*"([^"]+)"')
# Code in a reply: a fenced block's body, or inline code. A line of it that starts with a tool's
# name and goes on with arguments, one of them a word of the user's message (their file, not a
# how-to's placeholder), is that tool's call written as a command for the user to run.
# Seen on the 1.5B model with a client's shell-named tools, the decision having said "answer":
# "you can use the 'cp' command to copy the file ... ```bash\ncp project_analysis.txt
# project_archive/\n```" (BFCL even ids; nothing ran, the turn ended).
_CODE = re.compile(r"```[^\n`]*\n(.*?)(?:```|$)|`([^`\n]+)`", re.DOTALL)
_COMMAND = re.compile(r"^\s*(?:\$\s*)?([A-Za-z_][\w.-]*)\s+\S")
# Replies that give the user nothing, seen as answers on the 1.5B model: a stock apology, and the
# lane's own notes copied back.
_STOCK = re.compile(r"^\W*(?:i'?m sorry|i apologi[sz]e|sorry|unfortunately)\b.{0,80}\b(?:need more "
                    r"(?:information|context|details)|provide more|(?:do not|don't) have access|"
                    r"(?:do not|don't) have (?:enough|any|more) (?:information|context|details)|"
                    r"can(?:'t|not) (?:help|assist))", re.IGNORECASE | re.DOTALL)
# The fixed words of every note the lane writes to the model (the corrections below, the repeat
# breaker's results, "Answer not passed on"): a reply holding them copied a note.
_LANE_WORDS = ("Do not call it again", "Already done: this exact call", "Not run: this exact call",
               "reply with only:", "a tool only runs when", "but did not make it, so nothing ran",
               "That was not a valid call", "has not run for this request", "has not run for it yet",
               "now with the arguments the request needs", "The latest tool result was",
               "Answer not passed on", "I could not write a reliable answer",
               "so I have no checked answer to give", "The model's reply was not passed on",
               "Nothing has checked that on this computer", "ran for the user's last message",
               "Nothing has run for the user's")


@dataclass(frozen=True)
class Correction:
    """The note the model reads next (None: no note), and the tool its next reply must call (None:
    a free reply). `kind` is one of LEVERS."""

    note: str | None
    force: str | None = None
    kind: str = "call"

    @property
    def once_per(self) -> str:
        """What the correction is given once per turn for: its kind, and for a claim or a
        decision each tool ("run X, then save it to memory" may need both forced)."""
        return f"{self.kind}:{self.force}" if self.kind in ("claim", "decide", "retry") else self.kind


@dataclass
class TurnLedger:
    """What this turn has run and said, keyed by call (name + arguments as JSON)."""

    outcomes: dict[str, Outcome] = field(default_factory=dict)
    attempts: dict[str, int] = field(default_factory=dict)
    corrected: set[str] = field(default_factory=set)  # Correction.once_per of those given

    def attempt(self, name: str, arguments: Any, schema: dict[str, Any] | None = None
                ) -> tuple[str, Outcome | None]:
        """Count a call; its key and the outcome of the same call made earlier in the turn. With
        the tool's schema, a call is the same when its values are, whatever mode it names: seen
        on the 1.5B model, `memory` add X, then add X with old_text X, then replace X with X.
        After a call that failed, another mode is a new call: `memory` replace X whose old_text
        matched nothing, then add X (seen on the 1.5B model) may well run."""
        key = call_key(name, _gist(arguments, schema) if schema else arguments)
        earlier = self.outcomes.get(key)
        if earlier is not None and earlier.status != "ok" and schema \
                and _split(earlier.arguments, schema)[0] != _split(arguments, schema)[0]:
            key = call_key(name, arguments)
            earlier = self.outcomes.get(key)
        self.attempts[key] = self.attempts.get(key, 0) + 1
        return key, earlier

    def too_many(self, key: str) -> bool:
        return self.attempts.get(key, 0) > MAX_IDENTICAL_CALLS

    def take(self, fix: Correction | None) -> bool:
        """Whether `fix` is to be applied now: it exists and was not given before in this turn."""
        if fix is None or fix.once_per in self.corrected:
            return False
        self.corrected.add(fix.once_per)
        return True


def _split(arguments: Any, schema: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """A call's values that choose among modes (its `enum` properties), and the rest: what the
    call is about rather than how it was asked (the arguments as they are when not an object)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return {}, arguments
    if not isinstance(arguments, dict):
        return {}, arguments
    modes = {key for key, spec in (schema.get("properties") or {}).items()
             if isinstance(spec, dict) and "enum" in spec}
    return ({key: arguments.get(key) for key in modes},
            {key: value for key, value in arguments.items() if key not in modes})


def _gist(arguments: Any, schema: dict[str, Any]) -> Any:
    """What a call is about, its texts as a set (memory add X, then add X with old_text X, then
    replace X with X is one call three times); anything else with its keys, so that sub(5, 3) is
    not sub(3, 5)."""
    kept = _split(arguments, schema)[1]
    if not isinstance(kept, dict):
        return kept
    if not all(isinstance(value, str) for value in kept.values()):
        return json.dumps(kept, sort_keys=True, ensure_ascii=False)
    return sorted({json.dumps(value, ensure_ascii=False) for value in kept.values()})


def call_key(name: str, arguments: Any) -> str:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            pass
    return f"{name}:{json.dumps(arguments, sort_keys=True, ensure_ascii=False)}"


def repeated(name: str, arguments: Any, earlier: Outcome) -> Outcome:
    """The refusal a repeated identical call gets instead of running again."""
    if earlier.status == "ok":
        reason = (f"Already done: this exact call ran earlier in this turn and returned: "
                  f"{_preview(earlier.output)}\nDo not call it again. Reply to the user now with that result.")
    else:
        reason = (f"Not run: this exact call already failed in this turn with: {_preview(earlier.output)}\n"
                  "Do not repeat it. Call a tool with different arguments, or tell the user what failed.")
    return refused(name, reason, arguments)


@dataclass(frozen=True)
class TurnFacts:
    """What a correction is decided from, besides the reply."""

    request: str  # the user's message of this turn
    offered: dict[str, dict[str, Any]]  # each callable tool's argument schema
    ran_in_session: set[str]
    ran_in_turn: set[str]
    about_session: bool = False  # the request asks what happened earlier in the session
    results: tuple[str, ...] = ()  # the outputs of the tools that ran ok in this turn
    earlier: str = ""  # what earlier turns said and returned, as the answer's question showed it
    user_said: tuple[str, ...] = ()  # the user's messages in this session and the notes the lane keeps
    failed: frozenset[str] = frozenset()  # the tools that ran and failed in this turn
    # the results the answer must pass on (one of them): those of the tools that found something
    # out, where any ran; empty for all of `results`
    to_carry: tuple[str, ...] = ()
    # the tools the index ranks best for the request, best first: which of those that would back
    # a claim is forced
    ranked: tuple[str, ...] = ()
    # the tools that ran ok in this turn and failed at their work every time (a command that
    # exited non-zero): they back a claim that they ran, not that the work got done
    unfinished: frozenset[str] = frozenset()


def correction(content: str, facts: TurnFacts) -> Correction | None:
    """The correction for a reply that made no call, or None when nothing in its words earns one:
    a call it told or spelled without making it, or a claim that a tool did something when no
    execution shows it (held to the session's executions when the request asks about the session).
    A tool merely mentioned, as in "I can save notes or run commands", is not a call to force."""
    text = content.strip()
    if not text:
        return None
    return _unmade_call(text, facts) or _claimed(text, facts) or _unchecked_fact(text, facts)


def _unmade_call(text: str, facts: TurnFacts) -> Correction | None:
    """A call the reply told or spelled without making it."""
    offered = facts.offered
    described = described_call(text, offered.get)
    if described is not None and described.name not in facts.ran_in_turn:
        arguments = json.dumps(described.arguments, ensure_ascii=False)
        return Correction(f"You described a call to {described.name} but did not make it, so nothing ran. "
                          f'To run it, reply with only:\n<tool_call>\n{{"name": "{described.name}", '
                          f'"arguments": {arguments}}}\n</tool_call>', described.name)
    spelled = [n for n in _CALL_NAME.findall(text) if n in offered]
    if spelled:
        return Correction(f"That was not a valid call, so {spelled[0]} did not run. To call a tool, reply "
                          f"with only:\n{call_example(spelled[0], offered[spelled[0]])}", spelled[0])
    asked = _names(facts.request)
    command = next(((line.strip(), match[1]) for line in commands(text)
                    if (match := _COMMAND.match(line)) and match[1] in offered
                    and match[1] not in facts.ran_in_turn and asked & _names(line[match.end(1):])), None)
    if command is not None:
        line, name = command
        return Correction(f"You wrote `{line}` as a command for the user to run, so nothing ran. "
                          f"Make it a call of the tool {name}.", name)
    return None


def _names(text: str) -> set[str]:
    """Words of at least three characters, a file name whole ("report.txt"): what a command's
    arguments share with the request that asked for it."""
    return set(re.findall(r"[\w.-]{3,}", text.lower()))


def commands(text: str) -> list[str]:
    """The lines of a reply's code: its fenced blocks' lines and its inline code spans."""
    return [line for block, inline in _CODE.findall(text) for line in (block.splitlines() if block else [inline])]


# What an answer says about this computer that only a tool could know, and the tools that check it:
# the first one the lane has is forced; any of them, or run_python, having run backs the fact. Seen
# as answers on the 1.5B model with nothing run: "You are logged in as the user named
# \"your_username\"", "The full path of the current directory is /home/your_username", "The Python
# version installed on this machine is 3.8.10" (the machine);
# "The current time in Paris is 10:43 AM" (the clock: the current time or today's date, not a time
# the user's notes hold); "The number of lines in beta.csv is 10" (a file by its name, with a
# number or what it holds; "The folder contains the files: notes.txt, notes_old.txt, and
# session_search.log" after only session_search ran; a file by what it is, with a count: "The
# banana bread recipe is approximately 10 lines long.").
# A file an answer names, by the extensions people's files have: unlike a request's file name
# (toolcalls._FILE_NAME, any extension), an answer's "i.e." or "version 3.8" must not read as one.
_KNOWN_FILE = r"\b[\w-]+\.(?:txt|csv|tsv|md|json|jsonl|py|ya?ml|log|html?|xml|cfg|ini|toml|sh|conf|ts|js)\b"
_FACTS: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), tools) for pattern, tools in (
        (r"(?:(?<![\w.~])/(?:home|Users|usr|root|etc|var|opt)/|\b[A-Z]:\\|\byour_?username\b|\blogged in as\b|"
         r"\b(?:current|working) (?:directory|folder) is\b|\bhost ?name is\b|"
         r"\b(?:machine|computer) is (?:called|named)\b|\binstalled (?:here|on (?:this|your)) |"
         r"\bversion (?:installed|(?:here |on this \w+ )?is)\b[^.]{0,40}\d+\.\d+)", ("terminal",)),
        (r"\b(?:current|local) (?:time|date)\b[^.\n]{0,40}\b\d{1,2}[:.]\d{2}\b|\b(?:it is|it's) (?:now |currently )?"
         r"\d{1,2}[:.]\d{2}\b|\btoday is (?:a )?(?:mon|tues|wednes|thurs|fri|satur|sun)day\b|"
         r"\b(?:today's date|the date today) is\b|\b(?:the |this )?(?:current )?year is (?:now )?\d{4}\b|"
         r"\bday of the week\b[^.\n]{0,30}\b(?:mon|tues|wednes|thurs|fri|satur|sun)day\b",
         ("world_clock", "terminal", "convert_timezone")),
        (rf"{_KNOWN_FILE}[^.\n]{{0,60}}\b(?:\d+|contains?|holds?|has (?:no|only|\d+)|lines?|words?|bytes|"
         r"(?:is|are) empty)\b|"
         rf"\b(?:\d+|lines?|words?|bytes)\b[^.\n]{{0,40}}{_KNOWN_FILE}|"
         r"\b(?:file|recipe|document|script|list|notes?|one)\b[^.\n]{0,40}\b\d+ (?:lines|words|bytes)\b|"
         r"\b(?:files|folders) (?:in|of) (?:the|your|this) (?:folder|workspace|directory)\b|"
         r"\b(?:the|your|this) (?:folder|workspace|directory)\b[^.\n]{0,20}\b(?:contains?|holds?|has)\b",
         ("terminal", "read_file", "search_files", "write_file", "patch")),
    ))


def unchecked_fact_tools(text: str, facts: TurnFacts) -> tuple[str, ...] | None:
    """The tools that would check a fact the answer states about this computer (its machine, clock
    or files) while none of them ran in the turn; None when it states none or one ran. Another
    tool's result backs nothing here: seen, "The Python version installed on this machine is
    3.8.10" after only `session_search` ran."""
    for pattern, tools in _FACTS:
        if pattern.search(text) and not (set(tools) | {"run_python"}) & facts.ran_in_turn:
            return tools
    return None


def _unchecked_fact(text: str, facts: TurnFacts) -> Correction | None:
    tool = next((t for t in unchecked_fact_tools(text, facts) or () if t in facts.offered), None)
    if tool is None:
        return None
    how = "with the command that finds out" if tool == "terminal" else "to find out"
    return Correction(f"Nothing has checked that on this computer: call {tool} {how}.", tool, "fact")


def unbacked(text: str, facts: TurnFacts) -> list[tuple[str, frozenset[str]]]:
    """The claims of the answer no execution backs: held to the turn's executions, and to the
    session's for a question about the session."""
    ran = facts.ran_in_turn | (facts.ran_in_session if facts.about_session else set())
    return unbacked_claims(text, ran, frozenset(facts.offered), facts.unfinished)


def _claimed(text: str, facts: TurnFacts) -> Correction | None:
    """The model said a tool did something that no execution shows: it meant to call it, so that
    call is forced (a tool it cannot call is left to the answer check): of the tools that would
    back the claim, the one the index ranks best for the request. Seen: "I found the folder." for
    "now show me what's in the folder", which read_file (the first by name) cannot do."""
    for sentence, tools in unbacked(text, facts):
        if tools == ANY_TOOL:  # "I used the tools": any would back it, none is meant
            continue
        tool = next((t for t in [*(r for r in facts.ranked if r in tools), *sorted(tools)] if t in facts.offered),
                    None)
        if tool is not None:
            return Correction(f'You wrote "{_preview(sentence)}", but {tool} has not run for this request, '
                              f"so nothing happened. Call {tool} now with the arguments the request needs.",
                              tool, "claim")
    return None


def faults(content: str, facts: TurnFacts) -> list[str]:
    """Why an answer may not reach the user as it is (empty when it may): it gives nothing, it is
    call-shaped, or it claims what did not run."""
    text = content.strip()
    if not text:
        return ["the model gave no answer"]
    problems = []
    if _STOCK.search(text):
        problems.append("a stock apology")
    if _echoes(text, facts.request) and not any(plain_words(text) in plain_words(r) for r in facts.results):
        problems.append("the request echoed back")  # not when a tool returned those words (a note saved)
    if any(words in text for words in _LANE_WORDS) or _FACT_LINE.match(text):
        problems.append("the lane's own note copied")
    if _NARRATED.search(text):
        problems.append("it tells of the user or the assistant instead of answering")
    if text_tool_calls(text, frozenset(facts.offered)) or text.startswith("{") and '"name"' in text:
        problems.append("a tool call written as text")
    if not facts.results and "?" not in text and _PROMISE.search(text):
        problems.append("it promises to do something, and nothing was done")
    if facts.results and not _carries(text, facts.to_carry or facts.results, facts.earlier, facts.ran_in_turn,
                                      facts.user_said):
        problems.append("it leaves out what the tools returned")
    recall = not facts.results and not facts.failed and recalls(facts.request)
    stray = unsourced_numbers(text, facts) \
        if facts.results or facts.failed or recall or draws_on_earlier(text, facts) else []
    if stray:
        problems.append(f"it states {stray[0]}, which no result holds")
    unsaid = unsaid_names(text, facts) if recall else []
    if unsaid:
        problems.append(f"it names {unsaid[0]}, which nobody in this conversation said")
    if unchecked_fact_tools(text, facts):
        problems.append("it states a fact about this computer that no tool checked")
    problems += ["it says tools ran, and none did" if tools == ANY_TOOL
                 else f"it says {'/'.join(sorted(tools))} did something that did not run" if tools
                 else "it says something was done that no tool here can do"
                 for _, tools in unbacked(text, facts)]
    return problems


# "you" also as texting's "u" ("which of ur tools did u use for those answers").
_ABOUT_SESSION = re.compile(r"\b(?:did (?:you|u)|have (?:you|u)|so far|(?:this|our) (?:conversation|session|chat)|"
                            r"earlier|before|previously|(?:you|u) (?:used|ran|did))\b", re.IGNORECASE)


def asks_about_session(request: str) -> bool:
    """Whether the request asks what happened earlier in the session ("which tools did you run?"):
    then an answer's claims are held to the session's executions, not only the turn's."""
    return bool(_ABOUT_SESSION.search(request))


# A question about what the assistant itself did or which tools it used ("Which things did you
# actually do for me in this chat, with which tools?").
_ABOUT_OWN_WORK = re.compile(r"\btools?\b|\b(?:you|u)\b[^.?!]{0,30}\b(?:do|did|done|ran|run|used?)\b", re.IGNORECASE)


def with_session_record(answer: str, facts: TurnFacts) -> str:
    """The answer to a question about what the assistant did in this session, with the store's
    record of the tools that ran where the answer leaves one out. Seen on the 1.5B model, asked
    "Which things did you actually do for me in this chat, with which tools?": "I saved the home
    wifi password to memory, and ..." (true), leaving out the calculate that had run too."""
    if not (facts.about_session and _ABOUT_OWN_WORK.search(facts.request)):
        return answer
    ran = sorted(facts.ran_in_session - RESERVED_NAMES)
    if not ran or all(name in named_tools(answer, frozenset(ran)) for name in ran):
        return answer
    return f"{answer}\n(From this chat's record, the tools that ran: {', '.join(ran)}.)"


# The status line the terminal and run_python put before their output: not what they returned.
_EXIT_CODE = re.compile(r"^\s*exit code: -?\d+\s*", re.IGNORECASE)


def _carries(text: str, results: tuple[str, ...], earlier: str = "", tools: Collection[str] = (),
             user_said: Sequence[str] = ()) -> bool:
    """Whether the answer shares a number or a word of three letters or more with some result, of
    those the earlier turns did not already say (where the result has any): an answer that shares
    none ("I read the file back to you") did not pass the result on, nor did one that copied an
    earlier turn's result. Seen: asked "and what about Paris?" after Tokyo's time, with Paris's
    time just returned, the answer was the earlier turn's convert_timezone result, passed on
    because both held "2026", "friday" and "utc". Numbers alone are not what is new: a search's
    line numbers ("recipe.txt:3: 2 eggs") would hold back "The files that mention eggs are
    recipe.txt and shoping.txt.". (Not caught: "The file beta.csv has 11 lines." after `wc -l`
    printed "4 beta.csv", where an earlier `ls -la` had shown a "4" too.) A result that says there
    is nothing need not be passed on: seen, "Your project's codename is MERIDIAN-8763" held back
    because `todo`, run for it, had returned "(the todo list is empty)". The names of the `tools`
    that ran are not what they returned: seen, "session_search ran." passed on as the answer to
    "Could you keep track of my chores?" because the result began "session id: ..."." A word the
    user wrote is no sign of a copy where the answer holds nothing else of earlier turns that the
    result lacks: seen, "The day of the week is Saturday." for "which day of week is it there
    now?" (Sydney, world_clock: "... Saturday 28 November ..."), held back because an earlier
    turn had asked when the pool opens on Saturday."""
    said = set(plain_words(text).split()) - set(plain_words(" ".join(tools)).split())
    known = set(plain_words(earlier).split())
    outputs = [_EXIT_CODE.sub("", result[:RESULT_SCAN_CHARS]) for result in results]
    kept = [output for output in outputs if not says_nothing(output)]
    salient = [_salient(output) for output in kept]
    if not kept or any(said & _new(words, known) for words in salient):
        return True
    users = set(plain_words(" ".join(user_said)).split())
    stale = {w for w in said & known - users - set().union(*salient)
             if (w.isdigit() or len(w) >= 3) and w not in _COMMON}
    return not stale and any(said & _new(words, known - users) for words in salient)


def _new(words: set[str], known: set[str]) -> set[str]:
    """The words of a result that earlier turns did not say, where some are words and not only
    numbers (a search's line numbers are new and beside the point); else all of them."""
    new = words - known
    return new if any(not w.isdigit() for w in new) else words


def _salient(output: str) -> set[str]:
    """The words an answer that passes the output on would share with it: its numbers and longer
    words, or, where it has none, every word it has (a user name "vm" is the whole output)."""
    words = [w for w in plain_words(output).split() if w not in _COMMON]
    return {w for w in words if w.isdigit() or len(w) >= 3} or set(words)


# A clock time ("16:07", "08:09:02", "4:07 pm") and any other number ("1,234.5", "46", "2026").
_TIME = re.compile(r"(?<![\d:])(\d{1,2}):(\d{2})(?::\d{2})?(?:\s*([ap])\.?m\b)?", re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\d.,])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\d,])|(?<![\d.])\d+(?:\.\d+)?")


def unsourced_numbers(text: str, facts: TurnFacts) -> list[str]:
    """The numbers of an answer, written after tools ran (or failed: the answer then states what
    no tool produced, "The sum of all primes under 1000 is calculated and saved as 76127." after
    calculate failed), that neither this turn's results nor what the user wrote hold: a clock
    time, and a number of two digits or more (or with decimals) unless it rounds one they hold
    (1.414214 for 1.4142135623730951). Earlier tool results are not a source: seen on the 1.5B
    model, `wc -l beta.csv` printed "4 beta.csv" and the answer was "The file beta.csv has 11
    lines.", the size of alpha.txt in an earlier `ls -la`; and after world_clock returned 08:09
    for Paris, "... 2026-11-27T16:09:02+01:00 ... in Europe/Paris", a time mixed from the earlier
    turn's Tokyo. The user's earlier messages and notes are ("primes under 1000", then "how many
    are there?"; "the rent of 1,150 EUR" from the notes). Single digits are let through: a count
    of what a result lists ("2 files"). Where nothing ran in this turn (draws_on_earlier), what
    earlier turns said is the source."""
    sources = facts.results if facts.results or facts.failed else (facts.earlier,)
    now = "\n".join([facts.request, *facts.user_said, *sources])
    found_times = _TIME.findall(now)
    times = {_clock(*found) for found in found_times}
    stray = [match.group(0) for match in _TIME.finditer(text) if _clock(*match.groups()) not in times]
    values = [_value(n) for n in _NUMBER.findall(_TIME.sub(" ", now))]
    values += [float(n) for found in found_times for n in found[:2]]
    for number in _NUMBER.findall(_TIME.sub(" ", text)):
        value = _value(number)
        if "." not in number and value < 10:
            continue
        places = len(number.split(".")[1]) if "." in number else 0
        if not any(value == known or round(known, places) == value for known in values):
            stray.append(number)
    return stray


_SENTENCE_BREAK = re.compile(r"(?<!\b[DM]r)(?<!\bMrs)(?<!\bMs)[.!?:]\s+|\n+")  # "Dr. Okonkwo" is one sentence
_NAME = re.compile(r"\b[A-Z][a-z]{3,}\b")


def _names_in(text: str) -> list[str]:
    """The names a text holds: words it capitalises within a sentence (a sentence's first word
    could be any word)."""
    names: list[str] = []
    for sentence in _SENTENCE_BREAK.split(text):
        words = _NAME.findall(sentence)
        names += words[1:] if _NAME.match(sentence.strip()) else words
    return names


def draws_on_earlier(text: str, facts: TurnFacts) -> bool:
    """Whether an answer names what only earlier turns named (a name: a word they capitalise
    within a sentence, which the request does not hold): its numbers are then held to what the
    conversation said. Seen, after session_search had returned "... the plumber ... was called
    Ostrowski, and he charged 180 euros", asked "And how much did he charge?" with nothing run:
    "I found Ostrowski charged $100 for the plumber service."."""
    names = set(_names_in(facts.earlier))
    asked = facts.request.lower()
    return any(word in names and word.lower() not in asked for word in _NAME.findall(text))


# A question about what the user told the lane ("what was my dentist's name again? I told you",
# "who did I say was collecting me?"): its answer can only hold what the conversation said.
_RECALL = re.compile(r"\b(?:i (?:told|gave|said|mentioned)|did i (?:say|tell|mention|give)|remind me (?:what|who|"
                     r"when|where|of)|what (?:was|is|were)(?: it)? (?:my|our)\b[^?]*\bagain)\b", re.IGNORECASE)


def recalls(request: str) -> bool:
    """Whether the request asks for something the user told the lane before."""
    return bool(_RECALL.search(request))


def unsaid_names(text: str, facts: TurnFacts) -> list[str]:
    """The names in an answer (words capitalised within a sentence) that neither the request, the
    user's messages and notes nor earlier turns hold. Seen on the 1.5B model, nothing run, for
    "what was my dentist's name again? I told you about him after my appointment":
    "Your dentist's name was Dr. John Smith."."""
    said = set(plain_words("\n".join([facts.request, *facts.user_said, facts.earlier])).split())
    return [name for name in _names_in(text) if name.lower() not in said]


def _clock(hour: str, minute: str, half: str = "") -> tuple[int, int]:
    """A time of day on the 24-hour clock."""
    h = int(hour) % 12 + (12 if half.lower() == "p" else 0) if half else int(hour)
    return h, int(minute)


def _value(number: str) -> float:
    return float(number.replace(",", ""))


# The labels of the facts the lane's own questions show (history.earlier_facts, prompt.turn_facts),
# which a small model copies to the front of its answer ("The assistant answered: 42").
_LABEL = re.compile(r"^\s*(?:-\s*)?(?:the assistant answered|the assistant said|the user said|"
                    r"the user's message|assistant)\s*:\s*", re.IGNORECASE)


# A result an answer copied the start of, with its label, is passed on whole up to this size.
WHOLE_RESULT_CHARS = 1500


def unlabelled(answer: str, results: Sequence[tuple[str, str]] = ()) -> str:
    """The answer without a label of the facts copied to its front: the conversation's ("The
    assistant answered: 42"), or that of a result of this turn (`results`: the tool's name and
    output of each that ran ok) where more than the result's status line follows (the answer is
    then that result). Seen on the 1.5B model, for a checklist to keep: "todo (ok): 1. [ ] book
    the van\n2. [ ] pack the kitchen ...", held back as a copied note though it was the list. A
    copy of the label and the start of a result that goes on is that result, whole: the facts show
    a result's first line beside its label, and the model copies that line. Seen: "read_file (ok):
    passport" for a packing list of six lines, and "http_fetch (ok): HTTP 200 OK; text/html" where
    the opening hours followed."""
    answer = _LABEL.sub("", answer, count=1)
    label = _FACT_LINE.match(answer)
    outputs = [output.strip() for name, output in results if label is not None and name == label["tool"]]
    if label is None or label["status"] != "ok" or not outputs:
        return answer
    rest = answer[label.end():].strip()
    whole = next((o for o in outputs if rest and o.startswith(rest) and len(rest) < len(o) <= WHOLE_RESULT_CHARS),
                 None)
    if whole is not None:
        return whole
    lines = [line for line in rest.splitlines() if line.strip()]
    return rest if lines and not all(_STATUS_LINE.match(line) for line in lines) else answer


def _echoes(text: str, request: str) -> bool:
    said, asked = plain_words(text), plain_words(request)
    return bool(said) and (said == asked or (len(said) >= 12 and said in asked))


def call_example(name: str, schema: dict[str, Any]) -> str:
    arguments = json.dumps(example_arguments(schema), ensure_ascii=False)
    return f'<tool_call>\n{{"name": "{name}", "arguments": {arguments}}}\n</tool_call>'


def named_in(tool: str, request: str) -> bool:
    """Whether every word of a tool's name is in the request ("search my past sessions" names
    session_search), plurals included: the user chose the tool, so promotion offers none beside it."""
    words = {w.rstrip("s") for w in re.findall(r"[a-z]+", request.lower())}
    return all(part.rstrip("s") in words for part in re.findall(r"[a-z]+", tool.lower()))


def fallback_answer(outcomes: list[Outcome], unsure: Sequence[str] = ()) -> str:
    """The answer the lane writes, in its own words, when the model wrote none it could pass on:
    what ran with its result, and what failed; never a claim."""
    lines = [f"- {o.tool_name} {'returned' if o.status == 'ok' else o.status + ':'} {_preview(o.output)}"
             for o in outcomes]
    if not lines:
        text = "No tool ran for this request, so I have no checked answer to give."
    else:
        text = "I could not write a reliable answer. What ran for this request:\n" + "\n".join(lines)
    return text + ("\n(The model's reply was not passed on: " + "; ".join(unsure) + ".)" if unsure else "")


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= RESULT_PREVIEW_CHARS else flat[:RESULT_PREVIEW_CHARS] + "…"
