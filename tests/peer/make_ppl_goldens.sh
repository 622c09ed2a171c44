#!/usr/bin/env bash
# make_ppl_goldens.sh — reproduces the llama-perplexity values that tests/t_eval.sh
# and tests/test_eval.c hold as constants, and the committed base file
# tests/peer/tiny-F16-c32.kld, from a llama.cpp build (and an ik_llama.cpp build for
# Gemma 3, which the Feb 2025 llama.cpp predates). Run from the repository root:
#
#   tests/peer/make_ppl_goldens.sh LLAMA_BUILD_DIR [IK_LLAMA_BUILD_DIR]
#
# Builds used for the committed values (CPU only, cmake Release, GGML_NATIVE=ON,
# targets llama-perplexity and llama-quantize):
#   ggerganov/llama.cpp    c392e5094deaf2d1a7c18683214f007fad3fe42b (2025-02-20)
#   ikawrakow/ik_llama.cpp 8337e4cd3861406fc04e0854b1409cd1b027fbc9 (2026-08-15)
#   cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=OFF -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF
#   cmake --build build -j2 --target llama-perplexity llama-quantize
# The ik_llama.cpp build (needed for Gemma 3): with the IQK flash-attention kernels on it
# takes hours on 2 cores, so it was built with -DGGML_IQK_FLASH_ATTENTION=OFF
# -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" (the runs use -no-fa), which needs two link stubs
# appended to ggml/src/iqk/iqk_flash_attn.cpp's non-FA branch: iqk_fa_work_buffer_size
# returning 0, and iqk_flash_attn_noalibi (the header's signature, with `sinks`)
# returning false (the upstream fallback lacks the sinks parameter).
# Outputs (stdout + the "Final estimate" / statistics lines) go to tests/peer/goldens/.
set -eu
L=${1:?usage: $0 LLAMA_BUILD_DIR [IK_LLAMA_BUILD_DIR]}/bin/llama-perplexity
IK=${2:-}
S=${SHARED:-../shared}/fixtures/tiny
TEXT=/usr/share/common-licenses/GPL-3
OUT=tests/peer/goldens
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$OUT"

# run NAME BINARY ARGS...: stdout and the result lines of stderr into $OUT/NAME.txt
run() {
    local name=$1 bin=$2; shift 2
    echo "== $name: llama-perplexity $*" >&2
    { echo "# llama-perplexity $*"
      "$bin" "$@" 2>"$tmp/err"
      grep -E 'Final estimate|calculating perplexity' "$tmp/err" || true; } >"$OUT/$name.txt"
    tail -n 3 "$OUT/$name.txt" >&2
}

run smollm2-q4_1-c512 "$L" -m models/SmolLM2-135M-Instruct.Q4_1.gguf -f $TEXT -c 512 -t 2
run tiny-f16-c512-base "$L" -m $S/tiny-F16.gguf -f $TEXT -c 512 -t 2 --kl-divergence-base "$tmp/tiny-f16.kld"
run tiny-q4_0-c512-kld "$L" -m $S/tiny-Q4_0.gguf --kl-divergence-base "$tmp/tiny-f16.kld" --kl-divergence -t 2
run tiny-f16-c32-base "$L" -m $S/tiny-F16.gguf -f $TEXT -c 32 --chunks 3 -t 2 --kl-divergence-base tests/peer/tiny-F16-c32.kld
run tiny-q4_0-c32-kld "$L" -m $S/tiny-Q4_0.gguf --kl-divergence-base tests/peer/tiny-F16-c32.kld --kl-divergence -t 2
if [ -n "$IK" ]; then
    run gemma3-270m-q4_k_m-c512-4chunks "$IK/bin/llama-perplexity" -m models/gemma-3-270m-Q4_K_M.gguf -f $TEXT -c 512 --chunks 4 -t 2 -no-fa
    run gemma3-270m-q4_k_m-c512 "$IK/bin/llama-perplexity" -m models/gemma-3-270m-Q4_K_M.gguf -f $TEXT -c 512 -t 2 -no-fa
    # the same weights dequantized to F32 by the peer's quantizer: the PPL with no activation rounded
    # to 8 bits, against which README reads the GPU's fp16 (cuBLAS) prefill path
    "$IK/bin/llama-quantize" --allow-requantize models/gemma-3-270m-Q4_K_M.gguf "$tmp/gemma-3-270m-F32.gguf" F32 >/dev/null 2>&1
    run gemma3-270m-f32-dequant-c512 "$IK/bin/llama-perplexity" -m "$tmp/gemma-3-270m-F32.gguf" -f $TEXT -c 512 -t 2 -no-fa
fi
# llama.cpp reading a base file that theseus wrote (the other direction of the format)
TH=${THESEUS:-build/theseus}
if [ -x "$TH" ]; then
    "$TH" perplexity -m $S/tiny-F16.gguf -f $TEXT -c 512 -t 2 --kl-divergence-base "$tmp/theseus-f16.kld" \
        >"$OUT/theseus-tiny-f16-c512-base.txt" 2>/dev/null
    run tiny-q4_0-c512-kld-theseus-base "$L" -m $S/tiny-Q4_0.gguf --kl-divergence-base "$tmp/theseus-f16.kld" --kl-divergence -t 2
fi
