"""`lane examples`, `lane restate` and `lane judge`: ask a model now for what tool search reads.

The shim writes example requests itself while it is idle, with the lane's own model; `lane
examples` does the same work at once, for the configured lane's deferred tools or a catalog file,
and with whichever model `--llm-url` names, such as a cloud model while it still answers, whose
requests are better than a small local model's. The agent restates each request at the start of a
turn; `lane restate` asks the same question for a file of queries, so that `lane search
--restatements` ranks them as the lane would (an evaluation on one's own queries). Then it judges
the best hits; `lane judge` does that for a file of queries over a catalog, for `lane search
--judgements`.

They live beside the tool search whose files they write, not with the agent: what they need of the
agent's side is a model client, and tool search may not import agent/ (asking.py says why). `lane`
(cli.py), which sits above every layer, hands them a `connect` that makes one.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Awaitable, Callable, Collection, Sequence, TypeVar

from .judge import JUDGE_CANDIDATES

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
    _register_restate(subparsers, connect)
    _register_judge(subparsers, connect)
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


def _register_restate(subparsers: argparse._SubParsersAction, connect: Connect) -> None:
    parser = subparsers.add_parser(
        "restate", help="write the model's restatements of queries for lane search",
        description="Ask a model to restate each query of a JSONL file as the agent does at the "
                    "start of a turn, and keep the task lines in a JSON file that `lane search "
                    "--restatements` reads. Queries already in the file are not asked again.")
    _query_file_options(parser, '{"query": ["task line", ...]}')
    parser.set_defaults(func=partial(run_restate, connect=connect))


def _query_file_options(parser: argparse.ArgumentParser, written: str) -> None:
    """What a command that asks the model about each query of a file takes."""
    parser.add_argument("--queries", type=Path, required=True,
                        help='JSONL file of {"id", "query"} lines')
    parser.add_argument("--out", type=Path, required=True, help=f"JSON {written}, read first and kept")
    _model_options(parser)
    parser.add_argument("--again", action="store_true", help="ask about every query again")


def run_restate(args: argparse.Namespace, *, connect: Connect) -> int:
    from ..config import ConfigError
    from .commands import query_texts, read_restatements

    try:
        written = read_restatements(args.out) if args.out.exists() else {}
        queries = query_texts(args.queries)
        settings, key = _model_settings(args)
    except (ConfigError, OSError, ValueError) as exc:
        print(f"lane restate: {exc}", file=sys.stderr)
        return 2
    todo = _still_to_ask(queries, written, args.again, "restated")
    return asyncio.run(_restate_all(todo, written, args.out, connect(settings, key)))


def _still_to_ask(queries: Sequence[str], written: Collection[str], again: bool, done: str) -> list[str]:
    """The queries to ask about (those not in the file yet, or all `again`), said on stderr."""
    todo = [q for q in queries if again or q not in written]
    print(f"{len(queries) - len(todo)} of {len(queries)} queries {done} already; asking about "
          f"{len(todo)}", file=sys.stderr)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    return todo


async def _restate_all(todo: list[str], written: dict[str, tuple[str, ...]], out: Path,
                       llm: ChatModel[Answer]) -> int:
    """Asks about each query in turn; the file is rewritten after each answer (whole, then
    renamed), so an interrupted run keeps what it was told."""
    from .commands import write_restatements
    from .restate import ask_restatement, parse_restatement

    async def ask(query: str) -> str:
        written[query] = parse_restatement((await ask_restatement(llm, query)).content)
        write_restatements(out, written)
        return f"{query[:60]} -> {' | '.join(written[query])}"

    return await _ask_each("restate", llm, todo, ask)



def _register_judge(subparsers: argparse._SubParsersAction, connect: Connect) -> None:
    parser = subparsers.add_parser(
        "judge", help="write the model's judgements of each query's best hits for lane search",
        description="Search a catalog for each query of a JSONL file, ask a model of each of the "
                    "best hits whether it does what the query asks, as the agent does at the start "
                    "of a turn, and keep the yes-probabilities in a JSON file that `lane search "
                    "--judgements` reads. Queries already in the file are not asked again.")
    parser.add_argument("--catalog", type=Path, required=True,
                        help="JSON: a list of OpenAI tool definitions or an MCP tools/list result")
    parser.add_argument("--examples", type=Path, help="example requests kept by `lane examples --book`")
    parser.add_argument("--restatements", type=Path,
                        help="search each query with its restatement (`lane restate` writes it)")
    parser.add_argument("--candidates", type=int, default=JUDGE_CANDIDATES,
                        help=f"how many of each query's best hits to judge (default {JUDGE_CANDIDATES}, "
                             "as the agent does)")
    _query_file_options(parser, '{"query": {"tool": yes-probability, ...}}')
    parser.set_defaults(func=partial(run_judge, connect=connect))


def run_judge(args: argparse.Namespace, *, connect: Connect) -> int:
    from ..config import ConfigError
    from .catalog import catalog_of, installed_method
    from .commands import load_catalog_file, query_texts, read_judgements, read_restatements
    from .examples import ExampleBook
    from .judge import judged_hits

    if args.candidates < 1:
        print("lane judge: --candidates must be at least 1", file=sys.stderr)
        return 2
    try:
        written = read_judgements(args.out) if args.out.exists() else {}
        queries = query_texts(args.queries)
        restated = read_restatements(args.restatements) if args.restatements else {}
        catalog = catalog_of(load_catalog_file(args.catalog), installed_method(),
                             examples=ExampleBook(args.examples) if args.examples else None)
        settings, key = _model_settings(args)
    except (ConfigError, OSError, ValueError) as exc:
        print(f"lane judge: {exc}", file=sys.stderr)
        return 2
    todo = _still_to_ask(queries, written, args.again, "judged")
    catalog.vectors_ready()  # the agent judges the hybrid's hits; BM25 answers only while they build

    def candidates(query: str) -> list[tuple[str, str]]:
        return [(hit.name, catalog.tools[hit.name].description)
                for hit in judged_hits(catalog, query, restated.get(query, ()), args.candidates)]

    return asyncio.run(_judge_all(todo, candidates, written, args.out, connect(settings, key)))


async def _judge_all(todo: list[str], candidates: Callable[[str], list[tuple[str, str]]],
                     written: dict[str, dict[str, float]], out: Path, llm: ChatModel[Answer]) -> int:
    """Asks about each query's best hits in turn; the file is rewritten after each query."""
    from .commands import write_judgements
    from .judge import judge_each, judgement

    async def ask(query: str) -> str:
        answers: list[tuple[str, Answer]] = []
        await judge_each(llm, query, candidates(query), answers)
        judged = {name: judgement(reply) for name, reply in answers}
        written[query] = {name: yes for name, yes in judged.items() if yes is not None}
        write_judgements(out, written)
        best = max(written[query], key=written[query].__getitem__, default="nothing")
        return f"{query[:60]} -> {best} ({len(written[query])} of {len(answers)} judged)"

    return await _ask_each("judge", llm, todo, ask)
