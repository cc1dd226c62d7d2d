"""`lane search` without --catalog searches the configured lane, MCP servers included: with the
time server in lane.yaml, "current time in Tokyo" ranks its tool first (the real CLI, the real
servers)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

pytest.importorskip("mcp")

from tests.fakes.mcp_servers import real_server_command  # noqa: E402

TIME, GIT = real_server_command("mcp-server-time"), real_server_command("mcp-server-git")


@pytest.mark.skipif(not (TIME and GIT), reason="install tests/requirements.txt")
@pytest.mark.parametrize("method", ["bm25", None])
def test_lane_search_ranks_the_time_server_first(tmp_path, method):
    config = tmp_path / "lane.yaml"
    config.write_text(yaml.safe_dump({"mcp_servers": {
        "time": {"command": TIME, "args": ["--local-timezone", "UTC"]},
        "git": {"command": GIT},
    }}))
    queries = tmp_path / "queries.jsonl"
    queries.write_text(json.dumps({"id": "tokyo", "query": "current time in Tokyo"}) + "\n"
                       + json.dumps({"id": "stage", "query": "stage files for a git commit"}) + "\n")
    env = {**os.environ, "LANE_CONFIG": str(config), "LANE_HOME": str(tmp_path / "home")}
    command = [sys.executable, "-m", "stack.cli", "search", "--queries", str(queries), "--json"]
    done = subprocess.run(command + (["--method", method] if method else []), env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    ranked = {line["id"]: line["ranked"] for line in map(json.loads, done.stdout.splitlines())}
    assert ranked["tokyo"][0] == "time__get_current_time"
    assert "git__git_add" in ranked["stage"][:3]
    if method is not None:
        return
    single = subprocess.run([sys.executable, "-m", "stack.cli", "search", "--limit", "1",
                             "current time in Tokyo"], env=env, capture_output=True, text=True, timeout=120)
    assert single.returncode == 0 and single.stdout.split()[-1] == "time__get_current_time"
