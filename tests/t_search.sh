#!/usr/bin/env bash
# t_search.sh — `theseus search` from the command line on the tiny fixture (seconds):
#   search_cli_ggml: --types ggml --write-gguf: BEST.precision, the frontier table and
#     PNG (pngfix, from Debian's libpng-tools, checks every chunk's CRC and the zlib
#     stream when it is installed) are written; the written GGUF holds only GGML types
#     (inspect --precision), and an independent `theseus perplexity --kl-divergence`
#     of it against the search's gate base file meets the budget.
#   search_cli_resume: --resume of the same log redoes no evaluation.
#   search_cli_errors: no gate, or two gates, is a usage error naming the options.
#   search_cli_ppl: --max-ppl-increase P%: the gate binds (the log holds gate runs it
#     rejected), and independent plain `theseus perplexity` runs of the source and the
#     written GGUF (no base file) give PPL(best)/PPL(source) - 1 <= P, equal to the
#     search's own figure within 1e-4 (llama-perplexity's too, when /work/peers has it).
#   search_cli_layer_resume: the sensitivity runs started from the source's saved hidden
#     states at the unit's layer give every sens record (KLD, PPL ratio to 9 digits) equal
#     to full runs (--no-layer-resume), and the summary says how much layer work it skipped.
#   search_cli_unmeetable: a PPL-increase limit below the source's own (the base file's rounding)
#     is an error saying the gate cannot be met, before any sensitivity run.
set -u
T=${THESEUS:-build/theseus}
SHARED=${SHARED:-../shared}
SRC=$SHARED/fixtures/tiny/tiny-F16.gguf
TEXT=/usr/share/common-licenses/GPL-3
if [ ! -f "$SRC" ] || [ ! -f "$TEXT" ]; then echo "SKIP search_cli (no tiny fixture or $TEXT)"; exit 0; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
BUDGET=0.003
args=(-m "$SRC" -f "$TEXT" --max-kld $BUDGET -c 128 --chunks 4 --calib-ctx 64 --calib-chunks 2 --max-evals 6
      --types ggml -o "$tmp/best.precision" --log "$tmp/s.jsonl" -t 2)

if "$T" search "${args[@]}" --write-gguf "$tmp/best.gguf" >"$tmp/out.txt" 2>"$tmp/err.txt"; then
    ok=1
    for f in best.precision best.precision.frontier.md best.precision.frontier.png best.gguf; do
        [ -s "$tmp/$f" ] || { echo "    missing $f"; ok=0; }
    done
    grep -q '^| uniform Q8_0 ' "$tmp/out.txt" || { echo "    no uniform Q8_0 row in the table"; ok=0; }
    if command -v pngfix >/dev/null 2>&1; then
        pngfix "$tmp/best.precision.frontier.png" >/dev/null 2>&1 || { echo "    pngfix rejects the plot"; ok=0; }
    fi
    types=$("$T" inspect --precision -m "$tmp/best.gguf" | awk '!/^#/ && NF == 2 {print $2}' | sort -u | tr '\n' ' ')
    for t in $types; do
        case $t in q[2-8]) echo "    non-GGML type $t in the written file"; ok=0 ;; esac
    done
    kld=$("$T" perplexity -m "$tmp/best.gguf" --kl-divergence-base "$tmp/s.jsonl.gate.kld" --kl-divergence 2>/dev/null |
          awk '/^Mean +KLD:/ {print $3}')
    if [ -z "$kld" ] || ! awk -v k="$kld" -v b=$BUDGET 'BEGIN {exit !(k <= b)}'; then
        echo "    independent KLD '$kld' is not within $BUDGET"; ok=0
    fi
    if [ $ok = 1 ]; then echo "ok search_cli_ggml (independent KLD $kld <= $BUDGET; types: $types)"; else echo "FAIL search_cli_ggml"; fi
else
    echo "FAIL search_cli_ggml"; tail -5 "$tmp/err.txt" | sed 's/^/    /'
fi

cp "$tmp/best.precision" "$tmp/first.precision" 2>/dev/null
if "$T" search "${args[@]}" --resume "$tmp/s.jsonl" >"$tmp/out2.txt" 2>"$tmp/err2.txt" &&
   grep -Eq 'evaluations: ([0-9]+) sensitivity \(\1 from the resumed log\), ([0-9]+) gate \(\2 from the log\)' "$tmp/out2.txt" &&
   cmp -s "$tmp/best.precision" "$tmp/first.precision"; then
    echo "ok search_cli_resume"
else
    echo "FAIL search_cli_resume"; grep evaluations "$tmp/out2.txt" | sed 's/^/    /'; tail -3 "$tmp/err2.txt" | sed 's/^/    /'
fi

if ! "$T" search -m "$SRC" -f "$TEXT" -o "$tmp/x" 2>"$tmp/e1" && grep -q -- '--max-kld' "$tmp/e1" &&
   ! "$T" search -m "$SRC" -f "$TEXT" -o "$tmp/x" --max-kld 1 --max-ppl-increase 1% 2>"$tmp/e2" && grep -q -- 'exactly one' "$tmp/e2"; then
    echo "ok search_cli_errors"
else
    echo "FAIL search_cli_errors"
fi

# --max-ppl-increase: P = 0.5 %
P=0.005
pargs=(-m "$SRC" -f "$TEXT" --max-ppl-increase 0.5% -c 128 --chunks 4 --calib-ctx 64 --calib-chunks 2 --max-evals 4
       --types Q3_K,Q4_0,Q8_0 -o "$tmp/ppl.precision" --log "$tmp/p.jsonl" -t 2)
ppl_of() { "$T" perplexity -m "$1" -f "$TEXT" -c 128 --chunks 4 -t 2 2>/dev/null | awk '/^Final estimate: PPL =/ {print $5}'; }
if "$T" search "${pargs[@]}" --write-gguf "$tmp/ppl.gguf" >"$tmp/pout.txt" 2>"$tmp/perr.txt"; then
    ok=1
    grep -q '| gate (PPL+) |' "$tmp/pout.txt" || { echo "    the table's gate column is not PPL+"; ok=0; }
    rejected=$(awk -F'"ppl_ratio":' -v p=$P '/"kind":"gate"/ {split($2, a, ","); if (a[1] - 1 > p) n++} END {print n + 0}' "$tmp/p.jsonl")
    [ "$rejected" -gt 0 ] || { echo "    the gate rejected nothing (vacuous at this P)"; ok=0; }
    mine=$(awk '/^best:/ {for (i = 1; i < NF; i++) if ($i == "ratio") print $(i + 1)}' "$tmp/pout.txt")
    p0=$(ppl_of "$SRC"); p1=$(ppl_of "$tmp/ppl.gguf")
    if ! awk -v a="$p0" -v b="$p1" -v m="$mine" -v p=$P 'BEGIN {r = b / a; d = r - m; if (d < 0) d = -d;
                                                          exit !(a > 0 && r - 1 <= p && d <= 1e-4)}'; then
        echo "    independent PPL $p1 / $p0 does not meet 1 + $P or differs from the search's ratio $mine"; ok=0
    fi
    LP=${LLAMA_PERPLEXITY:-/work/peers/llama.cpp/build/bin/llama-perplexity}
    peer=""
    if [ -x "$LP" ]; then
        asrc=$(realpath "$SRC")   # run from $tmp: llama.cpp may leave a llama.log in its cwd
        l0=$(cd "$tmp" && "$LP" -m "$asrc" -f "$TEXT" -c 128 --chunks 4 -t 2 2>&1 | awk '/^Final estimate: PPL =/ {print $5}')
        l1=$(cd "$tmp" && "$LP" -m "$tmp/ppl.gguf" -f "$TEXT" -c 128 --chunks 4 -t 2 2>&1 | awk '/^Final estimate: PPL =/ {print $5}')
        if awk -v a="$l0" -v b="$l1" -v p=$P 'BEGIN {exit !(a > 0 && b / a - 1 <= p)}'; then peer="; llama-perplexity $l1 / $l0"
        else echo "    llama-perplexity $l1 / $l0 does not meet 1 + $P"; ok=0; fi
    fi
    if [ $ok = 1 ]; then echo "ok search_cli_ppl (PPL $p1 / $p0, search's ratio $mine, $rejected gate runs rejected$peer)"
    else echo "FAIL search_cli_ppl"; fi
else
    echo "FAIL search_cli_ppl"; tail -5 "$tmp/perr.txt" | sed 's/^/    /'
fi

# layer resume: the same sensitivities as full runs
rargs=(-m "$SRC" -f "$TEXT" --max-kld 0.003 -c 128 --chunks 2 --calib-ctx 64 --calib-chunks 2 --max-evals 1
       --types Q4_0,Q8_0 -t 2)
if "$T" search "${rargs[@]}" -o "$tmp/r1.precision" --log "$tmp/r1.jsonl" >"$tmp/r1.txt" 2>/dev/null &&
   "$T" search "${rargs[@]}" --no-layer-resume -o "$tmp/r2.precision" --log "$tmp/r2.jsonl" >"$tmp/r2.txt" 2>/dev/null &&
   grep -q '^layer resume: on;.*[1-9][0-9.]* % of the layer work skipped' "$tmp/r1.txt" &&
   grep -q '^layer resume: off;' "$tmp/r2.txt" &&
   [ "$(grep -c '"kind":"sens"' "$tmp/r1.jsonl")" -gt 0 ] &&
   cmp -s <(grep '"kind":"sens"' "$tmp/r1.jsonl") <(grep '"kind":"sens"' "$tmp/r2.jsonl"); then
    echo "ok search_cli_layer_resume ($(grep -c '"kind":"sens"' "$tmp/r1.jsonl") sensitivities equal; $(grep '^layer resume' "$tmp/r1.txt" | sed 's/.*(//; s/)//'))"
else
    echo "FAIL search_cli_layer_resume"; grep -h '^layer resume' "$tmp/r1.txt" "$tmp/r2.txt" | sed 's/^/    /'
fi

# a limit the source itself does not meet
# (a PPL-increase gate: the source's KLD against its own base file is the uint16
# rounding's and can come out -0.000000, which meets any KLD limit; its PPL ratio
# against the rounded base is 1 + 6.9e-7 here)
if ! "$T" search -m "$SRC" -f "$TEXT" --max-ppl-increase 1e-9% -c 128 --chunks 2 --calib-ctx 64 --types Q8_0 \
       -o "$tmp/u.precision" --log "$tmp/u.jsonl" -t 2 >/dev/null 2>"$tmp/uerr.txt" &&
   grep -q 'the gate cannot be met: the source itself measures PPL increase' "$tmp/uerr.txt" &&
   ! grep -q '"kind":"sens"' "$tmp/u.jsonl"; then
    echo "ok search_cli_unmeetable"
else
    echo "FAIL search_cli_unmeetable"; tail -2 "$tmp/uerr.txt" | sed 's/^/    /'
fi
exit 0
