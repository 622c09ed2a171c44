"""test_hostile.py — hostile input, one test each: every bad request gets a
clear OpenAI error with the right status, and the server keeps serving
(each test ends with the server answering /health and being idle)."""
import json
import socket
import threading
import time

from common import (KEY, PID, PORT, check, expect_error, http, metrics, raw_connect, raw_request_head, run,
                    wait_idle, finish)

MSG = [{"role": "user", "content": "Hi"}]


def still_serving():
    st, body = http("GET", "/health", timeout=10)
    check(st == 200 and body == {"status": "ok"}, f"/health after the attack: {st} {body}")
    st, body = http("POST", "/v1/completions", {"prompt": "Hello", "max_tokens": 2, "temperature": 0})
    check(st == 200 and body["choices"][0]["finish_reason"] in ("stop", "length"), f"completion after: {st} {body}")


def t_invalid_json():
    for bad in (b"{", b"{\"prompt\": }", b"not json", b"", b"[1,2", b"{\"prompt\":\"a\"} trailing", b"\xff\xfe{}"):
        st, body = http("POST", "/v1/completions", bad)
        expect_error(st, body, 400)
    st, body = http("POST", "/v1/completions", b"[1, 2]")
    expect_error(st, body, 400, ["object"])
    still_serving()
    return "7 malformed bodies -> 400"


def t_deep_nesting():
    for depth in (2000, 200000):
        st, body = http("POST", "/v1/chat/completions", b"[" * depth + b"]" * depth)
        expect_error(st, body, 400)
        st, body = http("POST", "/v1/chat/completions", b'{"messages":' + b"[" * depth)
        expect_error(st, body, 400)
    still_serving()
    return "nested 200000 deep -> 400"


def t_wrong_types():
    cases = [
        ({"messages": "hello"}, "messages"),
        ({"messages": [{"role": 1, "content": "x"}]}, "role"),
        ({"messages": [{"role": "user", "content": 5}]}, "content"),
        ({"messages": MSG, "temperature": "hot"}, "temperature"),
        ({"messages": MSG, "max_tokens": 1.5}, "max_tokens"),
        ({"messages": MSG, "max_tokens": "8"}, "max_tokens"),
        ({"messages": MSG, "stop": 5}, "stop"),
        ({"messages": MSG, "stop": ["a", 1]}, "stop"),
        ({"messages": MSG, "stream": "yes"}, "stream"),
        ({"messages": MSG, "n": [2]}, "n"),
        ({"messages": MSG, "logit_bias": []}, "logit_bias"),
        ({"messages": MSG, "logit_bias": {"abc": 1}}, "logit_bias"),
        ({"messages": MSG, "logit_bias": {"1": "x"}}, "logit_bias"),
        ({"messages": MSG, "logit_bias": {"99999999": 1}}, "logit_bias"),
        ({"messages": MSG, "logit_bias": {"-1": 1}}, "logit_bias"),
        ({"messages": MSG, "seed": "x"}, "seed"),
        ({"messages": MSG, "stream_options": 3}, "stream_options"),
        ({"messages": MSG, "top_logprobs": 3}, "logprobs"),
        ({"messages": MSG, "model": 7}, "model"),
    ]
    for body, word in cases:
        st, r = http("POST", "/v1/chat/completions", body)
        expect_error(st, r, 400, [word])
    for body, word in [({"prompt": {"a": 1}}, "prompt"), ({"prompt": ["a", "b"]}, "prompt"), ({"prompt": None}, "prompt"),
                       ({"prompt": "x", "logprobs": True}, "logprobs"), ({"prompt": "x", "top_p": 2}, "top_p")]:
        st, r = http("POST", "/v1/completions", body)
        expect_error(st, r, 400, [word])
    for path, body in [("/tokenize", {"content": 5}), ("/detokenize", {"tokens": "abc"}), ("/detokenize", {"tokens": [1.5]})]:
        st, r = http("POST", path, body)
        expect_error(st, r, 400)
    still_serving()
    return f"{len(cases) + 8} requests -> 400"


def t_bad_token_ids():
    n_vocab = 49152
    for prompt in ([-1], [n_vocab], [2**31], [1, 2, -5], [0.5], []):
        st, r = http("POST", "/v1/completions", {"prompt": prompt, "max_tokens": 2})
        expect_error(st, r, 400, ["prompt"])
    st, r = http("POST", "/detokenize", {"tokens": [-1]})
    expect_error(st, r, 400, ["token"])
    still_serving()
    return "prompt [-1] and friends -> 400"


def t_huge_limits():
    for field, val in [("max_tokens", 10**9), ("max_tokens", 0), ("max_tokens", -3), ("n", 1000), ("n", 0),
                       ("top_logprobs", 100), ("n", 9)]:
        body = {"messages": MSG, field: val}
        if field == "top_logprobs":
            body["logprobs"] = True
        st, r = http("POST", "/v1/chat/completions", body)
        expect_error(st, r, 400, [field])
    st, r = http("POST", "/v1/completions", {"prompt": "word " * 3000, "max_tokens": 2})
    expect_error(st, r, 400, ["prompt", "tokens"])
    st, r = http("POST", "/v1/completions", {"prompt": "x", "stop": ["a"] * 5})
    expect_error(st, r, 400, ["stop"])
    still_serving()
    return "max_tokens 1e9, n 1000, top_logprobs 100, a 3000-word prompt -> 400"


def t_nan_temperature():
    for raw in (b'{"messages":[{"role":"user","content":"Hi"}],"temperature":NaN}',
                b'{"messages":[{"role":"user","content":"Hi"}],"temperature":Infinity}',
                b'{"messages":[{"role":"user","content":"Hi"}],"temperature":1e999}',
                b'{"messages":[{"role":"user","content":"Hi"}],"temperature":-1}',
                b'{"messages":[{"role":"user","content":"Hi"}],"top_p":-1e999}'):
        st, r = http("POST", "/v1/chat/completions", raw)
        expect_error(st, r, 400)
    still_serving()
    return "NaN, Infinity, 1e999, -1 -> 400"


def t_huge_body():
    # announce 100 MB and start sending: the server answers 413 without reading it all
    s = raw_connect()
    s.sendall(raw_request_head("/v1/chat/completions", 100 * 1024 * 1024))
    sent, chunk = 0, b" " * (1 << 20)
    s.settimeout(10)
    try:
        while sent < 100 * (1 << 20):
            s.sendall(chunk)
            sent += len(chunk)
    except OSError:
        pass  # the server closed the connection: expected
    data = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
    except OSError:
        pass
    s.close()
    check(data.startswith(b"HTTP/1.1 413"), f"reply {data[:200]!r} after {sent} bytes")
    check(sent < 50 * (1 << 20), f"the server read {sent} bytes before refusing")
    # a chunked body (no Content-Length) over the limit also gets 413
    s = raw_connect()
    auth = f"Authorization: Bearer {KEY}\r\n" if KEY else ""
    s.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\n{auth}Transfer-Encoding: chunked\r\n\r\n".encode())
    piece = b"%x\r\n%s\r\n" % (1 << 20, b" " * (1 << 20))
    try:
        for _ in range(12):
            s.sendall(piece)
        s.sendall(b"0\r\n\r\n")
    except OSError:
        pass
    data = s.recv(65536)
    s.close()
    check(data.startswith(b"HTTP/1.1 413"), f"chunked reply {data[:200]!r}")
    still_serving()
    return f"413 after {sent >> 20} MiB sent"


def t_slow_client():
    # a client that trickles its headers must not block others; the server drops it after --timeout (3 s)
    s = raw_connect()
    head = raw_request_head("/v1/completions", 20)
    s.sendall(head[:10])
    t0 = time.time()
    st, body = http("POST", "/v1/completions", {"prompt": "Hello", "max_tokens": 2, "temperature": 0}, timeout=60)
    check(st == 200, f"a normal request while a slow client waits: {st}")
    served = time.time() - t0
    s.settimeout(20)
    closed = False
    try:
        for i in range(10, len(head)):
            s.sendall(head[i:i + 1])
            time.sleep(1.0 if i < 12 else 0)
            if i == 12:
                time.sleep(4)   # silent past the timeout
        data = s.recv(4096)
        closed = data == b"" or data.startswith(b"HTTP/1.1 408")
    except OSError:
        closed = True
    s.close()
    check(closed, "the slow connection was not closed")
    still_serving()
    return f"others served in {served:.1f}s; the slow one closed"


# SmolLM2's end-of-generation tokens: <|endoftext|> (0), <|im_start|> (1), <|im_end|> (2)
NO_EOG = {"0": -100, "1": -100, "2": -100}


def t_disconnect_mid_stream():
    wait_idle()
    s = raw_connect()
    # end-of-text tokens banned, so the stream is still running when we hang up
    body = json.dumps({"prompt": "Tell me a long story.", "max_tokens": 200, "stream": True,
                       "logit_bias": NO_EOG}).encode()
    s.sendall(raw_request_head("/v1/completions", len(body)) + body)
    s.settimeout(60)
    got = b""
    while got.count(b"data: ") < 3:
        b = s.recv(4096)
        check(b, "stream ended early")
        got += b
    m = metrics()
    check(m["theseus_active_sequences"] >= 1 and m["theseus_kv_blocks_used"] >= 1, f"not running? {m}")
    s.close()
    t0 = time.time()
    wait_idle(5)
    freed = time.time() - t0
    still_serving()
    # the same for a non-streamed request
    s = raw_connect()
    body = json.dumps({"prompt": "Tell me a long story.", "max_tokens": 200, "logit_bias": NO_EOG}).encode()
    s.sendall(raw_request_head("/v1/completions", len(body)) + body)
    t_end = time.time() + 30
    while metrics()["theseus_active_sequences"] < 1 and time.time() < t_end:
        time.sleep(0.05)
    s.close()
    wait_idle(5)
    still_serving()
    return f"KV blocks freed {freed:.2f}s after the disconnect"


def t_recursive_template():
    for tmpl in ("{% macro f(x) %}{{ f(x) }}{% endmacro %}{{ f(1) }}",
                 "{% for m in messages %}{{ m.content * 100000000 }}{% endfor %}",
                 "{{ raise_exception('no') }}", "{% for %}"):
        st, r = http("POST", "/v1/chat/completions", {"messages": MSG, "chat_template": tmpl, "max_tokens": 2})
        expect_error(st, r, 400, ["template"])
    still_serving()
    return "recursion, a huge output, raise_exception, a syntax error -> 400"


def t_misc_http():
    st, r = http("GET", "/nope")
    expect_error(st, r, 404)
    st, r = http("GET", "/v1/chat/completions")
    expect_error(st, r, 405)
    # garbage on the socket: an HTTP 400 and a closed connection
    s = raw_connect()
    s.sendall(b"\x00\x01\x02 GARBAGE\r\n\r\n")
    s.settimeout(10)
    data = s.recv(4096)
    s.close()
    check(data == b"" or data.startswith(b"HTTP/1.1 4"), f"{data[:100]!r}")
    still_serving()
    return "404, 405, garbage"


# ---------------------------------------------------------------- issue 27

def raw_exchange(data, first=None, wait=5):
    """Sends data (after the request `first`, whose answer is read off, on the same
    connection) and returns everything the server sends until it closes (or wait s)."""
    s = raw_connect()
    s.settimeout(wait)
    if first:
        s.sendall(first)
        got = b""
        while b"\r\n\r\n" not in got or len(got) < got.index(b"\r\n\r\n") + 4 + int(
                got.split(b"Content-Length: ")[1].split(b"\r\n")[0]):
            b = s.recv(65536)
            check(b, f"no answer to the first request: {got!r}")
            got += b
    s.sendall(data)
    out, closed = b"", False
    t_end = time.time() + wait
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


AUTH = f"Authorization: Bearer {KEY}\r\n" if KEY else ""
BODY = b'{"prompt": "Hi", "max_tokens": 1}'
HEALTH = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"


def post(extra, body=b""):
    return (f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{AUTH}".encode()
            + extra + b"\r\n" + body)


SMUGGLING = [
    # (name, request, expected status, may it come on a kept-alive connection too)
    ("cl_and_te", post(b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n",
                       b"%x\r\n%s\r\n0\r\n\r\n" % (len(BODY), BODY) + HEALTH), 400, True),
    ("two_cl", post(b"Content-Length: %d\r\nContent-Length: 5\r\n" % len(BODY), BODY + HEALTH), 400, True),
    ("te_xchunked", post(b"Transfer-Encoding: xchunked\r\n", BODY), 400, True),
    ("te_gzip_chunked", post(b"Transfer-Encoding: gzip, chunked\r\n", BODY), 400, True),
    ("cl_negative", post(b"Content-Length: -1\r\n", BODY), 400, False),
    ("cl_overlong", post(b"Content-Length: 99999999999999999999999\r\n", BODY), 400, False),
    ("chunk_overflow", post(b"Transfer-Encoding: chunked\r\n", b"FFFFFFFFFFFFFFFF\r\n" + BODY), 413, False),
    ("space_before_colon", post(b"Content-Length : %d\r\n" % len(BODY), BODY), 400, False),
    ("obs_fold", post(b"Content-Length: %d\r\nX-A: 1\r\n b\r\n" % len(BODY), BODY), 400, False),
]


def t_framing():
    """RFC 9112: ambiguous framing is refused with one clean 400 (or 413) and the
    connection closed, so a request hidden behind it is never answered. A new
    connection's head is checked byte by byte at the gate; on a kept-alive
    connection libmicrohttpd parses the head and the handler checks its fields
    (libmicrohttpd 0.9.75 answers a malformed Content-Length there itself, with
    its status line twice: that is what the nginx config in deploy/ is for)."""
    done = []
    for name, req, status, keepalive in SMUGGLING:
        for first in ([None, HEALTH] if keepalive else [None]):
            out, closed = raw_exchange(req, first)
            where = "kept-alive" if first else "new connection"
            check(out.count(b"HTTP/1.1 ") == 1, f"{name} ({where}): {out.count(b'HTTP/1.1 ')} status lines: {out[:300]!r}")
            check(out.startswith(b"HTTP/1.1 %d" % status), f"{name} ({where}): {out[:200]!r}")
            check(b"Connection: close" in out and closed, f"{name} ({where}): the connection was not closed")
            check(b'"error"' in out, f"{name} ({where}): no error object: {out[:300]!r}")
            done.append(name if not first else name + "+ka")
    still_serving()
    return f"{len(done)} cases, one answer each, closed"


def t_key_before_routing():
    if not KEY:
        return "no key configured"
    for method, path in (("GET", "/nope"), ("GET", "/v1/chat/completions"), ("POST", "/v1/models"), ("DELETE", "/metrics")):
        st, body = http(method, path, key=False)
        expect_error(st, body, 401, ["key"])
    st, body = http("GET", "/nope")
    expect_error(st, body, 404)
    st, body = http("GET", "/health", key=False)
    check(st == 200, f"/health without a key: {st}")
    return "404/405 only with the key"


def t_unsupported_fields():
    cases = [
        # (response_format, tools and tool_choice are implemented: tests/server/test_structured.py)
        ("/v1/chat/completions", {"messages": MSG, "functions": [{"name": "f"}]}, "functions"),
        ("/v1/completions", {"prompt": "Hi", "best_of": 2}, "best_of"),
        ("/v1/completions", {"prompt": "Hi", "suffix": "!"}, "suffix"),
    ]
    for path, body, word in cases:
        st, r = http("POST", path, body)
        expect_error(st, r, 400, [word, "not supported"])
    for path, body in [("/v1/chat/completions", {"messages": MSG, "max_tokens": 1, "response_format": {"type": "text"},
                                                  "tools": [], "tool_choice": "none"}),
                       ("/v1/completions", {"prompt": "Hi", "max_tokens": 1, "best_of": 1, "suffix": ""})]:
        st, r = http("POST", path, body)
        check(st == 200, f"the no-op values must pass: {st} {r}")
    st, r = http("POST", "/v1/completions", {"prompt": ["a", "b"], "max_tokens": 1})
    msg = expect_error(st, r, 400, ["prompt", "one prompt per request"])
    check("token" not in msg.split("one prompt")[0], f"names the wrong problem: {msg}")
    return f"{len(cases)} fields refused by name; a list of prompts: '{msg[:60]}'"


def t_content_parts_joined():
    parts = [{"type": "text", "text": "What is"}, {"type": "text", "text": "the best book"}]
    st, r = http("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": parts}],
                                                  "chat_template": "{{ raise_exception('<' + messages[0].content + '>') }}"})
    msg = expect_error(st, r, 400)
    check("<What is\nthe best book>" in msg, f"the template got {msg!r}")
    st, r = http("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": [
        {"type": "text", "text": ""}, {"type": "text", "text": "a"}, {"type": "text", "text": ""}, {"type": "text", "text": "b"}]}],
        "chat_template": "{{ raise_exception('<' + messages[0].content + '>') }}"})
    msg = expect_error(st, r, 400)
    check("<a\n\nb>" in msg, f"llama-server's rule (no separator before the first text): {msg!r}")
    return "'What is' + 'the best book' -> 'What is\\nthe best book'"


def vm(field):
    with open(f"/proc/{PID}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) // 1024
    return 0


def t_template_memory_budget():
    """24 concurrent renders of a list-doubling template: each alone is stopped by
    the per-render cap (256 MiB, a 400); together they share the server's
    --mem-budget (t_server.sh: 384 MiB), so the server's memory stays bounded
    and the excess gets 503 instead of the machine running out (before: 24 such
    requests took the server from 164 MiB to 4.1 GiB)."""
    tmpl = ("{% set ns = namespace(l=[1]) %}{% for i in range(60) %}{% set ns.l = ns.l + ns.l %}{% endfor %}"
            "{{ ns.l | length }}")
    rss0 = vm("VmRSS")
    results, peak = [], [rss0]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak.append(vm("VmRSS"))
            time.sleep(0.02)

    def one():
        st, r = http("POST", "/v1/chat/completions", {"messages": MSG, "chat_template": tmpl, "max_tokens": 1}, timeout=120)
        results.append((st, (r.get("error") or {}).get("message", "") if isinstance(r, dict) else str(r)))

    sampler = threading.Thread(target=sample)
    sampler.start()
    th = [threading.Thread(target=one) for _ in range(24)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    stop.set()
    sampler.join()
    codes = sorted(st for st, _ in results)
    check(all(st in (400, 503) for st in codes), f"statuses {codes}: {results[:3]}")
    check(any(st == 503 and "budget" in m for st, m in results), f"no request hit the shared budget: {results[:3]}")
    grew = max(peak) - rss0
    # the budget bounds the bytes renders hold (384 MiB); RSS adds the allocator's arenas and
    # freed-but-kept pages (seen up to +223 MiB over the budget on a loaded 2-core VM): the
    # bound is what matters (before the budget: 164 MiB -> 4.1 GiB)
    check(grew < 384 + 256, f"RSS grew by {grew} MiB ({rss0} -> {max(peak)})")
    st, r = http("POST", "/v1/chat/completions", {"messages": MSG, "chat_template": tmpl, "max_tokens": 1}, timeout=120)
    expect_error(st, r, 400, ["memory limit"])   # alone: the per-render cap, the template's own fault
    still_serving()
    return f"{codes.count(400)} x 400, {codes.count(503)} x 503; RSS {rss0} -> peak {max(peak)} MiB"


for name, fn in [("invalid_json", t_invalid_json), ("deep_nesting", t_deep_nesting), ("wrong_types", t_wrong_types),
                 ("bad_token_ids", t_bad_token_ids), ("huge_limits", t_huge_limits),
                 ("nan_temperature", t_nan_temperature), ("huge_body", t_huge_body), ("slow_client", t_slow_client),
                 ("disconnect_mid_stream", t_disconnect_mid_stream), ("recursive_template", t_recursive_template),
                 ("misc_http", t_misc_http), ("framing", t_framing), ("key_before_routing", t_key_before_routing),
                 ("unsupported_fields", t_unsupported_fields), ("content_parts_joined", t_content_parts_joined),
                 ("template_memory_budget", t_template_memory_budget)]:
    run("server_hostile_" + name, fn)
finish()
