"""The decision for a client's tools: which of them the conversation needs next, or "answer".

Proxy mode asks the agent's question (decide.py) in words for a client's tools, before the first
reply of a request (lever "decide") and again where a reply in words declined the request or told
the user how to do it themselves (lever "declined"); a tool it picks is then forced under its
schema. Where it said "answer", the best match is given a second look (lever "fit"); where it
picked a tool the model doubts, the listing's others are weighed by their fit (lever "doubt"). Every
question asked is kept with the lane's own model calls (records.kept).
"""

from __future__ import annotations

import json

from ..token_estimate import estimate_tokens
from ..tools.base import RESERVED_NAMES
from ..toolsearch.client_tools import ClientSurface
from .answers import fit_of, second_look, words_fit
from .client_history import as_rows
from .corrections import named_in
from .decide import (
    CLIENT_DESCRIBED,
    CLIENT_INSTRUCTION,
    CLIENT_REPLY,
    DECLINES,
    DOUBTS,
    FAILS,
    FITS,
    ask_decision,
    decline_probability,
    failure_probability,
    listed_tool,
    parse_decision,
)
from .history import earlier_facts
from .ledger import Correction, lever_on
from .llm_client import ModelReply
from .proxy_turn import ProxyTurn
from .records import hold, kept
from .tasks import next_step_request, tasks_done

# The decision lists client tools (best match first) while their lines take no more than this: the
# question stays small even for a client that sends thousands of tools.
DECIDE_LIST_TOKENS = 1500
# How much of a declining reply the decision asked again reads (lever "declined").
DRAFT_CHARS = 300
# Lever "doubt": a doubted pick is weighed against this many of the listing's first client tools
# (each a one-token question of ~100-200 prompt tokens, ~1 s on two cores).
DOUBT_WEIGHED = 6


async def first_step(turn: ProxyTurn) -> None:
    """The decide lever, for a client's tools: under `tool_choice: auto`, before the reply,
    the model's constrained choice of the tool the conversation needs next, or "answer": the
    agent's question (decide.py) in words for a client's tools (CLIENT_INSTRUCTION: they are
    not "this computer"), its tools listed one line each, **best
    word match for the request first** (decision_listing), what ran since the user's latest
    message, earlier turns as facts, and of its examples those whose tools the client has. A
    tool is then forced (its arguments decoded under its schema; a hidden one offered for that
    call); "answer" gets a reply with no tools. A tool picked that the model doubts is weighed
    against the listing's others first (lever "doubt", _doubted).
    Measured on Qwen2.5-Coder-1.5B: offered any tool in an open reply, it called one for
    every request, "difference between cpu and gpu?" included; of the questions tried on BFCL
    even ids (docs/measurements.md), the agent's chose right most often, and most often of
    all with its tools in search order (32/38 against 29/38 in the client's order: a small
    model leans towards the first lines it reads). After a call came back, a pick of that same
    tool is asked once more among the others (no second look at it): seen on BFCL even ids,
    `ls` picked again after `ls` (then refused as a repeat) where `cd` came next, while in the
    ground truth of the even multi-turn entries a step calls the tool just answered in 13 of
    583 steps after a call. What that second ask picks is called only when the second look
    (lever "fit") says it fits the request: seen with Claude Code on the 1.5B model, `Write` ran,
    was picked again, and the ask among the others picked `ScheduleWakeup`, which Claude Code ran.
    After a result, "answer" is the answer, written from it: the second look at the best match
    after "answer" (a correction) is only asked where nothing ran for the user's message, so it
    never calls a tool the decision did not pick once a result is in (seen with Hermes:
    `terminal` forced again after it had run for the request). The one exception is the step the
    user's message names next (_named_next), called with no question asked."""
    if turn.request.tool_choice.mode != "auto" or turn.request.messages[-1]["role"] not in ("user", "tool"):
        return
    turn.force = _named_next(turn)  # before the listing: no search where no question is asked
    if turn.force is not None or _every_task_ran(turn):
        turn.answer_next = turn.force is None
        return
    tools = decision_listing(turn.surface, turn.indexed)
    tools += [(name, tool.description) for name, tool in turn.lane_tools.items()]
    if not tools:
        return
    since = turn.history.calls[turn.history.before_user:]
    ran = _ran(turn)
    context = _earlier(turn)
    turn.force = await _decided(turn, tools, ran, context)
    answered = since[-1][1] if since else None
    retried = sum(name == answered for _, name, _ in since) > 1  # one retry for the user's message
    catalog = turn.surface.catalog.tools
    if turn.force is not None and turn.force == answered:
        if retried or not await _failed(turn, since[-1][0], answered):
            turn.force = await _decided(turn, tools, ran, context, leave_out=answered)
            if turn.force in catalog:  # a real action in the client: looked at again
                turn.force = await _second_look(turn, turn.force)
    elif turn.force is None:
        if not since and tools[0][0] in catalog:
            turn.force = await _second_look(turn, tools[0][0])
    elif turn.force in catalog:
        turn.force = await _doubted(turn, tools, turn.force)
    turn.answer_next = turn.force is None


def _named_next(turn: ProxyTurn) -> str | None:
    """After a result, the step the user's message names next, called without a question: where
    the message holds more than one task (tokens.clauses) and exactly one client tool it names
    (corrections.named_in: every word of its name) has not run for it. The agent's own rule
    (answers.py: "one of those the request names needs no question"). Seen with Hermes on the
    1.5B model: "Use the terminal to run `echo $((6*7))`, then save the output to memory" ran the
    terminal, and the decision, asked again, picked the terminal once more (left out, then
    memory at fit 0.74, under FITS) or "answer": the second step never ran. Two or more named
    and not run (a name such as search_files in "search the web, then write the file") are left
    to the decision."""
    if not turn.history.since_user or turn.tasks < 2:
        return None
    named = _named_left(turn)
    return named[0] if len(named) == 1 else None


def _named_left(turn: ProxyTurn) -> list[str]:
    """The client tools the user's message names (corrections.named_in) that have not run for it."""
    ran = turn.history.since_user
    return [name for name in turn.surface.catalog.tools if name not in ran and turn.names(name)]


def _every_task_ran(turn: ProxyTurn) -> bool:
    """After results, whether a message of N tasks (N >= 2, tokens.clauses) has had N client tools
    run for it and none it names is left: the answer is next, with no question asked (the agent's
    rule, answers.decided_tool). Seen with Hermes on the 1.5B model: after the terminal and memory
    had done "Use the terminal to run `echo $((6*7))`, then save the output to memory", the
    decision picked the terminal again, and the pick, named by the message, was called."""
    return turn.tasks >= 2 and tasks_done(
        turn.query, len(turn.history.since_user), named_left=bool(_named_left(turn)), english=turn.english)


async def _doubted(turn: ProxyTurn, tools: list[tuple[str, str]], picked: str) -> str | None:
    """Lever "doubt": a client tool the decision picked, whose fit the model reads under
    decide.DOUBTS (answers.fit_of: asked about that one tool, its whole description in view), is
    weighed against the first DOUBT_WEIGHED client tools of the decision's listing (search's best
    for the request first) that have not run for the user's message: the one that fits best is
    called. Before any result a reply in words is weighed with them (_words_fit): where it fits
    better than every tool weighed, the answer is next; after a result the answer is next unless
    the best reaches decide.FITS, the bar of every tool called after a result that the decision
    did not pick (_second_look).
    Seen on the 1.5B model with Codex's tools: "Create a file notes.txt …" picked `create_goal`
    (fit 0.55) and, asked again among the others, `write_stdin` (0.69) and `update_goal` (0.60),
    where exec_command read 0.84: the decision reads one line of each tool and echoes the request's
    verb, the fit question reads the whole description ("only when explicitly requested"). Once
    exec_command had run, the decision picked create_goal again, and weighing it against every
    tool called exec_command twice more (the line written three times); weighed against the
    others, write_stdin (0.70) was called after it. A pick the user's message names
    (corrections.named_in: every word of its name) is not doubted, as in the agent's decision:
    seen with Hermes, "Use the terminal to run `echo $((6*7))`, then save the output to memory"
    picked `terminal` (fit 0.68), and weighed against the others `memory` (0.75) was called first:
    both fit the message, and the fit question does not know which comes first."""
    if named_in(picked, turn.query) or not turn.ledger.take(Correction(None, None, "doubt")):
        return picked
    best, best_fit = picked, await _fit(turn, picked)
    if best_fit is None or best_fit >= DOUBTS:
        return picked
    catalog, ran = turn.surface.catalog.tools, turn.history.since_user
    for name in [name for name, _ in tools if name in catalog and name not in ran | {picked}][:DOUBT_WEIGHED]:
        fit = await _fit(turn, name)
        if fit is not None and fit > best_fit:
            best, best_fit = name, fit
    if ran:
        return None if best == picked or best_fit < FITS else best
    turn.words_chosen = await _words_fit(turn) > best_fit
    return None if turn.words_chosen else best


async def _words_fit(turn: ProxyTurn) -> float:
    """Lever "doubt", before any result: the fit of a reply in words (decide.words_probability),
    weighed like one more tool; the doubted pick and the tools weighed against it lose to it
    where it fits better. The same question's "yes" is read for nearly any tool by a 1.5B
    model, so only the comparison says that a thanks or a question of general knowledge wants
    no action: seen in the development toolsets (docs/measurements.md), "C'est bon, le pod est
    reparti après le redémarrage. Merci …" picked `kubernetes__pods_delete` (fit 0.65, the best
    of those weighed), and a reply in words read 0.77."""
    probability = await words_fit(turn.llm, turn.store, turn.result, turn.shown, "doubt")
    return -1.0 if probability is None else probability


async def _fit(turn: ProxyTurn, name: str) -> float | None:
    return await fit_of(turn.llm, turn.store, turn.result, turn.shown,
                        turn.surface.catalog.tools[name], "doubt")


async def _failed(turn: ProxyTurn, call_id: str, name: str) -> bool:
    """Lever "failed": where the decision picks the tool whose call just came back, whether that
    call failed (the model's "failed" against its "did its job", decide.failure_probability: no
    word of the result is matched); then the tool is called again, the error in view, instead of
    the decision being asked among the others. Seen with Hermes on the 1.5B model: `memory` without its `action`
    came back "Unknown action 'None'", the decision picked `memory` again, was asked without it,
    and the answer was "I don't have a tool named 'None'". An identical call is still a repeat
    (ledger.py), and a tool called twice for the user's message is not retried again (seen:
    memory retried, "Entry already exists" read as a failure, retried again)."""
    if not lever_on("failed", await turn.llm.capabilities()) or not turn.ledger.take(Correction(None, name, "failed")):
        return False
    probability, (failed, worked) = await failure_probability(turn.llm, name, turn.history.results.get(call_id, ""))
    shown = "none" if probability is None else f"{probability:.2f}"
    kept(turn.store, turn.result, "failed", failed, f"{name}: yes {shown}")
    kept(turn.store, turn.result, "failed", worked, f"{name}: did its job? (weighed in the line before)")
    if probability is None or probability < FAILS:
        return False
    turn.must_say = _choices_left_out(turn, call_id, name)
    return True


def _choices_left_out(turn: ProxyTurn, call_id: str, name: str) -> tuple[str, ...]:
    """The optional properties with a fixed set of values (`enum`: a mode, such as Hermes's
    memory `action`) that the failed call `call_id` left out: its retry must say them. Free text,
    numbers and lists stay optional."""
    try:
        arguments = json.loads(next((args for cid, _, args in turn.history.calls if cid == call_id), "{}") or "{}")
    except json.JSONDecodeError:
        arguments = {}
    given = set(arguments) if isinstance(arguments, dict) else set()
    schema = turn.surface.catalog.tools[name].parameters if name in turn.surface.catalog.tools else {}
    required = set(schema.get("required") or ())
    return tuple(key for key, spec in (schema.get("properties") or {}).items()
                 if isinstance(spec, dict) and "enum" in spec and key not in required and key not in given)


async def declined(turn: ProxyTurn, reply: ModelReply) -> bool:
    """Lever "declined": where nothing ran for the request under tool_choice auto, a reply
    that declines it or tells the user how to do it themselves (the model's yes-probability,
    decide.decline_probability: no word of it is matched) is not the answer while a client
    tool does it: the decision is asked again with that reply in view, and a client tool it
    picks (never one that ran for the request) is forced. True when one is. Not asked after a
    result (tried on 2026-11-29 for Hermes's "I'm sorry, but I can't assist" after the terminal
    ran: on Hermes and Codex it fired on a bare session id, a summary and a report of `touch`,
    0.70-0.79, and never called a useful step; docs/measurements.md), nor where lever "doubt" has
    weighed a reply in words above every tool (seen: a Dutch question whether a Friday-evening
    meeting request is rude got "Ja, ik twijfel wel.", read as declining at 0.78, and the
    decision asked again created the event)."""
    lane_ran = any(o.tool_name not in RESERVED_NAMES for o in turn.outcomes)  # a bridge search may have
    if turn.request.tool_choice.mode != "auto" or turn.history.since_user or lane_ran or turn.words_chosen \
            or not turn.surface.catalog.tools or not lever_on("declined", await turn.llm.capabilities()) \
            or not turn.ledger.take(Correction(None, None, "declined")):
        return False  # asked once a request, whatever it finds; never without logprobs
    probability, asked = await decline_probability(turn.llm, turn.query, reply.content)
    shown = "none" if probability is None else f"{probability:.2f}"
    kept(turn.store, turn.result, "declined", asked, f"yes {shown}")
    if probability is None or probability < DECLINES:
        return False
    picked = await _decided(turn, decision_listing(turn.surface, turn.indexed), [], _earlier(turn),
                            draft=reply.content)
    if picked is None:
        return False
    turn.force = picked
    hold(turn.store, turn.result.session_id, reply, "it declined the request or told how, where a client tool does it")
    return True


def decision_listing(surface: ClientSurface, query: str) -> list[tuple[str, str]]:
    """The client's tools as the decision lists them, as (name, description): in tool search's
    order for `query` (the rest after, in the client's order), while their lines fit
    DECIDE_LIST_TOKENS. With tool search on, only the tools offered directly and search's
    CLIENT_DESCRIBED best hidden ones keep a description; the others are listed by name alone (a
    name such as `fillFuelTank` still says what it does: search's best alone missed it for
    "refuel the vehicle"), so the question costs a fraction of the tools block it stands for."""
    catalog = surface.catalog
    hits, _ = catalog.search(query, len(catalog.tools))
    order = list(dict.fromkeys([*(hit.name for hit in hits), *catalog.tools]))
    hidden_best = [name for name in order if name not in surface.direct][:CLIENT_DESCRIBED]
    described = set(catalog.tools) if not surface.bridged else {*surface.direct, *hidden_best}
    listing: list[tuple[str, str]] = []
    budget = DECIDE_LIST_TOKENS
    for name in order:
        description = catalog.tools[name].description if name in described else ""
        budget -= estimate_tokens(listed_tool(name, description))
        if budget < 0:
            break
        listing.append((name, description))
    return listing


async def _decided(turn: ProxyTurn, tools: list[tuple[str, str]], ran: list[tuple[str, str, str]],
                   context: str, leave_out: str | None = None, draft: str = "") -> str | None:
    """One decision among the listed tools (all but `leave_out`, the one whose call just came
    back: lever "decide"), recorded; the tool picked, or None for "answer". `draft`: a reply in
    words that declined the request or told the user how (lever "declined"), shown with it."""
    choices = [name for name, _ in tools if name != leave_out]
    request = next_step_request(turn.query, len(turn.history.since_user), turn.english)
    request = request if not draft else (
        f"{request}\n\n(A first reply, in words, declined it or told the user how to do it: "
        f"\"{draft.strip()[:DRAFT_CHARS]}\")")
    reply = await ask_decision(turn.llm, request, tools, [], ran, context, known=turn.surface.catalog.tools,
                               choices=choices if leave_out else None, instruction=CLIENT_INSTRUCTION,
                               reply=CLIENT_REPLY)
    kept(turn.store, turn.result, "decide", reply)
    return parse_decision(reply.content, choices)


async def _second_look(turn: ProxyTurn, name: str) -> str | None:
    """Lever "fit": where the decision said "answer", the best word match for the request is
    called when the model, asked about that one tool (decide.fit_probability), says it is what
    the message asks for with a probability of at least decide.FITS. Measured on BFCL even
    ids: the decision answered in words 9 of 64 single-tool requests the tool was made for
    ("What key signature does C# major have?" with music_theory.key_signature offered)."""
    return await second_look(turn.llm, turn.store, turn.result, turn.shown,
                             turn.surface.catalog.tools[name])


def _ran(turn: ProxyTurn) -> list[tuple[str, str, str]]:
    """What ran for the user's latest message, as the decision reads it: (tool, status, result)."""
    return [(name, "ok", turn.history.results.get(call_id, ""))
            for call_id, name, _ in turn.history.calls[turn.history.before_user:]]


def _earlier(turn: ProxyTurn) -> str:
    """Earlier turns of the client's conversation as facts (history.earlier_facts)."""
    return earlier_facts(as_rows(turn.request.messages))
