#!/usr/bin/env bash
# run.sh — runs every test binary in $BUILD/tests and every tests/t_*.sh script,
# counts "ok"/"FAIL"/"SKIP" lines, and ends with "N passed, N failed, N skipped".
# Up to TEST_JOBS tests (default 1; 2 not yet verified on the whole suite) run at once, the long builds (t_cuda.sh, t_fuzz.sh)
# started first; each test's output is kept apart and its result line printed in the
# fixed order (binaries, then scripts, by name) with its wall time: the log reads the
# same as a serial run's.
set -u
BUILD=${BUILD:-build}
export SHARED=${SHARED:-$(cd .. && pwd)/shared}
export THESEUS=${THESEUS:-$BUILD/theseus}
JOBS=${TEST_JOBS:-1}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
pass=0; fail=0; skip=0

list=()
for t in "$BUILD"/tests/test_*; do [ -x "$t" ] && list+=("$t"); done
for s in tests/t_*.sh; do [ -f "$s" ] && list+=("$s"); done
LONG=" tests/t_cuda.sh tests/t_fuzz.sh "
order=()
for l in $LONG; do for i in "${!list[@]}"; do [ "${list[$i]}" = "$l" ] && order+=("$i"); done; done
for i in "${!list[@]}"; do case $LONG in *" ${list[$i]} "*) ;; *) order+=("$i") ;; esac; done

launch() {   # index: runs list[index] in the background; out, rc, time files in $dir
    local i=$1 p=${list[$1]}
    (
        t0=$(date +%s.%N)
        if [ "${p%.sh}" != "$p" ]; then bash "$p"; else "$p"; fi >"$dir/$i.out" 2>&1 </dev/null
        rc=$?
        t1=$(date +%s.%N)
        awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }' >"$dir/$i.time"
        echo $rc >"$dir/$i.rc"
    ) &
}

report() {   # index: the result line of a finished test
    local i=$1 p=${list[$1]} name out rc secs f s c
    name=$(basename "$p")
    out=$(cat "$dir/$i.out"); rc=$(cat "$dir/$i.rc"); secs=$(cat "$dir/$i.time")
    c=$(printf '%s\n' "$out" | grep -c '^ok ')
    f=$(printf '%s\n' "$out" | grep -c '^FAIL ')
    s=$(printf '%s\n' "$out" | grep -c '^SKIP ')
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; out="$out
FAIL $name (exit code $rc)"; fi
    pass=$((pass + c)); fail=$((fail + f)); skip=$((skip + s))
    if [ "$f" -gt 0 ]; then
        printf '%s\n' "$out" | sed 's/^/    /'
    fi
    printf '%-40s %3d ok %3d failed %3d skipped [%.1f s]\n' "$name" "$c" "$f" "$s" "$secs"
}

next=0
flush() {   # the results finished so far, in the fixed order
    while [ "$next" -lt "${#list[@]}" ] && [ -f "$dir/$next.rc" ]; do
        report "$next"; next=$((next + 1))
    done
}

running=0
for i in "${order[@]}"; do
    while [ "$running" -ge "$JOBS" ]; do wait -n; running=$((running - 1)); flush; done
    launch "$i"; running=$((running + 1))
done
wait
flush
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
