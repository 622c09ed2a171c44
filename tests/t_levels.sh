#!/usr/bin/env bash
# t_levels.sh — the tiny-fixture goldens and batch/KV tests again with every CPU
# kernel level this machine supports forced through TH_CPU (the default run of
# test_model already covers the best level).
set -u
BUILD=${BUILD:-build}
levels="generic"
grep -qw avx2 /proc/cpuinfo 2>/dev/null && grep -qw fma /proc/cpuinfo && levels="$levels avx2"
grep -qw avx512vnni /proc/cpuinfo 2>/dev/null && grep -qw avx512bw /proc/cpuinfo && levels="$levels avx512"
for lv in generic avx2 avx512; do
    case " $levels " in *" $lv "*) ;; *) echo "SKIP test_model_$lv (CPU lacks $lv)"; continue ;; esac
    TH_CPU=$lv "$BUILD/tests/test_model" 2>&1 | sed -e "s/^ok \(.*\)/ok \1 [TH_CPU=$lv]/" -e "s/^FAIL \(.*\)/FAIL \1 [TH_CPU=$lv]/" -e "s/^SKIP \(.*\)/SKIP \1 [TH_CPU=$lv]/"
done
