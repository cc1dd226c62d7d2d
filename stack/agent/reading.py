"""The lane reads a request before the turn: promotion's own model calls.

Before the turn's first model call, the lane's model may restate the request as the tools it needs
(toolsearch/restate.py words that question and parses the answer) and judge the best search hits
one by one (toolsearch/judge.py); promotion (toolsearch/promotion.py) then decides what to offer
from both. The agent loop only takes the result: `turn.restated, turn.judged = await read_request(...)`.

This module lives in agent/, not toolsearch/, because it asks the model through `LlmClient`
(agent/llm_client.py) and imports flow api -> agent -> toolsearch: toolsearch words the questions
and reads the answers, agent asks them. `lane restate` and `lane judge` ask the same questions
through `ask_restatement` and `judge_each`, so the offline files and the live turn never differ.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from ..config import Settings
from ..store import Store
from ..tools.registry import Registry
from ..toolsearch.catalog import Catalog
from ..toolsearch.judge import (
    JUDGE_ALTERNATIVES,
    JUDGE_MAX_TOKENS,
    judge_messages,
    judged_hits,
    yes_probability,
)
from ..toolsearch.promotion import worth_judging
from ..toolsearch.restate import RESTATE_MAX_TOKENS, parse_restatement, restate_messages
from ..toolsearch.surface import Profile, Toolset, assemble
from .corrections import named_in
from .llm_client import LlmClient, LlmError, ModelReply

log = logging.getLogger("lane.agent")
# A restatement is a few dozen tokens after a cached prefix; one that takes longer is not worth
# waiting for (the request is searched as written).
RESTATE_TIMEOUT_S = 30.0
# Judging is one token after a cached prefix per candidate; what is not judged within this stays
# ranked as search ranked it.
JUDGE_TIMEOUT_S = 30.0


@dataclass
class _Reading:
    """What one request's reading gathered, and where its model calls go."""

    llm: LlmClient
    store: Store
    session_id: str
    query: str
    count: Callable[[ModelReply], None]
    restated: tuple[str, ...] = ()
    judged: dict[str, float] = field(default_factory=dict)

    def record(self, purpose: str, content: str, replies: list[ModelReply]) -> None:
        """One lane_calls row (its replies' tokens summed), apart from the conversation; each reply
        counts in the turn's usage."""
        for reply in replies:
            self.count(reply)
        self.store.add_lane_call(self.session_id, purpose, content,
                                 prompt_tokens=sum(r.prompt_tokens for r in replies),
                                 completion_tokens=sum(r.completion_tokens for r in replies),
                                 cached_tokens=sum(r.cached_tokens for r in replies))


async def read_request(llm: LlmClient, store: Store, registry: Registry, settings: Settings, *,
                       session_id: str, query: str, profile: Profile,
                       count: Callable[[ModelReply], None]) -> tuple[tuple[str, ...], dict[str, float]]:
    """The request's restatement and the judged hits' yes-probabilities (both empty when not read).

    Read only when tools are deferred and promotion is on: a request that names an offered tool
    gets no promotion, so it is not read either. The judgement is skipped where promotion already
    offers one tool without it (a request whose words single out a tool gains nothing from it but
    its cost), while it can narrow two offered tools to one or vouch where nothing was offered.
    `count` receives every model reply, so the turn's usage includes them."""
    if not ((settings.restate_requests or settings.judge_tools) and settings.promote_tools
            and query.strip()):
        return (), {}
    toolset = assemble(registry, settings, profile=profile)
    if not toolset.bridged or names_an_offered_tool(query, toolset):
        return (), {}
    reading = _Reading(llm, store, session_id, query, count)
    if settings.restate_requests:
        await _restate(reading)
    if settings.judge_tools and worth_judging(toolset.catalog, query, settings, reading.restated):
        await _judge(reading, toolset.catalog)
    return reading.restated, reading.judged


def names_an_offered_tool(query: str, toolset: Toolset) -> bool:
    """Whether the user's words name a tool already offered: then nothing is promoted beside it."""
    return any(named_in(t["function"]["name"], query) for t in toolset.offered)


async def _restate(reading: _Reading) -> None:
    """A model that fails or dawdles leaves the request to be searched as it was written."""
    try:
        async with asyncio.timeout(RESTATE_TIMEOUT_S):
            reply = await ask_restatement(reading.llm, reading.query)
    except (LlmError, TimeoutError) as exc:
        log.warning("request not restated, searched as written: %s", exc or "timed out")
        return
    reading.record("restate", reply.content, [reply])
    reading.restated = parse_restatement(reply.content)
    log.info("request restated as %s", " | ".join(reading.restated) or "nothing")


async def _judge(reading: _Reading, catalog: Catalog) -> None:
    """The best hits, judged in their order until the model fails or time runs out; the record is
    one lane call listing each tool with the model's answer and its probability."""
    hits = judged_hits(catalog, reading.query, reading.restated)
    answers: list[tuple[str, ModelReply]] = []
    try:
        async with asyncio.timeout(JUDGE_TIMEOUT_S):
            await judge_each(reading.llm, reading.query,
                             [(h.name, catalog.tools[h.name].description) for h in hits], answers)
    except (LlmError, TimeoutError) as exc:
        log.warning("judged %d of %d hits: %s", len(answers), len(hits), exc or "timed out")
    lines = []
    for name, reply in answers:
        yes = judgement(reply)
        if yes is not None:
            reading.judged[name] = yes
        lines.append(f"{name}: {reply.content.strip() or '(nothing)'}"
                     + (f" (yes {yes:.2f})" if yes is not None else ""))
    if answers:
        reading.record("judge", "\n".join(lines), [reply for _, reply in answers])


async def ask_restatement(llm: LlmClient, request: str) -> ModelReply:
    """The model's restatement of a request (toolsearch/restate.py words the question), as the
    agent asks at the start of a turn and `lane restate` for a query file."""
    return await llm.chat(restate_messages(request), [], max_tokens=RESTATE_MAX_TOKENS,
                          temperature=0.0)


async def ask_judgement(llm: LlmClient, request: str, name: str, description: str) -> ModelReply:
    """The model's answer whether one tool does what the request asks (toolsearch/judge.py words
    the question), with the first token's likeliest alternatives."""
    return await llm.chat(judge_messages(request, name, description), [], max_tokens=JUDGE_MAX_TOKENS,
                          temperature=0.0, top_logprobs=JUDGE_ALTERNATIVES)


async def judge_each(llm: LlmClient, request: str, candidates: list[tuple[str, str]],
                     answers: list[tuple[str, ModelReply]]) -> None:
    """Asks about each (name, description) in turn, adding (name, reply) to `answers` as each
    comes, so a caller that stops waiting keeps the answers it had."""
    for name, description in candidates:
        answers.append((name, await ask_judgement(llm, request, name, description)))


def judgement(reply: ModelReply) -> float | None:
    """The yes-probability of a judgement's reply (None: the model said neither)."""
    return yes_probability(reply.content, reply.logprobs[0] if reply.logprobs else None)
