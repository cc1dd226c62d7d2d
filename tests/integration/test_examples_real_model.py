"""`lane examples` against the real llm service (SmolLM2-135M): the plumbing, not the judgement.
Whatever the tiny model writes, each tool gets one entry a style under the served model's name,
with at most three parsed requests, and a second run asks nothing again."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest

from tests.integration.llm_server import ROOT, lane_llm

pytestmark = pytest.mark.real_model

TOOLS = [{"name": "calendar__list_events", "description": "List the events of a calendar.",
          "inputSchema": {"type": "object", "properties": {"day": {"type": "string"}}}},
         {"name": "mail__send_email", "description": "Send an email to a recipient.",
          "inputSchema": {"type": "object", "properties": {"to": {"type": "string"}}}}]


@pytest.fixture(scope="module")
def llm_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with lane_llm(tmp_path_factory.mktemp("llm")) as url:
        yield url + "/v1"


def lane_examples(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "stack.cli", "examples", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_lane_examples_fills_a_book_from_the_real_model(llm_url: str, tmp_path) -> None:
    catalog, book = tmp_path / "tools.json", tmp_path / "book.json"
    catalog.write_text(json.dumps({"tools": TOOLS}))
    first = lane_examples("--catalog", str(catalog), "--book", str(book), "--llm-url", llm_url)
    assert first.returncode == 0, first.stderr
    served = httpx.get(f"{llm_url}/models").json()["data"][0]["id"]
    entries = list(json.loads(book.read_text()).values())
    assert sorted((e["tool"], e["style"]) for e in entries) == [
        (t["name"], style) for t in TOOLS for style in ("direct", "situation")]
    for entry in entries:
        assert entry["model"] == served
        assert len(entry["requests"]) <= 3
        assert all(isinstance(r, str) and len(r.split()) >= 3 for r in entry["requests"])
    again = lane_examples("--catalog", str(catalog), "--book", str(book), "--llm-url", llm_url)
    assert again.returncode == 0 and "2 of 2 tools have all their examples; asking" in again.stderr
    assert "[1/" not in again.stdout
