"""scripts/bench modules (scripts/ is not a package), loaded for the tests that check them."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Iterator

BENCH = Path(__file__).resolve().parents[1] / "scripts" / "bench"


@contextlib.contextmanager
def bench_script(name: str) -> Iterator[ModuleType]:
    """scripts/bench/NAME.py as a module for the block: registered in sys.modules (dataclasses look
    their module up while being built), with its folder importable (benchmarks import their
    neighbours, e.g. lane_run)."""
    module_name = f"bench_{name}"
    spec = importlib.util.spec_from_file_location(module_name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    sys.path.insert(0, str(BENCH))
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(module_name, None)
        sys.path.remove(str(BENCH))
