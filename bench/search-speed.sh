#!/bin/bash
# bench/search-speed.sh — paired wall times of `theseus search` with layer resume on and
# off (--no-layer-resume), one after the other on the same machine, in a configuration
# the sensitivity phase dominates; the two logs' sensitivity records must be identical.
# Source: bench/search-smollm2.sh's smol-F16.gguf (F16 rebuilt from the shipped Q4_1).
#
# Measured 2026-12-03 (2-core VM, load average ~20 from other jobs during both runs):
#   on : wall 591.1 s; calibration passes 479.3 s (242 runs; 47.7 % of the layer work skipped)
#   off: wall 954.4 s; calibration passes 846.6 s (242 runs)
#   -> -38 % wall, -43 % calibration-pass time; all 241 sensitivity records identical.
# usage: bench/search-speed.sh [SOURCE.gguf] [OUTDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=${1:-/tmp/search-smollm2/smol-F16.gguf}
OUT=${2:-/tmp/search-speed}
T=${T:-./build/theseus}
mkdir -p "$OUT"
A=(-m "$SRC" -f /usr/share/common-licenses/GPL-3 --max-kld 0.082851 --types Q4_K,Q8_0 -c 512 --chunks 1
   --calib-ctx 128 --calib-chunks 1 --max-evals 1 -t 2)
for run in on off; do
  x=(); [ $run = off ] && x=(--no-layer-resume)
  s=$(date +%s.%N)
  $T search "${A[@]}" "${x[@]}" -o "$OUT/$run.precision" --log "$OUT/$run.jsonl" >"$OUT/$run.out" 2>"$OUT/$run.err"
  echo "$run: wall $(awk -v a="$s" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}') s, load $(cut -d' ' -f1-3 /proc/loadavg)"
  grep -E "^time|^layer resume" "$OUT/$run.out"
done
if cmp -s <(grep '"kind":"sens"' "$OUT/on.jsonl") <(grep '"kind":"sens"' "$OUT/off.jsonl"); then
  echo "sensitivity records identical ($(grep -c '"kind":"sens"' "$OUT/on.jsonl"))"
else
  echo "sensitivity records DIFFER"; exit 1
fi
