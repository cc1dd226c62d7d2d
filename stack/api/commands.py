"""`lane shim` (run the shim) and `lane sessions` (read the session store from a terminal)."""

from __future__ import annotations

import argparse
import ipaddress
import json
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..config import Settings

log = logging.getLogger("lane.api")

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


def register(subparsers: argparse._SubParsersAction) -> None:
    shim = subparsers.add_parser("shim", help="run the shim: the OpenAI-compatible agent endpoint")
    shim.add_argument("--llm-url", help="OpenAI-compatible base URL of the llm service")
    shim.add_argument("--host", help="address to bind (default 127.0.0.1; off loopback without "
                                     "LANE_API_KEY a key is created: `lane key`)")
    shim.add_argument("--port", type=int, help="port (default LANE_PORT or 8642)")
    shim.add_argument("--db", type=Path, help="session store path (default $LANE_HOME/state.db)")
    shim.add_argument("--home", type=Path, help="state folder: store, memory, workspace")
    shim.set_defaults(func=run_shim)

    key = subparsers.add_parser("key", help="print the API key in use (LANE_API_KEY, else the "
                                            "one the shim stored in $LANE_HOME)")
    key.add_argument("--home", type=Path, help="state folder (default LANE_HOME or ./.lane)")
    key.set_defaults(func=run_key)

    sessions = subparsers.add_parser("sessions", help="list sessions, or show one with its "
                                                      "tool executions")
    sessions.add_argument("session_id", nargs="?", help="show this session")
    sessions.add_argument("--db", type=Path, help="session store path (default settings)")
    sessions.add_argument("--limit", type=int, default=30, help="sessions to list (default 30)")
    sessions.add_argument("--json", action="store_true", help="print JSON instead of text")
    sessions.set_defaults(func=run_sessions)


def is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def run_shim(args: argparse.Namespace) -> int:
    from ..config import ConfigError, load_settings
    from ..store import Store, StoreError

    try:
        settings = load_settings().with_overrides(
            llm_url=args.llm_url, host=args.host, port=args.port, db=args.db, home=args.home)
    except ConfigError as exc:
        print(f"lane shim: {exc}", file=sys.stderr)
        return 2
    try:
        settings = settings.with_overrides(api_key=shim_key(settings))
        # Opened once here so that a bad --db is one clear line, not a failed server start-up.
        Store(settings.db_path).close()
    except (StoreError, OSError) as exc:
        print(f"lane shim: {exc}", file=sys.stderr)
        return 2

    import uvicorn

    from .app import create_app

    uvicorn.run(create_app(settings), host=settings.host, port=settings.port,
                log_level="info", timeout_graceful_shutdown=5)
    return 0


def shim_key(settings: Settings) -> str | None:
    """The key the shim requires: LANE_API_KEY, else the stored one; off loopback, where an open
    endpoint would serve anyone who can reach it, one is created on first start."""
    from ..config import create_api_key

    key = settings.key_in_use()
    if key is not None:
        if not settings.api_key:
            log.info("clients must send the API key stored in %s (print it with `lane key`)",
                     settings.api_key_path)
        return key
    if is_loopback(settings.host):
        return None
    key = create_api_key(settings)
    log.warning("no LANE_API_KEY set: created an API key in %s; clients send it as "
                "Authorization: Bearer KEY. Print it with `lane key` (Docker: `docker compose "
                "exec shim lane key`)", settings.api_key_path)
    return key


def run_key(args: argparse.Namespace) -> int:
    from ..config import ConfigError, load_settings

    try:
        settings = load_settings().with_overrides(home=args.home)
    except ConfigError as exc:
        print(f"lane key: {exc}", file=sys.stderr)
        return 2
    key = settings.key_in_use()
    if key is None:
        print(f"lane key: no key: LANE_API_KEY is unset and {settings.api_key_path} does not "
              "exist (a shim on loopback without a key is open; one bound elsewhere creates "
              "the key when it starts)", file=sys.stderr)
        return 1
    print(key)
    return 0


def run_sessions(args: argparse.Namespace) -> int:
    from ..config import ConfigError, load_settings
    from ..store import Store, StoreError

    try:
        path = args.db or load_settings().db_path
    except ConfigError as exc:
        print(f"lane sessions: {exc}", file=sys.stderr)
        return 2
    if not Path(path).is_file():
        print(f"lane sessions: no session store at {path}", file=sys.stderr)
        return 1
    try:
        store = Store(path)
    except StoreError as exc:
        print(f"lane sessions: {exc}", file=sys.stderr)
        return 1
    try:
        if args.session_id is None:
            listed = store.list_sessions(limit=args.limit)
            print(json.dumps(listed, indent=2) if args.json else format_list(listed))
            return 0
        session = store.session(args.session_id)
        if session is None:
            print(f"lane sessions: no session {args.session_id!r} in {path}", file=sys.stderr)
            return 1
        shown: dict[str, Any] = {"session": session, "messages": store.messages(args.session_id),
                                 "executions": store.executions(args.session_id),
                                 "lane_calls": store.lane_calls(args.session_id),
                                 "returned_calls": store.returned_calls(args.session_id)}
        print(json.dumps(shown, indent=2) if args.json else format_session(**shown))
        return 0
    finally:
        store.close()


def format_list(sessions: list[dict[str, Any]]) -> str:
    if not sessions:
        return "no sessions yet"
    lines = [f"{'ID':<26} {'CREATED':<19} {'SOURCE':<6} {'MSGS':>5} {'OK TOOLS':>8} {'RETURNED':>8}  TITLE"]
    for s in sessions:
        lines.append(f"{s['id']:<26} {_when(s['created_at']):<19} {s.get('source') or '-':<6} "
                     f"{s['messages']:>5} {s['ok_executions']:>8} {s['returned_calls']:>8}  "
                     f"{_clip(s.get('title') or '', 60)}")
    return "\n".join(lines)


def format_session(session: dict[str, Any], messages: list[dict[str, Any]],
                   executions: list[dict[str, Any]], lane_calls: list[dict[str, Any]] | None = None,
                   returned_calls: list[dict[str, Any]] | None = None) -> str:
    lines = [f"session {session['id']}  created {_when(session['created_at'])}  "
             f"source {session.get('source') or '-'}  model {session.get('model') or '-'}"]
    if session.get("title"):
        lines.append(f"title   {session['title']}")
    lines.append("")
    lines.append(f"messages ({len(messages)})")
    for m in messages:
        label = m["role"] + (f"[{m['tool_name']}]" if m.get("tool_name") else "")
        if m.get("lane_prompt"):
            label += " (lane prompt)"
        text = "(lane system prompt)" if m.get("lane_prompt") else _clip(m.get("content") or "",
                                                                          300)
        lines.append(f"  #{m['id']:<5} {label:<24} {text}")
        for call in m.get("tool_calls") or []:
            function = call.get("function", {})
            lines.append(f"  {'':<6} {'':<24} -> {function.get('name')}"
                         f"({_clip(function.get('arguments') or '', 100)})")
    lines.append("")
    lines.append(f"tool executions ({len(executions)})")
    if executions:
        lines.append(f"  {'TOOL':<20} {'STATUS':<8} {'VIA':<7} {'ORIGIN':<8} {'MS':>8}  ARGUMENTS")
    for e in executions:
        via = "bridge" if e["via_bridge"] else "direct"
        lines.append(f"  {e['tool_name']:<20} {e['status']:<8} {via:<7} {e['origin']:<8} "
                     f"{e['duration_ms'] or 0:>8.1f}  {_clip(e['arguments'] or '', 80)}")
        if e["status"] != "ok" and e.get("error"):
            lines.append(f"  {'':<20} error: {_clip(e['error'], 100)}")
    if returned_calls:
        lines.append("")
        lines.append(f"calls returned to the client, which runs them ({len(returned_calls)})")
        for r in returned_calls:
            via = "bridge" if r["via_bridge"] else "direct"
            result = "no result yet" if r["result_message_id"] is None else f"result: {_clip(r['result'] or '', 60)}"
            lines.append(f"  {r['tool_name']:<20} {via:<7} {r['origin']:<8} "
                         f"{_clip(r['arguments'] or '', 60)}  {result}")
    return "\n".join(lines + _lane_call_lines(lane_calls or []))


def _lane_call_lines(lane_calls: list[dict[str, Any]]) -> list[str]:
    """The model's replies the lane held back, each with why (they are not messages: the store
    keeps them with the lane's own model calls), then the lane's own model calls."""
    from ..store import HELD

    held = [c for c in lane_calls if c["purpose"] == HELD]
    own = [c for c in lane_calls if c["purpose"] != HELD]
    lines: list[str] = []
    if held:
        lines += ["", f"replies held back, not passed on to the client ({len(held)})"]
        for c in held:
            lines.append(f"  after #{c['after_message_id'] or 0:<5} {c['prompt_tokens'] or 0:>6} tok  "
                         f"{_clip(c['content'] or '', 100) or '(empty)'}")
            lines.append(f"  {'':<24} why: {_clip(c.get('reason') or '', 100)}")
    if own:
        lines += ["", f"the lane's own model calls ({len(own)})"]
        for c in own:
            lines.append(f"  after #{c['after_message_id'] or 0:<5} {c['purpose']:<8} "
                         f"{c['prompt_tokens'] or 0:>6} tok  {_clip(c['content'] or '', 100)}")
    return lines


def _clip(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"


def _when(iso: str | None) -> str:
    return (iso or "")[:19].replace("T", " ")
