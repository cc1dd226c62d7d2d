"""`lane up` for real: llm (SmolLM2-135M) and shim as child processes on free ports, one chat turn
through the shim into a temporary LANE_HOME, then a clean stop with no process left behind."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.llm_server import SMOLLM2, TEST_THREADS, free_port, start_lane, stop, wait_healthy

pytestmark = pytest.mark.real_model


class Lane:
    def __init__(self, tmp_path: Path) -> None:
        self.home = tmp_path / "home"
        self.log = tmp_path / "lane-up.log"
        self.llm_port, self.shim_port = free_port(), free_port()
        self.shim = f"http://127.0.0.1:{self.shim_port}"
        args = ["up", "--llm-port", str(self.llm_port), "--port", str(self.shim_port), "--home", str(self.home),
                "--threads", TEST_THREADS, "--model", SMOLLM2]
        self.proc = start_lane(args, self.log, env={"LANE_MAX_TOKENS": "48", "LANE_HOME": str(self.home)})
        wait_healthy(f"{self.shim}/health", self.proc, self.log, timeout_s=120)
        deadline = time.monotonic() + 10
        while "fallback-lane is up" not in self.log.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)

    def services_running(self) -> dict[int, str]:
        """pid -> subcommand of the processes serving this lane's ports (the llm and shim children)."""
        found = {}
        ports = {str(self.llm_port).encode(), str(self.shim_port).encode()}
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                args = cmdline.read_bytes().split(b"\0")
            except OSError:
                continue
            if b"stack.cli" in args and ports & set(args) and b"up" not in args:
                found[int(cmdline.parent.name)] = args[args.index(b"stack.cli") + 1].decode()
        return found


@pytest.fixture
def lane(tmp_path: Path) -> Iterator[Lane]:
    started = Lane(tmp_path)
    try:
        yield started
    finally:
        stop(started.proc)


def test_lane_up_serves_a_chat_turn_and_stops_cleanly_on_ctrl_c(lane: Lane) -> None:
    banner = lane.log.read_text()
    assert "fallback-lane is up" in banner
    assert f"OPENAI_BASE_URL={lane.shim}/v1" in banner
    assert httpx.get(f"http://127.0.0.1:{lane.llm_port}/health").json()["status"] == "ok"

    session = "lane-up-e2e"
    reply = httpx.post(
        f"{lane.shim}/v1/chat/completions",
        headers={"X-Session-Id": session},
        json={"model": "fallback-lane", "messages": [{"role": "user", "content": "Say hello in five words."}]},
        timeout=120,
    )
    assert reply.status_code == 200, reply.text
    assert reply.headers["X-Session-Id"] == session
    assert reply.json()["usage"]["prompt_tokens"] > 0
    stored = httpx.get(f"{lane.shim}/v1/sessions/{session}", timeout=10).json()
    roles = [m["role"] for m in stored["messages"]]
    assert "user" in roles and "assistant" in roles
    assert (lane.home / "state.db").is_file()

    assert sorted(lane.services_running().values()) == ["llm", "shim"]
    assert stop(lane.proc, signal.SIGINT, timeout_s=30) == 0
    assert lane.services_running() == {}
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{lane.shim}/health", timeout=2)


def test_lane_up_stops_the_shim_and_fails_when_the_llm_dies(lane: Lane) -> None:
    llm = [pid for pid, command in lane.services_running().items() if command == "llm"]
    assert len(llm) == 1
    os.kill(llm[0], signal.SIGKILL)
    assert lane.proc.wait(30) == 1
    assert lane.services_running() == {}
    assert "llm exited" in lane.log.read_text()
