"""`http_fetch`: GET one http(s) URL, with a timeout and a size cap, saying plainly when offline.

A fallback lane often runs exactly when the network is bad, so a connection failure is reported as
"offline or unreachable" (a ToolError the model can relay) rather than a stack trace. HTML is
reduced to its visible text; the model sees at most the terminal's output cap.
"""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any
from urllib.parse import urlsplit

import httpx

from .base import Tool, ToolContext, ToolError, object_schema

FETCH_TIMEOUT_S = 20.0
MAX_DOWNLOAD_BYTES = 1024 * 1024
MAX_REDIRECTS = 5
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/javascript", "+json", "+xml")


class _VisibleText(HTMLParser):
    """The text a reader would see: no scripts, styles or markup, whitespace collapsed."""

    _HIDDEN = {"script", "style", "noscript", "template", "head"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._hidden_depth = 0

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag in self._HIDDEN:
            self._hidden_depth += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in self._HIDDEN and self._hidden_depth:
            self._hidden_depth -= 1

    def handle_data(self, data: str) -> None:
        if not self._hidden_depth and data.strip():
            self.parts.append(" ".join(data.split()))


def html_to_text(html: str) -> str:
    parser = _VisibleText()
    parser.feed(html)
    parser.close()
    return "\n".join(parser.parts)


def _http_fetch(arguments: dict[str, Any], ctx: ToolContext) -> str:
    url = arguments["url"].strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ToolError(f"only http:// and https:// URLs can be fetched, not {url!r}")
    try:
        with httpx.Client(timeout=FETCH_TIMEOUT_S, follow_redirects=True,
                          max_redirects=MAX_REDIRECTS) as client:
            with client.stream("GET", url, headers={"User-Agent": "fallback-lane/0.1"}) as response:
                body, truncated = _read_capped(response)
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        raise ToolError(f"offline or unreachable: could not connect to {parts.hostname} ({exc}); "
                        "this machine may have no internet access") from None
    except httpx.TimeoutException:
        raise ToolError(f"{parts.hostname} did not answer within {FETCH_TIMEOUT_S:g} s") from None
    except httpx.TooManyRedirects:
        raise ToolError(f"more than {MAX_REDIRECTS} redirects from {url}") from None
    except httpx.HTTPError as exc:
        raise ToolError(f"fetching {url} failed: {exc}") from None
    content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    header = f"HTTP {response.status_code} {response.reason_phrase}; {content_type or 'no content type'}"
    if str(response.url) != url:
        header += f"; final URL {response.url}"
    if content_type and not any(kind in content_type for kind in _TEXT_TYPES):
        return f"{header}; {len(body)} bytes of binary content, not shown"
    text = body.decode(response.encoding or "utf-8", "replace")
    if content_type == "text/html" or text.lstrip()[:15].lower().startswith(("<!doctype html", "<html")):
        text = html_to_text(text)
    limit = ctx.settings.terminal_output_bytes
    if len(text) > limit or truncated:
        text = text[:limit] + f"\n[... cut: showing the first {min(limit, len(text))} characters ...]"
    return f"{header}\n{text}"


def _read_capped(response: httpx.Response) -> tuple[bytes, bool]:
    body = bytearray()
    for chunk in response.iter_bytes():
        body += chunk
        if len(body) > MAX_DOWNLOAD_BYTES:
            return bytes(body[:MAX_DOWNLOAD_BYTES]), True
    return bytes(body), False


TOOLS: list[Tool] = [
    Tool(
        name="http_fetch",
        description="Fetch a web page or API response by URL (GET, http/https) and return its status "
                    "and text; HTML is reduced to visible text. Reports clearly when offline.",
        parameters=object_schema({"url": {"type": "string", "description": "An http:// or https:// URL."}},
                                 ["url"]),
        run=_http_fetch,
    )
]
