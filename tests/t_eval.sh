#!/usr/bin/env bash
# t_eval.sh — `theseus perplexity` end to end: SmolLM2-135M Q4_1 and Gemma 3 270M
# Q4_K_M over /usr/share/common-licenses/GPL-3 at -c 512 against llama-perplexity's
# printed values (within 0.3 %), the output lines and labels, --json, a base file
# written and compared through the CLI, llama.cpp's committed base file read by our
# candidate, and clean errors on bad input. The goldens come from
# tests/peer/make_ppl_goldens.sh (its output is in tests/peer/goldens/); the library
# side is tests/test_eval.c. Prints ok/FAIL/SKIP lines for tests/run.sh.
set -u
T=${THESEUS:-build/theseus}
S=${SHARED:-../shared}
M=${THESEUS_MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
G=models/gemma-3-270m-Q4_K_M.gguf
TEXT=/usr/share/common-licenses/GPL-3
TINY=$S/fixtures/tiny
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ok() { echo "ok $1"; }
bad() { echo "FAIL $1"; shift; printf '  %s\n' "$@"; }
if [ ! -x "$T" ]; then echo "SKIP eval_cli (no $T)"; exit 0; fi
if [ ! -r "$TEXT" ]; then echo "SKIP eval_cli (no $TEXT)"; exit 0; fi

# within REL (a fraction) of the golden?
near() { awk -v a="$1" -v b="$2" -v r="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= r * (b < 0 ? -b : b)) }'; }
final_ppl() { sed -n 's/^Final estimate: PPL = \([0-9.]*\) +\/- .*/\1/p' "$1"; }

# SmolLM2-135M-Instruct Q4_1, the whole text at -c 512 (14 chunks, 4 a pass).
# llama.cpp c392e50 (CPU, -t 2):
#   llama-perplexity -m models/SmolLM2-135M-Instruct.Q4_1.gguf -f /usr/share/common-licenses/GPL-3 -c 512 -t 2
#   -> [1]16.2777,...,[14]18.3541,  Final estimate: PPL = 18.3541 +/- 0.86202
LLAMA_SMOL_PPL=18.3541
if [ ! -f "$M" ]; then echo "SKIP ppl_smollm2 (no $M)"; else
    start=$(date +%s.%N)
    if $T perplexity -m "$M" -f "$TEXT" -c 512 -t 2 --json "$tmp/smol.json" >"$tmp/out" 2>"$tmp/err"; then
        secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
        p=$(final_ppl "$tmp/out")
        if [ -n "$p" ] && near "$p" $LLAMA_SMOL_PPL 0.003 && grep -Eq '^\[1\][0-9]+\.[0-9]{4},.*\[14\][0-9.]+,$' "$tmp/out" &&
           ! grep -q '\[15\]' "$tmp/out" && [ "$(tail -n 1 "$tmp/out" | cut -c1-22)" = "Final estimate: PPL = " ]; then
            ok "ppl_smollm2 (PPL $p, llama.cpp $LLAMA_SMOL_PPL, $secs s)"
        else bad ppl_smollm2 "PPL '$p' vs $LLAMA_SMOL_PPL" "$(cat "$tmp/out")"; fi
        # the JSON holds the printed figures
        if command -v python3 >/dev/null; then
            if python3 - "$tmp/smol.json" "$p" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
assert abs(j["ppl"] - float(sys.argv[2])) < 1e-4, j["ppl"]
assert j["run"]["n_ctx"] == 512 and j["run"]["n_chunks"] == 14 and j["run"]["n_seq"] == 4, j["run"]
assert j["run"]["count"] == 14 * 255 and len(j["running_ppl"]) == 14 and len(j["chunk_ppl"]) == 14
assert abs(j["running_ppl"][-1] - j["ppl"]) < 1e-9 and j["ppl_unc"] > 0 and "kld" not in j
EOF
            then ok json_ppl; else bad json_ppl "$(head -c 600 "$tmp/smol.json")"; fi
        fi
    else bad ppl_smollm2 "$(tail -c 600 "$tmp/err")"; fi
fi

# Gemma 3 270M Q4_K_M (BOS in place of each chunk's first token), the whole text at
# -c 512 (14 chunks). ik_llama.cpp 8337e4c (CPU, -DGGML_IQK_FLASH_ATTENTION=OFF; see
# tests/peer/make_ppl_goldens.sh), output in tests/peer/goldens/gemma3-270m-q4_k_m-c512.txt:
#   llama-perplexity -m models/gemma-3-270m-Q4_K_M.gguf -f /usr/share/common-licenses/GPL-3 -c 512 -t 2 -no-fa
#   -> [1]12.9031,[2]13.8852,[3]13.8055,[4]15.1426,...,[14]13.8737,  Final estimate: PPL over 14 chunks for n_ctx=512 = 13.8737 +/- 0.64731
IK_GEMMA3_PPL=13.8737
if [ ! -f "$G" ]; then echo "SKIP ppl_gemma3 (no $G)"; else
    if $T perplexity -m "$G" -f "$TEXT" -c 512 -t 2 >"$tmp/out" 2>"$tmp/err"; then
        p=$(final_ppl "$tmp/out")
        if [ -n "$p" ] && near "$p" $IK_GEMMA3_PPL 0.003 && grep -q '\[14\]' "$tmp/out" && ! grep -q '\[15\]' "$tmp/out"; then
            ok "ppl_gemma3 (PPL $p over 14 chunks, ik_llama.cpp $IK_GEMMA3_PPL)"
        else bad ppl_gemma3 "PPL '$p' vs $IK_GEMMA3_PPL" "$(cat "$tmp/out")"; fi
    else bad ppl_gemma3 "$(tail -c 600 "$tmp/err")"; fi
fi

# A base file written by the CLI (tiny F16, chunks of 64) and a candidate compared
# with it: llama-perplexity's sections and labels, the JSON figures.
if $T perplexity -m "$TINY/tiny-F16.gguf" -f "$TEXT" -c 64 --chunks 6 -b 256 -t 2 --kl-divergence-base "$tmp/f16.kld" \
       >"$tmp/bout" 2>"$tmp/err" &&
   $T perplexity -m "$TINY/tiny-Q4_0.gguf" --kl-divergence-base "$tmp/f16.kld" --kl-divergence -t 2 --json "$tmp/k.json" \
       >"$tmp/kout" 2>>"$tmp/err"; then
    # 6 chunks of 31 scored positions, rows of 4096 + 4 uint16, header 20 bytes, 6*64 tokens
    size=$(stat -c %s "$tmp/f16.kld")
    miss=""
    for l in 'chunk             PPL               ln(PPL(Q)/PPL(base))' '====== Perplexity statistics ======' \
             'Mean PPL(Q)                   :' 'Mean PPL(base)                :' 'Cor(ln(PPL(Q)), ln(PPL(base))):' \
             'Mean ln(PPL(Q)/PPL(base))     :' 'Mean PPL(Q)/PPL(base)         :' 'Mean PPL(Q)-PPL(base)         :' \
             '====== KL divergence statistics ======' 'Mean    KLD:' 'Maximum KLD:' '99.9%   KLD:' '99.0%   KLD:' \
             '95.0%   KLD:' '90.0%   KLD:' 'Median  KLD:' '10.0%   KLD:' ' 5.0%   KLD:' ' 1.0%   KLD:' 'Minimum KLD:' \
             '====== Token probability statistics ======' 'Mean    Δp:' 'Maximum Δp:' 'Median  Δp:' 'RMS Δp    :' 'Same top p:'; do
        grep -qF -- "$l" "$tmp/kout" || miss="$miss [$l]"
    done
    if [ "$size" = $((20 + 6 * 64 * 4 + 6 * 31 * 4100 * 2)) ] && [ -z "$miss" ] && grep -Eq '^   6 ' "$tmp/kout" &&
       grep -q '^\[6\]' <(tr ',' '\n' <"$tmp/bout"); then
        ok "kld_cli ($(grep 'Mean    KLD' "$tmp/kout"))"
    else bad kld_cli "size $size, missing:$miss" "$(cat "$tmp/kout")"; fi
    if command -v python3 >/dev/null; then
        kl=$(sed -n 's/^Mean    KLD: *\([0-9.]*\) .*/\1/p' "$tmp/kout")
        if python3 - "$tmp/k.json" "$kl" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
k = j["kld"]
assert abs(k["kld"] - float(sys.argv[2])) < 1e-6 and k["count"] == 6 * 31 and j["run"]["n_ctx"] == 64
for f in ("ppl", "ppl_base", "cor_ln_ppl", "ln_ppl_ratio", "ppl_ratio", "ppl_diff", "kld_unc", "kld_max", "kld_p99_9",
          "kld_p99", "kld_p95", "kld_p90", "kld_median", "kld_p10", "kld_p5", "kld_p1", "kld_min", "dp", "dp_rms",
          "same_top", "cor_p"):
    assert f in k, f
assert k["kld_min"] <= k["kld_median"] <= k["kld_max"] and 0 <= k["same_top"] <= 1 and abs(j["ppl"] - k["ppl"]) < 1e-9
EOF
        then ok json_kld; else bad json_kld "$(head -c 800 "$tmp/k.json")"; fi
    fi
else bad kld_cli "$(tail -c 800 "$tmp/err")"; fi

# llama.cpp's base file (tests/peer/tiny-F16-c32.kld) read by our Q4_0 candidate;
# llama.cpp's own Q4_0 run on it printed KL Divergence 0.00269 ± 0.00003 (test_eval.c).
if $T perplexity -m "$TINY/tiny-Q4_0.gguf" --kl-divergence-base tests/peer/tiny-F16-c32.kld --kl-divergence -t 2 \
       >"$tmp/lout" 2>"$tmp/err"; then
    kl=$(sed -n 's/^Mean    KLD: *\([0-9.]*\) .*/\1/p' "$tmp/lout")
    if [ -n "$kl" ] && near "$kl" 0.00269 0.02; then ok "llama_base_cli (Mean KLD $kl, llama.cpp 0.00269)"
    else bad llama_base_cli "KLD '$kl'" "$(cat "$tmp/lout")"; fi
else bad llama_base_cli "$(tail -c 600 "$tmp/err")"; fi

# bad input: each a clear error (exit 1, the file named), usage errors exit 2
head -c 2000 "$TEXT" >"$tmp/short.txt"
$T perplexity -m "$TINY/tiny-Q4_0.gguf" -f "$tmp/short.txt" -c 512 >/dev/null 2>"$tmp/e"; rc=$?
if [ $rc -eq 1 ] && grep -q "short.txt: the text tokenizes to only [0-9]* tokens" "$tmp/e" && grep -q 'at least 1024' "$tmp/e"; then
    ok short_text; else bad short_text "rc=$rc $(cat "$tmp/e")"; fi
head -c 200000 tests/peer/tiny-F16-c32.kld >"$tmp/trunc.kld"
$T perplexity -m "$TINY/tiny-Q4_0.gguf" --kl-divergence-base "$tmp/trunc.kld" --kl-divergence >/dev/null 2>"$tmp/e"; rc=$?
if [ $rc -eq 1 ] && grep -q "trunc.kld: truncated: 200000 bytes, 369404 expected" "$tmp/e" && grep -q 'inside chunk 2' "$tmp/e"; then
    ok truncated_base; else bad truncated_base "rc=$rc $(cat "$tmp/e")"; fi
if [ -f "$M" ]; then
    $T perplexity -m "$M" --kl-divergence-base tests/peer/tiny-F16-c32.kld --kl-divergence >/dev/null 2>"$tmp/e"; rc=$?
    if [ $rc -eq 1 ] && grep -q "tiny-F16-c32.kld: the base file is for a vocabulary of 4096 tokens, the model (.*) has 49152" "$tmp/e"; then
        ok other_vocab_base; else bad other_vocab_base "rc=$rc $(cat "$tmp/e")"; fi
fi
$T perplexity -m "$TINY/tiny-Q4_0.gguf" --kl-divergence-base tests/peer/tiny-F16-c32.kld --kl-divergence -c 512 >/dev/null 2>"$tmp/e"; rc=$?
if [ $rc -eq 1 ] && grep -q "chunks of 32 tokens, not 512" "$tmp/e"; then ok base_ctx_mismatch; else bad base_ctx_mismatch "rc=$rc $(cat "$tmp/e")"; fi
$T perplexity -m "$TINY/tiny-Q4_0.gguf" -f "$tmp/short.txt" --kl-divergence-base "$tmp/text.txt" --kl-divergence >/dev/null 2>"$tmp/e"; rc=$?
if [ $rc -eq 1 ] && grep -q "text.txt: cannot open" "$tmp/e"; then ok missing_base; else bad missing_base "rc=$rc $(cat "$tmp/e")"; fi
cp "$tmp/short.txt" "$tmp/text.kld"
$T perplexity -m "$TINY/tiny-Q4_0.gguf" --kl-divergence-base "$tmp/text.kld" --kl-divergence >/dev/null 2>"$tmp/e"; rc=$?
if [ $rc -eq 1 ] && grep -q 'text.kld: not a KL-divergence base file' "$tmp/e"; then ok not_a_base; else bad not_a_base "rc=$rc $(cat "$tmp/e")"; fi
$T perplexity -m "$TINY/tiny-Q4_0.gguf" -f /nonexistent.txt >/dev/null 2>"$tmp/e"; rc=$?
if [ $rc -eq 1 ] && grep -q '/nonexistent.txt: cannot read' "$tmp/e"; then ok missing_text; else bad missing_text "rc=$rc $(cat "$tmp/e")"; fi
$T perplexity -m "$TINY/tiny-Q4_0.gguf" --kl-divergence >/dev/null 2>"$tmp/e"; rc1=$?
$T perplexity -m "$TINY/tiny-Q4_0.gguf" >/dev/null 2>"$tmp/e2"; rc2=$?
$T perplexity -m "$TINY/tiny-Q4_0.gguf" -f "$TEXT" -c 2 >/dev/null 2>"$tmp/e3"; rc3=$?
if [ $rc1 -eq 2 ] && grep -q 'needs --kl-divergence-base' "$tmp/e" && [ $rc2 -eq 2 ] && grep -q usage "$tmp/e2" &&
   [ $rc3 -eq 2 ] && grep -q -- '-c needs an integer' "$tmp/e3"; then ok usage_errors
else bad usage_errors "rc=$rc1/$rc2/$rc3 $(cat "$tmp/e" "$tmp/e2" "$tmp/e3")"; fi
if ! $T perplexity -m "$TINY/tiny-Q4_0.gguf" -f "$TEXT" --gpu --chunks 2 >/dev/null 2>"$tmp/e"; then
    if grep -qi 'cuda\|gpu' "$tmp/e" && ! grep -qi 'segmentation\|abort' "$tmp/e"; then ok gpu_flag_without_gpu
    else bad gpu_flag_without_gpu "$(cat "$tmp/e")"; fi
else echo "SKIP gpu_flag_without_gpu (a GPU is here: the --gpu run succeeded)"; fi
if $T perplexity --help | grep -q -- '--kl-divergence-base' && $T --help | grep -q perplexity; then ok perplexity_help; else bad perplexity_help; fi

# ---- router agreement through the CLI (issue 17 part 2): olmoe against itself (0 flips
# in both layers) and a candidate with another router (the Q8_0 file of the same model:
# the quantized router flips some near-ties); the table and the JSON.
OL=$S/fixtures/arch/olmoe
if [ -f "$OL/model-F32.gguf" ] && [ -f "$OL/model-Q8_0.gguf" ]; then
    if $T perplexity -m "$OL/model-F32.gguf" -f "$TEXT" -c 64 --chunks 4 -t 2 --kl-divergence-base "$tmp/ol.kld" \
           --router-base "$tmp/ol.rt" >/dev/null 2>"$tmp/e" &&
       $T perplexity -m "$OL/model-F32.gguf" --kl-divergence-base "$tmp/ol.kld" --kl-divergence --router-base "$tmp/ol.rt" \
           -t 2 >"$tmp/self" 2>>"$tmp/e" &&
       $T perplexity -m "$OL/model-Q8_0.gguf" --kl-divergence-base "$tmp/ol.kld" --kl-divergence --router-base "$tmp/ol.rt" \
           -t 2 --json "$tmp/olq.json" >"$tmp/q8" 2>>"$tmp/e"; then
        # 4 chunks x 31 positions x 2 layers x (2 ids + 3 scores) x 4 bytes + 40 header bytes
        size=$(stat -c %s "$tmp/ol.rt")
        if [ "$size" -eq $((4 * 31 * 2 * 20 + 40)) ] && grep -q '^====== Router agreement (2 of 8 experts) ======' "$tmp/self" &&
           [ "$(grep -cE '^ +[01] +124 +0 +0.000 %' "$tmp/self")" -eq 2 ] &&
           python3 - "$tmp/olq.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))["router"]
assert j["k"] == 2 and j["n_expert"] == 8 and len(j["layers"]) == 2, j
assert sum(l["flips"] for l in j["layers"]) > 0
for l in j["layers"]:
    assert l["positions"] == 124 and len(l["flip_list"]) == l["flips"]
    assert all(f["gap"] >= 0 and 32 <= f["pos"] <= 62 for f in l["flip_list"])
PY
        then ok "router_cli (self: 0 flips; Q8_0: $(grep -E '^ +1 +124' "$tmp/q8" | awk '{print $3}') flips in layer 1)"
        else bad router_cli "size $size" "$(cat "$tmp/self" "$tmp/q8" | tail -8)"; fi
    else bad router_cli "$(tail -c 600 "$tmp/e")"; fi
    $T perplexity -m "$TINY/tiny-F32.gguf" -f "$TEXT" -c 32 --chunks 2 --router-base "$tmp/d.rt" >/dev/null 2>"$tmp/e"; rc=$?
    if [ $rc -eq 1 ] && grep -q 'no mixture-of-experts layer' "$tmp/e" && [ ! -e "$tmp/d.rt" ]; then ok router_dense_error
    else bad router_dense_error "rc=$rc $(cat "$tmp/e")"; fi
else echo "SKIP router_cli (no olmoe fixture)"; fi

# ---- theseus imatrix against llama-imatrix's file (tests/peer/make_imatrix_goldens.sh):
# the same entries and ncall, values within 2e-3 relative, the same PPL line.
if $T imatrix -m "$TINY/tiny-F32.gguf" -f "$TEXT" -o "$tmp/im.dat" -c 128 --chunks 4 -t 2 >"$tmp/out" 2>"$tmp/e"; then
    if grep -q '^Final estimate: PPL = 4227\.' "$tmp/out" && python3 - "$tmp/im.dat" tests/peer/tiny-F32-c128.imatrix.dat <<'PY'
import struct, sys
def load(p):
    d = open(p, "rb").read(); o = 4; r = {}
    for _ in range(struct.unpack_from("<i", d)[0]):
        l, = struct.unpack_from("<i", d, o); o += 4
        name = d[o:o + l].decode(); o += l
        nc, nv = struct.unpack_from("<ii", d, o); o += 8
        r[name] = (nc, struct.unpack_from("<%df" % nv, d, o)); o += 4 * nv
    return r, d[o:]
a, ta = load(sys.argv[1]); b, tb = load(sys.argv[2])
assert set(a) == set(b) and ta == tb, (sorted(set(a) ^ set(b)), ta, tb)
for k in b:
    assert a[k][0] == b[k][0] and len(a[k][1]) == len(b[k][1]), k
    assert all(abs(x - y) <= 2e-3 * max(abs(y), 1e-6) for x, y in zip(a[k][1], b[k][1])), k
PY
    then ok imatrix_cli; else bad imatrix_cli "$(cat "$tmp/out")"; fi
else bad imatrix_cli "$(tail -c 600 "$tmp/e")"; fi
$T imatrix -m "$TINY/tiny-F32.gguf" -f "$tmp/short.txt" -o "$tmp/im2.dat" >/dev/null 2>"$tmp/e"; rc=$?
if [ $rc -eq 1 ] && grep -q 'short.txt: the text tokenizes to only' "$tmp/e" && [ ! -e "$tmp/im2.dat" ]; then ok imatrix_short_text
else bad imatrix_short_text "rc=$rc $(cat "$tmp/e")"; fi
