"""The deferred built-in families: clock, calculator, Python runner, HTTP fetch (all offline)."""

from __future__ import annotations

import http.server
import json
import re
import socket
import threading
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import jsonschema
import pytest

from stack.config import DEFAULT_CORE_TOOLS
from stack.tools import calculator, clock, python_exec, web
from stack.tools.base import ToolContext
from stack.tools.execute import run_tool
from stack.tools.registry import build_registry
from tests.fakes.tool_context import tool_context

EXTRAS = {tool.name: tool for module in (clock, calculator, python_exec, web) for tool in module.TOOLS}


@pytest.fixture
def ctx(tmp_path: Path):
    with tool_context(tmp_path / "home", terminal_timeout_s=10.0) as context:
        yield context


def call(name: str, arguments: dict, ctx: ToolContext):
    return run_tool(EXTRAS[name], arguments, ctx)


def test_extras_are_registered_deferred_and_have_valid_schemas():
    names = {tool.name for tool in build_registry()}
    assert set(EXTRAS) <= names
    assert not set(EXTRAS) & set(DEFAULT_CORE_TOOLS)
    for tool in EXTRAS.values():
        jsonschema.Draft202012Validator.check_schema(tool.parameters)
        assert tool.parameters["additionalProperties"] is False


def test_current_time_in_a_zone_matches_the_clock(ctx):
    outcome = call("world_clock", {"timezone": "Asia/Tokyo"}, ctx)
    assert outcome.status == "ok"
    stamp = datetime.fromisoformat(outcome.output.split("ISO ")[1])
    assert stamp.utcoffset().total_seconds() == 9 * 3600
    assert abs((datetime.now(ZoneInfo("Asia/Tokyo")) - stamp).total_seconds()) < 5
    assert "Asia/Tokyo" in outcome.output and "UTC+09:00" in outcome.output
    # the wall time leads, on both clocks (given only ISO, the 1.5B model answered "1:23 PM" for 01:23)
    twelve = f"{stamp.hour % 12 or 12}:{stamp:%M} {'AM' if stamp.hour < 12 else 'PM'}"
    assert outcome.output.startswith(f"{stamp:%H:%M} ({twelve}), {stamp:%A} {stamp.day} {stamp:%B %Y}, in Asia/Tokyo")


def test_unknown_zone_is_an_error_with_suggestions(ctx):
    outcome = call("world_clock", {"timezone": "Asia/Tokio"}, ctx)
    assert outcome.status == "error" and "Asia/Tokyo" in outcome.output


def test_convert_time_across_dst_boundary(ctx):
    outcome = call("convert_timezone", {"time": "2025-07-01T12:00", "source_timezone": "Europe/Paris",
                                    "target_timezone": "America/New_York"}, ctx)
    assert outcome.status == "ok"
    assert "2025-07-01T06:00:00-04:00" in outcome.output and "difference: -6 h" in outcome.output
    hhmm = call("convert_timezone", {"time": "09:30", "source_timezone": "UTC", "target_timezone": "Asia/Kolkata"}, ctx)
    assert "T15:00:00+05:30" in hhmm.output and "target: 15:00 (3:00 PM)" in hhmm.output
    bad = call("convert_timezone", {"time": "noon", "source_timezone": "UTC", "target_timezone": "UTC"}, ctx)
    assert bad.status == "error" and "HH:MM" in bad.output


@pytest.mark.parametrize("expression, expected", [
    ("17 * 23", "391"), ("(2**10 - 1) / 3", "341"), ("2^8", "256"), ("7 // 2 + 7 % 2", "4"),
    ("sqrt(16) + abs(-2)", "6"), ("round(pi, 3)", "3.142"), ("factorial(20)", "2432902008176640000"),
    ("0.1 + 0.2", "0.30000000000000004 (≈ 0.3)"), ("sqrt(2)", "1.4142135623730951"),
    ("12.5% * 368", "46"), ("12.5% of 368", "46"),
    ("(50%) * 8", "4"), ("10 % 4", "2"), ("10%4", "2"), ("10 %(3)", "1"),
    # units and currency signs after or before the numbers, as people write them
    ("35% of 640 euros", "224"), ("$12 + €3", "15"), ("3 kg * 4", "12"), ("1e-3 * 1000", "1"),
])
def test_calculator_evaluates(ctx, expression, expected):
    outcome = call("calculate", {"expression": expression}, ctx)
    assert (outcome.status, outcome.output) == ("ok", expected)


@pytest.mark.parametrize("expression, reason", [
    ("__import__('os').system('id')", "unsupported"), ("(1).__class__", "unsupported"),
    ("1/0", "division by zero"), ("9**9**9", "too large"), ("(10**4000)**100", "digits"),
    ("factorial(100000)", "limited"), ("2 +", "not an arithmetic"), ("x + 1", "unsupported"),
    ("1" * 600, "longer than"), ("sqrt(-1)", "cannot evaluate"),
    ("10 mod 3", "not an arithmetic"),  # a word between numbers is no unit: never a wrong number
    ("640 - 35% of 640 * 9 December", "not an arithmetic"),  # a date is no quantity (seen: -2464)
])
def test_calculator_refuses_what_is_unsafe_or_wrong(ctx, expression, reason):
    outcome = call("calculate", {"expression": expression}, ctx)
    assert outcome.status == "error" and reason in outcome.output


def test_a_failed_expression_names_its_words_for_the_next_try(ctx):
    outcome = call("calculate", {"expression": "35% of 640 euros - 35% of 640 euros * 9 December"}, ctx)
    assert outcome.status == "error" and "'December' is a word, not a number" in outcome.output
    assert "word" not in call("calculate", {"expression": "2 +"}, ctx).output


def test_run_python_shows_the_number_a_rounded_float_stands_for(ctx):
    outcome = call("run_python", {"code": "print(38.4 / 6)\nprint(2 ** 0.5)"}, ctx)
    assert outcome.output.splitlines()[1:] == ["6.3999999999999995 (≈ 6.4)", "1.4142135623730951"]


def test_run_python_runs_in_the_workspace(ctx):
    code = "import os, sys\nprint(os.getcwd())\nprint(sum(range(10)))\nsys.exit(3)"
    outcome = call("run_python", {"code": code}, ctx)
    assert outcome.status == "ok"
    assert outcome.output.startswith("exit code: 3")
    assert str(ctx.workspace.resolve()) in outcome.output and "\n45" in outcome.output


def test_run_python_timeout_and_output_cap(tmp_path):
    with tool_context(tmp_path / "h", terminal_output_bytes=2000) as ctx:
        slow = call("run_python", {"code": "import time\nprint('started', flush=True)\n"
                                           "time.sleep(30)", "timeout": 1}, ctx)
        loud = call("run_python", {"code": "print('x' * 100000)"}, ctx)
    assert slow.status == "error" and "timed out after 1 s" in slow.output and "started" in slow.output
    assert loud.status == "ok" and "bytes of output cut" in loud.output and len(loud.output) < 2200


@pytest.mark.parametrize("code, printed", [
    ("sum(range(10))", "45"),  # seen on the 1.5B model as a whole snippet: it printed nothing
    ("words = 'slow trains'.split()\nlen(words)", "2"),
    ("x = 1; x + 1", "2"),
    ("print(7)", "7"),  # printed once, not twice
    ("[].append(1)", ""),  # None is not shown
    ("total = 3", ""),
])
def test_run_python_shows_the_value_of_a_last_expression_as_a_prompt_would(ctx, code, printed):
    outcome = call("run_python", {"code": code}, ctx)
    assert outcome.status == "ok"
    assert outcome.output.startswith("exit code: 0\n")
    assert outcome.output.removeprefix("exit code: 0\n").strip() == (printed or "(no output)")


def test_run_python_keeps_the_line_numbers_of_an_error(ctx):
    outcome = call("run_python", {"code": "import math\nmath.sqrt(-1)"}, ctx)
    assert outcome.output.startswith("exit code: 1\n") and "line 2" in outcome.output
    assert "ValueError: math domain error" in outcome.output


def test_run_python_reports_exceptions(ctx):
    outcome = call("run_python", {"code": "raise ValueError('boom')"}, ctx)
    assert outcome.output.startswith("exit code: 1") and "ValueError: boom" in outcome.output


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (the stdlib's name)
        if self.path == "/page":
            body = b"<html><head><script>var x=1;</script></head><body><h1>Hello</h1><p>lane</p></body></html>"
            kind = "text/html"
        elif self.path == "/api":
            body, kind = json.dumps({"answer": 42}).encode(), "application/json"
        elif self.path == "/big":
            body, kind = b"y" * (3 * 1024 * 1024), "text/plain"
        else:
            self.send_response(302)
            self.send_header("Location", "/api")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch):
    """A proxy in the environment would answer for unreachable hosts; these tests need none."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def site():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_http_fetch_html_json_redirect_and_cap(ctx, site):
    page = call("http_fetch", {"url": f"{site}/page"}, ctx)
    assert page.status == "ok" and page.output.startswith("HTTP 200")
    assert "Hello\nlane" in page.output and "var x" not in page.output
    api = call("http_fetch", {"url": f"{site}/elsewhere"}, ctx)
    assert '{"answer": 42}' in api.output and "final URL" in api.output
    big = call("http_fetch", {"url": f"{site}/big"}, ctx)
    assert big.status == "ok" and "[... cut" in big.output
    assert len(big.output) < ctx.settings.terminal_output_bytes + 200


def test_http_fetch_says_offline_and_refuses_other_schemes(ctx):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    offline = call("http_fetch", {"url": f"http://127.0.0.1:{port}/"}, ctx)
    assert offline.status == "error" and offline.output.startswith("offline or unreachable")
    unknown_host = call("http_fetch", {"url": "http://no-such-host.invalid/"}, ctx)
    assert unknown_host.status == "error" and "offline or unreachable" in unknown_host.output
    for url in ("file:///etc/passwd", "ftp://example.com/x", "http://"):
        refused = call("http_fetch", {"url": url}, ctx)
        assert refused.status == "error" and re.search("only http", refused.output)


@pytest.mark.parametrize("expression, request_, context, runs", [
    ("8", "how many legs does a spider have?", "", False),
    ("365 + 1", "how many days in a leap year?", "My birthday is on June 14th.", False),
    ("0.18 * 250", "what's 18% of 250?", "", True),
    ("12 * 7", "what is twelve times seven?", "", True),
    ("1250 + 3", "add 1,250 and 3", "", True),
    ("42 * 2", "and double that?", "The answer was 42.", True),
    ("6 * 2", "and that times 2", "", True),
    ("pi", "what is pi?", "", True),  # no number: nothing to hold
    ("12 * 7", "what is one dozen times seven?", "", True),
    ("5 * 3", "my notes?", "five apples, three pears", False),  # words count only in the request
    ("180 * 1.15", "and how much did he charge?", "he charged 180 euros", False),  # a rate nobody gave
    ("86.4 * 0.175", "17.5% tip on 86.40?", "", True),
    ("1234.56 / 7", "split 1234.56 between 7 people", "", True),
])
def test_a_computation_runs_only_on_numbers_the_conversation_gave(expression, request_, context, runs):
    reason = calculator.operands_given({"expression": expression}, request_, context)
    assert (reason is None) == runs
    if not runs:
        assert expression in reason and "answer from what you know" in reason
