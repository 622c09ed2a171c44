#!/usr/bin/env bash
# t_hf.sh — Hugging Face directories through the CLI (issue 23): `-m DIR` in
# logits / tokenize / inspect, `theseus convert` (the GGUF gives byte-identical
# logits to the directory, --type Q8_0 loads and stays near transformers'
# logits), clean errors, and — where a llama.cpp build is at hand
# (LLAMA_PERPLEXITY, default /work/peers/llama.cpp/build/bin/llama-perplexity) —
# llama.cpp itself running each converted file (llama, qwen2, phi3, mixtral, deepseek3; ik_llama.cpp:
# gpt-oss, gpt-oss-mxfp4): its logits saved as a KLD base
# and compared by `theseus perplexity` against the directory (max KLD < 2e-5). Prints ok/FAIL/SKIP lines for tests/run.sh.
set -u
T=${THESEUS:-build/theseus}
S=${SHARED:-../shared}
HF=tests/fixtures/hf
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ok() { echo "ok $1"; }
bad() { echo "FAIL $1"; shift; printf '  %s\n' "$@"; }
if [ ! -x "$T" ]; then echo "SKIP hf_cli (no $T)"; exit 0; fi
PROMPT="The quick brown fox jumps over the lazy dog. Once upon a time, there was 42 of them!"
FAMS="llama llama-spm llama3-rope qwen2 qwen3 gemma2 gemma3 phi3 phi3-longrope qwen3moe mixtral olmoe mistral deepseek2 deepseek3 gpt-oss gpt-oss-mxfp4 deepseek3-fp8"

for f in $FAMS; do
    if $T convert "$HF/$f" -o "$tmp/$f.gguf" 2>"$tmp/err" &&
       $T logits -m "$HF/$f" -p "$PROMPT" --out "$tmp/dir.logits" -t 2 2>>"$tmp/err" &&
       $T logits -m "$tmp/$f.gguf" -p "$PROMPT" --out "$tmp/gguf.logits" -t 2 2>>"$tmp/err" &&
       cmp -s "$tmp/dir.logits" "$tmp/gguf.logits"; then
        ok "hf_convert_logits_$f"
    else bad "hf_convert_logits_$f" "$(tail -c 600 "$tmp/err")"; fi
done

# tokenize -m DIR equals tokenize -m converted.gguf (both ways of special handling)
text="Hello <|im_start|>world 1234 ... café\n\n  end"
for f in llama qwen2 gemma3; do
    a=$(printf '%b' "$text" | $T tokenize -m "$HF/$f" --no-bos --special --ids 2>&1)
    b=$(printf '%b' "$text" | $T tokenize -m "$tmp/$f.gguf" --no-bos --special --ids 2>&1)
    c=$(printf '%b' "$text" | $T tokenize -m "$HF/$f" --ids 2>&1)
    d=$(printf '%b' "$text" | $T tokenize -m "$tmp/$f.gguf" --ids 2>&1)
    if [ -n "$a" ] && [ "$a" = "$b" ] && [ "$c" = "$d" ] && [ "$a" != "$c" ]; then ok "hf_tokenize_$f"
    else bad "hf_tokenize_$f" "dir: $a" "gguf: $b" "dir (plain): $c" "gguf (plain): $d"; fi
done

# real vocabularies: llama.cpp's vocab fixtures (Llama SPM 32000 tokens, GPT-2 50257) written as
# tokenizer.json by gguf_vocab_to_hf.py; our ids from the tokenizer.json must equal the fixture's
# .out ids (llama.cpp from the GGUF) on every case
if command -v python3 >/dev/null; then
    for v in llama-spm gpt-2; do
        d="$tmp/vocab-$v"
        if ! python3 "$HF/gguf_vocab_to_hf.py" "$S/fixtures/vocab/ggml-vocab-$v.gguf" "$d" >/dev/null 2>"$tmp/err"; then
            bad "hf_vocab_$v" "$(cat "$tmp/err")"; continue
        fi
        python3 - "$S/fixtures/vocab/ggml-vocab-$v.gguf" "$d" "$T" >"$tmp/res" 2>&1 <<'PY'
import subprocess, sys
src, d, t = sys.argv[1:4]
cases = open(src + ".inp", "rb").read().split(b"\n__ggml_vocab_test__\n")[:-1]
want = open(src + ".out").read().split("\n")
bad = 0
for i, c in enumerate(cases):
    out = subprocess.run([t, "tokenize", "-m", d, "--no-bos", "--ids"], input=c, capture_output=True).stdout.decode().strip()
    if out != want[i].strip():
        bad += 1
        if bad <= 3:
            print("case %d %r: ours '%s', llama.cpp '%s'" % (i, c[:40], out[:80], want[i][:80]))
print("%d cases, %d differ" % (len(cases), bad))
sys.exit(1 if bad or not cases else 0)
PY
        if [ $? -eq 0 ]; then ok "hf_vocab_$v ($(tail -1 "$tmp/res"))"; else bad "hf_vocab_$v" "$(cat "$tmp/res")"; fi
    done
else echo "SKIP hf_vocab (no python3)"; fi

# inspect -m DIR shows llama.cpp's names
if $T inspect -m "$HF/qwen3" 2>&1 | grep -Eq 'blk\.1\.attn_k_norm\.weight +F32 +\[16\]' &&
   $T inspect -m "$HF/qwen3" 2>&1 | grep -Eq 'general\.architecture +string +qwen3'; then ok hf_inspect
else bad hf_inspect "$($T inspect -m "$HF/qwen3" 2>&1 | head -20)"; fi

# the chat template from tokenizer_config.json
printf '{"messages":[{"role":"user","content":"hi"}]}' >"$tmp/m.json"
if [ "$($T template -m "$HF/qwen2" --messages "$tmp/m.json" --add-generation-prompt 2>&1)" = "$(printf '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant')" ]; then
    ok hf_chat_template
else bad hf_chat_template "$($T template -m "$HF/qwen2" --messages "$tmp/m.json" --add-generation-prompt 2>&1)"; fi

# -m FILE.safetensors: its directory's config and tokenizer
if $T inspect -m "$HF/qwen3/model.safetensors" 2>&1 | grep -Eq '^model: qwen3 '; then ok hf_safetensors_path
else bad hf_safetensors_path "$($T inspect -m "$HF/qwen3/model.safetensors" 2>&1 | tail -3)"; fi

# convert --type: quantized after conversion (rows of 32: one Q8_0 block each, so the noise is large)
if command -v python3 >/dev/null; then
    out=""
    if $T convert "$HF/qwen2" -o "$tmp/q8.gguf" --type Q8_0 2>"$tmp/err" &&
       $T inspect -m "$tmp/q8.gguf" 2>/dev/null | grep -Eq 'blk\.0\.attn_q\.weight +Q8_0' &&
       $T logits -m "$tmp/q8.gguf" -p "$PROMPT" --out "$tmp/q8.logits" -t 2 2>>"$tmp/err" &&
       out=$(python3 "$S/tools/cmp_logits.py" "$tmp/q8.logits" "$HF/qwen2/golden.logits" 8e-2 0.85); then
        ok "hf_convert_type_q8_0 ($out)"
    else bad hf_convert_type_q8_0 "$(tail -c 600 "$tmp/err")" "$out"; fi
else echo "SKIP hf_convert_type_q8_0 (no python3)"; fi

# quantize on load: logits -m DIR --type Q8_0 == logits of convert --type Q8_0 (byte-identical);
# run/perplexity/bench take --type too (the common option)
if [ -f "$tmp/q8.gguf" ] &&
   $T logits -m "$HF/qwen2" --type Q8_0 -p "$PROMPT" --out "$tmp/q8load.logits" -t 2 2>"$tmp/err" &&
   cmp -s "$tmp/q8.logits" "$tmp/q8load.logits"; then ok hf_type_at_load_logits
else bad hf_type_at_load_logits "$(tail -c 600 "$tmp/err")"; fi
if $T run -m "$HF/qwen2" --type Q4_K_M -p "Hello" -n 4 -t 2 >"$tmp/out" 2>"$tmp/err"; then ok hf_type_at_load_run
else bad hf_type_at_load_run "$(tail -c 600 "$tmp/err")"; fi
if ! $T logits -m "$tmp/q8.gguf" --type Q8_0 -p "$PROMPT" --out "$tmp/x.logits" 2>"$tmp/err" && grep -q -- '--type' "$tmp/err"; then
    ok hf_type_on_gguf_refused
else bad hf_type_on_gguf_refused "$(cat "$tmp/err")"; fi

# GPT-OSS MXFP4 experts decoded exactly: convert --type F32 (our MXFP4 decoder, then float compute)
# against transformers' logits of the MXFP4 checkpoint (which it dequantizes on a CPU), rel-L2 <= 1e-4
if command -v python3 >/dev/null; then
    out=""
    toks=$(python3 -c "import struct,sys;d=open(sys.argv[1],'rb').read();n=struct.unpack('<I',d[8:12])[0];print(','.join(map(str,struct.unpack('<%di'%n,d[16:16+4*n]))))" "$HF/gpt-oss-mxfp4/golden.logits")
    if $T convert "$HF/gpt-oss-mxfp4" -o "$tmp/mx.gguf" 2>"$tmp/err" &&
       $T inspect -m "$tmp/mx.gguf" 2>/dev/null | grep -Eq 'blk\.0\.ffn_gate_exps\.weight +MXFP4' &&
       $T convert "$HF/gpt-oss-mxfp4" -o "$tmp/mxf.gguf" --type F32 2>>"$tmp/err" &&
       $T logits -m "$tmp/mxf.gguf" --tokens "$toks" --out "$tmp/mxf.logits" -t 2 2>>"$tmp/err" &&
       out=$(python3 "$S/tools/cmp_logits.py" "$tmp/mxf.logits" "$HF/gpt-oss-mxfp4/golden.logits" 1e-4 1.0); then
        ok "hf_gpt_oss_mxfp4_exact ($out)"
    else bad hf_gpt_oss_mxfp4_exact "$(tail -c 600 "$tmp/err")" "$out"; fi
else echo "SKIP hf_gpt_oss_mxfp4_exact (no python3)"; fi

# errors: a directory without config.json, an unknown model_type; exit code 1 and the file named
mkdir -p "$tmp/empty" "$tmp/bloom"
if ! $T convert "$tmp/empty" -o "$tmp/x.gguf" 2>"$tmp/err" && grep -q 'config.json' "$tmp/err" && [ ! -e "$tmp/x.gguf" ]; then
    ok hf_error_no_config
else bad hf_error_no_config "$(cat "$tmp/err")"; fi
cp "$HF/qwen2/"* "$tmp/bloom/"
sed -i 's/"model_type": "qwen2"/"model_type": "bloom"/' "$tmp/bloom/config.json"
if ! $T logits -m "$tmp/bloom" -p hi --out "$tmp/x.logits" 2>"$tmp/err" && grep -q "model_type 'bloom' is not supported" "$tmp/err"; then
    ok hf_error_model_type
else bad hf_error_model_type "$(cat "$tmp/err")"; fi

# absurd numbers in config.json (a fuzzer found 1e300 cast to an integer): a clean error naming the key
mkdir -p "$tmp/huge"; cp "$HF/llama/"* "$tmp/huge/"
python3 - "$tmp/huge/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["rope_scaling"] = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1e300}
json.dump(c, open(sys.argv[1], "w"))
PY
if ! $T convert "$tmp/huge" -o "$tmp/x.gguf" 2>"$tmp/err" && grep -q "original_max_position_embeddings" "$tmp/err"; then
    ok hf_error_huge_number
else bad hf_error_huge_number "$(cat "$tmp/err")"; fi

# llama.cpp runs the converted files (mainline, Feb 2025: the families it has; not gemma2, which it
# refuses to build for a layer count other than 26/42/46). phi3 is converted from a copy named "tiny-p":
# llama.cpp sets strip attributes of "</s>", "<unk>", "<s>" when general.name contains "phi3", and our
# byte-level fixture vocabulary has none of them. The base file stores log-probabilities as 16-bit
# steps, so near-ties can change its top token: the bound is on the KLD (max < 2e-5), top agreement >= 95 %.
LP=${LLAMA_PERPLEXITY:-/work/peers/llama.cpp/build/bin/llama-perplexity}
if [ ! -x "$LP" ]; then echo "SKIP hf_llamacpp_kld (no llama-perplexity at $LP)"; else
    head -c 20000 /usr/share/common-licenses/GPL-3 >"$tmp/text.txt"
    cp -r "$HF/phi3" "$tmp/tiny-p"
    $T convert "$tmp/tiny-p" -o "$tmp/phi3.gguf" 2>/dev/null
    for f in llama qwen2 phi3 mixtral deepseek3; do
        if "$LP" -m "$tmp/$f.gguf" -f "$tmp/text.txt" -c 64 --chunks 3 -t 2 -ctk f32 -ctv f32 \
               --kl-divergence-base "$tmp/$f.kld" >"$tmp/lp.log" 2>&1 &&
           $T perplexity -m "$HF/$f" -f "$tmp/text.txt" -c 64 --chunks 3 --kl-divergence-base "$tmp/$f.kld" \
               --kl-divergence >"$tmp/kl.log" 2>&1; then
            kmax=$(grep -E '^Maximum KLD:' "$tmp/kl.log" | awk '{print $3}')
            top=$(grep -E '^Same top p:' "$tmp/kl.log" | awk '{print $4}')
            if awk -v k="$kmax" -v t="$top" 'BEGIN { exit !(k != "" && k < 2e-5 && t >= 95) }'; then
                ok "hf_llamacpp_kld_$f (max KLD $kmax, same top $top %)"
            else bad "hf_llamacpp_kld_$f" "max KLD '$kmax', same top '$top'"; fi
        else bad "hf_llamacpp_kld_$f" "$(tail -5 "$tmp/lp.log")" "$(tail -5 "$tmp/kl.log")"; fi
    done
fi
# ik_llama.cpp (it has gpt-oss; built CPU-only, its V cache F16 without flash attention) runs the
# converted gpt-oss files: max KLD < 2e-5 for F32 experts; MXFP4 (both sides quantize activations
# for the MXFP4 products, in different ways): max KLD < 1e-3, same top >= 90 %
IKP=${IK_PERPLEXITY:-/work/peers/ik_llama.cpp/build/bin/llama-perplexity}
if [ ! -x "$IKP" ]; then echo "SKIP hf_ik_kld (no ik_llama.cpp llama-perplexity at $IKP)"; else
    [ -f "$tmp/text.txt" ] || head -c 20000 /usr/share/common-licenses/GPL-3 >"$tmp/text.txt"
    for f in gpt-oss gpt-oss-mxfp4; do
        kb=2e-5; tb=95; [ "$f" = gpt-oss-mxfp4 ] && { kb=1e-3; tb=90; }
        if "$IKP" -m "$tmp/$f.gguf" -f "$tmp/text.txt" -c 64 --chunks 3 -t 2 -ctk f32 -no-fa \
               --kl-divergence-base "$tmp/$f.kld" >"$tmp/ik.log" 2>&1 &&
           $T perplexity -m "$HF/$f" -f "$tmp/text.txt" -c 64 --chunks 3 --kl-divergence-base "$tmp/$f.kld" \
               --kl-divergence >"$tmp/kl.log" 2>&1; then
            kmax=$(grep -E '^Maximum KLD:' "$tmp/kl.log" | awk '{print $3}')
            top=$(grep -E '^Same top p:' "$tmp/kl.log" | awk '{print $4}')
            if awk -v k="$kmax" -v t="$top" -v kb="$kb" -v tb="$tb" 'BEGIN { exit !(k != "" && k < kb && t >= tb) }'; then
                ok "hf_ik_kld_$f (max KLD $kmax, same top $top %)"
            else bad "hf_ik_kld_$f" "max KLD '$kmax', same top '$top'"; fi
        else bad "hf_ik_kld_$f" "$(tail -5 "$tmp/ik.log")" "$(tail -5 "$tmp/kl.log")"; fi
    done
fi
exit 0
