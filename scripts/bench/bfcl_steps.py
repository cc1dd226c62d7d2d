"""Proxy mode on each step of BFCL multi-turn ground truth, one request a step: a cheaper, finer
signal than whole entries (bfcl.py), for the lane's choice of the next call.

For every turn of the chosen entries and every step of its ground truth, the client's conversation
holds the earlier turns and this turn's earlier calls, each with the result BFCL's own classes
return for it (bfcl_runner.py, in the bfcl venv); the lane (ProxyLane.run_turn, in this process,
a fresh store) then replies once. Scored per step: the ground truth's next tool returned, its
arguments equal to the ground truth's, or words after the turn's last call. A step is scored on
the ground truth's path, not on the lane's own earlier replies, so one miss does not sink the rest
of the turn as it does in BFCL's scoring. The entries are bfcl.py's seeded sample of the split:
tune on --split tuning only (even ids).

    flock /tmp/lane-model.lock .venv/bin/python scripts/bench/bfcl_steps.py --split tuning --n 6
    ... --split tuning --ids 12,14,18,24,38,82   (chosen entries: the numbers in docs/measurements.md)
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

import bfcl  # scripts/bench, this script's folder

sys.path.insert(0, str(bfcl.ROOT))

from stack.agent.llm_client import LlmClient  # noqa: E402
from stack.agent.proxy import ProxyLane  # noqa: E402
from stack.agent.proxy_request import ProxyRequest  # noqa: E402
from stack.config import load_settings  # noqa: E402
from stack.store import Store  # noqa: E402
from stack.tools.validation import without_defaults  # noqa: E402


def parsed(call: str) -> tuple[str, dict[str, Any]]:
    """A ground-truth call string, `cd(folder='docs')`, as (name, arguments)."""
    node = ast.parse(call, mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"not a call: {call}")
    return node.func.id, {keyword.arg: ast.literal_eval(keyword.value) for keyword in node.keywords
                          if keyword.arg is not None}


def conversation(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The client's messages before the step: each earlier turn as its request, its calls one
    assistant message each with the result, and a short answer; then this turn so far."""
    messages: list[dict[str, Any]] = []

    def calls(ran: list[list[str]]) -> None:
        for call, result in ran:
            name, arguments = parsed(call)
            call_id = f"call_{len(messages)}"
            messages.append({"role": "assistant", "content": "", "tool_calls": [{
                "id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]})
            messages.append({"role": "tool", "tool_call_id": call_id, "content": result})

    for turn in record["earlier"]:
        messages.append({"role": "user", "content": turn["request"]})
        calls(turn["ran"])
        messages.append({"role": "assistant", "content": "Done."})
    messages.append({"role": "user", "content": record["request"]})
    calls(record["ran"])
    return messages


def verdict(record: dict[str, Any], tool_calls: list[dict[str, Any]]) -> tuple[str, bool, bool]:
    """(the step's kind: first, next or answer; the right tool or words; and the exact call)."""
    kind = "answer" if record["call"] is None else "first" if record["step"] == 0 else "next"
    if record["call"] is None:
        return kind, not tool_calls, not tool_calls
    if not tool_calls:
        return kind, False, False
    name, arguments = parsed(record["call"])
    function = tool_calls[0]["function"]
    if function["name"] != name:
        return kind, False, False
    schema = next(t["function"]["parameters"] for t in record["tools"] if t["function"]["name"] == name)
    returned = json.loads(function["arguments"] or "{}")  # an argument at its declared default may be left out
    return kind, True, without_defaults(schema, returned) == without_defaults(schema, arguments)


def records_of(split: str, n: int, start: int, chosen: Sequence[int] = ()) -> list[dict[str, Any]]:
    """The steps of bfcl.py's seeded multi_turn_base sample, or of the `chosen` entry numbers."""
    python = bfcl.venv_python()
    ids = bfcl.select("multi_turn_base", split, n, bfcl.data_dir(python.parents[1]), start)
    if chosen:
        if any(number % 2 != (split == "test") for number in chosen):
            raise SystemExit(f"--ids: the {split} split holds only {'odd' if split == 'test' else 'even'} ids")
        ids = [f"multi_turn_base_{number}" for number in chosen]
    with tempfile.TemporaryDirectory(prefix="bfcl-steps-") as root:
        job = Path(root) / "job.json"
        job.write_text(json.dumps({"steps": "multi_turn_base", "ids": ids}))
        subprocess.run([str(python), str(bfcl.RUNNER), str(job)], cwd=root, check=True,
                       env={**bfcl.clean_env(), "BFCL_PROJECT_ROOT": root})
        records: list[dict[str, Any]] = json.loads(job.with_name("steps.json").read_text())
    return records


async def score(records: list[dict[str, Any]], llm_url: str, search: bool) -> Counter[tuple[str, str]]:
    home = Path(tempfile.mkdtemp(prefix="bfcl-steps-"))
    (home / "none.yaml").write_text("{}\n")
    settings = replace(load_settings({"LANE_HOME": str(home), "LANE_CONFIG": str(home / "none.yaml")}),
                       proxy_tool_search=search)
    store, llm = Store(home / "state.db"), LlmClient(llm_url, model=None, timeout_s=300)
    lane, tally = ProxyLane(settings, store, llm), Counter[tuple[str, str]]()
    for number, record in enumerate(records):
        session = store.create_session(f"step-{number}", source="bench")
        messages = conversation(record)
        result = await lane.run_turn(session, messages, ProxyRequest(messages, record["tools"]),
                                     "search" if search else "full")
        kind, right, exact = verdict(record, result.tool_calls)
        tally[kind, "steps"] += 1
        tally[kind, "right"] += right
        tally[kind, "exact"] += exact
        got = result.tool_calls[0]["function"]["name"] if result.tool_calls else "(words)"
        print(f"{record['id']} turn {record['turn']} step {record['step']}: want "
              f"{parsed(record['call'])[0] if record['call'] else '(words)'}, got {got}"
              f"{'' if right else '  MISS'}", flush=True)
    await llm.aclose()
    return tally


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", choices=("test", "tuning"), default="tuning")
    parser.add_argument("--n", type=int, default=6, help="entries of bfcl.py's multi_turn_base sample")
    parser.add_argument("--start", type=int, default=0, help="leave out the sample's first entries")
    parser.add_argument("--ids", type=lambda text: [int(n) for n in text.split(",")], default=[],
                        help="these entry numbers instead of the sample (comma-separated)")
    parser.add_argument("--search", type=int, choices=(0, 1), default=1, help="tool search (arm H) or not (D)")
    parser.add_argument("--model", default=str(bfcl.DEFAULT_MODEL))
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    records = records_of(args.split, args.n, args.start, args.ids)
    print(f"split {args.split}, {len({r['id'] for r in records})} entries, {len(records)} steps, "
          f"tool search {'on' if args.search else 'off'}")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bfcl-steps-llm-") as logs, \
            bfcl.lane_process("llm", ["llm", "--model", args.model, "--threads", str(args.threads)], {},
                              Path(logs) / "llm.log") as llm_url:
        tally = asyncio.run(score(records, llm_url, bool(args.search)))
    for kind in ("first", "next", "answer"):
        print(f"{kind}: right {tally[kind, 'right']}/{tally[kind, 'steps']}, exact call {tally[kind, 'exact']}")
    steps = sum(tally[kind, "steps"] for kind in ("first", "next", "answer"))
    print(f"all: right {sum(tally[k, 'right'] for k in ('first', 'next', 'answer'))}/{steps} "
          f"in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
