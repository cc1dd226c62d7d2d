"""The turn's ledger: every lever the lane pulls on a small model's turn, in one registry, and
what each turn has run, said and spent.

LEVERS is the registry the code consults: a correction of a kind not listed there cannot be given,
and each is given at most its budget of times per turn (per tool where it says so), through
TurnLedger.take. MODEL_CALL_BUDGET caps the model calls of one turn: every call is paid by a user
who is waiting. Why each lever exists, with what was measured, is in docs/measurements.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..tools.execute import Outcome, refused

if TYPE_CHECKING:  # capabilities.py reads calls with toolcalls.py, which imports this module
    from .capabilities import Capabilities


@dataclass(frozen=True)
class Lever:
    """One weak-model lever: when it fires (`trigger`), what it does (`action`), how many
    times a turn it may (`budget`; per tool when `per_tool`), and what of the upstream it cannot
    work without (`needs`, a capabilities.Capabilities field: off where the upstream lacks it)."""

    trigger: str
    action: str
    budget: int = 1
    per_tool: bool = False
    needs: str | None = None


LEVERS: dict[str, Lever] = {
    "decide": Lever("each step of an agent turn; once per proxy request under tool_choice auto",
                    "the model's constrained choice (decide.py) of the next tool or \"answer\", among the "
                    "offered tools and search's best hidden ones; the chosen tool's call is then decoded "
                    "under its schema", per_tool=True),
    "fit": Lever("proxy mode where the decision said \"answer\" and nothing ran for the request; an agent "
                 "turn where nothing ran and the answer was held back",
                 "the best-matching tool is called when the model's yes-probability that it fits is at "
                 "least decide.FITS (answers.second_look); off where the upstream sends no logprobs",
                 needs="logprobs"),
    "doubt": Lever("proxy mode: the decision picked a client tool whose fit the model reads under decide.DOUBTS "
                   "and that the user's message does not name; an agent turn: the first pick is none of the "
                   "index's best for the request",
                   "proxy mode: the first proxy_decide.DOUBT_WEIGHED client tools of the decision's listing that "
                   "have not run for the message weighed by their fit too; the one that fits best is called; before "
                   "a result, \"answer\" where a reply in words fits better (decide.words_probability); after "
                   "a result, \"answer\" unless it reaches decide.FITS. Agent: the pick kept where its fit is at "
                   "least decide.DOUBTS, else the decision asked again among the index's best. Off where the "
                   "upstream sends no logprobs", needs="logprobs"),
    "failed": Lever("proxy mode: the decision picks the client tool whose call just came back",
                    "the model's yes-probability that the result reports a failure, as a share of it and its yes that "
                    "the call did its job (decide.failure_probability); "
                    "at least decide.FAILS: that tool called again with the error in view, else the decision "
                    "asked among the others; off where the upstream sends no logprobs",
                    per_tool=True, needs="logprobs"),
    "english": Lever("an agent turn or proxy request whose message is under english.FILLER_SHARE English filler "
                     "words and english.KNOWN_SHARE English words (written in another language)",
                     "the model writes the message in English (english.rendered); the tool index ranks tools for "
                     "the rendering, and the decision and the fit questions read it beside the user's words; what "
                     "the user named, the request's parts, every argument and the answer still come from their "
                     "words"),
    "retry": Lever("an agent turn's call that failed", "made once more, the model having read the error",
                   per_tool=True),
    "read": Lever("every answer that would reach the user (agent and proxy mode)",
                  "the model's constrained reading of the actions the answer reports as done "
                  "(reading.py: an enum over the granted tools and \"another action\"), held to the "
                  "store's executions (reading.unbacked); what the store does not back gets the lane's "
                  "receipt beside the answer (reading.receipt), unless lever \"claimed\" calls the tool. Where the "
                  "upstream gives its model's hidden state and a probe was fitted for that model, the probe "
                  "decides first whether the answer reports anything (reading.probed); only then is the "
                  "list asked, and each action it names that this request's executions do not back is "
                  "kept only where a second probe, asked about that action, reads it too (unless none would be "
                  "left: it says which, never whether); where a probe was fitted for \"another action\" alone, "
                  "it is asked about that on every answer the first probe reads as a report, whatever the list "
                  "names"),
    "claimed": Lever("an agent turn's answer that reports as done one of the lane's tools that did not run for the "
                     "request (lever \"read\"; only one the index ranks among its best for the request, and of "
                     "several the best of those; never one the "
                     "answer names as an earlier turn's run, answer_check.names_run), where "
                     "the message could want that tool (Tool.wanted_by); in proxy "
                     "mode under tool_choice auto, a reply reporting a client tool where nothing ran for the "
                     "user's message and lever \"doubt\" did not choose words",
                     "the model's fit for that tool (decide.fit_probability; in proxy mode also for search's best "
                     "match for the message, the better of the two kept) weighed against its fit for a reply in "
                     "words (decide.words_probability), both asked of the request; where the tool fits about as well "
                     "or better (decide.claim_holds: within CLAIM_TIE of words) the "
                     "answer is held back, the tool called (in proxy mode: the call returned to the client) and the "
                     "answer written again from its result; else the receipt. Off where the upstream sends no "
                     "logprobs", needs="logprobs"),
    "cannot": Lever("an agent turn's answer (or the question a clarify call puts to the user) whose reading "
                    "(lever \"read\"), confirmed by its \"which\" probe (or the probe fitted for it alone), reports "
                    "an action no granted tool does (reading.OTHER: sending, booking, buying, paying, calling); or "
                    "an action lever \"claimed\" did not call and the answer does not recall from an earlier run "
                    "of that tool (answer_check.recalls_run: it repeats what that run held, or names the tool "
                    "without being about this request, answer_check.about_request; never a tool that failed "
                    "for the request); where nothing ran for "
                    "the request, only if the answer also repeats nothing earlier turns' runs hold nor a note "
                    "the request is about (answer_check.recalls, recalls_note; a confirming tool's run holds its "
                    "arguments, not the lane's receipt words)",
                    "held back; the lane's own answer instead (answer_check.cannot_answer: not done, what it cannot "
                    "do, what it can do instead; where tools ran, what each returned)"),
    "call": Lever("a reply told or spelled a call it did not make, or wrote one as a command in its code "
                  "(a line led by the name of a tool that did not run, one argument a word of the request)",
                  "that tool forced (in proxy mode shown the call)"),
    "repeat": Lever("an identical call", "not run again, told the earlier result; a third ends the turn"),
    "operands": Lever("a call of the lane's own tool whose precondition (tools/base.py) the conversation "
                      "does not meet", "not run (a refused row); the decision does not offer a tool the "
                      "message cannot want (Tool.wanted_by)"),
    "numbers": Lever("an agent turn's call with an optional number argument nobody gave",
                     "the argument left out, so the tool's default applies (validation.without_unasked_numbers)"),
    "waits": Lever("proxy mode: a client call after the first of one reply whose texts the conversation mostly "
                   "does not hold (validation.sourced_share): it waits for an earlier call's result and guesses it",
                   "not returned (a refused row); the client gets the calls before it", budget=0),
    "overwrite": Lever("write_file over a file that holds something, or deleting lines in a later step",
                       "refused, nothing written"),
    "empty": Lever("proxy mode: a reply with no call and no words", "the model told, once"),
    "call-shaped": Lever("proxy mode: a reply with call-shaped text that is no valid call",
                         "the model told to make it a call, once"),
    "declined": Lever("proxy mode under tool_choice auto: a reply in words where nothing ran for the request, "
                      "which the model, asked (decide.decline_probability), says declines the request or tells "
                      "the user how to do it themselves",
                      "the decision asked again with that reply in view; a client tool it picks is forced; "
                      "off where the upstream sends no logprobs", needs="logprobs"),
    "lane-note": Lever("proxy mode: a reply that copies words of a note the lane wrote to the model "
                       "(answer_check.LANE_WORDS: \"Do not call it again\", seen after a repeat of Codex's "
                       "create_goal was refused), a line of the facts an answer is written from, label first "
                       "(answer_check.copies_facts), or the placeholder an earlier account is shown as "
                       "(client_history.NO_ANSWER_SHOWN)",
                       "held back; the lane's own account (what the client's tools returned) instead, with no "
                       "further model call", budget=0),
    "carry": Lever("proxy mode: a reply in words after the client's tools returned results for the user's message "
                   "that states an identifier (letters and digits: a hash, an id) which neither those results, the "
                   "message nor the calls hold (answer_check.unsourced_ids; an agent turn's answer after results: "
                   "one of answer_check.faults)",
                   "held back; the lane's own account (what the client's tools returned) instead, with no "
                   "further model call", budget=0),
    "lane-names": Lever("proxy mode: a reply in words that names the lane's own bridges (tool_search, "
                        "tool_describe, tool_call), which the client does not have",
                        "the model told to answer without them, once; then the lane's own account"),
    "required": Lever("proxy mode: tool_choice required and a reply without a call", "the model told, once"),
    "none": Lever("proxy mode: a call where no tool may be called (tool_choice none), or one written as text in "
                  "a reply asked for as the answer (after a result, the decision said \"answer\"; seen with "
                  "Hermes: memory written again after it had succeeded, five times)",
                  "the model told to answer in words, once; then the lane's own account"),
}
# The model calls one turn may make (decisions, calls, answers, readings); past it the turn ends with
# the lane's account of what ran. The six steps took 22 calls in all, at most 6 in one step.
MODEL_CALL_BUDGET = 16
# Asking twice makes a third identical call the end of the turn.
MAX_IDENTICAL_CALLS = 2
RESULT_PREVIEW_CHARS = 300


def lever_on(kind: str, capabilities: Capabilities) -> bool:
    """Whether lever `kind` can work with an upstream that honours `capabilities`."""
    needs = LEVERS[kind].needs
    return needs is None or bool(getattr(capabilities, needs))


@dataclass(frozen=True)
class Correction:
    """The note the model reads next (None: no note), and the tool its next reply must call (None:
    a free reply). `kind` is one of LEVERS."""

    note: str | None
    force: str | None = None
    kind: str = "call"

    @property
    def once_per(self) -> str:
        """What the correction's budget is counted for: its kind, and for a lever given per tool
        (Lever.per_tool) that tool too ("run X, then save it to memory" may need both forced)."""
        return f"{self.kind}:{self.force}" if LEVERS[self.kind].per_tool else self.kind


@dataclass
class TurnLedger:
    """What this turn has run and said, keyed by call (name + arguments as JSON)."""

    outcomes: dict[str, Outcome] = field(default_factory=dict)
    attempts: dict[str, int] = field(default_factory=dict)
    given: dict[str, int] = field(default_factory=dict)  # Correction.once_per -> times given

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

    def can_take(self, fix: Correction | None) -> bool:
        """Whether `fix` exists and its lever's budget for this turn (LEVERS[kind].budget, per
        tool where the lever says so) is not spent: `take` would apply it."""
        return fix is not None and self.given.get(fix.once_per, 0) < LEVERS[fix.kind].budget

    def take(self, fix: Correction | None) -> bool:
        """Whether `fix` is to be applied now (can_take), counted as given when it is."""
        if fix is None or not self.can_take(fix):
            return False
        self.given[fix.once_per] = self.given.get(fix.once_per, 0) + 1
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
    """The identity of a call: its name and its arguments' values, key order and number spelling
    aside (1 and 1.0 are one value). Seen with Claude Code: the lane returned `max_results: 1.0`
    (a `number`), the client sent the call back as `1`, and the model's same call, never seen as
    a repeat, went to the client 36 times for one request."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            pass
    return f"{name}:{json.dumps(_plain_numbers(arguments), sort_keys=True, ensure_ascii=False)}"


def _plain_numbers(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _plain_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain_numbers(item) for item in value]
    return value


def repeated(name: str, arguments: Any, earlier: Outcome) -> Outcome:
    """The refusal a repeated identical call gets instead of running again."""
    if earlier.status == "ok":
        reason = (f"Already done: this exact call ran earlier in this turn and returned: "
                  f"{preview(earlier.output)}\nDo not call it again. Reply to the user now with that result.")
    else:
        reason = (f"Not run: this exact call already failed in this turn with: {preview(earlier.output)}\n"
                  "Do not repeat it. Call a tool with different arguments, or tell the user what failed.")
    return refused(name, reason, arguments)


def preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= RESULT_PREVIEW_CHARS else flat[:RESULT_PREVIEW_CHARS] + "…"
