#!/usr/bin/env bash
# t_spec.sh — speculative decoding through the CLI and the server (the library
# side is tests/test_spec.c): `run` greedy text with --spec ngram and
# --draft-layers equals `run --batch-invariant`; flag and vocabulary errors name
# the problem; `bench --spec` prints its rows and says the tokens matched; a
# server started with --spec ngram passes tests/server/test_spec.py (8
# concurrent requests identical to plain, /metrics acceptance).
set -u
T=${THESEUS:-build/theseus}
M=${THESEUS_MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
TINY=${SHARED:-../shared}/fixtures/tiny/tiny-F32.gguf
if [ ! -s "$M" ]; then echo "SKIP spec_cli (no default model at $M)"; exit 0; fi
tmp=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
P="List the days of the week, then list them again in the same order: Monday, Tuesday,"
ok() { echo "ok $1"; }
bad() { echo "FAIL $1"; shift; printf '    %s\n' "$@"; }

"$T" run -m "$M" -p "$P" -n 40 --temp 0 -t 2 --batch-invariant >"$tmp/plain" 2>/dev/null
for a in "--spec ngram" "--spec ngram:2 --draft-max 4 --draft-fixed" "--draft-layers 0-14"; do
    name="spec_run_identical_$(echo "$a" | tr -c 'a-z0-9' '_')"
    if "$T" run -m "$M" -p "$P" -n 40 --temp 0 -t 2 $a >"$tmp/spec" 2>"$tmp/err" && cmp -s "$tmp/plain" "$tmp/spec" &&
       grep -q "speculative:" "$tmp/err"; then ok "$name"; else bad "$name" "$(cat "$tmp/err")" "$(diff "$tmp/plain" "$tmp/spec" | head -5)"; fi
done

# errors: exit 2 for flags, 1 with a message naming the thing for the rest
expect() {   # NAME CODE WORDS -- ARGS...
    local name=$1 code=$2 words=$3; shift 4
    "$T" "$@" >/dev/null 2>"$tmp/err"; local rc=$?
    if [ "$rc" -eq "$code" ] && grep -q -- "$words" "$tmp/err"; then ok "$name"; else bad "$name" "exit $rc" "$(cat "$tmp/err")"; fi
}
expect spec_bad_kind 2 "ngram or ngram:N" -- run -m "$M" -p x --spec lookahead
expect spec_bad_ngram 2 "ngram:N" -- run -m "$M" -p x --spec ngram:0
expect spec_two_drafters 2 "only one of" -- run -m "$M" -p x --spec ngram --draft-layers 0-3
expect spec_bad_draft_max 2 "draft-max" -- run -m "$M" -p x --spec ngram --draft-max 0
expect spec_bad_layers 1 "layer 99" -- run -m "$M" -p x --draft-layers 0-99
expect spec_missing_draft 1 "draft model /nonexistent" -- run -m "$M" -p x --draft /nonexistent.gguf
if [ -s "$TINY" ]; then
    expect spec_vocab_mismatch 1 "differs from the target's at token 0" -- run -m "$M" -p x --draft "$TINY"
else echo "SKIP spec_vocab_mismatch (no tiny fixture)"; fi

# bench: the plain and speculative rows, and the summary saying the tokens matched
if "$T" bench -m "$M" -p 0 -n 24 -r 1 -t 2 --bw-mib 0 --spec ngram >"$tmp/bench" 2>&1 &&
   grep -q "tg24 plain" "$tmp/bench" && grep -q "tg24 ngram" "$tmp/bench" &&
   grep -q "speculative (ngram).*acceptance.*speed-up.*identical to plain" "$tmp/bench"; then ok spec_bench_rows
else bad spec_bench_rows "$(cat "$tmp/bench")"; fi

# the server
if ! command -v curl >/dev/null; then echo "SKIP spec_server (no curl)"; exit 0; fi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
"$T" serve -m "$M" --host 127.0.0.1 --port "$port" --parallel 8 --ctx 4096 --batch 128 -t 2 --spec ngram >"$tmp/server.log" 2>&1 &
pid=$!
up=0
for _ in $(seq 1 300); do
    if curl -s --max-time 2 "http://127.0.0.1:$port/health" 2>/dev/null | grep -q '"ok"'; then up=1; break; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
if [ "$up" -ne 1 ]; then bad spec_server_start "$(cat "$tmp/server.log")"; exit 0; fi
(cd tests/server && THESEUS_SERVER_PORT=$port THESEUS_SERVER_KEY= THESEUS_SERVER_PID=$pid timeout 600 python3 test_spec.py)
if kill -0 "$pid" 2>/dev/null; then ok spec_server_alive; else bad spec_server_alive "$(cat "$tmp/server.log")"; fi
