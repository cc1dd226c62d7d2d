"""Several calls in one proxy reply, and the calls that must wait: what the first reply returns.

A request whose calls can all be made now ("the weather in Lisbon and in Porto") wants every one in
the first reply; a request whose later step needs an earlier call's result ("look up Marta's
address, then send her the agenda") wants only the calls that can be made before any result: a
later call in the first reply has guessed its value, and a client would act on the guess. Each
request goes through `lane up` in proxy mode with its own tools; the first reply is judged against
the data file's `first_reply` (every call, by name and the argument values the request fixes) and
`never_first` (tools whose call there is a guess). The data was written by a helper who had not
read the lane's code (`scripts/bench/data/several_calls_heldout.json`: never tuned on).

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python scripts/bench/several_calls.py [--data FILE] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lane_run import ROOT, add_lane_options, lane_settings, lane_up  # noqa: E402

DATA = ROOT / "scripts" / "bench" / "data" / "several_calls_heldout.json"


def matches(want: dict[str, Any], call: tuple[str, dict[str, Any]]) -> bool:
    """Whether a returned call is the wanted one: its name, and each value the request fixes (text
    compared without case and surrounding spaces, numbers as numbers)."""
    name, arguments = call
    if name != want["name"]:
        return False
    for key, value in (want.get("arguments") or {}).items():
        got = arguments.get(key)
        if isinstance(value, str) and isinstance(got, str):
            if value.strip().casefold() != got.strip().casefold():
                return False
        elif isinstance(value, (int, float)) and isinstance(got, (int, float)):
            if float(value) != float(got):
                return False
        elif value != got:
            return False
    return True


def judged(item: dict[str, Any], calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """Every wanted call present (each matched once), no call of a tool that must wait, and, for
    a dependent request, nothing beyond the wanted calls."""
    left = list(calls)
    missing = 0
    for want in item["first_reply"]:
        found = next((c for c in left if matches(want, c)), None)
        if found is None:
            missing += 1
        else:
            left.remove(found)
    guessed = [name for name, _ in calls if name in set(item.get("never_first") or ())]
    extra = len(left) if item["kind"] == "dependent" else 0
    return {"passed": not missing and not guessed and not extra, "missing": missing, "guessed": guessed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--json", type=Path, help="write the rows and totals here")
    add_lane_options(parser)
    args = parser.parse_args()
    from openai import OpenAI

    data = json.loads(args.data.read_text())
    rows = []
    with lane_up(model=args.model, ctx=args.ctx, threads=args.threads, env=lane_settings(parser, args)) as lane:
        client = OpenAI(base_url=lane.url + "/v1", api_key="bench", timeout=900)
        for item in data["requests"]:
            tools = [data["tools"][name] for name in item["tools"]]
            started = time.perf_counter()
            reply = client.chat.completions.create(
                model="fallback-lane", messages=[{"role": "user", "content": item["request"]}], tools=tools)
            message = reply.choices[0].message
            calls = [(c.function.name, json.loads(c.function.arguments or "{}")) for c in message.tool_calls or []]
            row = {"id": item["id"], "kind": item["kind"], "lang": item["lang"],
                   "seconds": round(time.perf_counter() - started, 1), "calls": calls,
                   "content": (message.content or "")[:200], **judged(item, calls)}
            rows.append(row)
            print(json.dumps(row, ensure_ascii=False), flush=True)
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for row in rows:
        for key in (row["kind"], f'{row["kind"]} {row["lang"]}'):
            totals[key][0] += row["passed"]
            totals[key][1] += 1
    print()
    for key in sorted(totals):
        print(f"{key:24} {totals[key][0]}/{totals[key][1]}")
    guessed = sum(bool(row["guessed"]) for row in rows if row["kind"] == "dependent")
    seconds = sorted(row["seconds"] for row in rows)
    print(f"dependent requests with a guessed call: {guessed}; median request {seconds[len(seconds) // 2]} s")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "totals": dict(totals)}, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
