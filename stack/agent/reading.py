"""The lane reads a request before the turn: promotion's own model calls.

Before the turn's first model call, the lane's model may restate the request as the tools it needs
(toolsearch/restate.py words that question and parses the answer) and judge the best search hits
one by one (toolsearch/judge.py); promotion (toolsearch/promotion.py) then decides what to offer
from both. The agent loop only takes the result: `turn.restated, turn.judged = await read_request(...)`.

Tool search words, asks and reads those questions (restate.py, judge.py) with whatever model it is
given; this module is the turn's side of them: which requests are read, how long the turn waits,
and where the calls are recorded (lane_calls) and counted (the turn's usage). `lane restate` and
`lane judge` ask the same questions through the same functions, so the offline files and the live
turn never differ.
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
from ..toolsearch.judge import judge_each, judged_hits, judgement
from ..toolsearch.promotion import worth_judging
from ..toolsearch.restate import ask_restatement, parse_restatement
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
