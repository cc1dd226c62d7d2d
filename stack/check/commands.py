"""`lane check`: the six-step check (what scripts/six_step_check.sh runs).

Exit status: 0 every step of every arm passed, 1 a step failed, 2 the lane or its store could not
be used (the reason on one line of stderr).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from datetime import datetime, timezone
from pathlib import Path

EXIT_PASSED, EXIT_FAILED, EXIT_UNREACHABLE = 0, 1, 2
CHECKS_FOLDER = "checks"
DEFAULT_TIMEOUT_S = 300.0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "check", help="the six-step check: drive the shim, judge every step from the store",
        description="Send the six chained prompts of DESIGN.md through the shim in one session and "
                    "decide from the session store, never from the model's words, whether each "
                    "tool really ran. Exit 0 all passed, 1 any failed, 2 lane or store unusable.")
    parser.add_argument("--url", default=None,
                        help="shim root, e.g. http://127.0.0.1:8642 (/v1 is added); "
                             "env LANE_SHIM_URL, else 127.0.0.1 on LANE_PORT")
    parser.add_argument("--db", type=Path, default=None,
                        help="the shim's session store; env LANE_DB, else $LANE_HOME/state.db")
    parser.add_argument("--key", default=None, help="bearer key of the shim; env LANE_API_KEY")
    parser.add_argument("--timeout", type=_positive_seconds, default=DEFAULT_TIMEOUT_S,
                        help=f"seconds each step may take (default {DEFAULT_TIMEOUT_S:g})")
    parser.add_argument("--json", type=Path, default=None, metavar="FILE",
                        help="also write every step's verdict and numbers as JSON to FILE")
    arms = parser.add_mutually_exclusive_group()
    arms.add_argument("--arm", choices=("a", "b"), default="b",
                      help="b: the lane as configured, tool search on (default); "
                           "a: every tool visible, tool search off")
    arms.add_argument("--arms", choices=("ab",), default=None,
                      help="run both arms against fresh sessions and print them side by side")
    parser.add_argument("--with-deferred", action="store_true",
                        help="add a seventh step that needs a tool reachable only through the bridge")
    parser.add_argument("--prompts", type=Path, default=None, metavar="FILE",
                        help="replace the default prompts: a JSON list or one prompt per line")
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from .client import LaneUnreachable, ShimClient
    from .evidence import StoreReader, StoreUnreadable
    from .report import arm_table, as_json, side_by_side
    from .runner import run_arm
    from .scenario import PromptsError, load_prompts, step_prompts

    # One line per request would bury the progress lines; the check reports its own failures.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        url, db, key = _targets(args)
        custom = load_prompts(args.prompts, with_deferred=args.with_deferred) if args.prompts else None
    except (PromptsError, ValueError) as exc:
        return _unusable(str(exc))
    prompts = step_prompts(custom, with_deferred=args.with_deferred)
    client = ShimClient(url, key=key, timeout_s=args.timeout)
    reader = None
    try:
        reader = StoreReader(db)
        client.check_health()
        results = [run_arm(client, reader, arm, prompts, progress=_progress)
                   for arm in (args.arms or args.arm)]
    except (LaneUnreachable, StoreUnreadable) as exc:
        return _unusable(str(exc))
    finally:
        client.close()
        if reader is not None:
            reader.close()

    print(side_by_side(*results) if len(results) == 2 else arm_table(results[0]))
    report = json.dumps(as_json(results), indent=2) + "\n"
    for target in filter(None, (args.json, saved_report_path(db))):
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(report, encoding="utf-8")
        except OSError as exc:
            print(f"lane check: cannot write {target}: {exc.strerror or exc}", file=sys.stderr)
    all_passed = all(r.passed == r.total for r in results)
    return EXIT_PASSED if all_passed else EXIT_FAILED


def saved_report_path(db: Path) -> Path:
    """Where every run's JSON report is kept, beside the store it judged: the trace page (/ui)
    shows the newest of `checks/*.json`, whose names sort by time."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d_%H%M%S_%f")
    return db.parent / CHECKS_FOLDER / f"{stamp}.json"


def _targets(args: argparse.Namespace) -> tuple[str, Path, str | None]:
    """--url/--db/--key, else LANE_SHIM_URL/LANE_DB, else the lane's settings (the key in use:
    LANE_API_KEY, else the one the shim stored in $LANE_HOME)."""
    from ..config import load_settings

    settings = load_settings()
    url = args.url or settings.shim_url or f"http://127.0.0.1:{settings.port}"
    return url, args.db or settings.db_path, args.key if args.key is not None else settings.key_in_use()


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("the timeout must be positive")
    return value


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _unusable(reason: str) -> int:
    print(f"lane check: {' '.join(reason.split())}", file=sys.stderr)
    return EXIT_UNREACHABLE
