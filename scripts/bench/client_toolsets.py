"""Proxy mode over an agent's own toolset of 35-47 real MCP tools, on requests nobody tuned on.

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python scripts/bench/client_toolsets.py [--limit N] [--json F]

Each request of the data file (default `data/client_toolsets_heldout.json`, written by a helper
who had not read the lane's code) goes to `POST /v1/chat/completions` of a lane started with
`lane up` on the default model, with its toolset's tools (whole servers of `data/catalog.json`)
under `tool_choice: auto`, one session each. Judged from the reply the client gets:

* `tool`: the first call is one of the expected tools and its arguments hold every property the
  tool's schema requires;
* `none`: no call;
* `followup` (the conversation ends with a tool's result): no call, and words;
* every reply: the lane's bridges (tool_search, tool_describe, tool_call) never named, no call
  written in the content.

Prints a row per request and the totals per kind, toolset and language, with the model calls
and wall time per request from the lane's store.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sqlite3
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lane_run import ROOT, add_lane_options, lane_settings, lane_up  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
BRIDGES = ("tool_search", "tool_describe", "tool_call")


def toolset_tools(catalog: list[dict[str, Any]], servers: list[str]) -> list[dict[str, Any]]:
    """A toolset's tools as a client sends them: OpenAI function tools, the catalog's `x-` fields
    left out."""
    return [{"type": "function", "function": entry["function"]} for entry in catalog
            if entry["function"]["name"].split("__", 1)[0] in servers]


def verdict(request: dict[str, Any], message: dict[str, Any], tools: list[dict[str, Any]]) -> tuple[bool, str]:
    """Whether the reply the client got passes the request's kind, and why not."""
    calls = message.get("tool_calls") or []
    content = message.get("content") or ""
    if any(bridge in content for bridge in BRIDGES):
        return False, "named a bridge"
    if request["kind"] != "tool":
        if calls:
            return False, f"called {calls[0]['function']['name']}"
        return (True, "") if content.strip() else (False, "no words")
    if not calls:
        return False, "no call"
    name = calls[0]["function"]["name"]
    if name not in request["expect"]["tools"]:
        return False, f"called {name}"
    schema = next(t["function"].get("parameters") or {} for t in tools if t["function"]["name"] == name)
    try:
        arguments = json.loads(calls[0]["function"].get("arguments") or "{}")
    except json.JSONDecodeError:
        return False, "arguments not JSON"
    missing = [key for key in schema.get("required") or [] if key not in arguments]
    return (False, f"missing {', '.join(missing)}") if missing else (True, "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA / "client_toolsets_heldout.json")
    parser.add_argument("--limit", type=int, default=0, help="only the first N requests")
    parser.add_argument("--ids", default="", help="only these request ids, comma-separated")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--json", type=Path, help="write the rows and totals here")
    add_lane_options(parser)
    args = parser.parse_args()
    data = json.loads(args.data.read_text())
    catalog = json.loads((DATA / "catalog.json").read_text())
    requests = data["requests"]
    if args.ids:
        requests = [r for r in requests if r["id"] in set(args.ids.split(","))]
    requests = requests[:args.limit] if args.limit else requests
    rows = []
    with lane_up(model=args.model, ctx=args.ctx, threads=args.threads, env=lane_settings(parser, args)) as lane:
        for request in requests:
            tools = toolset_tools(catalog, data["toolsets"][request["toolset"]])
            started = time.monotonic()
            response = httpx.post(f"{lane.url}/v1/chat/completions", timeout=args.timeout, json={
                "model": "fallback-lane", "messages": request["messages"], "tools": tools, "tool_choice": "auto"})
            wall = time.monotonic() - started
            if response.status_code != 200:
                passed, why, message = False, f"HTTP {response.status_code}", {}
            else:
                message = response.json()["choices"][0]["message"]
                passed, why = verdict(request, message, tools)
            calls = [c["function"]["name"] for c in message.get("tool_calls") or []]
            rows.append({"id": request["id"], "toolset": request["toolset"], "lang": request["lang"],
                         "kind": request["kind"], "passed": passed, "why": why, "wall_s": round(wall, 1),
                         "calls": calls, "answer": (message.get("content") or "")[:120]})
            print(json.dumps(rows[-1], ensure_ascii=False), flush=True)
        model_calls = _model_calls(lane.home / "state.db")
    totals = _totals(rows)
    for key, (passed, total) in totals.items():
        print(f"{key:<22} {passed}/{total}")
    print(f"model calls: {model_calls} for {len(rows)} requests; wall {sum(r['wall_s'] for r in rows):.0f} s")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "totals": totals, "model_calls": model_calls}, indent=1))
    return 0


def _totals(rows: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for row in rows:
        for key in ("all", f"kind {row['kind']}", f"toolset {row['toolset']}", f"lang {row['lang']}"):
            counts[key][0] += row["passed"]
            counts[key][1] += 1
    return {key: (passed, total) for key, (passed, total) in counts.items()}


def _model_calls(db: Path) -> int:
    """The model calls the lane made (its replies and its own questions), counted as
    agent_lane.session_record counts them."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        replies = conn.execute("SELECT count(*) FROM messages WHERE role='assistant' AND prompt_tokens IS NOT NULL")
        own = conn.execute("SELECT count(*) FROM lane_calls WHERE purpose != 'held'")
        return int(replies.fetchone()[0]) + int(own.fetchone()[0])


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
