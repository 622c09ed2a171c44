#!/usr/bin/env bash
# t_server.sh — starts `theseus serve` on a free loopback port with the default
# model and an API key, then runs the Python tests in tests/server/ against it
# (the official `openai` package, urllib, raw sockets, curl). Each prints
# ok/FAIL/SKIP lines for tests/run.sh. The server is always killed at the end.
set -u
T=${THESEUS:-build/theseus}
M=${THESEUS_MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
if [ ! -s "$M" ]; then echo "SKIP server (no default model at $M)"; exit 0; fi
if ! python3 -c 'import openai' 2>/dev/null; then echo "SKIP server (python package openai missing: run scripts/setup-deps.sh)"; exit 0; fi
tmp=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

# start_server ARGS...: starts the server, waits for /health ok; sets pid and port
start_server() {
    port=$(free_port)
    "$T" serve -m "$M" --host 127.0.0.1 --port "$port" "$@" >"$tmp/server.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 300); do
        if curl -s --max-time 2 "http://127.0.0.1:$port/health" 2>/dev/null | grep -q '"ok"'; then return 0; fi
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    echo "FAIL server_start"; sed 's/^/    /' "$tmp/server.log"; return 1
}

key=k-$(python3 -c 'import secrets; print(secrets.token_hex(8))')
printf '%s\n' "$key" >"$tmp/key"
start_server --parallel 8 --ctx 4096 --batch 64 --timeout 3 --mem-budget 402653184 --api-key-file "$tmp/key" || exit 1
export THESEUS_SERVER_PORT=$port THESEUS_SERVER_KEY=$key THESEUS_SERVER_PID=$pid
for t in ${SERVER_TESTS:-api hostile slow load structured}; do
    [ "$t" = busy ] && continue
    (cd tests/server && timeout 300 python3 "test_$t.py")
done
check_alive() {
    if kill -0 "$pid" 2>/dev/null; then echo "ok server_alive_after_$1"; else echo "FAIL server_alive_after_$1"; sed 's/^/    /' "$tmp/server.log"; fi
    if grep -qiE 'sanitizer|segmentation|abort' "$tmp/server.log"; then echo "FAIL server_log_clean_$1"; sed 's/^/    /' "$tmp/server.log"; fi
}
check_alive tests

# a second server with one slot and a queue of one: the overflow gets 503
if [ -z "${SERVER_TESTS:-}" ] || [[ " $SERVER_TESTS " == *" busy "* ]]; then
    kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; pid=
    if start_server --parallel 1 --queue 1 --ctx 1024; then
        export THESEUS_SERVER_PORT=$port THESEUS_SERVER_KEY= THESEUS_SERVER_PID=$pid
        (cd tests/server && timeout 120 python3 test_busy.py)
        check_alive busy
        # SIGTERM with a stream in flight (end-of-text tokens biased away so it is
        # still running): the stream ends with an error event and [DONE], the
        # server exits 0 within 10 s
        curl -sN --max-time 60 "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
            -d '{"prompt": "Tell me a long story.", "max_tokens": 500, "stream": true, "logit_bias": {"0": -100, "1": -100, "2": -100}}' >"$tmp/inflight" 2>/dev/null &
        cpid=$!
        for _ in $(seq 1 100); do grep -q '"text"' "$tmp/inflight" 2>/dev/null && break; sleep 0.1; done
        kill -TERM "$pid"
        for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$pid" 2>/dev/null; then echo "FAIL server_clean_shutdown (still running 10 s after SIGTERM)"
        else
            wait "$pid"; src=$?; pid=
            wait "$cpid" 2>/dev/null
            if [ "$src" -eq 0 ] && tail -c 200 "$tmp/inflight" | grep -q 'data: \[DONE\]' && grep -q '"error"' "$tmp/inflight"; then
                echo "ok server_clean_shutdown (exit 0, the open stream ended with an error event and [DONE])"
            else echo "FAIL server_clean_shutdown (exit $src)"; tail -c 400 "$tmp/inflight" | sed 's/^/    /'; fi
        fi
    fi
fi
exit 0
