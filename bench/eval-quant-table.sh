#!/usr/bin/env bash
# eval-quant-table.sh — the README's quality table: a model written by
# `theseus quantize` in every type it writes, each measured with
# `theseus perplexity` (PPL over a text, and KL divergence against the F32 model's
# base file). Prints a Markdown table on stdout; progress on stderr.
#
#   bench/eval-quant-table.sh [MODEL] [TEXT] [-- extra perplexity flags]
#     MODEL  default models/SmolLM2-135M-Instruct.Q4_1.gguf
#     TEXT   default /usr/share/common-licenses/GPL-3
#   env: THESEUS (default build/theseus), THREADS (default all cores), CHUNKS (default all: the
#        candidates' chunks; the reference base file always covers the whole text),
#        TYPES (default: every type theseus quantize writes), KEEP=DIR keeps the files there.
#
# The reference is the source model upcast to F32 (exact for a quantized source, so
# for the default model every type is re-quantized from the Q4_1 weights: the table
# measures each type's loss from those weights, not from the original BF16 model).
set -eu
T=${THESEUS:-build/theseus}
MODEL=${1:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
TEXT=${2:-/usr/share/common-licenses/GPL-3}
shift $(( $# < 2 ? $# : 2 )); [ "${1:-}" = "--" ] && shift
EXTRA=("$@")
THREADS=${THREADS:-$(nproc)}
TYPES=${TYPES:-"F16 BF16 Q8_0 Q6_K Q5_K_M Q5_K_S Q5_1 Q5_0 Q4_K_M Q4_K_S Q4_1 Q4_0 IQ4_NL IQ4_XS Q3_K_L Q3_K_M Q3_K_S Q2_K"}
dir=${KEEP:-$(mktemp -d)}
[ -n "${KEEP:-}" ] || trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir"
chunks=(); [ -n "${CHUNKS:-}" ] && chunks=(--chunks "$CHUNKS")

# With KEEP=DIR a second run resumes: the reference and the types already measured are kept.
if [ ! -s "$dir/base.kld" ] || [ ! -s "$dir/F32.json" ]; then
    echo "reference: $MODEL -> F32" >&2
    $T quantize -q -m "$MODEL" -o "$dir/F32.gguf" --type F32 -t "$THREADS"
    $T perplexity -m "$dir/F32.gguf" -f "$TEXT" -t "$THREADS" "${EXTRA[@]}" \
        --kl-divergence-base "$dir/base.kld" --json "$dir/F32.json" >/dev/null
fi
echo "  F32: $(python3 -c 'import json,sys; print("PPL %.4f" % json.load(open(sys.argv[1]))["ppl"])' "$dir/F32.json")" >&2
for t in $TYPES; do
    [ -s "$dir/$t.json" ] && continue
    $T quantize -q -m "$dir/F32.gguf" -o "$dir/$t.gguf" --type "$t" -t "$THREADS"
    $T perplexity -m "$dir/$t.gguf" -t "$THREADS" "${chunks[@]}" "${EXTRA[@]}" --kl-divergence-base "$dir/base.kld" \
        --kl-divergence --json "$dir/$t.json" >/dev/null
    echo "  $t: $(python3 -c 'import json,sys; k=json.load(open(sys.argv[1]))["kld"]; print("PPL %.4f KLD %.6f" % (k["ppl"], k["kld"]))' "$dir/$t.json")" >&2
    [ -n "${KEEP:-}" ] || rm -f "$dir/$t.gguf"
done

python3 - "$dir" "$MODEL" "$TEXT" $TYPES <<'EOF'
import json, os, sys
d, model, text, types = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
ref = json.load(open(os.path.join(d, "F32.json")))
runs = {t: json.load(open(os.path.join(d, t + ".json"))) for t in types}
first = runs[types[0]]
r = first["run"]   # the candidates' shape (--chunks may cover part of the reference's text)
print(f"{os.path.basename(model)} re-quantized from F32, {os.path.basename(text)}: {r['n_chunks']} chunks of "
      f"{r['n_ctx']} tokens, {r['count']} scored positions; KLD against the F32 model")
print()
print("| type | bits/weight | PPL | Δ PPL | mean KLD | 99 % KLD | max KLD | RMS Δp | same top p |")
print("|---|---|---|---|---|---|---|---|---|")
kb = first["kld"]
print(f"| F32 (reference) | {ref['run'].get('bpw', 32):.2f} | {kb['ppl_base']:.4f} ± {kb['ppl_base_unc']:.4f} | | | | | | |")
for t in types:
    j = runs[t]
    k = j["kld"]
    bpw = f"{j['run']['bpw']:.2f}" if "bpw" in j["run"] else ""
    print(f"| {t} | {bpw} | {k['ppl']:.4f} ± {k['ppl_unc']:.4f} | {100 * (k['ppl_ratio'] - 1):+.2f} % | "
          f"{k['kld']:.6f} ± {k['kld_unc']:.6f} | {k['kld_p99']:.5f} | {k['kld_max']:.4f} | "
          f"{100 * k['dp_rms']:.3f} % | {100 * k['same_top']:.2f} % |")
EOF
