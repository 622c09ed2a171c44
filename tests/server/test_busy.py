"""test_busy.py — against a server started with --parallel 1 --queue 1: more
concurrent requests than slot + queue get a clean 503 (the OpenAI error
object), the others complete, and the server is idle and serving afterwards."""
import threading

from common import check, expect_error, http, run, wait_idle, finish


def t_busy_503():
    out = [None] * 6
    start = threading.Barrier(6)

    def one(i):
        start.wait()
        out[i] = http("POST", "/v1/completions", {"prompt": "Hello there", "max_tokens": 8, "temperature": 0})

    th = [threading.Thread(target=one, args=(i,)) for i in range(6)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    ok = [o for o in out if o[0] == 200]
    busy = [o for o in out if o[0] == 503]
    check(len(ok) + len(busy) == 6, f"other answers: {[o for o in out if o[0] not in (200, 503)]}")
    check(len(busy) >= 1 and len(ok) >= 1, f"{len(ok)} ok, {len(busy)} busy")
    for st, body in busy:
        expect_error(st, body, 503, ["busy"])
    texts = {o[1]["choices"][0]["text"] for o in ok}
    check(len(texts) == 1, f"greedy answers differ: {texts}")
    wait_idle()
    st, body = http("POST", "/v1/completions", {"prompt": "Hello there", "max_tokens": 2, "temperature": 0})
    check(st == 200, f"after: {st} {body}")
    return f"{len(ok)} completed, {len(busy)} got 503"


run("server_busy_503", t_busy_503)
finish()
