#!/usr/bin/env bash
# compare-gpu.sh — theseus --gpu against a peer's llama-bench (and, with -B, its
# llama-batched-bench) on the same GGUF files on one GPU: for every model, R rounds
# of ours then the peer, each one process with its own repetitions (-r), so both see
# the same GPU state; then a markdown table of the medians over the rounds and the
# ratios. Single stream: pp (one batch of -p tokens) and tg (-n single-token steps),
# llama-bench -ngl 99 -fa 1. Batched (-B LIST): llama-batched-bench's method, LIST
# streams of --npp prompt tokens then --ntg steps; ours is `theseus bench --parallel N`.
# Builds nothing: pass the binaries. Raw outputs stay in the log directory (-l).
#
# usage: bench/gpu/compare-gpu.sh -P LLAMA_BENCH [-Q LLAMA_BATCHED_BENCH] [options] -m MODEL ...
#   -b BIN       our binary (default build/theseus); --ours-args ARGS instead of --gpu
#   -P BIN       the peer's llama-bench (-P 'BIN ARGS' for extra arguments)
#   -Q BIN       the peer's llama-batched-bench (needed with -B)
#   -p N / -n N  prompt tokens / generated tokens (default 512 / 128; 0 = skip)
#   -B LIST      comma-separated stream counts for the batched rows (default none)
#   --npp N --ntg N   the batched rows' prompt and generation lengths (default 128 / 128)
#   -r N         repetitions inside each process (default 3); -R N rounds (default 2)
#   -l DIR       keep every run's output there (default: a temporary directory, removed)
set -u
ours=build/theseus ours_args=--gpu peer= batched= pp=512 tg=128 streams= npp=128 ntg=128 reps=3 rounds=2 logdir=
models=()
usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }
while [ $# -gt 0 ]; do
    case $1 in
    -b) ours=$2; shift 2 ;;
    --ours-args) ours_args=$2; shift 2 ;;
    -P) peer=$2; shift 2 ;;
    -Q) batched=$2; shift 2 ;;
    -p) pp=$2; shift 2 ;;
    -n) tg=$2; shift 2 ;;
    -B) streams=$2; shift 2 ;;
    --npp) npp=$2; shift 2 ;;
    --ntg) ntg=$2; shift 2 ;;
    -r) reps=$2; shift 2 ;;
    -R) rounds=$2; shift 2 ;;
    -l) logdir=$2; shift 2 ;;
    -m) models+=("$2"); shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "compare-gpu.sh: unknown option $1" >&2; usage ;;
    esac
done
[ ${#models[@]} -gt 0 ] || { echo "compare-gpu.sh: no model (-m)" >&2; usage; }
[ -n "$peer" ] || { echo "compare-gpu.sh: no peer llama-bench (-P)" >&2; usage; }
[ -z "$streams" ] || [ -n "$batched" ] || { echo "compare-gpu.sh: -B needs the peer's llama-batched-bench (-Q)" >&2; usage; }
keep=1
[ -n "$logdir" ] || { logdir=$(mktemp -d); keep=0; }
mkdir -p "$logdir"
vals=$logdir/values   # model|test|tool|tok/s, one line per run
: > "$vals"

ours_ts() { grep "| *$1 *|" | sed 's/.*| *\([0-9.]*\) ± [0-9.]* *|.*/\1/' | head -1; }       # pp512 / tg128 rows
ours_stg() { sed -n "s/.*| npl $1: .*| S_TG *\([0-9.]*\) t\/s.*/\1/p" | head -1; }           # the npl-N row
peer_ts() {   # llama-bench -o csv: avg_ts of the row with n_prompt $1, n_gen $2
    python3 -c '
import csv, sys
for r in csv.DictReader(sys.stdin):
    if r.get("n_prompt") == sys.argv[1] and r.get("n_gen") == sys.argv[2]:
        print(r["avg_ts"]); break' "$1" "$2"
}
peer_stg() {  # llama-batched-bench's table: S_TG of the row with PP $1, TG $2, B $3
    awk -F'|' -v p="$1" -v t="$2" -v b="$3" '{ for (i = 1; i <= NF; i++) gsub(/ /, "", $i) }
        $2 == p && $3 == t && $4 == b { print $9; exit }'
}

gpu=$(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | head -1)
echo "gpu: ${gpu:-unknown}; ours: $ours bench $ours_args -r $reps; peer: $peer -ngl 99 -fa 1 -r $reps${batched:+; batched: $batched}"
echo "$rounds round(s) of one process each, ours first; median over the rounds; ratio = ours / peer"
echo
for m in "${models[@]}"; do
    b=$(basename "$m" .gguf)
    for ((r = 1; r <= rounds; r++)); do
        # shellcheck disable=SC2086
        "$ours" bench -m "$m" $ours_args -p "$pp" -n "$tg" -r "$reps" >"$logdir/$b.ours.$r" 2>&1
        [ "$pp" -gt 0 ] && echo "$b|pp$pp|theseus|$(ours_ts "pp$pp" <"$logdir/$b.ours.$r")" >>"$vals"
        [ "$tg" -gt 0 ] && echo "$b|tg$tg|theseus|$(ours_ts "tg$tg" <"$logdir/$b.ours.$r")" >>"$vals"
        for s in ${streams//,/ }; do   # one process a stream count (--parallel takes one)
            # shellcheck disable=SC2086
            "$ours" bench -m "$m" $ours_args -p 0 -n 0 --parallel "$s" --npp "$npp" --ntg "$ntg" \
                >"$logdir/$b.ours-x$s.$r" 2>&1
            echo "$b|bb$s|theseus|$(ours_stg "$s" <"$logdir/$b.ours-x$s.$r")" >>"$vals"
        done
        # shellcheck disable=SC2086
        $peer -m "$m" -ngl 99 -fa 1 -p "$pp" -n "$tg" -r "$reps" -o csv >"$logdir/$b.peer.$r" 2>"$logdir/$b.peer.$r.err"
        [ "$pp" -gt 0 ] && echo "$b|pp$pp|peer|$(peer_ts "$pp" 0 <"$logdir/$b.peer.$r")" >>"$vals"
        [ "$tg" -gt 0 ] && echo "$b|tg$tg|peer|$(peer_ts 0 "$tg" <"$logdir/$b.peer.$r")" >>"$vals"
        if [ -n "$streams" ]; then
            maxs=0
            for s in ${streams//,/ }; do [ "$s" -gt "$maxs" ] && maxs=$s; done
            # shellcheck disable=SC2086
            $batched -m "$m" -ngl 99 -fa -c $((maxs * (npp + ntg))) -npp "$npp" -ntg "$ntg" -npl "$streams" \
                >"$logdir/$b.batched.$r" 2>&1
            for s in ${streams//,/ }; do
                echo "$b|bb$s|peer|$(peer_stg "$npp" "$ntg" "$s" <"$logdir/$b.batched.$r")" >>"$vals"
            done
        fi
    done
done

median() { sort -g | awk '{ a[NR] = $1 } END { if (!NR) print "-"; else if (NR % 2) printf "%.1f\n", a[(NR + 1) / 2]; else printf "%.1f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
med() { awk -F'|' -v m="$1" -v t="$2" -v o="$3" '$1 == m && $2 == t && $3 == o && $4 != "" { print $4 }' "$vals" | median; }
echo "| model | test | theseus t/s | peer t/s | ours/peer |"
echo "|---|---|---:|---:|---:|"
for m in "${models[@]}"; do
    b=$(basename "$m" .gguf)
    for t in $(awk -F'|' -v m="$b" '$1 == m { print $2 }' "$vals" | awk '!s[$0]++'); do
        o=$(med "$b" "$t" theseus) q=$(med "$b" "$t" peer)
        ratio=$(awk -v a="$o" -v b="$q" 'BEGIN { if (a != "-" && b != "-" && b > 0) printf "%.2f", a / b; else print "-" }')
        echo "| $b | $t | $o | $q | $ratio |"
    done
done
for m in "${models[@]}"; do   # for GB/s: bytes a token times tok/s
    b=$(basename "$m" .gguf)
    w=$(sed -n 's/^weights read per generated token: \([0-9.]* MiB\).*/\1/p' "$logdir/$b.ours.1" 2>/dev/null | head -1)
    [ -z "$w" ] || echo "$b: weights read per generated token $w (theseus bench)"
done
[ "$keep" = 1 ] || rm -rf "$logdir"
