"""`lane search`: tool search from the shell, over a catalog file or the configured lane.

Single query: one line per hit (score and name). Batch: `--queries FILE.jsonl --json` reads
`{"id","query"}` lines and prints `{"id","ranked","scores"}` per line, which is what the
retrieval bench and anyone's own evaluation consume.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from .examples import ExampleBook
from .retrieval import ToolDoc

if TYPE_CHECKING:
    from ..config import Settings


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "search", help="search tools the way tool_search does",
        description="Rank tools for a query. Without --catalog, the configured lane's deferred "
                    "tools (MCP servers included) are searched.")
    parser.add_argument("query", nargs="?", help="what the tool should do")
    parser.add_argument("--catalog", type=Path,
                        help="JSON: a list of OpenAI tool definitions or an MCP tools/list result")
    parser.add_argument("--limit", type=int, default=5, help="hits per query (default 5)")
    parser.add_argument("--queries", type=Path, help='JSONL file of {"id", "query"} lines')
    parser.add_argument("--json", action="store_true", help="print JSON lines")
    parser.add_argument("--examples", type=Path,
                        help="with --catalog: example requests kept by `lane examples --book`")
    parser.add_argument("--method", choices=("bm25", "embed", "hybrid"), default=None,
                        help="retrieval method (default: hybrid when the embedder is installed)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if (args.query is None) == (args.queries is None):
        print("lane search: give a query or --queries FILE.jsonl (not both)", file=sys.stderr)
        return 2
    if args.limit < 1:
        print("lane search: --limit must be at least 1", file=sys.stderr)
        return 2
    try:
        queries = list(read_queries(args.queries)) if args.queries else [(None, args.query)]
        if args.catalog:
            docs = load_catalog_file(args.catalog)
            if args.examples:
                docs = ExampleBook(args.examples).with_examples(docs)
            return _search(docs, queries, args)
        return _search_lane(queries, args)
    except (OSError, ValueError) as exc:
        print(f"lane search: {exc}", file=sys.stderr)
        return 2


def load_catalog_file(path: Path) -> list[ToolDoc]:
    """Tool definitions from a file: an OpenAI list, `{"tools": [...]}` (MCP tools/list result,
    bare or inside a JSON-RPC `result`)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not JSON: {exc.msg} at line {exc.lineno}") from None
    if isinstance(data, dict):
        data = data.get("result", data)
        data = data.get("tools") if isinstance(data, dict) else None
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a list of tools or an MCP tools/list result")
    try:
        return [ToolDoc.from_definition(item) for item in data]
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


def read_queries(path: Path) -> Iterator[tuple[Any, str]]:
    """(id, query) of each `{"id", "query"}` line of a JSONL file (the line number when no id)."""
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError:
                raise ValueError(f"{path}:{number}: not a JSON line") from None
            if not isinstance(item, dict) or not isinstance(item.get("query"), str):
                raise ValueError(f'{path}:{number}: expected {{"id", "query"}}')
            yield item.get("id", number), item["query"]


def lane_docs(settings: Settings) -> list[ToolDoc]:
    """The configured lane's deferred tools with their example requests (its MCP servers are
    started for this and stopped after)."""
    from ..tools.mcp_tools import open_lane_registry
    from .catalog import build_catalog

    with open_lane_registry(settings) as registry:
        _, catalog = build_catalog(registry, settings)
        return catalog.docs()


def _search_lane(queries: list[tuple[Any, str]], args: argparse.Namespace) -> int:
    from ..config import load_settings

    docs = lane_docs(load_settings())
    if not docs:
        print("lane search: the lane has no deferred tools (all are core, or none are granted)",
              file=sys.stderr)
    return _search(docs, queries, args)


def _search(docs: list[ToolDoc], queries: list[tuple[Any, str]], args: argparse.Namespace) -> int:
    from .catalog import installed_method
    from .retrieval import Method, ToolIndex

    method: Method = args.method or installed_method()
    index = ToolIndex(docs, method=method)
    for query_id, query in queries:
        hits = index.search(query, args.limit)
        if args.json:
            print(json.dumps({"id": query_id, "ranked": [h.name for h in hits],
                              "scores": [round(h.score, 6) for h in hits]}, ensure_ascii=False))
        else:
            for hit in hits:
                print(f"{hit.score:8.4f}  {hit.name}")
            if not hits:
                print(f"no tool matches {query!r}; closest: {', '.join(index.closest(query, 3))}")
    return 0
