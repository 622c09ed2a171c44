#!/usr/bin/env bash
# t_grammar.sh — `theseus grammar` (exit codes, --print, --check, error messages) and the
# JSON-schema conversion against Python's jsonschema: for every schema case (llama.cpp's,
# tests/data/grammar/schema_docs.json; ours, theseus.json) each document's validity is
# decided by jsonschema (format checks on) and `theseus grammar --json-schema --check`
# must accept exactly the valid ones (documents marked strict are valid but rejected by
# design); strings derived from each converted grammar, and random mutations of them
# that the grammar accepts, must all satisfy the schema (the grammar is never looser).
# Prints ok/FAIL/SKIP lines; SKIPs everything when build/theseus is not built.
set -u
BUILD=${BUILD:-build}
THESEUS=${THESEUS:-$BUILD/theseus}
TESTBIN=$BUILD/tests/test_grammar
DATA=tests/data/grammar
if [ ! -x "$THESEUS" ]; then echo "SKIP grammar_cli (no $THESEUS)"; exit 0; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

expect() {   # expect NAME RC CMD... (stdin from $tmp/in)
    local name=$1 want=$2; shift 2
    "$@" <"$tmp/in" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    if [ $rc -eq "$want" ]; then echo "ok $name"; else echo "FAIL $name (exit $rc, want $want: $(head -c 300 "$tmp/err"))"; fi
}

printf 'root ::= "yes" | "no"\n' >"$tmp/yn.gbnf"
printf 'yes' >"$tmp/in"; expect grammar_cli_match 0 "$THESEUS" grammar --grammar "$tmp/yn.gbnf" --check
printf 'ye' >"$tmp/in"; expect grammar_cli_incomplete 1 "$THESEUS" grammar --grammar "$tmp/yn.gbnf" --check
grep -q "no match at byte 2: the input ends before the grammar is complete" "$tmp/err" && echo "ok grammar_cli_incomplete_msg" || echo "FAIL grammar_cli_incomplete_msg ($(cat "$tmp/err"))"
printf 'yex' >"$tmp/in"; expect grammar_cli_nomatch 1 "$THESEUS" grammar --grammar "$tmp/yn.gbnf" --check
grep -q "no match at byte 2$" "$tmp/err" && echo "ok grammar_cli_offset" || echo "FAIL grammar_cli_offset ($(cat "$tmp/err"))"
printf 'yes\n' >"$tmp/in"; expect grammar_cli_trailing 1 "$THESEUS" grammar --grammar "$tmp/yn.gbnf" --check
printf 'root ::= "a" | foo\n' >"$tmp/bad.gbnf"
: >"$tmp/in"; expect grammar_cli_invalid 2 "$THESEUS" grammar --grammar "$tmp/bad.gbnf" --check
grep -q "line 1, column 16: undefined rule 'foo'" "$tmp/err" && echo "ok grammar_cli_invalid_msg" || echo "FAIL grammar_cli_invalid_msg ($(cat "$tmp/err"))"
printf '{"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}, "uniqueItems": true, "required": ["n"]}' >"$tmp/s.json"
expect grammar_cli_schema_valid 0 "$THESEUS" grammar --json-schema "$tmp/s.json"
printf '{"type": "array", "uniqueItems": true}' >"$tmp/u.json"
expect grammar_cli_schema_unsupported 2 "$THESEUS" grammar --json-schema "$tmp/u.json" --print
grep -q "uniqueItems is not supported" "$tmp/err" && [ ! -s "$tmp/out" ] && echo "ok grammar_cli_schema_msg" || echo "FAIL grammar_cli_schema_msg ($(cat "$tmp/err"))"
printf '{"type": ' >"$tmp/j.json"
expect grammar_cli_schema_badjson 2 "$THESEUS" grammar --json-schema "$tmp/j.json"
expect grammar_cli_usage 2 "$THESEUS" grammar --print
expect grammar_cli_both 2 "$THESEUS" grammar --grammar "$tmp/yn.gbnf" --json-schema "$tmp/s.json"
expect grammar_cli_missing 2 "$THESEUS" grammar --grammar /nonexistent.gbnf
printf '{"n": 5}' >"$tmp/in"; expect grammar_cli_schema_check 0 "$THESEUS" grammar --json-schema "$tmp/s.json" --check --print
grep -q '^root ::= "{" space n-kv "}" space$' "$tmp/out" && echo "ok grammar_cli_print_schema" || echo "FAIL grammar_cli_print_schema ($(head -c 300 "$tmp/out"))"
"$THESEUS" grammar --grammar $DATA/llama-grammars/json.gbnf --print >"$tmp/p.gbnf" 2>"$tmp/err" </dev/null
printf '{"a": [1, "x", null]}' >"$tmp/in"
expect grammar_cli_print_reparse 0 "$THESEUS" grammar --grammar "$tmp/p.gbnf" --check

if ! python3 -c 'import jsonschema' 2>/dev/null; then
    echo "SKIP grammar_schema_jsonschema (python3 jsonschema missing: scripts/setup-deps.sh installs it)"
    exit 0
fi
if [ ! -x "$TESTBIN" ]; then echo "SKIP grammar_schema_jsonschema (no $TESTBIN)"; exit 0; fi
THESEUS=$THESEUS TESTBIN=$TESTBIN DATA=$DATA TMP=$tmp python3 - <<'EOF'
import json, os, random, subprocess
import jsonschema

THESEUS, TESTBIN, DATA, TMP = (os.environ[k] for k in ('THESEUS', 'TESTBIN', 'DATA', 'TMP'))

def no_constants(c):
    raise ValueError('not JSON: ' + c)

def validity(v, text):
    try:
        inst = json.loads(text, parse_constant=no_constants)
    except ValueError:
        return False
    return v.is_valid(inst)

def uses_array_items(s):
    if isinstance(s, dict):
        return isinstance(s.get('items'), list) or any(uses_array_items(x) for x in s.values())
    if isinstance(s, list):
        return any(uses_array_items(x) for x in s)
    return False

def make_validator(schema, draft=None):
    cls = jsonschema.Draft7Validator if draft == '7' or uses_array_items(schema) else jsonschema.Draft202012Validator
    return cls(schema, format_checker=cls.FORMAT_CHECKER)

def check(schema_path, doc):
    return subprocess.run([THESEUS, 'grammar', '--json-schema', schema_path, '--check'], input=doc.encode(),
                          capture_output=True).returncode

rnd = random.Random(20261202)
CHARS = list(' \n"\\,:{}[]0123456789-+.eEabcxyzAZ_/é😀') + ['true', 'null', '\\u00e9', '\\ud83d']

def mutate(s):
    k = rnd.randrange(len(s) + 1)
    op = rnd.randrange(3)
    if op == 0 and s:
        return s[:k] + s[k + 1:]
    if op == 1:
        return s[:k] + rnd.choice(CHARS) + s[k:]
    return s[:k] + rnd.choice(CHARS) + s[k + 1:]

def run_cases(label, cases):
    fails, n_docs, n_gen, n_mut, n_mut_ok = [], 0, 0, 0, 0
    for c in cases:
        name = '%s[%s] %s' % (label, c.get('index', ''), c['name'])
        path = os.path.join(TMP, 'schema.json')
        json.dump(c['schema'], open(path, 'w'))
        v = make_validator(c.get('meaning', c['schema']), c.get('draft'))
        for kind, want_valid, want_rc in (('valid', True, 0), ('invalid', False, 1), ('strict', True, 1)):
            for doc in c.get(kind, []):
                n_docs += 1
                if validity(v, doc) != want_valid:
                    fails.append('%s: jsonschema says %r is %s (test data wrong)' % (name, doc, 'invalid' if want_valid else 'valid'))
                rc = check(path, doc)
                if rc != want_rc:
                    fails.append('%s: theseus grammar --check exits %d for %s document %r (want %d)' % (name, rc, kind, doc, want_rc))
        # derived strings must satisfy the schema; so must every mutation the grammar still accepts
        gpath = os.path.join(TMP, 'schema.gbnf')
        p = subprocess.run([THESEUS, 'grammar', '--json-schema', path, '--print'], capture_output=True)
        if p.returncode != 0:
            fails.append('%s: conversion failed: %s' % (name, p.stderr.decode()[:200]))
            continue
        open(gpath, 'wb').write(p.stdout)
        gen = subprocess.run([TESTBIN, '--generate', gpath, '40', '7'], capture_output=True, text=True).stdout
        docs = [json.loads(l) for l in gen.splitlines() if l.strip()]
        for doc in docs:
            n_gen += 1
            if not validity(v, doc):
                fails.append('%s: the grammar produced %r, which the schema rejects' % (name, doc))
        muts = list(dict.fromkeys(mutate(d) for d in docs for _ in range(4)))
        out = subprocess.run([TESTBIN, '--match', gpath], input=''.join(json.dumps(m) + '\n' for m in muts),
                             capture_output=True, text=True).stdout.split()
        for m, r in zip(muts, out):
            n_mut += 1
            if r == '1':
                n_mut_ok += 1
                if not validity(v, m):
                    fails.append('%s: the grammar accepts %r, which the schema rejects' % (name, m))
    ok = 'ok' if not fails else 'FAIL'
    print('%s grammar_schema_%s (%d schemas, %d documents, %d derived, %d mutations of which %d accepted)' %
          (ok, label, len(cases), n_docs, n_gen, n_mut, n_mut_ok))
    for f in fails[:20]:
        print('    ' + f)

llama = json.load(open(os.path.join(DATA, 'schemas.json')))['cases']
docs = json.load(open(os.path.join(DATA, 'schema_docs.json')))['cases']
cases = []
for d in docs:
    c = dict(d)
    c['schema'] = llama[d['index']]['schema']
    cases.append(c)
run_cases('llama', cases)
ours = [c for c in json.load(open(os.path.join(DATA, 'theseus.json')))['cases'] if 'error' not in c]
run_cases('theseus', ours)

# llama.cpp's integration strings: every string it expects to pass must satisfy the schema
fails, n = [], 0
for c in json.load(open(os.path.join(DATA, 'integration.json')))['cases']:
    if 'schema' not in c:
        continue
    v = make_validator(c['schema'])
    for doc in c['pass']:
        n += 1
        if not validity(v, doc):
            fails.append('%s: llama.cpp passes %r, which the schema rejects' % (c['name'], doc))
print('%s grammar_schema_integration_valid (%d strings)' % ('ok' if not fails else 'FAIL', n))
for f in fails[:20]:
    print('    ' + f)
EOF
