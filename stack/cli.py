"""The `lane` command. Each subcommand lives beside the code it drives, in a `commands` module with
`register(subparsers)`; heavy imports (llama.cpp, FastAPI) happen inside the handlers so that
`lane --help` stays instant."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .config import Settings
    from .toolsearch.asking import Answer, ChatModel

COMMAND_MODULES = (
    "stack.launch",
    "stack.llm.commands",
    "stack.api.commands",
    "stack.toolsearch.commands",
    "stack.check.commands",
)
# Commands that ask a model but live below agent/, where the model client is: `lane` hands them
# a way to make one (toolsearch/asking.py says why).
MODEL_COMMAND_MODULES = ("stack.toolsearch.model_commands",)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lane", description="fallback-lane: a local agent endpoint for when the cloud fails"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    for module_name in MODEL_COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers, connect=connect_model)
    return parser


def connect_model(settings: Settings, api_key: str | None) -> ChatModel[Answer]:
    """The lane's model client for `settings.llm_url` (imported here, when a command runs, so
    that `lane --help` does not load httpx)."""
    from .agent.llm_client import LlmClient

    return LlmClient(settings.llm_url, model=settings.model, timeout_s=settings.llm_timeout_s,
                     api_key=api_key)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
