"""The CPU flags llama.cpp is built with (scripts/llama_cpu_flags.sh) and how scripts/bench/llama_builds.py
records a build's samples: a crash is a result, not the end of the run."""

from __future__ import annotations

import json
import subprocess
from argparse import Namespace
from pathlib import Path

import pytest

from tests.bench_scripts import bench_script

FLAGS_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "llama_cpu_flags.sh"
# /proc/cpuinfo flags (abridged) of this project's machines: a Sapphire Rapids-class CPU with AMX.
AMX_CPU = ("fpu sse4_2 avx avx2 bmi2 fma f16c avx_vnni avx512f avx512dq avx512cd avx512bw avx512vl "
           "avx512ifma avx512vbmi avx512_vnni avx512_bf16 avx512_fp16 amx_tile amx_int8 amx_bf16")
AVX2_CPU = "fpu sse4_2 avx avx2 bmi2 fma f16c"


def cmake_flags(cpu: str) -> dict[str, str]:
    out = subprocess.run(["bash", str(FLAGS_SCRIPT), *cpu.split()], capture_output=True, text=True, check=True)
    pairs = (arg.removeprefix("-D").split("=", 1) for arg in out.stdout.split())
    return {name: value for name, value in pairs}


def test_an_amx_cpu_gets_its_avx512_sets_named_and_amx_left_off():
    flags = cmake_flags(AMX_CPU)
    assert flags["GGML_NATIVE"] == "OFF"
    for name in ("GGML_AVX2", "GGML_FMA", "GGML_F16C", "GGML_BMI2", "GGML_AVX_VNNI", "GGML_AVX512",
                 "GGML_AVX512_VBMI", "GGML_AVX512_VNNI", "GGML_AVX512_BF16"):
        assert flags[name] == "ON", name
    assert flags["GGML_AMX_TILE"] == flags["GGML_AMX_INT8"] == flags["GGML_AMX_BF16"] == "OFF"


def test_an_avx2_cpu_gets_no_avx512_and_every_option_is_named():
    flags = cmake_flags(AVX2_CPU)
    assert flags["GGML_AVX2"] == "ON"
    assert flags["GGML_AVX512"] == flags["GGML_AVX_VNNI"] == flags["GGML_AVX512_VNNI"] == "OFF"
    assert set(flags) == set(cmake_flags(AMX_CPU))  # the same options, so the cache key says all


def test_avx512_needs_all_five_sets_its_build_compiles_with():
    assert cmake_flags(AMX_CPU.replace(" avx512bw", ""))["GGML_AVX512"] == "OFF"


@pytest.fixture(scope="module")
def bench():
    with bench_script("llama_builds") as module:
        yield module


def fake_python(tmp_path: Path, body: str) -> str:
    """An executable standing in for a build's interpreter."""
    path = tmp_path / "python"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


def args(timeout: int = 30) -> Namespace:
    return Namespace(model="m.gguf", threads=2, timeout=timeout)


def test_a_build_that_dies_of_a_signal_is_recorded_as_a_crash(bench, tmp_path):
    python = fake_python(tmp_path, "echo 'ggml: general protection' >&2; kill -SEGV $$")
    result = bench._sample(python, args(), 64, 4, 512)
    assert result["error"] == "crash (SIGSEGV)"
    assert "general protection" in result["stderr"]
    assert bench._rate(result, "prompt") is None


def test_a_failed_or_hung_build_is_recorded_and_a_good_one_is_measured(bench, tmp_path):
    assert bench._sample(fake_python(tmp_path, "exit 3"), args(), 64, 4, 512)["error"] == "exit 3"
    assert bench._sample(fake_python(tmp_path, "sleep 5"), args(timeout=1), 64, 4, 512)["error"].startswith("timeout")
    line = json.dumps({"load_s": 1.0, "prompt_tokens": 64, "prompt_s": 0.5, "gen_tokens": 4, "gen_s": 2.0,
                       "system_info": "CPU : AVX2 = 1 | AVX512 = 0 |", "library": "/x/llama_cpp/__init__.py"})
    result = bench._sample(fake_python(tmp_path, f"echo 'log line'; echo '{line}'"), args(), 64, 4, 512)
    assert bench._rate(result, "prompt") == 128.0
    assert bench._rate(result, "gen") == 2.0
    assert bench._isa(result["system_info"]) == "AVX2"
