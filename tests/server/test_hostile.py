"""test_hostile.py — hostile input, one test each: every bad request gets a
clear OpenAI error with the right status, and the server keeps serving
(each test ends with the server answering /health and being idle)."""
import json
import socket
import threading
import time

from common import (KEY, PORT, check, expect_error, http, metrics, raw_connect, raw_request_head, run, wait_idle,
                    finish)

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


for name, fn in [("invalid_json", t_invalid_json), ("deep_nesting", t_deep_nesting), ("wrong_types", t_wrong_types),
                 ("bad_token_ids", t_bad_token_ids), ("huge_limits", t_huge_limits),
                 ("nan_temperature", t_nan_temperature), ("huge_body", t_huge_body), ("slow_client", t_slow_client),
                 ("disconnect_mid_stream", t_disconnect_mid_stream), ("recursive_template", t_recursive_template),
                 ("misc_http", t_misc_http)]:
    run("server_hostile_" + name, fn)
finish()
