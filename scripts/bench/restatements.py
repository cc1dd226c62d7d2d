#!/usr/bin/env python3
"""Writes the restatements (stack/toolsearch/restate.py) of the bench's query sets with a local
GGUF model, as the lane's agent asks for them at the start of a turn: the same messages,
temperature 0, at most RESTATE_MAX_TOKENS tokens, read by `parse_restatement`.

The file maps each query's text to its task lines; queries already in it are kept, so a new query
set costs only its own queries. retrieval.py and promotion.py read it with `--restatements`.

    .venv/bin/python scripts/bench/restatements.py [--model models/X.gguf] [--queries FILE]...
        [--out scripts/bench/data/restatements.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from stack.toolsearch.restate import RESTATE_MAX_TOKENS, parse_restatement, restate_messages  # noqa: E402

DATA = ROOT / "scripts" / "bench" / "data"
QUERY_SETS = ("queries.jsonl", "queries_heldout.jsonl", "queries_third.jsonl",
              "queries_fourth.jsonl", "queries_fifth.jsonl")
MODEL = ROOT / "models" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=MODEL)
    parser.add_argument("--queries", type=Path, action="append",
                        help="a query set (repeatable; default: the four sets in data/)")
    parser.add_argument("--out", type=Path, default=DATA / "restatements.json")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    from llama_cpp import Llama  # the llm extra; only this script needs it here

    written: dict[str, list[str]] = (json.loads(args.out.read_text(encoding="utf-8"))
                                     if args.out.exists() else {})
    paths = args.queries or [DATA / name for name in QUERY_SETS]
    queries = [json.loads(line)["query"] for path in paths
               for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    todo = [q for q in dict.fromkeys(queries) if q not in written]
    llm = Llama(model_path=str(args.model), n_ctx=2048, n_threads=args.threads, verbose=False)
    started = time.perf_counter()
    for count, query in enumerate(todo, 1):
        reply = llm.create_chat_completion(restate_messages(query), temperature=0,
                                           max_tokens=RESTATE_MAX_TOKENS)
        written[query] = list(parse_restatement(reply["choices"][0]["message"]["content"] or ""))
        if count % 20 == 0 or count == len(todo):
            args.out.write_text(json.dumps(written, indent=1, ensure_ascii=False) + "\n",
                                encoding="utf-8")
            print(f"{count}/{len(todo)} in {time.perf_counter() - started:.0f} s", flush=True)
    print(f"{len(todo)} restated ({len(written)} in {args.out}), "
          f"{(time.perf_counter() - started) / max(len(todo), 1):.2f} s a query")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
