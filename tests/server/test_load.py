"""test_load.py — batching and load. Batching equivalence: the greedy text of
each of 8 concurrent streams equals the same request served alone. Load: 32
concurrent streaming clients against --parallel 8 all complete (or get a clean
503), /health stays responsive, and RSS does not grow from one load round to
the next."""
import os
import threading
import time

import openai

from common import check, client, http, rss_kib, run, wait_idle, finish

C = client()
PROMPTS = ["The capital of France is", "Once upon a time", "def fibonacci(n):", "The best way to learn is",
           "In 1492, Columbus", "My favourite food is", "Water boils at", "The meaning of life is"]


def stream_text(prompt, max_tokens, out, i, start=None):
    try:
        if start:
            start.wait()
        parts, finish_reason = [], None
        for ch in C.completions.create(model="x", prompt=prompt, temperature=0, max_tokens=max_tokens, stream=True):
            for c in ch.choices:
                parts.append(c.text)
                finish_reason = c.finish_reason or finish_reason
        out[i] = ("ok", "".join(parts), finish_reason)
    except openai.APIStatusError as e:
        out[i] = ("status", e.status_code, str(e))
    except Exception as e:  # noqa: BLE001
        out[i] = ("error", type(e).__name__, str(e))


def t_batching_equivalence():
    alone = [C.completions.create(model="x", prompt=p, temperature=0, max_tokens=8).choices[0].text for p in PROMPTS]
    out = [None] * len(PROMPTS)
    start = threading.Barrier(len(PROMPTS))
    th = [threading.Thread(target=stream_text, args=(p, 8, out, i, start)) for i, p in enumerate(PROMPTS)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    for i, p in enumerate(PROMPTS):
        check(out[i] and out[i][0] == "ok", f"stream {i} failed: {out[i]}")
        check(out[i][1] == alone[i], f"prompt {p!r}: concurrent {out[i][1]!r} != alone {alone[i]!r}")
    wait_idle()
    return "8/8 streams equal"


def load_round(n_clients=32, max_tokens=6):
    out = [None] * n_clients
    health = []
    stop = threading.Event()

    def poll_health():
        while not stop.is_set():
            t0 = time.time()
            st, _ = http("GET", "/health", timeout=10)
            health.append((st, time.time() - t0))
            time.sleep(0.2)

    hp = threading.Thread(target=poll_health)
    hp.start()
    th = [threading.Thread(target=stream_text, args=(PROMPTS[i % len(PROMPTS)] + " " * (i // 8), max_tokens, out, i))
          for i in range(n_clients)]
    t0 = time.time()
    for t in th:
        t.start()
    for t in th:
        t.join()
    wall = time.time() - t0
    stop.set()
    hp.join()
    done = sum(1 for o in out if o and o[0] == "ok" and o[2] in ("stop", "length"))
    busy = sum(1 for o in out if o and o[0] == "status" and o[1] == 503)
    check(done + busy == n_clients, f"{n_clients - done - busy} clients neither completed nor got 503: "
          f"{[o for o in out if not (o and (o[0] == 'ok' or o[1] == 503))][:3]}")
    check(all(st == 200 for st, _ in health) and health, f"/health answers {set(st for st, _ in health)}")
    worst = max(dt for _, dt in health)
    check(worst < 2.0, f"/health took {worst:.2f}s under load")
    return done, busy, wall, worst


def t_load():
    # round 1 warms the allocator's arenas and the thread-stack cache; RSS is then
    # measured after rounds 2 and 3 and must not grow (a leak grows every round)
    wait_idle()
    rounds = []
    rss = []
    for _ in range(3):
        rounds.append(load_round())
        wait_idle()
        rss.append(rss_kib())
    summary = "; ".join(f"{d} done {b} busy in {w:.1f}s" for d, b, w, _ in rounds)
    worst = max(r[3] for r in rounds)
    if os.environ.get("ASAN"):   # ASan's quarantine holds freed memory: RSS is not a leak signal there
        return f"{summary}; ASan build: RSS not checked"
    check(rss[2] - rss[1] < 4096, f"RSS grew {rss[2] - rss[1]} KiB between load rounds 2 and 3 ({rss})")
    return f"{summary}; worst /health {worst:.2f}s; RSS after each round {[r >> 10 for r in rss]} MiB"


def t_chunked_prefill():
    # the server runs with --batch 64: a 300-token prompt is fed in 5 chunks, and a
    # running stream gets a token in each of those steps instead of waiting for all
    wait_idle()
    times = []

    def stream_a():
        for ch in C.completions.create(model="x", prompt="Once upon a time", temperature=0, max_tokens=24, stream=True):
            if ch.choices and ch.choices[0].text:
                times.append(time.time())

    a = threading.Thread(target=stream_a)
    a.start()
    t_end = time.time() + 60
    while len(times) < 2 and time.time() < t_end:
        time.sleep(0.02)
    t0 = time.time()
    r = C.completions.create(model="x", prompt="word " * 300, temperature=0, max_tokens=1)
    t1 = time.time()
    a.join()
    during = sum(1 for t in times if t0 < t < t1)
    check(r.usage.prompt_tokens > 250, f"prompt only {r.usage.prompt_tokens} tokens")
    check(during >= 3, f"the running stream got {during} tokens while a {r.usage.prompt_tokens}-token prompt was fed")
    return f"{during} stream tokens during a {r.usage.prompt_tokens}-token prefill"


run("server_chunked_prefill", t_chunked_prefill)
run("server_batching_equivalence", t_batching_equivalence)
run("server_load_32_clients", t_load)
finish()
