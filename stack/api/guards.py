"""Checks that run before any route: the bearer key and the body size limit.

Both are plain ASGI middleware rather than FastAPI dependencies so that they also cover unknown
paths and wrong methods, and so that an oversized body is refused while it is being read (a
chunked body has no Content-Length to check up front).
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Sequence

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..wire import error_body
from .ui_auth import browser_gate, is_ui_path

# Reachable without the key: a load balancer or `lane up` must be able to probe it.
OPEN_PATHS = frozenset({"/health"})


async def send_error(send: Send, status: int, message: str, type: str, code: str,
                     headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    body = json.dumps(error_body(message, code, type)).encode()
    await send({
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()), *headers],
    })
    await send({"type": "http.response.body", "body": body})


class BearerAuth:
    """Requires `Authorization: Bearer KEY` (or Anthropic's `x-api-key: KEY`) on every path but
    /health when a key is configured."""

    def __init__(self, app: ASGIApp, api_key: str):
        self.app = app
        self._api_key = api_key
        self._expected = f"Bearer {api_key}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        scheme, _, key = headers.get(b"authorization", b"").partition(b" ")
        if scheme.lower() != b"bearer" and b"x-api-key" in headers:  # Anthropic's clients send this
            scheme, key = b"bearer", headers[b"x-api-key"]
        # compare_digest on equal-shape inputs: the time taken says nothing about the key.
        presented = b"Bearer " + key.strip() if scheme.lower() == b"bearer" else b""
        if not hmac.compare_digest(presented, self._expected):
            if is_ui_path(scope["path"]):  # a browser: the key from the URL or a cookie
                await browser_gate(self.app, self._api_key, scope, receive, send)
                return
            await send_error(send, 401, "missing or wrong API key: send Authorization: Bearer KEY",
                             "authentication_error", "invalid_api_key",
                             [(b"www-authenticate", b"Bearer")])
            return
        await self.app(scope, receive, send)


class BodyLimit:
    """Reads the whole request body up front, refusing it with 413 as soon as it passes the limit
    (by its declared Content-Length or by the bytes actually received), then replays it to the app.
    Later receive() calls go to the server, so disconnect detection keeps working."""

    def __init__(self, app: ASGIApp, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.strip().isdigit() and int(declared) > self.max_bytes:
            await self._too_large(send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._too_large(send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _too_large(self, send: Send) -> None:
        await send_error(send, 413, f"request body is larger than {self.max_bytes} bytes",
                         "invalid_request_error", "body_too_large")
