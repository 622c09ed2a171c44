"""test_spec.py — speculative decoding through the server (tests/t_spec.sh starts
`theseus serve --spec ngram`): 8 concurrent greedy requests that speculate give
the same text as each one alone with speculation off for it ("draft_max": -1),
while plain and speculating requests share the steps; /metrics exports the
acceptance counters; a bad "draft_max" is a 400 naming it."""
import threading

from common import check, expect_error, http, metrics, run, wait_idle, finish

PROMPTS = ["Repeat after me: one two three four, one two three four, one two",
           "def add(a, b):\n    return a + b\n\ndef add(a, b):\n", "The capital of France is",
           "List: red, green, blue, red, green, blue, red,", "Once upon a time", "1, 2, 3, 4, 5, 6, 7,",
           "Water boils at", "abc abc abc abc abc"]
N_TOK = 40


def complete(prompt, draft_max=None):
    body = {"model": "x", "prompt": prompt, "temperature": 0, "max_tokens": N_TOK}
    if draft_max is not None:
        body["draft_max"] = draft_max
    st, r = http("POST", "/v1/completions", body, timeout=300)
    check(st == 200, f"status {st}: {r}")
    return r["choices"][0]["text"]


def t_concurrent_identical():
    alone = [complete(p, -1) for p in PROMPTS]
    m0 = metrics()
    out = [None] * len(PROMPTS)
    bar = threading.Barrier(len(PROMPTS))

    def go(i):
        bar.wait()
        try:
            out[i] = complete(PROMPTS[i], -1 if i % 4 == 3 else None)   # every fourth one plain
        except Exception as e:  # noqa: BLE001
            out[i] = e

    th = [threading.Thread(target=go, args=(i,)) for i in range(len(PROMPTS))]
    for t in th:
        t.start()
    for t in th:
        t.join()
    for i, p in enumerate(PROMPTS):
        check(out[i] == alone[i], f"prompt {p!r}: concurrent {out[i]!r} != alone, plain {alone[i]!r}")
    m1 = wait_idle(30)
    d = m1["theseus_spec_draft_tokens_total"] - m0["theseus_spec_draft_tokens_total"]
    a = m1["theseus_spec_accepted_tokens_total"] - m0["theseus_spec_accepted_tokens_total"]
    check(d > 0, "nothing was drafted")
    check(0 <= a <= d, f"accepted {a} of {d}")
    check(0 <= m1["theseus_spec_acceptance_permille"] <= 1000, "acceptance gauge")
    return f"8/8 identical; {int(a)} of {int(d)} drafts accepted"


def t_bad_draft_max():
    st, r = http("POST", "/v1/completions", {"model": "x", "prompt": "hi", "max_tokens": 2, "draft_max": 65})
    expect_error(st, r, 400, ["draft_max"])
    st, r = http("POST", "/v1/completions", {"model": "x", "prompt": "hi", "max_tokens": 2, "draft_max": "x"})
    expect_error(st, r, 400, ["draft_max"])


run("spec_concurrent_identical", t_concurrent_identical)
run("spec_bad_draft_max", t_bad_draft_max)
finish()
