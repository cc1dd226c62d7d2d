#!/usr/bin/env bash
# Installs llama-cpp-python from a wheel built and cached for THIS machine's CPU kind:
#   scripts/llama_wheel.sh .venv/bin/python
#
# Why: PyPI ships only the source, and a portable build (-DGGML_NATIVE=OFF: AVX2 at most) evaluates
# prompts 41 % slower than a native one on CPUs with AVX-512 (60.7 vs 85.8 tok/s measured here on
# Qwen2.5-Coder-1.5B, two cores; PLATFORM.md), and prompt evaluation is most of a small model's
# latency. But a native wheel dies with an illegal instruction on a CPU without those instructions,
# and pip caches built wheels by version only. So the wheel is built once with `--no-cache-dir` into
# ~/.cache/fallback-lane/wheels/<key>/, where the key hashes the pinned version, the CMake flags,
# the architecture and the CPU's flags from /proc/cpuinfo: another CPU gets its own build (about 5
# minutes), never this one. Installing a cached wheel takes seconds, and nothing is done when the
# environment already runs this key's wheel.
#
# CMAKE_ARGS overrides the flags. The default is still the portable build (-DGGML_NATIVE=OFF
# -DLLAVA_BUILD=OFF): measured 2026-11-26 on this project's machines (AMX-capable CPUs under a VM), a
# -DGGML_NATIVE=ON build of 0.3.36 dies with a general protection fault in libggml-cpu.so on any
# prompt batch of 64 tokens or more (SmolLM2 and Qwen2.5-Coder alike), most likely its AMX code.
# Opt in where a native build is verified: CMAKE_ARGS="-DGGML_NATIVE=ON -DLLAVA_BUILD=OFF"; the key
# keeps such a wheel to its own CPU kind.
set -euo pipefail
cd "$(dirname "$0")/.."
py="${1:?usage: scripts/llama_wheel.sh PYTHON}"

# The pin of the `llm` extra, so that the extra's install finds it already satisfied.
spec=$("$py" -c 'import tomllib
extra = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["llm"]
print(next(r for r in extra if r.lower().startswith("llama-cpp-python")))')
cmake="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF}"
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
