#!/usr/bin/env bash
# t_harden.sh — issue 27 checks that need the CLI or a server of their own:
#   - a model file truncated under a running server (a copy of the tiny model):
#     mapped, with a stream in flight: the stream ends with an error event and
#     [DONE] (SIGBUS caught), /health says "error", new requests get 503, the
#     server stays up; truncated while idle: the next request gets 503 naming the
#     change (stat check before admission); --no-mmap: it keeps serving;
#   - a prompt with more tokens than bytes (the tiny model with its '▁' pieces
#     renamed: three byte tokens a space) through `theseus logits` and the server;
#   - `theseus logits --out` on a full disk (a file-size limit, and a tiny tmpfs
#     when this runs as root): the reason is printed, no output file is left;
#   - --no-mmap on the commands that load a model.
set -u
T=${THESEUS:-build/theseus}
B=${BUILD:-build}
SH=${SHARED:-../shared}
TINY=$SH/fixtures/tiny/tiny-F32.gguf
if [ ! -s "$TINY" ]; then echo "SKIP harden (no tiny fixture at $TINY)"; exit 0; fi
tmp=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; mountpoint -q "$tmp/full" 2>/dev/null && umount "$tmp/full"; rm -rf "$tmp"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
ok() { echo "ok $1${2:+ ($2)}"; }
fail() { echo "FAIL $1${2:+: $2}"; [ -f "$tmp/server.log" ] && sed 's/^/    /' "$tmp/server.log" | tail -20; }

# start MODEL ARGS...: a server on a free port; waits for /health ok
start() {
    local m=$1; shift
    port=$(free_port)
    "$T" serve -m "$m" --host 127.0.0.1 --port "$port" --parallel 1 --ctx 8192 -t 1 "$@" >"$tmp/server.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 200); do
        curl -s --max-time 2 "http://127.0.0.1:$port/health" 2>/dev/null | grep -q '"ok"' && return 0
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    fail server_start; return 1
}
stop() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; pid=; }
status_of() { curl -s -o "$tmp/body" -w '%{http_code}' --max-time 30 "http://127.0.0.1:$port$1" ${2:+-H 'Content-Type: application/json' -d "$2"}; }
REQ='{"prompt": "1 2 3", "max_tokens": 4, "temperature": 0}'

# ---- truncated under a stream (SIGBUS path)
cp "$TINY" "$tmp/m.gguf"
if start "$tmp/m.gguf"; then
    curl -sN --max-time 60 "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
        -d '{"prompt": "1 2 3", "max_tokens": 7000, "stream": true, "logit_bias": {"2": -100}}' >"$tmp/stream" 2>/dev/null &
    cpid=$!
    for _ in $(seq 1 100); do grep -q '"text"' "$tmp/stream" 2>/dev/null && break; sleep 0.05; done
    truncate -s 65536 "$tmp/m.gguf"
    wait "$cpid"
    h=$(status_of /health); hb=$(cat "$tmp/body")
    c=$(status_of /v1/completions "$REQ"); cb=$(cat "$tmp/body")
    if ! kill -0 "$pid" 2>/dev/null; then fail server_truncated_stream "the server died"
    elif ! tail -c 300 "$tmp/stream" | grep -q 'data: \[DONE\]' || ! grep -q '"error"' "$tmp/stream"; then
        fail server_truncated_stream "the stream did not end with an error and [DONE]: $(tail -c 300 "$tmp/stream")"
    elif ! grep -q SIGBUS "$tmp/server.log"; then fail server_truncated_stream "no SIGBUS reported (did the stream end before the truncation?)"
    elif [ "$h" != 503 ] || ! echo "$hb" | grep -q '"error"'; then fail server_truncated_stream "/health $h $hb"
    elif [ "$c" != 503 ] || ! echo "$cb" | grep -qi 'truncated\|changed'; then fail server_truncated_stream "completion $c $cb"
    else ok server_truncated_stream "stream ended with an error event, /health 503 error, completion 503, still up"; fi
    stop
fi

# ---- truncated while idle: the stat check before admission
cp "$TINY" "$tmp/m.gguf"
if start "$tmp/m.gguf"; then
    c0=$(status_of /v1/completions "$REQ")
    truncate -s 65536 "$tmp/m.gguf"
    c=$(status_of /v1/completions "$REQ"); cb=$(cat "$tmp/body")
    h=$(status_of /health)
    if [ "$c0" = 200 ] && [ "$c" = 503 ] && echo "$cb" | grep -q 'changed size' && [ "$h" = 503 ] && kill -0 "$pid" 2>/dev/null &&
       ! grep -q SIGBUS "$tmp/server.log"; then
        ok server_truncated_idle "200, then 503: $(echo "$cb" | python3 -c 'import json,sys; print(json.load(sys.stdin)["error"]["message"][:80])')"
    else fail server_truncated_idle "before $c0, after $c $cb, health $h"; fi
    stop
fi

# ---- --no-mmap: the file may change freely
cp "$TINY" "$tmp/m.gguf"
if start "$tmp/m.gguf" --no-mmap; then
    truncate -s 65536 "$tmp/m.gguf"
    c=$(status_of /v1/completions "$REQ"); h=$(status_of /health)
    if [ "$c" = 200 ] && [ "$h" = 200 ]; then ok server_no_mmap_truncated "still 200 after the truncation"
    else fail server_no_mmap_truncated "completion $c, health $h"; fi
    stop
fi

# ---- more tokens than bytes
if "$B/tests/test_harden" --write-spaceless "$tmp/spaceless.gguf"; then
    spaces=$(printf '%*s' 300 '')
    if "$T" logits -m "$tmp/spaceless.gguf" -p "$spaces" --out "$tmp/s.logits" 2>"$tmp/err"; then
        n=$(python3 -c 'import struct,sys; print(struct.unpack("<4I", open(sys.argv[1],"rb").read(16))[2])' "$tmp/s.logits")
        if [ "$n" -gt 300 ]; then ok logits_more_tokens_than_bytes "300 spaces -> $n tokens"; else fail logits_more_tokens_than_bytes "$n tokens"; fi
    else fail logits_more_tokens_than_bytes "$(cat "$tmp/err")"; fi
    if start "$tmp/spaceless.gguf"; then
        c=$(status_of /v1/completions "{\"prompt\": \"$spaces\", \"max_tokens\": 2}"); cb=$(cat "$tmp/body")
        t=$(status_of /tokenize "{\"content\": \"$spaces\"}"); tb=$(cat "$tmp/body")
        nt=$(echo "$tb" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["tokens"]))' 2>/dev/null)
        if [ "$c" = 200 ] && [ "$t" = 200 ] && [ "${nt:-0}" -gt 300 ]; then
            ok server_more_tokens_than_bytes "300 spaces: completion 200, /tokenize $nt tokens"
        else fail server_more_tokens_than_bytes "completion $c $cb; tokenize $t"; fi
        stop
    fi
else fail logits_more_tokens_than_bytes "cannot write the spaceless model"; fi

# ---- logits --out on a full disk
python3 - "$T" "$TINY" "$tmp/big.logits" >"$tmp/fsize" 2>&1 <<'PY'
import resource, signal, subprocess, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # inherited: the write fails with EFBIG instead of a signal
resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))
r = subprocess.run([sys.argv[1], "logits", "-m", sys.argv[2], "-p", "Hello world", "--out", sys.argv[3]],
                   capture_output=True, text=True, restore_signals=False)
print(r.returncode, r.stderr.strip())
PY
if grep -q 'File too large' "$tmp/fsize" && ! grep -q '^0 ' "$tmp/fsize" && [ ! -e "$tmp/big.logits" ] &&
   [ -z "$(ls "$tmp" | grep 'big.logits.tmp')" ]; then
    ok logits_write_error "$(cut -c1-110 "$tmp/fsize")"
else fail logits_write_error "$(cat "$tmp/fsize"); left: $(ls "$tmp")"; fi
mkdir -p "$tmp/full"
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=16k tmpfs "$tmp/full" 2>/dev/null; then
    if "$T" logits -m "$TINY" -p "Hello world" --out "$tmp/full/x.logits" 2>"$tmp/err"; then fail logits_disk_full "it succeeded"
    elif grep -q 'No space left on device' "$tmp/err" && [ -z "$(ls "$tmp/full")" ]; then ok logits_disk_full "$(cut -c1-110 "$tmp/err")"
    else fail logits_disk_full "$(cat "$tmp/err"); left: $(ls "$tmp/full")"; fi
    umount "$tmp/full"
else echo "SKIP logits_disk_full (needs root to mount a small tmpfs)"; fi

# ---- --no-mmap on every command that loads a model
okc=0; bad=
for cmd in "tokenize -m $TINY" "inspect -m $TINY" "logits -m $TINY -p Hi --out $tmp/n.logits" "run -m $TINY -p Hi -n 2 --temp 0" \
           "bench -m $TINY -p 8 -n 2 -r 1 -t 1"; do
    if echo "Hi" | $T $cmd --no-mmap >/dev/null 2>"$tmp/err"; then okc=$((okc + 1)); else bad="$bad [$cmd: $(head -c 200 "$tmp/err")]"; fi
done
if [ -z "$bad" ]; then ok no_mmap_every_command "$okc commands"; else fail no_mmap_every_command "$bad"; fi
exit 0
