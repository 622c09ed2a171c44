#!/usr/bin/env bash
# make-seeds.sh OUT — writes a seed corpus for every fuzz target into OUT/<target>/
# (generated, not committed, except the small text seeds of tests/fuzz/seeds/):
#   fuzz_gguf       build/tests/test_gguf --write-seeds (writer files, shrunk fixtures)
#   fuzz_template   every chat template of $SHARED/fixtures/chat-templates
#   fuzz_tokenizer  every case of the vocab fixtures' .inp files (flags byte 0x03 + text)
#   fuzz_request    tests/fuzz/seeds/request/*.json (first byte picks the endpoint)
#   fuzz_http       tests/fuzz/seeds/http/*.txt (first byte picks a prefix length)
#   fuzz_sampler    parameter blocks for greedy, top-k/p, min-p, penalties, NaN/inf logits
#   fuzz_gbnf       llama.cpp's grammars (tests/data/grammar/llama-grammars), each + NUL + a case
#   fuzz_schema     the schemas of tests/data/grammar/schemas.json and theseus.json
#   fuzz_kld        small .kld base files (header, tokens, uint16-scaled rows), whole and cut
#   fuzz_toolcall   a message in each tool-call format and a tools array
#   fuzz_precision  small precision configs (wildcards, ranges, expert selectors, errors)
#   fuzz_runtime_text  stop strings + token pieces (ASCII, split UTF-8, a stop across pieces)
#                      and a ChatML context
#   fuzz_safetensors  small safetensors files (F32/F16/BF16, metadata, a scalar, empty) and
#                     'T' + fixture tokenizer.json files (BPE, WordPiece, Metaspace), 'C' + a
#                     fixture byte + that fixture's config.json (tests/fixtures/hf)
set -eu
OUT=${1:?usage: make-seeds.sh OUT}
SHARED=${SHARED:-$(cd "$(dirname "$0")/../../.." && pwd)/shared}
BUILD=${BUILD:-build}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"/{fuzz_safetensors,fuzz_gguf,fuzz_template,fuzz_tokenizer,fuzz_request,fuzz_http,fuzz_sampler,fuzz_gbnf,fuzz_schema,fuzz_kld,fuzz_runtime_text,fuzz_toolcall,fuzz_precision,fuzz_router,fuzz_imatrix}
if [ -x "$BUILD/tests/test_gguf" ]; then SHARED=$SHARED "$BUILD/tests/test_gguf" --write-seeds "$OUT/fuzz_gguf" >/dev/null; fi
for t in "$SHARED"/fixtures/chat-templates/*.jinja; do [ -f "$t" ] && cp "$t" "$OUT/fuzz_template/"; done
cp "$here"/seeds/request/* "$OUT/fuzz_request/"
cp "$here"/seeds/http/* "$OUT/fuzz_http/"
mkdir -p "$OUT/fuzz_search_log" && cp "$here"/seeds/search_log/* "$OUT/fuzz_search_log/"   # a search log (olmoe near tie)
python3 - "$SHARED" "$OUT" "$here/../data/grammar" <<'PY'
import glob, os, struct, sys, math
shared, out = sys.argv[1], sys.argv[2]
n = 0
for inp in sorted(glob.glob(os.path.join(shared, "fixtures/vocab/*.inp"))):
    cases = open(inp, "rb").read().split(b"\n__ggml_vocab_test__\n")
    for c in cases[:40]:
        if c:
            open(os.path.join(out, "fuzz_tokenizer", "case%03d" % n), "wb").write(b"\x03" + c)
            n += 1
def sampler(name, seed, temp, top_k, top_p, min_p, rep, pres, freq, last_n, nv, biases, hist, logits):
    b = struct.pack("<IIfifffffII", seed >> 32, seed & 0xffffffff, temp, top_k, top_p, min_p, rep, pres, freq,
                    last_n + 1, nv - 1)
    b += struct.pack("<I", len(biases)) + b"".join(struct.pack("<if", t + 1, v) for t, v in biases)
    b += struct.pack("<I", len(hist)) + b"".join(struct.pack("<I", t + 2) for t in hist)
    b += b"".join(struct.pack("<f", v) for v in logits)
    open(os.path.join(out, "fuzz_sampler", name), "wb").write(b)
lg = [math.sin(i * 0.7) * 5 for i in range(64)]
sampler("greedy", 1, 0.0, 0, 1.0, 0.0, 1.0, 0.0, 0.0, 64, 64, [], [], lg * 2)
sampler("topk_topp", 42, 0.8, 40, 0.95, 0.05, 1.0, 0.0, 0.0, 64, 64, [(3, -100.0)], [1, 2, 3], lg * 4)
sampler("penalties", 7, 1.0, 0, 1.0, 0.0, 1.3, 0.5, 0.25, 0, 64, [], [5, 5, 6, 7], lg * 3)
sampler("nan_inf", 9, 1.0, 0, 1.0, 0.0, 1.0, 0.0, 0.0, 0, 16, [], [], [float("nan"), float("inf"), -float("inf")] * 20)
sampler("small", 3, 2.0, 1, 0.5, 0.9, 1.0, 2.0, -2.0, 2, 1, [(0, 1.0)], [0], [0.0] * 8)

import json
gdir = sys.argv[3]
def put(target, name, data):
    open(os.path.join(out, target, name), "wb").write(data)
for g in sorted(glob.glob(os.path.join(gdir, "llama-grammars", "*.gbnf"))):
    base = os.path.splitext(os.path.basename(g))[0]
    text = open(g, "rb").read()
    cases = os.path.splitext(g)[0] + ".cases"
    first = b""
    if os.path.exists(cases):
        try:
            first = json.loads(open(cases).readline())["text"].encode()
        except Exception:
            first = b""
    put("fuzz_gbnf", base, text + b"\0" + first)
put("fuzz_gbnf", "tiny", b'root ::= "yes" | "no"\0yes')
for f in ("schemas.json", "theseus.json"):
    path = os.path.join(gdir, f)
    if not os.path.exists(path):
        continue
    for i, c in enumerate(json.load(open(path)).get("cases", [])[:80]):
        sch = c.get("schema")
        if sch is not None:
            put("fuzz_schema", "%s%03d" % (f[:3], i), (sch if isinstance(sch, str) else json.dumps(sch)).encode())
# .kld: magic "_logits_" (8 bytes), u32 n_ctx, u32 n_vocab, u32 n_chunk, tokens i32[n_ctx*n_chunk],
# then per scored position: f32 scale, f32 min, u16[n_vocab]
def kld(n_ctx, n_vocab, n_chunk):
    b = b"_logits_" + struct.pack("<III", n_ctx, n_vocab, n_chunk)
    b += b"".join(struct.pack("<i", (i * 7) % n_vocab) for i in range(n_ctx * n_chunk))
    rows = n_chunk * (n_ctx - 1 - n_ctx // 2)
    for r in range(rows):
        b += struct.pack("<ff", 0.01, -10.0) + b"".join(struct.pack("<H", (r * 31 + v * 17) % 1000) for v in range(n_vocab))
    return b
k = kld(8, 16, 2)
put("fuzz_kld", "small", k)
put("fuzz_kld", "cut", k[:len(k) // 2])
put("fuzz_kld", "one_chunk", kld(4, 8, 1))
# router file (src/eval/router.c): "THRT", version 1, n_ctx, n_chunk, n_scored, k, n_expert, n_moe,
# layers, then records of i32 ids[k] + f32 scores[k+1]
def router(n_ctx, n_chunk, k, ne, layers):
    ns = n_ctx - 1 - n_ctx // 2
    b = struct.pack("<8i", 0x54524854, 1, n_ctx, n_chunk, ns, k, ne, len(layers)) + b"".join(struct.pack("<i", l) for l in layers)
    for r in range(n_chunk * ns * len(layers)):
        b += b"".join(struct.pack("<i", (r + j) % ne) for j in range(k)) + b"".join(struct.pack("<f", 1.0 - 0.1 * j) for j in range(k + 1))
    return b
put("fuzz_router", "small", router(8, 2, 2, 8, [0, 1]))
put("fuzz_router", "cut", router(8, 2, 2, 8, [0, 1])[:100])
# imatrix.dat: n_entries, (len, name, ncall, n_values, f32 values) each, then chunks and the dataset name
def imatrix(entries, chunks, dataset):
    b = struct.pack("<i", len(entries))
    for name, ncall, vals in entries:
        b += struct.pack("<i", len(name)) + name + struct.pack("<ii", ncall, len(vals)) + b"".join(struct.pack("<f", v) for v in vals)
    return b + struct.pack("<ii", chunks, len(dataset)) + dataset
put("fuzz_imatrix", "two", imatrix([(b"blk.0.attn_q.weight", 4, [0.5, 1.5, 2.0]), (b"blk.0.ffn_down.weight", 4, [1.0] * 8)], 4, b"GPL-3"))
put("fuzz_imatrix", "old", imatrix([(b"blk.0.attn_k.weight", 1, [3.0])], 1, b"")[:-8])
def rt(stops, pieces):
    b = bytes([len(stops)])
    for s in stops:
        b += bytes([len(s) - 1]) + s
    for p in pieces:
        b += bytes([len(p)]) + p
    return b
put("fuzz_runtime_text", "ascii", rt([b" 7"], [b" 5", b",", b" 6", b",", b" 7", b","]))
put("fuzz_runtime_text", "utf8", rt([b"\xc3\xa9t"], [b"caf", b"\xc3", b"\xa9", b"t\xe2\x82", b"\xac"]))
put("fuzz_runtime_text", "nostop", rt([], [b"Hello", b" world", b"\xf0\x9f", b"\x98\x80"]))
put("fuzz_precision", "mixed", b"# attention 8 bits\nblk.*.attn_q.weight Q8_0\nblk.0-9.ffn_*.weight Q4_0\n"
    b"blk.0.ffn_down_exps.weight[3] F16\nblk.12.ffn_up_exps.weight[0-7] Q4_K\noutput.weight f16\n")
put("fuzz_precision", "errors", b"blk.99.attn_q.weight Q8_0\nx[1-] Q9\n")
put("fuzz_precision", "pattern", b"*1-2*.*0-99*\n* Q8_0\n")
put("fuzz_runtime_text", "chatml", b'{"messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}]}')
put("fuzz_toolcall", "hermes", b'\x00Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>')
put("fuzz_toolcall", "llama3", b'\x01{"name": "f", "parameters": {"a": [1, 2]}}')
put("fuzz_toolcall", "mistral", b'\x02[TOOL_CALLS][{"name": "f", "arguments": {}, "id": "abcDEF123"}]')
put("fuzz_toolcall", "tools", b'\x04[{"type": "function", "function": {"name": "f", "parameters": {"type": "object", '
    b'"properties": {"x": {"type": "integer"}}, "required": ["x"]}}}]')
put("fuzz_toolcall", "defs_array", b'\x01[{"type":"function","function":{"name":"f","parameters":{"type":"object","$defs":[{"a":1}]}}}]')
os.makedirs(os.path.join(out, "fuzz_layers"), exist_ok=True)   # layer count byte (value + 1), then the list
for name, b in [("half", b"\x1d0-14"), ("list", b"\x1d0-9,12,20-29"), ("one", b"\x033"), ("bad", b"\x1d5-2,x")]:
    put("fuzz_layers", name, b)
os.makedirs(os.path.join(out, "fuzz_gpu_layers"), exist_ok=True)   # layer count byte (value + 1), then the spec
for name, b in [("count", b"\x1712"), ("ranges", b"\x170-11:cpu,12-23:gpu"), ("one", b"\x033:gpu"),
                ("twice", b"\x070:gpu,0:cpu"), ("bad", b"\x175-2:gpu,x")]:
    put("fuzz_gpu_layers", name, b)
PY
python3 - "$OUT" "$here/../fixtures/hf" <<'PY'
import json, os, struct, sys
out, hf = sys.argv[1], sys.argv[2]
def st(tensors, meta=None):
    hdr, data, off = {}, b"", 0
    if meta is not None:
        hdr["__metadata__"] = meta
    for name, dtype, shape, raw in tensors:
        hdr[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        data += raw
        off += len(raw)
    h = json.dumps(hdr).encode()
    return struct.pack("<Q", len(h)) + h + data
def put(name, b):
    open(os.path.join(out, "fuzz_safetensors", name), "wb").write(b)
put("two", st([("a.weight", "F32", [2, 3], struct.pack("<6f", *range(6))), ("b", "F16", [2], b"\0<\0<")], {"format": "pt"}))
put("bf16", st([("x", "BF16", [1, 4], b"\x80?" * 4), ("s", "F32", [], b"\0\0\x80?")]))
put("empty", st([]))
put("ints", st([("i", "I64", [2], struct.pack("<2q", 1, 2)), ("u", "U8", [3], b"abc"), ("f8", "F8_E4M3", [1], b"\x38")]))
for fam in ("llama", "gemma3", "tok/wordpiece", "tok/metaspace-first", "tok/unigram"):
    p = os.path.join(hf, fam, "tokenizer.json")
    if os.path.exists(p):
        put("tok_" + fam.replace("/", "_"), b"T" + open(p, "rb").read())
# 'C' + fixture byte + config.json (the order of fams in fuzz_safetensors.c)
for i, fam in enumerate(("deepseek3", "deepseek2", "gpt-oss", "gpt-oss-mxfp4", "qwen3moe", "gemma3", "phi3", "llama", "deepseek3-fp8")):
    p = os.path.join(hf, fam, "config.json")
    if os.path.exists(p):
        put("cfg_" + fam, b"C" + bytes([i]) + open(p, "rb").read())
PY
echo "seeds written to $OUT"
