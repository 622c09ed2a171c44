#!/usr/bin/env bash
# t_search.sh — `theseus search` from the command line on the tiny fixture (seconds):
#   search_cli_ggml: --types ggml --write-gguf: BEST.precision, the frontier table and
#     PNG (pngfix, from Debian's libpng-tools, checks every chunk's CRC and the zlib
#     stream when it is installed) are written; the written GGUF holds only GGML types
#     (inspect --precision), and an independent `theseus perplexity --kl-divergence`
#     of it against the search's gate base file meets the budget.
#   search_cli_resume: --resume of the same log redoes no evaluation.
#   search_cli_errors: no gate, or two gates, is a usage error naming the options.
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
exit 0
