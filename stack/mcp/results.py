"""An MCP tool result as the one string a model reads.

Text blocks are kept as they are; binary blocks become a one-line placeholder (a small model
cannot use base64); structured content is added as compact JSON unless a text block already
carries the same JSON, which is how most servers mirror it.
"""

from __future__ import annotations

import json
from typing import Any

import mcp.types as types

MAX_RESULT_CHARS = 32_000


def render_result(result: types.CallToolResult, max_chars: int = MAX_RESULT_CHARS) -> str:
    parts = [_render_block(block) for block in result.content]
    structured = result.structured_content
    if structured is not None and not any(_same_json(part, structured) for part in parts):
        parts.append("structured: " + json.dumps(structured, ensure_ascii=False, separators=(",", ":")))
    text = "\n".join(part for part in parts if part) or "(the tool returned no content)"
    return cap(text, max_chars)


def cap(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    head = text[: max_chars * 3 // 4]
    tail = text[-(max_chars // 4):]
    return f"{head}\n[... {len(text) - len(head) - len(tail)} characters cut ...]\n{tail}"


def _render_block(block: Any) -> str:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, (types.ImageContent, types.AudioContent)):
        kind = "image" if isinstance(block, types.ImageContent) else "audio"
        return f"[{kind} {block.mime_type}, {len(block.data) * 3 // 4} bytes, not shown]"
    if isinstance(block, types.ResourceLink):
        about = f": {block.description}" if block.description else ""
        return f"[resource link {block.name} {block.uri}{about}]"
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, types.TextResourceContents):
            return f"[resource {resource.uri}]\n{resource.text}"
        return f"[resource {resource.uri} {resource.mime_type or 'binary'}, not shown]"
    return f"[{getattr(block, 'type', type(block).__name__)} content, not shown]"


def _same_json(text: str, value: Any) -> bool:
    try:
        return json.loads(text) == value
    except ValueError:
        return False
