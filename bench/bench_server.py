#!/usr/bin/env python3
"""bench_server.py — aggregate generation throughput of `theseus serve` at 1, 4
and 16 concurrent streams (not a test: numbers depend on the machine).

Starts the server on a free loopback port (--parallel 16 by default), sends C
concurrent streaming /v1/completions requests with different prompts, and
reports generated tokens / wall time (tokens counted from each stream's usage
chunk), mean time to first token, and per-stream tokens/s.

usage: bench/bench_server.py [-m MODEL] [--theseus BIN] [-n MAX_TOKENS] [-t THREADS] [--levels 1,4,16]
"""
import argparse
import json
import socket
import subprocess
import threading
import time
import urllib.request

PROMPTS = ["Once upon a time", "The history of the Roman empire", "Write a poem about the sea",
           "Explain how a transistor works", "The recipe for bread is", "In the year 2050,",
           "The rules of chess are", "My favourite book is"]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def one_stream(base, prompt, max_tokens, out, i, start):
    body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0.8, "seed": i, "stream": True,
                       "stream_options": {"include_usage": True}}).encode()
    req = urllib.request.Request(base + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
    start.wait()
    t0 = time.time()
    ttft, tokens = None, 0
    with urllib.request.urlopen(req, timeout=600) as r:
        for line in r:
            line = line.strip()
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            ev = json.loads(line[6:])
            if ev.get("choices") and ev["choices"][0].get("text") and ttft is None:
                ttft = time.time() - t0
            if ev.get("usage"):
                tokens = ev["usage"]["completion_tokens"]
    out[i] = (tokens, ttft or 0.0, time.time() - t0)


def run_level(base, c, max_tokens):
    out = [None] * c
    start = threading.Barrier(c + 1)
    th = [threading.Thread(target=one_stream, args=(base, PROMPTS[i % len(PROMPTS)] + " " * (i // len(PROMPTS)),
                                                    max_tokens, out, i, start)) for i in range(c)]
    for t in th:
        t.start()
    start.wait()
    t0 = time.time()
    for t in th:
        t.join()
    wall = time.time() - t0
    toks = sum(o[0] for o in out)
    return toks, wall, sum(o[1] for o in out) / c, sum(o[0] / o[2] for o in out) / c


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", "--model", default="models/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--theseus", default="build/theseus")
    ap.add_argument("-n", "--max-tokens", type=int, default=64)
    ap.add_argument("-t", "--threads", type=int, default=0)
    ap.add_argument("--levels", default="1,4,16")
    a = ap.parse_args()
    levels = [int(x) for x in a.levels.split(",")]
    port = free_port()
    cmd = [a.theseus, "serve", "-m", a.model, "--port", str(port), "--parallel", str(max(levels)), "--ctx", "8192"]
    if a.threads:
        cmd += ["-t", str(a.threads)]
    srv = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                with urllib.request.urlopen(base + "/health", timeout=2) as r:
                    if json.load(r).get("status") == "ok":
                        break
            except OSError:
                pass
            time.sleep(0.1)
        run_level(base, 1, 8)  # warm-up
        print(f"model {a.model}, max_tokens {a.max_tokens}, --parallel {max(levels)}")
        print(f"{'streams':>8} {'tokens':>7} {'wall s':>7} {'agg tok/s':>10} {'per-stream tok/s':>17} {'mean TTFT s':>12}")
        for c in levels:
            toks, wall, ttft, per = run_level(base, c, a.max_tokens)
            print(f"{c:>8} {toks:>7} {wall:>7.2f} {toks / wall:>10.1f} {per:>17.1f} {ttft:>12.3f}", flush=True)
    finally:
        srv.terminate()
        srv.wait(timeout=30)


if __name__ == "__main__":
    main()
