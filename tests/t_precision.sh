#!/usr/bin/env bash
# t_precision.sh — precision configs from the CLI on the tiny model (docs/precision.md):
# inspect --precision reproduces a file's assignment through quantize --config; a
# --precision config giving every tensor its current type leaves the logits
# byte-identical; a mixed config (attention Q8_0, FFN Q4_K, output F16, embeddings
# Q4_K) applied at load to the Q4_K_M file gives the logits of quantize --config then
# load, byte for byte; a bad rule fails naming its line; live precision in a server
# (tests/server/test_precision_live.py). Prints ok/FAIL/SKIP lines.
set -u
T=${THESEUS:-build/theseus}
S=${SHARED:-../shared}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ok() { echo "ok $1"; }
bad() { echo "FAIL $1"; shift; printf '  %s\n' "$@"; }
F32="$S/fixtures/tiny/tiny-F32.gguf"
Q4="$S/fixtures/tiny/tiny-Q4_K_M.gguf"
if [ ! -x "$T" ] || [ ! -f "$F32" ] || [ ! -f "$Q4" ]; then echo "SKIP precision_cli (no $T or tiny fixtures)"; exit 0; fi
P="The quick brown fox jumps over the lazy dog"

# inspect --precision -> quantize --config -> inspect --precision: the same rules
$T inspect -m "$Q4" --precision | grep -v '^# precision assignment of' >"$tmp/a.cfg"
if $T quantize -q -m "$F32" -o "$tmp/r.gguf" --config "$tmp/a.cfg" 2>"$tmp/err" &&
   $T inspect -m "$tmp/r.gguf" --precision | grep -v '^# precision assignment of' | cmp -s - "$tmp/a.cfg" &&
   grep -q '^blk.2-3.ffn_down.weight Q6_K$' "$tmp/a.cfg" && grep -q '^# all tensors: .* bpw' "$tmp/a.cfg"; then
    ok precision_inspect_roundtrip
else bad precision_inspect_roundtrip "$(head -c 600 "$tmp/err")" "$(head -20 "$tmp/a.cfg")"; fi

# the file's own assignment as --precision: nothing re-quantized, identical logits
$T logits -m "$Q4" -p "$P" --out "$tmp/plain.lg" 2>/dev/null
if $T logits -m "$Q4" --precision "$tmp/a.cfg" --source "$F32" -p "$P" --out "$tmp/same.lg" 2>"$tmp/err" &&
   cmp -s "$tmp/plain.lg" "$tmp/same.lg" && grep -q ': 0 tensors or experts re-quantized' "$tmp/err"; then
    ok precision_identity_logits
else bad precision_identity_logits "$(head -c 600 "$tmp/err")"; fi

# a mixed config at load equals quantize --config then load
printf 'token_embd.weight Q4_K\nblk.*.attn_*.weight Q8_0\nblk.*.ffn_*.weight Q4_K\noutput.weight F16\n' >"$tmp/mixed.cfg"
if $T quantize -q -m "$F32" -o "$tmp/mixed.gguf" --config "$tmp/mixed.cfg" 2>/dev/null &&
   $T logits -m "$tmp/mixed.gguf" -p "$P" --out "$tmp/q.lg" 2>/dev/null &&
   $T logits -m "$Q4" --precision "$tmp/mixed.cfg" --source "$F32" -p "$P" --out "$tmp/l.lg" 2>"$tmp/err" &&
   cmp -s "$tmp/q.lg" "$tmp/l.lg" && grep -q 'precision \[1/' "$tmp/err" && ! cmp -s "$tmp/plain.lg" "$tmp/l.lg"; then
    ok precision_load_equals_quantize
else bad precision_load_equals_quantize "$(head -c 600 "$tmp/err")"; fi

# errors name the line; no --source is refused
printf 'output.weight F16\nblk.7.attn_q.weight Q8_0\n' >"$tmp/bad.cfg"
if ! $T logits -m "$Q4" --precision "$tmp/bad.cfg" --source "$F32" -p "$P" --out "$tmp/x.lg" 2>"$tmp/err" &&
   grep -q "bad.cfg:2: 'blk.7.attn_q.weight' matches no quantizable tensor" "$tmp/err" &&
   ! $T logits -m "$Q4" --precision "$tmp/mixed.cfg" -p "$P" --out "$tmp/x.lg" 2>"$tmp/err2" && grep -q -- '--source' "$tmp/err2" &&
   ! $T quantize -m "$F32" -o "$tmp/y.gguf" --config "$tmp/bad.cfg" 2>"$tmp/err3" && grep -q 'bad.cfg:2:' "$tmp/err3"; then
    ok precision_errors
else bad precision_errors "$(head -c 400 "$tmp/err")" "$(head -c 400 "$tmp/err2")" "$(head -c 400 "$tmp/err3")"; fi

# live precision in a server (tests/server/test_precision_live.py starts its own)
if command -v python3 >/dev/null; then
    THESEUS=$T SHARED=$S TMPDIR_PREC="$tmp" timeout 600 python3 tests/server/test_precision_live.py
else echo "SKIP precision_live (no python3)"; fi
exit 0
