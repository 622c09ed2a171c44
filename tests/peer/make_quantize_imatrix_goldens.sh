#!/usr/bin/env bash
# make_quantize_imatrix_goldens.sh — the sha256 of llama-quantize's output files that
# tests/t_quantize_imatrix.sh compares `theseus quantize` with (byte for byte):
#   tests/peer/goldens/quantize-imatrix.sha256
# for tiny-F32 (dense) and olmoe (MoE: per-expert slices of the matrix; its rows of
# 64 send every K-quant to its fallback type, so the 32-blocks' weighted paths are
# what it checks), each mix with the matrices of make_imatrix_goldens.sh, with
# tiny-F32-partial.imatrix.dat (that matrix less blk.0.ffn_down.weight, made here:
# llama-quantize quantizes a tensor without an entry unweighted) and without a
# matrix. The matrix is given as a bare file name (cd tests/peer), because
# llama-quantize writes the name as given to quantize.imatrix.file: the test runs
# theseus the same way. With models/SmolLM2-135M-Instruct.Q4_1.gguf present, also
# SmolLM2 (see below; its matrix smollm2-F16-c512.imatrix.dat is made here too).
# Build used: ggerganov/llama.cpp c392e5094deaf2d1a7c18683214f007fad3fe42b (2025-02-20),
#   cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_CUDA=OFF -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF
#   cmake --build build -j2 --target llama-imatrix llama-quantize llama-perplexity
# Run from the repository root:  tests/peer/make_quantize_imatrix_goldens.sh LLAMA_BUILD_DIR
set -eu
Q=$(cd "${1:?usage: $0 LLAMA_BUILD_DIR}" && pwd)/bin/llama-quantize
S=$(cd "${SHARED:-../shared}" && pwd)/fixtures
cd tests/peer
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# the partial matrix: every entry of tiny-F32-c128.imatrix.dat but one (format: i32 count,
# then per entry i32 len, name, i32 ncall, i32 nval, f32 values; then the trailer)
python3 - tiny-F32-c128.imatrix.dat tiny-F32-partial.imatrix.dat blk.0.ffn_down.weight <<'EOF'
import struct, sys
src, dst, drop = sys.argv[1:]
d = open(src, "rb").read()
n, = struct.unpack_from("<i", d, 0); off = 4; kept = []
for _ in range(n):
    start = off
    ln, = struct.unpack_from("<i", d, off); off += 4
    name = d[off:off + ln].decode(); off += ln
    ncall, nval = struct.unpack_from("<ii", d, off); off += 8 + 4 * nval
    if name != drop: kept.append(d[start:off])
open(dst, "wb").write(struct.pack("<i", len(kept)) + b"".join(kept) + d[off:])
EOF

MIXES="Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K IQ4_NL IQ4_XS Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 F16"
out=goldens/quantize-imatrix.sha256
: > "$out.tmp"
run() {   # name model mix [imatrix]
    local name=$1 model=$2 mix=$3 im=${4:-}
    if [ -n "$im" ]; then "$Q" --imatrix "$im" "$model" "$tmp/o.gguf" "$mix" 2 >"$tmp/log" 2>&1
    else "$Q" "$model" "$tmp/o.gguf" "$mix" 2 >"$tmp/log" 2>&1; fi || { cat "$tmp/log"; exit 1; }
    echo "$(sha256sum < "$tmp/o.gguf" | cut -d' ' -f1)  $name" >> "$out.tmp"
}
for m in $MIXES; do
    run "tiny-$m-imatrix" "$S/tiny/tiny-F32.gguf" "$m" tiny-F32-c128.imatrix.dat
    run "olmoe-$m-imatrix" "$S/arch/olmoe/model-F32.gguf" "$m" olmoe-F32-c128.imatrix.dat
    run "tiny-$m" "$S/tiny/tiny-F32.gguf" "$m"
done
for m in Q4_K_M Q3_K_M IQ4_XS Q2_K Q4_0; do
    run "olmoe-$m" "$S/arch/olmoe/model-F32.gguf" "$m"
    run "tiny-$m-partial" "$S/tiny/tiny-F32.gguf" "$m" tiny-F32-partial.imatrix.dat
done
# SmolLM2-135M (30 layers, so the two rules that change with a matrix apply to ffn_down of
# layers 0-2): the shipped Q4_1 as F16, a matrix by llama-imatrix on another text (4 chunks
# of GFDL-1.3), Q4_0 (those layers Q4_1) and IQ4_XS (those layers not Q5_K) with it
M=../../models/SmolLM2-135M-Instruct.Q4_1.gguf
if [ -f "$M" ]; then
    "$Q" --allow-requantize "$M" "$tmp/sm-F16.gguf" F16 2 >"$tmp/log" 2>&1 || { cat "$tmp/log"; exit 1; }
    echo "$(sha256sum < "$tmp/sm-F16.gguf" | cut -d' ' -f1)  smollm2-F16" >> "$out.tmp"
    "$(dirname "$Q")/llama-imatrix" -m "$tmp/sm-F16.gguf" -f /usr/share/common-licenses/GFDL-1.3 -o smollm2-F16-c512.imatrix.dat \
        -c 512 --chunks 4 -t 2 >"$tmp/log" 2>&1 || { cat "$tmp/log"; exit 1; }
    for m in Q4_0 IQ4_XS; do run "smollm2-$m-imatrix" "$tmp/sm-F16.gguf" "$m" smollm2-F16-c512.imatrix.dat; done
else
    echo "no $M: the SmolLM2 goldens are not made" >&2
fi
mv "$out.tmp" "$out"
echo "wrote tests/peer/$out ($(wc -l < "$out") files)"
