"""`lane llm`: serve one GGUF model over the OpenAI API with a hard cap and cancellation."""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

from stack.config import ConfigError, Settings, load_settings

log = logging.getLogger("lane.llm")

DEFAULT_PORT = 8081
# One context size for `lane llm`, `lane up`, compose and scripts/up.sh (LANE_CONTEXT_TOKENS too).
DEFAULT_CTX = 16384
# On SIGTERM, requests still generating get this long before they are cancelled.
SHUTDOWN_GRACE_S = 3
# Under the lane's home: the warmed prefixes' KV states (stack/llm/prefix_store.py).
STATE_FOLDER = "llm-state"


def register(subparsers: argparse._SubParsersAction) -> None:
    try:
        settings = load_settings()
    except ConfigError:  # reported by the command that runs, not while building the parser
        settings = Settings()
    parser = subparsers.add_parser(
        "llm",
        help="the llm service alone (llama.cpp, capped and cancellable)",
        description="Serve a GGUF model on an OpenAI-compatible API. Without --model (or LANE_LLM_MODEL) "
        "it serves the default model, models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf (scripts/fetch_model.sh "
        "fetches it), else the embedded SmolLM2-135M, which proves the plumbing, not tool use.",
    )
    parser.add_argument("--model", default=settings.llm_model,
                        help="path of a GGUF file (env LANE_LLM_MODEL; default: the default model in models/, "
                        "else the embedded SmolLM2-135M)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    parser.add_argument("--ctx", type=_positive, default=DEFAULT_CTX,
                        help=f"context window in tokens (default {DEFAULT_CTX})")
    parser.add_argument("--threads", type=_positive, default=os.cpu_count() or 1,
                        help="CPU threads for generation and prompt evaluation (default: all cores)")
    parser.add_argument("--max-tokens", dest="max_tokens", type=_positive, default=settings.max_tokens,
                        help=f"hard cap on generated tokens per request (env LANE_MAX_TOKENS; "
                        f"default {Settings.max_tokens})")
    parser.add_argument("--cache-mb", dest="cache_mb", type=_non_negative, default=settings.llm_cache_mb,
                        help="RAM for the KV state of recent prompts, so alternating conversations stay "
                        f"cached; 0 turns it off (env LANE_LLM_CACHE_MB; default {Settings.llm_cache_mb})")
    parser.add_argument("--state-dir", dest="state_dir", default=str(settings.home / STATE_FOLDER), metavar="DIR",
                        help="folder for the saved KV state of warmed prompt prefixes, so that a restart "
                        "restores them instead of evaluating them again; '' turns it off "
                        f"(default $LANE_HOME/{STATE_FOLDER})")
    parser.add_argument("--chat-format", dest="chat_format", default=None, metavar="FILE",
                        help="a Jinja chat template file to use instead of the GGUF's own template")
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    import uvicorn

    from stack.llm.app import create_app
    from stack.llm.engine import Engine
    from stack.llm.model import ModelNotFound, resolve_model

    try:
        model_path = resolve_model(args.model)
        template = Path(args.chat_format).read_text() if args.chat_format else None
    except (ModelNotFound, OSError) as exc:
        log.error("%s", exc)
        return 2
    engine = Engine(model_path, n_ctx=args.ctx, n_threads=args.threads, cap=args.max_tokens,
                    chat_template=template, cache_bytes=args.cache_mb * 1024 * 1024,
                    state_dir=Path(args.state_dir) if args.state_dir else None)

    def stop_on_load_failure() -> None:
        server.should_exit = True

    app = create_app(engine, model_id=model_path.stem, on_load_failure=stop_on_load_failure)
    config = uvicorn.Config(
        app, host=args.host, port=args.port, access_log=False, log_config=None,
        timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
    )
    server = uvicorn.Server(config)
    log.info("lane llm on http://%s:%d/v1 serving %s", args.host, args.port, model_path)
    server.run()
    return 1 if engine.load_error else 0


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is negative")
    return value


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number")
    return value

