#!/usr/bin/env bash
# t_template.sh — the `theseus template` CLI against the chat-template fixtures
# (byte-exact output, or exit 1 with the template's error on stderr and nothing on
# stdout), usage errors, and -m with the default model (SmolLM2's ChatML template
# renders this conversation exactly like Qwen2.5's, whose golden we reuse).
# Prints ok/FAIL/SKIP lines; SKIPs everything when build/theseus is not built.
set -u
THESEUS=${THESEUS:-${BUILD:-build}/theseus}
SHARED=${SHARED:-$(cd .. && pwd)/shared}
DIR=$SHARED/fixtures/chat-templates
MODEL=${THESEUS_MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
export SOURCE_DATE_EPOCH=1767312000
if [ ! -x "$THESEUS" ]; then
    echo "SKIP template_cli (no $THESEUS)"
    exit 0
fi
if [ ! -d "$DIR" ]; then
    echo "SKIP template_cli (no fixtures at $DIR)"
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for t in "$DIR"/*.jinja; do
    name=$(basename "$t" .jinja)
    "$THESEUS" template --template "$t" --messages "$DIR/messages.json" --add-generation-prompt \
        --bos '<BOS>' --eos '<EOS>' >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ -f "$DIR/expected/$name.txt" ]; then
        if [ $rc -eq 0 ] && cmp -s "$tmp/out" "$DIR/expected/$name.txt"; then echo "ok template_cli_$name"
        else echo "FAIL template_cli_$name (exit $rc: $(head -c 200 "$tmp/err"))"; fi
    elif [ -f "$DIR/expected/$name.error" ]; then
        want=$(cat "$DIR/expected/$name.error")
        if [ $rc -eq 1 ] && [ ! -s "$tmp/out" ] && grep -qF -- "$want" "$tmp/err"; then echo "ok template_cli_$name"
        else echo "FAIL template_cli_$name (exit $rc, stderr: $(head -c 200 "$tmp/err"))"; fi
    fi
done

# usage errors: no messages file, unknown option, unreadable file
"$THESEUS" template --template "$DIR/google-gemma-2-2b-it.jinja" >/dev/null 2>&1
[ $? -eq 2 ] && echo "ok template_cli_usage" || echo "FAIL template_cli_usage"
"$THESEUS" template --template /nonexistent.jinja --messages "$DIR/messages.json" >/dev/null 2>&1
[ $? -eq 1 ] && echo "ok template_cli_missing_file" || echo "FAIL template_cli_missing_file"
printf '{{ x + 1 }}' >"$tmp/bad.jinja"
"$THESEUS" template --template "$tmp/bad.jinja" --messages "$DIR/messages.json" >"$tmp/out" 2>"$tmp/err"
if [ $? -eq 1 ] && [ ! -s "$tmp/out" ] && grep -q "'x' is undefined" "$tmp/err"; then echo "ok template_cli_error"
else echo "FAIL template_cli_error"; fi

if [ -f "$MODEL" ]; then
    "$THESEUS" template -m "$MODEL" --messages "$DIR/messages.json" --add-generation-prompt >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ $rc -eq 0 ] && cmp -s "$tmp/out" "$DIR/expected/Qwen-Qwen2.5-7B-Instruct.txt"; then echo "ok template_cli_model"
    else echo "FAIL template_cli_model (exit $rc: $(head -c 200 "$tmp/err"))"; fi
else
    echo "SKIP template_cli_model (no $MODEL)"
fi
