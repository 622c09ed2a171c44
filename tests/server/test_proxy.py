"""test_proxy.py — the shipped nginx config (deploy/nginx.conf) in front of the
server (tests/t_nginx.sh): every request-smuggling shape gets one answer (nginx's
400/413/501) and a closed connection — on a new connection and after a good
request on a kept-alive one, where libmicrohttpd alone would answer a malformed
Content-Length with its status line twice — and ordinary chat and streamed
requests pass through unchanged. THESEUS_SERVER_PORT is nginx's port here."""
import json
import socket
import time

from common import KEY, PORT, check, http, run, finish

AUTH = f"Authorization: Bearer {KEY}\r\n" if KEY else ""
BODY = b'{"prompt": "Hi", "max_tokens": 1}'
HEALTH = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"


def post(extra, body=b""):
    return (f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{AUTH}".encode()
            + extra + b"\r\n" + body)


CASES = [
    ("cl_and_te", post(b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n", b"%x\r\n%s\r\n0\r\n\r\n" % (len(BODY), BODY) + HEALTH)),
    ("two_cl", post(b"Content-Length: %d\r\nContent-Length: 5\r\n" % len(BODY), BODY + HEALTH)),
    ("te_xchunked", post(b"Transfer-Encoding: xchunked\r\n", BODY)),
    ("cl_negative", post(b"Content-Length: -1\r\n", BODY)),
    ("cl_overlong", post(b"Content-Length: 99999999999999999999999\r\n", BODY)),
    ("chunk_overflow", post(b"Transfer-Encoding: chunked\r\n", b"FFFFFFFFFFFFFFFF\r\n" + BODY)),
]


def exchange(data, first):
    s = socket.create_connection(("127.0.0.1", PORT), timeout=5)
    if first:
        s.sendall(first)
        got = b""
        while b"\r\n\r\n" not in got or not got.rstrip().endswith(b"}"):
            b = s.recv(65536)
            check(b, "no answer to the first request")
            got += b
    s.sendall(data)
    out, closed, t_end = b"", False, time.time() + 5
    try:
        while time.time() < t_end:
            b = s.recv(65536)
            if not b:
                closed = True
                break
            out += b
    except (socket.timeout, ConnectionResetError):
        pass
    s.close()
    return out, closed


def t_smuggling_through_nginx():
    seen = []
    for name, req in CASES:
        for first in (None, HEALTH):
            out, closed = exchange(req, first)
            where = "kept-alive" if first else "new"
            check(out.count(b"HTTP/1.1 ") == 1, f"{name} ({where}): {out.count(b'HTTP/1.1 ')} status lines: {out[:300]!r}")
            st = int(out[9:12]) if out.startswith(b"HTTP/1.1 ") else 0
            check(st in (400, 411, 413, 501), f"{name} ({where}): {out[:200]!r}")
            check(closed, f"{name} ({where}): the connection stayed open")
            seen.append(f"{name}:{st}")
    return ", ".join(sorted(set(seen)))


def t_requests_pass():
    st, body = http("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4})
    check(st == 200 and body["choices"][0]["message"]["content"], f"chat through nginx: {st} {body}")
    s = socket.create_connection(("127.0.0.1", PORT), timeout=30)
    b = json.dumps({"prompt": "Once upon a time", "max_tokens": 8, "stream": True}).encode()
    s.sendall(post(b"Content-Length: %d\r\n" % len(b), b))
    got = b""
    while b"[DONE]" not in got:
        x = s.recv(65536)
        if not x:
            break
        got += x
    s.close()
    check(got.count(b"data: ") >= 3 and b"[DONE]" in got, f"stream through nginx: {got[:300]!r}")
    st, body = http("GET", "/health")
    check(st == 200, f"/health through nginx: {st}")
    return f"chat 200, stream of {got.count(b'data: ')} events"


run("nginx_smuggling_refused", t_smuggling_through_nginx)
run("nginx_requests_pass", t_requests_pass)
finish()
