"""How much of each prompt the model really reads: the six-step check through `lane up`, both arms,
per step prompt tokens, cached tokens, evaluated (= prompt - cached) tokens and wall time.

    .venv/bin/python scripts/bench/prompt_cache.py                       # SmolLM2 (the CI model)
    .venv/bin/python scripts/bench/prompt_cache.py --model models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
    .venv/bin/python scripts/bench/prompt_cache.py --cache-mb 0          # only the live prefix

The target (issue 10): in arm b on SmolLM2, evaluated tokens are at most 25 % of the prompt
tokens sent over the six default steps.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from lane_run import arms_of, run_check  # noqa: E402

from stack.llm.model import embedded_model_path  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="GGUF file (default: the embedded SmolLM2-135M)")
    parser.add_argument("--ctx", type=int, default=8192)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=256, help="LANE_MAX_TOKENS (default 256)")
    parser.add_argument("--iterations", type=int, default=3, help="LANE_MAX_ITERATIONS (default 3)")
    parser.add_argument("--cache-mb", type=int, help="LANE_LLM_CACHE_MB (default: the lane's)")
    parser.add_argument("--step-timeout", type=int, default=300)
    args = parser.parse_args()

    env = {"LANE_MAX_TOKENS": str(args.max_tokens), "LANE_MAX_ITERATIONS": str(args.iterations)}
    if args.cache_mb is not None:
        env["LANE_LLM_CACHE_MB"] = str(args.cache_mb)
    # SmolLM2 unless told otherwise: without --model the lane would serve its default model.
    report = run_check(model=args.model or str(embedded_model_path()), ctx=args.ctx, threads=args.threads, env=env,
                       check_args=["--arms", "ab"], step_timeout_s=args.step_timeout)
    print(f"model: {args.model or 'SmolLM2-135M (embedded)'} · ctx {args.ctx} · threads {args.threads}"
          f" · cache {args.cache_mb if args.cache_mb is not None else 'default'} MB · log {report['log']}")
    print(f"{'arm':>3} {'step':>4} {'prompt':>7} {'cached':>7} {'evaluated':>9} {'wall s':>7}  verdict")
    for arm, result in arms_of(report).items():
        for step in result["steps"]:
            print(f"{arm:>3} {step['step']:>4} {step['prompt_tokens']:>7} {step['cached_tokens']:>7}"
                  f" {step['evaluated_tokens']:>9} {step['wall_s']:>7.1f}  {step['verdict']}")
        totals = result["totals"]
        share = totals["evaluated_tokens"] / totals["prompt_tokens"] if totals["prompt_tokens"] else 0.0
        print(f"{arm:>3} {'all':>4} {totals['prompt_tokens']:>7} {totals['cached_tokens']:>7}"
              f" {totals['evaluated_tokens']:>9} {totals['wall_s']:>7.1f}  {result['passed']}/{result['total']}"
              f" passed · evaluated/prompt = {share:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
