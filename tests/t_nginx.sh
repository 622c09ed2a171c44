#!/usr/bin/env bash
# t_nginx.sh — the shipped deploy/nginx.conf in front of `theseus serve`: nginx
# (Debian's, when installed: apt-get install nginx-light) on one free port, the
# server behind it on another (--max-conns-per-ip 0, as the config says), then
# tests/server/test_proxy.py through nginx. Skipped without nginx or the model.
set -u
T=${THESEUS:-build/theseus}
M=${THESEUS_MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
if [ ! -x "$NGINX" ]; then echo "SKIP nginx (not installed: apt-get install nginx-light)"; exit 0; fi
if [ ! -s "$M" ]; then echo "SKIP nginx (no default model at $M)"; exit 0; fi
tmp=$(mktemp -d)
spid=; npid=
cleanup() { [ -n "$npid" ] && kill "$npid" 2>/dev/null; [ -n "$spid" ] && kill "$spid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
sport=$(free_port); nport=$(free_port)
"$T" serve -m "$M" --host 127.0.0.1 --port "$sport" --parallel 2 --ctx 2048 --max-conns-per-ip 0 >"$tmp/server.log" 2>&1 &
spid=$!
mkdir -p "$tmp/logs" "$tmp/tmp"
# the shipped file, with this run's ports and paths a user without root can write
sed -e "s/127.0.0.1:8081/127.0.0.1:$sport/" -e "s/listen 8080;/listen 127.0.0.1:$nport;/" \
    -e "s|^http {|http {\n    access_log off; client_body_temp_path $tmp/tmp/body; proxy_temp_path $tmp/tmp/proxy;\n    fastcgi_temp_path $tmp/tmp/f; uwsgi_temp_path $tmp/tmp/u; scgi_temp_path $tmp/tmp/s;|" \
    -e "s/^worker_processes auto;/worker_processes 1;/" deploy/nginx.conf >"$tmp/nginx.conf"
"$NGINX" -p "$tmp" -c "$tmp/nginx.conf" -g "daemon off; pid $tmp/nginx.pid; error_log $tmp/logs/error.log;" >"$tmp/nginx.out" 2>&1 &
npid=$!
for _ in $(seq 1 300); do
    curl -s --max-time 2 "http://127.0.0.1:$nport/health" 2>/dev/null | grep -q '"ok"' && break
    sleep 0.1
done
if ! curl -s --max-time 2 "http://127.0.0.1:$nport/health" | grep -q '"ok"'; then
    echo "FAIL nginx_start"; sed 's/^/    /' "$tmp/nginx.out" "$tmp/logs/error.log" "$tmp/server.log" 2>/dev/null | tail -20; exit 0
fi
(cd tests/server && THESEUS_SERVER_PORT=$nport THESEUS_SERVER_KEY= THESEUS_SERVER_PID=$spid timeout 120 python3 test_proxy.py)
kill -0 "$spid" 2>/dev/null && echo "ok nginx_server_alive" || echo "FAIL nginx_server_alive"
exit 0
