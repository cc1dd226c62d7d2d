"""`lane examples`: write example requests for tools now, with any OpenAI-compatible model.

The shim writes them itself while it is idle, with the lane's own model. This command does the
same work at once: for the configured lane's deferred tools, or for a catalog file, and with
whichever model `--llm-url` names, such as a cloud model while it still answers, whose requests
are better than a small local model's.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..toolsearch.examples import ExampleBook, RequestStyle
    from ..toolsearch.retrieval import ToolDoc
    from .llm_client import LlmClient


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "examples", help="write example requests for tool search now",
        description="Ask a model for example requests of every tool that has none yet, and keep "
                    "them where tool search reads them.")
    parser.add_argument("--catalog", type=Path,
                        help="tools from this JSON file (OpenAI list or MCP tools/list) instead "
                             "of the configured lane's deferred tools")
    parser.add_argument("--book", type=Path,
                        help="where the examples are kept (default $LANE_HOME/tool_examples.json)")
    parser.add_argument("--llm-url", help="OpenAI-compatible base URL (default LANE_LLM_URL)")
    parser.add_argument("--model", help="model name to ask for (default: what the service lists)")
    parser.add_argument("--key-env", metavar="VAR",
                        help="environment variable holding a bearer key for --llm-url (a cloud "
                             "model's API key stays off the command line)")
    parser.add_argument("--limit", type=int, help="ask about at most this many tools")
    parser.add_argument("--again", action="store_true",
                        help="ask about tools that have examples too, replacing them (say, with "
                             "a better model than the one that wrote them)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..config import ConfigError, load_settings
    from ..toolsearch.catalog import example_book
    from ..toolsearch.commands import lane_docs, load_catalog_file
    from ..toolsearch.examples import STYLES
    from .llm_client import LlmClient

    try:
        settings = load_settings().with_overrides(llm_url=args.llm_url, model=args.model)
        key = os.environ.get(args.key_env) if args.key_env else None
        if args.key_env and not key:
            raise ValueError(f"--key-env: the environment has no {args.key_env}")
        docs = load_catalog_file(args.catalog) if args.catalog else lane_docs(settings)
    except (ConfigError, OSError, ValueError) as exc:
        print(f"lane examples: {exc}", file=sys.stderr)
        return 2
    book = example_book(args.book or settings.examples_path)
    missing = book.missing(docs)
    todo = ([(doc, style) for style in STYLES for doc in docs] if args.again else missing)
    todo = todo[: args.limit]
    complete = len(docs) - len({doc.name for doc, _ in missing})
    print(f"{complete} of {len(docs)} tools have all their examples; "
          f"asking {settings.llm_url} {len(todo)} times", file=sys.stderr)
    for chatty in ("httpx", "lane.examples"):  # each tool is one printed line already
        logging.getLogger(chatty).setLevel(logging.WARNING)
    llm = LlmClient(settings.llm_url, model=settings.model, timeout_s=settings.llm_timeout_s,
                    api_key=key)
    return asyncio.run(_write_all(book, todo, llm))


async def _write_all(book: ExampleBook, todo: list[tuple[ToolDoc, RequestStyle]],
                     llm: LlmClient) -> int:
    from .examples_writer import write_examples
    from .llm_client import LlmError

    try:
        for number, (doc, style) in enumerate(todo, 1):
            requests = await write_examples(book, llm, doc, style)
            print(f"[{number}/{len(todo)}] {doc.name} ({style.name}): {' | '.join(requests)}")
    except LlmError as exc:
        print(f"lane examples: {exc}", file=sys.stderr)
        return 2
    finally:
        await llm.aclose()
    return 0
