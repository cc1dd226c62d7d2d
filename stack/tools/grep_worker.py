"""The matcher of search_files, run as a process of its own (`python -I -S grep_worker.py`).

Python's `re` backtracks: a pattern such as `(a+)+$` takes time exponential in a line's length,
holds the GIL throughout and cannot be interrupted in a thread, so one model-written pattern would
freeze the whole shim. Here it runs in a child process that search_files kills at its time limit.
Standard library only, and nothing of the lane imported: the child starts in milliseconds.

Reads one JSON job on stdin: {"pattern", "files": [[shown, path], ...], "max_results",
"line_chars"}; writes one JSON line [shown, line number, line] per match, at most max_results + 1
(one more than wanted says that there were more).
"""

from __future__ import annotations

import json
import re
import sys


def main() -> None:
    job = json.load(sys.stdin)
    matcher = re.compile(job["pattern"], re.IGNORECASE)
    found, most, width = 0, int(job["max_results"]) + 1, int(job["line_chars"])
    for shown, path in job["files"]:
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                for number, line in enumerate(handle, start=1):
                    if matcher.search(line):
                        print(json.dumps([shown, number, line.rstrip("\r\n")[:width]]), flush=True)
                        found += 1
                        if found >= most:
                            return
        except OSError:
            continue


if __name__ == "__main__":
    main()
