#!/usr/bin/env bash
# t_quantize_imatrix.sh — `theseus quantize --imatrix`: every output file must be
# byte-identical to llama-quantize's (c392e50) with the same importance matrix: the
# sha256 in tests/peer/goldens/quantize-imatrix.sha256 (made by
# tests/peer/make_quantize_imatrix_goldens.sh from llama-quantize's files) for tiny-F32
# and olmoe (per-expert slices) in every mix, with a matrix lacking one entry, and
# without a matrix; SmolLM2-135M (if models/ has it: 30 layers, so the type rules that
# change with a matrix apply) in Q4_0 and IQ4_XS. Then the keys it writes, and the errors: a matrix for another
# model (wrong size, no tensor named), a truncated or missing file.
# Prints ok/FAIL/SKIP lines for tests/run.sh.
set -u
T=${THESEUS:-build/theseus}
S=${SHARED:-../shared}
if [ ! -x "$T" ]; then echo "SKIP quantize_imatrix (no $T)"; exit 0; fi
T=$(cd "$(dirname "$T")" && pwd)/$(basename "$T")
S=$(cd "$S" && pwd)/fixtures
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ok() { echo "ok $1"; }
bad() { echo "FAIL $1"; shift; printf '  %s\n' "$@"; }
cd tests/peer || { echo "FAIL quantize_imatrix (no tests/peer)"; exit 1; }
GOLD=goldens/quantize-imatrix.sha256

# SmolLM2 (if models/ has it): its shipped Q4_1 as F16 first, the candidates from that
SM=../../models/SmolLM2-135M-Instruct.Q4_1.gguf
have_sm=false; [ -f "$SM" ] && have_sm=true
$have_sm || echo "SKIP quantize_same_bytes_smollm2 (no models/SmolLM2-135M-Instruct.Q4_1.gguf)"
# name -> model, mix, matrix (the golden script's naming)
while read -r want name; do
    case $name in
        smollm2-F16)
            $have_sm || continue
            if "$T" quantize -q -m "$SM" -o "$tmp/sm-F16.gguf" --type F16 -t 2 2>"$tmp/err" &&
               got=$(sha256sum < "$tmp/sm-F16.gguf" | cut -d' ' -f1) && [ "$got" = "$want" ]; then ok quantize_same_bytes_smollm2-F16
            else bad quantize_same_bytes_smollm2-F16 "llama-quantize: $want" "theseus:        ${got:-none}" "$(tail -c 400 "$tmp/err")"; fi
            continue ;;
        smollm2-*) $have_sm || continue; model=$tmp/sm-F16.gguf; rest=${name#smollm2-}; im=smollm2-F16-c512.imatrix.dat ;;
        tiny-*) model=$S/tiny/tiny-F32.gguf; rest=${name#tiny-}; im=tiny-F32-c128.imatrix.dat ;;
        olmoe-*) model=$S/arch/olmoe/model-F32.gguf; rest=${name#olmoe-}; im=olmoe-F32-c128.imatrix.dat ;;
    esac
    case $rest in
        *-imatrix) mix=${rest%-imatrix} ;;
        *-partial) mix=${rest%-partial}; im=tiny-F32-partial.imatrix.dat ;;
        *) mix=$rest; im= ;;
    esac
    args=(quantize -q -m "$model" -o "$tmp/o.gguf" --type "$mix" -t 2)
    [ -n "$im" ] && args+=(--imatrix "$im")
    if "$T" "${args[@]}" 2>"$tmp/err" && got=$(sha256sum < "$tmp/o.gguf" | cut -d' ' -f1) && [ "$got" = "$want" ]; then
        ok "quantize_same_bytes_$name"
    else bad "quantize_same_bytes_$name" "llama-quantize: $want" "theseus:        ${got:-none}" "$(tail -c 400 "$tmp/err")"; fi
done < "$GOLD"

# the keys llama-quantize adds, after general.file_type; the tensors the matrix has no entry for
# (output.weight and token_embd.weight never have one; blk.0.ffn_down.weight was removed) are noted
F=$S/tiny/tiny-F32.gguf
if "$T" quantize -m "$F" -o "$tmp/k.gguf" --type Q4_K_M --imatrix tiny-F32-partial.imatrix.dat -t 2 2>"$tmp/err" &&
   "$T" inspect -m "$tmp/k.gguf" > "$tmp/kv" 2>&1 &&
   grep -Eq 'quantize\.imatrix\.file +string +tiny-F32-partial\.imatrix\.dat' "$tmp/kv" &&
   grep -Eq 'quantize\.imatrix\.dataset +string +/usr/share/common-licenses/GPL-3' "$tmp/kv" &&
   grep -Eq 'quantize\.imatrix\.entries_count +i32 +27$' "$tmp/kv" &&
   grep -Eq 'quantize\.imatrix\.chunks_count +i32 +4$' "$tmp/kv" &&
   grep -Eq 'blk\.0\.ffn_down\.weight .*\(no imatrix entry: quantized without\)' "$tmp/err" &&
   [ "$(grep -c 'no imatrix entry' "$tmp/err")" = 3 ]; then
    ok quantize_imatrix_keys_and_missing_entry
else bad quantize_imatrix_keys_and_missing_entry "$(grep quantize "$tmp/kv" 2>/dev/null)" "$(grep -i imatrix "$tmp/err" | head -5)"; fi

# errors name the file and what does not match; no output is left behind
err_case() {   # name, expected message (ERE), args...
    local name=$1 want=$2; shift 2
    "$T" quantize -q -m "$F" -o "$tmp/x.gguf" --type Q4_K_M "$@" >/dev/null 2>"$tmp/e"; local rc=$?
    if [ $rc -eq 1 ] && grep -Eq "$want" "$tmp/e" && [ ! -e "$tmp/x.gguf" ] && [ ! -e "$tmp/x.gguf.tmp" ]; then ok "$name"
    else bad "$name" "rc=$rc $(cat "$tmp/e")"; fi
}
err_case imatrix_other_model_size \
    'importance matrix olmoe-F32-c128\.imatrix\.dat: entry blk\.[0-9]\.[a-z_]+\.weight has 64 values, but tensor .* needs 256' \
    --imatrix olmoe-F32-c128.imatrix.dat
python3 - "$tmp/names.dat" <<'EOF'
import struct, sys   # one entry naming no tensor of tiny-F32, 256 values of 1.0
name = b"model.layers.0.self_attn.q_proj.weight"
open(sys.argv[1], "wb").write(struct.pack("<ii", 1, len(name)) + name + struct.pack("<ii", 1, 256) + struct.pack("<256f", *[1.0] * 256))
EOF
err_case imatrix_other_model_names "importance matrix $tmp/names\.dat names none of the 39 tensors of .*tiny-F32\.gguf.*model\.layers\.0" \
    --imatrix "$tmp/names.dat"
head -c 1000 tiny-F32-c128.imatrix.dat > "$tmp/trunc.dat"
err_case imatrix_truncated "$tmp/trunc\.dat: entry [0-9]+ .*truncated" --imatrix "$tmp/trunc.dat"
err_case imatrix_missing_file "/nonexistent\.dat: cannot open" --imatrix /nonexistent.dat
if "$T" quantize --help | grep -q -- '--imatrix FILE'; then ok quantize_imatrix_help; else bad quantize_imatrix_help; fi
