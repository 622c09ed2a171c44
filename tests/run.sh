#!/usr/bin/env bash
# run.sh — runs every test binary in $BUILD/tests and every tests/t_*.sh script,
# counts "ok"/"FAIL"/"SKIP" lines, and ends with "N passed, N failed, N skipped".
set -u
BUILD=${BUILD:-build}
export SHARED=${SHARED:-$(cd .. && pwd)/shared}
export THESEUS=${THESEUS:-$BUILD/theseus}
log=$(mktemp)
pass=0; fail=0; skip=0
run_one() {
    local name=$1; shift
    local out rc t0 t1
    t0=$(date +%s.%N)
    out=$("$@" 2>&1); rc=$?
    t1=$(date +%s.%N)
    printf '%s\n' "$out" >>"$log"
    local p f s
    p=$(printf '%s\n' "$out" | grep -c '^ok ')
    f=$(printf '%s\n' "$out" | grep -c '^FAIL ')
    s=$(printf '%s\n' "$out" | grep -c '^SKIP ')
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; out="$out
FAIL $name (exit code $rc)"; fi
    pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
    if [ "$f" -gt 0 ]; then
        printf '%s\n' "$out" | sed 's/^/    /'
    fi
    printf '%-40s %3d ok %3d failed %3d skipped [%.1f s]\n' "$name" "$p" "$f" "$s" \
        "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')"
}
for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    run_one "$(basename "$t")" "$t"
done
for s in tests/t_*.sh; do
    [ -f "$s" ] || continue
    run_one "$(basename "$s")" bash "$s"
done
rm -f "$log"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
