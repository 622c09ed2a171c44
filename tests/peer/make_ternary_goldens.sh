#!/usr/bin/env bash
# make_ternary_goldens.sh — the peers' encodings of the 1-bit and ternary types, which
# tests/test_ternary.c compares theseus's encoders (byte for byte) and decoders (hash of
# the f32 output) with. Builds tests/peer/ternary_quant.c against each peer's static ggml
# and runs it on one tensor of the tiny fixture and on a synthetic input with exact ties.
# Run from the repository root:
#
#   tests/peer/make_ternary_goldens.sh LLAMA_CPP_DIR IK_LLAMA_CPP_DIR
#
# Peers used for the committed files (CPU builds, cmake Release, GGML_NATIVE=ON):
#   ggerganov/llama.cpp    c392e5094deaf2d1a7c18683214f007fad3fe42b (2025-02-20): TQ1_0 (34), TQ2_0 (35)
#   ikawrakow/ik_llama.cpp 8337e4cd3861406fc04e0854b1409cd1b027fbc9 (2026-08-15): Q1_0_G128 (41),
#                          IQ1_BN (134), IQ2_BN (135)
# (each DIR has build/ggml/src/libggml*.a from `cmake --build build`).
# Outputs: tests/data/ternary/<TYPE>-<input>.bin (the peer's bytes) and goldens.txt (one
# line per file: the file name, then the program's line: type, shape, bytes, dequant hash).
#
# Second part, logits (tests/t_ternary.sh checks them): a random F32 model from
# bench/gen_model (the shape below; the peers' BN kernels need rows of at least 512) is
# quantized by the peer's llama-quantize to each type (every matrix, as --pure does;
# for IQ1_BN / IQ2_BN token_embd stays Q8_0, because ik_llama.cpp's embedding lookup of
# a BN row drops the row's scale), the same by `theseus quantize --type T` (checked here
# to hold the same tensors, byte for byte, tests/peer/cmp_gguf_tensors.py), and the
# peer's logits of the peer's file go to tests/data/ternary/<TYPE>.logits
# (tests/peer/peer_logits.c: F32 KV cache, flash attention off; ik_llama.cpp: V cache F16).
# Needs `make` and `make bench` (build/theseus, build/bench/gen_model) and each peer's
# build/bin/llama-quantize.
set -eu
L=${1:?usage: $0 LLAMA_CPP_DIR IK_LLAMA_CPP_DIR}
IK=${2:?usage: $0 LLAMA_CPP_DIR IK_LLAMA_CPP_DIR}
MODEL=${SHARED:-../shared}/fixtures/tiny/tiny-F32.gguf
TENSOR=blk.0.ffn_down.weight        # 768 x 256: rows of 768, three TQ blocks, twelve BN blocks
OUT=tests/data/ternary
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$OUT"
gcc -O1 -std=gnu11 -I"$L/ggml/include" -o "$tmp/tq_main" tests/peer/ternary_quant.c \
    "$L/build/ggml/src/libggml.a" "$L/build/ggml/src/libggml-cpu.a" "$L/build/ggml/src/libggml-base.a" \
    -lstdc++ -lm -lpthread -fopenmp
gcc -O1 -std=gnu11 -I"$IK/ggml/include" -o "$tmp/tq_ik" tests/peer/ternary_quant.c \
    "$IK/build/ggml/src/libggml.a" -lstdc++ -lm -lpthread -fopenmp
: > "$OUT/goldens.txt"
# one BIN NAME ID: both inputs of type ID through peer program BIN
one() {
    local bin=$1 name=$2 id=$3
    echo "$name-tensor.bin $("$tmp/$bin" "$MODEL" "$TENSOR" "$id" "$OUT/$name-tensor.bin")" >> "$OUT/goldens.txt"
    echo "$name-synthetic.bin $("$tmp/$bin" - synthetic "$id" "$OUT/$name-synthetic.bin")" >> "$OUT/goldens.txt"
}
one tq_main TQ1_0 34
one tq_main TQ2_0 35
one tq_ik Q1_0_G128 41
one tq_ik IQ1_BN 134
one tq_ik IQ2_BN 135
cat "$OUT/goldens.txt"

# ---- logits
TH=${THESEUS:-build/theseus}
GEN=${GEN_MODEL:-build/bench/gen_model}
TOKENS=$(cat "$OUT/tokens.txt")
"$GEN" --shape custom --dim 512 --layers 2 --heads 8 --kv-heads 4 --ffn 1024 --vocab 1024 --seed 24 --type F32 \
    -o "$tmp/model-F32.gguf" >/dev/null
gcc -O1 -std=gnu11 -I"$L/include" -I"$L/ggml/include" -o "$tmp/pl_main" tests/peer/peer_logits.c \
    "$L/build/src/libllama.a" "$L/build/ggml/src/libggml.a" "$L/build/ggml/src/libggml-cpu.a" \
    "$L/build/ggml/src/libggml-base.a" -lstdc++ -lm -lpthread -fopenmp
gcc -O1 -std=gnu11 -DIK_LLAMA -I"$IK/include" -I"$IK/ggml/include" -o "$tmp/pl_ik" tests/peer/peer_logits.c \
    "$IK/build/src/libllama.a" "$IK/build/ggml/src/libggml.a" -lstdc++ -lm -lpthread -fopenmp
echo "token_embd.weight Q8_0" > "$tmp/emb.cfg"
F=$tmp/model-F32.gguf
for T in TQ1_0 TQ2_0 Q1_0_G128 IQ1_BN IQ2_BN; do
    P=$tmp/peer-$T.gguf; cfg=()
    case $T in
    TQ*) "$L/build/bin/llama-quantize" --pure "$F" "$P" $T 2 >/dev/null 2>&1; run=pl_main ;;
    Q1_0_G128)   # not among ik's llama-quantize type names: a custom rule for every tensor
        "$IK/build/bin/llama-quantize" --custom-q ".*=q1_0_g128" --token-embedding-type q1_0_g128 \
            --output-tensor-type q1_0_g128 "$F" "$P" Q4_0 2 >/dev/null 2>&1; run=pl_ik ;;
    *) "$IK/build/bin/llama-quantize" --pure --token-embedding-type q8_0 "$F" "$P" $T 2 >/dev/null 2>&1
       cfg=(--config "$tmp/emb.cfg"); run=pl_ik ;;
    esac
    "$TH" quantize -m "$F" -o "$tmp/ours-$T.gguf" --type $T "${cfg[@]}" >/dev/null
    python3 tests/peer/cmp_gguf_tensors.py "$P" "$tmp/ours-$T.gguf"
    "$tmp/$run" "$P" "$TOKENS" "$OUT/$T.logits" 2>/dev/null
done
