#!/usr/bin/env bash
# t_quantize.sh — `theseus quantize` end to end: tiny-F32.gguf quantized with each
# llama.cpp mix must load and give logits matching llama.cpp's golden for that mix
# (rel-L2 <= 5e-2, top-1 >= 0.9, compared by shared/tools/cmp_logits.py), print a
# progress line per tensor, and fail cleanly (message, exit code) on bad input.
# Prints ok/FAIL/SKIP lines for tests/run.sh.
set -u
T=${THESEUS:-build/theseus}
S=${SHARED:-../shared}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ok() { echo "ok $1"; }
bad() { echo "FAIL $1"; shift; printf '  %s\n' "$@"; }
if [ ! -x "$T" ]; then echo "SKIP quantize_cli (no $T)"; exit 0; fi
F32="$S/fixtures/tiny/tiny-F32.gguf"
PROMPT="The quick brown fox jumps over the lazy dog. Once upon a time, there was"

# progress lines: one per tensor on stderr, "[ 16/ 39] name  F32 -> Q4_K  [shape]", in
# llama-quantize's order (output.weight, output_norm, token_embd, then blk.0 by name ...)
if $T quantize -m "$F32" -o "$tmp/q4km.gguf" --type Q4_K_M -t 2 >"$tmp/out" 2>"$tmp/err" &&
   [ "$(grep -c '^\[ *[0-9]*/ *39\] ' "$tmp/err")" = 39 ] &&
   grep -Eq '^\[ *16/ *39\] blk\.1\.attn_q\.weight +F32 -> Q4_K +\[256, 256\]$' "$tmp/err" &&
   grep -Eq '^\[ *1/ *39\] output\.weight +F32 -> Q6_K +\[256, 4096\]$' "$tmp/err" &&
   grep -Eq 'blk\.0\.attn_norm\.weight +F32 -> F32 +\[256\]  \(copied\)' "$tmp/err" && [ ! -s "$tmp/out" ]; then
    ok progress_lines
else bad progress_lines "$(head -c 800 "$tmp/err")"; fi

# every mix: loads, runs, matches llama.cpp's logits for that mix
if ! command -v python3 >/dev/null; then echo "SKIP quantize_logits (no python3)"; else
    for mix in Q4_K_M Q3_K_M Q5_K_M Q2_K Q6_K IQ4_XS IQ4_NL Q4_0 Q8_0; do
        out=""
        if $T quantize -q -m "$F32" -o "$tmp/m.gguf" --type $mix 2>"$tmp/err" &&
           $T logits -m "$tmp/m.gguf" -p "$PROMPT" --out "$tmp/m.logits" -t 2 2>>"$tmp/err" &&
           out=$(python3 "$S/tools/cmp_logits.py" "$tmp/m.logits" "$S/fixtures/tiny/golden/tiny-$mix.logits" 5e-2 0.9); then
            ok "quantize_logits_$mix ($out)"
        else bad "quantize_logits_$mix" "$(tail -c 600 "$tmp/err")" "$out"; fi
    done
fi

# the file type written is llama.cpp's number
if $T inspect -m "$tmp/q4km.gguf" 2>/dev/null | grep -Eq 'general\.file_type +u32 +15$' &&
   $T inspect -m "$tmp/q4km.gguf" 2>/dev/null | grep -Eq 'general\.quantization_version +u32 +2$'; then
    ok file_type_written
else bad file_type_written "$($T inspect -m "$tmp/q4km.gguf" 2>&1 | grep general)"; fi

# errors: unknown type lists the valid ones; missing arguments; unreadable input; unwritable output
$T quantize -m "$F32" -o "$tmp/x.gguf" --type Q4_K_Z >/dev/null 2>"$tmp/e"; rc=$?
if [ $rc -eq 1 ] && grep -q "unknown quantization type 'Q4_K_Z'" "$tmp/e" && grep -q 'Q4_K_M' "$tmp/e" && grep -q 'IQ4_XS' "$tmp/e" &&
   [ ! -e "$tmp/x.gguf" ]; then ok unknown_type
else bad unknown_type "rc=$rc $(cat "$tmp/e")"; fi
$T quantize -m "$F32" --type Q4_K_M >/dev/null 2>"$tmp/e"; rc=$?
if [ $rc -eq 2 ] && grep -q 'usage' "$tmp/e"; then ok missing_output_arg; else bad missing_output_arg "rc=$rc $(cat "$tmp/e")"; fi
$T quantize -m /nonexistent.gguf -o "$tmp/x.gguf" --type Q8_0 >/dev/null 2>"$tmp/e"; rc=$?
if [ $rc -eq 1 ] && grep -q "theseus quantize: .*/nonexistent.gguf" "$tmp/e"; then ok missing_input
else bad missing_input "rc=$rc $(cat "$tmp/e")"; fi
$T quantize -q -m "$F32" -o /nonexistent-dir/x.gguf --type Q8_0 >/dev/null 2>"$tmp/e"; rc=$?
if [ $rc -eq 1 ] && grep -q "/nonexistent-dir/x.gguf" "$tmp/e" && ! grep -qi 'segmentation\|abort' "$tmp/e"; then ok unwritable_output
else bad unwritable_output "rc=$rc $(cat "$tmp/e")"; fi
if $T quantize --help | grep -q -- '--type' && $T --help | grep -q quantize; then ok quantize_help; else bad quantize_help; fi
