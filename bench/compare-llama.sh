#!/bin/sh
# compare-llama.sh — theseus and llama.cpp side by side on the same synthetic models
# (made by bench/run-cpu-bench.sh into models/bench/), same threads, same tests,
# interleaved per model so that both see the same machine state. llama.cpp is not
# part of this repository: build its llama-bench yourself and point LLAMA_BENCH at it.
#
# Settings (environment): LLAMA_BENCH (required) SHAPES TYPES THREADS (2) REPS (3)
# PP (128) TG (64) BUILD (build). Run from the repository root.
set -eu
: "${LLAMA_BENCH:?set LLAMA_BENCH to a llama-bench binary}"
SHAPES=${SHAPES:-"1.1B 135M"}
TYPES=${TYPES:-"Q4_0 Q8_0 Q4_K_M F16"}
THREADS=${THREADS:-2}
REPS=${REPS:-3}
PP=${PP:-128}
TG=${TG:-64}
BUILD=${BUILD:-build}

SHAPES="$SHAPES" TYPES="$TYPES" REPS=1 PP=0 TG=1 BUILD="$BUILD" bench/run-cpu-bench.sh >/dev/null
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "llama-bench: $("$LLAMA_BENCH" --version 2>&1 | grep -m1 version || echo unknown)"
echo
echo "| model | test | theseus tok/s | llama.cpp tok/s | ratio |"
echo "|---|---|---:|---:|---:|"
# median tok/s of one test from each tool's markdown table (the "t/s" column, "x ± y")
ts() { grep "| *$1 *|" | sed 's/.*| *\([0-9.]*\) ± [0-9.]* *|.*/\1/' | head -1; }
for s in $SHAPES; do
    for t in $TYPES; do
        f=models/bench/llama-$s-$t.gguf
        for test in "pp$PP" "tg$TG"; do
            case $test in pp*) a="-p $PP -n 0" ;; *) a="-p 0 -n $TG" ;; esac
            # shellcheck disable=SC2086
            ours=$("$BUILD"/theseus bench -m "$f" $a -t "$THREADS" -r "$REPS" --bw-mib 0 | ts "$test")
            # shellcheck disable=SC2086
            peer=$("$LLAMA_BENCH" -m "$f" $a -t "$THREADS" -r "$REPS" 2>/dev/null | ts "$test")
            ratio=$(awk -v a="$ours" -v b="$peer" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')
            echo "| $s $t | $test | $ours | $peer | $ratio |"
        done
    done
done
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
