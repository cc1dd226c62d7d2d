"""The API key, from a browser, for the trace page (/ui).

A browser cannot send `Authorization: Bearer KEY`, so under /ui the bearer check (guards.BearerAuth)
hands a request without a valid header to `browser_gate`, which accepts the same key two ways:

* the login form (a POST, so the key stays out of addresses and access logs), or `/ui?key=KEY`
  (handy for a bookmark or a headless browser; the shim's access log shows that one request):
  answered with a redirect to the same page without the key, setting an HttpOnly cookie;
* that cookie. It holds a token derived from the key, not the key: it opens the trace page only,
  never the API, and changing the key invalidates it.

Anything else gets the login form with a 401. Without a configured key there is no check at all,
as for the API.
"""

from __future__ import annotations

import hashlib
import hmac
from http.cookies import CookieError, SimpleCookie
from urllib.parse import parse_qsl, quote, urlencode

from starlette.responses import RedirectResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from .asgi_body import replayed
from .ui_html import esc, page

UI_PREFIX = "/ui"
KEY_PARAM = "key"
TOKEN_COOKIE = "lane_ui"
TOKEN_MAX_AGE_S = 30 * 24 * 3600


def is_ui_path(path: str) -> bool:
    return path == UI_PREFIX or path.startswith(UI_PREFIX + "/")


def ui_token(api_key: str) -> str:
    return hmac.new(api_key.encode(), b"fallback-lane trace page", hashlib.sha256).hexdigest()


async def browser_gate(app: ASGIApp, api_key: str, scope: Scope, receive: Receive,
                       send: Send) -> None:
    """Serves a /ui request that carried no valid bearer header: key in the URL, cookie, or the
    login form."""
    query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
    given = next((value for name, value in reversed(query) if name == KEY_PARAM), "")
    if scope["method"] == "POST":
        body = await _body(receive)
        receive = replayed(body, receive)  # the page behind the gate reads the body again
        form = parse_qsl(body.decode("utf-8", "replace"))
        given = next((value for name, value in reversed(form) if name == KEY_PARAM), "")
    token = ui_token(api_key)
    if given and hmac.compare_digest(given.encode(), api_key.encode()):
        rest = urlencode([(name, value) for name, value in query if name != KEY_PARAM])
        response = RedirectResponse(quote(scope["path"]) + (f"?{rest}" if rest else ""), 303)
        response.set_cookie(TOKEN_COOKIE, token, max_age=TOKEN_MAX_AGE_S, path=UI_PREFIX,
                            httponly=True, samesite="lax")
        await response(scope, receive, send)
        return
    if hmac.compare_digest(_cookie(scope).encode(), token.encode()):
        await app(scope, receive, send)
        return
    await login_page(scope["path"], wrong_key=bool(given))(scope, receive, send)


async def _body(receive: Receive) -> bytes:
    """The login form's body (BodyLimit, outside this gate, has already capped its size)."""
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if message["type"] != "http.request" or not message.get("more_body", False):
            return b"".join(chunks)


def _cookie(scope: Scope) -> str:
    raw = dict(scope["headers"]).get(b"cookie", b"").decode("latin-1")
    try:
        morsel = SimpleCookie(raw).get(TOKEN_COOKIE)
    except CookieError:
        return ""
    return morsel.value if morsel else ""


def login_page(path: str, *, wrong_key: bool):
    problem = "<p class=fail>That key is not this lane's key.</p>" if wrong_key else ""
    body = (f"<h1>fallback-lane trace</h1>{problem}"
            f"<form method=post action='{esc(path)}'>"
            f"<label>API key (<code>LANE_API_KEY</code>) "
            f"<input type=password name={KEY_PARAM} autofocus required></label> "
            f"<button>Open</button></form>"
            f"<p class=muted>The page keeps the key as an HttpOnly cookie for this path.</p>")
    return page("fallback-lane: key needed", body, status=401)
