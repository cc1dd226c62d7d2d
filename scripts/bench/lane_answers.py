"""The lane's own answers, taken from benchmark stores, as unlabelled items of the claims corpus.

    .venv/bin/python scripts/bench/lane_answers.py STORE.db [STORE.db ...] --out F.jsonl [--skip b1- b- h2- check-]

The claims corpus (data/claims_*.jsonl) was written by people; the reading (stack/agent/reading.py)
reads answers the lane's model writes, which are shorter and more formulaic ("The file has 4
lines.", "I can help you with that."). This takes each turn's answer as the model wrote it (the
lane's receipt cut off: it is the store's truth, not the model's words; the lane's own accounts,
`lane_note` rows, left out) and the replies the lane held back that are words, not calls, with the
user's message, the lane's tools and what ran in the turn, for people to label by the corpus's
rules (data/README.md). Sessions whose id holds one of `--skip` (held-out files) are never taken.
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import sys
from pathlib import Path
from typing import Any, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from stack.agent.answer_check import call_shaped  # noqa: E402
from stack.agent.reading import model_words  # noqa: E402
from stack.tools.base import RESERVED_NAMES  # noqa: E402
from stack.tools.registry import builtin_tools  # noqa: E402


def turns(db: Path, skip: list[str]) -> Iterator[dict[str, Any]]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    con.row_factory = sqlite3.Row
    tools = {tool.name for tool in builtin_tools()} - RESERVED_NAMES
    for (session,) in con.execute("SELECT DISTINCT session_id FROM messages ORDER BY session_id"):
        if any(part in session for part in skip):
            continue
        rows = con.execute("SELECT * FROM messages WHERE session_id = ? ORDER BY id", (session,)).fetchall()
        users = [i for i, r in enumerate(rows) if r["role"] == "user" and not r["lane_note"] and not r["lane_prompt"]]
        for n, start in enumerate(users):
            end = users[n + 1] if n + 1 < len(users) else len(rows)
            first, last = rows[start]["id"], rows[end]["id"] if end < len(rows) else 1 << 62
            ran = sorted({r["tool_name"] for r in con.execute(
                "SELECT tool_name FROM tool_executions WHERE session_id = ? AND status = 'ok' AND message_id > ? "
                "AND message_id < ?", (session, first, last))} & tools)
            answers = [model_words(r["content"]) for r in rows[start + 1:end]
                       if r["role"] == "assistant" and r["content"] and not r["tool_calls"] and not r["lane_note"]]
            held = [r["content"] for r in con.execute(
                "SELECT content FROM lane_calls WHERE session_id = ? AND purpose = 'held' AND after_message_id >= ? "
                "AND after_message_id < ?", (session, first, last))]
            for answer in [*answers, *held]:
                answer = model_words(answer or "")
                if answer and not call_shaped(answer, frozenset(tools)):
                    yield {"session": re.sub(r"^everyday-\d+-[0-9a-f]+-", "", session),
                           "request": rows[start]["content"], "answer": answer, "ran": ran}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stores", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--skip", nargs="*", default=["b1-", "b-", "h2-", "check-"])
    args = parser.parse_args()
    described = [{"name": tool.name, "description": tool.description} for tool in builtin_tools()
                 if tool.name not in RESERVED_NAMES]
    seen: set[tuple[str, str]] = set()
    items = []
    for db in args.stores:
        for item in turns(db, args.skip):
            if (item["request"], item["answer"]) not in seen:
                seen.add((item["request"], item["answer"]))
                items.append({"id": f"lane-{len(items) + 1:03d}", "tools": described, **item})
    args.out.write_text("".join(json.dumps(item, ensure_ascii=False) + "\n" for item in items), encoding="utf-8")
    print(f"{len(items)} answers from {len(args.stores)} stores -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
