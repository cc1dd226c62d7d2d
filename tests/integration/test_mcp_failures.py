"""MCP servers that misbehave: each failure is a clear tool error, and the lane keeps working.

The scripted raw server (tests/fakes/mcp_servers/raw_server.py) crashes, hangs, freezes, sends
malformed results and changes its tool list on request; every call goes through the real tool
search bridge (`tool_call`), as a model's would.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from stack.config import Settings  # noqa: E402
from stack.mcp.config import parse_servers  # noqa: E402
from stack.mcp.manager import McpManager  # noqa: E402
from stack.store import Store  # noqa: E402
from stack.tools.base import ToolContext  # noqa: E402
from stack.tools.mcp_tools import mcp_provider  # noqa: E402
from stack.tools.registry import build_registry  # noqa: E402
from stack.toolsearch.surface import assemble  # noqa: E402
from tests.fakes.mcp_servers import RAW_SERVER, raw_server, wait_until  # noqa: E402


class Lane:
    """A registry over live MCP servers plus what a turn needs to dispatch through the bridge."""

    def __init__(self, home: Path, servers: dict, **manager_options):
        self.settings = Settings(home=home, mcp_servers=servers)
        options = {"health_interval_s": 0.5, "backoff_initial_s": 0.2, "backoff_max_s": 1.0, **manager_options}
        self.manager = McpManager(parse_servers(servers), log_dir=home / "logs", **options)
        self.store = Store(self.settings.db_path)
        self.store.create_session("s1")
        self.ctx = ToolContext(self.settings, self.store, "s1")

    def __enter__(self) -> "Lane":
        self.manager.start()
        self.registry = build_registry([mcp_provider(self.manager)])
        return self

    def __exit__(self, *exc_info) -> None:
        self.manager.stop()
        self.store.close()

    def names(self) -> set[str]:
        return set(self.registry.tools())

    def call(self, name: str, arguments: dict | None = None):
        toolset = assemble(self.registry, self.settings, profile="search")
        return toolset.dispatch("tool_call", {"name": name, "arguments": arguments or {}}, self.ctx)

    def direct(self, name: str, arguments: dict):
        return assemble(self.registry, self.settings).dispatch(name, arguments, self.ctx)


@pytest.fixture
def lane(tmp_path):
    with Lane(tmp_path / "home", {"fake": raw_server(call_timeout_s=1.5, startup_timeout_s=3)}) as running:
        yield running


def test_tools_are_prefixed_and_calls_go_through_the_bridge(lane):
    assert {"fake__echo", "fake__crash", "fake__hang", "fake__grow"} <= lane.names()
    assert lane.registry.tools()["fake__echo"].source == "fake"
    outcome = lane.call("fake__echo", {"text": "hello"})
    assert (outcome.status, outcome.tool_name, outcome.via_bridge) == ("ok", "fake__echo", True)
    assert outcome.output == "echo: hello"


def test_crash_mid_call_is_an_error_and_the_server_comes_back(lane):
    outcome = lane.call("fake__crash")
    assert (outcome.status, outcome.tool_name, outcome.via_bridge) == ("error", "fake__crash", True)
    assert "closed the connection" in outcome.output and "crashed" in outcome.output
    assert lane.direct("calculate", {"expression": "6 * 7"}).output == "42"  # the lane works meanwhile
    wait_until(lambda: "fake__echo" not in lane.names(), timeout=5)  # its tools left the catalog
    wait_until(lambda: "fake__echo" in lane.names(), timeout=10)  # and came back after reconnecting
    assert lane.call("fake__echo", {"text": "again"}).output == "echo: again"


def test_a_call_that_is_never_answered_times_out(lane):
    started = time.monotonic()
    outcome = lane.call("fake__hang")
    assert outcome.status == "error" and "did not answer within 1.5 s" in outcome.output
    assert 1.4 < time.monotonic() - started < 16  # measured median 1.5 s (three runs, two shared cores)
    # The server still answers everything else: same connection, no restart needed.
    assert lane.call("fake__echo", {"text": "still here"}).output == "echo: still here"
    assert [s.state for s in lane.manager.status()] == ["up"]


def test_a_hung_server_is_detected_and_restarted(lane):
    outcome = lane.call("fake__freeze")
    assert outcome.status == "error" and "did not answer" in outcome.output
    wait_until(lambda: lane.manager.status()[0].state != "up", timeout=8)
    assert "ping" in (lane.manager.status()[0].last_error or "")
    wait_until(lambda: lane.manager.status()[0].state == "up", timeout=10)
    assert lane.call("fake__echo", {"text": "restarted"}).status == "ok"


def test_a_long_call_is_not_mistaken_for_a_hang(tmp_path):
    """The fake reads nothing while it sleeps, so pings go unanswered; a call in flight is watched
    by its own timeout, not by the health check, so the server is not restarted under it."""
    servers = {"fake": raw_server(call_timeout_s=8, startup_timeout_s=1)}
    with Lane(tmp_path / "home", servers) as running:
        outcome = running.call("fake__slow", {"seconds": 2.5})
        assert (outcome.status, outcome.output) == ("ok", "slept 2.5 s")
        assert [s.state for s in running.manager.status()] == ["up"]


def test_malformed_and_error_results_are_clear_errors(lane):
    malformed = lane.call("fake__malformed")
    assert malformed.status == "error" and "malformed result" in malformed.output
    failed = lane.call("fake__fail")
    assert failed.status == "error" and failed.output == "the fake tool failed on purpose"
    unknown_args = lane.call("fake__echo", {"text": 5, "extra": True})
    assert unknown_args.status == "ok"  # the server's schema allows extra keys; 5 is coerced to "5"
    assert lane.call("fake__echo", {"text": "fine"}).output == "echo: fine"


def test_tool_list_changes_refresh_the_catalog(lane):
    assert "fake__extra_1" not in lane.names()
    grew = lane.call("fake__grow")
    assert grew.output == "added extra_1"
    wait_until(lambda: "fake__extra_1" in lane.names(), timeout=5)
    found = assemble(lane.registry, lane.settings).dispatch(
        "tool_search", {"query": "extra tool number 1"}, lane.ctx)
    assert "fake__extra_1" in found.output
    assert lane.call("fake__extra_1", {"text": "new"}).output == "extra_1: new"


def test_noise_on_stdout_does_not_break_the_connection(tmp_path):
    with Lane(tmp_path / "home", {"noisy": raw_server("--noisy")}) as running:
        assert running.call("noisy__echo", {"text": "a"}).output == "echo: a"
        assert running.call("noisy__echo", {"text": "b"}).output == "echo: b"


def test_allow_list_keeps_only_named_tools(tmp_path):
    with Lane(tmp_path / "home", {"fake": raw_server(tools=["echo", "fake__fail"])}) as running:
        assert {n for n in running.names() if n.startswith("fake__")} == {"fake__echo", "fake__fail"}
        refused = running.call("fake__crash")
        assert refused.status == "refused" and refused.tool_name == "tool_call"


def test_servers_that_do_not_start_leave_the_others_working(tmp_path):
    servers = {
        "silent": {"command": sys.executable, "args": ["-c", "import time; time.sleep(60)"],
                   "startup_timeout_s": 1},
        "missing": {"command": str(tmp_path / "no-such-server")},
        "fake": raw_server(),
    }
    # Measured medians (three runs, two shared cores, 2026-11-26): 3.1 s to start, 3.2 s to stop.
    # The bounds are 10x those; the backoff is longer still, so waiting it out would fail.
    started = time.monotonic()
    with Lane(tmp_path / "home", servers, backoff_initial_s=120) as running:
        assert time.monotonic() - started < 31  # bounded by the 1 s start-up timeouts, not the 60 s sleep
        status = {s.name: s for s in running.manager.status()}
        assert status["fake"].state == "up" and status["silent"].state == "down"
        assert "within 1 s" in status["silent"].last_error
        assert "No such file" in status["missing"].last_error
        assert running.call("fake__echo", {"text": "ok"}).status == "ok"
    assert time.monotonic() - started < 32  # and stopping does not wait out the backoff


@pytest.fixture
def http_server():
    process = subprocess.Popen(
        [sys.executable, str(RAW_SERVER), "--http", "0", "--require-header", "Authorization:Bearer s3cret"],
        stdout=subprocess.PIPE, text=True)
    port = int(process.stdout.readline().split()[-1])
    yield f"http://127.0.0.1:{port}/mcp"
    process.kill()
    process.wait()


def test_streamable_http_server_with_headers(tmp_path, http_server):
    servers = {"web": {"url": http_server, "headers": {"Authorization": "Bearer s3cret"}},
               "nokey": {"url": http_server, "startup_timeout_s": 3}}
    with Lane(tmp_path / "home", servers, backoff_initial_s=30) as running:
        status = {s.name: s for s in running.manager.status()}
        assert status["web"].state == "up" and status["nokey"].state == "down"
        assert "credentials" in status["nokey"].last_error
        assert running.call("web__echo", {"text": "over http"}).output == "echo: over http"
