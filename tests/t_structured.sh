#!/usr/bin/env bash
# t_structured.sh — structured output from the CLI: `theseus run` with --grammar
# (a yes|no grammar yields only those), --json (the output parses as JSON, checked by
# Python's json), --json-schema (the output validates under the schema, Python's
# jsonschema), and exit 2 with a message naming the problem for a bad grammar or
# schema; then tool-call rendering (tests/toolcall_templates.py: every chat-template
# fixture with tools, assistant tool calls and tool results, ours against Python's
# Jinja2). Prints ok/FAIL/SKIP lines.
set -u
T=${THESEUS:-${BUILD:-build}/theseus}
M=${THESEUS_MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
SHARED=${SHARED:-$(cd .. && pwd)/shared}
if [ ! -x "$T" ]; then echo "SKIP structured_cli (no $T)"; exit 0; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -s "$M" ]; then
    printf 'root ::= "yes" | "no"\n' >"$tmp/yn.gbnf"
    bad=0
    for seed in 1 2 3 4; do
        out=$("$T" run -m "$M" -t 2 -p "Tell me a story." --grammar "$tmp/yn.gbnf" --temp 1.5 --seed $seed -n 16 2>/dev/null)
        case "$out" in yes|no) ;; *) bad=1; echo "    seed $seed: '$out'";; esac
    done
    [ $bad -eq 0 ] && echo "ok structured_cli_grammar_yes_no" || echo "FAIL structured_cli_grammar_yes_no"
    "$T" run -m "$M" -t 2 -p "<|im_start|>user
What is 2+2? Answer with a JSON object.<|im_end|>
<|im_start|>assistant
" --special --json --temp 0 -n 200 >"$tmp/json.out" 2>/dev/null
    if python3 -c 'import json,sys; json.loads(open(sys.argv[1]).read())' "$tmp/json.out" 2>/dev/null; then echo "ok structured_cli_json"
    else echo "FAIL structured_cli_json ($(head -c 200 "$tmp/json.out"))"; fi
    cat >"$tmp/schema.json" <<'S'
{"type": "object", "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 12},
 "legs": {"type": "integer", "minimum": 0, "maximum": 8}}, "required": ["name", "legs"]}
S
    "$T" run -m "$M" -t 2 -p "An animal as JSON:" --json-schema "$tmp/schema.json" --seed 7 -n 100 >"$tmp/schema.out" 2>/dev/null
    if python3 -c 'import json,sys,jsonschema; jsonschema.validate(json.loads(open(sys.argv[1]).read()), json.load(open(sys.argv[2])))' \
        "$tmp/schema.out" "$tmp/schema.json" 2>"$tmp/err"; then echo "ok structured_cli_json_schema"
    else echo "FAIL structured_cli_json_schema ($(head -c 200 "$tmp/schema.out"); $(tail -1 "$tmp/err"))"; fi
    printf 'root ::= foo\n' >"$tmp/bad.gbnf"
    "$T" run -m "$M" -p x --grammar "$tmp/bad.gbnf" >/dev/null 2>"$tmp/err"
    rc=$?
    if [ $rc -eq 2 ] && grep -q "undefined" "$tmp/err" && grep -q "line 1" "$tmp/err"; then echo "ok structured_cli_bad_grammar"
    else echo "FAIL structured_cli_bad_grammar (exit $rc: $(head -c 200 "$tmp/err"))"; fi
    printf '{"type": "object", "uniqueItems": true, "not": {}}' >"$tmp/bad.json"
    "$T" run -m "$M" -p x --json-schema "$tmp/bad.json" >/dev/null 2>"$tmp/err"
    rc=$?
    if [ $rc -eq 2 ] && grep -q "not" "$tmp/err"; then echo "ok structured_cli_bad_schema"
    else echo "FAIL structured_cli_bad_schema (exit $rc: $(head -c 200 "$tmp/err"))"; fi
else
    echo "SKIP structured_cli (no model at $M)"
fi
if [ -f tests/toolcall_templates.py ]; then
    if python3 -c 'import jinja2' 2>/dev/null; then THESEUS=$T SHARED=$SHARED python3 tests/toolcall_templates.py
    else echo "SKIP toolcall_templates (python package jinja2 missing)"; fi
fi
exit 0
