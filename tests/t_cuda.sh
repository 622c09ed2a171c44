#!/usr/bin/env bash
# t_cuda.sh — the CUDA backend must compile wherever nvcc is (CI has nvcc and no
# GPU): builds `make CUDA=1` into build/cuda, then runs its test_cuda, which runs
# every GPU check on a GPU and prints "skipped: no GPU" lines elsewhere (and
# test_cuda_moe and test_cuda_hybrid, the same for MoE / precision and the hybrid models).
set -u
if ! command -v nvcc >/dev/null 2>&1; then echo "SKIP cuda_build (no nvcc)"; exit 0; fi
log=$(mktemp); trap 'rm -f "$log"' EXIT
if make --no-print-directory CUDA=1 BUILD=build/cuda -j2 all build/cuda/tests/test_cuda build/cuda/tests/test_cuda_moe build/cuda/tests/test_cuda_hybrid >"$log" 2>&1; then
    echo "ok cuda_build (make CUDA=1: library, CLI and test_cuda compile)"
else
    echo "FAIL cuda_build"; tail -30 "$log" | sed 's/^/    /'; exit 0
fi
SHARED=${SHARED:-../shared} build/cuda/tests/test_cuda
SHARED=${SHARED:-../shared} build/cuda/tests/test_cuda_moe   # MoE and precision on the GPU
build/cuda/tests/test_cuda_hybrid   # the hybrid models on the GPU (docs/hybrid.md)
