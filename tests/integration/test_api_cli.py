"""`lane shim` as a real process and `lane sessions` reading a store the shim wrote (its API key
without LANE_API_KEY: tests/integration/test_api_key.py)."""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

from stack.api.commands import format_session, is_loopback, register
from stack.store import Store
from tests.fakes.scripted_model import ScriptedModel, call, text


def main(argv: list[str]) -> int:
    """`lane shim|sessions ...` in process, without stack.cli.main's logging set-up, which would
    leave a root handler on this test's captured stderr for every later test."""
    parser = argparse.ArgumentParser(prog="lane")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("host,loopback", [
    ("127.0.0.1", True), ("127.8.9.10", True), ("::1", True), ("[::1]", True),
    ("localhost", True), ("0.0.0.0", False), ("::", False), ("192.168.1.20", False),
    ("example.com", False),
])
def test_loopback_detection(host, loopback):
    assert is_loopback(host) is loopback


def test_shim_reports_a_bad_setting_or_store(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("LANE_HOME", str(tmp_path))
    assert main(["shim", "--port", "70000"]) == 2
    assert "port" in capsys.readouterr().err
    not_a_store = tmp_path / "notes.txt"
    not_a_store.write_text("just some text, not SQLite " * 100)
    assert main(["shim", "--db", str(not_a_store)]) == 2
    assert "cannot open session store" in capsys.readouterr().err


def test_lane_shim_serves_and_records_then_lane_sessions_shows_it(tmp_path, capsys):
    port = free_port()
    db = tmp_path / "lane.db"
    env = {**os.environ, "LANE_API_KEY": "k3y", "LANE_LLM_TIMEOUT": "10"}
    script = [call("todo", {"action": "set", "items": ["write the report"]}),
              text("Your list has one task.")]
    with ScriptedModel(script) as model:
        shim = subprocess.Popen(
            [sys.executable, "-m", "stack.cli", "shim", "--llm-url", model.url, "--port",
             str(port), "--db", str(db), "--home", str(tmp_path / "home"), "--host", "127.0.0.1"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 30
            while True:
                try:
                    if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert shim.poll() is None, shim.stderr.read()
                assert time.monotonic() < deadline, "lane shim did not become healthy"
                time.sleep(0.1)
            response = httpx.post(f"{url}/v1/chat/completions", timeout=20,
                                  headers={"Authorization": "Bearer k3y",
                                           "X-Session-Id": "cli-1"},
                                  json={"messages": [{"role": "user", "content": "plan my day"}]})
            assert response.status_code == 200, response.text
            assert httpx.get(f"{url}/v1/models").status_code == 401
        finally:
            shim.send_signal(signal.SIGINT)
            assert shim.wait(timeout=15) == 0

    assert main(["sessions", "--db", str(db)]) == 0
    listing = capsys.readouterr().out
    assert "cli-1" in listing and "plan my day" in listing

    assert main(["sessions", "cli-1", "--db", str(db)]) == 0
    shown = capsys.readouterr().out
    assert "-> todo(" in shown
    assert "todo" in shown and " ok " in shown and "direct" in shown and "native" in shown
    assert "Your list has one task." in shown

    assert main(["sessions", "cli-1", "--db", str(db), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [(e["tool_name"], e["status"]) for e in data["executions"]] == [("todo", "ok")]

    assert main(["sessions", "--db", str(db), "--json"]) == 0
    assert [s["id"] for s in json.loads(capsys.readouterr().out)] == ["cli-1"]


def test_sessions_errors(tmp_path, capsys):
    assert main(["sessions", "--db", str(tmp_path / "missing.db")]) == 1
    assert "no session store" in capsys.readouterr().err
    Store(tmp_path / "empty.db").close()
    assert main(["sessions", "--db", str(tmp_path / "empty.db")]) == 0
    assert "no sessions yet" in capsys.readouterr().out
    assert main(["sessions", "nope", "--db", str(tmp_path / "empty.db")]) == 1
    assert "no session 'nope'" in capsys.readouterr().err


def test_session_view_truncates_long_arguments_and_shows_errors(tmp_path):
    store = Store(tmp_path / "s.db")
    store.create_session("v1", title="long one")
    arguments = json.dumps({"content": "x" * 500})
    message = store.add_message("v1", "assistant", "", tool_calls=[
        {"id": "c1", "type": "function",
         "function": {"name": "write_file", "arguments": arguments}}])
    store.add_tool_result("v1", message, "outside the workspace", tool_call_id="c1",
                          tool_name="write_file", via_bridge=True, origin="content",
                          arguments=arguments, status="refused", result=None,
                          error="outside the workspace", started_at="2025-01-01T00:00:00",
                          duration_ms=1.5)
    store.add_lane_call("v1", "decide", "write a file", prompt_tokens=70, completion_tokens=3,
                        cached_tokens=0)
    text_out = format_session(store.session("v1"), store.messages("v1"), store.executions("v1"),
                              store.lane_calls("v1"))
    store.close()
    assert "refused" in text_out and "bridge" in text_out and "content" in text_out
    assert "error: outside the workspace" in text_out
    assert "the lane's own model calls (1)" in text_out and "decide" in text_out
    assert "x" * 200 not in text_out and "…" in text_out


def test_session_view_shows_replies_held_back_with_why(tmp_path):
    store = Store(tmp_path / "s.db")
    store.create_session("v2")
    asked = store.add_message("v2", "user", "what is 2 plus 3?")
    store.add_lane_call("v2", "held", "Done!", reason="it leaves out what the tools returned",
                        prompt_tokens=300, completion_tokens=3, cached_tokens=0)
    store.add_message("v2", "assistant", "I could not write a reliable answer.", lane_note=True)
    text_out = format_session(store.session("v2"), store.messages("v2"), store.executions("v2"),
                              store.lane_calls("v2"))
    store.close()
    held = text_out.split("replies held back, not passed on to the client (1)\n")[1].splitlines()
    assert held[0].split() == ["after", f"#{asked}", "300", "tok", "Done!"]
    assert held[1].split() == ["why:", "it", "leaves", "out", "what", "the", "tools", "returned"]
    assert "the lane's own model calls" not in text_out  # a held-back reply is not one of them
