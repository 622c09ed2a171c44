#!/bin/bash
# bench/search-gemma3.sh — the issue-21 check of `theseus search` on Gemma 3 270M.
#
# Source: F16 rebuilt from the shipped Q4_K_M file by our quantizer (theseus quantize
# --type F16: the Q4_K_M values, dequantized, as F16; no better source is shipped).
# Budget: the mean KLD of llama.cpp's uniform Q5_K_M mix (made by our quantizer, which
# writes llama-quantize's bytes) against that F16, on the same gate chunks.
# Gemma 3's n_embd is 640, not a multiple of 256: every tensor with 640-wide rows
# (token_embd/output, attn_q/k/v, ffn_gate/up) takes no K-quant, so a uniform K mix
# falls back to Q5_0/Q5_1/Q8_0 there (llama-quantize's fallbacks) and the search's
# candidates for those tensors are the 32-block types of TYPES.
# Then the search with GGML types only and --write-gguf, and two independent checks of
# the written GGUF: `theseus perplexity --kl-divergence` and ik_llama.cpp's
# llama-perplexity (llama.cpp c392e50, Feb 2025, predates Gemma 3), each against a base
# file its own engine wrote from the F16 source.
# CPU time is scarce (2 shared cores): CHUNKS=2 gate chunks of 512 (510 scored
# positions; the whole GPL-3 is 14 chunks) and a 128-token calibration slice.
#
# Measured 2026-12-03 (loaded 2-core VM; README "Precision search"): budget 0.036342 (our
#   KLD of uniform Q5_K_M, 2 chunks); smallest llama.cpp mix meeting it: Q4_K_M, 253,113,024
#   bytes (KLD 0.004688: the source lies on its grids). Search result: gemma-best.gguf
#   189,184,672 bytes (-25.3 %); theseus perplexity --kl-divergence 0.029611 +/- 0.001425;
#   ik_llama.cpp 8337e4c llama-perplexity: gemma-best 0.027508 +/- 0.001298, its uniform
#   Q5_K_M 0.031633 +/- 0.001485. Search wall time 3226 s (without layer resume).
# usage: bench/search-gemma3.sh [OUTDIR]   (env: CHUNKS=2 CALIB_CTX=128 TYPES=... EVALS=12 RESUME=1)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-/tmp/search-gemma3}
CHUNKS=${CHUNKS:-2}
CALIB_CTX=${CALIB_CTX:-128}
TYPES=${TYPES:-IQ4_NL,Q5_0,Q8_0,Q4_K,Q6_K}
EVALS=${EVALS:-12}
TEXT=/usr/share/common-licenses/GPL-3
T=${T:-./build/theseus}
LP=${LP:-/work/peers/ik_llama.cpp/build/bin/llama-perplexity}
mkdir -p "$OUT"
SRC=$OUT/gemma-F16.gguf
[ -f "$SRC" ] || $T quantize -q -m models/gemma-3-270m-Q4_K_M.gguf -o "$SRC" --type F16

kld_of() {   # model base -> mean KLD (our perplexity)
  $T perplexity -m "$1" --kl-divergence-base "$2" --kl-divergence --chunks "$CHUNKS" 2>/dev/null |
    awk '/^Mean +KLD:/ {print $3}'
}

BASE=$OUT/ref-theseus.kld
[ -f "$BASE" ] || $T perplexity -m "$SRC" -f "$TEXT" --chunks "$CHUNKS" --kl-divergence-base "$BASE" >/dev/null 2>&1

echo "== uniform mixes (our quantizer = llama-quantize's bytes), gate: $CHUNKS chunks of 512"
printf "%-8s %12s %8s %10s\n" mix bytes bpw KLD
[ "${RESUME:-}" ] && [ -s "$OUT/uniform.txt" ] && cat "$OUT/uniform.txt" || for mix in Q4_0 Q4_K_M IQ4_NL Q5_0 Q5_K_S Q5_K_M Q5_1 Q6_K Q8_0; do
  f=$OUT/gemma-$mix.gguf
  [ -f "$f" ] || $T quantize -q -m "$SRC" -o "$f" --type $mix
  k=$(kld_of "$f" "$BASE")
  b=$(stat -c %s "$f")
  bpw=$($T inspect --precision -m "$f" | awk '/all tensors:/ {print $4}')
  printf "%-8s %12s %8s %10s\n" $mix "$b" "$bpw" "$k" | tee -a "$OUT/uniform.txt"
  [ "$mix" = Q8_0 ] || [ "$mix" = Q5_K_M ] || rm -f "$f"
done
BUDGET=$(awk '$1=="Q5_K_M" {print $4}' "$OUT/uniform.txt" | tail -1)
echo "budget (KLD of uniform Q5_K_M): $BUDGET"
[ "${UNIFORM_ONLY:-}" ] && exit 0

echo "== search"
start=$(date +%s)
$T search -m "$SRC" -f "$TEXT" --max-kld "$BUDGET" --types "$TYPES" -c 512 --chunks "$CHUNKS" \
  --calib-ctx "$CALIB_CTX" --calib-chunks 1 --max-evals "$EVALS" -o "$OUT/BEST.precision" \
  --log "$OUT/search.jsonl" $([ "${RESUME:-}" ] && [ -s "$OUT/search.jsonl" ] && echo --resume "$OUT/search.jsonl") --write-gguf "$OUT/gemma-best.gguf" 2>"$OUT/search.err" |
  tee "$OUT/search.out"
echo "search wall time: $(( $(date +%s) - start )) s (2-core VM shared with other jobs)"

echo "== independent check: theseus perplexity --kl-divergence of the written file"
$T perplexity -m "$OUT/gemma-best.gguf" --kl-divergence-base "$BASE" --kl-divergence --chunks "$CHUNKS" 2>/dev/null |
  grep -E "^Mean +KLD|Mean PPL\(Q\)|Same top" | tee "$OUT/check-theseus.txt"
echo "best file: $(stat -c %s "$OUT/gemma-best.gguf") bytes"

echo "== ik_llama.cpp llama-perplexity KLD of the written file and of uniform Q5_K_M"
LBASE=$OUT/ref-ik.kld
[ -f "$LBASE" ] || $LP -m "$SRC" -f "$TEXT" --chunks "$CHUNKS" -c 512 -t 2 --kl-divergence-base "$LBASE" >"$OUT/ik-base.log" 2>&1
for f in gemma-best gemma-Q5_K_M; do
  echo "-- $f"
  $LP -m "$OUT/$f.gguf" --kl-divergence-base "$LBASE" --kl-divergence --chunks "$CHUNKS" -c 512 -t 2 2>&1 |
    grep -E "^Mean +KLD|Mean PPL\(Q\) |Same top" | tee "$OUT/check-ik-$f.txt"
done
