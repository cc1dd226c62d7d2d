"""The trace page in a real browser: headless Chromium opens /ui against a shim whose scripted
session has every kind of tool call (native, recovered from text, through the bridge, failed, and
tool-call text that never ran), logs in with `?key=`, and the rendered DOM must show each of them,
escape the model's markup, and show the `lane check` report saved beside the store."""

import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from stack.tools.base import Tool, object_schema
from stack.tools.registry import Registry
from tests.fakes.scripted_model import Reply, call, text
from tests.integration.test_api_chat import TOOLS, running_lane
from tests.integration.test_check_six_steps import run_check

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed"
                                " (Debian package chromium; scripts/test.sh installs it as root)")

KEY = "browser-test-key"
SESSION = "trace-browser"
XSS = "<script>document.title='pwned'</script><img src=x onerror=alert(1)>"
CONVERT = Tool("currency_convert", "Convert an amount of money between currencies.",
               object_schema({"amount": {"type": "number"}, "to": {"type": "string"}},
                             ["amount", "to"]),
               lambda arguments, ctx: f"{arguments['amount'] * 2} {arguments['to']}", "fx")
SCRIPT = [
    call("add", {"a": 2, "b": 3}),                                                      # native
    Reply(content='<tool_call>{"name": "add", "arguments": {"a": 4, "b": 5}}</tool_call>'),  # text
    call("tool_call", {"name": "currency_convert",
                       "arguments": {"amount": 21, "to": "USD"}}),                      # bridge
    call("add", {"a": XSS}),                                                            # fails
    text(f'Done. I also saved it with save_note(text="{XSS}").'),                       # not run
    # That reply claims a call that never ran, so the lane holds it back and has the answer
    # written again from the turn's results: this is the rewrite.
    text("2+3 is 5, 4+5 is 9, and 21 EUR came to 42 USD."),
]
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--window-size=1280,1100"]


class Blocks(HTMLParser):
    """Every element of the DOM with its classes and its whole text, in document order."""
    VOID = {"meta", "br", "input", "img", "link", "hr"}

    def __init__(self, dom: str):
        super().__init__()
        self.open: list[tuple[str, set[str], list[str]]] = []
        self.elements: list[tuple[str, set[str], str]] = []
        self.feed(dom)

    def handle_starttag(self, tag, attrs):
        classes = set((dict(attrs).get("class") or "").split())
        if tag in self.VOID:
            self.elements.append((tag, classes, ""))
        else:
            self.open.append((tag, classes, []))

    def handle_endtag(self, tag):
        while self.open:
            name, classes, parts = self.open.pop()
            self.elements.append((name, classes, "".join(parts)))
            if name == tag:
                break

    def handle_data(self, data):
        for _, _, parts in self.open:
            parts.append(data)

    def texts(self, tag: str, *classes: str) -> list[str]:
        """The whitespace-folded text of every `tag` element having all `classes`."""
        return [" ".join(t.split()) for name, c, t in self.elements
                if name == tag and set(classes) <= c]

    def tags(self, name: str) -> int:
        return sum(1 for tag, _, _ in self.elements if tag == name)


def chromium(url: str, profile: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *extra, url],
                          capture_output=True, text=True, timeout=120)


def test_trace_page_shows_what_really_ran(tmp_path):
    registry = Registry([*TOOLS, CONVERT])
    with running_lane(tmp_path / "lane", SCRIPT, registry=registry, tool_search="on",
                      api_key=KEY) as lane:
        reply = lane.chat(f"Add 2+3 and 4+5, convert 21 EUR. {XSS}", session=SESSION,
                          headers={"Authorization": f"Bearer {KEY}"})
        assert reply.status_code == 200, reply.text
        assert reply.json()["choices"][0]["message"]["content"] == SCRIPT[-1].content
        # A real `lane check` against the same lane (the script is spent, so steps fail): it
        # saves its report in checks/ beside the store, where the overview page reads it.
        code, _, _ = run_check("--url", str(lane.client.base_url), "--db",
                               str(lane.settings.db_path), "--key", KEY, "--timeout", "20")
        assert code == 1
        [saved] = (lane.settings.db_path.parent / "checks").glob("*.json")
        report = json.loads(saved.read_text())
        lane_calls = lane.rows("SELECT purpose FROM lane_calls WHERE session_id = ? ORDER BY id",
                               SESSION)

        base = str(lane.client.base_url).rstrip("/")
        session_url = f"{base}/ui/sessions/{SESSION}?key={KEY}"
        shown = chromium(session_url, tmp_path / "profile-1", "--dump-dom")
        assert shown.returncode == 0, shown.stderr[-2000:]
        page = Blocks(shown.stdout)
        screenshot = tmp_path / "trace.png"
        taken = chromium(session_url, tmp_path / "profile-2", f"--screenshot={screenshot}")
        assert taken.returncode == 0 and screenshot.stat().st_size > 10_000, taken.stderr[-2000:]
        overview = Blocks(chromium(f"{base}/ui?key={KEY}", tmp_path / "profile-3",
                                   "--dump-dom").stdout)

    # One tool run per kind, each as the store recorded it.
    ok_runs = page.texts("div", "tool", "ok")
    assert any("native" in t and "add" in t and '"a": 2' in t and "result: 5" in t
               for t in ok_runs), ok_runs
    assert any("recovered from text" in t and '"a": 4' in t and "result: 9" in t
               for t in ok_runs), ok_runs
    assert any("via bridge" in t and "currency_convert" in t and "42 USD" in t
               for t in ok_runs), ok_runs
    [failed] = page.texts("div", "tool", "error")
    assert "add" in failed and "'b' is a required property" in failed
    [not_run] = page.texts("div", "notrun")
    assert "NOT RUN" in not_run and "save_note" in not_run
    # The model's five replies, and apart from them each call the lane made for itself (the
    # decision asked before a reply may end the turn), labelled with its purpose.
    shown_calls = page.texts("div", "call")
    own = [t for t in shown_calls if t.startswith("model call for the lane:")]
    assert len(shown_calls) - len(own) == 6
    assert shown_calls[-1].endswith("21 EUR came to 42 USD.")
    assert lane_calls and len(own) == len(lane_calls)
    assert all(t.startswith(f"model call for the lane: {purpose}")
               for t, (purpose,) in zip(own, lane_calls, strict=True))
    # Model output is shown as text, never run or rendered as markup.
    assert page.tags("script") == 0 and page.tags("img") == 0
    assert page.texts("div", "user")[0].endswith(XSS)
    assert f'save_note(text="{XSS}")' in " ".join(page.texts("div", "call"))
    # The overview: the session listed, and the saved check as its six-step table.
    assert SESSION in overview.texts("td")
    verdicts = [t for t in overview.texts("td") if t in ("pass", "fail")]
    assert verdicts == [step["verdict"] for step in report["steps"]]
    assert f"{report['passed']}/6 passed" in overview.texts("span", "fail")
