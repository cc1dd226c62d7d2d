#!/usr/bin/env python3
"""Tool counts and tool tokens of the two A/B arms, MCP servers included.

Arm A (`X-Lane-Tools: full`, tool search off): every granted tool offered directly. Arm B (the
configured lane, profile `search`): the core set plus the bridges. Tokens are the lane's estimate:
characters of the compact JSON `tools` array divided by four. The lane is the configured one
(lane.yaml / LANE_*), its MCP servers started for the measurement.

    LANE_CONFIG=lane.yaml .venv/bin/python scripts/bench/ab_toolsets.py [--json]
    .venv/bin/python scripts/bench/ab_toolsets.py --tool-pack 16   # + 16 real MCP schemas
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from stack.config import load_settings  # noqa: E402
from stack.token_estimate import estimate_tokens  # noqa: E402
from stack.tools.mcp_tools import open_lane_registry  # noqa: E402
from stack.toolsearch.surface import assemble  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lane_run import tool_pack_config  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    parser.add_argument("--tool-pack", type=int, default=0, metavar="N",
                        help="configure the lane with N real MCP tool schemas instead (tool_pack_server.py)")
    args = parser.parse_args()
    if args.tool_pack:
        with tempfile.TemporaryDirectory(prefix="lane-pack-") as home:
            settings = load_settings(config_path=tool_pack_config(Path(home), args.tool_pack))
    else:
        settings = load_settings()
    with open_lane_registry(settings) as registry:
        arms = {"A (full)": assemble(registry, settings, profile="full"),
                "B (core + bridges)": assemble(registry, settings, profile="search")}
        sources = sorted({tool.source for tool in registry})
        report = {label: {"tools": len(toolset.offered), "tool_tokens": estimate_tokens(toolset.offered),
                          "names": [t["function"]["name"] for t in toolset.offered]}
                  for label, toolset in arms.items()}
    if args.json:
        print(json.dumps({"sources": sources, **report}))
        return 0
    print(f"tool sources: {', '.join(sources)}")
    for label, arm in report.items():
        print(f"arm {label:<20} {arm['tools']:>3} tools  {arm['tool_tokens']:>6} tool tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main())
