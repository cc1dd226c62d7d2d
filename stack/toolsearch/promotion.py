"""Promotion: offering the one or two deferred tools a request obviously needs, directly.

A small model that must search before it can act spends a model call and some attention on the
search. When the latest user message already singles out a tool ("create a GitHub issue titled
..."), its full schema joins the offered tools for that turn, and the model can call it at once.
Promotion only fires on a clear winner (confident, and well ahead of the next hit), and the
promoted schemas together stay under `promote_budget_tokens`.
"""

from __future__ import annotations

from ..config import Settings
from ..token_estimate import estimate_tokens
from .catalog import Catalog

# How far the best hit must lead the next one to count as a clear winner, as a share of its
# score. On scripts/bench/data this promotes a gold tool for 35% of queries and a wrong one for
# 7% (hybrid; BM25 alone: 32% and 9%); see scripts/bench/promotion.py.
MARGIN = 0.10
CANDIDATES = 3


def promoted_tools(catalog: Catalog, query: str, settings: Settings) -> list[str]:
    """Names of the deferred tools to offer directly for this query, best first (0 to 2).
    Decided once per catalog and query: the agent assembles before every model call of a turn."""
    if not settings.promote_tools or not query.strip() or not catalog:
        return []
    key = ("promote", query, settings.promote_budget_tokens)
    return list(catalog.memo(key, lambda: _winners(catalog, query, settings)))


def _winners(catalog: Catalog, query: str, settings: Settings) -> tuple[str, ...]:
    hits, confident = catalog.search(query, CANDIDATES)
    if not confident:
        return ()
    scores = [h.score for h in hits] + [0.0] * (CANDIDATES - len(hits))
    lead = MARGIN * scores[0]
    if scores[0] - scores[1] >= lead:
        winners = [hits[0].name]
    elif scores[1] - scores[2] >= lead and catalog.confident(query, hits[1].name):
        winners = [hits[0].name, hits[1].name]
    else:
        return ()
    chosen: list[str] = []
    spent = 0
    for name in winners:
        cost = estimate_tokens(catalog.tools[name].openai_schema())
        if spent + cost > settings.promote_budget_tokens:
            break
        chosen.append(name)
        spent += cost
    return tuple(chosen)
