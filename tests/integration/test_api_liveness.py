"""One large or hostile request never holds the shim: /health (and so every other session) keeps
answering while it is handled. Real HTTP both ways, the real tool registry with tool search on."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from stack.config import DEFAULT_CORE_TOOLS
from stack.tools.registry import build_registry
from tests.fakes.scripted_model import text
from tests.integration.test_api_chat import Lane, running_lane
from tests.integration.test_proxy import _many_tools

HEALTH_LIMIT_S = 2.0


def health_during(lane: Lane, request: Callable[[], httpx.Response]) -> tuple[httpx.Response, list[float]]:
    """The request's response, and how long each /health asked meanwhile took to answer."""
    answered: list[httpx.Response] = []
    thread = threading.Thread(target=lambda: answered.append(request()))
    thread.start()
    waits: list[float] = []
    with httpx.Client(base_url=str(lane.client.base_url), timeout=60) as probe:
        while thread.is_alive() or not waits:
            started = time.monotonic()
            assert probe.get("/health").status_code in (200, 503)
            waits.append(time.monotonic() - started)
            time.sleep(0.05)
    thread.join()
    return answered[0], waits


@pytest.fixture
def lane(tmp_path):
    with running_lane(tmp_path, lambda body: text("noted"), registry=build_registry(),
                      tool_search="on", core_tools=DEFAULT_CORE_TOOLS, tool_examples=False) as running:
        running.client.timeout = httpx.Timeout(120)
        yield running


@pytest.mark.parametrize("length", [40_000, 1 << 20])
def test_one_unbroken_word_is_read_in_linear_time(lane, length):
    """A 40,000-character word took the tool search's regexes seconds (the square of its length),
    on the event loop: /health stopped answering."""
    word = "a" * length
    response, waits = health_during(lane, lambda: lane.chat(f"please look up {word}"))
    assert response.status_code in (200, 400), response.text
    assert max(waits) < HEALTH_LIMIT_S, waits


def test_a_hundred_thousand_messages_do_not_hold_health(lane):
    """Each stored message was a commit on the event loop: 100,000 of them held /health."""
    messages: list[dict[str, Any]] = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"}
                                      for i in range(100_000)] + [{"role": "user", "content": "hi"}]
    response, waits = health_during(lane, lambda: lane.chat(messages=messages))
    assert response.status_code == 200, response.text
    assert lane.rows("SELECT count(*) FROM messages WHERE role IN ('user', 'assistant') AND lane_note = 0"
                     " AND lane_prompt = 0")[0][0] >= 100_001
    assert max(waits) < HEALTH_LIMIT_S, waits


def test_four_thousand_client_tools_do_not_hold_health(lane):
    tools = _many_tools(4096)
    response, waits = health_during(lane, lambda: lane.chat("what is the weather in Paris", tools=tools))
    assert response.status_code == 200, response.text
    assert max(waits) < HEALTH_LIMIT_S, waits
