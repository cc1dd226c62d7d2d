#!/usr/bin/env bash
# Prints the CMake flags that build llama.cpp (llama-cpp-python 0.3.36's vendored ggml) for THIS
# CPU's instruction sets, read from /proc/cpuinfo, with GGML_NATIVE=OFF and AMX off:
#   scripts/llama_cpu_flags.sh            # e.g. -DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DGGML_AVX=ON ...
#   scripts/llama_cpu_flags.sh FLAGS...   # the same for a given list of cpuinfo flags (tests, images)
#
# Why not -DGGML_NATIVE=ON: -march=native also turns on AMX, and on this project's AMX-capable
# machines (CPUs under a VM) a native build of 0.3.36 dies with a general protection fault in
# libggml-cpu.so on prompt batches of 64 tokens or more. Naming each instruction set instead keeps
# AVX-512 (most of a native build's prompt speed; docs/measurements.md) and leaves AMX out.
# Every GGML_* x86 option is named, ON or OFF, so the flags (and the wheel cache key built from
# them) say exactly what the wheel uses. Off x86 the portable flags are printed.
set -euo pipefail

if (($#)); then
  have=" $* "
else
  have=" $( (grep -m1 -E '^flags' /proc/cpuinfo 2>/dev/null || true) | cut -d: -f2 | tr -s ' \t' '  ') "
fi
out="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF"
if [[ "$(uname -m)" != x86_64 && $# -eq 0 ]]; then
  echo "$out"
  exit 0
fi

has() { # all given cpuinfo flags present
  local f
  for f in "$@"; do [[ "$have" == *" $f "* ]] || return 1; done
}
opt() { # opt GGML_NAME cpuinfo-flag...: ON when the CPU has every flag
  if has "${@:2}"; then out+=" -D$1=ON"; else out+=" -D$1=OFF"; fi
}

opt GGML_SSE42 sse4_2
opt GGML_AVX avx
opt GGML_AVX2 avx2
opt GGML_BMI2 bmi2
opt GGML_FMA fma
opt GGML_F16C f16c
opt GGML_AVX_VNNI avx_vnni
# GGML_AVX512 compiles with -mavx512f -mavx512cd -mavx512vl -mavx512dq -mavx512bw: all five needed.
opt GGML_AVX512 avx512f avx512cd avx512vl avx512dq avx512bw
opt GGML_AVX512_VBMI avx512f avx512vbmi
opt GGML_AVX512_VNNI avx512f avx512_vnni
opt GGML_AVX512_BF16 avx512f avx512_bf16
out+=" -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
echo "$out"
