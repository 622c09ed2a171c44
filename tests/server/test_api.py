"""test_api.py — the OpenAI API as the official `openai` package and plain HTTP
see it: models, chat, completions, streaming, stop strings, n=2, logprobs,
seeds, usage, tokenize/detokenize, /metrics, API key. Generations stay short."""
import json
import math
import subprocess

from common import BASE, KEY, check, client, expect_error, http, metrics, run, finish

C = client()
FRANCE = [{"role": "system", "content": "You are a helpful assistant."},
          {"role": "user", "content": "What is the capital of France?"}]
STORY = "Once upon a time, in a small village,"


def n_tokens(text, add_special=True):
    st, r = http("POST", "/tokenize", {"content": text, "add_special": add_special, "parse_special": True})
    check(st == 200, f"/tokenize {st} {r}")
    return len(r["tokens"])


def t_models():
    ms = C.models.list().data
    check(len(ms) == 1 and "SmolLM2" in ms[0].id, f"models {ms}")
    return ms[0].id


def t_chat():
    r = C.chat.completions.create(model="x", messages=FRANCE, temperature=0, max_tokens=16)
    ch = r.choices[0]
    check("Paris" in ch.message.content, f"answer {ch.message.content!r}")
    check(ch.message.role == "assistant" and ch.finish_reason in ("stop", "length"), f"{ch}")
    check(r.id.startswith("chatcmpl-") and r.object == "chat.completion" and r.created > 1.6e9, f"{r}")
    u = r.usage
    check(u.total_tokens == u.prompt_tokens + u.completion_tokens and 0 < u.completion_tokens <= 16, f"usage {u}")
    return repr(ch.message.content)


def t_completion_usage():
    r = C.completions.create(model="x", prompt=STORY, temperature=0, max_tokens=8)
    ch = r.choices[0]
    check(ch.finish_reason == "length" and ch.text, f"{ch}")
    check(r.usage.completion_tokens == 8, f"usage {r.usage}")
    want = n_tokens(STORY)
    check(r.usage.prompt_tokens == want, f"prompt_tokens {r.usage.prompt_tokens}, /tokenize says {want}")
    # the same prompt as token ids gives the same text
    st, ids = http("POST", "/tokenize", {"content": STORY, "add_special": True})
    r2 = C.completions.create(model="x", prompt=ids["tokens"], temperature=0, max_tokens=8)
    check(r2.choices[0].text == ch.text, f"{r2.choices[0].text!r} != {ch.text!r}")
    return repr(ch.text)


def t_chat_stream():
    ref = C.chat.completions.create(model="x", messages=FRANCE, temperature=0, max_tokens=12).choices[0]
    parts, finish, usage, roles = [], None, None, 0
    for chunk in C.chat.completions.create(model="x", messages=FRANCE, temperature=0, max_tokens=12, stream=True,
                                           stream_options={"include_usage": True}):
        if chunk.usage:
            usage = chunk.usage
        for c in chunk.choices:
            roles += c.delta.role == "assistant"
            parts.append(c.delta.content or "")
            finish = c.finish_reason or finish
    check("".join(parts) == ref.message.content, f"stream {''.join(parts)!r} != {ref.message.content!r}")
    check(finish == ref.finish_reason and roles == 1, f"finish {finish} roles {roles}")
    check(usage and usage.completion_tokens > 0 and usage.total_tokens == usage.prompt_tokens + usage.completion_tokens,
          f"usage {usage}")
    return f"{len(parts)} chunks"


def t_curl_stream():
    body = '{"prompt": "Hello", "max_tokens": 4, "temperature": 0, "stream": true}'
    cmd = ["curl", "-sN", "--max-time", "60", BASE + "/v1/completions", "-H", "Content-Type: application/json", "-d", body]
    if KEY:
        cmd += ["-H", f"Authorization: Bearer {KEY}"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=90).stdout
    events = [e for e in out.split("\n\n") if e.strip()]
    check(events and all(e.startswith("data: ") for e in events), f"not SSE: {out[:300]!r}")
    check(events[-1] == "data: [DONE]", f"last event {events[-1]!r}")
    return f"{len(events)} events"


def t_utf8_stream():
    # emoji are split over byte tokens: chunks must carry whole characters only
    kw = dict(model="x", prompt="Emoji list: \U0001F600 \U0001F603 \U0001F604", temperature=0, max_tokens=12)
    whole = C.completions.create(**kw).choices[0].text
    chunks = [c.choices[0].text for c in C.completions.create(stream=True, **kw) if c.choices and c.choices[0].text]
    check("".join(chunks) == whole, f"{chunks} != {whole!r}")
    check(all("\ufffd" not in c for c in chunks[:-1]), f"a character split across chunks: {chunks}")
    check(any(ord(ch) > 0xFFFF for ch in whole), f"no emoji generated: {whole!r}")
    return repr(whole)


def t_stop():
    ref = C.completions.create(model="x", prompt=STORY, temperature=0, max_tokens=10).choices[0].text
    words = ref.split()
    check(len(words) >= 4, f"reference too short {ref!r}")
    stop = " " + words[2]
    cut = ref[:ref.index(stop)]
    r = C.completions.create(model="x", prompt=STORY, temperature=0, max_tokens=10, stop=[stop, "zzzq"])
    check(r.choices[0].text == cut and r.choices[0].finish_reason == "stop", f"{r.choices[0]} want {cut!r}")
    streamed = "".join(c.choices[0].text for c in C.completions.create(
        model="x", prompt=STORY, temperature=0, max_tokens=10, stop=stop, stream=True) if c.choices)
    check(streamed == cut, f"streamed {streamed!r} want {cut!r}")
    return f"stop={stop!r} -> {cut!r}"


def t_n2():
    alone = C.completions.create(model="x", prompt=STORY, temperature=0, max_tokens=6).choices[0].text
    r = C.completions.create(model="x", prompt=STORY, temperature=0, max_tokens=6, n=2)
    check(sorted(c.index for c in r.choices) == [0, 1], f"{r.choices}")
    check(all(c.text == alone for c in r.choices), f"greedy choices differ from n=1: {[c.text for c in r.choices]} vs {alone!r}")
    check(r.usage.completion_tokens == 12, f"usage {r.usage}")
    s = C.chat.completions.create(model="x", messages=FRANCE, temperature=1.0, seed=5, max_tokens=4, n=2)
    check(len(s.choices) == 2 and 2 <= s.usage.completion_tokens <= 8, f"{s}")
    st = list(C.completions.create(model="x", prompt=STORY, temperature=0, max_tokens=4, n=2, stream=True))
    texts = ["".join(c.choices[0].text for c in st if c.choices and c.choices[0].index == i) for i in (0, 1)]
    check(texts[0] == texts[1] == alone[:len(texts[0])] and texts[0], f"streamed n=2 {texts}")
    return f"sampled: {[c.message.content for c in s.choices]}"


def t_logprobs():
    r = C.chat.completions.create(model="x", messages=FRANCE, temperature=0, max_tokens=6, logprobs=True, top_logprobs=3)
    ch = r.choices[0]
    content = ch.logprobs.content
    check(len(content) == r.usage.completion_tokens, f"{len(content)} logprobs for {r.usage.completion_tokens} tokens")
    for e in content:
        check(len(e.top_logprobs) == 3, f"top {e.top_logprobs}")
        lps = [t.logprob for t in e.top_logprobs]
        check(lps == sorted(lps, reverse=True) and lps[0] <= 0 and sum(math.exp(x) for x in lps) <= 1.0001, f"{lps}")
        check(e.token == e.top_logprobs[0].token and abs(e.logprob - lps[0]) < 1e-5, f"greedy pick not the top: {e}")
        check(bytes(e.bytes).decode("utf-8", "replace") == e.token or e.bytes, f"bytes {e}")
    check("".join(e.token for e in content) == ch.message.content, "tokens do not spell the text")
    c = C.completions.create(model="x", prompt=STORY, temperature=0, max_tokens=4, logprobs=2)
    lp = c.choices[0].logprobs
    check(len(lp.tokens) == 4 and len(lp.token_logprobs) == 4 and all(len(t) <= 2 for t in lp.top_logprobs), f"{lp}")
    check(lp.text_offset == sorted(lp.text_offset) and "".join(lp.tokens) == c.choices[0].text, f"{lp}")
    return f"first token {content[0].token!r} {content[0].logprob:.3f}"


def t_stop_logprobs():
    # a stop string must take its tokens' logprobs with it: the entries cover
    # exactly the returned text, every text_offset inside it (found with the
    # openai client: stop " 7" returned text " 5, 6," with tokens ending " ", "7")
    kw = dict(model="x", prompt="1, 2, 3, 4,", temperature=0, max_tokens=12)
    ref = C.completions.create(**kw).choices[0].text
    stop = " 7" if " 7" in ref else " " + ref.split()[2]
    ch = C.completions.create(stop=[stop], logprobs=1, **kw).choices[0]
    text, lp = ch.text, ch.logprobs
    check(ch.finish_reason == "stop" and text == ref[:ref.index(stop)], f"{text!r} from {ref!r} with stop {stop!r}")
    check("".join(lp.tokens) == text, f"logprob tokens {lp.tokens} do not spell {text!r}")
    check(len(lp.token_logprobs) == len(lp.tokens) == len(lp.text_offset) == len(lp.top_logprobs), f"{lp}")
    check(all(0 <= o < len(text.encode()) for o in lp.text_offset) and lp.text_offset == sorted(lp.text_offset),
          f"offsets {lp.text_offset} outside the {len(text.encode())} bytes of {text!r}")
    toks = []
    for c in C.completions.create(stop=[stop], logprobs=1, stream=True, **kw):
        if c.choices and c.choices[0].logprobs:
            toks += c.choices[0].logprobs.tokens
    check("".join(toks) == text, f"streamed logprob tokens {toks} do not spell {text!r}")
    r = C.chat.completions.create(model="x", messages=FRANCE, temperature=0, max_tokens=16, stop=[" Paris"], logprobs=True)
    m = r.choices[0]
    check("Paris" not in m.message.content and "".join(e.token for e in m.logprobs.content) == m.message.content,
          f"chat {m.message.content!r} vs {[e.token for e in m.logprobs.content]}")
    return f"stop={stop!r} -> {text!r}, tokens {lp.tokens}"


def t_seed():
    kw = dict(model="x", prompt=STORY, temperature=1.0, max_tokens=8)
    a = C.completions.create(seed=42, **kw).choices[0].text
    b = C.completions.create(seed=42, **kw).choices[0].text
    c = C.completions.create(seed=43, **kw).choices[0].text
    check(a == b, f"same seed, different text: {a!r} {b!r}")
    check(a != c, f"different seeds, same text {a!r}")
    return repr(a)


def t_sampling_fields():
    r = C.completions.create(model="x", prompt=STORY, max_tokens=6, temperature=0.7, top_p=0.9, seed=1,
                             presence_penalty=0.5, frequency_penalty=0.5, extra_body={"top_k": 20, "min_p": 0.05})
    check(r.choices[0].text, "empty")
    # logit_bias forces a token: +100 on one id makes greedy pick it every time
    st, ids = http("POST", "/tokenize", {"content": " banana"})
    tok = ids["tokens"][-1]
    r = C.completions.create(model="x", prompt=STORY, max_tokens=3, temperature=0, logit_bias={str(tok): 100})
    st, d = http("POST", "/detokenize", {"tokens": [tok] * 3})
    check(r.choices[0].text == d["content"], f"{r.choices[0].text!r} != {d['content']!r}")
    return repr(r.choices[0].text)


def t_ignore_eos():
    # "ignore_eos" (llama-server's field, for benchmarks): the end-of-generation tokens are banned,
    # so a completion that would end at once (its end token raised by +100) runs to max_tokens
    st, ids = http("POST", "/tokenize", {"content": "<|im_end|>"})
    check(st == 200 and len(ids["tokens"]) >= 1, f"{st} {ids}")
    eos = ids["tokens"][-1]
    kw = dict(model="x", prompt=STORY, max_tokens=8, temperature=0, logit_bias={str(eos): 100})
    r = C.completions.create(**kw)
    check(r.choices[0].finish_reason == "stop" and r.usage.completion_tokens <= 1, f"{r.choices[0]} {r.usage}")
    r = C.completions.create(extra_body={"ignore_eos": True}, **kw)
    check(r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 8, f"{r.choices[0]} {r.usage}")
    st, bad = http("POST", "/v1/completions", {"prompt": "x", "max_tokens": 2, "ignore_eos": 1})
    check(st == 400 and "ignore_eos" in json.dumps(bad), f"{st} {bad}")
    return f"end token {eos}: {r.usage.completion_tokens} tokens"


def t_tokenize_roundtrip():
    text = "Hello, wörld! 你好 <|im_start|>"
    st, r = http("POST", "/tokenize", {"content": text})
    check(st == 200 and all(isinstance(t, int) for t in r["tokens"]), f"{st} {r}")
    st, d = http("POST", "/detokenize", {"tokens": r["tokens"]})
    check(st == 200 and d["content"] == text, f"{d}")
    return f"{len(r['tokens'])} tokens"


def t_metrics():
    m = metrics()
    for k in ("theseus_requests_total", "theseus_prompt_tokens_total", "theseus_generated_tokens_total",
              "theseus_queue_depth", "theseus_active_sequences", "theseus_kv_blocks_used", "theseus_kv_blocks_total",
              "theseus_time_to_first_token_seconds_count", "theseus_token_latency_seconds_count"):
        check(k in m, f"missing {k}")
    check(m["theseus_requests_total"] >= 10 and m["theseus_generated_tokens_total"] >= 50, f"{m}")
    for h in ("theseus_time_to_first_token_seconds", "theseus_token_latency_seconds"):
        b = [v for k, v in m.items() if k.startswith(h + "_bucket")]
        check(b == sorted(b) and b[-1] == m[h + "_count"] > 0, f"{h} buckets {b}")
    return f"{int(m['theseus_requests_total'])} requests, {int(m['theseus_generated_tokens_total'])} tokens"


def t_auth():
    if not KEY:
        return "no key configured"
    st, body = http("GET", "/v1/models", key=False)
    expect_error(st, body, 401, ["api key"])
    st, body = http("GET", "/v1/models", key=False, headers={"Authorization": "Bearer " + KEY[:-1] + "x"})
    expect_error(st, body, 401)
    st, body = http("GET", "/health", key=False)
    check(st == 200 and body == {"status": "ok"}, f"health {st} {body}")
    return "401 without or with a wrong key; /health open"


for name, fn in [("models", t_models), ("chat", t_chat), ("completion_usage", t_completion_usage),
                 ("chat_stream", t_chat_stream), ("curl_stream", t_curl_stream), ("utf8_stream", t_utf8_stream), ("stop", t_stop), ("n2", t_n2),
                 ("logprobs", t_logprobs), ("stop_logprobs", t_stop_logprobs), ("seed", t_seed), ("sampling_fields", t_sampling_fields), ("ignore_eos", t_ignore_eos),
                 ("tokenize_roundtrip", t_tokenize_roundtrip), ("metrics", t_metrics), ("auth", t_auth)]:
    run("server_" + name, fn)
finish()
