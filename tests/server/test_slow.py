"""test_slow.py — slow clients (issue 27): hundreds of connections that trickle
their request a byte a second must neither keep the server from answering
/health within a second nor keep a normal chat request from being served, and
each must be closed at its deadline (the server runs with --timeout 3: the whole
request must arrive within 3 s, bytes trickling in do not extend it).
SLOW_N (default 300) header tricklers; SLOW_BODY_N (default 100, more than the
per-address cap of 64) body tricklers. Loopback only, bounded loops."""
import os
import resource
import select
import socket
import time

from common import KEY, PORT, check, http, run, finish

N = int(os.environ.get("SLOW_N", "300"))
NB = int(os.environ.get("SLOW_BODY_N", "100"))
TIMEOUT = 3      # the server's --timeout in t_server.sh

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
if soft < N + NB + 64:
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, N + NB + 256), hard))


def open_many(n, head):
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.setblocking(True)
        s.settimeout(5)
        s.connect(("127.0.0.1", PORT))
        s.setblocking(False)
        if head:
            s.send(head)
        socks.append(s)
    return socks


def trickle(socks, data, pos):
    """Sends data[pos] on every open socket; returns how many were closed by the server (and with a 408)."""
    closed = timed_out = 0
    for i, s in enumerate(socks):
        if s is None:
            continue
        try:
            r, _, _ = select.select([s], [], [], 0)
            if r:
                got = s.recv(4096)
                closed += 1
                timed_out += got.startswith(b"HTTP/1.1 408")
                s.close()
                socks[i] = None
                continue
            s.send(data[pos % len(data):pos % len(data) + 1])
        except OSError:
            closed += 1
            s.close()
            socks[i] = None
    return closed, timed_out


def probe():
    t0 = time.time()
    st, body = http("GET", "/health", timeout=10)
    check(st == 200 and body == {"status": "ok"}, f"/health: {st} {body}")
    return time.time() - t0


def chat():
    t0 = time.time()
    st, body = http("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4,
                                                     "temperature": 0}, timeout=60)
    check(st == 200 and body["choices"][0]["message"]["content"] is not None, f"chat: {st} {body}")
    return time.time() - t0


def hold(socks, data, seconds):
    """Trickles for `seconds`, probing /health and chat meanwhile; returns timings and closes."""
    worst_health, chats, closed, c408 = 0.0, [], 0, 0
    t_end = time.time() + seconds
    k = 0
    while time.time() < t_end:
        c, t = trickle(socks, data, k)
        closed += c
        c408 += t
        worst_health = max(worst_health, probe())
        if k % 2 == 0:
            chats.append(chat())
        k += 1
        time.sleep(max(0.0, 1.0 - (time.time() % 1.0)))
    return worst_health, chats, closed, c408


def t_header_tricklers():
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer {KEY}\r\nX-Pad: " + "a" * 200 + "\r\n").encode()
    t0 = time.time()
    socks = open_many(N, head[:1])
    opened = time.time() - t0
    worst, chats, closed, c408 = hold(socks, head[1:], TIMEOUT + 4)
    left = sum(s is not None for s in socks)
    for s in socks:
        if s:
            s.close()
    check(worst < 1.0, f"/health took {worst:.2f} s under {N} trickling connections")
    check(chats and max(chats) < 30, f"chat requests: {chats}")
    check(left == 0, f"{left} of {N} trickling connections still open {TIMEOUT + 4} s after they started (--timeout {TIMEOUT})")
    return (f"{N} connections opened in {opened:.1f} s; worst /health {worst:.3f} s; {len(chats)} chats, worst "
            f"{max(chats):.2f} s; all closed by the deadline ({c408} with a 408)")


def t_body_tricklers():
    body = b'{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1}' + b" " * 900
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer {KEY}\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    socks = open_many(NB, head + body[:1])
    worst, chats, closed, c408 = hold(socks, body[1:], TIMEOUT + 4)
    left = sum(s is not None for s in socks)
    for s in socks:
        if s:
            s.close()
    check(worst < 1.0, f"/health took {worst:.2f} s under {NB} slow bodies")
    check(chats and max(chats) < 30, f"chat requests: {chats}")
    check(left == 0, f"{left} of {NB} slow bodies still open after {TIMEOUT + 4} s")
    check(c408 > 0, "no slow body got a 408")
    return f"{NB} slow bodies; worst /health {worst:.3f} s; {len(chats)} chats, worst {max(chats):.2f} s; {c408} got 408"


run("server_slow_header_tricklers", t_header_tricklers)
run("server_slow_body_tricklers", t_body_tricklers)
finish()
