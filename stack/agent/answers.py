"""The two questions of a turn the lane asks its model besides the calls, and the answer held
to the store.

The decision (decide.py) picks the next step under a grammar: before any tool ran, among the
offered tools and search's best hidden ones; after, only for a request of more than one task. The
answer is written from the request, the turn's results, earlier turns as facts and what the lane
remembers (prompt.compose_messages), never from a free reply that copies its history; before it
leaves the lane it is read against the store (answer_check.faults, reading.unbacked): one that gives
nothing, is call-shaped or reports what did not run is not passed on, and the user gets the lane's own account
of what ran instead. Every answer held back is kept with the lane's own calls (purpose HELD), with
why; only what the user gets is a message.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..store import Store
from ..tools.base import RESERVED_NAMES, Tool
from ..tools.execute import Outcome
from ..toolsearch.bridges import CALL
from ..toolsearch.surface import Toolset
from .answer_check import (
    TurnFacts,
    cannot_answer,
    fallback_answer,
    faults,
    names_run,
    recalls,
    recalls_note,
    recalls_run,
    run_text,
    unlabelled,
)
from .corrections import correction, named_in
from .decide import (
    DECIDE_HIDDEN,
    DOUBTS,
    FITS,
    WORDS_NAME,
    ask_decision,
    claim_holds,
    fit_probability,
    parse_decision,
    words_probability,
)
from .english import needs_rendering, rendered
from .history import earlier_facts
from .ledger import Correction, TurnLedger, lever_on
from .llm_client import LlmClient, ModelReply
from .prompt import compose_messages
from .reading import OTHER, read_kept, receipt, unbacked
from .records import answered, hold, kept
from .situation import situation
from .tasks import next_step_request, task_count, tasks_done, tasks_left
from .turn import Turn, TurnEnded, TurnResult, count

COMPOSE_MAX_TOKENS = 400
# A first pick outside the index's best this many tools for the request is asked again among them.
# Of 68 decisions on the everyday tuning and seen files, 8 picks fell outside the best 4: 7 wrong,
# and the wanted tool among the 4 for 5 of them (best 3: 10 wrong, 4 right outside; best 5: 4, 1).
INDEX_AGREES = 4
# A client's system prompt can be an agent framework's pages of rules; the answer needs its gist.
MAX_INSTRUCTION_CHARS = 2000
# The user's message before a follow-up, as the second look reads it.
MAX_PREVIOUS_CHARS = 300


def facts_of(turn: Turn, toolset: Toolset, store: Store, notes: str = "") -> TurnFacts:
    """What this turn's answer is held to: the tools it could call, what ran, and what the user
    wrote (their messages and the notes they asked the lane to keep)."""
    ran = [o for o in turn.outcomes if o.status == "ok"]
    schemas = {t["function"]["name"]: t["function"].get("parameters") or {}
               for t in toolset.offered + toolset.promoted_schemas}
    schemas |= {name: tool.parameters for name, tool in toolset.catalog.tools.items()}
    rows = store.messages(turn.result.session_id)
    this_turn = {o.execution_id for o in turn.outcomes}
    return TurnFacts(turn.query, schemas, store.tools_that_ran(turn.result.session_id),
                     {o.tool_name for o in ran}, tuple(o.output for o in ran), earlier_facts(rows),
                     (*(row["content"] for row in rows if row["role"] == "user" and row["content"]), notes),
                     frozenset(o.tool_name for o in turn.outcomes if o.status == "error"),
                     tuple(o.output for o in ran if not _confirms(toolset, o.tool_name)),
                     tuple(toolset.best_for(turn.indexed)), granted(toolset),
                     tuple((run["tool_name"], run_text(run["arguments"],
                                                       None if _confirms(toolset, run["tool_name"]) else run["result"]))
                           for run in store.executions(turn.result.session_id)
                           if run["status"] == "ok" and run["id"] not in this_turn),
                     tuple(line.strip() for line in notes.splitlines() if line.strip()))


def _confirms(toolset: Toolset, name: str) -> bool:
    tool = toolset.tool_named(name)
    return tool is not None and tool.confirms


def granted(toolset: Toolset) -> tuple[tuple[str, str], ...]:
    """The tools the lane can use for this turn, as (name, description): those offered directly,
    then every hidden one (MCP tools included), never a bridge; what the answer says the lane can
    do, and what the reading of an answer chooses among."""
    direct = [(t["function"]["name"], t["function"].get("description") or "") for t in toolset.offered]
    hidden = sorted((name, tool.description) for name, tool in toolset.catalog.tools.items())
    unique = dict(reversed([*direct, *hidden]))  # the first description of a name wins
    return tuple((name, unique[name]) for name in dict.fromkeys(n for n, _ in [*direct, *hidden])
                 if name not in RESERVED_NAMES)


def decision_tools(toolset: Toolset) -> list[tuple[str, str]]:
    """The tools the decision offers in its stable first message: the directly offered ones."""
    return [(t["function"]["name"], t["function"].get("description") or "") for t in toolset.offered
            if t["function"]["name"] not in toolset.bridges and t["function"]["name"] != CALL]


def wanted_tools(toolset: Toolset, request: str) -> set[str]:
    """The tools the decision may offer for this request: all but those whose own check says the
    message cannot want them (Tool.wanted_by, lever "operands": calculate without a number)."""
    every = {**toolset.catalog.tools, **toolset.direct}
    return {name for name, tool in every.items() if tool.wanted_by is None or tool.wanted_by(request)}


async def english_of(llm: LlmClient, store: Store, result: TurnResult, ledger: TurnLedger, request: str) -> str:
    """Lever "english" (the agent's turn and a proxy request): the request in English
    (english.py) where the user wrote in another language, kept with the lane's own model calls;
    "" where it is English or too short to tell."""
    if not needs_rendering(request) or not ledger.take(Correction(None, None, "english")):
        return ""
    english, reply = await rendered(llm, request)
    if reply is not None:
        kept(store, result, "english", reply, english or None)
    return english


async def decided_tool(llm: LlmClient, store: Store, turn: Turn, toolset: Toolset, memory: str = "") -> str | None:
    """The model's constrained choice of the tool the request still needs (decide.py), kept with
    the lane's own model calls; None for "answer" or when asking fails. Before any tool ran it
    chooses among every tool offered and search's best hidden ones; after, among the index's best
    for the request that have not run yet (the index proposes, the model disposes: alone, it named
    `calculate` for the number a terminal printed when the request said to save it), and one of
    those the request names ("... then save it to memory") needs no question. A request that
    holds one task is done once a tool ran for it, and one of N tasks once N tools did and none it
    names is left (tasks.py; a run_python that printed an error counts as run, and "… in the
    terminal and then store it in memory" still needs the terminal); until then the question
    shows the part of the request not done yet (tasks.next_step_request). Asked then,
    the model named a second tool for "what is this machine called? check from the command line"
    after `hostname` had answered it, and the answer it wrote next was about the clock; run_python
    after the terminal and memory had done "run `echo $((6*7))`, then save the output to memory",
    search_files after session_search and memory (the six steps, 2026-11-29: 35 s). A first
    pick that is not among tools the request names is asked again among those and itself: "Use
    the terminal to execute `echo $((6*7))` and save what it prints to memory" chose run_python.
    Where every call so far failed (and its one retry was spent), the others are asked: seen,
    `calculate` given "sum(primes(1000))" twice for "quick script pls: sum of all primes under
    1000", where run_python was the tool."""
    done = {o.tool_name for o in turn.outcomes if o.status != "error"}
    if done and turn.tasks == 1:
        return None
    left = tasks_left(turn.query, len(done))
    wanted = wanted_tools(toolset, turn.query)
    tools = decision_tools(toolset)  # listed whole: the question's first message is a cached prefix
    hidden: list[tuple[str, str]] = []
    if toolset.bridged and turn.query.strip():
        hits, _ = toolset.catalog.search(turn.indexed, DECIDE_HIDDEN + len(set(toolset.catalog.tools) - wanted))
        hidden = [(h.name, toolset.catalog.tools[h.name].description) for h in hits if h.name in wanted]
        hidden = hidden[:DECIDE_HIDDEN]
    if turn.outcomes:
        tried = {o.tool_name for o in turn.outcomes}  # ok, or failed and retried already
        candidates = {*toolset.best_for(turn.indexed), *(toolset.best_for(_indexed_left(turn, len(done), left))
                                                          if left else ())} & wanted - tried
        if not candidates:
            return None
        named = sorted(name for name in candidates if turn.names(name))
        if named:  # the user's own words name the next step: no question needed
            return named[0]
        if tasks_done(turn.query, len(done), named_left=False, english=turn.english):
            return None
        choices = [name for name, _ in [*tools, *hidden] if name in candidates]
        choices += [name for name in candidates - set(choices) if toolset.reaches(name)]
    else:
        choices = [name for name, _ in [*tools, *hidden] if name in wanted]
    results = [(o.tool_name, o.status, o.output) for o in turn.outcomes]
    earlier = await asyncio.to_thread(_earlier, store, turn)  # reads the whole session: off the event loop

    async def asked(hidden: list[tuple[str, str]], choices: list[str]) -> str | None:
        reply = await ask_decision(llm, next_step_request(turn.query, len(done), turn.english), tools, hidden,
                                   results, earlier, known=set(toolset.catalog.tools), choices=choices, memory=memory)
        kept(store, turn.result, "decide", reply)
        return parse_decision(reply.content, choices)

    picked = await asked(hidden, choices)
    if picked is None or turn.outcomes or named_in(picked, turn.query):
        return picked
    named = [name for name in choices if named_in(name, turn.query)]
    if named:  # the user named tools to use, and the pick is none of them: asked among those and it
        return await asked(hidden, [*named, picked])  # ("add 1,250 and 3" names a tool `add` too)
    best = [name for name in toolset.best_for(turn.indexed, INDEX_AGREES) if toolset.reaches(name) and name in wanted]
    if picked in best or not best or await _trusted(llm, store, turn, toolset, picked):
        return picked
    # The index knows none of the pick's words, nor does the model trust it: asked again among
    # the tools the index ranks best.
    listed = {name for name, _ in [*tools, *hidden]}
    hidden = [*hidden, *((name, toolset.catalog.tools[name].description) for name in best
                         if name not in listed and name in toolset.catalog.tools)]
    return await asked(hidden, best)


def _indexed_left(turn: Turn, ran: int, left: str) -> str:
    """The part of the request not done yet as the index reads it: the same part of the English
    rendering where the rendering holds as many tasks as the user's words, else their words."""
    if turn.english and task_count(turn.english) == task_count(turn.query):
        return tasks_left(turn.english, ran) or left
    return left


async def _trusted(llm: LlmClient, store: Store, turn: Turn, toolset: Toolset, picked: str) -> bool:
    """Lever "doubt" in the agent: whether a first pick outside the index's best for the request
    is kept, the model's fit for it (asked about that one tool, its whole description in view)
    being at least decide.DOUBTS. The index reads English words: seen on the six steps in German
    (2026-11-29), "Bitte merken Sie sich für später, dass der Codename meines Projekts … lautet"
    picked memory, and asked again among the index's best it ran todo, then write_file. Where the
    upstream sends no logprobs, the pick is asked again as before."""
    tool = toolset.tool_named(picked)
    if tool is None or not turn.ledger.take(Correction(None, None, "doubt")):
        return False
    probability = await fit_of(llm, store, turn.result, turn.shown, tool, "doubt")
    return probability is not None and probability >= DOUBTS


async def second_look(llm: LlmClient, store: Store, result: TurnResult, request: str, tool: Tool) -> str | None:
    """Lever "fit": `tool`'s name when the model, asked about that one tool
    (decide.fit_probability), says it is what the message asks for with a probability of at
    least decide.FITS; the question is kept with the lane's own model calls. Off (no call made)
    where the upstream sends no logprobs."""
    probability = await fit_of(llm, store, result, request, tool, "fit")
    return tool.name if probability is not None and probability >= FITS else None


async def fit_of(llm: LlmClient, store: Store, result: TurnResult, request: str, tool: Tool,
                 lever: str) -> float | None:
    """The model's yes-probability that calling `tool` is what `request` asks for
    (decide.fit_probability), the question kept with the lane's own model calls under `lever`;
    None (no call made) where the upstream sends no logprobs."""
    if not lever_on(lever, await llm.capabilities()):
        return None
    probability, reply = await fit_probability(llm, request, tool.name, tool.description,
                                               list((tool.parameters.get("properties") or {})))
    shown = "none" if probability is None else f"{probability:.2f}"
    kept(store, result, lever, reply, f"{tool.name}: yes {shown}")
    return probability


async def fitting_tool(llm: LlmClient, store: Store, turn: Turn, toolset: Toolset) -> str | None:
    """Where nothing ran and the answer was held back (the user would get no answer at all), the
    tool the index ranks best for the request, when the model's second look says it fits. Seen on
    the 1.5B model: "free disk space?" decided "answer", and the answer was "The user asked for
    the free disk space on their computer."."""
    wanted = wanted_tools(toolset, turn.query)
    best = [name for name in toolset.best_for(turn.indexed, INDEX_AGREES) if toolset.reaches(name) and name in wanted]
    tool = toolset.tool_named(best[0]) if best else None
    if tool is None:
        return None
    return await second_look(llm, store, turn.result, await asyncio.to_thread(_with_previous, store, turn), tool)


def _with_previous(store: Store, turn: Turn) -> str:
    """The request, with the user's message before it where there is one: a follow-up means
    little alone. Seen: after "My cousin lives in Tokyo ... What time is it over there?",
    "and what about Paris?" decided "answer", and world_clock fitted it 0.62 asked alone."""
    asked = [row["content"] for row in store.messages(turn.result.session_id)
             if row["role"] == "user" and row["content"]]
    before = asked[-2] if len(asked) > 1 and asked[-1] == turn.query else ""
    request = turn.shown
    return f"{request}\n(Their message before it: {before[:MAX_PREVIOUS_CHARS]})" if before else request


async def composed_answer(llm: LlmClient, store: Store, turn: Turn, toolset: Toolset, facts: TurnFacts,
                          memory: str | None = None) -> tuple[TurnEnded, Correction | None]:
    """The turn's answer, written from the request, the turn's results, earlier turns as facts,
    the date and this computer, and what the lane remembers, with the lane's receipt where its
    reading reports what the store does not show (lever "read"); the lane's own account of what
    ran when its shape may not be passed on, or when it reports a tool that fits the request and
    did not run, with the correction it earns (lever "call": a call it told; lever "claimed": the
    tool it reports), for the loop to act on before giving that account; the lane's own answer
    where it reports what nothing ran for (lever "cannot"). An answer held back is not written
    again: told why, the 1.5B model wrote the same answer again in 23 of 25 turns
    (docs/measurements.md, "Lever "rewrite" measured and deleted")."""
    results = [(o.tool_name, o.status, o.output) for o in turn.outcomes]
    rows = await asyncio.to_thread(store.messages, turn.result.session_id)  # the client's instructions
    question = compose_messages(turn.query, results, facts.earlier, memory,
                                sorted(facts.ran_in_session - RESERVED_NAMES), _client_instructions(rows),
                                facts.descriptions, situation())
    composed = await llm.chat(question, [], max_tokens=min(turn.cap, COMPOSE_MAX_TOKENS),
                              temperature=turn.temperature)
    count(turn.result, composed)
    content = unlabelled(composed.content, [(o.tool_name, o.output) for o in turn.outcomes if o.status == "ok"])
    problems = faults(content, facts)
    if problems:  # kept with why, apart from the conversation
        hold(store, turn.result.session_id, composed, "; ".join(problems))
        return (TurnEnded(fallback_answer(turn.outcomes, problems), "stop", held=tuple(problems)),
                correction(composed.content, facts))
    missing, confirmed = await _unbacked(llm, store, turn, content, facts)
    recalled = {name for name in missing if recalls_run(content, name, facts)}
    accounts = {name for name in recalled if names_run(content, name, facts)}
    claimed = await _claimed(llm, store, turn, toolset, facts, missing, accounts) if missing else None
    if claimed is not None:  # the tool it reports is called, and the answer written from its result
        why = f"it reports {claimed.force} as done, which did not run for this request"
        hold(store, turn.result.session_id, composed, why)
        return TurnEnded(fallback_answer(turn.outcomes, [why]), "stop", held=(why,)), claimed
    ran = [o.tool_name for o in turn.outcomes if o.status == "ok"]
    if _not_done(missing, recalled, ran, facts, confirmed, content) \
            and turn.ledger.take(Correction(None, None, "cannot")):
        return TurnEnded(_withdrawn(store, turn, facts, composed, missing, turn.outcomes), "stop"), None
    if missing:  # the store's truth beside the model's words
        content = f"{content.strip()}\n\n{receipt(missing, ran)}"
    return answered(store, turn.result.session_id, content, composed), None  # what the user gets


async def asked_user(llm: LlmClient, store: Store, turn: Turn, toolset: Toolset, question: str,
                     memory: str = "") -> TurnEnded:
    """The end of a turn whose model put a question to the user (a clarify call), held to the
    store like an answer: the model wrote those words too. Where its reading reports what did not
    run and lever "cannot" would withdraw an answer, the user gets the lane's own answer instead.
    Seen on the development actions file: "Certo, ho chiamato Gino. Ecco il messaggio che ho
    scritto: …" asked as the question where nothing had run (Italian: "Sure, I called Gino")."""
    facts = await asyncio.to_thread(facts_of, turn, toolset, store, memory)
    missing, confirmed = await _unbacked(llm, store, turn, question, facts)
    recalled = {name for name in missing if recalls_run(question, name, facts)}
    done = turn.outcomes[:-1]  # the call that asked ran last
    ran = [o.tool_name for o in done if o.status == "ok"]
    if not _not_done(missing, recalled, ran, facts, confirmed, question) \
            or not turn.ledger.take(Correction(None, None, "cannot")):
        return TurnEnded(question, "clarify")
    return TurnEnded(_withdrawn(store, turn, facts, ModelReply(question), missing, done), "stop")


def _withdrawn(store: Store, turn: Turn, facts: TurnFacts, reply: ModelReply, missing: list[str],
               done: list[Outcome]) -> str:
    """Lever "cannot" taken: the model's words kept with why, apart from the conversation, and the
    lane's own answer in their place (what it cannot do, where the reading says so; what ran)."""
    hold(store, turn.result.session_id, reply, "it reports an action that did not run")
    return cannot_answer([name for name, _ in facts.descriptions], done, OTHER in missing)


async def _unbacked(llm: LlmClient, store: Store, turn: Turn, content: str,
                    facts: TurnFacts) -> tuple[list[str], bool]:
    """Lever "read": the actions the answer reports as done (the model's reading under a grammar,
    kept with the lane's own calls) that the store's executions do not back, and whether the
    "which" probe confirmed the reading (Reading.confirmed)."""
    reading = await read_kept(llm, store, turn.result, content, turn.query, facts.descriptions,
                              {*facts.ran_in_session, *facts.ranked}, facts.ran_in_turn)
    return unbacked(reading, facts.ran_in_turn), reading.confirmed


async def _claimed(llm: LlmClient, store: Store, turn: Turn, toolset: Toolset, facts: TurnFacts,
                   missing: list[str], accounts: set[str]) -> Correction | None:
    """Lever "claimed": the correction that calls a tool the answer reports as done and that did
    not run for the request (of those the reading names, the one the index ranks best for the
    request: the reading's names come sorted, and on the second held-out actions file "I removed
    '…' from your to-do list." was read as `patch` and `todo`, and `patch` was weighed), where
    the model reads that tool as fitting the request (with the user's message before it) about as
    well as a reply in words or better (decide.words_probability, asked exactly as a tool's fit;
    decide.claim_holds): the model wrote that it did the action because it took the request for
    one. Seen on the blind everyday
    files (docs/measurements.md): "Sure, I've added the note … to your to-do list." and "He
    tachado al fontanero." where the decision had said "answer" and nothing ran; with only the
    receipt beside it, the user reads a claim and its denial. The comparison, not a bar: the
    1.5B model says "yes" to nearly any tool's fit, and an answer recalling what an earlier turn
    did is read as a report too ("Yes, I saved it." to "did you save it?"), where a reply in
    words fits the message better. An action no tool does (reading.OTHER) is never called, nor a
    tool the answer names as an earlier turn's run (`accounts`, answer_check.names_run): a
    summary's account of earlier turns is held to the session, not made true again (seen on the
    six steps' summary, "In this session, I ran … session_search (ok) …" held back and
    session_search called). An answer that only repeats what an earlier run of the tool held is
    weighed (it may report doing again what the request asks: seen on the never-tuned actions
    file, asked in Swedish to tick off the cat food that todo had added, "I have … removed the item
    "kattmat"." where nothing ran, spared as a recall). Nor a
    tool the index does not rank among its best for the request (TurnFacts.ranked): the fit
    question says "yes" to a file write for "Text Mrs Okonkwo …" as readily as to a note for "note
    it down"; the index, which never reads the answer, agrees only with the second. On the stored
    answers of the seen actions files, for 10 of the 13 requests no tool does that this lever
    called a tool for (write_file for a WhatsApp message, patch for a bank transfer), the tool was
    outside the index's best three; for the two it called rightly (memory, read_file), inside."""
    rank = {name: i for i, name in enumerate(facts.ranked)}
    named = sorted((name for name in missing if name in rank and name not in accounts), key=rank.__getitem__)
    tool = next((toolset.tool_named(name) for name in named), None)
    if tool is None or tool.name in {o.tool_name for o in turn.outcomes} or not toolset.reaches(tool.name) \
            or tool.name not in wanted_tools(toolset, turn.query):
        return None
    fix = Correction(None, tool.name, "claimed")
    if not turn.ledger.can_take(fix):
        return None
    request = await asyncio.to_thread(_with_previous, store, turn)
    fit = await fit_of(llm, store, turn.result, request, tool, "claimed")
    if fit is None:
        return None
    words = await words_fit(llm, store, turn.result, request, "claimed")
    return fix if words is not None and claim_holds(fit, words) else None


async def words_fit(llm: LlmClient, store: Store, result: TurnResult, request: str, lever: str) -> float | None:
    """The model's fit for a reply in words (decide.words_probability), the question kept under
    `lever`: weighed against a tool's fit (fit_of), never held to a bar (levers "claimed" and,
    in proxy mode, "doubt")."""
    probability, reply = await words_probability(llm, request)
    kept(store, result, lever, reply, f"{WORDS_NAME}: yes {'none' if probability is None else f'{probability:.2f}'}")
    return probability


def _not_done(missing: list[str], recalled: set[str], ran: list[str], facts: TurnFacts, confirmed: bool,
              content: str) -> bool:
    """Lever "cannot": whether an answer whose reading reports `missing` (actions this turn's
    executions do not back, after lever "claimed" called none) is not passed on, the lane's own
    answer given instead. It is, where its reading, confirmed by the "which" probe
    (Reading.confirmed), reports an action no tool does (reading.OTHER); else unless each action
    it reports may be the recall of an earlier run of that tool (`recalled`, by
    answer_check.recalls_run); and, where nothing ran for the request, unless the answer repeats
    what earlier turns' runs held (any tool's) or a note the request is about (recalls,
    recalls_note), which a reading may take for an action: seen on the six steps, "The codename
    of your project is COBALT-2525." (memory had saved it) read as `patch`, the "which" probe
    reading it too (0.12, over its bar of 0.04). Beside a result that ran every answer repeats
    something, so only the runs spare it there: seen on the held-out actions file, "I've sent
    the polite reply to Mark Doyle's message …" after write_file wrote the draft. Seen on the
    everyday files of actions no tool does: "Ik heb de huisarts gebeld en de kaartjes geboekt."
    read as `patch` where nothing ran; told why and asked again (session 24), the 1.5B model
    wrote the same claim."""
    if not missing:
        return False
    if confirmed and OTHER in missing:
        return True
    if all(name in recalled for name in missing):
        return False
    return bool(ran) or not (recalls(content, [held for _, held in facts.runs], facts.request)
                             or recalls_note(content, facts))


def _client_instructions(rows: list[dict[str, Any]]) -> str:
    """The latest system message the client sent in this session (none of the lane's own)."""
    own = [row for row in rows
           if row["role"] == "system" and not row.get("lane_prompt") and not row.get("lane_note")]
    return (own[-1]["content"] or "")[:MAX_INSTRUCTION_CHARS] if own else ""


def _earlier(store: Store, turn: Turn) -> str:
    return earlier_facts(store.messages(turn.result.session_id))
