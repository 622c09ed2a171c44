#!/usr/bin/env bash
# t_fuzz.sh — `make fuzz` (clang, ASan + UBSan) and a short smoke run of every
# libFuzzer target on its seeds (FUZZ_SMOKE_S seconds each, default 10, as many
# at once as there are cores): each must finish without a crash, leak or
# sanitizer report. Skipped without clang.
# The long runs (10 minutes a target) are scripts/fuzz-long.sh.
set -u
if ! command -v clang >/dev/null 2>&1; then echo "SKIP fuzz (no clang)"; exit 0; fi
S=${FUZZ_SMOKE_S:-10}
if ! make --no-print-directory fuzz >/tmp/t_fuzz_build.$$ 2>&1; then
    echo "FAIL fuzz_build"; tail -20 /tmp/t_fuzz_build.$$ | sed 's/^/    /'; rm -f /tmp/t_fuzz_build.$$; exit 0
fi
rm -f /tmp/t_fuzz_build.$$
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
BUILD=${BUILD:-build} tests/fuzz/make-seeds.sh "$tmp/seeds" >/dev/null
smoke() {  # one target's smoke run; its result line(s) on stdout
    local bin=$1 t; t=$(basename "$bin")
    mkdir -p "$tmp/corpus/$t" "$tmp/seeds/$t"   # a target without seeds starts from nothing
    if "$bin" -max_total_time="$S" -print_final_stats=1 -timeout=20 -artifact_prefix="$tmp/$t-" \
        "$tmp/corpus/$t" "$tmp/seeds/$t" >"$tmp/$t.log" 2>&1; then
        n=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$tmp/$t.log" | grep -o '[0-9]*$')
        cov=$(grep -E 'DONE +cov:' "$tmp/$t.log" | grep -o 'cov: [0-9]*' | grep -o '[0-9]*$')
        echo "ok ${t}_smoke (${n:-?} executions in ${S} s, cov ${cov:-?})"
    else
        echo "FAIL ${t}_smoke"; grep -E 'ERROR|SUMMARY|==[0-9]+==|#0 |#1 |#2 ' "$tmp/$t.log" | head -20 | sed 's/^/    /'
    fi
}
# one target per core at a time (each is single-threaded), results in name order
P=$(nproc 2>/dev/null || echo 1)
for bin in build/fuzz/bin/fuzz_*; do
    smoke "$bin" >"$tmp/$(basename "$bin").res" &
    while [ "$(jobs -rp | wc -l)" -ge "$P" ]; do wait -n; done
done
wait
for bin in build/fuzz/bin/fuzz_*; do cat "$tmp/$(basename "$bin").res"; done
exit 0
