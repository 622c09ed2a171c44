#!/usr/bin/env bash
# compare-peers.sh — theseus against peers' llama-bench binaries (llama.cpp,
# ik_llama.cpp with and without -rtr 1, ...) on the same model files, interleaved: for
# every model, thread count and test, each repetition runs ours, then every peer, one
# repetition each, so all of them see the same machine state; then one markdown table
# of the medians over the repetitions, with ours / peer ratios. Builds nothing: pass the
# binaries. Every run's single value is kept in the raw log (-l) for checking.
#
# usage: bench/compare-peers.sh [options] -m MODEL [-m MODEL ...]
#   -b, --theseus BIN     our binary (default build/theseus)
#   -P, --peer 'NAME=BIN [ARGS]'
#                         a peer's llama-bench, with extra arguments for it, e.g.
#                         -P 'llama.cpp=/work/peers/llama.cpp/build/bin/llama-bench'
#                         -P 'ik=/work/peers/ik_llama.cpp/build/bin/llama-bench'
#                         -P 'ik-rtr=/work/peers/ik_llama.cpp/build/bin/llama-bench -rtr 1'
#   -m, --model FILE      a GGUF file (repeatable)
#   -t, --threads LIST    comma-separated thread counts (default 2)
#   -p, --pp LIST         prompt sizes, comma-separated (default 128; 0 = none)
#   -n, --tg LIST         generation lengths, comma-separated (default 64; 0 = none)
#   -r, --reps N          repetitions, each one run of every tool (default 3)
#   -l, --log FILE        raw values, one line per run (default: a temporary file, removed)
#   --ours-args ARGS      extra arguments for `theseus bench` (e.g. --gpu)
#   --bw-mib N            decode bandwidth: our tg runs measure the read bandwidth (a
#                         STREAM-like pass over N MiB, same thread count) right before
#                         each repetition; a second table shows every tool's achieved
#                         GB/s (tok/s x weight bytes read per token, as our bench counts
#                         them) and its % of the bandwidth measured in that repetition
# Environment: TH_* variables reach our binary as usual (TH_CPU, ...).
set -u

ours=build/theseus
peers=()
models=()
threads=2
pps=128
tgs=64
reps=3
log=
ours_args=
bw_mib=0
usage() { sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }
while [ $# -gt 0 ]; do
    case $1 in
    -b|--theseus) ours=$2; shift 2 ;;
    -P|--peer) peers+=("$2"); shift 2 ;;
    -m|--model) models+=("$2"); shift 2 ;;
    -t|--threads) threads=$2; shift 2 ;;
    -p|--pp) pps=$2; shift 2 ;;
    -n|--tg) tgs=$2; shift 2 ;;
    -r|--reps) reps=$2; shift 2 ;;
    -l|--log) log=$2; shift 2 ;;
    --ours-args) ours_args=$2; shift 2 ;;
    --bw-mib) bw_mib=$2; shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "compare-peers.sh: unknown option $1" >&2; usage ;;
    esac
done
[ ${#models[@]} -gt 0 ] || { echo "compare-peers.sh: no model (-m)" >&2; usage; }
[ -x "$ours" ] || { echo "compare-peers.sh: $ours is not an executable (build it, or pass -b)" >&2; exit 2; }
for m in "${models[@]}"; do [ -r "$m" ] || { echo "compare-peers.sh: cannot read $m" >&2; exit 2; }; done
names=()
for p in "${peers[@]}"; do
    n=${p%%=*} rest=${p#*=}
    bin=${rest%% *}
    [ "$n" != "$p" ] && [ -n "$n" ] || { echo "compare-peers.sh: peer '$p' is not NAME=BIN [ARGS]" >&2; exit 2; }
    [ -x "$bin" ] || { echo "compare-peers.sh: peer $n: $bin is not an executable" >&2; exit 2; }
    names+=("$n")
done
tmp_log=0
[ -n "$log" ] || { log=$(mktemp); tmp_log=1; }
: > "$log"

# tok/s of one test ("pp128", "tg64") from our table (the "x ± y" column)
ours_ts() { grep "| *$1 *|" | sed 's/.*| *\([0-9.]*\) ± [0-9.]* *|.*/\1/' | head -1; }
# tok/s from llama-bench -o csv (columns by header name: n_prompt, n_gen, avg_ts; a real
# CSV reader, since fields such as ik_llama.cpp's "ser" hold quoted commas)
peer_ts() {
    python3 -c '
import csv, sys
for r in csv.DictReader(sys.stdin):
    if r.get("n_prompt") == sys.argv[1] and r.get("n_gen") == sys.argv[2]:
        print(r["avg_ts"]); break' "$1" "$2"
}

tests=()
for p in ${pps//,/ }; do [ "$p" -gt 0 ] && tests+=("pp$p"); done
for n in ${tgs//,/ }; do [ "$n" -gt 0 ] && tests+=("tg$n"); done
[ ${#tests[@]} -gt 0 ] || { echo "compare-peers.sh: no test (-p/-n all 0)" >&2; exit 2; }

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "ours: $ours bench ${ours_args:+$ours_args }-r 1 --bw-mib 0 (tg with --bw-mib $bw_mib)"
for p in "${peers[@]}"; do echo "peer: ${p%%=*}: ${p#*=} -r 1 -o csv"; done
echo "interleaved, $reps repetition(s) of one run each; median tok/s; ratio = ours / peer"
echo

for m in "${models[@]}"; do
    for t in ${threads//,/ }; do
        for test in "${tests[@]}"; do
            k=${test#??}
            case $test in pp*) a="-p $k -n 0"; P=$k; N=0 ;; *) a="-p 0 -n $k"; P=0; N=$k ;; esac
            for ((i = 1; i <= reps; i++)); do
                # shellcheck disable=SC2086
                bw=0 bpt=0
                if [ "$bw_mib" -gt 0 ] && [ $N -gt 0 ]; then
                    # shellcheck disable=SC2086
                    out=$("$ours" bench -m "$m" $a -t "$t" -r 1 --bw-mib "$bw_mib" $ours_args 2>/dev/null)
                    bw=$(echo "$out" | sed -n 's/^read bandwidth before each tg repetition: \([0-9.]*\)-.*/\1/p' | head -1)
                    bpt=$(echo "$out" | sed -n 's/^weights read per generated token: \([0-9.]*\) MiB.*/\1/p' | head -1)
                    bpt=$(awk -v x="${bpt:-0}" 'BEGIN { printf "%.0f", x * 1048576 }')
                    v=$(echo "$out" | ours_ts "$test")
                else
                    # shellcheck disable=SC2086
                    v=$("$ours" bench -m "$m" $a -t "$t" -r 1 --bw-mib 0 $ours_args 2>/dev/null | ours_ts "$test")
                fi
                echo "$m|$t|$test|theseus|${v:-}|${bw:-0}|${bpt:-0}" >> "$log"
                for j in "${!peers[@]}"; do
                    rest=${peers[$j]#*=}
                    # shellcheck disable=SC2086
                    v=$($rest -m "$m" $a -t "$t" -r 1 -o csv 2>/dev/null | peer_ts "$P" "$N")
                    echo "$m|$t|$test|${names[$j]}|${v:-}|${bw:-0}|${bpt:-0}" >> "$log"
                done
            done
        done
    done
done

# median per (model, threads, test, tool); a run without a value counts as missing
median() { sort -g | awk '{ a[NR] = $1 } END { if (!NR) print "-"; else if (NR % 2) printf "%.2f\n", a[(NR + 1) / 2]; else printf "%.2f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
med() { awk -F'|' -v m="$1" -v t="$2" -v x="$3" -v o="$4" '$1 == m && $2 == t && $3 == x && $4 == o && $5 != "" { print $5 }' "$log" | median; }
hdr="| model | threads | test | theseus t/s |"
sep="|---|---:|---|---:|"
for n in "${names[@]}"; do hdr="$hdr $n t/s | ours/$n |"; sep="$sep---:|---:|"; done
echo "$hdr"
echo "$sep"
for m in "${models[@]}"; do
    for t in ${threads//,/ }; do
        for test in "${tests[@]}"; do
            o=$(med "$m" "$t" "$test" theseus)
            row="| $(basename "$m" .gguf) | $t | $test | $o |"
            for n in "${names[@]}"; do
                v=$(med "$m" "$t" "$test" "$n")
                r=$(awk -v a="$o" -v b="$v" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }')
                row="$row $v | $r |"
            done
            echo "$row"
        done
    done
done

# decode bandwidth table: per run GB/s = tok/s x bytes per token; % BW = that over the
# bandwidth our run measured right before it (same repetition); medians over repetitions
if [ "$bw_mib" -gt 0 ]; then
    medf() { awk -F'|' -v m="$1" -v t="$2" -v x="$3" -v o="$4" -v f="$5" '$1 == m && $2 == t && $3 == x && $4 == o && $5 != "" && $6 > 0 && $7 > 0 {
        if (f == "gbs") print $5 * $7 / 1e9; else if (f == "bw") print $6; else print 100 * $5 * $7 / 1e9 / $6 }' "$log" | median; }
    echo
    hdr="| model | threads | test | read BW GB/s | theseus GB/s | % BW |"
    sep="|---|---:|---|---:|---:|---:|"
    for n in "${names[@]}"; do hdr="$hdr $n GB/s | % BW |"; sep="$sep---:|---:|"; done
    echo "$hdr"
    echo "$sep"
    for m in "${models[@]}"; do
        for t in ${threads//,/ }; do
            for test in "${tests[@]}"; do
                case $test in tg*) ;; *) continue ;; esac
                row="| $(basename "$m" .gguf) | $t | $test | $(medf "$m" "$t" "$test" theseus bw) |"
                for o in theseus "${names[@]}"; do
                    row="$row $(medf "$m" "$t" "$test" "$o" gbs) | $(medf "$m" "$t" "$test" "$o" pct) |"
                done
                echo "$row"
            done
        done
    done
fi
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
[ $tmp_log -eq 1 ] && rm -f "$log"
exit 0
