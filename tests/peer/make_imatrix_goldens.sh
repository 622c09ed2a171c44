#!/usr/bin/env bash
# make_imatrix_goldens.sh — reproduces the llama-imatrix outputs that
# tests/test_eval_moe.c compares `theseus imatrix` with (within float tolerance):
#   tests/peer/tiny-F32-c128.imatrix.dat   (dense, 4 layers)
#   tests/peer/olmoe-F32-c128.imatrix.dat  (MoE: per-expert slices)
# Build used: ggerganov/llama.cpp c392e5094deaf2d1a7c18683214f007fad3fe42b (2025-02-20),
#   cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_CUDA=OFF -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF
#   cmake --build build -j2 --target llama-imatrix llama-quantize llama-perplexity
# Run from the repository root:  tests/peer/make_imatrix_goldens.sh LLAMA_BUILD_DIR
set -eu
L=${1:?usage: $0 LLAMA_BUILD_DIR}/bin/llama-imatrix
S=${SHARED:-../shared}/fixtures
TEXT=/usr/share/common-licenses/GPL-3
"$L" -m $S/tiny/tiny-F32.gguf -f $TEXT -o tests/peer/tiny-F32-c128.imatrix.dat -c 128 --chunks 4 -t 2
#   -> [1]4197.0692,[2]4158.0684,[3]4126.5463,[4]4227.5016,  Final estimate: PPL = 4227.5016 +/- 84.77449
"$L" -m $S/arch/olmoe/model-F32.gguf -f $TEXT -o tests/peer/olmoe-F32-c128.imatrix.dat -c 128 --chunks 4 -t 2
#   -> Final estimate: PPL = 351786.8877 +/- 67297.07212
