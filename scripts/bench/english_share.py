"""Which messages the lane has its model write in English for the tool index (agent/english.py):
each message's share of the index's English filler words, on the everyday and six-step files.

    .venv/bin/python scripts/bench/english_share.py            # the messages near the threshold
    .venv/bin/python scripts/bench/english_share.py --all

No model runs: the table shows where english.FILLER_SHARE falls among messages whose language
the files' session ids and voices name (read them; nothing here guesses a language).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from stack.agent.english import FILLER_SHARE, KNOWN_SHARE, MIN_WORDS, filler_share, known_share, needs_rendering  # noqa: E402,E501

DATA = ROOT / "scripts" / "bench" / "data"


def messages() -> list[tuple[str, str]]:
    """(where, message) for every user message of the everyday and six-step files."""
    found = []
    for path in sorted(DATA.glob("everyday_*.json")):
        for session in json.loads(path.read_text(encoding="utf-8"))["sessions"]:
            for turn in session["turns"]:
                said = turn.get("user") or turn.get("say") or ""
                found.append((f"{path.stem}/{session.get('id')}/{session.get('voice', '')}", said))
    for path in sorted(DATA.glob("six_steps_*.json")):
        found += [(path.stem, said) for said in json.loads(path.read_text(encoding="utf-8"))]
    # the six steps' placeholders are filled with codes before they are sent ("MERIDIAN-3179")
    return [(where, re.sub(r"\{[A-Z_]+\}", "X-1", said)) for where, said in found if said]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="every message, not only those near the threshold")
    args = parser.parse_args()
    rows = sorted((*filler_share(said), where, said) for where, said in messages())
    for share, words, where, said in rows:
        if args.all or share < FILLER_SHARE + 0.1:
            mark = "rendered" if needs_rendering(said) else ""
            print(f"{share:.2f} {known_share(said):.2f} {words:3d} {mark:8s} {where[:44]:44s} {said[:64]}")
    rendered = sum(needs_rendering(said) for *_, said in rows)
    print(f"\n{len(rows)} messages; {rendered} rendered (filler words under {FILLER_SHARE}, English words "
          f"under {KNOWN_SHARE}, at least {MIN_WORDS} words)")


if __name__ == "__main__":
    main()
