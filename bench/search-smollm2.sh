#!/bin/bash
# bench/search-smollm2.sh — the issue-21 check of `theseus search` on SmolLM2-135M.
#
# Source: F16 rebuilt from the shipped Q4_1 file by our quantizer (theseus quantize
# --type F16: the Q4_1 values, dequantized, as F16; no better source is shipped).
# Budget: the mean KLD of llama.cpp's uniform Q5_K_M mix (made by our quantizer, which
# writes llama-quantize's bytes) against that F16, on the same gate chunks.
# Then the search with --types (GGML types only) and --write-gguf, and two
# independent checks of the written GGUF: `theseus perplexity --kl-divergence` and
# llama-perplexity's own KLD (llama.cpp c392e50, CPU), each against a base file
# that its own engine wrote from the F16 source.
#
# Measured 2026-12-02 (loaded 2-core VM; README "Precision search" has the frontier):
#   budget 0.082851 (our KLD of uniform Q5_K_M, 4 chunks); smallest llama.cpp mix meeting it:
#   Q5_0, 104,997,952 bytes. Search result: smol-best.gguf 86,128,160 bytes (-18.0 %);
#   theseus perplexity --kl-divergence 0.081886 +/- 0.002553; llama-perplexity c392e50:
#   smol-best 0.082321 +/- 0.002605, its uniform Q5_K_M 0.083169 +/- 0.002601.
#   Search wall time 1757.8 s resumed (343 of 723 sensitivities from a first run of ~19 min).
# usage: bench/search-smollm2.sh [OUTDIR]   (env: CHUNKS=4 CALIB_CTX=128 TYPES=... EVALS=20)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-/tmp/search-smollm2}
CHUNKS=${CHUNKS:-4}
CALIB_CTX=${CALIB_CTX:-128}
TYPES=${TYPES:-IQ4_NL,Q5_0,Q8_0,Q4_K,Q5_K,Q6_K}
EVALS=${EVALS:-20}
TEXT=/usr/share/common-licenses/GPL-3
T=${T:-./build/theseus}
LP=/work/peers/llama.cpp/build/bin/llama-perplexity
mkdir -p "$OUT"
SRC=$OUT/smol-F16.gguf
[ -f "$SRC" ] || $T quantize -q -m models/SmolLM2-135M-Instruct.Q4_1.gguf -o "$SRC" --type F16

kld_of() {   # model base -> mean KLD (our perplexity)
  $T perplexity -m "$1" --kl-divergence-base "$2" --kl-divergence --chunks "$CHUNKS" 2>/dev/null |
    awk '/^Mean +KLD:/ {print $3}'
}

# the independent base file (theseus perplexity, not the search's)
BASE=$OUT/ref-theseus.kld
[ -f "$BASE" ] || $T perplexity -m "$SRC" -f "$TEXT" --chunks "$CHUNKS" --kl-divergence-base "$BASE" >/dev/null 2>&1

echo "== uniform mixes (our quantizer = llama-quantize's bytes), gate: $CHUNKS chunks of 512"
printf "%-8s %12s %8s %10s\n" mix bytes bpw KLD
[ "${RESUME:-}" ] && [ -s "$OUT/uniform.txt" ] && cat "$OUT/uniform.txt" || for mix in Q4_0 Q4_K_M IQ4_NL Q5_0 Q5_K_S Q5_K_M Q5_1 Q6_K Q8_0; do
  f=$OUT/smol-$mix.gguf
  [ -f "$f" ] || $T quantize -q -m "$SRC" -o "$f" --type $mix
  k=$(kld_of "$f" "$BASE")
  b=$(stat -c %s "$f")
  bpw=$($T inspect --precision -m "$f" | awk '/all tensors:/ {print $4}')
  printf "%-8s %12s %8s %10s\n" $mix "$b" "$bpw" "$k" | tee -a "$OUT/uniform.txt"
done
BUDGET=$(awk '$1=="Q5_K_M" {print $4}' "$OUT/uniform.txt" | tail -1)
echo "budget (KLD of uniform Q5_K_M): $BUDGET"

echo "== search"
start=$(date +%s)
$T search -m "$SRC" -f "$TEXT" --max-kld "$BUDGET" --types "$TYPES" -c 512 --chunks "$CHUNKS" \
  --calib-ctx "$CALIB_CTX" --calib-chunks 1 --max-evals "$EVALS" -o "$OUT/BEST.precision" \
  --log "$OUT/search.jsonl" ${RESUME:+--resume "$OUT/search.jsonl"} --write-gguf "$OUT/smol-best.gguf" 2>"$OUT/search.err" |
  tee "$OUT/search.out"
echo "search wall time: $(( $(date +%s) - start )) s (2-core VM shared with other jobs)"

echo "== independent check: theseus perplexity --kl-divergence of the written file"
$T perplexity -m "$OUT/smol-best.gguf" --kl-divergence-base "$BASE" --kl-divergence --chunks "$CHUNKS" 2>/dev/null |
  grep -E "^Mean +KLD|Mean PPL\(Q\)|Same top" | tee "$OUT/check-theseus.txt"
echo "best file: $(stat -c %s "$OUT/smol-best.gguf") bytes"

echo "== llama-perplexity (c392e50) KLD of the written file"
LBASE=$OUT/ref-llama.kld
[ -f "$LBASE" ] || $LP -m "$SRC" -f "$TEXT" --chunks "$CHUNKS" -c 512 --kl-divergence-base "$LBASE" >/dev/null 2>&1
for f in smol-best smol-Q5_K_M; do
  echo "-- $f"
  $LP -m "$OUT/$f.gguf" --kl-divergence-base "$LBASE" --kl-divergence --chunks "$CHUNKS" -c 512 2>&1 |
    grep -E "^Mean +KLD|Mean PPL\(Q\) |Same top" | tee "$OUT/check-llama-$f.txt"
done
