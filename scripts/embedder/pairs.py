"""Request/tool pairs for fine-tuning the tool-search embedder, from public datasets whose tools
are not in the lane's benchmark catalog (so the retrieval benchmark stays held out).

* MetaTool (github.com/HowieHwong/MetaTool, MIT): 20,615 user requests for 199 ChatGPT plugins
  (`dataset/data/all_clean_data.csv`; descriptions in `dataset/plugin_des.json`, and for the 47
  tools MetaTool merged from several plugins in `dataset/big_tool_des.json`);
* BFCL (github.com/ShishirPatil/gorilla, berkeley-function-call-leaderboard, Apache-2.0): user
  questions with the function definitions offered and the one expected (`simple_*`, `multiple`,
  `live_simple`, `live_multiple`).

A tool is written as the lane's embedder sees it (`ToolDoc.embedding_text`), so the model learns
the texts it will be asked to rank. Output: JSON lines `{"query", "tool", "others", "source"}`,
`others` being the functions BFCL offered beside the expected one (hard negatives: neighbours
from the same API, the mistake tool search makes most).

    python scripts/embedder/pairs.py --metatool DIR --bfcl DIR > pairs.jsonl
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import sys
from pathlib import Path
from typing import Iterator

from stack.toolsearch.retrieval import ToolDoc

SEED = 7
# MetaTool has about a hundred requests per plugin: a few dozen teach the paraphrases without
# letting 199 plugins outweigh the thousand BFCL functions.
PER_METATOOL_TOOL = 30
BFCL_SETS = ("simple_python", "simple_java", "simple_javascript", "multiple", "live_simple",
             "live_multiple")


def metatool_pairs(folder: Path) -> Iterator[dict]:
    descriptions = {**json.loads((folder / "plugin_des.json").read_text(encoding="utf-8")),
                    **json.loads((folder / "big_tool_des.json").read_text(encoding="utf-8"))}
    by_tool: dict[str, list[str]] = {}
    with (folder / "all_clean_data.csv").open(encoding="utf-8", newline="") as rows:
        for row in csv.DictReader(rows):
            by_tool.setdefault(row["Tool"], []).append(row["Query"])
    rng = random.Random(SEED)
    for tool, queries in sorted(by_tool.items()):
        if tool not in descriptions:
            continue
        text = ToolDoc(tool, descriptions[tool]).embedding_text()
        for query in rng.sample(queries, min(PER_METATOOL_TOOL, len(queries))):
            yield {"query": query, "tool": text, "others": [], "source": "metatool"}


def bfcl_pairs(folder: Path) -> Iterator[dict]:
    for name in BFCL_SETS:
        questions = _json_lines(folder / f"BFCL_v4_{name}.json")
        answers = {a["id"]: a for a in _json_lines(folder / f"answer_BFCL_v4_{name}.json")}
        for item in questions:
            answer = answers.get(item["id"])
            turn = item["question"][0]
            query = next((m["content"] for m in turn if m.get("role") == "user"), "")
            if answer is None or not query:
                continue
            expected = set().union(*(call.keys() for call in answer["ground_truth"]))
            texts = {f["name"]: ToolDoc(f["name"], f.get("description", ""),
                                        f.get("parameters") or {}).embedding_text()
                     for f in item["function"]}
            others = [text for function, text in texts.items() if function not in expected]
            for function in expected & texts.keys():
                yield {"query": query, "tool": texts[function], "others": others,
                       "source": f"bfcl_{name}"}


def _json_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--metatool", type=Path, required=True, help="MetaTool's dataset files")
    parser.add_argument("--bfcl", type=Path, required=True, help="BFCL's data files")
    args = parser.parse_args(argv)
    seen: set[tuple[str, str]] = set()
    for pair in [*metatool_pairs(args.metatool), *bfcl_pairs(args.bfcl)]:
        key = (pair["query"], pair["tool"])
        if key not in seen:
            seen.add(key)
            sys.stdout.write(json.dumps(pair, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
