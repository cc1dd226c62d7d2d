"""Prompt and generation speed of several llama-cpp-python builds side by side, in one run.

    .venv/bin/python scripts/bench/llama_builds.py \\
        --build portable=/work/builds/portable/site --build derived=/work/builds/derived/site \\
        --build native=/work/builds/native/site [--repeats 3] [--long 8192]
    .venv/bin/python scripts/bench/llama_builds.py --build lane=.venv/bin/python ...

A build is NAME=PATH: PATH is a directory holding `llama_cpp` (a `pip install --target` dir, put
first on PYTHONPATH) or a Python executable (a venv with its own llama-cpp-python). Each
measurement runs in its own subprocess, so a build that crashes (a native build did, with a general
protection fault on prompt batches >= 64 tokens) is recorded as a crash with its signal and the run
goes on. Repeats are interleaved (build A, B, C, A, B, C, ...) so that a change in the machine's
load hits every build alike; `uptime`'s load is printed with each sample.

Per sample: the model is loaded (not timed), a prompt of --prompt-tokens tokens (text of this
repository's README and docs, the same tokens for every build) is evaluated with the library's
defaults (n_batch 512, as the lane's engine uses), then --gen-tokens tokens are generated greedily
one at a time. With --long N, each build first evaluates one N-token prompt in a context of N + 256
(the crash check for long prompt batches). The table gives the best and the median of each build
and its share of the reference build's (--ref, default the last build given) best prompt speed.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEXT_FILES = ("README.md", "docs/measurements.md")


def _worker(model: str, prompt_tokens: int, gen_tokens: int, ctx: int, threads: int) -> None:
    """Runs inside the build's interpreter: load, evaluate, generate; prints one JSON line."""
    import llama_cpp
    from llama_cpp import Llama

    started = time.perf_counter()
    llm = Llama(model_path=model, n_ctx=ctx, n_threads=threads, n_threads_batch=threads, verbose=False)
    load_s = time.perf_counter() - started
    text = "\n".join((ROOT / name).read_text(encoding="utf-8") for name in TEXT_FILES)
    tokens = llm.tokenize(text.encode("utf-8"))
    while len(tokens) < prompt_tokens:
        tokens += tokens
    tokens = tokens[:prompt_tokens]
    started = time.perf_counter()
    llm.eval(tokens)
    prompt_s = time.perf_counter() - started
    generated = 0
    started = time.perf_counter()
    for _ in range(gen_tokens):
        token = llm.sample(temp=0.0)
        llm.eval([token])
        generated += 1
    gen_s = time.perf_counter() - started
    info = llama_cpp.llama_print_system_info().decode("utf-8", "replace")
    print(json.dumps({"load_s": load_s, "prompt_tokens": len(tokens), "prompt_s": prompt_s,
                      "gen_tokens": generated, "gen_s": gen_s, "system_info": info,
                      "library": llama_cpp.__file__}))


def _load() -> str:
    """`uptime`'s load averages (1, 5, 15 minutes)."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _command(path: str) -> tuple[list[str], dict[str, str]]:
    """The interpreter and environment that import this build's llama_cpp."""
    env = dict(os.environ, OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "PASSIVE"))
    if Path(path).is_dir():
        env["PYTHONPATH"] = os.pathsep.join([str(Path(path).resolve()), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        return [sys.executable], env
    return [path], env


def _sample(path: str, args: argparse.Namespace, prompt_tokens: int, gen_tokens: int, ctx: int) -> dict:
    """One subprocess; a crash, a timeout or an error becomes a record, never an exception."""
    python, env = _command(path)
    cmd = [*python, str(Path(__file__).resolve()), "--worker", "--model", args.model,
           "--prompt-tokens", str(prompt_tokens), "--gen-tokens", str(gen_tokens),
           "--ctx", str(ctx), "--threads", str(args.threads)]
    load = _load()
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {args.timeout} s", "load": load}
    except OSError as exc:
        return {"error": f"cannot start: {exc}", "load": load}
    if proc.returncode < 0:
        return {"error": f"crash ({signal.Signals(-proc.returncode).name})", "load": load,
                "stderr": proc.stderr[-400:]}
    if proc.returncode != 0:
        return {"error": f"exit {proc.returncode}", "load": load, "stderr": proc.stderr[-400:]}
    result: dict = json.loads(proc.stdout.strip().splitlines()[-1])
    result["load"] = load
    return result


def _rate(result: dict, kind: str) -> float | None:
    if "error" in result or not result[f"{kind}_s"]:
        return None
    return float(result[f"{kind}_tokens"] / result[f"{kind}_s"])


def _print_sample(name: str, label: str, result: dict) -> None:
    if "error" in result:
        tail = result.get("stderr", "").strip().splitlines()[-1:] or [""]
        print(f"  {name:<12} {label:<7} {result['error']}  load {result['load']}  {tail[0][:120]}", flush=True)
        return
    print(f"  {name:<12} {label:<7} prompt {result['prompt_tokens']:>5} tok {_rate(result, 'prompt'):7.1f} tok/s"
          f" · gen {_rate(result, 'gen'):5.1f} tok/s · load {result['load']}", flush=True)


def _isa(info: str) -> str:
    """The instruction sets the CPU backend reports as compiled in (AVX512 = 1, ...)."""
    parts = [p.split(" : ")[-1].strip() for p in info.replace("|", "\n").splitlines()]
    return " ".join(p.split(" = ")[0] for p in parts if p.endswith("= 1"))


def _summary(builds: dict[str, str], samples: dict[str, list[dict]], ref: str) -> None:
    best = {name: max((r for r in (_rate(s, "prompt") for s in samples[name]) if r), default=None)
            for name in builds}
    print(f"\n{'build':<12} {'ok':>5} {'prompt best':>11} {'median':>7} {'gen best':>8} {'median':>7} "
          f"{'prompt vs ' + ref:>16}  errors")
    for name in builds:
        prompt = [r for r in (_rate(s, "prompt") for s in samples[name]) if r]
        gen = [r for r in (_rate(s, "gen") for s in samples[name]) if r]
        errors = sorted({s["error"] for s in samples[name] if "error" in s})
        share = f"{best[name] / best[ref]:.1%}" if best[name] and best.get(ref) else "-"
        ok = f"{len(prompt)}/{len(samples[name])}"
        if prompt:
            print(f"{name:<12} {ok:>5} {max(prompt):11.1f} {statistics.median(prompt):7.1f} {max(gen):8.1f}"
                  f" {statistics.median(gen):7.1f} {share:>16}  {', '.join(errors)}")
        else:
            print(f"{name:<12} {ok:>5} {'-':>11} {'-':>7} {'-':>8} {'-':>7} {share:>16}  {', '.join(errors)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", action="append", default=[], metavar="NAME=PATH",
                        help="a --target dir holding llama_cpp, or a venv's python (repeat)")
    parser.add_argument("--model", default=str(ROOT / "models" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"))
    parser.add_argument("--prompt-tokens", type=int, default=1024)
    parser.add_argument("--gen-tokens", type=int, default=48)
    parser.add_argument("--ctx", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--long", type=int, default=8192, help="crash check: one prompt this long (0: none)")
    parser.add_argument("--timeout", type=int, default=900, help="seconds a sample may take")
    parser.add_argument("--ref", help="the build the others are compared with (default: the last)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker(args.model, args.prompt_tokens, args.gen_tokens, args.ctx, args.threads)
        return 0
    builds = dict(b.split("=", 1) for b in args.build)
    if not builds:
        parser.error("give at least one --build NAME=PATH")
    ref = args.ref or list(builds)[-1]
    print(f"model {Path(args.model).name} · threads {args.threads} · prompt {args.prompt_tokens} tok"
          f" · gen {args.gen_tokens} tok · repeats {args.repeats} · cpus {os.cpu_count()}"
          f" · {time.strftime('%Y-%m-%d %H:%M:%S')} · load {_load()}", flush=True)
    if args.long:
        print(f"long prompt ({args.long} tokens, n_ctx {args.long + 256}):", flush=True)
        for name, path in builds.items():
            _print_sample(name, "long", _sample(path, args, args.long, 8, args.long + 256))
    samples: dict[str, list[dict]] = {name: [] for name in builds}
    for repeat in range(args.repeats):
        print(f"repeat {repeat + 1}:", flush=True)
        for name, path in builds.items():
            result = _sample(path, args, args.prompt_tokens, args.gen_tokens, args.ctx)
            if repeat == 0 and "system_info" in result:
                print(f"  {name:<12} isa     {_isa(result['system_info'])} · {Path(result['library']).parent}")
            _print_sample(name, "sample", result)
            samples[name].append(result)
    if args.repeats:
        _summary(builds, samples, ref)
    print(f"load at the end {_load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
