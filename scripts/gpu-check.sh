#!/usr/bin/env bash
# gpu-check.sh — on a machine with an NVIDIA GPU: build with CUDA=1, run the GPU
# tests (tests/test_cuda: kernels vs the CPU reference, tiny goldens on the GPU),
# optionally compute-sanitizer memcheck, then the benchmarks (bench/gpu/bench_gpu
# on synthetic 8B and 135M Llama shapes and a Qwen3-30B-A3B-like MoE) and print a table.
#   scripts/gpu-check.sh [tests] [memcheck] [bench] [quick]   (default: tests bench)
# Environment: BUILD (default build/cuda), SHARED (fixtures root), NO_BUILD=1 to
# use binaries already built, OUT (a folder for logs; default /tmp/gpu-check).
# Building needs the library's -dev packages (PCRE2, cJSON, utf8proc); where the
# GPU machine lacks them, build here with `make CUDA=1 lib tests build/cuda/theseus
# build/cuda/bench/gpu/bench_gpu`, carry the binaries plus libpcre2-8.so.0,
# libcjson.so.1, libutf8proc.so.2 and run with NO_BUILD=1 LD_LIBRARY_PATH=<their dir>.
# GPU variants for measurements, read by bench_gpu (not by the library; it sets the
# backend's th_cu_tuning from them): TH_GPU_NO_GRAPH=1, TH_GPU_NO_PDL=1,
# TH_GPU_GEMM_MIN=N (batches of N+ tokens take the cuBLAS path; default 33),
# TH_GPU_ATTN_CHUNK=N (shortest attention split in graph mode; default: one step of
# the kernel, 32 or 64 positions), TH_GPU_MOE_GEMV=1 (MoE experts as per-pair GEMVs in
# prefill too, not the grouped GEMM). TH_GPU_DEVICE=N picks the device (user-facing).
set -u
BUILD=${BUILD:-build/cuda}
OUT=${OUT:-/tmp/gpu-check}
mkdir -p "$OUT"
what=${*:-tests bench}
has() { case " $what " in *" $1 "*) return 0;; esac; return 1; }

nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm,clocks.mem,driver_version --format=csv 2>&1 | tee "$OUT/gpu.txt"
if [ "${NO_BUILD:-0}" != 1 ]; then
    make CUDA=1 BUILD="$BUILD" -j"$(nproc)" lib tests "$BUILD/theseus" "$BUILD/bench/gpu/bench_gpu" >"$OUT/build.log" 2>&1 \
        || { tail -30 "$OUT/build.log"; echo "FAIL build"; exit 1; }
fi
rc=0
if has tests; then
    echo "== tests/test_cuda"
    "$BUILD/tests/test_cuda" 2>&1 | tee "$OUT/test_cuda.log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
fi
if has memcheck; then
    echo "== compute-sanitizer memcheck tests/test_cuda"
    compute-sanitizer --tool memcheck --leak-check no "$BUILD/tests/test_cuda" >"$OUT/memcheck.log" 2>&1
    grep -E "ERROR SUMMARY|^ok |^FAIL |^SKIP " "$OUT/memcheck.log"
    grep -q "ERROR SUMMARY: 0 errors" "$OUT/memcheck.log" || rc=1
fi
if has bench; then
    echo "== benchmarks"
    B="$BUILD/bench/gpu/bench_gpu"
    "$B" ceilings | tee "$OUT/bench.txt"
    # shape:type:mode[:VAR=VALUE] (an environment setting for that run)
    if has quick; then runs="135m:q4_0:all 8b:q4_0:all moe:q4_0:pp moe:q4_0:pp:TH_GPU_MOE_GEMV=1"; else
        runs="135m:q4_0:all 135m:q8_0:tg 135m:f16:tg 8b:q4_0:all 8b:q8_0:all 8b:f16:all 8b:q4_k:all 8b:q5_k:all 8b:q6_k:all
              moe:q4_0:all moe:q4_0:pp:TH_GPU_MOE_GEMV=1 moe:q4_k:pp moe:q4_k:pp:TH_GPU_MOE_GEMV=1"; fi
    for r in $runs; do
        IFS=: read -r shape type mode var <<<"$r"
        env ${var:+"$var"} "$B" "$shape" "$type" "$mode" 2>>"$OUT/bench.err" | tee -a "$OUT/bench.txt"
    done
    echo "== table"
    grep -E "tg128|pp512|b16|copy|gemm" "$OUT/bench.txt" | column -t -s '|' 2>/dev/null || grep -E "tg128|pp512|b16|copy|gemm" "$OUT/bench.txt"
fi
exit $rc
