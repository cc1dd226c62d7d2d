"""Tool-retrieval benchmark: recall per query category and search latency, per method.

Runs the lane's search over the real-tool catalog and the seven hand-written query sets in
scripts/bench/data/ (see its README.md): the tuning set (queries.jsonl), the held-out and third
sets, which no tuning loop looked at, and four sets written blind, each measured once as the code
stood when it was written (the seventh, written last, in stop 30). A change to the retrieval
shows up as numbers on all of them rather than as impressions.

Scoring (k = 1, 3, 5):
* lexical, semantic, ambiguous: a hit when any gold tool is among the top k; MRR from the best
  ranked gold.
* multi-tool: the share of the gold tools found in the top k (both tools are needed); MRR from the
  best ranked gold.
* negative (no tool fits): excluded from recall and from "overall". Reported instead: how often
  the search answers nothing or its top hit is flagged low-confidence by the lane's own rule
  (`Catalog.confident`), next to the same flag's rate on answerable queries (false alarms).

Latency: wall time of one `.search(query, 5)` for every query, at 100 tools (a fixed random
sample of the catalog), 1,000 tools (the catalog's first 1,000) and 5,000 tools (the catalog
padded with copies of real tools under renamed servers, e.g. `github_2__list_issues`, as a second
GitHub Enterprise instance would appear).
Each timed query text is new to the process (whitespace-padded), so caches keyed by query text
do not hide the cost of embedding it. Build time is that of a new process's catalog (the lane's
`Catalog`, a fresh embedder with nothing in memory, reading the on-disk vector cache;
`LANE_EMBED_CACHE=off` measures a first-ever build instead): "first" is its first search answer
(BM25 while the vectors build), "build" is until the vectors are ready.

    .venv/bin/python scripts/bench/retrieval.py [--methods bm25,embed,hybrid] [--queries FILE]...
        [--sizes 100,1000,5000] [--model FILE.onnx] [--json]
"""
from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from stack.toolsearch.catalog import catalog_of  # noqa: E402
from stack.toolsearch.embedding import OnnxMiniLM, onnx_model_path, vector_store_folder  # noqa: E402
from stack.toolsearch.examples import ExampleBook  # noqa: E402
from stack.toolsearch.retrieval import ToolDoc, ToolIndex  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
CATEGORIES = ("lexical", "semantic", "ambiguous", "multi-tool")
KS = (1, 3, 5)
DEEP = 50  # how far down a miss's gold is looked for when reporting misses
SEED = 20
EXAMPLES_SUFFIX = "+ex"
QUERY_SETS = ("queries.jsonl", "queries_heldout.jsonl", "queries_third.jsonl", "queries_fourth.jsonl",
              "queries_fifth.jsonl", "queries_sixth.jsonl", "queries_seventh.jsonl")
_FRESH = itertools.count(1)  # padding widths never used before in this process


@dataclass
class Scores:
    """Running sums of R@k and reciprocal ranks for one slice of queries."""
    n: int = 0
    recall: dict[int, float] = field(default_factory=lambda: {k: 0.0 for k in KS})
    rr: float = 0.0

    def add(self, ranked: list[str], gold: list[str], multi: bool) -> None:
        self.n += 1
        for k in KS:
            found = sum(1 for g in gold if g in ranked[:k])
            self.recall[k] += found / len(gold) if multi else float(found > 0)
        ranks = [ranked.index(g) + 1 for g in gold if g in ranked]
        self.rr += 1.0 / min(ranks) if ranks else 0.0

    def row(self) -> dict[str, Any]:
        d = max(self.n, 1)
        return {"n": self.n, **{f"R@{k}": round(self.recall[k] / d, 3) for k in KS},
                "MRR": round(self.rr / d, 3)}


def load_queries(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()]


def padded(tools: list[dict], size: int) -> list[dict]:
    """Exactly `size` tools: the first `size` of `tools`, or all of them plus copies of real tools
    under renamed servers (`slack_2__...`), the way a second instance of a server would appear."""
    out = list(tools)
    copy = 2
    while len(out) < size:
        for tool in tools:
            if len(out) >= size:
                break
            server = tool.get("x-server") or tool["function"]["name"].split("__", 1)[0]
            bare = tool["function"]["name"].split("__", 1)[-1]
            renamed = f"{server}_{copy}"
            out.append({**tool, "x-server": renamed,
                        "function": {**tool["function"], "name": f"{renamed}__{bare}"[:64]}})
        copy += 1
    return out[:size]


def low_confidence_rule() -> Callable[[ToolIndex, str, str], bool] | None:
    """The lane's own confidence test (`Catalog.confident`) applied to a bare index, or None when
    this version of toolsearch has none."""
    try:
        from stack.toolsearch.catalog import Catalog
    except ImportError:
        return None
    confident = getattr(Catalog, "confident", None)
    if confident is None:
        return None
    return lambda index, query, name: not confident(SimpleNamespace(index=index), query, name)


def fresh_embedder(model: Path | None = None) -> OnnxMiniLM | None:
    """An embedder as a new process has it: nothing in memory, the disk cache as it is. `model`:
    another ONNX file to measure instead of the installed one (scripts/embedder/)."""
    path, folder = model or onnx_model_path(), vector_store_folder()
    if path is None:
        return None
    return OnnxMiniLM(path, cache_folder=folder)


def build(docs: list[ToolDoc], method: str, model: Path | None = None
          ) -> tuple[ToolIndex | None, float, str]:
    """The index, its build time, and why the method was skipped (empty when it was not)."""
    embedder = fresh_embedder(model) if model and method != "bm25" else None
    started = time.perf_counter()
    index = ToolIndex(docs, method=method, embedder=embedder)
    took = time.perf_counter() - started
    if getattr(index, "method", method) != method:
        return None, took, (f"{method}: skipped, its optional dependencies are not installed "
                            f"(pip install '.[embed]'); the index fell back to {index.method}")
    return index, took, ""


def evaluate(index: ToolIndex, queries: list[dict], flag) -> dict[str, Any]:
    per_cat = {c: Scores() for c in CATEGORIES}
    overall = Scores()
    per_tag: dict[str, Scores] = {}
    misses = []
    negatives = {"n": 0, "empty": 0, "low_confidence": 0}
    answerable_flagged = 0
    for q in queries:
        hits = index.search(q["query"], DEEP)
        ranked = [h.name for h in hits]
        if q["category"] == "negative":
            negatives["n"] += 1
            negatives["empty"] += not ranked
            if not ranked or (flag and flag(index, q["query"], ranked[0])):
                negatives["low_confidence"] += 1
            continue
        multi = q["category"] == "multi-tool"
        for bucket in (per_cat[q["category"]], overall,
                       *(per_tag.setdefault(t, Scores()) for t in q.get("tags", []))):
            bucket.add(ranked, q["gold"], multi)
        if flag and ranked and flag(index, q["query"], ranked[0]):
            answerable_flagged += 1
        found = [g for g in q["gold"] if g in ranked[:5]]
        if (len(found) < len(q["gold"])) if multi else not found:
            ranks = [ranked.index(g) + 1 for g in q["gold"] if g in ranked]
            misses.append({"id": q["id"], "category": q["category"], "query": q["query"],
                           "gold": q["gold"], "gold_rank": min(ranks) if ranks else None,
                           "top3": ranked[:3]})
    answerable = overall.n
    misses.sort(key=lambda m: (m["gold_rank"] is not None, -(m["gold_rank"] or 0)))
    return {
        "categories": {c: s.row() for c, s in per_cat.items()},
        "overall": overall.row(),
        "tags": {t: s.row() for t, s in sorted(per_tag.items())},
        "negative": {**negatives,
                     "low_confidence_rate": (round(negatives["low_confidence"] / negatives["n"], 3)
                                             if flag and negatives["n"] else None)},
        "answerable_flagged_low_rate": (round(answerable_flagged / answerable, 3)
                                        if flag and answerable else None),
        "misses": misses,
    }


def latency(docs: list[ToolDoc], method: str, queries: list[str], rounds: int,
            model: Path | None = None, examples: ExampleBook | None = None) -> dict[str, Any]:
    embedder = fresh_embedder(model) if method != "bm25" else None
    started = time.perf_counter()
    catalog = catalog_of(docs, method, embedder=embedder, examples=examples)  # type: ignore[arg-type]
    catalog.search("warm up", 5)  # lazy tables and the embedder session load once per process
    first_s = time.perf_counter() - started
    catalog.vectors_ready()
    build_s = time.perf_counter() - started
    index = catalog.index
    if index.method != method:
        return {"tools": len(docs), "skipped": f"{method}: its optional dependencies are missing"}
    times = []
    for _ in range(rounds):
        # Padding makes each text new to any per-query cache (the embedder keeps one keyed by
        # text) without changing its tokens: a cold search is what a fresh user query costs.
        pad = " " * next(_FRESH)
        for q in queries:
            started = time.perf_counter()
            index.search(pad + q, 5)
            times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return {"tools": len(docs), "first_ms": round(first_s * 1000, 1),
            "build_ms": round(build_s * 1000, 1), "searches": len(times),
            "p50_ms": round(statistics.median(times), 3),
            "p95_ms": round(times[int(0.95 * (len(times) - 1))], 3)}


def table(rows: dict[str, dict], title: str) -> str:
    head = f"{title:<14} {'n':>4} {'R@1':>6} {'R@3':>6} {'R@5':>6} {'MRR':>6}"
    lines = [head, "-" * len(head)]
    for name, r in rows.items():
        lines.append(f"{name:<14} {r['n']:>4} {r['R@1']:>6.3f} {r['R@3']:>6.3f} "
                     f"{r['R@5']:>6.3f} {r['MRR']:>6.3f}")
    return "\n".join(lines)


def report_text(result: dict[str, Any], show_misses: int) -> str:
    out = [f"catalog: {result['catalog_tools']} tools", ""]
    for note in result["notes"]:
        out.append(f"note: {note}")
    for name, one in result["sets"].items():
        out.append(f"##### {name}: {one['queries']} queries ({one['answerable']} answerable, "
                   f"{one['negatives']} negative)")
        out.extend(set_text(one, show_misses))
    out.append("summary, R@5 overall / semantic:")
    for name, one in result["sets"].items():
        out.append(f"  {name:<24} " + "  ".join(
            f"{method} {r['overall']['R@5']:.3f} / {r['categories']['semantic']['R@5']:.3f}"
            for method, r in one["methods"].items()))
    out.append("")
    out.append("latency per query, search(query, 5); a new process's catalog: first = its first "
               "answer, build = until its vectors are ready:")
    out.append(f"{'method':<10} {'tools':>6} {'first ms':>9} {'build ms':>9} {'p50 ms':>8} "
               f"{'p95 ms':>8}")
    for row in result["latency"]:
        if "skipped" in row:
            out.append(f"{row['method']:<10} {row['tools']:>6}  skipped")
            continue
        out.append(f"{row['method']:<10} {row['tools']:>6} {row['first_ms']:>9} "
                   f"{row['build_ms']:>9} {row['p50_ms']:>8.3f} {row['p95_ms']:>8.3f}")
    return "\n".join(out)


def set_text(result: dict[str, Any], show_misses: int) -> list[str]:
    out = []
    for method, r in result["methods"].items():
        out.append(f"== {method} (index built in {r['build_ms']} ms)")
        out.append(table({**r["categories"], "overall": r["overall"]}, "category"))
        out.append(table(r["tags"], "slice (tag)"))
        neg = r["negative"]
        rate = "n/a" if neg["low_confidence_rate"] is None else f"{neg['low_confidence_rate']:.3f}"
        false = ("n/a" if r["answerable_flagged_low_rate"] is None
                 else f"{r['answerable_flagged_low_rate']:.3f}")
        out.append(f"negative (excluded from recall): {neg['n']} queries, empty result "
                   f"{neg['empty']}, flagged low-confidence {rate}; answerable queries "
                   f"wrongly flagged low-confidence {false}")
        if show_misses:
            out.append(f"misses at 5 ({len(r['misses'])}), worst first:")
            for m in r["misses"][:show_misses]:
                rank = m["gold_rank"] or f">{DEEP}"
                out.append(f"  {m['id']:<10} gold rank {rank!s:>4}  {m['query'][:70]!r}")
                out.append(f"  {'':<10} gold {', '.join(m['gold'])}")
                out.append(f"  {'':<10} got  {', '.join(m['top3'])}")
        out.append("")
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    tools = json.loads(args.catalog.read_text(encoding="utf-8"))
    sets = {path.stem: load_queries(path) for path in args.queries}
    if args.category:
        sets = {name: [q for q in queries if q["category"] in args.category]
                for name, queries in sets.items()}
    flag = low_confidence_rule()
    notes = [] if flag else ["no Catalog.confident in this toolsearch: low-confidence rates n/a"]
    if args.model:
        notes.append(f"embedder: {args.model}, not the installed one")
    result: dict[str, Any] = {
        "catalog_tools": len(tools), "notes": notes, "latency": [],
        "sets": {name: {"queries": len(queries),
                        "answerable": sum(q["category"] != "negative" for q in queries),
                        "negatives": sum(q["category"] == "negative" for q in queries),
                        "methods": {}} for name, queries in sets.items()},
        "latency_setup": f"100 = fixed random sample (seed {SEED}); 1000 = the catalog's first "
                         f"1000; larger = padded with renamed-server copies; cold query texts",
    }
    texts = [q["query"] for queries in sets.values() for q in queries]
    subsets = [random.Random(SEED).sample(tools, size) if size < min(1000, len(tools))
               else padded(tools, size) for size in args.sizes]
    docs = [ToolDoc.from_definition(t) for t in tools]
    books: dict[str, ExampleBook | None] = {"": None}
    if args.examples:
        books[EXAMPLES_SUFFIX] = ExampleBook(args.examples)
        notes.append(f"{EXAMPLES_SUFFIX}: with the example requests in {args.examples} "
                     f"({len(books[EXAMPLES_SUFFIX])} tools)")
    for method, (suffix, book) in itertools.product(args.methods, books.items()):
        row = method + suffix
        index, build_s, skipped = build(book.with_examples(docs) if book else docs, method,
                                        model=args.model)
        if index is None:
            notes.append(skipped)
            result["latency"] += [{"method": row, "tools": n, "skipped": skipped}
                                  for n in args.sizes]
            continue
        for name, queries in sets.items():
            result["sets"][name]["methods"][row] = {"build_ms": round(build_s * 1000, 1),
                                                    **evaluate(index, queries, flag)}
        if not args.no_latency:
            for subset in subsets:
                timed = [ToolDoc.from_definition(t) for t in subset]
                result["latency"].append({"method": row, **latency(
                    timed, method, texts, args.rounds, args.model, book)})
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--catalog", type=Path, default=DATA / "catalog.json")
    parser.add_argument("--queries", type=Path, action="append",
                        help="a query set (repeatable; default: the seven sets in data/)")
    parser.add_argument("--sizes", default="100,1000,5000",
                        type=lambda s: [int(n) for n in s.split(",") if n.strip()],
                        help="catalog sizes for the latency rows")
    parser.add_argument("--methods", default="bm25,embed,hybrid",
                        type=lambda s: [m.strip() for m in s.split(",") if m.strip()])
    parser.add_argument("--category", action="append",
                        help="only this query category (repeatable)")
    parser.add_argument("--model", type=Path, help="an ONNX embedder to measure instead of the installed one")
    parser.add_argument("--examples", type=lambda s: Path(s) if s else None,
                        default=DATA / "examples.json",
                        help="an example-request book (lane examples --book): each method runs "
                             "again with it, as METHOD+ex (default data/examples.json; "
                             "--examples '' for none)")
    parser.add_argument("--rounds", type=int, default=1, help="latency passes over the queries")
    parser.add_argument("--no-latency", action="store_true")
    parser.add_argument("--misses", type=int, default=10, help="misses to list per method")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    args = parser.parse_args(argv)
    unknown = [m for m in args.methods if m not in ("bm25", "embed", "hybrid")]
    if unknown:
        parser.error(f"unknown method(s): {', '.join(unknown)}")
    args.queries = args.queries or [DATA / name for name in QUERY_SETS]
    for path in (args.catalog, *args.queries, *([args.examples] if args.examples else [])):
        if not path.is_file():
            parser.error(f"no such file: {path}")
    result = run(args)
    if args.json:
        print(json.dumps(result, indent=1, ensure_ascii=False))
    else:
        print(report_text(result, args.misses))
    return 0


if __name__ == "__main__":
    sys.exit(main())
