"""The trace page's reading of a session: turns, model calls, tool runs, and tool-call text that did
not run, from rows written by the real Store; and its pages, escaped, from a bare app."""

import json
import sqlite3

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from stack.api.errors import install_handlers
from stack.api.ui import ui_router
from stack.api.ui_trace import ModelCall, session_trace
from stack.config import Settings
from stack.store import Store, now_iso

XSS = "<script>alert('x')</script>"


def _call(call_id: str, name: str) -> list[dict]:
    return [{"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}]


def _run(store, session, message_id, call_id, name, *, status="ok", origin="native",
         via_bridge=False, reported=True, result="done"):
    store.add_tool_result(session, message_id, result, tool_call_id=call_id, tool_name=name,
                          via_bridge=via_bridge, origin=origin, arguments=json.dumps({"q": XSS}),
                          status=status, result=result if status == "ok" else None,
                          error=None if status == "ok" else f"failed {XSS}",
                          started_at=now_iso(), duration_ms=12.5)
    if not reported:  # a store whose tool message went missing (the lane never writes one)
        with sqlite3.connect(store.path) as db:
            db.execute("DELETE FROM messages WHERE role = 'tool' AND tool_call_id = ?", (call_id,))


@pytest.fixture
def lane(tmp_path):
    """A session with one of each: native ok, recovered ok, bridged ok, refused salvage (its text
    did not run), ok but never reported, a prose call that never ran, a lane note, the lane's own
    model call (a decision), two turns."""
    settings = Settings(home=tmp_path)
    store = Store(settings.db_path)
    s = store.create_session("trace-unit", title=f"first {XSS}")
    store.add_message(s, "system", f"the client's own system prompt {XSS}")
    store.add_message(s, "system", "the lane's prompt", lane_prompt=True)
    store.add_message(s, "user", f"do things {XSS}")
    m1 = store.add_message(s, "assistant", "", tool_calls=_call("c1", "memory"),
                           prompt_tokens=100, cached_tokens=60, completion_tokens=5)
    _run(store, s, m1, "c1", "memory")
    m2 = store.add_message(s, "assistant", '<tool_call>{"name": "terminal", "arguments": {}}'
                           "</tool_call>", tool_calls=_call("c2", "terminal"),
                           prompt_tokens=110, completion_tokens=9)
    _run(store, s, m2, "c2", "terminal", origin="content")
    m3 = store.add_message(s, "assistant", "", tool_calls=_call("c3", "tool_call"),
                           prompt_tokens=120, completion_tokens=7)
    _run(store, s, m3, "c3", "currency_convert", via_bridge=True)
    m4 = store.add_message(s, "assistant", '{"name": "delete_all", "arguments": {}}',
                           tool_calls=_call("c4", "delete_all"), prompt_tokens=130,
                           completion_tokens=8)
    _run(store, s, m4, "c4", "delete_all", status="refused", origin="content")
    m5 = store.add_message(s, "assistant", "", tool_calls=_call("c5", "memory"),
                           prompt_tokens=140, completion_tokens=6)
    _run(store, s, m5, "c5", "memory", reported=False)
    store.add_message(s, "system", "Call it, do not describe it.", lane_note=True)
    store.add_message(s, "assistant", f"I ran save_note(text='{XSS}').", prompt_tokens=150,
                      completion_tokens=12)
    store.add_message(s, "user", "and now?")
    store.add_lane_call(s, "decide", "say what comes next", prompt_tokens=90, completion_tokens=4,
                        cached_tokens=0, path="tool")
    store.add_message(s, "assistant", "Nothing else.", prompt_tokens=160, completion_tokens=3)
    yield settings, store
    store.close()


def test_session_trace_sorts_every_row_into_its_turn(lane):
    _, store = lane
    opening, first, second = session_trace(store.messages("trace-unit"),
                                           store.executions("trace-unit"),
                                           store.lane_calls("trace-unit"))

    assert opening.user is None and opening.model_calls == []
    assert [m["content"] for m in opening.steps] == [f"the client's own system prompt {XSS}"]
    assert (first.number, second.number) == (1, 2)
    assert first.user["content"] == f"do things {XSS}"
    calls = first.model_calls
    assert [c.message["prompt_tokens"] for c in calls] == [100, 110, 120, 130, 140, 150]
    assert calls[0].message["cached_tokens"] == 60
    assert all(c.wall_s is not None and c.wall_s >= 0 for c in calls)
    runs = [(r.row["tool_name"], r.recovered, r.via_bridge, r.really_ran)
            for c in calls for r in c.runs]
    assert runs == [("memory", False, False, True), ("terminal", True, False, True),
                    ("currency_convert", False, True, True), ("delete_all", True, False, False),
                    ("memory", False, False, False)]
    # The refused salvage and the prose call did not run; the recovered call that ran is not
    # flagged, nor are calls without call-shaped text.
    assert [c.unexecuted for c in calls] == [[], [], [], ["delete_all"], [], ["save_note"]]
    notes = [s for s in first.steps if not isinstance(s, ModelCall)]
    assert [(n["role"], n["lane_note"]) for n in notes] == [("system", 1)]
    assert first.wall_s is not None and first.wall_s >= 0
    assert second.user["content"] == "and now?"
    assert [(c.message["content"], c.purpose, c.path) for c in second.model_calls] == [
        ("say what comes next", "decide", "tool"), ("Nothing else.", None, None)]


def test_session_page_shows_evidence_and_escapes_model_output(lane):
    settings, store = lane
    app = FastAPI()
    install_handlers(app)
    app.state.store = store
    app.include_router(ui_router(settings))
    with TestClient(app) as client:
        page = client.get("/ui/sessions/trace-unit")
        overview = client.get("/ui")
        missing = client.get("/ui/sessions/no-such-session")
        invalid = client.get("/ui/sessions/bad%20id")

    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "script-src" not in page.headers["content-security-policy"]
    assert page.headers["content-security-policy"].startswith("default-src 'none'")
    html = page.text
    assert "<script>" not in html and XSS not in html
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    assert "prompt 100 tok (cached 60) · completion 5 tok · wall ≈" in html
    assert "prompt 110 tok · completion 9 tok" in html
    assert html.count("class='tool ok'") == 4 and html.count("class='tool refused'") == 1
    # Each tag once in the legend, then once per run of its kind.
    assert html.count("recovered from text</span>") == 1 + 2
    assert html.count("via bridge</span>") == 1 + 1
    assert "the model never saw a result" in html
    assert html.count("<div class=notrun>") == 2
    assert "1 refused · 2 model calls with tool-call text that did not run" in html
    assert "the lane's prompt" not in html
    assert html.index("Before the first user message") < html.index("Turn 1") < html.index("Turn 2")
    assert "2 turns · 8 model calls" in html
    # the lane's own call, labelled with the form it took upstream (agent/constrained.py)
    assert html.count("model call for the lane: decide (as tool)") == 1

    assert overview.status_code == 200
    assert "<a href='/ui/sessions/trace-unit'>trace-unit</a>" in overview.text
    assert "first &lt;script&gt;" in overview.text and "No saved report" in overview.text
    assert missing.status_code == 404 and "No session no-such-session" in missing.text
    assert invalid.status_code == 400


def test_overview_shows_the_newest_check_reports_first(lane, tmp_path):
    settings, store = lane
    checks = settings.db_path.parent / "checks"
    checks.mkdir()
    steps = [{"step": n, "verdict": "pass" if n != 4 else "fail", "wall_s": 1.5,
              "prompt_tokens": 900, "cached_tokens": 700, "model_calls": 2,
              "executed": ["terminal"] if n == 4 else [], "unexecuted_tool_text": n == 4,
              "reason": f"reason {n} {XSS}"} for n in range(1, 7)]
    old = {"passed": 6, "total": 6, "arm": "b", "profile": "search", "session_id": "old-run",
           "steps": [dict(s, verdict="pass") for s in steps]}
    new = {"passed": 5, "total": 6, "arm": "b", "profile": "search", "session_id": "new-run",
           "steps": steps}
    (checks / "20261101_000000_000000.json").write_text(json.dumps(old))
    (checks / "20261102_000000_000000.json").write_text(json.dumps(new))
    (checks / "20261103_000000_000000.json").write_text("{not json")
    app = FastAPI()
    app.state.store = store
    app.include_router(ui_router(settings))
    with TestClient(app) as client:
        html = client.get("/ui").text

    assert "20261103_000000_000000.json: unreadable report" in html
    assert html.index("new-run") < html.index("old-run")
    assert "<span class=fail>5/6 passed</span>" in html and "<span class=pass>6/6 passed</span>" in html
    assert "<td class=fail>fail</td>" in html and "tool-call text not run" in html
    assert f"reason 4 {XSS}" not in html and "reason 4 &lt;script&gt;" in html


def test_a_reply_held_back_shows_where_it_was_made_with_why_and_its_unrun_call_text(tmp_path):
    """It is not a message (the store keeps it with the lane's own calls), so the page reads it
    from lane_calls: labelled as held back, with the reason, its call-shaped text marked NOT RUN."""
    settings = Settings(home=tmp_path)
    store = Store(settings.db_path)
    s = store.create_session("held-unit")
    store.add_message(s, "user", "save a note")
    store.add_lane_call(s, "decide", '{"next": "answer"}', prompt_tokens=80, completion_tokens=4, cached_tokens=0)
    store.add_lane_call(s, "held", f"save_note(text='{XSS}')", reason="a tool call written as text",
                        prompt_tokens=200, completion_tokens=9, cached_tokens=150)
    store.add_message(s, "assistant", "No tool ran for this request.", lane_note=True)
    [turn] = session_trace(store.messages(s), store.executions(s), store.lane_calls(s))
    decided, held = turn.model_calls
    assert (decided.held_back, held.held_back) == (False, True)
    assert held.message["reason"] == "a tool call written as text" and held.unexecuted == ["save_note"]
    assert [n["content"] for n in turn.steps if not isinstance(n, ModelCall)] == ["No tool ran for this request."]

    app = FastAPI()
    app.state.store = store
    app.include_router(ui_router(settings))
    with TestClient(app) as client:
        html = client.get(f"/ui/sessions/{s}").text
    store.close()
    assert html.count("model reply held back (not passed on)") == 1
    assert "<b>why:</b> a tool call written as text" in html
    assert "prompt 200 tok (cached 150) · completion 9 tok" in html
    assert html.count("<div class=notrun>") == 1 and XSS not in html
