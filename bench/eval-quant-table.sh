#!/usr/bin/env bash
# eval-quant-table.sh — the README's quality table: a model written by
# `theseus quantize` in every type it writes (and, for the types whose encoders use
# one, again with an importance matrix), each measured with `theseus perplexity`
# (PPL over a text, and KL divergence against the reference model's base file).
# Prints a Markdown table on stdout; progress on stderr.
#
#   bench/eval-quant-table.sh [MODEL] [TEXT] [-- extra perplexity flags]
#     MODEL  default models/SmolLM2-135M-Instruct.Q4_1.gguf
#     TEXT   default /usr/share/common-licenses/GPL-3
#   env: THESEUS (default build/theseus), THREADS (default all cores), CHUNKS (default all: the
#        candidates' chunks; the reference base file always covers the whole text),
#        REF (default F16: the reference type the source model is rewritten to; every
#        candidate is quantized from that file), TYPES (default: every type theseus quantize
#        writes but REF), IMAT_TYPES (default: the llama.cpp types whose encoders use an
#        importance matrix; "" for none), IMAT_TEXT (the text the matrix is computed on, default
#        /usr/share/common-licenses/GFDL-1.3: not the evaluation text), KEEP=DIR keeps the
#        files there (and a second run resumes), QN_ROUNDING (feedback or plain: passed to
#        quantize --qn-rounding for the qN types; default feedback).
#
# The reference is the source model rewritten as REF. For the default model that is
# the shipped Q4_1 weights in F16 (not the original BF16 model): the table measures
# each type's loss from those weights.
set -eu
T=${THESEUS:-build/theseus}
MODEL=${1:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
TEXT=${2:-/usr/share/common-licenses/GPL-3}
shift $(( $# < 2 ? $# : 2 )); [ "${1:-}" = "--" ] && shift
EXTRA=("$@")
THREADS=${THREADS:-$(nproc)}
REF=${REF:-F16}
TYPES=${TYPES:-"F32 BF16 Q8_0 Q6_K Q5_K_M Q5_K_S Q5_1 Q5_0 Q4_K_M Q4_K_S Q4_1 Q4_0 IQ4_NL IQ4_XS Q3_K_L Q3_K_M Q3_K_S Q2_K q8 q7 q6 q5 q4 q3 q2"}
IMAT_TYPES=${IMAT_TYPES-"Q6_K Q5_K_M Q5_K_S Q5_1 Q5_0 Q4_K_M Q4_K_S Q4_1 Q4_0 IQ4_NL IQ4_XS Q3_K_L Q3_K_M Q3_K_S Q2_K"}
IMAT_TEXT=${IMAT_TEXT:-/usr/share/common-licenses/GFDL-1.3}
dir=${KEEP:-$(mktemp -d)}
[ -n "${KEEP:-}" ] || trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir"
chunks=(); [ -n "${CHUNKS:-}" ] && chunks=(--chunks "$CHUNKS")
js() { python3 -c "import json,sys; j=json.load(open(sys.argv[1])); $1" "$2"; }

if [ ! -s "$dir/base.kld" ] || [ ! -s "$dir/ref.json" ]; then
    echo "reference: $MODEL -> $REF" >&2
    $T quantize -q -m "$MODEL" -o "$dir/ref.gguf" --type "$REF" -t "$THREADS"
    $T perplexity -m "$dir/ref.gguf" -f "$TEXT" -t "$THREADS" "${EXTRA[@]}" \
        --kl-divergence-base "$dir/base.kld" --json "$dir/ref.json" >/dev/null
fi
echo "  $REF: $(js 'print("PPL %.4f" % j["ppl"])' "$dir/ref.json")" >&2
if [ -n "$IMAT_TYPES" ] && [ ! -s "$dir/imatrix.dat" ]; then
    echo "importance matrix: $IMAT_TEXT" >&2
    $T imatrix -m "$dir/ref.gguf" -f "$IMAT_TEXT" -o "$dir/imatrix.dat" -c 512 -t "$THREADS" >/dev/null 2>"$dir/imatrix.log"
fi

# one candidate: name (file stem), type, extra quantize flags
measure() {
    local name=$1 t=$2; shift 2
    [ -s "$dir/$name.json" ] && return 0
    local qr=(); case $t in q[2-8]) [ -n "${QN_ROUNDING:-}" ] && qr=(--qn-rounding "$QN_ROUNDING");; esac
    $T quantize -q -m "$dir/ref.gguf" -o "$dir/$name.gguf" --type "$t" -t "$THREADS" "${qr[@]}" "$@"
    $T perplexity -m "$dir/$name.gguf" -t "$THREADS" "${chunks[@]}" "${EXTRA[@]}" --kl-divergence-base "$dir/base.kld" \
        --kl-divergence --json "$dir/$name.json.tmp" >/dev/null
    mv "$dir/$name.json.tmp" "$dir/$name.json"
    echo "  $name: $(js 'k=j["kld"]; print("PPL %.4f KLD %.6f" % (k["ppl"], k["kld"]))' "$dir/$name.json")" >&2
    [ -n "${KEEP:-}" ] || rm -f "$dir/$name.gguf"
}
rows=()
for t in $TYPES; do measure "$t" "$t"; rows+=("$t"); done
for t in $IMAT_TYPES; do measure "$t-imatrix" "$t" --imatrix "$dir/imatrix.dat"; rows+=("$t-imatrix"); done

python3 - "$dir" "$MODEL" "$TEXT" "$REF" "$IMAT_TEXT" "${rows[@]}" <<'EOF'
import json, os, sys
d, model, text, ref_type, imat_text, rows = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6:]
ref = json.load(open(os.path.join(d, "ref.json")))
runs = {t: json.load(open(os.path.join(d, t + ".json"))) for t in rows}
first = runs[rows[0]]
r = first["run"]   # the candidates' shape (--chunks may cover part of the reference's text)
print(f"{os.path.basename(model)} rewritten as {ref_type} (the reference), each type quantized from that; "
      f"{os.path.basename(text)}: {r['n_chunks']} chunks of {r['n_ctx']} tokens, {r['count']} scored positions; "
      f"KLD against the {ref_type} model. \"+ imatrix\": quantized with an importance matrix computed by "
      f"`theseus imatrix` on {os.path.basename(imat_text)} (-c 512).")
print()
print("| type | bits/weight | PPL | Δ PPL | mean KLD | 99 % KLD | max KLD | RMS Δp | same top p |")
print("|---|---|---|---|---|---|---|---|---|")
kb = first["kld"]
print(f"| {ref_type} (reference) | {ref['run'].get('bpw', 16):.2f} | {kb['ppl_base']:.4f} ± {kb['ppl_base_unc']:.4f} | | | | | | |")
for t in rows:
    j = runs[t]
    k = j["kld"]
    bpw = f"{j['run']['bpw']:.2f}" if "bpw" in j["run"] else ""
    name = t.replace("-imatrix", " + imatrix")
    print(f"| {name} | {bpw} | {k['ppl']:.4f} ± {k['ppl_unc']:.4f} | {100 * (k['ppl_ratio'] - 1):+.2f} % | "
          f"{k['kld']:.6f} ± {k['kld_unc']:.6f} | {k['kld_p99']:.5f} | {k['kld_max']:.4f} | "
          f"{100 * k['dp_rms']:.3f} % | {100 * k['same_top']:.2f} % |")
EOF
