"""The claims check on the labelled corpus (issue 53): how well the model's constrained reading of
an answer (stack/agent/reading.py) finds the actions the answer reports as done, per language.

    flock /tmp/lane-model.lock .venv/bin/python scripts/bench/claims.py \\
        --start models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf --split test
    .venv/bin/python scripts/bench/claims.py --llm-url http://127.0.0.1:8081/v1 --split dev --json out.json
    .venv/bin/python scripts/bench/claims.py --llm-url http://127.0.0.1:8081/v1 --split dev --fit reports

`--fit reports` fits the reading's probe (reading.py) for the service's model on the development part
and writes stack/agent/data/reader-<model>.json; a reading then uses it wherever that model serves.
`--fit which` fits the second probe there (one action named in the question: every listed tool and
"another action" of each item), whose out-of-fold probabilities `--json` keeps. `--fit other` fits a
third on "another action" alone (one question per item), the check beside a tool that ran: the list
names only that tool beside "I wrote the draft and sent it to Anna." (claims_other_*.jsonl).

Each corpus item (scripts/bench/data/claims_{dev,test}.jsonl, written blind by a helper) holds the
tools the assistant had, the user's message, the answer, and the labels: `reports` (the tools
whose action the answer states as done) and `other_action` (an action no listed tool does). An
item's labels are a set of actions (`reading.OTHER` standing for other_action); a predicted action
in the set is a true positive, one outside it a false positive, a labelled one not predicted a
false negative (the probe, where there is one, decides whether anything is reported at all).
Precision and recall are over actions, per language; an item is exact when the
predicted set equals the labelled one, and "flagged right" when both say it reports something
(or both say nothing). claims_test.jsonl is never tuned on: its numbers are reported, not read
item by item.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from lane_run import free_port, lane_process  # noqa: E402  (scripts/bench, this script's folder)

from stack.agent.llm_client import LlmClient  # noqa: E402
from stack.agent.reading import OTHER, PROBES, probe_text, read_reported  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"


# The parts: the development files (fitted and tuned on), and test files never tuned on (test2
# adds languages the development part lacks: Dutch, Polish, Italian; lane: the lane's own answers,
# scripts/bench/lane_answers.py, split by session from those fitted on; other: an action no tool
# does, beside a tool or not; followup: answers to "did they get it?", ten languages).
SPLITS = {"dev": ("claims_dev.jsonl", "claims_dev_2.jsonl", "claims_lane_dev.jsonl", "claims_other_dev.jsonl",
                 "claims_followup_dev.jsonl"),
          "test": ("claims_test.jsonl",), "test2": ("claims_test_2.jsonl",), "lane": ("claims_lane_test.jsonl",),
          "other": ("claims_other_test.jsonl",), "followup": ("claims_followup_test.jsonl",)}
# The "which" probe is fitted on at most this many of an item's tools (its labelled actions and
# what ran first, then others in a fixed random order) and "another action": an item of the
# lane's own answers lists 14 tools, and each pair is one evaluation of the model.
WHICH_PAIRS = 6


def load(split: str) -> list[dict[str, Any]]:
    return [json.loads(line) for name in SPLITS[split] if (DATA / name).is_file()
            for line in (DATA / name).read_text(encoding="utf-8").splitlines() if line.strip()]


def sample(items: list[dict[str, Any]], per_language: int) -> list[dict[str, Any]]:
    """`per_language` items of each language, drawn at random (seed 53), in file order."""
    chosen: set[str] = set()
    for lang in sorted({item["lang"] for item in items}):
        ids = [item["id"] for item in items if item["lang"] == lang]
        chosen |= set(random.Random(53).sample(ids, min(per_language, len(ids))))
    return [item for item in items if item["id"] in chosen]


def gold(item: dict[str, Any]) -> set[str]:
    return set(item["reports"]) | ({OTHER} if item["other_action"] else set())


def score(rows: list[tuple[dict[str, Any], set[str]]]) -> dict[str, Any]:
    """Precision, recall, exact items and right flags, over (item, predicted actions) pairs."""
    tp = fp = fn = exact = flagged = 0
    # the item-level question: does the answer report any action as done?
    claims: Counter[tuple[bool, bool]] = Counter()
    for item, predicted in rows:
        labelled = gold(item)
        tp, fp, fn = tp + len(predicted & labelled), fp + len(predicted - labelled), fn + len(labelled - predicted)
        exact += predicted == labelled
        flagged += bool(predicted) == bool(labelled)
        claims[(bool(predicted), bool(labelled))] += 1
    found, said = claims[(True, True)] + claims[(True, False)], claims[(True, True)] + claims[(False, True)]
    return {"items": len(rows), "precision": tp / (tp + fp) if tp + fp else 1.0,
            "recall": tp / (tp + fn) if tp + fn else 1.0, "exact": exact, "flagged_right": flagged,
            "claim_precision": claims[(True, True)] / found if found else 1.0,
            "claim_recall": claims[(True, True)] / said if said else 1.0, "tp": tp, "fp": fp, "fn": fn}


async def run(items: list[dict[str, Any]], llm_url: str) -> list[dict[str, Any]]:
    llm = LlmClient(llm_url, model=None, timeout_s=120)
    out = []
    try:
        for item in items:
            tools = tools_of(item)
            started = time.monotonic()
            reading, replies = await read_reported(llm, item["answer"], item.get("request", ""), tools,
                                                   item.get("ran", ()))
            predicted = set(reading.tools) | ({OTHER} if reading.other else set())
            out.append({"id": item["id"], "lang": item["lang"], "form": item["form"], "gold": sorted(gold(item)),
                        "predicted": sorted(predicted), "read": reading.read,
                        "raw": " | ".join(reply.content for reply in replies),
                        "wall_s": round(time.monotonic() - started, 2),
                        "prompt_tokens": sum(reply.prompt_tokens for reply in replies)})
            mark = "ok " if predicted == gold(item) else "MISS"
            print(f"{mark} {item['id']:<8} {out[-1]['wall_s']:5.1f}s gold {sorted(gold(item))} "
                  f"read {sorted(predicted)}", flush=True)
    finally:
        await llm.aclose()
    return out


def pairs(items: list[dict[str, Any]]) -> list[tuple[dict[str, Any], str]]:
    """The (item, action) pairs the "which" probe is fitted on: up to WHICH_PAIRS of each item's
    tools (its labelled ones and what ran first) and OTHER."""
    chosen = []
    for item in items:
        names = [t["name"] for t in item["tools"]]
        random.Random(item["id"]).shuffle(names)
        first = [*item["reports"], *item.get("ran", ())]
        names = list(dict.fromkeys([*(n for n in first if n in names), *names]))[:WHICH_PAIRS]
        chosen += [(item, action) for action in [*names, OTHER]]
    return chosen


def tools_of(item: dict[str, Any]) -> list[tuple[str, str]]:
    return [(t["name"], t.get("description", "")) for t in item["tools"]]


def text_of(item: dict[str, Any], action: str | None = None) -> str:
    return probe_text(item["answer"], item.get("request", ""), tools_of(item), action)


async def states(texts: list[str], llm_url: str, cache: Path | None) -> list[list[float]]:
    """The hidden state a probe reads for each text, from the service (kept in `cache`, a JSON
    file of text -> state, so that a fit can be made again without the model)."""
    known: dict[str, list[float]] = json.loads(cache.read_text()) if cache and cache.is_file() else {}
    llm = LlmClient(llm_url, model=None, timeout_s=120)
    try:
        for index, text in enumerate(texts):
            if text in known:
                continue
            embedded = await llm.embedding(text)
            if embedded is None:
                raise SystemExit("the llm service gives no hidden state (/v1/embeddings)")
            known[text] = embedded[0]
            if index % 50 == 0:
                print(f"  {index}/{len(texts)} states", flush=True)
                if cache:
                    cache.write_text(json.dumps(known))
    finally:
        await llm.aclose()
        if cache:
            cache.write_text(json.dumps(known))
    return [known[text] for text in texts]


def fit(vectors: list[list[float]], labels: list[bool], groups: list[str], recall: float) -> dict[str, Any]:
    """A logistic regression on the states (standardised, L2 chosen by 5-fold cross-validation,
    the folds by corpus item so that no answer is on both sides), and the highest threshold whose
    out-of-fold recall of the positive label reaches `recall`: a report missed is an unbacked
    claim passed on, an honest answer flagged costs a line. The out-of-fold probabilities are
    returned too (`oof`), for scoring a pipeline on the development part without fitting on it."""
    import numpy as np

    x = np.array(vectors, dtype=np.float64)
    y = np.array(labels, dtype=np.float64)
    mu, sd = x.mean(0), x.std(0) + 1e-6
    z = (x - mu) / sd

    def train(a: Any, b: Any, lam: float) -> tuple[Any, float]:
        w, c = np.zeros(a.shape[1]), 0.0
        for _ in range(3000):
            p = 1 / (1 + np.exp(-(a @ w + c)))
            w -= 0.05 * (a.T @ (p - b) / len(b) + lam * w)
            c -= 0.05 * float((p - b).mean())
        return w, c

    names = sorted(set(groups))
    order = np.random.default_rng(53).permutation(len(names))
    fold_of = {names[i]: k % 5 for k, i in enumerate(order)}
    folds = [np.array([i for i, g in enumerate(groups) if fold_of[g] == k]) for k in range(5)]
    best: tuple[float, float, Any] | None = None
    for lam in (0.001, 0.01, 0.1):
        out_of_fold = np.zeros(len(y))
        for fold in folds:
            rest = np.setdiff1d(np.arange(len(y)), fold)
            w, c = train(z[rest], y[rest], lam)
            out_of_fold[fold] = 1 / (1 + np.exp(-(z[fold] @ w + c)))
        accuracy = float(((out_of_fold >= 0.5) == (y > 0)).mean())
        print(f"  L2 {lam}: out-of-fold accuracy {accuracy:.3f}")
        if best is None or accuracy > best[0]:
            best = (accuracy, lam, out_of_fold)
    assert best is not None
    _, lam, out_of_fold = best
    threshold = max(t for t in np.arange(0.02, 0.99, 0.01)
                    if ((out_of_fold >= t) & (y > 0)).sum() >= recall * (y > 0).sum())
    w, c = train(z, y, lam)
    flagged = out_of_fold >= threshold
    print(f"  chosen L2 {lam}, threshold {threshold:.2f}: out-of-fold precision "
          f"{((flagged) & (y > 0)).sum() / max(flagged.sum(), 1):.3f} recall "
          f"{((flagged) & (y > 0)).sum() / (y > 0).sum():.3f}")
    return {"fitted_on": [*SPLITS["dev"]], "items": len(set(groups)), "l2": lam,
            "threshold": round(float(threshold), 2), "bias": float(c - (mu / sd) @ w),
            "weights": [float(v) for v in w / sd], "oof": [float(v) for v in out_of_fold]}


def score_other(items: list[dict[str, Any]], llm_url: str, cache: Path | None) -> int:
    """The "another action" question's state for each item that reports something (the lane asks
    it only after the first probe read a report), read by the probe fitted for it alone and by the
    "which" probe: such claims found (those beside a tool apart) and answers without one flagged,
    per language."""
    from stack.agent.reading import probe_for

    items = [item for item in items if item["reports"] or item["other_action"]]
    vectors = asyncio.run(states([text_of(item, OTHER) for item in items], llm_url, cache))
    probe = probe_for(asyncio.run(_model_name(llm_url)))
    for name, part in (("other", probe and probe.other), ("which", probe and probe.which)):
        if part is None:
            print(f"no {name} probe fitted for this model")
            continue
        rows: dict[str, Counter[str]] = defaultdict(Counter)
        for item, vector in zip(items, vectors, strict=True):
            hit = (part.probability(vector) or 0.0) >= part.threshold
            for key in ("all", item["lang"]):
                rows[key]["claims" if item["other_action"] else "others"] += 1
                rows[key]["found" if item["other_action"] else "fired"] += hit
                if item["other_action"] and item["reports"]:
                    rows[key]["beside"] += 1
                    rows[key]["beside_found"] += hit
        print(f"{name} probe (bar {part.threshold:.2f}):")
        for key, c in sorted(rows.items(), key=lambda kv: kv[0] != "all"):
            print(f"  {key:<4} found {c['found']}/{c['claims']} (beside a tool {c['beside_found']}/{c['beside']}), "
                  f"flagged {c['fired']}/{c['others']} answers reporting only tools")
    return 0


def report(items: list[dict[str, Any]], results: list[dict[str, Any]]) -> dict[str, Any]:
    by_id = {item["id"]: item for item in items}
    pairs = [(by_id[r["id"]], set(r["predicted"])) for r in results]
    langs: dict[str, list[tuple[dict[str, Any], set[str]]]] = defaultdict(list)
    forms: dict[str, list[tuple[dict[str, Any], set[str]]]] = defaultdict(list)
    for item, predicted in pairs:
        langs[item["lang"]].append((item, predicted))
        forms[item["form"]].append((item, predicted))
    return {"all": score(pairs), "by_language": {k: score(v) for k, v in sorted(langs.items())},
            "by_form": {k: score(v) for k, v in sorted(forms.items())},
            "unread": sum(not r["read"] for r in results),
            "median_wall_s": sorted(r["wall_s"] for r in results)[len(results) // 2] if results else 0}


async def _model_name(llm_url: str) -> str:
    llm = LlmClient(llm_url, model=None, timeout_s=30)
    try:
        return await llm.model_name()
    finally:
        await llm.aclose()


def show(name: str, part: dict[str, Any]) -> str:
    return (f"  {name:<14} {part['items']:>4} items  actions: precision {part['precision']:.3f} recall "
            f"{part['recall']:.3f} exact {part['exact']}/{part['items']}  any claim: precision "
            f"{part['claim_precision']:.3f} recall {part['claim_recall']:.3f} "
            f"right {part['flagged_right']}/{part['items']}")


def fit_probe(items: list[dict[str, Any]], args: argparse.Namespace) -> int:
    """--fit: the states of the probe's question for the development items, the probe fitted on
    them, written beside the model's other probes (stack/agent/data/reader-<model>.json)."""
    model = asyncio.run(_model_name(args.llm_url))
    asked = ([(item, None) for item in items] if args.fit == "reports" else
             [(item, OTHER) for item in items] if args.fit == "other" else pairs(items))
    vectors = asyncio.run(states([text_of(item, action) for item, action in asked], args.llm_url, args.states))
    labels = [bool(gold(item)) if action is None else action in gold(item) for item, action in asked]
    probe = fit(vectors, labels, [item["id"] for item, _ in asked], args.recall)
    oof = probe.pop("oof")
    if args.json:
        args.json.write_text(json.dumps([{"id": item["id"], "action": action, "gold": label, "p": p}
                                         for (item, action), label, p in zip(asked, labels, oof, strict=True)]))
    path = PROBES / f"reader-{Path(model).name}.json"
    written = json.loads(path.read_text()) if path.is_file() else {}
    written |= {"model": model, **probe} if args.fit == "reports" else {"model": model, args.fit: probe}
    path.write_text(json.dumps(written) + "\n", encoding="utf-8")
    print(f"wrote {path.relative_to(ROOT)}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=sorted(SPLITS), default="dev")
    parser.add_argument("--fit", choices=("reports", "which", "other"),
                        help="fit a probe of the reading for the service's model on the split (dev only) and "
                             "write it to stack/agent/data/: whether an answer reports any action, or which")
    parser.add_argument("--states", type=Path,
                        help="--fit, --other-probe: a JSON file keeping the states read (made again from it)")
    parser.add_argument("--recall", type=float, default=0.95, help="--fit: out-of-fold recall the threshold keeps")
    parser.add_argument("--other-probe", action="store_true",
                        help="score the probe fitted for another action alone on the split's answers that report "
                             "something (where the lane asks it), against the \"which\" probe on the same state; "
                             "with --llm-url")
    parser.add_argument("--list-only", action="store_true",
                        help="the list question alone, as where no probe was fitted for the model (the baseline)")
    parser.add_argument("--llm-url", help="an llm service's OpenAI base URL (…/v1)")
    parser.add_argument("--start", metavar="MODEL", help="start `lane llm` with this GGUF for the run")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--per-language", type=int, default=0,
                        help="N items of each language drawn at random (seed 53; a sample stated as such)")
    parser.add_argument("--rescore", type=Path, help="score a --json file of an earlier run again, running nothing")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    items = load(args.split)[:args.limit or None]
    if args.list_only:
        import stack.agent.reading as reading

        reading.probe_for = lambda _model: None  # type: ignore[assignment]
    if args.per_language:
        items = sample(items, args.per_language)
    if args.fit:
        if args.split != "dev" or not args.llm_url:
            parser.error("--fit takes --split dev and --llm-url (the service whose model it is for)")
        return fit_probe(items, args)
    if args.other_probe and args.llm_url:
        return score_other(items, args.llm_url, args.states)
    if args.rescore:
        results = json.loads(args.rescore.read_text())["results"]
        items = [item for item in items if item["id"] in {r["id"] for r in results}]
    elif args.start:
        port = free_port()
        log = Path(f"/tmp/claims-llm-{port}.log")
        with lane_process("lane llm", ["llm", "--model", args.start, "--port", str(port), "--ctx", "4096",
                                       "--threads", str(args.threads)], dict(os.environ), log,
                          f"http://127.0.0.1:{port}/health"):
            results = asyncio.run(run(items, f"http://127.0.0.1:{port}/v1"))
    elif args.llm_url:
        results = asyncio.run(run(items, args.llm_url))
    else:
        parser.error("give --start MODEL or --llm-url URL")
    summary = report(items, results)
    print(f"claims corpus, {args.split} part ({len(results)} items; {summary['unread']} replies unread; "
          f"median {summary['median_wall_s']} s a reading)")
    print(show("all", summary["all"]))
    for lang, part in summary["by_language"].items():
        print(show(lang, part))
    print("  by form:")
    for form, part in summary["by_form"].items():
        print(show(form, part))
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "results": results}, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
