#!/usr/bin/env bash
# t_bench.sh — format checks of `theseus bench` (not timings) on the tiny fixture,
# and bench/gen_model: a small custom shape loads (inspect), runs (run -n 2) and
# gives finite logits. Expected sizes and parameter counts are worked out by hand
# from the shapes below. Prints ok/FAIL/SKIP lines for tests/run.sh.
set -u
BUILD=${BUILD:-build}
T=${THESEUS:-$BUILD/theseus}
S=${SHARED:-../shared}
G=${GEN_MODEL:-$BUILD/bench/gen_model}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ok() { echo "ok $1"; }
bad() { echo "FAIL $1"; shift; printf '  %s\n' "$@"; }
TINY=$S/fixtures/tiny/tiny-Q8_0.gguf

# The tiny fixture: dim 256, 4 layers, 8 heads / 4 KV heads (head 32), FFN 768,
# vocab 4096, separate output. Parameters: 2 x 4096x256 (embd, output)
# + 4 x (256x256 x2 + 256x128 x2 + 256x768 x3 + 2 x 256 norms) + 256 = 5,245,184
# -> "5.25 M". Bytes: 5,242,880 matrix elements in Q8_0 (34 bytes per 32)
# = 5,570,560, plus 2,304 F32 norm values = 9,216 -> 5,579,776 B = 5.32 MiB.
# Read per token: all but token_embd (1,048,576 x 34/32 = 1,114,112 B)
# = 4,465,664 B = 4.26 MiB.
if [ -f "$TINY" ] && $T bench -m "$TINY" -p 8 -n 4 -r 1 -t 2 --bw-mib 64 >"$tmp/b" 2>"$tmp/e"; then
    rows=$(grep -c '^|' "$tmp/b")
    hdr=$(sed -n 1p "$tmp/b" | tr -s ' ')
    pp=$(tr -s ' ' <"$tmp/b" | grep '| pp8 |')
    tg=$(tr -s ' ' <"$tmp/b" | grep '| tg4 |')
    if [ "$rows" = 4 ] &&
       [ "$hdr" = "| model | size | params | backend | threads | test | t/s | GB/s | % BW |" ] &&
       sed -n 2p "$tmp/b" | grep -Eq '^\|( -+:? \|){9}$' &&
       echo "$pp" | grep -Eq '^\| llama 5M Q8_0 \| 5\.32 MiB \| 5\.25 M \| CPU [a-z0-9]+ \| 2 \| pp8 \| [0-9]+\.[0-9]{2} ± 0\.00 \| - \| - \|$' &&
       echo "$tg" | grep -Eq '^\| llama 5M Q8_0 \| 5\.32 MiB \| 5\.25 M \| CPU [a-z0-9]+ \| 2 \| tg4 \| [0-9]+\.[0-9]{2} ± 0\.00 \| [0-9]+\.[0-9]{2} \| [0-9]+\.[0-9] % \|$' &&
       grep -q 'weights read per generated token: 4.26 MiB; read bandwidth: [0-9.]* GB/s (2 threads, 64 MiB, best of 5)' "$tmp/b"; then
        # GB/s must be t/s x 4,465,664 bytes (to the printed rounding)
        tps=$(echo "$tg" | awk -F'|' '{ split($8, a, " "); print a[1] }')
        gbs=$(echo "$tg" | awk -F'|' '{ print $9 + 0 }')
        if awk -v t="$tps" -v g="$gbs" 'BEGIN { e = t * 4465664 / 1e9; exit !(g >= e - 0.006 - e * 1e-3 && g <= e + 0.006 + e * 1e-3) }'; then
            ok "bench_format (tg $tps t/s, $gbs GB/s)"
        else bad bench_format "GB/s $gbs is not t/s $tps x 4465664 bytes"; fi
    else bad bench_format "$(cat "$tmp/b")"; fi
else bad bench_format "$(cat "$tmp/e" 2>/dev/null)"; fi

# -p 0 skips the pp row; -r 3 still gives one row per test
if [ -f "$TINY" ] && $T bench -m "$TINY" -p 0 -n 2 -r 3 -t 1 --bw-mib 0 >"$tmp/b" 2>"$tmp/e" &&
   [ "$(grep -c '^|' "$tmp/b")" = 3 ] && ! grep -q ' pp[0-9]' "$tmp/b" &&
   grep -q 'read bandwidth: not measured' "$tmp/b" && grep -Eq '\| +1 \| +tg2 \|' "$tmp/b"; then ok bench_skip_pp
else bad bench_skip_pp "$(cat "$tmp/b" "$tmp/e")"; fi

# usage errors: exit 2 with a message; a missing model: exit 1 naming the file
$T bench -m "$TINY" -r 0 >"$tmp/o" 2>"$tmp/e"; rc1=$?
$T bench >"$tmp/o" 2>"$tmp/e2"; rc2=$?
$T bench -m /nonexistent.gguf --bw-mib 0 >"$tmp/o" 2>"$tmp/e3"; rc3=$?
if [ $rc1 = 2 ] && grep -q -- '-r' "$tmp/e" && [ $rc2 = 2 ] && grep -q usage "$tmp/e2" &&
   [ $rc3 = 1 ] && grep -q 'theseus bench: .*nonexistent.gguf' "$tmp/e3"; then ok bench_errors
else bad bench_errors "rc $rc1 $rc2 $rc3" "$(cat "$tmp/e" "$tmp/e2" "$tmp/e3")"; fi

# --gpu on a build or machine without one: a clean error, not a crash
if ! $T bench -m "$TINY" --gpu --bw-mib 0 -p 1 -n 1 -r 1 >"$tmp/o" 2>"$tmp/e"; then
    if grep -q 'theseus bench: ' "$tmp/e"; then ok bench_gpu_unavailable; else bad bench_gpu_unavailable "$(cat "$tmp/e")"; fi
else
    if grep -q '| CUDA ' "$tmp/o"; then ok "bench_gpu (a GPU is present)"; else bad bench_gpu "$(cat "$tmp/o")"; fi
fi

# ---------------------------------------------------------------- gen_model
[ -x "$G" ] || make --no-print-directory -s BUILD="$BUILD" bench >/dev/null 2>&1
if [ ! -x "$G" ]; then echo "SKIP gen_model ($G not built: make bench)"; exit 0; fi

# custom shape: dim 256, 2 layers, 4 heads / 2 KV heads (head 64), FFN 512, vocab 300.
# Q4_K_M: Q4_K, with Q6_K for output and for layer 1's attn_v and ffn_down.
# Bytes: Q4_K 144 per 256, Q6_K 210 per 256, F32 norms.
#   token_embd 256x300 Q4_K = 300 x 144          = 43,200
#   layer 0: q 256x(256) -> 256x144, k,v 128x144 each, o 256x144, gate/up 512x144 each,
#            down 256 rows of 512 = 256x288        = 36864+18432+18432+36864+73728+73728+73728 = 331,776
#   layer 1: v and down in Q6_K: v 128x210 = 26,880, down 256x420 = 107,520
#            = 331,776 - 18,432 - 73,728 + 26,880 + 107,520 = 374,016
#   norms 5 x 256 x 4 = 5,120; output 300 x 210 = 63,000
#   total 43,200 + 331,776 + 374,016 + 5,120 + 63,000 = 817,112 bytes
if $G --shape custom --dim 256 --layers 2 --heads 4 --kv-heads 2 --ffn 512 --vocab 300 --type Q4_K_M \
      -o "$tmp/g.gguf" 2>"$tmp/e" && $T inspect -m "$tmp/g.gguf" >"$tmp/i" 2>&1 &&
   grep -q 'tensors (21)' "$tmp/i" &&
   grep -Eq 'blk\.0\.attn_q\.weight +Q4_K +\[256, 256\] +36864 bytes' "$tmp/i" &&
   grep -Eq 'blk\.0\.attn_v\.weight +Q4_K +\[256, 128\] +18432 bytes' "$tmp/i" &&
   grep -Eq 'blk\.1\.attn_v\.weight +Q6_K +\[256, 128\] +26880 bytes' "$tmp/i" &&
   grep -Eq 'blk\.1\.ffn_down\.weight +Q6_K +\[512, 256\] +107520 bytes' "$tmp/i" &&
   grep -Eq 'output\.weight +Q6_K +\[256, 300\] +63000 bytes' "$tmp/i" &&
   grep -Eq 'blk\.0\.ffn_norm\.weight +F32 +\[256\]' "$tmp/i" &&
   grep -q 'tokenizer.ggml.model .*llama' "$tmp/i" &&
   [ "$(awk '/^  [a-z_.0-9]+ +[A-Z0-9_]+ +\[/ { s += $(NF-1) } END { print s }' "$tmp/i")" = 817112 ] &&
   grep -q '2 layers, embedding 256, vocab 300' "$tmp/i"; then ok gen_model_inspect
else bad gen_model_inspect "$(cat "$tmp/e")" "$(head -c 3000 "$tmp/i" 2>/dev/null)"; fi

if $T run -m "$tmp/g.gguf" -p "hello" -n 2 --temp 0 -t 2 >"$tmp/r" 2>&1 && grep -q 'generation: 2 tokens' "$tmp/r"; then
    ok gen_model_run
else bad gen_model_run "$(cat "$tmp/r")"; fi

# finite logits of sane size (weights with sd 1/sqrt(fan-in)): rms within [0.1, 10]
if $T logits -m "$tmp/g.gguf" --tokens 1,100,200,299 --out "$tmp/g.logits" 2>"$tmp/e" &&
   out=$(python3 - "$tmp/g.logits" <<'EOF'
import array, math, struct, sys
d = open(sys.argv[1], 'rb').read()
magic, ver, nt, nv = struct.unpack('<4I', d[:16])
a = array.array('f', d[16 + 4 * nt:])
assert magic == 0x474C4854 and nt == 4 and nv == 300 and len(a) == nt * nv
assert all(math.isfinite(x) for x in a), 'non-finite logits'
rms = math.sqrt(sum(x * x for x in a) / len(a))
assert 0.1 < rms < 10, 'rms %g' % rms
print('rms %.3f' % rms)
EOF
); then ok "gen_model_logits_finite ($out)"
else bad gen_model_logits_finite "$(cat "$tmp/e")" "${out:-}"; fi

# --shape qwen35 (a hybrid) with smaller E/FFN/vocab: 4 layers = 3 DeltaNet (2 norms + 9
# mixer tensors + 3 FFN = 14 each) + 1 attention (2 + 6 + 3 = 11), token_embd, output_norm,
# tied: 55 tensors; the conv taps F32 [4, 2*16*128 + 16*128 = 6144]; it loads as qwen35 and
# gives finite logits of sane size
if $G --shape qwen35 --dim 256 --layers 4 --ffn 512 --vocab 300 --type Q8_0 -o "$tmp/h.gguf" 2>"$tmp/e" &&
   $T inspect -m "$tmp/h.gguf" >"$tmp/i" 2>&1 && grep -q 'tensors (55)' "$tmp/i" &&
   grep -Eq 'general.architecture +string +qwen35' "$tmp/i" &&
   grep -Eq 'blk\.2\.ssm_conv1d\.weight +F32 +\[4, 6144\]' "$tmp/i" &&
   $T logits -m "$tmp/h.gguf" --tokens 1,100,200,299 --out "$tmp/h.logits" 2>>"$tmp/e" &&
   python3 -c "
import array, math, struct, sys
d = open(sys.argv[1], 'rb').read()
a = array.array('f', d[16 + 16:])
assert struct.unpack('<4I', d[:16])[2:] == (4, 300) and len(a) == 1200 and all(math.isfinite(x) for x in a)
assert 0.1 < math.sqrt(sum(x * x for x in a) / len(a)) < 10" "$tmp/h.logits" 2>>"$tmp/e"; then ok gen_model_qwen35
else bad gen_model_qwen35 "$(cat "$tmp/e")" "$(head -c 2000 "$tmp/i" 2>/dev/null)"; fi

# every single type the help lists loads and decodes; --tied drops output.weight
good=1
for ty in F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_NL IQ4_XS Q5_K_M; do
    if ! $G --shape custom --dim 256 --layers 1 --heads 4 --kv-heads 4 --ffn 256 --vocab 260 --type $ty \
            -o "$tmp/t.gguf" 2>"$tmp/e" || ! $T run -m "$tmp/t.gguf" -p hi -n 1 --temp 0 -t 1 >"$tmp/r" 2>&1; then
        good=0; bad "gen_model_types $ty" "$(cat "$tmp/e" "$tmp/r")"
    fi
done
[ $good = 1 ] && ok gen_model_types
if $G --shape custom --dim 256 --layers 1 --heads 4 --kv-heads 4 --ffn 256 --vocab 260 --type Q8_0 --tied \
      -o "$tmp/t.gguf" 2>"$tmp/e" && $T inspect -m "$tmp/t.gguf" >"$tmp/i" 2>&1 &&
   grep -q 'tensors (11)' "$tmp/i" && ! grep -q '^  output\.weight' "$tmp/i" && grep -q 'tied_output' "$tmp/i"; then
    ok gen_model_tied
else bad gen_model_tied "$(cat "$tmp/e")" "$(tail -5 "$tmp/i")"; fi

# bad shapes are refused with a message
if ! $G --shape custom --dim 250 --layers 1 --heads 4 --kv-heads 3 --ffn 256 --vocab 300 --type Q8_0 -o "$tmp/x.gguf" 2>"$tmp/e" &&
   grep -q 'bad shape' "$tmp/e" && [ ! -e "$tmp/x.gguf" ] &&
   ! $G --shape 1.1B --type Q7_0 -o "$tmp/x.gguf" 2>"$tmp/e2" && grep -q "unknown or unsupported type 'Q7_0'" "$tmp/e2"; then
    ok gen_model_bad_args
else bad gen_model_bad_args "$(cat "$tmp/e" "$tmp/e2")"; fi

# --parallel N: one more row in llama-batched-bench's form (format, not timings);
# S counts all tokens over all time, so it lies between S_TG and S_PP
if [ -f "$TINY" ] && $T bench -m "$TINY" -p 0 -n 2 -r 1 -t 2 --bw-mib 0 --parallel 3 --npp 5 --ntg 4 >"$tmp/b" 2>"$tmp/e"; then
    row=$(tr -s ' ' <"$tmp/b" | grep '| npl 3: pp5+tg4 |')
    if [ "$(grep -c '^|' "$tmp/b")" = 4 ] &&
       echo "$row" | grep -Eq '^\| llama 5M Q8_0 \| 5\.32 MiB \| 5\.25 M \| CPU [a-z0-9]+ \| npl 3: pp5\+tg4 \| S_PP [0-9]+\.[0-9] t/s \| S_TG [0-9]+\.[0-9] t/s \| S [0-9]+\.[0-9] t/s \|$' &&
       echo "$row" | awk -F'|' '{ split($7, a, " "); split($8, b, " "); split($9, c, " ");
           lo = a[2] < b[2] ? a[2] : b[2]; hi = a[2] < b[2] ? b[2] : a[2]; exit !(c[2] >= lo - 0.1 && c[2] <= hi + 0.1) }'; then
        ok bench_parallel
    else bad bench_parallel "$(cat "$tmp/b")"; fi
else bad bench_parallel "$(cat "$tmp/e")"; fi
if ! $T bench -m "$TINY" --bw-mib 0 --parallel 0 >"$tmp/o" 2>"$tmp/e" && grep -q -- '--parallel' "$tmp/e"; then
    ok bench_parallel_bad
else bad bench_parallel_bad "$(cat "$tmp/e")"; fi

# A stand-in llama-bench for the two comparison scripts: it logs its arguments and, as the
# real one, prints llama-bench's CSV header and a row for -p (n_gen 0) and one for -n
# (n_prompt 0), each at a fixed 50 t/s, with a quoted field holding commas as
# ik_llama.cpp's "ser" does.
cat >"$tmp/peer" <<'PEER'
#!/bin/sh
echo "$*" >>"$(dirname "$0")/peer.args"
p=0; n=0
while [ $# -gt 0 ]; do case $1 in -p) p=$2; shift ;; -n) n=$2; shift ;; esac; shift; done
echo 'build_commit,ser,n_prompt,n_gen,avg_ts,stddev_ts,test'
[ "$p" -gt 0 ] && echo "\"x\",\"-1,0\",\"$p\",\"0\",\"50.000000\",\"0.0\",\"t\""
[ "$n" -gt 0 ] && echo "\"x\",\"-1,0\",\"0\",\"$n\",\"50.000000\",\"0.0\",\"t\""
exit 0
PEER
chmod +x "$tmp/peer"

# bench/compare-peers.sh against the stand-in: the table must show the peer's 50.00 and
# ours / 50 as the ratio, the peer's extra arguments must reach it, and every repetition
# must run (2 reps x 2 tests = 4 calls).
CP=${COMPARE_PEERS:-bench/compare-peers.sh}
if [ -f "$TINY" ] && [ -x "$CP" ]; then
    "$CP" -b "$T" -m "$TINY" -P "fake=$tmp/peer -rtr 1" -t 1 -p 8 -n 2 -r 2 >"$tmp/cp" 2>"$tmp/cpe"
    row=$(grep '| tiny-Q8_0 | 1 | pp8 |' "$tmp/cp")
    calls=$(wc -l <"$tmp/peer.args" 2>/dev/null || echo 0)
    if echo "$row" | awk -F'|' '{ o = $5 + 0; v = $6 + 0; r = $7 + 0;
           exit !(o > 0 && v == 50 && (r - o / 50) < 0.006 && (o / 50 - r) < 0.006) }' &&
       grep -q '| tiny-Q8_0 | 1 | tg2 | [0-9.]* | 50.00 |' "$tmp/cp" && [ "$calls" = 4 ] &&
       grep -q -- '-rtr 1' "$tmp/peer.args"; then
        ok compare_peers
    else bad compare_peers "calls $calls" "$(cat "$tmp/cp" "$tmp/cpe")"; fi
else echo "SKIP compare_peers (no tiny fixture or $CP)"; fi

# bench/gpu/compare-gpu.sh with the same stand-in llama-bench and a stand-in
# llama-batched-bench (its table, S_TG 40 t/s for every stream count it is given),
# ours on the CPU (--ours-args): pp / tg / bb rows with the peer's 50.0 / 40.0 and
# ours / peer; two rounds, so each tool runs twice.
CG=${COMPARE_GPU:-bench/gpu/compare-gpu.sh}
if [ -f "$TINY" ] && [ -x "$CG" ]; then
    : >"$tmp/peer.args"
    cat >"$tmp/batched" <<'PEER'
#!/bin/sh
echo "$*" >>"$(dirname "$0")/batched.args"
pp=0; tg=0; npl=1
while [ $# -gt 0 ]; do case $1 in -npp) pp=$2; shift ;; -ntg) tg=$2; shift ;; -npl) npl=$2; shift ;; esac; shift; done
echo '|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |'
echo '|-------|--------|------|--------|----------|----------|----------|----------|----------|----------|'
for b in $(echo "$npl" | tr ',' ' '); do
    echo "|  $pp |  $tg |  $b |  1 |  0.1 |  100.00 |  0.2 |  40.00 |  0.3 |  60.00 |"
done
PEER
    chmod +x "$tmp/batched"
    "$CG" -b "$T" --ours-args "-t 1 --bw-mib 0" -P "$tmp/peer" -Q "$tmp/batched" -p 8 -n 2 -B 2,3 --npp 4 --ntg 2 \
        -r 1 -R 2 -m "$TINY" >"$tmp/cg" 2>"$tmp/cge"
    rows_ok=1
    for t in pp8:50.0 tg2:50.0 bb2:40.0 bb3:40.0; do
        row=$(grep "| tiny-Q8_0 | ${t%%:*} |" "$tmp/cg")
        echo "$row" | awk -F'|' -v want="${t#*:}" '{ o = $4 + 0; v = $5 + 0; r = $6 + 0;
            exit !(o > 0 && v == want && (r - o / v) < 0.006 && (o / v - r) < 0.006) }' || rows_ok=0
    done
    calls=$(wc -l <"$tmp/peer.args" 2>/dev/null || echo 0); bcalls=$(wc -l <"$tmp/batched.args" 2>/dev/null || echo 0)
    if [ $rows_ok = 1 ] && [ "$calls" = 2 ] && [ "$bcalls" = 2 ] && grep -q -- '-npl 2,3' "$tmp/batched.args" &&
       grep -q -- '-ngl 99 -fa 1' "$tmp/peer.args"; then
        ok compare_gpu
    else bad compare_gpu "calls $calls / $bcalls" "$(cat "$tmp/cg" "$tmp/cge")"; fi
else echo "SKIP compare_gpu (no tiny fixture or $CG)"; fi
