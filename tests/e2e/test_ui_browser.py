"""The trace page in a real browser: headless Chromium opens /ui against a shim whose scripted
session has every kind of tool call (native, recovered from text, through the bridge, failed, and
tool-call text that never ran) beside the lane's own decisions and notes, logs in with `?key=`,
and the rendered DOM must show each of them, escape the model's markup, and show the `lane check`
report saved beside the store."""

import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from stack.tools.base import Tool, object_schema
from stack.tools.registry import Registry
from tests.fakes.scripted_model import call, text
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
               lambda arguments, ctx: f"{arguments['amount'] * 2:g} {arguments['to']}", "fx")
# The lane's decision follows this script (ScriptedModel's default): add first, then, the request
# holding a second task, currency_convert, hidden behind the bridge.
SCRIPT = [
    call("add", {"a": XSS}),                                                            # fails
    call("add", {"a": 2, "b": 3}),                                          # native: the retry
    text(json.dumps({"name": "tool_call", "arguments": {                    # bridge, as text
        "name": "currency_convert", "arguments": {"amount": 21, "to": "USD"}}})),
    text(f'Done. I also saved it with save_note(text="{XSS}").'),           # the answer: not run, held back
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
        reply = lane.chat(f"Add 2+3, then convert 21 EUR. {XSS}", session=SESSION,
                          headers={"Authorization": f"Bearer {KEY}"})
        assert reply.status_code == 200, reply.text
        # The composed answer writes a call as text and leaves out the results, so the lane holds
        # it back and answers with its own account of what ran.
        answer = reply.json()["choices"][0]["message"]["content"]
        assert answer.startswith("I could not write a reliable answer. What ran for this request:")
        assert "- add returned 5\n- currency_convert returned 42 USD" in answer
        # A real `lane check` against the same lane (the script is spent, so steps fail): it
        # saves its report in checks/ beside the store, where the overview page reads it.
        code, _, _ = run_check("--url", str(lane.client.base_url), "--db",
                               str(lane.settings.db_path), "--key", KEY, "--timeout", "20")
        assert code == 1
        [saved] = (lane.settings.db_path.parent / "checks").glob("*.json")
        report = json.loads(saved.read_text())
        lane_calls = lane.rows("SELECT purpose FROM lane_calls WHERE session_id = ? AND purpose != 'held'"
                               " ORDER BY id", SESSION)
        held = lane.rows("SELECT reason FROM lane_calls WHERE session_id = ? AND purpose = 'held' ORDER BY id",
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
    assert any("native" in t and "via bridge" not in t and "add" in t and '"a": 2' in t
               and "result: 5" in t for t in ok_runs), ok_runs
    assert any("recovered from text" in t and "via bridge" in t and "currency_convert" in t
               and "42 USD" in t for t in ok_runs), ok_runs
    [failed] = page.texts("div", "tool", "error")
    assert "native" in failed and "add" in failed and "'b' is a required property" in failed
    not_run = page.texts("div", "notrun")  # in the answer held back
    assert len(not_run) == 1 and all("NOT RUN" in t and "save_note" in t for t in not_run)
    # The model's four replies (the forced call, its retry after the error, the bridged call, the
    # composed answer, held back), and apart from them each call the lane made
    # for itself (the request in English: the markup's words are no English the index knows; a
    # decision before each of the two steps; both tasks done, none after), labelled with its purpose.
    shown_calls = page.texts("div", "call")
    own = [t for t in shown_calls if t.startswith("model call for the lane:")]
    assert len(shown_calls) - len(own) == 4
    held_shown = [t for t in shown_calls if t.startswith("model reply held back (not passed on)")]
    assert len(held_shown) == len(held) == 1 and held_shown[-1] == shown_calls[-1]
    assert "save_note(text=" in shown_calls[-1] and "why: a tool call written as text" in shown_calls[-1]
    assert lane_calls == [("english",), ("decide",), ("decide",)] and len(own) == len(lane_calls)
    assert all(t.startswith(f"model call for the lane: {purpose}")
               for t, (purpose,) in zip(own, lane_calls, strict=True))
    assert [t.split("}")[0].split("{")[-1] for t in own[1:]] == [
        '"next": "add"', '"next": "currency_convert"']
    notes = page.texts("div", "note")
    assert any(t.startswith("lane note") and "I could not write a reliable answer." in t for t in notes), notes
    # Model output is shown as text, never run or rendered as markup.
    assert page.tags("script") == 0 and page.tags("img") == 0
    assert page.texts("div", "user")[0].endswith(XSS)
    assert f'save_note(text="{XSS}")' in " ".join(page.texts("div", "call"))
    # The overview: the session listed, and the saved check as its six-step table.
    assert SESSION in overview.texts("td")
    verdicts = [t for t in overview.texts("td") if t in ("pass", "fail")]
    assert verdicts == [step["verdict"] for step in report["steps"]]
    assert f"{report['passed']}/6 passed" in overview.texts("span", "fail")
