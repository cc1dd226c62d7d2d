"""`lane examples`: ask a model now for the example requests tool search reads.

The shim writes example requests itself while it is idle, with the lane's own model; `lane
examples` does the same work at once, for the configured lane's deferred tools or a catalog file,
and with whichever model `--llm-url` names, such as a cloud model while it still answers, whose
requests are better than a small local model's.

It lives beside the tool search whose files it writes, not with the agent: what it needs of the
agent's side is a model client, and tool search may not import agent/ (asking.py says why). `lane`
(cli.py), which sits above every layer, hands it a `connect` that makes one.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Awaitable, Callable, Sequence, TypeVar

if TYPE_CHECKING:
    from ..config import Settings
    from .asking import Answer, ChatModel
    from .examples import ExampleBook, RequestStyle
    from .retrieval import ToolDoc

Item = TypeVar("Item")
# Makes the client of the model to ask: (settings with the command's --llm-url and --model, the
# bearer key --key-env names) -> client.
Connect = Callable[["Settings", "str | None"], "ChatModel[Answer]"]


def register(subparsers: argparse._SubParsersAction, *, connect: Connect) -> None:
    parser = subparsers.add_parser(
        "examples", help="write example requests for tool search now",
        description="Ask a model for example requests of every tool that has none yet, and keep "
                    "them where tool search reads them.")
    parser.add_argument("--catalog", type=Path,
                        help="tools from this JSON file (OpenAI list or MCP tools/list) instead "
                             "of the configured lane's deferred tools")
    parser.add_argument("--book", type=Path,
                        help="where the examples are kept (default $LANE_HOME/tool_examples.json)")
    _model_options(parser)
    parser.add_argument("--limit", type=int, help="ask about at most this many tools")
    parser.add_argument("--again", action="store_true",
                        help="ask about tools that have examples too, replacing them (say, with "
                             "a better model than the one that wrote them)")
    parser.set_defaults(func=partial(run, connect=connect))


def _model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--llm-url", help="OpenAI-compatible base URL (default LANE_LLM_URL)")
    parser.add_argument("--model", help="model name to ask for (default: what the service lists)")
    parser.add_argument("--key-env", metavar="VAR",
                        help="environment variable holding a bearer key for --llm-url (a cloud "
                             "model's API key stays off the command line)")


def _model_settings(args: argparse.Namespace) -> tuple[Settings, str | None]:
    """The settings with the command's model options, and the bearer key `--key-env` names."""
    from ..config import load_settings

    settings = load_settings().with_overrides(llm_url=args.llm_url, model=args.model)
    key = os.environ.get(args.key_env) if args.key_env else None
    if args.key_env and not key:
        raise ValueError(f"--key-env: the environment has no {args.key_env}")
    return settings, key


def run(args: argparse.Namespace, *, connect: Connect) -> int:
    from ..config import ConfigError
    from .catalog import example_book
    from .commands import lane_docs, load_catalog_file
    from .examples import STYLES

    try:
        settings, key = _model_settings(args)
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
    return asyncio.run(_write_all(book, todo, connect(settings, key)))


async def _write_all(book: ExampleBook, todo: list[tuple[ToolDoc, RequestStyle]],
                     llm: ChatModel[Answer]) -> int:
    from .examples_writer import write_examples

    async def ask(item: tuple[ToolDoc, RequestStyle]) -> str:
        doc, style = item
        requests = await write_examples(book, llm, doc, style)
        return f"{doc.name} ({style.name}): {' | '.join(requests)}"

    return await _ask_each("examples", llm, todo, ask)


async def _ask_each(command: str, llm: ChatModel[Answer], todo: Sequence[Item],
                    ask: Callable[[Item], Awaitable[str]]) -> int:
    """Asks about each item in turn, printing one numbered line per answer; a model that fails
    ends the run with its error (what was written before stays written)."""
    from .asking import ModelFailed

    try:
        for number, item in enumerate(todo, 1):
            print(f"[{number}/{len(todo)}] {await ask(item)}")
    except ModelFailed as exc:
        print(f"lane {command}: {exc}", file=sys.stderr)
        return 2
    finally:
        await llm.aclose()
    return 0
