"""The trace page: what really ran, read from the session store, in a browser.

`GET /ui` lists recent sessions and the newest `lane check` reports (the JSON files `lane check`
saves in `checks/` beside the store); `GET /ui/sessions/{id}` shows one session as a timeline of
turns: the user's message, each model call with its tokens, each tool execution with its origin,
status, duration, arguments and result, and, marked apart, tool-call-shaped text that did not run.
Server-rendered HTML from the store's rows, no JavaScript; the same key as the API (ui_auth.py
explains how a browser presents it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from ..config import Settings
from ..store import Store
from .chat_request import check_session_id
from .ui_html import clip, esc, page
from .ui_trace import ModelCall, ToolRun, Turn, session_trace

RECENT_SESSIONS = 50
RECENT_CHECKS = 3
CHECKS_FOLDER = "checks"  # beside the store; `lane check` writes it (stack/check/commands.py)
SHOWN_CHARS = 1500


def ui_router(settings: Settings) -> APIRouter:
    router = APIRouter(prefix="/ui")
    checks_dir = settings.db_path.parent / CHECKS_FOLDER

    @router.get("", response_class=HTMLResponse)
    async def overview(request: Request) -> HTMLResponse:
        store: Store = request.app.state.store
        body = ("<h1>fallback-lane trace</h1>"
                + _checks_section(checks_dir)
                + _sessions_table(store.list_sessions(RECENT_SESSIONS)))
        return page("fallback-lane trace", body)

    @router.get("/sessions/{session_id}", response_class=HTMLResponse)
    async def session(session_id: str, request: Request) -> HTMLResponse:
        store: Store = request.app.state.store
        found = store.session(check_session_id(session_id))
        if found is None:
            return page("no such session", f"<p><a href='/ui'>← sessions</a></p>"
                        f"<h1>No session {esc(session_id)}</h1>", status=404)
        turns = session_trace(store.messages(session_id), store.executions(session_id),
                              store.lane_calls(session_id), store.returned_calls(session_id))
        return page(f"session {session_id}", _session_page(found, turns))

    return router


# the overview

def _sessions_table(sessions: list[dict[str, Any]]) -> str:
    rows = "".join(
        f"<tr><td><a href='/ui/sessions/{esc(s['id'])}'>{esc(s['id'])}</a></td>"
        f"<td class=nowrap>{esc(_when(s['created_at']))}</td><td>{esc(s['title'])}</td>"
        f"<td class=num>{esc(s['messages'])}</td><td class=num>{esc(s['ok_executions'])}</td>"
        f"<td class=num>{esc(s['returned_calls'])}</td></tr>"
        for s in sessions)
    if not rows:
        return "<h2>Recent sessions</h2><p class=muted>No sessions yet.</p>"
    return ("<h2>Recent sessions</h2><table><tr><th>session</th><th>created (UTC)</th>"
            "<th>title</th><th>messages</th><th>tools ran ok</th><th>calls returned to the client</th>"
            "</tr>" + rows + "</table>")


def _checks_section(folder: Path) -> str:
    reports = sorted(folder.glob("*.json"), reverse=True)[:RECENT_CHECKS] if folder.is_dir() else []
    if not reports:
        return ("<h2>Six-step checks</h2><p class=muted>No saved report: run "
                "<code>lane check</code> against this lane.</p>")
    return "<h2>Six-step checks (newest first)</h2>" + "".join(map(_check_report, reports))


def _check_report(path: Path) -> str:
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
        arms = report["arms"] if "arms" in report else {report.get("arm", ""): report}
        return "".join(_check_arm(path.stem, arm) for arm in arms.values())
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return f"<p class=fail>{esc(path.name)}: unreadable report ({esc(exc)})</p>"


def _check_arm(stamp: str, arm: dict[str, Any]) -> str:
    passed, total = arm["passed"], arm["total"]
    verdict = "pass" if passed == total else "fail"
    session = arm.get("session_id")
    link = f" · <a href='/ui/sessions/{esc(session)}'>{esc(session)}</a>" if session else ""
    rows = "".join(map(_check_step, arm["steps"]))
    return (f"<p><b>{esc(stamp)}</b> · arm {esc(arm.get('arm'))} ({esc(arm.get('profile'))}) · "
            f"<span class={verdict}>{esc(passed)}/{esc(total)} passed</span>{link}</p>"
            "<table><tr><th>step</th><th>verdict</th><th>wall s</th><th>prompt tok</th>"
            "<th>cached</th><th>model calls</th><th>executed</th><th>reason</th></tr>"
            + rows + "</table>")


def _check_step(step: dict[str, Any]) -> str:
    verdict = "pass" if step["verdict"] == "pass" else "fail"
    executed = esc(", ".join(step.get("executed") or []) or "none")
    if step.get("unexecuted_tool_text"):
        executed += " <span class='tag notrun'>tool-call text not run</span>"
    wall = step.get("wall_s")
    numbers = f"<td class=num>{esc(f'{wall:.1f}' if isinstance(wall, (int, float)) else wall)}</td>"
    numbers += "".join(f"<td class=num>{esc(step.get(key))}</td>"
                       for key in ("prompt_tokens", "cached_tokens", "model_calls"))
    return (f"<tr><td class=num>{esc(step['step'])}</td><td class={verdict}>{esc(step['verdict'])}"
            f"</td>{numbers}<td>{executed}</td><td>{esc(step.get('reason'))}</td></tr>")


def _when(iso: str | None) -> str:
    """A stored UTC timestamp to the second, the way people read it."""
    return (iso or "")[:19].replace("T", " ")


# one session

_LEGEND = ("<p class=muted>Tool runs: <span class='tag ok'>ok</span><span class='tag error'>error"
           "</span><span class='tag refused'>refused</span> · origin <span class='tag native'>"
           "native</span> (a tool call) or <span class='tag content'>recovered from text</span> · "
           "<span class='tag bridge'>via bridge</span> reached through <code>tool_call</code> · "
           "<span class='tag returned'>returned to client</span> a call handed to a client that owns "
           "its tools (proxy mode); the client runs it, never the lane · "
           "<span class='tag notrun'>NOT RUN</span> tool-call-shaped text with no execution."
           " A tool really ran when its row is ok and its result went back to the model.</p>")


def _session_page(session: dict[str, Any], turns: list[Turn]) -> str:
    calls = [c for t in turns for c in t.model_calls]
    runs = [r for c in calls for r in c.runs]
    counts = {status: sum(r.row["status"] == status for r in runs)
              for status in ("ok", "error", "refused")}
    not_run = sum(bool(c.unexecuted) for c in calls)
    sid = esc(session["id"])
    user_turns = sum(t.user is not None for t in turns)
    summary = (f"{user_turns} turns · {len(calls)} model calls · tool runs: {counts['ok']} ok, "
               f"{counts['error']} error, {counts['refused']} refused · "
               f"{not_run} model calls with tool-call text that did not run")
    return (f"<p><a href='/ui'>← sessions</a> · <a href='/v1/sessions/{sid}'>JSON</a></p>"
            f"<h1>Session {sid}</h1><p>{esc(session['title'])}<br><span class=muted>created "
            f"{esc(session['created_at'])} · source {esc(session['source'])}</span></p>"
            f"<p>{esc(summary)}</p>{_LEGEND}"
            + "".join(map(_turn, turns)))


def _turn(turn: Turn) -> str:
    steps = "".join(_model_call(s) if isinstance(s, ModelCall) else _note(s) for s in turn.steps)
    if turn.user is None:  # what a stateless request sent before its first user message
        return f"<div class=turn><b>Before the first user message</b>{steps}</div>"
    wall = f" · wall {turn.wall_s:.2f} s" if turn.wall_s is not None else ""
    return (f"<div class=turn><b>Turn {esc(turn.number)}</b><span class=muted> · "
            f"{len(turn.model_calls)} model calls{wall}</span>"
            f"<div class=user><b>user</b><pre>{esc(turn.user['content'])}</pre></div>{steps}</div>")


def _model_call(call: ModelCall) -> str:
    message = call.message
    cached = message.get("cached_tokens")
    tokens = (f"prompt {esc(message['prompt_tokens'])} tok"
              + (f" (cached {esc(cached)})" if cached is not None else "")
              + f" · completion {esc(message.get('completion_tokens'))} tok")
    if call.wall_s is not None:
        tokens += f" · wall ≈ {call.wall_s:.2f} s"
    content = f"<pre>{esc(clip(message['content'], SHOWN_CHARS))}</pre>" if message["content"] else ""
    not_run = ""
    if call.unexecuted:
        not_run = (f"<div class=notrun><span class='tag notrun'>NOT RUN</span> tool-call-shaped "
                   f"text that did not run: <b>{esc(', '.join(call.unexecuted))}</b></div>")
    what = f"model call for the lane: {call.purpose}" if call.purpose else "model call"
    if call.path:  # the form it took upstream (agent/constrained.py)
        what += f" (as {call.path})"
    held = ""
    if call.held_back:
        what = "model reply held back (not passed on)"
        held = f"<div class=held><b>why:</b> {esc(message.get('reason') or '')}</div>"
    return (f"<div class=call><b>{esc(what)}</b> <span class=muted>{tokens} · "
            f"{esc(message['created_at'])}</span>{held}{content}{not_run}"
            + "".join(map(_tool_run, call.runs)) + "".join(map(_returned_call, call.returned))
            + "</div>")


def _returned_call(row: dict[str, Any]) -> str:
    """A call handed to a proxy-mode client: the client ran it (or will), never the lane."""
    origin = ("<span class='tag content'>recovered from text</span>" if row["origin"] == "content"
              else "<span class='tag native'>native</span>")
    bridge = "<span class='tag bridge'>via bridge</span>" if row["via_bridge"] else ""
    result = (f"<pre>client's result: {esc(clip(row['result'], SHOWN_CHARS))}</pre>"
              if row["result_message_id"] is not None else "<pre class=muted>no result sent back yet</pre>")
    return (f"<div class='tool returned'><span class='tag returned'>returned to client</span>"
            f"{origin}{bridge}<b>{esc(row['tool_name'])}</b>"
            f"<pre>arguments: {esc(clip(row['arguments'], SHOWN_CHARS))}</pre>{result}</div>")


def _tool_run(run: ToolRun) -> str:
    row = run.row
    status = row["status"]
    origin = ("<span class='tag content'>recovered from text</span>" if run.recovered
              else "<span class='tag native'>native</span>")
    bridge = "<span class='tag bridge'>via bridge</span>" if run.via_bridge else ""
    unreported = ("" if run.reported
                  else " <span class=fail>(no tool message: the model never saw a result)</span>")
    duration = f"{row['duration_ms']:.0f} ms" if row["duration_ms"] is not None else ""
    outcome = row["result"] if status == "ok" else row["error"]
    return (f"<div class='tool {esc(status)}'><span class='tag {esc(status)}'>{esc(status)}</span>"
            f"{origin}{bridge}<b>{esc(row['tool_name'])}</b> <span class=muted>{esc(duration)}"
            f"</span>{unreported}<pre>arguments: {esc(clip(row['arguments'], SHOWN_CHARS))}</pre>"
            f"<pre>{'result' if status == 'ok' else 'error'}: "
            f"{esc(clip(outcome, SHOWN_CHARS))}</pre></div>")


def _note(message: dict[str, Any]) -> str:
    label = "lane note" if message.get("lane_note") else message["role"]
    return (f"<div class=note><b>{esc(label)}</b>"
            f"<pre>{esc(clip(message['content'], SHOWN_CHARS))}</pre></div>")
