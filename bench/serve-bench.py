#!/usr/bin/env python3
"""serve-bench.py — N concurrent streaming clients against an OpenAI-style
/v1/completions server (`theseus serve`, `llama-server`, anything that streams
SSE chunks): each client sends a prompt of --prompt-tokens random token ids
(different for every client, no shared prefix) and reads --max-tokens tokens
with "stream": true. Not a test: the numbers depend on the machine.

Reports, over the clients of one round (the median round of --rounds):
  aggregate decode tok/s   all clients' tokens after their first / (the last
                           client's end - the first client's first token)
  aggregate total tok/s    all generated tokens / round wall time
  per-client decode tok/s  median over clients of (tokens - 1) / (end - first token)
  TTFT                     median (and max) time from sending to the first text chunk

Tokens are counted from the usage chunk when the server sends one
(stream_options.include_usage), else as the number of text chunks. To get
exactly --max-tokens tokens a request sends "ignore_eos": true (llama-server's
field, and theseus serve's) — pass --no-ignore-eos for servers that reject it.

Either start a server yourself and pass --url, or let the script start one:
  bench/serve-bench.py --url http://127.0.0.1:8080
  bench/serve-bench.py --theseus build/theseus -m models/SmolLM2-135M-Instruct.Q4_1.gguf -c 4 -n 32
  bench/serve-bench.py --theseus build/theseus -m MODEL --server-args "--gpu"      # theseus serve --gpu --parallel N
  bench/serve-bench.py --llama-server PATH/llama-server -m MODEL --server-args "-ngl 99 -fa"
(a started server gets --parallel / -np = the client count and a context of
clients x (prompt + max_tokens + 64) tokens, --ctx / -c).
"""
import argparse
import json
import random
import shlex
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def one_client(base, prompt, a, res, i, start):
    body = {"prompt": prompt, "max_tokens": a.max_tokens, "temperature": a.temperature, "seed": 1000 + i,
            "stream": True, "stream_options": {"include_usage": True}}
    if a.temperature > 0 and a.top_k > 0:
        body["top_k"] = a.top_k
    if a.ignore_eos:
        body["ignore_eos"] = True
    req = urllib.request.Request(base + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    start.wait()
    t0 = time.perf_counter()
    first, chunks, usage, err = None, 0, None, None
    try:
        with urllib.request.urlopen(req, timeout=a.timeout) as r:
            for line in r:
                line = line.strip()
                if not line.startswith(b"data: ") or line == b"data: [DONE]":
                    continue
                ev = json.loads(line[6:])
                if ev.get("error"):
                    err = str(ev["error"])
                ch = ev.get("choices") or []
                if ch and ch[0].get("text"):
                    chunks += 1
                    if first is None:
                        first = time.perf_counter()
                if ev.get("usage"):
                    usage = ev["usage"].get("completion_tokens")
    except (urllib.error.URLError, OSError, ValueError) as e:
        err = str(e)
    end = time.perf_counter()
    res[i] = {"t0": t0, "first": first, "end": end, "tokens": usage if usage is not None else chunks, "err": err}


def one_round(base, prompts, a):
    n = len(prompts)
    res = [None] * n
    start = threading.Barrier(n + 1)
    th = [threading.Thread(target=one_client, args=(base, prompts[i], a, res, i, start)) for i in range(n)]
    for t in th:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in th:
        t.join()
    wall = time.perf_counter() - t0
    bad = [r["err"] for r in res if r["err"] or r["first"] is None]
    if bad:
        sys.exit(f"serve-bench: {len(bad)} of {n} clients failed: {bad[0]}")
    toks = sum(r["tokens"] for r in res)
    dec = sum(r["tokens"] - 1 for r in res)
    span = max(r["end"] for r in res) - min(r["first"] for r in res)
    per = [(r["tokens"] - 1) / (r["end"] - r["first"]) for r in res if r["tokens"] > 1 and r["end"] > r["first"]]
    ttft = [r["first"] - r["t0"] for r in res]
    return {"tokens": toks, "wall": wall, "agg_decode": dec / span if span > 0 else 0.0, "agg_total": toks / wall,
            "per_client": statistics.median(per) if per else 0.0, "ttft": statistics.median(ttft), "ttft_max": max(ttft),
            "min_tokens": min(r["tokens"] for r in res)}


def wait_ready(base, proc, secs):
    t_end = time.time() + secs
    while time.time() < t_end:
        if proc is not None and proc.poll() is not None:
            sys.exit(f"serve-bench: the server exited with status {proc.returncode}")
        try:
            with urllib.request.urlopen(base + "/health", timeout=2) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)
    sys.exit("serve-bench: the server did not become ready")


def start_server(a, n_ctx):
    port = free_port()
    extra = shlex.split(a.server_args)
    if a.theseus:
        cmd = [a.theseus, "serve", "-m", a.model, "--port", str(port), "--parallel", str(a.clients), "--ctx", str(n_ctx)]
    else:
        cmd = [a.llama_server, "-m", a.model, "--port", str(port), "-np", str(a.clients), "-c", str(n_ctx)]
    cmd += extra
    print("server:", " ".join(cmd), flush=True)
    log = open(a.server_log, "w") if a.server_log else subprocess.DEVNULL
    return subprocess.Popen(cmd, stdout=log, stderr=log), f"http://127.0.0.1:{port}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", help="a running server (else one is started: --theseus or --llama-server)")
    ap.add_argument("--theseus", help="start `THESEUS serve` (the binary)")
    ap.add_argument("--llama-server", help="start this llama-server binary")
    ap.add_argument("-m", "--model", help="model file for a started server")
    ap.add_argument("--server-args", default="", help="extra arguments for a started server (e.g. \"--gpu\")")
    ap.add_argument("--server-log", help="file for a started server's output")
    ap.add_argument("-c", "--clients", type=int, default=16)
    ap.add_argument("-p", "--prompt-tokens", type=int, default=128)
    ap.add_argument("-n", "--max-tokens", type=int, default=128)
    ap.add_argument("--temperature", type=float, default=0.0, help="0: greedy (default)")
    ap.add_argument("--top-k", type=int, default=0, help="sent when > 0 with a temperature")
    ap.add_argument("--vocab-lo", type=int, default=1000, help="prompt token ids are drawn from [lo, hi)")
    ap.add_argument("--vocab-hi", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=3, help="timed rounds (after one warm-up round); the median is shown")
    ap.add_argument("--no-ignore-eos", dest="ignore_eos", action="store_false")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--json", action="store_true", help="also print the result as one JSON line")
    a = ap.parse_args()
    if not a.url and not (a.theseus or a.llama_server):
        ap.error("give --url, or --theseus / --llama-server with -m")
    if not a.url and not a.model:
        ap.error("a started server needs -m MODEL")
    proc = None
    if a.url:
        base = a.url.rstrip("/")
    else:
        proc, base = start_server(a, a.clients * (a.prompt_tokens + a.max_tokens + 64))
    try:
        wait_ready(base, proc, 600)
        rng = random.Random(26)
        rounds = []
        for k in range(a.rounds + 1):  # round 0: warm-up
            prompts = [[rng.randrange(a.vocab_lo, a.vocab_hi) for _ in range(a.prompt_tokens)] for _ in range(a.clients)]
            r = one_round(base, prompts, a)
            if k:
                rounds.append(r)
            print(f"{'warm-up' if k == 0 else 'round %d' % k}: {r['tokens']} tokens in {r['wall']:.2f} s, "
                  f"aggregate decode {r['agg_decode']:.1f} tok/s, per client {r['per_client']:.1f} tok/s, "
                  f"TTFT median {r['ttft'] * 1000:.0f} ms", flush=True)
        r = sorted(rounds, key=lambda x: x["agg_decode"])[len(rounds) // 2]
        short = f" (some clients got only {r['min_tokens']} tokens)" if r["min_tokens"] < a.max_tokens else ""
        print(f"clients {a.clients}, prompt {a.prompt_tokens} tokens, {a.max_tokens} tokens each, "
              f"median of {a.rounds} rounds{short}:")
        print(f"  aggregate decode   {r['agg_decode']:9.1f} tok/s")
        print(f"  aggregate total    {r['agg_total']:9.1f} tok/s  ({r['tokens']} tokens / {r['wall']:.2f} s)")
        print(f"  per-client decode  {r['per_client']:9.1f} tok/s  (median)")
        print(f"  TTFT               {r['ttft'] * 1000:9.1f} ms     (median; max {r['ttft_max'] * 1000:.1f} ms)")
        if a.json:
            print(json.dumps({"clients": a.clients, "prompt_tokens": a.prompt_tokens, "max_tokens": a.max_tokens, **r}))
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    main()
