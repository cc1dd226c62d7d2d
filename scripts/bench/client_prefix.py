"""What an agent's first request costs after the lane restarts: its own system prompt and tools
are the same on every request, so the llm keeps their KV state on disk once it has seen them twice
(stack/llm/engine.py, `_hold_opening`) and a restart reads them back instead of evaluating them.

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python scripts/bench/client_prefix.py \\
        --model models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf --tools 12

An agent-shaped client (a long system prompt, real MCP tool schemas from
../shared/data/mcp_tools_from_repos.json) sends three requests of one growing conversation, twice:
to the raw `lane llm` (arm raw) and through the shim in proxy mode (arm lane). Requests 1 and 2 go
to a lane started on a fresh home; the lane is then stopped and started again on the same home, and
request 3 (the conversation plus one new message) is its first. Printed per request: wall time,
prompt tokens, cached tokens and evaluated tokens (prompt - cached; summed over the turn's model
calls in arm lane). The target (issue 55): request 3 evaluates no more than its new messages.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from lane_run import lane_up  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TOOLS_FILE = ROOT.parent / "shared" / "data" / "mcp_tools_from_repos.json"
SYSTEM = (
    "You are a careful engineering agent working in the user's repository. Prefer the tools over "
    "guessing; read before you write; keep answers short and say what you changed. "
    + " ".join(f"Guideline {i}: when a request touches area {i} of the project, check its issues "
               f"and pull requests first, and report the numbers you found." for i in range(24)))
ASKED = ["Which tools do you have for GitHub issues? One line.",
         "Thanks. Which one would list open pull requests?",
         "And which one reads a single file's contents?"]


def ask(url: str, key: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
        timeout: float) -> tuple[dict[str, Any], float, str]:
    started = time.monotonic()
    reply = httpx.post(f"{url}/chat/completions", timeout=timeout, headers={"Authorization": f"Bearer {key}"},
                       json={"model": "lane", "messages": messages, "tools": tools, "max_tokens": 48,
                             "temperature": 0})
    wall = time.monotonic() - started
    reply.raise_for_status()
    body = reply.json()
    return body.get("usage") or {}, wall, body["choices"][0]["message"].get("content") or ""


def run_arm(arm: str, args: argparse.Namespace, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    home: Path | None = None
    for start, asked in ((0, ASKED[:2]), (1, ASKED[2:])):
        with lane_up(model=args.model, ctx=args.ctx, threads=args.threads, env={}, home=home) as lane:
            home = lane.home
            url = lane.llm_url if arm == "raw" else f"{lane.url}/v1"
            for question in asked:
                messages.append({"role": "user", "content": question})
                usage, wall, content = ask(url, "bench", messages, tools, args.timeout)
                messages.append({"role": "assistant", "content": content or "(no text)"})
                prompt = int(usage.get("prompt_tokens") or 0)
                cached = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
                first_after_restart = bool(start) and question == asked[0]
                rows.append({"arm": arm, "request": len(rows) + 1, "after_restart": first_after_restart,
                             "wall_s": round(wall, 1), "prompt": prompt, "cached": cached,
                             "evaluated": prompt - cached})
                print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="GGUF file (default: the lane's default model)")
    parser.add_argument("--ctx", type=int, default=16384)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tools", type=int, default=12, help="how many real MCP tool schemas the client sends")
    parser.add_argument("--arms", default="raw,lane")
    parser.add_argument("--timeout", type=float, default=900)
    args = parser.parse_args()
    tools = json.loads(TOOLS_FILE.read_text())[:args.tools]
    rows = [row for arm in args.arms.split(",") for row in run_arm(arm, args, tools)]
    print(f"\n{'arm':5} {'req':>3} {'restart':>7} {'wall s':>7} {'prompt':>7} {'cached':>7} {'evaluated':>9}")
    for row in rows:
        print(f"{row['arm']:5} {row['request']:>3} {'yes' if row['after_restart'] else '':>7} {row['wall_s']:>7} "
              f"{row['prompt']:>7} {row['cached']:>7} {row['evaluated']:>9}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
