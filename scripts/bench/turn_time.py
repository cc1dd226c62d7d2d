"""Where a turn's time goes: each model call the lane made, by what it was for, from a lane's own
record (issue 53: "every model call is paid by a waiting user").

    .venv/bin/python scripts/bench/turn_time.py /tmp/lane-bench-XXXX      # a home `lane up` ran in

The llm service logs every chat completion it served (prompt, cached and completion tokens, seconds
evaluating the prompt, seconds in all); the store keeps every call the lane made with the same
token counts: a lane call under its purpose (decide, english, read, claimed, held, ...), a forced
call as the assistant message that holds its tool calls ("call"), an answer as the assistant
message the user got ("answer"). A log line is matched to the store row with the same three token
counts written nearest after it. The probes on the model's hidden state (/v1/embeddings; lane
calls whose path is "probe") are not in the service's log: counted, with the prompt tokens they
read, not timed. The benchmarks that start a lane (everyday.py, real_model.py, ...) print the home.
"""

from __future__ import annotations

import argparse
import re
import sqlite3
import sys
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

_LINE = re.compile(r"^(?P<at>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) INFO lane\.llm: \S+ .*?prompt=(?P<prompt>\d+) "
                   r"cached=(?P<cached>\d+) evaluated=\d+ completion=(?P<completion>\d+) .*?"
                   r"prompt_eval=(?P<prompt_s>[\d.]+)s gen=(?P<total_s>[\d.]+)s")


@dataclass(frozen=True)
class Served:
    """One chat completion the llm service logged."""
    at: datetime
    prompt: int
    cached: int
    completion: int
    prompt_s: float
    total_s: float


@dataclass(frozen=True)
class Made:
    """One model call the store holds, with what it was for."""
    at: datetime
    prompt: int
    cached: int
    completion: int
    purpose: str


def served(log: str) -> list[Served]:
    """The service's completions, in the order it finished them."""
    rows = []
    for line in log.splitlines():
        found = _LINE.match(line)
        if found:
            at = datetime.strptime(found["at"], "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=timezone.utc)
            rows.append(Served(at, int(found["prompt"]), int(found["cached"]), int(found["completion"]),
                               float(found["prompt_s"]), float(found["total_s"])))
    return rows


def made(db: sqlite3.Connection) -> tuple[list[Made], list[int]]:
    """The store's model calls (lane calls and assistant messages with token counts), and the
    prompt tokens of each probe."""
    rows = [Made(datetime.fromisoformat(at), prompt, cached or 0, completion or 0, purpose)
            for at, prompt, cached, completion, purpose in db.execute(
                "SELECT created_at, prompt_tokens, cached_tokens, completion_tokens, purpose FROM lane_calls "
                "WHERE prompt_tokens IS NOT NULL AND coalesce(path, '') != 'probe' "
                "UNION ALL SELECT created_at, prompt_tokens, cached_tokens, completion_tokens, "
                "CASE WHEN tool_calls IS NOT NULL AND tool_calls != '[]' THEN 'call' ELSE 'answer' END "
                "FROM messages WHERE role = 'assistant' AND prompt_tokens IS NOT NULL")]
    probes = [prompt for (prompt,) in db.execute(
        "SELECT prompt_tokens FROM lane_calls WHERE path = 'probe' AND prompt_tokens IS NOT NULL")]
    return sorted(rows, key=lambda r: r.at), probes


def attributed(log_rows: list[Served], store_rows: list[Made]) -> list[tuple[str, Served]]:
    """Each completion with the purpose of the store row of the same token counts written nearest
    after it ("?" where none is: a call whose reply the lane did not keep, or another client's)."""
    left = list(store_rows)
    out = []
    for row in log_rows:
        same = [m for m in left if (m.prompt, m.cached, m.completion) == (row.prompt, row.cached, row.completion)
                and (m.at - row.at).total_seconds() > -1.0]
        match = min(same, key=lambda m: abs((m.at - row.at).total_seconds()), default=None)
        if match is not None:
            left.remove(match)
        out.append((match.purpose if match else "?", row))
    return out


def table(pairs: list[tuple[str, Served]], probes: list[int]) -> str:
    by: dict[str, list[Served]] = defaultdict(list)
    for purpose, row in pairs:
        by[purpose].append(row)
    total = sum(row.total_s for _, row in pairs) or 1.0
    lines = [f"{'purpose':12} {'calls':>5} {'seconds':>8} {'share':>6} {'s/call':>6} {'evaluated/call':>14} "
             f"{'prompt s':>8} {'written/call':>12}"]
    for purpose, rows in sorted(by.items(), key=lambda kv: -sum(r.total_s for r in kv[1])):
        seconds = sum(r.total_s for r in rows)
        lines.append(f"{purpose:12} {len(rows):5d} {seconds:8.1f} {100 * seconds / total:5.1f}% "
                     f"{seconds / len(rows):6.2f} {sum(r.prompt - r.cached for r in rows) / len(rows):14.0f} "
                     f"{sum(r.prompt_s for r in rows):8.1f} {sum(r.completion for r in rows) / len(rows):12.1f}")
    lines.append(f"{'all':12} {len(pairs):5d} {total:8.1f}; prompt evaluation "
                 f"{sum(r.prompt_s for _, r in pairs):.1f} s; probes (not timed) {len(probes)}, "
                 f"{sum(probes)} prompt tokens")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("home", type=Path, help="the LANE_HOME a benchmark ran `lane up` in")
    args = parser.parse_args(argv)
    logs = sorted(args.home.glob("lane-up-*.log"))
    if not logs or not (args.home / "state.db").is_file():
        print(f"{args.home}: no lane-up-*.log or state.db", file=sys.stderr)
        return 2
    db = sqlite3.connect(f"file:{args.home / 'state.db'}?mode=ro", uri=True)
    store_rows, probes = made(db)
    pairs = attributed([row for log in logs for row in served(log.read_text(errors="replace"))], store_rows)
    print(table(pairs, probes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
