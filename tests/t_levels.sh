#!/usr/bin/env bash
# t_levels.sh — the tiny-fixture goldens and batch/KV tests (test_model), and the model
# layout switches of test_repack, again with every CPU kernel level this machine
# supports forced through TH_CPU (the default runs already cover the best level):
# generic, avx2, avx512 on x86-64; generic, neon on aarch64. The CPU flags are Linux's
# /proc/cpuinfo names (avx512_vnni, asimddp).
set -u
BUILD=${BUILD:-build}
has() { grep -qw "$1" /proc/cpuinfo 2>/dev/null; }
if [ "$(uname -m)" = aarch64 ]; then
    all="generic neon"
    levels="generic"
    has asimddp && levels="$levels neon"
else
    all="generic avx2 avx512"
    levels="generic"
    has avx2 && has fma && has f16c && has bmi2 && levels="$levels avx2"
    has avx2 && has avx512f && has avx512bw && has avx512vl && has avx512dq && has avx512_vnni && levels="$levels avx512"
fi
for lv in $all; do
    case " $levels " in *" $lv "*) ;; *) echo "SKIP test_model_$lv (CPU lacks $lv)"; continue ;; esac
    mark=(-e "s/^ok \(.*\)/ok \1 [TH_CPU=$lv]/" -e "s/^FAIL \(.*\)/FAIL \1 [TH_CPU=$lv]/" -e "s/^SKIP \(.*\)/SKIP \1 [TH_CPU=$lv]/")
    TH_CPU=$lv "$BUILD/tests/test_model" 2>&1 | sed "${mark[@]}"
    # the packed / unpacked / THP / AMX layouts of a whole model at this level (its
    # kernel comparisons already cover every level in one run)
    TH_CPU=$lv TH_TEST=test_model_layout_switches "$BUILD/tests/test_repack" 2>&1 | sed "${mark[@]}"
done
