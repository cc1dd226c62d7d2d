"""A proxy-mode reply in words: the answer the client gets, or a reply held back and corrected.

A reply without calls is the answer unless it earns a correction, each within its lever's budget
(ledger.LEVERS): a call was required; it told, spelled or wrote a call it did not make
(corrections.py); it is call-shaped text (no call ever reaches a client as text); it is empty; it
copies a note the lane wrote to the model; after the client's results, it states an identifier
none of them holds (answer_check.unsourced_ids); it names the lane's bridges; it declines what a
client tool does (proxy_decide.declined); it reports as done a client tool that fits the request about
as well as a reply in words or better (decide.claim_holds) and did not run for it (lever
"claimed": that tool called). An answer that reports an action no call of the conversation
backs (the model's reading, reading.py, over the client's own tool names) otherwise gets the
lane's receipt beside it. What the client gets is a message; a reply it does not get is held
back, with why, among the lane's own calls.
"""

from __future__ import annotations

import asyncio

from .answer_check import RESULT_SCAN_CHARS, TurnFacts, call_shaped, copies_facts, unsourced_ids
from .answers import fit_of, words_fit
from .client_history import NO_ANSWER_SHOWN
from .corrections import correction
from .decide import claim_holds
from .ledger import Correction
from .llm_client import ModelReply
from .proxy_decide import declined
from .proxy_turn import ProxyTurn, corrected, no_answer, note
from .reading import named_tools, read_kept, receipt, unbacked
from .records import answered

# Measured on Qwen2.5-Coder-1.5B through proxy mode: after two tool results it replied with
# nothing, and answered after this note.
EMPTY_REPLY = ("Your reply was empty. Answer the user now in one or two sentences, using the tool results "
               "above; or call a tool if the task still needs one.")
# Why a reply that earned the "call" correction was held back.
UNMADE_CALL = "it told or spelled a call it did not make"
# The client tools search ranks best for the request, listed to the reading of an answer beside
# those the conversation called (a client may send thousands).
READ_RANKED = 8


async def answer_or_correct(turn: ProxyTurn, reply: ModelReply) -> None:
    """A reply without calls is the answer (TurnEnded), unless it earns a correction (each within
    its lever's budget, ledger.LEVERS): a call was required; it told, spelled or wrote a call it
    did not make; it is empty; it reports an action no call of the conversation backs (the
    model's reading, reading.py, over the client's own tool names). The message stored is what
    the client gets; a reply it does not get is held back."""
    choice, content = turn.request.tool_choice, reply.content
    if choice.mode in ("required", "function"):
        corrected(turn, Correction("A tool call is required here: reply with a call, not with text.", None,
                                   "required"), reply, "a tool call was required and it made none",
                  "The model did not make the required tool call.", force=choice.name)
        return
    vocabulary = frozenset(turn.surface.catalog.tools)
    facts = _facts(turn)
    if choice.mode != "none":
        fix = correction(content, facts)
        force = fix.force if fix is not None and fix.force in vocabulary - turn.history.since_user else None
        if fix is not None and note(turn, fix, force=force,  # a hidden tool too (forced_to)
                                    held_back=(reply, UNMADE_CALL)):
            return
    if call_shaped(content, vocabulary):
        corrected(turn, Correction("That was not a valid tool call, so nothing ran. Make the call as a tool call, "
                                   "or answer in words.", None, "call-shaped"), reply,
                  "a tool call written as text", "I could not make a valid tool call for that request.")
        return
    if not content.strip():
        corrected(turn, Correction(EMPTY_REPLY, None, "empty"), reply, "the model gave no answer",
                  no_answer(turn))
        return
    if copies_facts(content) or content.strip() == NO_ANSWER_SHOWN:
        corrected(turn, Correction(None, None, "lane-note"), reply, "it copied the lane's own note",
                  no_answer(turn))
        return
    stray = _unsourced(turn, content)
    if stray:
        corrected(turn, Correction(None, None, "carry"), reply, f"it states {stray[0]}, which no result holds",
                  no_answer(turn))
        return
    if _lane_named(turn, reply) or await declined(turn, reply):
        return
    missing = await _unbacked(turn, content, facts)
    if missing and await _claimed(turn, missing, reply):
        return
    if missing:  # the conversation's truth beside the model's words
        never_ran = [] if facts.ran_in_turn else named_tools(content, missing)  # _unbacked held it to the session
        content = f"{content.strip()}\n\n{receipt(missing, turn.history.used_since, never_ran)}"
    raise answered(turn.store, turn.result.session_id, content, reply)


def _unsourced(turn: ProxyTurn, content: str) -> list[str]:
    """Lever "carry": the identifiers a reply in words, written after the client's tools returned
    results for the user's latest message, states that neither those results, the message nor the
    calls hold (answer_check.unsourced_ids): it did not pass on what they returned. Seen
    with Claude Code on the 1.5B model, asked what a command prints: Bash returned `88f262de` and
    the answer said "… are `e262f88f`", twice in two sessions. The client then gets the lane's
    account, which quotes the results (no_answer). Tried first as the agent's check (the answer
    shares a number or a longer word with a result, answer_check.carries): it held back Claude
    Code's right line count, "25", worked out from a listing that numbers lines from 0."""
    history = turn.history
    runs = [(arguments, history.results[call_id]) for call_id, _, arguments in history.calls[history.before_user:]
            if call_id in history.results]
    sources = "\n".join([turn.query, *(f"{arguments}\n{result[:RESULT_SCAN_CHARS]}" for arguments, result in runs)])
    return unsourced_ids(content, sources) if runs else []


def _facts(turn: ProxyTurn) -> TurnFacts:
    tools = turn.surface.catalog.tools
    return TurnFacts(turn.query, {n: t.parameters for n, t in tools.items()},
                     {name for _, name, _ in turn.history.calls}, turn.history.since_user,
                     ranked=tuple(h.name for h in turn.surface.catalog.search(turn.indexed, READ_RANKED)[0]))


async def _unbacked(turn: ProxyTurn, content: str, facts: TurnFacts) -> list[str]:
    """Lever "read" over the client's tools: the actions the reply reports as done that no call
    of this request (or, where this request made none, of the session) backs. A request that
    ran nothing is answered about earlier turns when it reports actions (a summary, "which
    tools did you use?"): seen with Hermes, "Tools I actually used: memory, terminal,
    session_search." on its summary step, each of which ran in an earlier turn."""
    tools = [(name, tool.description) for name, tool in turn.surface.catalog.tools.items()]
    backed = facts.ran_in_turn or await asyncio.to_thread(_ran_in_session, turn, facts)
    reading = await read_kept(turn.llm, turn.store, turn.result, content, turn.query, tools,
                              {*facts.ran_in_session, *facts.ranked}, backed)
    return unbacked(reading, backed)


async def _claimed(turn: ProxyTurn, missing: list[str], reply: ModelReply) -> bool:
    """Lever "claimed" over the client's tools: where nothing ran for the user's message, a reply
    that reports a client tool's action as done (reading: the first of `missing` it names) is
    held back and a tool called, where the model reads it as fitting the message about as well as
    a reply in words or better (answers.fit_of against answers.words_fit, decide.claim_holds: the
    agent's lever, one mechanism).
    The user asked for the action the reply says it did; the call is what makes it true. Weighed:
    the tool the reading names and search's best match for the message, the better fit called.
    Whether a reply reports an action is the reading's strong part, which action its weak one
    (docs/measurements.md, "The reading of an answer"), and the message says what it asks for:
    seen with Claude Code, "run `…` and tell me what it prints" answered with a made-up output,
    read as `Read` (0.53 against words' 0.67), where `Bash` was the best match (0.68; 0.66 against
    0.67 in session 42, called since the tie rule). Seen on the development toolsets: "Hoe laat
    is het nu in Singapore?" answered "Het is nu 12:00 uur in Singapore." where nothing ran;
    time__get_current_time fitted 0.62 against a reply in words' 0.58 and was called. Not after a
    result (a client's call its user did not ask for is a real action: a summary's account of
    earlier turns is held to the session, lever "read"), nor where lever "doubt" chose a reply in
    words. True when the turn goes on to the call."""
    tools = turn.surface.catalog.tools
    reported = next((name for name in missing if name in tools), None)
    if reported is None or turn.history.since_user or turn.words_chosen or turn.request.tool_choice.mode != "auto" \
            or not turn.ledger.can_take(Correction(None, reported, "claimed")):
        return False
    hits, _ = turn.surface.catalog.search(turn.indexed, 1)
    fits: dict[str, float] = {}
    for name in dict.fromkeys([reported, *(hit.name for hit in hits)]):
        fit = await fit_of(turn.llm, turn.store, turn.result, turn.shown, tools[name], "claimed")
        if fit is not None:
            fits[name] = fit
    if not fits:
        return False
    name = max(fits, key=lambda n: fits[n])
    words = await words_fit(turn.llm, turn.store, turn.result, turn.shown, "claimed")
    if words is None or not claim_holds(fits[name], words):
        return False
    return note(turn, Correction(None, name, "claimed"), force=name,
                held_back=(reply, f"it reports {reported} as done, which did not run for this request"))


def _ran_in_session(turn: ProxyTurn, facts: TurnFacts) -> set[str]:
    """The tools a session ran: those its conversation called, those the lane returned to the
    client and got a result for, and the lane's own that ran."""
    session = turn.result.session_id
    returned = {row["tool_name"] for row in turn.store.returned_calls(session) if row.get("result") is not None}
    return {*facts.ran_in_session, *returned, *turn.store.tools_that_ran(session)}


def _lane_named(turn: ProxyTurn, reply: ModelReply) -> bool:
    """Lever "lane-names": a reply that names the lane's bridges (a client has no tool_search of
    the lane's) is told to answer without them, once; then the lane's own account ends the
    turn. True when the turn goes on to another model call."""
    named = turn.surface.bridges_named(reply.content)
    if not named:
        return False
    corrected(turn, Correction(f"Your reply named {', '.join(named)}, which only you can use: the user does not "
                               "have them. Answer the user without naming them, or call a tool.", None, "lane-names"),
              reply, "it named the lane's own tools", no_answer(turn))
    return True
