"""The `memory` tool: short facts that outlive a session and go into every new turn's prompt.

The file (settings.memory_path) is plain text a person can read and edit: one entry per block,
blocks separated by a blank line. An entry may span lines but holds no blank line (they are
collapsed on the way in), so the format cannot be broken from inside an entry. Writes go through a
temporary file and a rename, under a lock, so concurrent turns never leave half a file behind.
"""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path
from typing import Any

from ..config import Settings
from .base import Tool, ToolContext, ToolError, nothing, object_schema, plain_words

# Everything in memory is in every system prompt; a small model's context is the budget.
MEMORY_MAX_CHARS = 4000

_BLANK_LINES = re.compile(r"\n\s*\n")
_lock = threading.Lock()


def read_entries(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    return [entry.strip() for entry in _BLANK_LINES.split(text) if entry.strip()]


def read_memory(settings: Settings) -> str:
    """The memory as the system prompt shows it: one bullet per entry, '' when there is none."""
    return "\n".join(_bullet(entry) for entry in read_entries(settings.memory_path))


def _bullet(entry: str) -> str:
    return "- " + entry.replace("\n", "\n  ")


def _normalized(text: str | None, field: str) -> str:
    cleaned = _BLANK_LINES.sub("\n", (text or "").replace("\r\n", "\n")).strip()
    if not cleaned:
        raise ToolError(f"{field} is required and must not be empty")
    return cleaned


def _save(path: Path, entries: list[str]) -> None:
    size = _size(entries)
    if size > MEMORY_MAX_CHARS:
        raise ToolError(
            f"memory would hold {size} characters, over its limit of {MEMORY_MAX_CHARS}; "
            "remove or shorten entries first"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text("\n\n".join(entries) + ("\n" if entries else ""), encoding="utf-8")
    os.replace(temporary, path)


def _size(entries: list[str]) -> int:
    return len("\n\n".join(entries))


def _find(entries: list[str], old_text: str) -> int:
    """The index of the one entry old_text names: the entry itself, or a unique part of it."""
    exact = [i for i, entry in enumerate(entries) if entry == old_text]
    if exact:
        return exact[0]
    found = [i for i, entry in enumerate(entries) if old_text.lower() in entry.lower()]
    if not found:
        listing = "\n".join(_bullet(e) for e in entries) or nothing("memory is empty")
        raise ToolError(f"no memory entry contains {old_text!r}. Current entries:\n{listing}")
    if len(found) > 1:
        listing = "\n".join(_bullet(entries[i]) for i in found)
        raise ToolError(
            f"{old_text!r} matches {len(found)} entries; give more of the text to pick one:\n{listing}"
        )
    return found[0]


def _memory(arguments: dict[str, Any], ctx: ToolContext) -> str:
    action = arguments["action"]
    path = ctx.settings.memory_path
    with _lock:
        entries = read_entries(path)
        if action == "add":
            content = _normalized(arguments.get("content"), "content")
            if content in entries:
                # the entry, named: the answer passes on what is kept (seen, "you know the wifi
                # password?" re-saved it, and "... is kettle-moon-42" was held back as leaving out
                # a result that said only "already in memory")
                return f"already in memory: {content!r}; nothing changed"
            entries.append(content)
            _save(path, entries)
            # The fill level only where it matters: the 1.5B model copied "(3 in all, 52/4000
            # chars used)" into its answers with other numbers, and each was held back as stating
            # numbers no result holds (the six steps, 2026-11-29: three held answers in two runs).
            size = _size(entries)
            full = f" (memory {size}/{MEMORY_MAX_CHARS} characters full)" if size > MEMORY_MAX_CHARS * 3 // 4 else ""
            return f"saved to memory: {content!r}{full}"
        if not (arguments.get("old_text") or "").strip():
            raise ToolError(f"{action} needs old_text, a part of the entry to {action}. To save something "
                            'new instead: {"action": "add", "content": "<the text to remember>"}')
        try:
            index = _find(entries, _normalized(arguments.get("old_text"), "old_text"))
        except ToolError as exc:
            content = (arguments.get("content") or "").strip()
            if action == "replace" and content:  # measured: a small model "replaces" to save
                raise ToolError(f"{exc}\nTo save it as a new entry instead: "
                                f'{{"action": "add", "content": {json.dumps(content, ensure_ascii=False)}}}') from None
            raise
        if action == "replace":
            previous = entries[index]
            content = _normalized(arguments.get("content"), "content")
            if content == previous:  # seen: asked to note a new rent, the model "replaced" the old note with itself
                raise ToolError(f"content is the entry as it is ({previous!r}): nothing changed. To save "
                                'something new instead: {"action": "add", "content": "<the text to remember>"}')
            if set(plain_words(content).split()) <= set(plain_words(previous).split()):
                # seen: asked "what was my bike lock code again", the model replaced 'Bike lock
                # code: 4471' with '4471'; a replace that adds nothing only loses what was kept
                raise ToolError(f"content adds nothing to the entry ({previous!r}), it would only drop text: "
                                "nothing changed. The notes are shown to you; to delete an entry use "
                                '{"action": "remove", "old_text": "<part of the entry>"}')
            entries[index] = content
            _save(path, entries)
            return f"replaced {previous!r} with {entries[index]!r}"
        removed = entries.pop(index)
        _save(path, entries)
        return f"removed {removed!r}"


TOOLS: list[Tool] = [
    Tool(
        name="memory",
        # No "read": every entry is in the prompt. Measured on a 1.5B model, asked to save something
        # after another tool ran, it chose read more often than add.
        description="Remember something for later: add, replace or remove a note shown to you in every session.",
        parameters=object_schema(
            {
                "action": {"type": "string", "enum": ["add", "replace", "remove"]},
                "content": {"type": "string", "description": "The entry text (add, replace)."},
                "old_text": {
                    "type": "string",
                    "description": "Text of the entry to change (replace, remove).",
                },
            },
            ["action"],
        ),
        run=_memory,
        confirms=True,
    )
]
