"""The `lane` command. Each subcommand lives beside the code it drives, in a `commands` module with
`register(subparsers)`; heavy imports (llama.cpp, FastAPI) happen inside the handlers so that
`lane --help` stays instant."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

COMMAND_MODULES = (
    "stack.launch",
    "stack.llm.commands",
    "stack.api.commands",
    "stack.toolsearch.commands",
    "stack.agent.commands",
    "stack.check.commands",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lane", description="fallback-lane: a local agent endpoint for when the cloud fails"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
