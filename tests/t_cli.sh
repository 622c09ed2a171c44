#!/usr/bin/env bash
# t_cli.sh — end-to-end checks of the theseus CLI: logits against llama.cpp's
# goldens (through the prompt text, so tokenization is covered too), inspect,
# run/chat with the default model (greedy "Paris" answer), and clean errors on
# bad input. Prints ok/FAIL/SKIP lines for tests/run.sh.
set -u
T=${THESEUS:-build/theseus}
S=${SHARED:-../shared}
M=${THESEUS_MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ok() { echo "ok $1"; }
bad() { echo "FAIL $1"; shift; printf '  %s\n' "$@"; }
PROMPT="The quick brown fox jumps over the lazy dog. Once upon a time, there was"

# logits from the prompt text must match the golden (F32 end to end: 1e-4)
if $T logits -m "$S/fixtures/tiny/tiny-F32.gguf" -p "$PROMPT" --out "$tmp/f32.logits" -t 2 2>"$tmp/err" &&
   out=$(python3 "$S/tools/cmp_logits.py" "$tmp/f32.logits" "$S/fixtures/tiny/golden/tiny-F32.logits" 1e-4 0.9); then
    ok "logits_prompt_f32 ($out)"
else bad logits_prompt_f32 "$(cat "$tmp/err")" "${out:-}"; fi

# --tokens path, quantized model
if $T logits -m "$S/fixtures/tiny/tiny-Q4_K_M.gguf" --tokens 1,450,439,860,3347,113,1701,123,432,398,567,975,278,425,1537,437,106,49,1551,346,2501,263,931,47,727,471 \
      --out "$tmp/q.logits" 2>"$tmp/err" &&
   out=$(python3 "$S/tools/cmp_logits.py" "$tmp/q.logits" "$S/fixtures/tiny/golden/tiny-Q4_K_M.logits" 5e-2 0.9); then
    ok "logits_tokens_q4_k_m ($out)"
else bad logits_tokens_q4_k_m "$(cat "$tmp/err")" "${out:-}"; fi

# inspect lists metadata and tensors with type, shape and bytes
if $T inspect -m "$S/fixtures/tiny/tiny-Q4_K_M.gguf" >"$tmp/insp" 2>&1 &&
   grep -q 'general.architecture' "$tmp/insp" && grep -Eq 'blk\.0\.attn_q\.weight +Q4_K +\[256, 256\] +36864 bytes' "$tmp/insp" &&
   grep -q 'architecture llama' "$tmp/insp"; then ok inspect
else bad inspect "$(head -c 600 "$tmp/insp")"; fi

# bad input: a missing file, a truncated file, a non-GGUF file each give an error naming it
head -c 5000 "$S/fixtures/tiny/tiny-F32.gguf" >"$tmp/trunc.gguf"
echo "not a model" >"$tmp/text.gguf"
good=1
for f in /nonexistent.gguf "$tmp/trunc.gguf" "$tmp/text.gguf"; do
    $T run -m "$f" -p hi -n 1 >"$tmp/o" 2>"$tmp/e"; rc=$?
    if [ $rc -eq 0 ] || ! grep -q "theseus run: " "$tmp/e" || grep -qi 'segmentation\|abort' "$tmp/e"; then good=0; bad "bad_model_file $f" "rc=$rc $(cat "$tmp/e")"; fi
done
[ $good = 1 ] && ok bad_model_files

# bad options
if ! $T run -m "$M" -p hi -n abc >/dev/null 2>"$tmp/e" && grep -q -- "-n needs an integer" "$tmp/e"; then ok bad_option
else bad bad_option "$(cat "$tmp/e")"; fi

if [ ! -s "$M" ]; then echo "SKIP smollm_paris (no default model at $M)"; echo "SKIP smollm_chat"; echo "SKIP run_chat_golden"; exit 0; fi

# the default model answers the capital of France, greedy
q='<|im_start|>user
What is the capital of France?<|im_end|>
<|im_start|>assistant
'
if $T run -m "$M" -p "$q" --special --temp 0 -n 24 >"$tmp/run" 2>"$tmp/err" && grep -q "Paris" "$tmp/run" &&
   grep -Eq 'prompt: [0-9]+ tokens, [0-9.]+ tok/s \| generation: [0-9]+ tokens, [0-9.]+ tok/s' "$tmp/err"; then
    ok "smollm_paris ($(tr '\n' ' ' <"$tmp/run" | head -c 80))"
else bad smollm_paris "$(cat "$tmp/run")" "$(tail -3 "$tmp/err")"; fi

# chat: two lines on a pipe give two answers (Paris, then Berlin: the KV prefix is reused)
printf 'What is the capital of France?\nAnd of Germany?\n' | $T chat -m "$M" --temp 0 -n 32 --system "You are a helpful assistant." >"$tmp/chat" 2>"$tmp/err"
if [ $? -eq 0 ] && grep -q Paris "$tmp/chat" && grep -q Berlin "$tmp/chat"; then ok "smollm_chat ($(tr '\n' '|' <"$tmp/chat" | head -c 100))"
else bad smollm_chat "$(cat "$tmp/chat")" "$(cat "$tmp/err")"; fi

# same seed, same text; different seed, (almost surely) different text
a=$($T run -m "$M" -p "Once upon a time" -n 24 --seed 7 --temp 1.0 2>/dev/null)
b=$($T run -m "$M" -p "Once upon a time" -n 24 --seed 7 --temp 1.0 2>/dev/null)
c=$($T run -m "$M" -p "Once upon a time" -n 24 --seed 8 --temp 1.0 2>/dev/null)
if [ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" != "$c" ]; then ok seed_reproducible
else bad seed_reproducible "a=$a" "b=$b" "c=$c"; fi

# run/chat through the runtime give the same text as the loop they replaced
# (tools/generate.c): every case of tests/golden/run_chat/cases.txt (greedy,
# seeded, penalties, a full context, chat turns reusing the KV prefix, a chat
# reply cut by -n) against the output of the pre-runtime binary, under the
# reference kernels (TH_CPU=generic) so the bytes are the same on any x86-64.
G=tests/golden/run_chat
if [ "$(uname -m)" != x86_64 ]; then echo "SKIP run_chat_golden (goldens made on x86-64)"
else
    good=0; total=0
    while IFS='|' read -r name cmd args; do
        case "$name" in ''|'#'*) continue;; esac
        total=$((total + 1))
        in=/dev/null; [ -f "$G/$name.stdin" ] && in="$G/$name.stdin"
        eval "set -- $args"
        a=(); for x in "$@"; do a+=("$(printf '%b' "$x")"); done
        TH_CPU=generic $T "$cmd" -m "$M" -t 2 "${a[@]}" <"$in" >"$tmp/$name.out" 2>"$tmp/$name.err"
        if cmp -s "$tmp/$name.out" "$G/$name.out"; then good=$((good + 1))
        else bad "run_chat_golden_$name" "got:  $(head -c 300 "$tmp/$name.out")" "want: $(head -c 300 "$G/$name.out")" "$(tail -2 "$tmp/$name.err")"; fi
    done <"$G/cases.txt"
    [ "$good" = "$total" ] && ok "run_chat_golden ($good/$total cases byte-identical to the pre-runtime loop)"
fi

# --gpu-layers (mixed placement, docs/hybrid.md): "0" runs on the CPU; a bad spec fails naming
# the flag; GPU layers where no GPU can run fail naming the flag (CPU-only build or no device)
TINY="$S/fixtures/tiny/tiny-F32.gguf"
if $T logits -m "$TINY" --tokens 1,450,439 --gpu-layers 0 --out "$tmp/g0.logits" 2>"$tmp/err" &&
   $T logits -m "$TINY" --tokens 1,450,439 --out "$tmp/g.logits" 2>>"$tmp/err" && cmp -s "$tmp/g0.logits" "$tmp/g.logits"; then
    ok "gpu_layers_zero (identical to no flag)"
else bad gpu_layers_zero "$(cat "$tmp/err")"; fi
if ! $T logits -m "$TINY" --tokens 1,450,439 --gpu-layers 0-1:cpu,1:cpu --out "$tmp/gb.logits" 2>"$tmp/err" &&
   grep -q -- "--gpu-layers" "$tmp/err" && grep -q "placed twice" "$tmp/err"; then
    ok "gpu_layers_bad_spec ($(head -1 "$tmp/err"))"
else bad gpu_layers_bad_spec "$(cat "$tmp/err")"; fi
if ! $T logits -m "$TINY" --tokens 1,450,439 --gpu-layers 0-x --out "$tmp/gb.logits" 2>"$tmp/err" &&
   grep -q -- "--gpu-layers" "$tmp/err"; then
    ok "gpu_layers_junk ($(head -1 "$tmp/err"))"
else bad gpu_layers_junk "$(cat "$tmp/err")"; fi
if $T bench -m "$TINY" --gpu -p 1 -n 0 -r 1 --bw-mib 0 >/dev/null 2>&1; then
    echo "SKIP gpu_layers_no_gpu (a GPU is present)"
elif ! $T run -m "$TINY" -p hi -n 1 --gpu-layers 2 >/dev/null 2>"$tmp/err" && grep -q -- "--gpu-layers 2" "$tmp/err"; then
    ok "gpu_layers_no_gpu ($(head -1 "$tmp/err"))"
else bad gpu_layers_no_gpu "$(cat "$tmp/err")"; fi
