"""The shim's API key when none is configured: off loopback the shim creates one in $LANE_HOME
(mode 0600) and `lane key` prints it; a configured LANE_API_KEY wins; on loopback without any key
the shim stays open. This is what lets `docker compose up` start with no environment."""

from __future__ import annotations

import signal
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from stack.api.commands import shim_key
from stack.config import Settings, load_settings
from tests.fakes.scripted_model import ScriptedModel, text
from tests.integration.llm_server import ROOT, free_port, start_lane, stop, wait_healthy

HELLO = {"messages": [{"role": "user", "content": "hi"}]}


def lane_key(home: Path, env_key: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "LANE_HOME": str(home)}
    if env_key is not None:
        env["LANE_API_KEY"] = env_key
    return subprocess.run([sys.executable, "-m", "stack.cli", "key"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


def test_off_loopback_a_key_is_created_once_and_kept_private(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home", host="0.0.0.0")
    key = shim_key(settings)
    assert key and len(key) >= 32
    assert settings.api_key_path.read_text().strip() == key
    assert stat.S_IMODE(settings.api_key_path.stat().st_mode) == 0o600
    assert shim_key(settings) == key  # a restart keeps it
    assert shim_key(Settings(home=tmp_path / "home")) == key  # once stored, loopback uses it too


def test_an_emptied_key_file_stops_the_shim_instead_of_opening_it(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, host="0.0.0.0")
    settings.api_key_path.write_text("\n")
    with pytest.raises(OSError, match="holds no key"):
        shim_key(settings)


def test_configured_key_wins_and_loopback_without_one_stays_open(tmp_path: Path) -> None:
    assert shim_key(Settings(home=tmp_path, host="0.0.0.0", api_key="configured")) == "configured"
    assert shim_key(Settings(home=tmp_path, host="127.0.0.1")) is None
    assert not (tmp_path / "api_key").exists()


def test_lane_key_prints_the_key_in_use(tmp_path: Path) -> None:
    missing = lane_key(tmp_path)
    assert missing.returncode == 1 and "no key" in missing.stderr
    stored = shim_key(load_settings({"LANE_HOME": str(tmp_path), "LANE_HOST": "0.0.0.0"}))
    assert lane_key(tmp_path).stdout == f"{stored}\n"
    assert lane_key(tmp_path, env_key="from-env").stdout == "from-env\n"


def test_shim_off_loopback_without_a_key_serves_only_the_key_it_created(tmp_path: Path) -> None:
    home, log, port = tmp_path / "home", tmp_path / "shim.log", free_port()
    with ScriptedModel([text("hello")]) as model:
        shim = start_lane(["shim", "--host", "0.0.0.0", "--port", str(port), "--home", str(home),
                           "--llm-url", model.url], log, env={"LANE_API_KEY": ""})
        try:
            url = f"http://127.0.0.1:{port}"
            wait_healthy(f"{url}/health", shim, log)
            assert "lane key" in log.read_text()
            printed = lane_key(home)
            assert printed.returncode == 0, printed.stderr
            key = printed.stdout.strip()
            assert httpx.post(f"{url}/v1/chat/completions", json=HELLO).status_code == 401
            reply = httpx.post(f"{url}/v1/chat/completions", json=HELLO, timeout=20,
                               headers={"Authorization": f"Bearer {key}"})
            assert reply.status_code == 200, reply.text
            assert reply.json()["choices"][0]["message"]["content"] == "hello"
        finally:
            assert stop(shim, signal.SIGINT) == 0
