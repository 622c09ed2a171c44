#!/usr/bin/env bash
# t_ternary.sh — the 1-bit and ternary types end to end through the CLI: a random model
# from bench/gen_model (the shape of tests/peer/make_ternary_goldens.sh) quantized by
# `theseus quantize --type T` (IQ1_BN / IQ2_BN with token_embd Q8_0, as the goldens), its
# logits against the peers' on the same tensors (tests/data/ternary/T.logits: llama.cpp for
# TQ1_0 / TQ2_0, ik_llama.cpp for Q1_0_G128 / IQ1_BN / IQ2_BN) at every CPU level, and
# `theseus inspect` naming the type. Tolerance: rel-L2 <= 5e-2 with top-1 >= 0.9 (the
# quantized tolerance of the fixtures; the activation rounding differs between the
# engines for Q1_0_G128 and the BN types, docs/ternary.md). Prints ok/FAIL/SKIP lines.
set -u
T=${THESEUS:-build/theseus}
BUILD=${BUILD:-build}
G=${GEN_MODEL:-$BUILD/bench/gen_model}
S=${SHARED:-../shared}
D=tests/data/ternary
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ok() { echo "ok $1"; }
bad() { echo "FAIL $1"; shift; printf '  %s\n' "$@"; }
if [ ! -x "$G" ]; then echo "SKIP ternary_logits ($G not built: make bench)"; exit 0; fi
"$G" --shape custom --dim 512 --layers 2 --heads 8 --kv-heads 4 --ffn 1024 --vocab 1024 --seed 24 --type F32 \
    -o "$tmp/m.gguf" >/dev/null 2>&1 || { bad ternary_gen_model "gen_model failed"; exit 0; }
echo "token_embd.weight Q8_0" > "$tmp/emb.cfg"
TOK=$(cat $D/tokens.txt)
for ty in TQ1_0 TQ2_0 Q1_0_G128 IQ1_BN IQ2_BN; do
    cfg=(); case $ty in IQ*) cfg=(--config "$tmp/emb.cfg") ;; esac
    if ! $T quantize -m "$tmp/m.gguf" -o "$tmp/$ty.gguf" --type $ty "${cfg[@]}" >/dev/null 2>"$tmp/err"; then
        bad "ternary_quantize_$ty" "$(tail -n 3 "$tmp/err")"; continue
    fi
    if $T inspect -m "$tmp/$ty.gguf" 2>&1 | grep -q " $ty "; then ok "ternary_inspect_$ty"
    else bad "ternary_inspect_$ty" "$($T inspect -m "$tmp/$ty.gguf" 2>&1 | tail -n 5)"; fi
    for lv in generic avx2 avx512; do
        if TH_CPU=$lv $T logits -m "$tmp/$ty.gguf" --tokens "$TOK" --out "$tmp/$ty-$lv.logits" -t 2 >/dev/null 2>"$tmp/err" &&
           out=$(python3 "$S/tools/cmp_logits.py" "$tmp/$ty-$lv.logits" "$D/$ty.logits" 5e-2 0.9); then
            ok "ternary_logits_${ty}_$lv ($out)"
        elif grep -q "not supported\|cannot run" "$tmp/err"; then echo "SKIP ternary_logits_${ty}_$lv (no $lv here)"
        else bad "ternary_logits_${ty}_$lv" "$(tail -n 3 "$tmp/err")" "${out:-}"; fi
    done
done
