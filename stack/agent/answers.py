"""An answer held to the store before it leaves the lane.

The store knows what ran; a small model's answer often does not agree with it. Before a reply
without calls ends a turn, the loop reads it against this turn's executions (TurnFacts): a claim
that a tool did something, or an answer from the model's own head where the model's own
constrained choice (decide.py) says a tool is needed, earns another model call (corrections.py);
what ends the turn is the model's answer only when nothing is wrong with it, else an answer written
again from the request and the results (prompt.compose_messages), else the lane's own account of
what ran. Every answer held back is a lane note.
"""

from __future__ import annotations

import logging

from ..store import Store
from ..toolsearch.bridges import CALL
from ..toolsearch.surface import Toolset
from ..toolsearch.tokens import clauses
from .corrections import TurnFacts, asks_about_session, fallback_answer, faults, named_in, unlabelled
from .decide import ask_decision, parse_decision
from .history import earlier_facts
from .llm_client import LlmClient, LlmError, ModelReply
from .prompt import compose_messages
from .turn import Turn, TurnEnded, count

log = logging.getLogger("lane.agent")

# The decision question lists the direct tools and at most this many hidden ones (search's best).
DECIDE_HIDDEN = 5
COMPOSE_MAX_TOKENS = 400


def facts_of(turn: Turn, toolset: Toolset, store: Store) -> TurnFacts:
    """What this turn's answer is held to: the tools it could call, and what ran."""
    ran = [o for o in turn.outcomes if o.status == "ok"]
    schemas = {t["function"]["name"]: t["function"].get("parameters") or {}
               for t in toolset.offered + toolset.promoted_schemas}
    schemas |= {name: tool.parameters for name, tool in toolset.catalog.tools.items()}
    return TurnFacts(turn.query, schemas, store.tools_that_ran(turn.result.session_id),
                     {o.tool_name for o in ran}, ran[-1].output if ran else None,
                     asks_about_session(turn.query), tuple(o.output for o in ran))


def decision_tools(toolset: Toolset) -> list[tuple[str, str]]:
    """The tools the decision offers in its stable first message: the directly offered ones."""
    return [(t["function"]["name"], t["function"].get("description") or "") for t in toolset.offered
            if t["function"]["name"] not in toolset.bridges and t["function"]["name"] != CALL]


async def decided_tool(llm: LlmClient, store: Store, turn: Turn, toolset: Toolset) -> str | None:
    """The model's constrained choice of the tool the request still needs (decide.py), kept with
    the lane's own model calls; None for "answer" or when asking fails. Before any tool ran it
    chooses among every tool offered and search's best hidden ones; after, among the index's best
    for the request that have not run yet (the index proposes, the model disposes: alone, it named
    `calculate` for the number a terminal printed when the request said to save it), and one of
    those the request names ("... then save it to memory") needs no question. A request that
    holds one task (toolsearch.tokens.clauses) is done once a tool ran for it: asked then, the
    model named a second tool for "what is this machine called? check from the command line"
    after `hostname` had answered it, and the answer it wrote next was about the clock."""
    if turn.outcomes and not clauses(turn.query):
        return None
    tools = decision_tools(toolset)
    hidden: list[tuple[str, str]] = []
    if toolset.bridged and turn.query.strip():
        hits, _ = toolset.catalog.search(turn.query, DECIDE_HIDDEN)
        hidden = [(h.name, toolset.catalog.tools[h.name].description) for h in hits]
    if turn.outcomes:
        ran = {o.tool_name for o in turn.outcomes if o.status == "ok"}
        candidates = set(toolset.best_for(turn.query)) - ran
        if not candidates:
            return None
        named = sorted(name for name in candidates if named_in(name, turn.query))
        if named:  # the user's own words name the next step: no question needed
            return named[0]
        choices = [name for name, _ in [*tools, *hidden] if name in candidates]
        choices += [name for name in candidates - set(choices) if toolset.parameters_of(name) is not None
                    or name in toolset.catalog]
    else:
        choices = [name for name, _ in [*tools, *hidden]]
    results = [(o.tool_name, o.status, o.output) for o in turn.outcomes]
    try:
        reply = await ask_decision(llm, turn.query, tools, hidden, results, _earlier(store, turn),
                                   known=set(toolset.catalog.tools), choices=choices)
    except LlmError as exc:
        log.warning("no decision: %s", exc)
        return None
    count(turn.result, reply)
    store.add_lane_call(turn.result.session_id, "decide", reply.content,
                        prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens,
                        cached_tokens=reply.cached_tokens)
    return parse_decision(reply.content, choices)


async def checked_answer(llm: LlmClient, store: Store, turn: Turn, reply: ModelReply,
                         facts: TurnFacts, memory: str | None = None) -> TurnEnded:
    """The answer as the store allows it: the model's when nothing is wrong with it; else one
    written again from the request and the results; else the lane's own account of what ran."""
    passed = _passed(store, turn, reply, facts)
    if isinstance(passed, TurnEnded):
        return passed
    return await composed_answer(llm, store, turn, facts, memory, passed)


async def composed_answer(llm: LlmClient, store: Store, turn: Turn, facts: TurnFacts,
                          memory: str | None = None, held_back: list[str] | None = None) -> TurnEnded:
    """An answer written from the request, the turn's results, earlier turns as facts and what
    the lane remembers (prompt.compose_messages); the lane's own account of what ran when that
    answer may not be passed on either (`held_back`: why the model's own reply was not)."""
    results = [(o.tool_name, o.status, o.output) for o in turn.outcomes]
    session_tools = sorted(facts.ran_in_session) if facts.about_session else None
    question = compose_messages(turn.query, results, _earlier(store, turn), memory, session_tools)
    try:
        composed = await llm.chat(question, [], max_tokens=min(turn.cap, COMPOSE_MAX_TOKENS), temperature=0.0)
    except LlmError as exc:
        log.warning("answer not composed: %s", exc)
        return TurnEnded(fallback_answer(turn.outcomes, held_back or ()), "stop")
    count(turn.result, composed)
    store.add_message(turn.result.session_id, "assistant", composed.content,
                      prompt_tokens=composed.prompt_tokens, completion_tokens=composed.completion_tokens,
                      cached_tokens=composed.cached_tokens)
    again = _passed(store, turn, composed, facts, finish="stop")
    return again if isinstance(again, TurnEnded) else TurnEnded(fallback_answer(turn.outcomes, again), "stop")


def _passed(store: Store, turn: Turn, reply: ModelReply, facts: TurnFacts,
            finish: str | None = None) -> TurnEnded | list[str]:
    """The turn's end with this reply as its answer (without a copied fact label, stored as the
    turn's last reply when that changed it), or why it may not be passed on (a lane note)."""
    session = turn.result.session_id
    content = unlabelled(reply.content)
    problems = faults(content, facts)
    if problems:
        store.add_message(session, "system", "Answer not passed on: " + "; ".join(problems), lane_note=True)
        return problems
    if content != reply.content:
        store.add_message(session, "assistant", content)
    reason = finish or ("length" if reply.finish_reason == "length" else "stop")
    return TurnEnded(content, reason, lane_written=False)


def _earlier(store: Store, turn: Turn) -> str:
    return earlier_facts(store.messages(turn.result.session_id))
