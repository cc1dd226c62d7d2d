"""A scripted MCP server, hand-written JSON-RPC without the SDK, for the failures real servers rarely
show on demand. Run over stdio (`python raw_server.py`) or as streamable HTTP with plain JSON
replies (`python raw_server.py --http PORT [--require-header NAME:VALUE]`).

Tools and what calling them does:
  echo {text}   answers `text` (and, with --noisy, first writes a non-JSON line to stdout)
  slow {seconds} sleeps, then answers; the server reads nothing meanwhile (one message at a time)
  crash         the process exits mid-call without answering
  hang          this call is never answered; everything else still is
  freeze        answers nothing at all from now on (pings included): a hung server
  malformed     answers with a result that breaks the CallToolResult schema
  fail          answers isError: true
  grow          adds a tool `extra_N`, answers, then sends notifications/tools/list_changed
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import sys
import time
from typing import Any

SUPPORTED = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")


def _tool(name: str, description: str, properties: dict[str, Any] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties or {}}
    if properties:
        schema["required"] = list(properties)
    return {"name": name, "description": description, "inputSchema": schema}


class Fake:
    def __init__(self, noisy: bool = False):
        self.noisy = noisy
        self.frozen = False
        self.extra = 0
        self.tools = [
            _tool("echo", "Echo the given text back.", {"text": {"type": "string"}}),
            _tool("slow", "Sleep, then answer.", {"seconds": {"type": "number"}}),
            _tool("crash", "Exit the server process in the middle of the call."),
            _tool("hang", "Never answer this call."),
            _tool("freeze", "Stop answering anything at all."),
            _tool("malformed", "Answer with a result that is not a valid CallToolResult."),
            _tool("fail", "Answer with isError true."),
            _tool("grow", "Add a tool and announce the change."),
        ]

    def handle(self, message: dict[str, Any], send) -> None:
        """Answer one incoming message by calling send(obj) zero or more times."""
        if self.frozen or "id" not in message:
            return
        method, ident, params = message.get("method"), message["id"], message.get("params") or {}
        if method == "initialize":
            asked = params.get("protocolVersion")
            send(_result(ident, {
                "protocolVersion": asked if asked in SUPPORTED else SUPPORTED[0],
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "raw-fake", "version": "1.0"},
            }))
        elif method == "ping":
            send(_result(ident, {}))
        elif method == "tools/list":
            send(_result(ident, {"tools": self.tools}))
        elif method == "tools/call":
            self._call(ident, params.get("name"), params.get("arguments") or {}, send)
        else:
            send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": f"no method {method}"}})

    def _call(self, ident: Any, name: str, arguments: dict[str, Any], send) -> None:
        if name == "echo" or name.startswith("extra_"):
            if self.noisy:
                send("this line is not JSON-RPC")
            send(_result(ident, _text(f"{name}: {arguments.get('text', '')}")))
        elif name == "slow":
            time.sleep(float(arguments.get("seconds", 1)))
            send(_result(ident, _text(f"slept {arguments.get('seconds', 1)} s")))
        elif name == "crash":
            sys.stdout.flush()
            os._exit(3)
        elif name == "hang":
            return
        elif name == "freeze":
            self.frozen = True
        elif name == "malformed":
            send(_result(ident, {"content": "this should be a list", "isError": "maybe"}))
        elif name == "fail":
            send(_result(ident, {**_text("the fake tool failed on purpose"), "isError": True}))
        elif name == "grow":
            self.extra += 1
            self.tools.append(_tool(f"extra_{self.extra}", f"Extra tool number {self.extra}.",
                                    {"text": {"type": "string"}}))
            send(_result(ident, _text(f"added extra_{self.extra}")))
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        else:
            send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32602, "message": f"unknown tool {name}"}})


def _result(ident: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "result": result}


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": False}


def serve_stdio(fake: Fake) -> None:
    def send(obj: Any) -> None:
        sys.stdout.write((obj if isinstance(obj, str) else json.dumps(obj)) + "\n")
        sys.stdout.flush()

    for line in sys.stdin:
        if line.strip():
            fake.handle(json.loads(line), send)


def serve_http(fake: Fake, port: int, required: tuple[str, str] | None) -> None:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
            if required and self.headers.get(required[0]) != required[1]:
                self._reply(401, {"jsonrpc": "2.0", "id": None,
                                  "error": {"code": -32001, "message": "missing or wrong credentials"}})
                return
            message = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            replies: list[Any] = []
            fake.handle(message, replies.append)
            answers = [r for r in replies if isinstance(r, dict) and "id" in r]
            if answers:
                self._reply(200, answers[0])
            else:
                self.send_response(202)
                self.send_header("Content-Length", "0")
                self.end_headers()

        def do_GET(self) -> None:  # noqa: N802
            self.send_response(405)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_DELETE = do_GET  # noqa: N815

        def _reply(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"listening on {server.server_address[1]}", flush=True)
    server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--noisy", action="store_true")
    parser.add_argument("--http", type=int, metavar="PORT")
    parser.add_argument("--require-header", metavar="NAME:VALUE")
    args = parser.parse_args()
    fake = Fake(noisy=args.noisy)
    if args.http is None:
        serve_stdio(fake)
    else:
        required = tuple(args.require_header.split(":", 1)) if args.require_header else None
        serve_http(fake, args.http, required)  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
