#!/usr/bin/env bash
# fuzz-long.sh [TARGET...] — runs every libFuzzer target (or the ones named) for
# FUZZ_SECONDS (default 600) each, two at a time (the machine has two cores),
# on a corpus kept in build/fuzz/corpus/<target> (seeded by tests/fuzz/make-seeds.sh),
# one job each, no forking. Logs: build/fuzz/logs/<target>.log. Prints one line a
# target: executions, exec/s, edge coverage (cov) and features (ft) at the end,
# corpus size, and whether it found anything (crash files land in build/fuzz/crashes/).
set -u
cd "$(dirname "$0")/.."
SECONDS_EACH=${FUZZ_SECONDS:-600}
export SHARED=${SHARED:-$(cd .. && pwd)/shared}
make --no-print-directory fuzz >/dev/null || { echo "make fuzz failed"; exit 1; }
[ -x build/tests/test_gguf ] || make --no-print-directory build/tests/test_gguf >/dev/null
tests/fuzz/make-seeds.sh build/fuzz/seeds >/dev/null
targets=${*:-$(ls build/fuzz/bin)}
mkdir -p build/fuzz/logs build/fuzz/crashes
run_one() {
    local t=$1
    mkdir -p "build/fuzz/corpus/$t"
    build/fuzz/bin/"$t" -max_total_time="$SECONDS_EACH" -print_final_stats=1 -timeout=30 -rss_limit_mb=4096 \
        -artifact_prefix="build/fuzz/crashes/$t-" "build/fuzz/corpus/$t" "build/fuzz/seeds/$t" \
        >"build/fuzz/logs/$t.log" 2>&1
    local rc=$?
    local execs cov ft corp eps
    execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "build/fuzz/logs/$t.log" | grep -o '[0-9]*$')
    eps=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "build/fuzz/logs/$t.log" | grep -o '[0-9]*$')
    cov=$(grep -E '(DONE|pulse|NEW|REDUCE) +cov:' "build/fuzz/logs/$t.log" | tail -1 | grep -o 'cov: [0-9]*' | grep -o '[0-9]*')
    ft=$(grep -E '(DONE|pulse|NEW|REDUCE) +cov:' "build/fuzz/logs/$t.log" | tail -1 | grep -o 'ft: [0-9]*' | grep -o '[0-9]*')
    corp=$(ls "build/fuzz/corpus/$t" | wc -l)
    printf '%-16s rc %d  %s s  %s execs  %s exec/s  cov %s  ft %s  corpus %s%s\n' "$t" "$rc" "$SECONDS_EACH" \
        "${execs:-?}" "${eps:-?}" "${cov:-?}" "${ft:-?}" "$corp" "$([ "$rc" -ne 0 ] && echo '  FOUND SOMETHING: see the log')"
}
running=0
for t in $targets; do
    run_one "$t" &
    running=$((running + 1))
    if [ "$running" -ge 2 ]; then wait -n; running=$((running - 1)); fi
done
wait
