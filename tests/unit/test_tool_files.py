"""read_file, write_file, search_files and patch, run through the executor as the agent runs them."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from stack.tools import files
from stack.tools.base import ToolContext
from stack.tools.execute import Outcome, run_tool
from tests.fakes.tool_context import make_tool_context, tool_context

TOOLS = {tool.name: tool for tool in files.TOOLS}


@pytest.fixture
def ctx(tmp_path: Path):
    with tool_context(tmp_path / "home") as context:
        yield context


@pytest.fixture
def ws(ctx: ToolContext) -> Path:
    return files.workspace_root(ctx.settings)


def call(name: str, arguments: dict, ctx: ToolContext) -> Outcome:
    return run_tool(TOOLS[name], arguments, ctx)


# workspace confinement: every file tool, every way out


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "outside"
    secret.mkdir()
    (secret / "secret.txt").write_text("top secret\n")
    return secret


ESCAPES = ["../outside/secret.txt", "sub/../../../outside/secret.txt", "..", "/etc/passwd"]


def tool_calls(path: str) -> list[tuple[str, dict]]:
    return [
        ("read_file", {"path": path}),
        ("write_file", {"path": path, "content": "pwned"}),
        ("patch", {"path": path, "old_string": "top", "new_string": "pwned"}),
        ("search_files", {"pattern": "secret", "path": path}),
    ]


@pytest.mark.parametrize("path", ESCAPES)
def test_paths_outside_the_workspace_are_refused(ctx, outside, path):
    for name, arguments in tool_calls(path):
        outcome = call(name, arguments, ctx)
        assert outcome.status == "refused", (name, outcome)
        assert "outside the workspace" in outcome.output
    assert (outside / "secret.txt").read_text() == "top secret\n"


def test_absolute_path_outside_given_as_workspace_sibling_is_refused(ctx, ws, outside):
    path = str(outside / "secret.txt")
    for name, arguments in tool_calls(path):
        assert call(name, arguments, ctx).status == "refused", name
    assert (outside / "secret.txt").read_text() == "top secret\n"


def test_symlinked_file_leading_out_is_refused(ctx, ws, outside):
    (ws / "link.txt").symlink_to(outside / "secret.txt")
    for name, arguments in tool_calls("link.txt"):
        outcome = call(name, arguments, ctx)
        assert outcome.status == "refused", (name, outcome)
        assert "symlink" in outcome.output
    assert (outside / "secret.txt").read_text() == "top secret\n"


def test_symlinked_folder_leading_out_is_refused_for_new_files_too(ctx, ws, outside):
    (ws / "door").symlink_to(outside, target_is_directory=True)
    outcome = call("write_file", {"path": "door/new.txt", "content": "x"}, ctx)
    assert outcome.status == "refused"
    assert not (outside / "new.txt").exists()
    assert call("read_file", {"path": "door/secret.txt"}, ctx).status == "refused"


def test_symlink_inside_the_workspace_is_followed(ctx, ws):
    (ws / "real.txt").write_text("hello\n")
    (ws / "alias.txt").symlink_to(ws / "real.txt")
    outcome = call("read_file", {"path": "alias.txt"}, ctx)
    assert (outcome.status, outcome.output) == ("ok", "hello\n")


def test_absolute_paths_inside_the_workspace_and_harmless_dotdot_are_fine(ctx, ws):
    (ws / "a").mkdir()
    (ws / "a" / "f.txt").write_text("inside\n")
    assert call("read_file", {"path": str(ws / "a" / "f.txt")}, ctx).output == "inside\n"
    # The workspace's own spelling before symlinks are resolved works as well.
    assert call("read_file", {"path": str(ctx.settings.workspace / "a/f.txt")}, ctx).status == "ok"
    assert call("read_file", {"path": "a/../a/f.txt"}, ctx).output == "inside\n"


def test_a_path_that_starts_with_the_workspace_s_own_name_is_read_inside_it(ctx, ws):
    """Told paths are relative to the workspace, the 1.5B model wrote "workspace/notes.txt"."""
    assert ws.name == "workspace"
    (ws / "notes.txt").write_text("inside\n")
    assert call("read_file", {"path": "workspace/notes.txt"}, ctx).output == "inside\n"
    assert call("write_file", {"path": "workspace/new.txt", "content": "x\n"}, ctx).status == "ok"
    assert (ws / "new.txt").read_text() == "x\n" and not (ws / "workspace").exists()
    # where the workspace does hold a folder of that name, the path means it
    (ws / "workspace").mkdir()
    (ws / "workspace" / "notes.txt").write_text("nested\n")
    assert call("read_file", {"path": "workspace/notes.txt"}, ctx).output == "nested\n"


def test_workspace_is_created_on_first_use(tmp_path):
    context = make_tool_context(tmp_path / "fresh")
    assert not context.settings.workspace.exists()
    outcome = call("write_file", {"path": "x.txt", "content": "1"}, context)
    assert outcome.status == "ok"
    assert (context.settings.workspace / "x.txt").read_text() == "1"
    context.store.close()


# read_file


def test_read_file_whole_and_by_line_range(ctx, ws):
    (ws / "f.txt").write_text("".join(f"line {n}\n" for n in range(1, 11)))
    assert call("read_file", {"path": "f.txt"}, ctx).output == "".join(
        f"line {n}\n" for n in range(1, 11)
    )
    outcome = call("read_file", {"path": "f.txt", "offset": 3, "limit": 2}, ctx)
    assert outcome.status == "ok"
    assert outcome.output.startswith("line 3\nline 4\n")
    assert "line 5" not in outcome.output
    assert "showed lines 3-4; continue with offset=5" in outcome.output
    tail = call("read_file", {"path": "f.txt", "offset": 9}, ctx).output
    assert tail == "line 9\nline 10\n"


def test_read_file_offset_past_the_end_is_an_error(ctx, ws):
    (ws / "f.txt").write_text("a\nb\n")
    outcome = call("read_file", {"path": "f.txt", "offset": 5}, ctx)
    assert outcome.status == "error"
    assert "past the end" in outcome.output and "2 lines" in outcome.output


def test_read_file_stops_at_the_byte_cap_and_says_where_to_continue(tmp_path):
    context = make_tool_context(tmp_path / "home", read_file_bytes=100)
    ws = files.workspace_root(context.settings)
    (ws / "big.txt").write_text("".join(f"{n:09d}\n" for n in range(1, 101)))  # 10 bytes a line
    outcome = call("read_file", {"path": "big.txt"}, context)
    assert outcome.status == "ok"
    body, note = outcome.output.rsplit("\n[", 1)
    assert len(body.encode()) <= 100
    assert body.splitlines()[-1] == "000000010"
    assert "read limit" in note and "continue with offset=11" in note
    nxt = call("read_file", {"path": "big.txt", "offset": 11}, context).output
    assert nxt.startswith("000000011\n")
    context.store.close()


def test_read_file_cuts_a_single_line_longer_than_the_cap(tmp_path):
    context = make_tool_context(tmp_path / "home", read_file_bytes=64)
    (files.workspace_root(context.settings) / "wide.txt").write_text("x" * 1000 + "\n")
    outcome = call("read_file", {"path": "wide.txt"}, context)
    assert outcome.status == "ok"
    assert outcome.output.startswith("x" * 64 + "\n[")
    assert "longer than" in outcome.output
    context.store.close()


@pytest.mark.parametrize(
    "setup, path, message",
    [
        (lambda ws: None, "missing.txt", "file not found"),
        (lambda ws: (ws / "d").mkdir(), "d", "is a directory"),
        (lambda ws: (ws / "b.bin").write_bytes(b"\x00\x01\x02"), "b.bin", "binary"),
    ],
)
def test_read_file_errors(ctx, ws, setup, path, message):
    setup(ws)
    outcome = call("read_file", {"path": path}, ctx)
    assert outcome.status == "error"
    assert message in outcome.output


def test_a_missing_file_s_error_shows_what_the_nearest_folder_holds(ctx, ws):
    (ws / "recipes_nov").mkdir()
    for name in ("shakshuka.txt", "dal.txt", "banana-bread.md"):
        (ws / "recipes_nov" / name).write_text("x\n")
    outcome = call("read_file", {"path": "recipes_nov/banana_bread.txt"}, ctx)
    assert outcome.status == "error"
    assert outcome.output == ("file not found: recipes_nov/banana_bread.txt; "
                              "recipes_nov/ holds: banana-bread.md, dal.txt, shakshuka.txt")
    deeper = call("read_file", {"path": "recipes_dec/soup/leek.txt"}, ctx)
    assert deeper.output.startswith("file not found: recipes_dec/soup/leek.txt; the workspace holds: ")
    assert "recipes_nov/" in deeper.output
    for n in range(20):
        (ws / "recipes_nov" / f"extra{n:02}.txt").write_text("x\n")
    many = call("read_file", {"path": "recipes_nov/banana_bread.txt"}, ctx).output
    assert many.startswith("file not found: recipes_nov/banana_bread.txt; recipes_nov/ holds: banana-bread.md, ")
    assert many.endswith(" and 11 more")


def test_read_file_empty_file(ctx, ws):
    (ws / "e.txt").write_text("")
    assert call("read_file", {"path": "e.txt"}, ctx).output == "(e.txt is empty)"


def test_read_file_rejects_bad_arguments_before_running(ctx):
    outcome = call("read_file", {"path": "f.txt", "offset": 0}, ctx)
    assert outcome.status == "error"
    assert "offset" in outcome.output


# write_file


def test_write_file_creates_parents_and_overwrites(ctx, ws):
    outcome = call("write_file", {"path": "a/b/c.txt", "content": "héllo\n"}, ctx)
    assert outcome.status == "ok"
    assert outcome.output == "wrote 7 bytes to a/b/c.txt"  # é is two bytes
    assert (ws / "a/b/c.txt").read_text() == "héllo\n"
    call("write_file", {"path": "a/b/c.txt", "content": "new"}, ctx)
    assert (ws / "a/b/c.txt").read_text() == "new"


def test_write_file_over_the_cap_is_an_error_and_writes_nothing(tmp_path):
    context = make_tool_context(tmp_path / "home", write_file_bytes=10)
    outcome = call("write_file", {"path": "f.txt", "content": "x" * 11}, context)
    assert outcome.status == "error"
    assert "at most 10 bytes" in outcome.output
    assert not (context.settings.workspace / "f.txt").exists()
    assert call("write_file", {"path": "f.txt", "content": "x" * 10}, context).status == "ok"
    context.store.close()


def test_write_file_never_empties_a_file_that_holds_something(ctx, ws):
    (ws / "packing.txt").write_text("passport\nsunscreen\n")
    outcome = call("write_file", {"path": "packing.txt", "content": ""}, ctx)
    assert outcome.status == "refused" and "holds 19 bytes" in outcome.output
    assert (ws / "packing.txt").read_text() == "passport\nsunscreen\n"
    # a new empty file, or an empty one written again, is fine
    assert call("write_file", {"path": "empty.txt", "content": ""}, ctx).status == "ok"
    assert call("write_file", {"path": "empty.txt", "content": ""}, ctx).status == "ok"


def test_a_later_step_of_a_turn_never_deletes_lines_of_a_file(ctx, ws):
    (ws / "packing.txt").write_text("passport\nsunscreen\n")
    ctx.later_step = True
    outcome = call("write_file", {"path": "packing.txt", "content": "the todo list is empty"}, ctx)
    assert outcome.status == "refused" and "delete 2 of the 2 lines of packing.txt" in outcome.output
    assert (ws / "packing.txt").read_text() == "passport\nsunscreen\n"
    # keeping every line (adding one) is fine, and so is a new file
    assert call("write_file", {"path": "packing.txt", "content": "passport\nsunscreen\nswimsuit\n"}, ctx).status == "ok"
    assert call("write_file", {"path": "new.txt", "content": "x"}, ctx).status == "ok"
    ctx.later_step = False  # the request's own first step may replace the file, and is told what went
    replaced = call("write_file", {"path": "packing.txt", "content": "hat\n"}, ctx)
    assert replaced.status == "ok" and (ws / "packing.txt").read_text() == "hat\n"
    assert replaced.output == ("wrote 4 bytes to packing.txt, replacing it: 3 of its 3 lines are gone "
                               "(first: 'passport')")
    assert call("write_file", {"path": "packing.txt", "content": "hat\nscarf\n"}, ctx).output == (
        "wrote 10 bytes to packing.txt")  # every line kept: nothing to say


def test_write_file_onto_a_directory_is_an_error(ctx, ws):
    (ws / "d").mkdir()
    outcome = call("write_file", {"path": "d", "content": "x"}, ctx)
    assert outcome.status == "error" and "directory" in outcome.output


# search_files


@pytest.fixture
def tree(ws: Path) -> Path:
    (ws / "src").mkdir()
    (ws / "src" / "app.py").write_text("import os\ndef main():\n    return 42\n")
    (ws / "src" / "util.py").write_text("def helper(x):\n    return x\n")
    (ws / "notes.md").write_text("TODO: write main docs\n")
    (ws / "blob.bin").write_bytes(b"main\x00\x00")
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("main branch\n")
    return ws


def test_search_contents_by_regex_is_case_insensitive(ctx, tree):
    outcome = call("search_files", {"pattern": r"def \w+\("}, ctx)
    assert outcome.status == "ok"
    assert outcome.output.splitlines() == ["src/app.py:2: def main():", "src/util.py:1: def helper(x):"]
    hits = call("search_files", {"pattern": "MAIN"}, ctx).output.splitlines()
    assert hits == ["notes.md:1: TODO: write main docs", "src/app.py:2: def main():"]


def test_search_invalid_regex_is_searched_literally(ctx, tree):
    assert call("search_files", {"pattern": "helper("}, ctx).output == "src/util.py:1: def helper(x):"


def test_search_names_by_glob_and_both(ctx, tree):
    assert call("search_files", {"glob": "*.py"}, ctx).output.splitlines() == ["src/app.py", "src/util.py"]
    assert call("search_files", {"glob": "src/a*"}, ctx).output == "src/app.py"
    both = call("search_files", {"glob": "*.py", "pattern": "return"}, ctx).output.splitlines()
    assert both == ["src/app.py:3:     return 42", "src/util.py:2:     return x"]
    scoped = call("search_files", {"pattern": "return", "path": "src/util.py"}, ctx).output
    assert scoped == "src/util.py:2:     return x"


def test_search_reports_no_match_and_needs_something_to_search(ctx, tree):
    outcome = call("search_files", {"pattern": "zebra"}, ctx)
    assert (outcome.status, outcome.output) == ("ok", "no files match pattern 'zebra' under .")
    both = call("search_files", {"pattern": "zebra", "glob": "*.md", "path": "src"}, ctx)
    assert both.output == "no files match pattern 'zebra' and glob '*.md' under src"
    assert call("search_files", {}, ctx).status == "error"
    assert call("search_files", {"pattern": "x", "path": "nope"}, ctx).status == "error"


def test_search_results_are_capped(ctx, ws):
    for n in range(files.SEARCH_MAX_RESULTS + 10):
        (ws / f"f{n:03d}.txt").write_text("needle\n")
    lines = call("search_files", {"pattern": "needle"}, ctx).output.splitlines()
    assert len(lines) == files.SEARCH_MAX_RESULTS + 1
    assert lines[-1].startswith(f"[only the first {files.SEARCH_MAX_RESULTS} results")


def test_search_stops_after_too_many_files(ctx, ws, monkeypatch):
    monkeypatch.setattr(files, "SEARCH_MAX_FILES", 3)
    for n in range(5):
        (ws / f"f{n}.txt").write_text("hay\n")
    (ws / "f4.txt").write_text("needle\n")
    outcome = call("search_files", {"pattern": "needle"}, ctx)
    assert (outcome.status, outcome.output) == ("ok", "[stopped after 3 files; give a narrower path]")
    assert call("search_files", {"pattern": "needle", "path": "f4.txt"}, ctx).output == "f4.txt:1: needle"


def test_search_does_not_follow_links_out_of_the_workspace(ctx, ws, outside):
    (ws / "leak.txt").symlink_to(outside / "secret.txt")
    (ws / "door").symlink_to(outside, target_is_directory=True)
    assert call("search_files", {"pattern": "secret"}, ctx).output.startswith("no files match")


def test_a_pattern_that_backtracks_forever_is_stopped_at_the_time_limit_and_freezes_nothing(tmp_path):
    """`(a+)+$` over one 31-character line takes Python's `re` minutes and holds the GIL: run in
    this process it froze every thread, so the shim stopped answering. It runs in a process of
    its own now, killed at the limit (LANE_TOOL_TIMEOUT, here 2 s), while other threads go on."""
    with tool_context(tmp_path / "home", tool_timeout_s=2.0) as context:
        (files.workspace_root(context.settings) / "a.txt").write_text("a" * 30 + "!\n")
        ticks = []
        done = threading.Event()

        def tick() -> None:
            while not done.is_set():
                ticks.append(time.monotonic())
                time.sleep(0.01)

        ticker = threading.Thread(target=tick)
        ticker.start()
        started = time.monotonic()
        try:
            outcome = call("search_files", {"pattern": "(a+)+$"}, context)
        finally:
            done.set()
            ticker.join()
        assert outcome.status == "error" and "took longer than 2 s" in outcome.output
        assert time.monotonic() - started < 6
        assert max(b - a for a, b in zip(ticks, ticks[1:], strict=False)) < 0.5  # no thread was held


def test_a_stopped_search_ends_at_once(ctx, ws):
    (ws / "a.txt").write_text("a" * 30 + "!\n")
    threading.Timer(0.3, ctx.stop.set).start()
    started = time.monotonic()
    outcome = call("search_files", {"pattern": "(a+)+$"}, ctx)
    assert outcome.status == "error" and "stopped" in outcome.output
    assert time.monotonic() - started < 3


# patch


def test_patch_replaces_a_unique_match(ctx, ws):
    (ws / "f.py").write_text("a = 1\nb = 2\n")
    outcome = call("patch", {"path": "f.py", "old_string": "b = 2", "new_string": "b = 3"}, ctx)
    assert (outcome.status, outcome.output) == ("ok", "replaced 1 occurrence in f.py")
    assert (ws / "f.py").read_text() == "a = 1\nb = 3\n"


def test_patch_not_found_and_not_unique_are_clear_errors(ctx, ws):
    (ws / "f.py").write_text("x = 1\nx = 1\n")
    missing = call("patch", {"path": "f.py", "old_string": "y = 1", "new_string": "y = 2"}, ctx)
    assert missing.status == "error" and "not found" in missing.output
    twice = call("patch", {"path": "f.py", "old_string": "x = 1", "new_string": "x = 2"}, ctx)
    assert twice.status == "error" and "appears 2 times" in twice.output
    assert (ws / "f.py").read_text() == "x = 1\nx = 1\n"
    every = call(
        "patch", {"path": "f.py", "old_string": "x = 1", "new_string": "x = 2", "replace_all": True}, ctx
    )
    assert (every.status, every.output) == ("ok", "replaced 2 occurrences in f.py")
    assert (ws / "f.py").read_text() == "x = 2\nx = 2\n"


def test_patch_keeps_windows_line_endings(ctx, ws):
    (ws / "w.txt").write_bytes(b"one\r\ntwo\r\n")
    outcome = call("patch", {"path": "w.txt", "old_string": "one\r\ntwo", "new_string": "1\r\n2"}, ctx)
    assert outcome.status == "ok"
    assert (ws / "w.txt").read_bytes() == b"1\r\n2\r\n"


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"path": "f.txt", "old_string": "", "new_string": "x"}, "empty"),
        ({"path": "f.txt", "old_string": "abc", "new_string": "abc"}, "same"),
        ({"path": "nope.txt", "old_string": "a", "new_string": "b"}, "file not found"),
    ],
)
def test_patch_argument_errors(ctx, ws, arguments, message):
    (ws / "f.txt").write_text("abc\n")
    outcome = call("patch", arguments, ctx)
    assert outcome.status == "error" and message in outcome.output


def test_patch_result_over_the_write_cap_is_refused_and_file_untouched(tmp_path):
    context = make_tool_context(tmp_path / "home", write_file_bytes=20)
    path = files.workspace_root(context.settings) / "f.txt"
    path.write_text("short\n")
    outcome = call("patch", {"path": "f.txt", "old_string": "short", "new_string": "x" * 30}, context)
    assert outcome.status == "error" and "limit is 20 bytes" in outcome.output
    assert path.read_text() == "short\n"
    context.store.close()


def test_patch_non_utf8_file_is_an_error(ctx, ws):
    (ws / "latin.txt").write_bytes("caf\xe9".encode("latin-1"))
    outcome = call("patch", {"path": "latin.txt", "old_string": "caf", "new_string": "x"}, ctx)
    assert outcome.status == "error" and "UTF-8" in outcome.output
