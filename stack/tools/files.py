"""The file tools: read_file, write_file, search_files and patch, all confined to the workspace.

Every path goes through `resolve_path`, which is the only place that decides what is inside the
workspace: a path is checked once as written (so `..` cannot climb out) and once with symlinks
resolved (so a link inside the workspace cannot lead out). The workspace folder is created on first
use, so a fresh LANE_HOME needs no set-up.
"""

from __future__ import annotations

import difflib
import fnmatch
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

from ..config import Settings
from .base import Tool, ToolContext, ToolError, ToolRefused, nothing, object_schema

READ_DEFAULT_LINES = 2000
SEARCH_MAX_RESULTS = 50
SEARCH_LINE_CHARS = 200
SEARCH_MAX_FILE_BYTES = 2 * 1024 * 1024
SEARCH_MAX_FILES = 20000
# The longest a content search may take (LANE_TOOL_TIMEOUT when that is shorter): a pattern that
# has not finished by then backtracks, and more time would not help.
SEARCH_TIMEOUT_S = 30.0
_STOP_POLL_S = 0.05
SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv"})
_BINARY_PROBE = 8192
# A missing path's error lists this many entries of the nearest folder that exists.
MISSING_HINT_ENTRIES = 12


def workspace_root(settings: Settings) -> Path:
    """The workspace as a real, existing path (symlinks in its own location resolved)."""
    root = settings.workspace
    root.mkdir(parents=True, exist_ok=True)
    return root.resolve()


def resolve_path(raw: str, settings: Settings) -> Path:
    """The real path `raw` names inside the workspace, or ToolRefused saying why it is not."""
    if not isinstance(raw, str) or not raw.strip():
        raise ToolError("path must be a non-empty string")
    if "\0" in raw:
        raise ToolRefused("path contains a NUL byte")
    root = workspace_root(settings)
    given = Path(raw)
    if given.is_absolute():
        # The workspace may itself sit behind a symlink (/tmp on some systems): accept an absolute
        # path written against either spelling of it.
        lexical = Path(os.path.normpath(given))
        spelled = Path(os.path.normpath(os.path.abspath(settings.workspace)))
        if _inside(lexical, spelled):
            lexical = root / lexical.relative_to(spelled)
    else:
        lexical = Path(os.path.normpath(root / _without_workspace_prefix(given, root)))
    if not _inside(lexical, root):
        raise ToolRefused(
            f"path {raw!r} is outside the workspace ({root}); use a path relative to it"
        )
    real = lexical.resolve()
    if not _inside(real, root):
        raise ToolRefused(f"path {raw!r} goes through a symlink that leads outside the workspace")
    return real


def _without_workspace_prefix(given: Path, root: Path) -> Path:
    """A relative path less a first part that names the workspace itself ("workspace/notes.txt"),
    where the workspace holds nothing of that name: told paths are relative to the workspace, the
    1.5B model wrote "workspace/notes.txt" for notes.txt."""
    parts = given.parts
    if len(parts) > 1 and parts[0] == root.name and not (root / parts[0]).exists():
        return Path(*parts[1:])
    return given


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _shown(path: Path, settings: Settings) -> str:
    """A path as the model should write it back: relative to the workspace."""
    return str(path.relative_to(workspace_root(settings)))


def _is_binary(path: Path) -> bool:
    with path.open("rb") as handle:
        return b"\0" in handle.read(_BINARY_PROBE)


def _not_found(what: str, raw: str, path: Path, settings: Settings) -> ToolError:
    """The error for a path that does not exist, with what the nearest folder that does holds
    (the names most like the one asked for first): a small model guesses names, and can call
    again with a real one. Seen on the 1.5B model: "recipes_nov/banana_bread.txt" for a folder
    whose recipe was named otherwise."""
    root = workspace_root(settings)
    folder = path.parent
    while folder != root and root in folder.parents and not folder.is_dir():
        folder = folder.parent
    if not folder.is_dir():
        return ToolError(f"{what} not found: {raw}")
    entries = sorted(entry.name + ("/" if entry.is_dir() else "") for entry in folder.iterdir()
                     if not entry.name.startswith("."))
    close = difflib.get_close_matches(path.name, entries, n=3, cutoff=0.4)
    shown = [*close, *(entry for entry in entries if entry not in close)][:MISSING_HINT_ENTRIES]
    where = "the workspace" if folder == root else f"{_shown(folder, settings)}/"
    more = f" and {len(entries) - len(shown)} more" if len(entries) > len(shown) else ""
    holds = f"{where} holds: {', '.join(shown)}{more}" if shown else f"{where} is empty"
    return ToolError(f"{what} not found: {raw}; {holds}")


def _existing_file(raw: str, settings: Settings) -> Path:
    path = resolve_path(raw, settings)
    if not path.exists():
        raise _not_found("file", raw, path, settings)
    if path.is_dir():
        raise ToolError(f"{raw} is a directory; use search_files to list files")
    return path


# read_file


def _read_file(arguments: dict[str, Any], ctx: ToolContext) -> str:
    path = _existing_file(arguments["path"], ctx.settings)
    offset = arguments.get("offset", 1)
    limit = arguments.get("limit", READ_DEFAULT_LINES)
    if _is_binary(path):
        raise ToolError(f"{arguments['path']} is a binary file; read_file shows text only")
    cap = ctx.settings.read_file_bytes
    shown: list[str] = []
    used = 0
    stop: str | None = None  # why reading stopped early: "limit", "bytes" or "long line"
    number = 0
    with path.open("r", encoding="utf-8", errors="replace", newline="") as handle:
        for number, line in enumerate(handle, start=1):
            if number < offset:
                continue
            if len(shown) >= limit:
                stop = "limit"
                break
            size = len(line.encode("utf-8"))
            if used + size > cap:
                stop = "bytes"
                if not shown:  # a single line longer than the cap: show its start
                    shown.append(line.encode("utf-8")[:cap].decode("utf-8", "ignore"))
                    stop = "long line"
                break
            shown.append(line)
            used += size
    if offset > 1 and not shown:
        raise ToolError(f"offset {offset} is past the end of the file ({number} lines)")
    text = "".join(shown)
    if stop is None:
        return text if text else nothing(f"{arguments['path']} is empty")
    last = offset + len(shown) - 1
    if stop == "long line":
        note = f"line {last} is longer than {cap // 1024} KiB; only its start is shown"
    else:
        reason = f"limit={limit}" if stop == "limit" else f"the {cap // 1024} KiB read limit"
        note = f"truncated at {reason}: showed lines {offset}-{last}; continue with offset={last + 1}"
    return f"{text}\n[{note}]"


# write_file


def _write_file(arguments: dict[str, Any], ctx: ToolContext) -> str:
    content: str = arguments["content"]
    data = content.encode("utf-8")
    cap = ctx.settings.write_file_bytes
    if len(data) > cap:
        raise ToolError(f"content is {len(data)} bytes; write_file takes at most {cap} bytes per call")
    path = resolve_path(arguments["path"], ctx.settings)
    if path.is_dir():
        raise ToolError(f"{arguments['path']} is a directory")
    if not data and path.is_file() and path.stat().st_size:
        # Seen on the 1.5B model: asked what a packing list held, it read the file, then wrote
        # it empty. Emptying a file is never a slip worth taking: the terminal can do it.
        raise ToolRefused(f"not written: {_shown(path, ctx.settings)} holds {path.stat().st_size} bytes "
                          "and the content is empty; write the file's whole new text (to empty a "
                          "file on purpose, use the terminal)")
    lost, had = _lost_lines(path, content) if path.is_file() else ([], 0)
    if lost and ctx.later_step:
        raise ToolRefused(f"not written: this would delete {len(lost)} of the {had} lines of "
                          f"{_shown(path, ctx.settings)} (first: {lost[0][:60]!r}) in a step the request did not "
                          "start with; answer the user, or change the file with patch")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    wrote = f"wrote {len(data)} bytes to {_shown(path, ctx.settings)}"
    # A first step may replace a file, and the result says what went: seen on a blind everyday
    # file, "add a section 5 at the end of that file" wrote the new section alone over the
    # outline, and the answer said it "now has 5 sections".
    return f"{wrote}, replacing it: {len(lost)} of its {had} lines are gone (first: {lost[0][:60]!r})" if lost \
        else wrote


def _lost_lines(path: Path, content: str) -> tuple[list[str], int]:
    """The lines of the file that `content` does not keep. A later step may not delete any: seen
    on the 1.5B model, asked "I started a packing list in lisbon_packing.txt, can you tell me
    what's on it?", it read the file, then, as further steps it chose, wrote it empty, and next
    "the todo list is empty" over the six items. With the number of lines it holds."""
    kept = {line.strip() for line in content.splitlines()}
    old = [line for line in (raw.strip() for raw in path.read_text(encoding="utf-8", errors="replace").splitlines())
           if line]
    return [line for line in old if line not in kept], len(old)


# search_files


def _search_files(arguments: dict[str, Any], ctx: ToolContext) -> str:
    pattern: str | None = arguments.get("pattern") or None
    glob: str | None = arguments.get("glob") or None
    if pattern is None and glob is None:
        raise ToolError("give a pattern (to search contents), a glob (to match names), or both")
    base = resolve_path(arguments.get("path") or ".", ctx.settings)
    if not base.exists():
        raise _not_found("path", str(arguments.get("path")), base, ctx.settings)
    root = workspace_root(ctx.settings)
    names: list[tuple[str, Path]] = []
    stopped_early = False
    for scanned, path in enumerate(_walk(base, root), start=1):
        if scanned > SEARCH_MAX_FILES:
            stopped_early = True
            break
        relative = str(path.relative_to(root))
        if glob is None or _glob_matches(glob, relative):
            names.append((relative, path))
        if pattern is None and len(names) > SEARCH_MAX_RESULTS:
            break
    if pattern is None:
        results = [relative for relative, _ in names]
    else:
        searched = [(relative, path) for relative, path in names if _searchable(path)]
        results = [f"{relative}:{number}: {line}"
                   for relative, number, line in _matching_lines(searched, _regex(pattern), ctx)]
    more = len(results) > SEARCH_MAX_RESULTS
    results = results[:SEARCH_MAX_RESULTS]
    if stopped_early and not more:
        results.append(f"[stopped after {SEARCH_MAX_FILES} files; give a narrower path]")
    if not results:
        asked = [f"{key} {value!r}" for key, value in (("pattern", pattern), ("glob", glob)) if value]
        return f"no files match {' and '.join(asked)} under {_shown(base, ctx.settings)}"
    if more:
        results.append(f"[only the first {SEARCH_MAX_RESULTS} results; narrow the pattern, glob or path]")
    return "\n".join(results)


def _regex(pattern: str) -> str:
    """The pattern as the matcher runs it (case-insensitive): text that is not a valid regex is
    searched for literally."""
    try:
        re.compile(pattern)
    except re.error:
        return re.escape(pattern)
    return pattern


def _glob_matches(glob: str, relative: str) -> bool:
    """A glob with a slash matches the path from the workspace root, one without the file name."""
    target = relative if "/" in glob else os.path.basename(relative)
    return fnmatch.fnmatch(target, glob)


def _walk(base: Path, root: Path) -> Iterator[Path]:
    """Regular files under base in a stable order, never following a link out of the workspace."""
    if base.is_file():
        yield base
        return
    for folder, dirs, files in os.walk(base):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        for name in sorted(files):
            path = Path(folder) / name
            if path.is_symlink() and not _inside(path.resolve(), root):
                continue
            if path.is_file():
                yield path


def _searchable(path: Path) -> bool:
    """A text file small enough to search."""
    try:
        return path.stat().st_size <= SEARCH_MAX_FILE_BYTES and not _is_binary(path)
    except OSError:
        return False


_GREP_WORKER = Path(__file__).with_name("grep_worker.py")


def _matching_lines(files: list[tuple[str, Path]], pattern: str,
                    ctx: ToolContext) -> list[tuple[str, int, str]]:
    """(shown name, line number, line) of the first SEARCH_MAX_RESULTS + 1 matching lines, found
    by grep_worker.py in a process of its own, killed when the search outlives its time limit
    (SEARCH_TIMEOUT_S, at most LANE_TOOL_TIMEOUT) or the turn says stop: a regex that backtracks
    forever costs that process, never the shim."""
    if not files:
        return []
    limit = min(SEARCH_TIMEOUT_S, ctx.settings.tool_timeout_s)
    job = json.dumps({"pattern": pattern, "files": [[shown, str(path)] for shown, path in files],
                      "max_results": SEARCH_MAX_RESULTS, "line_chars": SEARCH_LINE_CHARS}).encode()
    process = subprocess.Popen([sys.executable, "-I", "-S", str(_GREP_WORKER)], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline, stop = time.monotonic() + limit, ctx.stop
    given: bytes | None = job
    try:
        while True:
            try:
                out, err = process.communicate(given, timeout=_STOP_POLL_S)
                break
            except subprocess.TimeoutExpired:
                given = None  # a retry goes on sending the job where it stopped
                if stop.is_set():
                    raise ToolError("the search was stopped (the turn ended)") from None
                if time.monotonic() >= deadline:
                    raise ToolError(f"the search took longer than {limit:g} s and was stopped: the pattern "
                                    f"{pattern!r} is too costly (nested repeats such as (a+)+ take forever); "
                                    "search for a plain word or a simpler pattern") from None
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    if process.returncode != 0:
        raise ToolError(f"the search failed: {err.decode('utf-8', 'replace').strip()[-500:]}")
    return [(shown, int(number), line) for shown, number, line in map(json.loads, out.decode().splitlines())]


# patch


def _patch(arguments: dict[str, Any], ctx: ToolContext) -> str:
    old: str = arguments["old_string"]
    new: str = arguments["new_string"]
    replace_all: bool = arguments.get("replace_all", False)
    if old == "":
        raise ToolError("old_string is empty; give the exact text to replace")
    if old == new:
        raise ToolError("old_string and new_string are the same; nothing to change")
    name = arguments["path"]
    path = _existing_file(name, ctx.settings)
    try:
        # newline="" keeps \r\n as written, so the text the model copied from read_file matches.
        with path.open("r", encoding="utf-8", newline="") as handle:
            text = handle.read()
    except UnicodeDecodeError:
        raise ToolError(f"{name} is not UTF-8 text; patch edits text files only") from None
    count = text.count(old)
    if count == 0:
        raise ToolError(
            f"old_string was not found in {name}; read_file it and copy the text exactly, "
            "including spaces and line breaks"
        )
    if count > 1 and not replace_all:
        raise ToolError(
            f"old_string appears {count} times in {name}; include more surrounding text to make "
            "it unique, or set replace_all to true"
        )
    updated = text.replace(old, new) if replace_all else text.replace(old, new, 1)
    data = updated.encode("utf-8")
    cap = ctx.settings.write_file_bytes
    if len(data) > cap:
        raise ToolError(f"the patched file would be {len(data)} bytes; the limit is {cap} bytes")
    path.write_bytes(data)
    replaced = count if replace_all else 1
    return f"replaced {replaced} occurrence{'s' if replaced > 1 else ''} in {_shown(path, ctx.settings)}"


_PATH = {"type": "string", "description": "Path relative to the workspace."}

TOOLS: list[Tool] = [
    Tool(
        name="read_file",
        description="Read a text file from the workspace, optionally a range of lines.",
        parameters=object_schema(
            {
                "path": _PATH,
                "offset": {"type": "integer", "minimum": 1, "description": "First line (1-based)."},
                "limit": {"type": "integer", "minimum": 1, "description": "Number of lines."},
            },
            ["path"],
        ),
        run=_read_file,
    ),
    Tool(
        name="write_file",
        description="Create or overwrite a file in the workspace with the given content.",
        parameters=object_schema({"path": _PATH, "content": {"type": "string"}}, ["path", "content"]),
        run=_write_file,
        confirms=True,
    ),
    Tool(
        name="search_files",
        description="Find files in the workspace by content (regex) and/or by name (glob).",
        parameters=object_schema(
            {
                "pattern": {"type": "string", "description": "Case-insensitive regex to find in file contents."},
                "glob": {"type": "string", "description": "File name pattern, e.g. *.py."},
                "path": {"type": "string", "description": "Folder to search, default the whole workspace."},
            }
        ),
        run=_search_files,
    ),
    Tool(
        name="patch",
        description="Replace exact text in a workspace file; old_string must match exactly once unless replace_all.",
        parameters=object_schema(
            {
                "path": _PATH,
                "old_string": {"type": "string", "description": "Exact text to find."},
                "new_string": {"type": "string", "description": "Replacement text."},
                "replace_all": {"type": "boolean", "description": "Replace every occurrence."},
            },
            ["path", "old_string", "new_string"],
        ),
        run=_patch,
        confirms=True,
    ),
]
