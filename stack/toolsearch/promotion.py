"""Promotion: offering the one or two deferred tools a request obviously needs, directly.

A small model that must search before it can act spends a model call and some attention on the
search. When the latest user message already singles out a tool ("create a GitHub issue titled
..."), its full schema joins the offered tools for that turn, and the model can call it at once.
Promotion fires on a clear winner (confident, and well ahead of the next hit). Without one, a
source the request singles out gets its two best confident hits: a source the request names
("what's on my plate in asana?"), or else the one whose tools are the two best hits ("turn the
page open in the browser into a PDF": `browser_pdf_save` just ahead of `browser_snapshot`). Which
product is then settled, which of its tools the model decides from their schemas; a small model
that sees none of them turns to a core tool instead. The promoted schemas together stay under
BUDGET_TOKENS. What these rules measured is in docs/measurements.md.
"""

from __future__ import annotations

from ..token_estimate import estimate_tokens
from .catalog import Catalog
from .retrieval import Hit

# How far the best hit must lead the next one to count as a clear winner, as a share of its
# score.
MARGIN = 0.10
CANDIDATES = 3
# For a source singled out: how many of its tools are offered (the product is settled; two of its
# tools leave the model a choice and fit the token budget); one search this deep serves every rule
# (a named source's tools may rank well below the first few). scripts/bench/promotion.py measures
# how often a right tool is offered, scripts/bench/deferred_tools.py what the real model makes of it.
SOURCE_TOOLS = 2
SEARCH_DEPTH = 30
# Room for one large schema (CircleCI's find_flaky_tests alone is 952 tokens) or two usual ones.
BUDGET_TOKENS = 1200


def promoted_tools(catalog: Catalog, query: str) -> list[str]:
    """Names of the deferred tools to offer directly for this query, best first (0 to 2).
    Decided once per catalog and query: the agent assembles before every model call of a turn."""
    if not query.strip() or not catalog:
        return []
    return list(catalog.memo(("promote", query), lambda: _winners(catalog, query)))


def _winners(catalog: Catalog, query: str) -> tuple[str, ...]:
    hits, confident = catalog.search(query, SEARCH_DEPTH)
    winners = _clear_winners(catalog, query, hits, confident) or _source_winners(catalog, query, hits)
    chosen: list[str] = []
    spent = 0
    for name in winners:
        cost = estimate_tokens(catalog.tools[name].openai_schema())
        if spent + cost > BUDGET_TOKENS:
            break
        chosen.append(name)
        spent += cost
    return tuple(chosen)


def _clear_winners(catalog: Catalog, query: str, hits: list[Hit], confident: bool) -> list[str]:
    if not confident:
        return []
    scores = [h.score for h in hits[:CANDIDATES]]
    scores += [0.0] * (CANDIDATES - len(scores))
    lead = MARGIN * scores[0]
    if scores[0] - scores[1] >= lead:
        return [hits[0].name]
    if scores[1] - scores[2] >= lead and catalog.confident(query, hits[1].name):
        return [hits[0].name, hits[1].name]
    return []


def _source_winners(catalog: Catalog, query: str, hits: list[Hit]) -> list[str]:
    """The best SOURCE_TOOLS confident hits among the tools of the sources the request names;
    without a name, the best SOURCE_TOOLS hits when one source has them all and all are confident."""
    sources = catalog.named_sources(query)
    if sources:
        own = [h.name for h in hits if catalog.tools[h.name].server in sources]
        return [name for name in own[:SOURCE_TOOLS] if catalog.confident(query, name)]
    names = [h.name for h in hits[:SOURCE_TOOLS]]
    servers = {catalog.tools[name].server for name in names}
    if (len(names) == SOURCE_TOOLS and len(servers) == 1 and "" not in servers
            and all(catalog.confident(query, name) for name in names)):
        return names
    return []
