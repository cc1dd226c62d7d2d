#!/usr/bin/env python3
"""The tools array a model sees on a turn that needs no tool: the core set plus the three bridges.

Prints the estimated tokens (characters of compact JSON / 4, the lane's estimate) of each offered
tool and the total, for the lane as configured (LANE_* / lane.yaml). Exit status 1 when the total
is over the budget (default 1,300 tokens), so CI can hold the line.

    .venv/bin/python scripts/bench/tool_surface.py [--budget 1300] [--profile search|full]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from stack.config import load_settings  # noqa: E402
from stack.token_estimate import estimate_tokens  # noqa: E402
from stack.tools.registry import build_registry  # noqa: E402
from stack.toolsearch.surface import assemble  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=1300)
    parser.add_argument("--profile", choices=("search", "full"), default="search")
    args = parser.parse_args()
    settings = load_settings()
    toolset = assemble(build_registry(), settings, profile=args.profile, query="")
    print(f"{'tool':<20} {'tokens':>6}  kind")
    bridges = 0
    for schema in toolset.offered:
        name = schema["function"]["name"]
        tokens = estimate_tokens(schema)
        kind = "bridge" if name in ("tool_search", "tool_describe", "tool_call") else "core"
        bridges += tokens if kind == "bridge" else 0
        print(f"{name:<20} {tokens:>6}  {kind}")
    total = estimate_tokens(toolset.offered)
    print(f"{'bridges':<20} {bridges:>6}")
    print(f"{'total':<20} {total:>6}  (budget {args.budget}; "
          f"{len(toolset.catalog)} deferred tools behind the bridges)")
    return 0 if total <= args.budget else 1


if __name__ == "__main__":
    sys.exit(main())
