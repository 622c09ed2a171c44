"""common.py — helpers for the server tests: the server's address and key from
the environment (set by tests/t_server.sh), raw HTTP calls with urllib and
sockets (never anything but 127.0.0.1), and ok/FAIL/SKIP reporting."""
import json
import os
import socket
import sys
import time
import traceback
import urllib.error
import urllib.request

PORT = int(os.environ["THESEUS_SERVER_PORT"])
KEY = os.environ.get("THESEUS_SERVER_KEY", "")
PID = int(os.environ.get("THESEUS_SERVER_PID", "0"))
BASE = f"http://127.0.0.1:{PORT}"

results = {"ok": 0, "fail": 0}


def run(name, fn):
    """Runs one test; prints 'ok NAME (detail)' or 'FAIL NAME' with the reason."""
    t0 = time.time()
    try:
        detail = fn()
        print(f"ok {name}" + (f" ({detail})" if detail else "") + f" [{time.time() - t0:.1f}s]", flush=True)
        results["ok"] += 1
    except Exception as e:  # noqa: BLE001 - every failure is reported, not raised
        print(f"FAIL {name}: {type(e).__name__}: {e}", flush=True)
        traceback.print_exc(file=sys.stdout)
        results["fail"] += 1


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def http(method, path, body=None, headers=None, key=True, timeout=60):
    """Returns (status, parsed JSON or text)."""
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    h = {"Content-Type": "application/json"}
    if key and KEY:
        h["Authorization"] = f"Bearer {KEY}"
    h.update(headers or {})
    req = urllib.request.Request(BASE + path, data=data, method=method, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, raw = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode("utf-8", "replace")


def expect_error(status, body, code, words=()):
    """The OpenAI error object with the right status and a message naming the thing."""
    check(status == code, f"status {status}, expected {code}: {body}")
    check(isinstance(body, dict) and isinstance(body.get("error"), dict), f"not an error object: {body}")
    msg = body["error"].get("message", "")
    check(isinstance(msg, str) and msg, f"empty error message: {body}")
    for w in words:
        check(w.lower() in msg.lower(), f"message '{msg}' does not mention '{w}'")
    return msg


def client():
    import openai
    return openai.OpenAI(base_url=BASE + "/v1", api_key=KEY or "none", max_retries=0, timeout=120)


def metrics():
    """Parses /metrics (Prometheus text format) into {name{labels}: float}."""
    st, text = http("GET", "/metrics")
    check(st == 200 and isinstance(text, str), f"/metrics status {st}")
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            check(not line or line.startswith("# HELP ") or line.startswith("# TYPE "), f"bad comment line {line!r}")
            continue
        name, _, value = line.rpartition(" ")
        check(name and (name.replace("_", "a").replace(":", "a")[0].isalpha()), f"bad metric line {line!r}")
        out[name] = float(value)
    return out


def wait_idle(timeout=10):
    """Waits until the server has no active sequences and no KV blocks in use."""
    t_end = time.time() + timeout
    while True:
        m = metrics()
        if m["theseus_active_sequences"] == 0 and m["theseus_kv_blocks_used"] == 0 and m["theseus_queue_depth"] == 0:
            return m
        if time.time() > t_end:
            raise AssertionError(f"server not idle after {timeout}s: active {m['theseus_active_sequences']}, "
                                 f"kv {m['theseus_kv_blocks_used']}, queue {m['theseus_queue_depth']}")
        time.sleep(0.1)


def rss_kib():
    with open(f"/proc/{PID}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def raw_connect():
    s = socket.create_connection(("127.0.0.1", PORT), timeout=30)
    return s


def raw_request_head(path, length, extra=""):
    auth = f"Authorization: Bearer {KEY}\r\n" if KEY else ""
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{auth}"
            f"Content-Length: {length}\r\n{extra}\r\n").encode()


def finish():
    sys.exit(0 if results["fail"] == 0 else 1)
