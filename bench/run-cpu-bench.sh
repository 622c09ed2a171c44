#!/bin/sh
# run-cpu-bench.sh — CPU speed table for synthetic Llama models: generates the
# 135M and 1.1B shapes in Q4_0, Q8_0, Q4_K_M and F16 into models/bench/ (git-ignored)
# where missing, then runs `theseus bench` on each and prints one markdown table,
# followed by each run's measured read bandwidth and the machine's load.
#
# Settings (environment): SHAPES TYPES THREADS (2) REPS (5) PP (128) TG (64)
# BUILD (build) BENCH_ARGS (extra options for theseus bench, e.g. --gpu).
# Run from the repository root: bench/run-cpu-bench.sh
set -eu
SHAPES=${SHAPES:-"135M 1.1B"}
TYPES=${TYPES:-"Q4_0 Q8_0 Q4_K_M F16"}
THREADS=${THREADS:-2}
REPS=${REPS:-5}
PP=${PP:-128}
TG=${TG:-64}
BUILD=${BUILD:-build}
BENCH_ARGS=${BENCH_ARGS:-}
DIR=models/bench

make --no-print-directory -s BUILD="$BUILD" all bench >/dev/null
mkdir -p "$DIR"
for s in $SHAPES; do
    for t in $TYPES; do
        f=$DIR/llama-$s-$t.gguf
        [ -s "$f" ] || "$BUILD"/bench/gen_model --shape "$s" --type "$t" -o "$f"
    done
done

echo "load before: $(uptime)"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores; TH_CPU=${TH_CPU:-(auto)}"
echo
first=1
notes=$(mktemp)
trap 'rm -f "$notes"' EXIT
for s in $SHAPES; do
    for t in $TYPES; do
        f=$DIR/llama-$s-$t.gguf
        # shellcheck disable=SC2086
        out=$("$BUILD"/theseus bench -m "$f" -p "$PP" -n "$TG" -t "$THREADS" -r "$REPS" $BENCH_ARGS)
        if [ $first = 1 ]; then echo "$out" | grep '^|' ; first=0
        else echo "$out" | grep '^|' | tail -n +3; fi
        echo "$out" | grep -v '^|' | grep . | sed "s|^|$s $t: |" >>"$notes"
    done
done
echo
cat "$notes"
echo "load after: $(uptime)"
