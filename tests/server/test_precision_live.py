"""Live precision (docs/precision.md), run by tests/t_precision.sh with its own servers on
the tiny model: a server started with --precision-file keeps 16 streaming clients
streaming while the file changes three times; no request fails; after each change
GET /precision and /metrics report the new assignment (swap count, hash); a bad file is
ignored; the greedy text after the last swap equals that of a fresh server started with
the same assignment at load (--precision); an idle server (no request) sees a change
and swaps it in."""
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request

T = os.environ.get("THESEUS", "build/theseus")
S = os.environ.get("SHARED", "../shared")
F32 = f"{S}/fixtures/tiny/tiny-F32.gguf"
Q4 = f"{S}/fixtures/tiny/tiny-Q4_K_M.gguf"
TMP = os.environ["TMPDIR_PREC"]
PROMPT = "The quick brown fox jumps over the lazy dog. Once upon a time"
CONFIGS = [
    "blk.*.attn_*.weight Q8_0\nblk.*.ffn_*.weight Q4_K\noutput.weight F16\n",
    "blk.0-1.ffn_*.weight Q8_0\n",
    "blk.*.attn_q.weight F16\nblk.3.ffn_down.weight Q5_0\noutput.weight Q8_0\n",
]
IDLE_CONFIG = "blk.*.attn_v.weight Q8_0\n"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as r:
        return r.status, r.read().decode()


def post(port, body, stream=False):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=120)


def start(args, log):
    port = free_port()
    p = subprocess.Popen([T, "serve", "-m", Q4, "--port", str(port), "--parallel", "4", "-t", "2"] + args,
                         stdout=subprocess.DEVNULL, stderr=open(log, "w"))
    for _ in range(300):
        try:
            if get(port, "/health")[0] == 200:
                return p, port
        except Exception:  # noqa: BLE001 - not up yet
            pass
        time.sleep(0.1)
    p.kill()
    raise RuntimeError("server did not come up: " + open(log).read()[-500:])


def greedy(port):
    with post(port, {"prompt": PROMPT, "max_tokens": 24, "temperature": 0}) as r:
        return json.loads(r.read())["choices"][0]["text"]


def precision(port):
    return json.loads(get(port, "/precision")[1])


STOP = threading.Event()


def stream_client(port, out, i):
    """Streams requests one after another until STOP; out[i] = streams completed."""
    try:
        done = 0
        while not STOP.is_set() or done == 0:
            n = 0
            with post(port, {"prompt": PROMPT + str(i), "max_tokens": 64, "temperature": 0.8, "seed": i + done,
                             "stream": True}) as r:
                for line in r:
                    line = line.decode().strip()
                    if line.startswith("data: ") and line != "data: [DONE]":
                        ev = json.loads(line[6:])
                        if "error" in ev:
                            raise RuntimeError(str(ev))
                        n += 1
            if n < 1:
                raise RuntimeError("a stream without tokens")
            done += 1
        out[i] = done
    except Exception as e:  # noqa: BLE001 - reported by the main thread
        out[i] = repr(e)


def write(path, text):
    tmp = path + ".new"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def main():
    cfg = f"{TMP}/live.cfg"
    write(cfg, "")
    p, port = start(["--precision-file", cfg, "--source", F32], f"{TMP}/live.log")
    failures = []
    try:
        p0 = precision(port)
        if p0["swaps"] != 0 or "blk.*.attn_q.weight Q4_K" not in p0["assignment"]:
            failures.append(f"initial /precision: {p0}")
        out = [None] * 16
        th = [threading.Thread(target=stream_client, args=(port, out, i)) for i in range(16)]
        for t in th:
            t.start()
        hashes = [p0["hash"]]
        for k, text in enumerate(CONFIGS):
            time.sleep(0.3)
            write(cfg, text)
            for _ in range(200):
                pk = precision(port)
                if pk["swaps"] == k + 1:
                    break
                time.sleep(0.1)
            else:
                failures.append(f"change {k + 1}: no swap ({pk['swaps']})")
            metrics = get(port, "/metrics")[1]
            if f'theseus_precision_swaps_total {k + 1}' not in metrics or f'hash="{pk["hash"]}"' not in metrics:
                failures.append(f"change {k + 1}: /metrics does not show it")
            hashes.append(pk["hash"])
        alive = sum(t.is_alive() for t in th)
        STOP.set()
        for t in th:
            t.join(timeout=300)
        bad = [o for o in out if not isinstance(o, int) or o < 1]
        if bad:
            failures.append(f"streaming clients failed: {bad[:3]}")
        if len(set(hashes)) != len(hashes):
            failures.append(f"hashes repeat: {hashes}")
        # a bad file is ignored
        write(cfg, "blk.99.attn_q.weight Q8_0\n")
        time.sleep(1.2)
        greedy(port)   # the file is looked at when a request comes in
        time.sleep(1.2)
        greedy(port)
        pb = precision(port)
        if pb["swaps"] != len(CONFIGS) or pb["hash"] != hashes[-1]:
            failures.append("a bad file changed the assignment")
        write(cfg, CONFIGS[-1])   # back to the last good one (same text: no swap)
        time.sleep(1.5)
        live_text = greedy(port)
        # an idle server sees a change without a request (the driver calls the hook on a timer):
        # only /precision is asked, which does not step the runtime
        time.sleep(1.2)
        write(cfg, IDLE_CONFIG)
        t0 = time.time()
        while time.time() - t0 < 10 and precision(port)["swaps"] != len(CONFIGS) + 1:
            time.sleep(0.1)
        pi = precision(port)
        if pi["swaps"] != len(CONFIGS) + 1 or "blk.*.attn_v.weight Q8_0" not in pi["assignment"]:
            failures.append(f"idle server: no swap within 10 s of the change ({pi['swaps']} swaps)")
        else:
            print(f"  idle server: swapped {time.time() - t0:.1f} s after the change, no request")
        print(f"  16 streaming clients ({alive} alive at the 3rd swap), streams completed: {out}; greedy after swaps: {live_text!r}")
    finally:
        p.terminate()
        p.wait(timeout=30)
    fixed = f"{TMP}/fixed.cfg"
    write(fixed, CONFIGS[-1])
    q, qport = start(["--precision", fixed, "--source", F32], f"{TMP}/fresh.log")
    try:
        fresh_text = greedy(qport)
    finally:
        q.terminate()
        q.wait(timeout=30)
    if fresh_text != live_text:
        failures.append(f"greedy differs: live {live_text!r} vs fresh {fresh_text!r}")
    if "ignoring" not in open(f"{TMP}/live.log").read():
        failures.append("the bad file was not logged")
    if failures:
        print("FAIL precision_live")
        for f in failures:
            print("  " + f)
    else:
        print("ok precision_live")


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001
        print("FAIL precision_live")
        print("  " + repr(e))
    sys.exit(0)
