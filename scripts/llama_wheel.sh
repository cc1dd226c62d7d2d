#!/usr/bin/env bash
# Installs llama-cpp-python from a wheel built and cached for THIS machine's CPU kind:
#   scripts/llama_wheel.sh .venv/bin/python
#
# Why: PyPI ships only the source, and a portable build (-DGGML_NATIVE=OFF: AVX2 at most) evaluates
# prompts at about two thirds the speed of one with AVX-512 on CPUs that have it (docs/measurements.md,
# "Platform: llama.cpp builds"), and prompt evaluation is most of a small model's latency. But such
# a wheel dies with an illegal instruction on a CPU without those instructions, and pip caches built
# wheels by version only. So the wheel is built once with `--no-cache-dir` into
# ~/.cache/fallback-lane/wheels/<key>/, where the key hashes the pinned version, the CMake flags,
# the architecture and the CPU's flags from /proc/cpuinfo: another CPU gets its own build (about 5
# minutes), never this one. Installing a cached wheel takes seconds, and nothing is done when the
# environment already runs this key's wheel.
#
# The default flags are this CPU's instruction sets, each named (scripts/llama_cpu_flags.sh:
# GGML_NATIVE=OFF, AVX/AVX2/AVX-512/VNNI/BF16... as /proc/cpuinfo has them, AMX off). Not
# -DGGML_NATIVE=ON: on this project's AMX-capable machines (CPUs under a VM) a native build of
# 0.3.36 dies with a general protection fault in libggml-cpu.so on prompt batches of 64 tokens or
# more (SIGILL on 2026-11-28); -march=native turns AMX on, the named flags leave it off at the
# prompt speed of a native build without AMX (measured: scripts/bench/llama_builds.py).
# CMAKE_ARGS overrides: CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF" is the portable build
# (AVX2 at most, what the Docker image uses), "-DGGML_NATIVE=ON -DLLAVA_BUILD=OFF" the native one.
set -euo pipefail
cd "$(dirname "$0")/.."
py="${1:?usage: scripts/llama_wheel.sh PYTHON}"

# The pin of the `llm` extra, so that the extra's install finds it already satisfied.
spec=$("$py" -c 'import tomllib
extra = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["llm"]
print(next(r for r in extra if r.lower().startswith("llama-cpp-python")))')
cmake="${CMAKE_ARGS:-$(bash scripts/llama_cpu_flags.sh)}"
flags=$( (grep -m1 -E '^(flags|Features)' /proc/cpuinfo 2>/dev/null || true) | cut -d: -f2 | tr ' ' '\n' | sort -u | tr '\n' ' ')
key=$(printf '%s\n' "$spec" "$cmake" "$(uname -m)" "$flags" | sha256sum | cut -c1-16)
dir="${XDG_CACHE_HOME:-$HOME/.cache}/fallback-lane/wheels/$key"

if ! compgen -G "$dir/llama_cpp_python-*.whl" >/dev/null; then
  echo "llama_wheel: building $spec for this CPU ($cmake; about 5 minutes, once per CPU kind)" >&2
  "$py" -m pip install --quiet --upgrade pip
  partial="$dir.partial.$$"
  rm -rf "$partial" && mkdir -p "$partial"
  CMAKE_ARGS="$cmake" "$py" -m pip wheel --quiet --no-cache-dir --no-deps --wheel-dir "$partial" "$spec"
  printf 'spec: %s\ncmake: %s\narch: %s\ncpu flags: %s\n' "$spec" "$cmake" "$(uname -m)" "$flags" > "$partial/KEY.txt"
  mkdir -p "$(dirname "$dir")"
  mv -T "$partial" "$dir" 2>/dev/null || rm -rf "$partial"  # another install may have won the race
fi
wheel=$(compgen -G "$dir/llama_cpp_python-*.whl" | head -n1)

# pip records where a package came from: reinstall only when it is not this key's wheel.
installed=$("$py" -c 'import importlib.metadata as m
try:
    print(m.distribution("llama-cpp-python").read_text("direct_url.json") or "")
except m.PackageNotFoundError:
    print("")' 2>/dev/null || true)
if [[ "$installed" != *"$dir/"* ]]; then
  "$py" -m pip install --quiet --no-deps --force-reinstall "$wheel"
fi
