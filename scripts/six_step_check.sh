#!/usr/bin/env bash
# The six-step check: drives the shim with six chained prompts, then judges every step from the
# session store. A thin wrapper around `lane check` (options: lane check --help); exit 0 all
# passed, 1 a step failed, 2 the lane or its store could not be used.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ -x "$root/.venv/bin/lane" ]; then
  exec "$root/.venv/bin/lane" check "$@"
fi
exec lane check "$@"
