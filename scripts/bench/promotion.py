#!/usr/bin/env python3
"""Does promotion help? How often the tool it would offer directly is a gold tool, and how often
a wrong one, on the labelled queries of the retrieval corpus.

For each query, promotion (stack/toolsearch/promotion.py) picks 0-2 deferred
tools from the catalog. Counted per category:
  gold   a gold tool of the query is among the promoted (the model can act at once)
  wrong  tools were promoted, none of them gold (they cost tokens and may mislead; on negative
         queries any promotion is wrong)
  none   nothing promoted (the model searches as usual)

    .venv/bin/python scripts/bench/promotion.py [--catalog FILE] [--queries FILE.jsonl]
        [--examples BOOK.json]   (the tools' example requests, as `lane examples --book` keeps them)
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from stack.toolsearch.catalog import catalog_of, installed_method  # noqa: E402
from stack.toolsearch.commands import load_catalog_file  # noqa: E402
from stack.toolsearch.examples import ExampleBook  # noqa: E402
from stack.toolsearch.promotion import BUDGET_TOKENS, promoted_tools  # noqa: E402

DATA = ROOT / "scripts" / "bench" / "data"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--catalog", type=Path, default=DATA / "catalog.json")
    parser.add_argument("--queries", type=Path, default=DATA / "queries.jsonl")
    parser.add_argument("--method", choices=("bm25", "hybrid"), default=None)
    parser.add_argument("--examples", type=Path, help="an example-request book")
    args = parser.parse_args()
    method = args.method or installed_method()
    book = ExampleBook(args.examples) if args.examples else None
    catalog = catalog_of(load_catalog_file(args.catalog), method, examples=book)
    catalog.vectors_ready()  # the lane answers with BM25 while they build; measure the hybrid
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for line in args.queries.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        query = json.loads(line)
        text = query["query"]
        promoted = promoted_tools(catalog, text)
        gold = set(query.get("gold") or [])
        verdict = "none" if not promoted else "gold" if set(promoted) & gold else "wrong"
        for key in (query.get("category", "all"), "ALL"):
            counts[key][verdict] += 1
            counts[key]["n"] += 1
            counts[key]["promoted"] += len(promoted)
    with_examples = f", examples {args.examples}" if book else ""
    print(f"promotion ({method}{with_examples}, margin rule of stack/toolsearch/promotion.py, "
          f"budget {BUDGET_TOKENS} tokens)")
    print(f"{'category':<12} {'n':>4} {'gold':>6} {'wrong':>6} {'none':>6} {'tools/query':>11}")
    for key in sorted(counts, key=lambda k: (k == "ALL", k)):
        c = counts[key]
        print(f"{key:<12} {c['n']:>4} {c['gold'] / c['n']:>6.1%} {c['wrong'] / c['n']:>6.1%} "
              f"{c['none'] / c['n']:>6.1%} {c['promoted'] / c['n']:>11.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
