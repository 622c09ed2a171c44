#!/usr/bin/env bash
# t_tokenize.sh — `theseus tokenize --no-bos --ids` must reproduce every case of
# every shared/fixtures/vocab/*.inp -> .out (ids made by the reference tokenizers,
# as in llama.cpp's test-tokenizer-0), byte for byte per line. One ok/FAIL line
# per vocab file. Needs $THESEUS (the CLI) and python3 to split the .inp cases.
set -u
THESEUS=${THESEUS:-build/theseus}
SHARED=${SHARED:-../shared}
dir="$SHARED/fixtures/vocab"
if [ ! -x "$THESEUS" ]; then echo "SKIP tokenize_fixtures (no $THESEUS)"; exit 0; fi
if ! command -v python3 >/dev/null; then echo "SKIP tokenize_fixtures (no python3)"; exit 0; fi
for inp in "$dir"/*.inp; do
    name=$(basename "$inp" .gguf.inp)
    python3 - "$THESEUS" "${inp%.inp}" <<'PY'
import subprocess, sys
exe, gguf = sys.argv[1], sys.argv[2]
name = gguf.rsplit('/', 1)[-1]
cases = open(gguf + '.inp', 'rb').read().split(b'\n__ggml_vocab_test__\n')[:-1]
want = open(gguf + '.out', 'rb').read().split(b'\n')
bad = 0
for i, c in enumerate(cases):
    r = subprocess.run([exe, 'tokenize', '-m', gguf, '--no-bos', '--ids'], input=c, capture_output=True)
    got = r.stdout.rstrip(b'\n')
    if r.returncode != 0 or got != want[i]:
        bad += 1
        if bad <= 3:
            print('  case %d %r\n    want: %s\n    got:  %s %s' % (i, c[:60], want[i].decode(), got.decode(), r.stderr.decode().strip()))
print(('ok' if bad == 0 and cases else 'FAIL') + ' tokenize_%s (%d cases, %d wrong)' % (name, len(cases), bad))
PY
done
