"""The trace page's HTML primitives: escaping, the page shell, its style sheet.

Everything shown comes from the store, and much of it is model output, so it is untrusted: every
value goes through `esc` (the one way text enters the page), and the response forbids scripts and
every outside resource (Content-Security-Policy), so a string that slipped through still could not
run. No JavaScript, no build step, no external assets: the page is readable from `curl` too.
"""

from __future__ import annotations

import html
from typing import Any

from fastapi.responses import HTMLResponse

# Inline styles only; no script, image, font, frame or form target outside this page.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
                               "form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1100px;padding:12px 20px;
 color:#1d1d1f;background:#fafafa}
a{color:#0645ad}h1{font-size:20px;margin:8px 0}h2{font-size:16px;margin:18px 0 6px}
table{border-collapse:collapse;width:100%;margin:4px 0 10px;background:#fff}
th,td{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f0f0f0;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums}
pre{white-space:pre-wrap;word-break:break-word;margin:2px 0;font:12px/1.35 ui-monospace,monospace}
.turn{border:1px solid #ccc;border-radius:6px;background:#fff;margin:10px 0;padding:6px 10px}
.user{background:#eef4ff;border-left:4px solid #3b6fd8;padding:4px 8px}
.call{border-left:4px solid #999;margin:6px 0;padding:2px 8px}
.note{color:#555;border-left:4px dotted #bbb;margin:6px 0;padding:2px 8px}
.tool{margin:4px 0 4px 12px;padding:3px 8px;border:1px solid #ddd;border-radius:4px}
.ok{border-left:5px solid #2e7d32}.error{border-left:5px solid #c62828}
.refused{border-left:5px solid #ef6c00}
.returned{border-left:5px solid #1565c0}
div.notrun{margin:4px 0 4px 12px;padding:3px 8px;border:2px dashed #8e24aa;background:#fbf3fd}
.tag{display:inline-block;border-radius:3px;padding:0 5px;margin-right:4px;font-size:12px;
 background:#eee}
.tag.ok{background:#c8e6c9;border:0}.tag.error{background:#ffcdd2;border:0}
.tag.refused{background:#ffe0b2;border:0}.tag.notrun{background:#e1bee7}
.tag.content{background:#fff59d}.tag.bridge{background:#b3e5fc}.tag.native{background:#e0e0e0}
.tag.returned{background:#bbdefb}
.pass{color:#2e7d32;font-weight:600}.fail{color:#c62828;font-weight:600}
.muted{color:#666;font-size:12px}.nowrap{white-space:nowrap}
"""


def esc(value: Any) -> str:
    """Text for HTML content or a quoted attribute; None shows as nothing."""
    return "" if value is None else html.escape(str(value), quote=True)


def clip(text: str | None, limit: int) -> str:
    """Long arguments and results are cut on the page (the JSON API has them whole)."""
    text = text or ""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters)"


def page(title: str, body: str, *, status: int = 200) -> HTMLResponse:
    document = (f"<!doctype html><html lang=en><head><meta charset=utf-8>"
                f"<meta name=viewport content='width=device-width,initial-scale=1'>"
                f"<title>{esc(title)}</title><style>{_STYLE}</style></head>"
                f"<body>{body}</body></html>")
    return HTMLResponse(document, status_code=status, headers=SECURITY_HEADERS)
