"""Checks that run before any route: who may knock (Host, Origin), the bearer key, and what a body
must be (JSON, within the size limit).

All are plain ASGI middleware rather than FastAPI dependencies so that they also cover unknown
paths and wrong methods, and so that an oversized body is refused while it is being read (a
chunked body has no Content-Length to check up front).

The keyless loopback default trusts whoever reaches 127.0.0.1, and a browser page from any site can
reach it: through DNS rebinding (the attacker's name resolves to 127.0.0.1, so the page is
"same-origin" with the lane and reads its answers) or with a cross-site "simple" request (a
text/plain POST needs no CORS preflight; the page cannot read the answer, but the turn runs, terminal
included). So the Host must name this lane, a browser's Origin must be an allowed one, and a body
must be declared JSON, which a simple request cannot do. Local agents send no Origin and a loopback
Host, and pass untouched.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Iterable, Sequence
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from ..wire import error_body
from .asgi_body import replayed
from .ui_auth import browser_gate, is_ui_path

# Reachable without the key, and by any Host name: a load balancer or `lane up` must be able to
# probe it (it tells nothing but up or down).
OPEN_PATHS = frozenset({"/health"})
# Always served, whatever is configured: a local client on this machine.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
ANY_HOST = "*"
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


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


def host_name(authority: str) -> str:
    """The host of a Host header, an origin's authority or a setting, in one spelling to compare:
    lower case, no port, no trailing dot, an IPv6 address in brackets."""
    text = authority.strip().lower()
    if text.startswith("["):
        return text[:text.find("]") + 1] if "]" in text else text
    if text.count(":") > 1:  # a bare IPv6 address, as LANE_HOST=::1 spells it
        return f"[{text}]"
    return text.partition(":")[0].rstrip(".")


class HostAndOrigin:
    """Refuses a request whose Host is not a name this lane serves (421) or whose Origin is a web
    page this lane does not serve (403); /health is open to every Host, as to every key."""

    def __init__(self, app: ASGIApp, host: str, allowed_hosts: Iterable[str],
                 allowed_origins: Iterable[str]):
        self.app = app
        named = [host_name(name) for name in (*LOOPBACK_HOSTS, host, *allowed_hosts)]
        self._any_host = ANY_HOST in named
        self._hosts = frozenset(named) - {ANY_HOST}
        self._origins = frozenset(origin.strip().lower().rstrip("/") for origin in allowed_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        host = headers.get(b"host", b"").decode("latin-1")
        if host and not self._any_host and host_name(host) not in self._hosts:
            await send_error(send, 421, f"this lane does not serve the host {host_name(host)!r}; "
                             "add it to LANE_ALLOWED_HOSTS to reach the lane by that name",
                             "invalid_request_error", "host_not_allowed")
            return
        origin = headers.get(b"origin")
        if origin is not None and not self._allows(origin.decode("latin-1"), host):
            await send_error(send, 403, f"requests from the web page at {origin.decode('latin-1')!r} "
                             "are not allowed; add its origin to LANE_ALLOWED_ORIGINS to allow them",
                             "permission_error", "origin_not_allowed")
            return
        await self.app(scope, receive, send)

    def _allows(self, origin: str, host: str) -> bool:
        """The lane's own pages (same origin as the request), http(s) on a named host (any port),
        or an origin listed as allowed; `null` (a sandboxed or file: page) never."""
        text = origin.strip().lower().rstrip("/")
        try:
            parts = urlsplit(text)
        except ValueError:
            return False
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return False
        return (text in self._origins or host_name(parts.netloc) in self._hosts
                or (bool(host) and parts.netloc == host.strip().lower()))


class JsonBodies:
    """A body sent to the API must be declared `application/json` (415 otherwise): a web page can
    send text/plain or a form to any address without asking, but not JSON. The trace page's login
    form (under /ui) is a form, and is let through."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in BODY_METHODS \
                and not is_ui_path(scope["path"]):
            declared = dict(scope["headers"]).get(b"content-type", b"").decode("latin-1")
            if declared.partition(";")[0].strip().lower() != "application/json":
                await send_error(send, 415, "the request body must be JSON, sent with "
                                 f"Content-Type: application/json (not {declared or 'none'!r})",
                                 "invalid_request_error", "unsupported_media_type")
                return
        await self.app(scope, receive, send)


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
        await self.app(scope, replayed(b"".join(chunks), receive), send)

    async def _too_large(self, send: Send) -> None:
        await send_error(send, 413, f"request body is larger than {self.max_bytes} bytes",
                         "invalid_request_error", "body_too_large")
