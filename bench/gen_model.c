/* gen_model.c — writes random-weight, Llama-shaped GGUF models for speed work.
 *
 *   gen_model --shape 135M|1.1B|8B|qwen35|qwen3next|custom [--dim N --layers N --heads N --kv-heads N
 *             --ffn N --vocab N] [--ctx N] [--tied|--untied] [--seed S]
 *             [--random-blocks] --type TYPE -o FILE
 *
 * qwen35 is a hybrid (docs/hybrid.md): the layer shapes of make_hybrid.py --bench
 * (a Qwen3.5-0.8B-class layer: E 1024, attention 8 / 2 heads of 256 with rope on 64
 * dims, FFN 3584, Gated DeltaNet 16 k / 16 v heads of 128, conv 4; every 4th layer
 * full attention), 8 layers, a 4096-token vocabulary, tied output. The DeltaNet's
 * conv taps, dt, A (-0.5, so decays stay in (0, 1)) and norms are F32.
 * qwen3next is the other hybrid family at the same scale: a Qwen3-Next-class
 * layer narrowed to E 1024 (attention 8 / 2 heads of 256, rope on 64 dims; Gated
 * DeltaNet 16 k / 32 v heads of 128 with the fused, per-k-head grouped ssm_in and
 * ssm_ba; every 4th layer full attention), every layer's FFN routed experts (32 of
 * 512, 8 used; F32 router) plus a shared expert of 512 behind an F32 sigmoid gate;
 * 8 layers, the same vocabulary, tied output.
 *
 * TYPE is a single weight type (F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K
 * Q4_K Q5_K Q6_K IQ4_NL IQ4_XS, theseus's q2..q8 ...) used for every 2-D weight, or a mix:
 *   Q4_K_M / Q5_K_M — Q4_K / Q5_K for most weights; Q6_K for output.weight and
 *   for attn_v and ffn_down in every other layer (odd layer indices, so that
 *   layer 0, which th_model_desc looks at, shows the base type). This is a
 *   simplification of llama.cpp's rule (which upgrades the first and last eighth
 *   and every third layer in between).
 * Norm weights are F32 ones. A weight whose row length is not a multiple of its
 * type's block falls back as llama.cpp does (Q4_K→Q5_0, Q5_K→Q5_1, Q6_K→Q8_0,
 * Q2_K/Q3_K/IQ4_XS→IQ4_NL); e.g. most of the 135M shape (dim 576) in Q4_K_M.
 *
 * Values: uniform with standard deviation 1/sqrt(row length) (fan-in), so
 * activations stay finite. Types with a reference quantizer (th_ref_can_quantize)
 * are quantized from those floats; types without one (currently the K-quants and
 * IQ4_XS), or every quantized type with --random-blocks, get random bytes with
 * fp16 scales chosen so that the decoded values have roughly that deviation:
 * valid blocks, meaningless numbers, fine for speed work.
 *
 * The vocabulary is a minimal SPM ("llama") one: <unk> <s> </s>, the 256 byte
 * tokens <0x00>..<0xFF>, then placeholder pieces "▁w<N>"; BOS 1, EOS 2.
 *
 * The file is streamed: the header (metadata and tensor infos, whose sizes are
 * known up front) is written first, then each tensor is generated and written a
 * few MiB at a time. gguf_writer_to_file (src/gguf/writer.c) needs every
 * tensor's data in memory until the end, hence this writer of our own.
 */
#include "core/core.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ALIGN 32
#define CHUNK_ELEMS (1u << 22)   /* floats generated per step */
#define MAX_TENSORS 4096

typedef struct shape {
    long dim, layers, heads, kv_heads, ffn, vocab, ctx;
    int tied;   /* 1 tied output, 0 separate output.weight */
    /* hybrid (qwen35) only: head width, rope dims, DeltaNet head width, k and v heads, conv taps, attention interval */
    long hd, rot, dk, nk, nv, conv, every;
    int hybrid;   /* 1 qwen35, 2 qwen3next */
    long experts, used, ffn_exp, ffn_shexp;   /* qwen3next only */
} shape;

typedef struct tensor {
    char name[64];
    uint32_t type, n_dims;
    uint64_t ne[3], nbytes, offset;   /* ne[2]: experts (1 for a plain matrix) */
    float sd;        /* standard deviation; 0 = all cval (norms: ones) */
    float cval;
} tensor;

typedef struct gen {
    shape sh;
    uint32_t base, big;        /* base type, upgraded type (== base for single types) */
    bool random_blocks;
    const char *type_name, *out;
    uint64_t seed;
    tensor *t;
    int n_t;
    uint64_t data_size;
} gen;

/* ---------------------------------------------------------------- random numbers */

static uint64_t rng_state = 0x853c49e6748fea9bULL;
static inline uint64_t rnd64(void) {   /* xorshift64* */
    rng_state ^= rng_state >> 12; rng_state ^= rng_state << 25; rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1DULL;
}

/* n uniform floats with mean 0 and standard deviation sd. */
static void fill_uniform(float *x, size_t n, float sd) {
    const float a = sd * 1.7320508f * 2.0f / 4294967296.0f;   /* U(-sqrt3 sd, sqrt3 sd) */
    const float off = sd * 1.7320508f;
    size_t i = 0;
    for (; i + 2 <= n; i += 2) {
        uint64_t r = rnd64();
        x[i] = (float)(uint32_t)r * a - off;
        x[i + 1] = (float)(uint32_t)(r >> 32) * a - off;
    }
    if (i < n) x[i] = (float)(uint32_t)rnd64() * a - off;
}

/* ---------------------------------------------------------------- random valid blocks */

/* Where a block keeps its fp16 scale d (and min dmin), and the rough standard
 * deviation of the integer part scale*q for random bytes, so d = sd / spread.
 * A dmin of mean_q * d roughly centres the values. */
typedef struct block_scales { uint32_t type; int d_off, m_off; float spread, mean_q; } block_scales;
static const block_scales scales_tab[] = {
    { TH_Q4_0, 0, -1, 4.6f, 0 },   { TH_Q4_1, 0, 2, 4.6f, 7.5f },   { TH_Q5_0, 0, -1, 9.2f, 0 },
    { TH_Q5_1, 0, 2, 9.2f, 15.5f }, { TH_Q8_0, 0, -1, 74.0f, 0 },   { TH_IQ4_NL, 0, -1, 70.0f, 0 },
    { TH_Q2_K, 80, 82, 11.0f, 1.5f }, { TH_Q3_K, 108, -1, 40.0f, 0 }, { TH_Q4_K, 0, 2, 220.0f, 7.5f },
    { TH_Q5_K, 0, 2, 450.0f, 15.5f }, { TH_Q6_K, 208, -1, 1370.0f, 0 }, { TH_IQ4_XS, 0, -1, 1100.0f, 0 },
    /* qN: levels c - (2^n - 1)/2 of uniform codes have sd sqrt((4^n - 1) / 12) */
    { TH_Q2, 0, -1, 1.118f, 0 }, { TH_Q3, 0, -1, 2.291f, 0 }, { TH_Q4, 0, -1, 4.610f, 0 }, { TH_Q5, 0, -1, 9.233f, 0 },
    { TH_Q6, 0, -1, 18.47f, 0 }, { TH_Q7, 0, -1, 36.95f, 0 }, { TH_Q8, 0, -1, 73.90f, 0 },
    /* ternary / 1-bit: uniform trits have sd sqrt(2/3), uniform 2-bit codes sqrt(5/4), signs 1
     * (IQ1_BN / IQ2_BN keep a scale per row, not per block: they are always quantized from floats) */
    { TH_TQ1_0, 52, -1, 0.816f, 0 }, { TH_TQ2_0, 64, -1, 1.118f, 0 }, { TH_Q1_0_G128, 0, -1, 1.0f, 0 },
};

static const block_scales *find_scales(uint32_t type) {
    for (size_t i = 0; i < sizeof scales_tab / sizeof scales_tab[0]; i++)
        if (scales_tab[i].type == type) return &scales_tab[i];
    return NULL;
}

static void put_f16(uint8_t *p, float v) {
    uint16_t h = th_f32_to_f16(v);
    memcpy(p, &h, 2);
}

static void fill_random_blocks(const block_scales *bs, uint8_t *dst, uint64_t n_blocks, uint32_t block_bytes,
                               float sd) {
    uint64_t words = n_blocks * block_bytes / 8, i = 0;
    for (; i < words; i++) { uint64_t r = rnd64(); memcpy(dst + 8 * i, &r, 8); }
    for (uint64_t b = 8 * i; b < n_blocks * block_bytes; b++) dst[b] = (uint8_t)rnd64();
    float d = sd / bs->spread;
    for (uint64_t b = 0; b < n_blocks; b++) {
        uint8_t *blk = dst + b * block_bytes;
        put_f16(blk + bs->d_off, d);
        if (bs->m_off >= 0) put_f16(blk + bs->m_off, d * bs->mean_q);
    }
}

/* ---------------------------------------------------------------- tensor plan */

static uint32_t fallback_type(uint32_t type) {
    switch (type) {
    case TH_Q4_K: return TH_Q5_0;
    case TH_Q5_K: return TH_Q5_1;
    case TH_Q6_K: return TH_Q8_0;
    case TH_Q2_K: case TH_Q3_K: case TH_IQ4_XS: return TH_IQ4_NL;
    default: return type;
    }
}

static bool add_tensor3(gen *g, uint32_t type, uint64_t ne0, uint64_t ne1, uint64_t ne2, const char *fmt, int layer);
static bool add_tensor(gen *g, uint32_t type, uint64_t ne0, uint64_t ne1, const char *fmt, int layer) {
    return add_tensor3(g, type, ne0, ne1, 1, fmt, layer);
}

/* One tensor of ne2 stacked ne0 × ne1 matrices (ne2 > 1: an expert stack). */
static bool add_tensor3(gen *g, uint32_t type, uint64_t ne0, uint64_t ne1, uint64_t ne2, const char *fmt, int layer) {
    if (g->n_t == MAX_TENSORS) { fprintf(stderr, "gen_model: too many tensors\n"); return false; }
    tensor *t = &g->t[g->n_t];
    snprintf(t->name, sizeof t->name, fmt, layer);
    uint64_t rb;
    if (ne1 > 1 && !th_row_bytes(type, ne0, &rb)) type = fallback_type(type);
    if (!th_row_bytes(type, ne0, &rb) || !th_mul_u64(rb, ne1, &t->nbytes) || !th_mul_u64(t->nbytes, ne2, &t->nbytes)) {
        fprintf(stderr, "gen_model: tensor %s: row length %llu does not fit type %s\n", t->name,
                (unsigned long long)ne0, th_type_name(type));
        return false;
    }
    t->type = type;
    t->n_dims = ne2 > 1 ? 3 : ne1 > 1 ? 2 : 1;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->ne[2] = ne2;
    t->sd = ne1 > 1 ? (float)(1.0 / sqrt((double)ne0)) : 0.0f;
    t->cval = 1.0f;
    t->offset = g->data_size;
    g->data_size += (t->nbytes + ALIGN - 1) / ALIGN * ALIGN;
    g->n_t++;
    return true;
}

/* qwen35 / qwen3next: DeltaNet layers, every `every`-th layer gated full attention
 * (qwen35.c's names); qwen3next's fused ssm_in / ssm_ba and expert FFNs. */
static bool plan_hybrid(gen *g) {
    const shape *s = &g->sh;
    uint64_t E = (uint64_t)s->dim, D = (uint64_t)s->hd, F = (uint64_t)s->ffn, V = (uint64_t)s->vocab;
    uint64_t q = D * (uint64_t)s->heads, kv = D * (uint64_t)s->kv_heads, C = (uint64_t)s->conv;
    uint64_t nv = (uint64_t)s->nv, kd = (uint64_t)(s->dk * s->nk), vd = (uint64_t)(s->dk * s->nv), cd = 2 * kd + vd;
    bool ok = add_tensor(g, g->base, E, V, "token_embd.weight", 0);
    for (int l = 0; ok && l < s->layers; l++) {
        ok = add_tensor(g, TH_F32, E, 1, "blk.%d.attn_norm.weight", l) &&
             add_tensor(g, TH_F32, E, 1, "blk.%d.post_attention_norm.weight", l);
        if (ok && (l + 1) % s->every != 0) {
            if (s->hybrid == 2)
                ok = add_tensor(g, g->base, E, cd + vd, "blk.%d.ssm_in.weight", l) &&   /* per k head [q k v z] */
                     add_tensor(g, g->base, E, 2 * nv, "blk.%d.ssm_ba.weight", l);
            else
                ok = add_tensor(g, g->base, E, cd, "blk.%d.attn_qkv.weight", l) &&
                     add_tensor(g, g->base, E, vd, "blk.%d.attn_gate.weight", l) &&
                     add_tensor(g, g->base, E, nv, "blk.%d.ssm_beta.weight", l) &&
                     add_tensor(g, g->base, E, nv, "blk.%d.ssm_alpha.weight", l);
            ok = ok && add_tensor(g, TH_F32, C, cd, "blk.%d.ssm_conv1d.weight", l) &&
                 add_tensor(g, TH_F32, nv, 1, "blk.%d.ssm_dt.bias", l) &&
                 add_tensor(g, TH_F32, nv, 1, "blk.%d.ssm_a", l) &&
                 add_tensor(g, TH_F32, (uint64_t)s->dk, 1, "blk.%d.ssm_norm.weight", l) &&
                 add_tensor(g, g->base, vd, E, "blk.%d.ssm_out.weight", l);
            if (ok) { g->t[g->n_t - 4].cval = 0.0f; g->t[g->n_t - 3].cval = -0.5f; }   /* dt 0, A -0.5 */
        } else if (ok) {
            ok = add_tensor(g, g->base, E, 2 * q, "blk.%d.attn_q.weight", l) &&   /* per head [q; gate] */
                 add_tensor(g, g->base, E, kv, "blk.%d.attn_k.weight", l) &&
                 add_tensor(g, g->base, E, kv, "blk.%d.attn_v.weight", l) &&
                 add_tensor(g, g->base, q, E, "blk.%d.attn_output.weight", l) &&
                 add_tensor(g, TH_F32, D, 1, "blk.%d.attn_q_norm.weight", l) &&
                 add_tensor(g, TH_F32, D, 1, "blk.%d.attn_k_norm.weight", l);
        }
        if (s->hybrid == 2) {
            uint64_t X = (uint64_t)s->experts, Fx = (uint64_t)s->ffn_exp, Fs = (uint64_t)s->ffn_shexp;
            ok = ok && add_tensor(g, TH_F32, E, X, "blk.%d.ffn_gate_inp.weight", l) &&
                 add_tensor3(g, g->base, E, Fx, X, "blk.%d.ffn_gate_exps.weight", l) &&
                 add_tensor3(g, g->base, E, Fx, X, "blk.%d.ffn_up_exps.weight", l) &&
                 add_tensor3(g, g->base, Fx, E, X, "blk.%d.ffn_down_exps.weight", l) &&
                 add_tensor(g, TH_F32, E, 1, "blk.%d.ffn_gate_inp_shexp.weight", l) &&
                 add_tensor(g, g->base, E, Fs, "blk.%d.ffn_gate_shexp.weight", l) &&
                 add_tensor(g, g->base, E, Fs, "blk.%d.ffn_up_shexp.weight", l) &&
                 add_tensor(g, g->base, Fs, E, "blk.%d.ffn_down_shexp.weight", l);
            if (ok) g->t[g->n_t - 4].cval = 0.01f;   /* the shared expert's gate: sigmoid(0.01 Σ h) */
            continue;
        }
        ok = ok && add_tensor(g, g->base, E, F, "blk.%d.ffn_gate.weight", l) &&
             add_tensor(g, g->base, E, F, "blk.%d.ffn_up.weight", l) && add_tensor(g, g->base, F, E, "blk.%d.ffn_down.weight", l);
    }
    ok = ok && add_tensor(g, TH_F32, E, 1, "output_norm.weight", 0);
    if (ok && !s->tied) ok = add_tensor(g, g->big, E, V, "output.weight", 0);
    return ok;
}

static bool plan_tensors(gen *g) {
    const shape *s = &g->sh;
    if (s->hybrid) return plan_hybrid(g);
    uint64_t E = (uint64_t)s->dim, hd = E / (uint64_t)s->heads, F = (uint64_t)s->ffn, V = (uint64_t)s->vocab;
    uint64_t q = hd * (uint64_t)s->heads, kv = hd * (uint64_t)s->kv_heads;
    bool ok = add_tensor(g, g->base, E, V, "token_embd.weight", 0);
    for (int l = 0; ok && l < s->layers; l++) {
        uint32_t up = l % 2 == 1 ? g->big : g->base;   /* the mix's upgraded tensors */
        ok = add_tensor(g, TH_F32, E, 1, "blk.%d.attn_norm.weight", l) &&
             add_tensor(g, g->base, E, q, "blk.%d.attn_q.weight", l) &&
             add_tensor(g, g->base, E, kv, "blk.%d.attn_k.weight", l) &&
             add_tensor(g, up, E, kv, "blk.%d.attn_v.weight", l) &&
             add_tensor(g, g->base, q, E, "blk.%d.attn_output.weight", l) &&
             add_tensor(g, TH_F32, E, 1, "blk.%d.ffn_norm.weight", l) &&
             add_tensor(g, g->base, E, F, "blk.%d.ffn_gate.weight", l) &&
             add_tensor(g, g->base, E, F, "blk.%d.ffn_up.weight", l) &&
             add_tensor(g, up, F, E, "blk.%d.ffn_down.weight", l);
    }
    ok = ok && add_tensor(g, TH_F32, E, 1, "output_norm.weight", 0);
    if (ok && !s->tied) ok = add_tensor(g, g->big, E, V, "output.weight", 0);
    return ok;
}

/* ---------------------------------------------------------------- GGUF writing */

typedef struct out { FILE *f; bool ok; uint64_t pos; } out;

static void w_bytes(out *o, const void *p, size_t n) {
    if (o->ok && n && fwrite(p, 1, n, o->f) != n) o->ok = false;
    o->pos += n;
}
static void w_u32(out *o, uint32_t v) { w_bytes(o, &v, 4); }
static void w_u64(out *o, uint64_t v) { w_bytes(o, &v, 8); }
static void w_f32(out *o, float v) { w_bytes(o, &v, 4); }
static void w_str(out *o, const char *s) { w_u64(o, strlen(s)); w_bytes(o, s, strlen(s)); }
static void w_key(out *o, const char *k, uint32_t type) { w_str(o, k); w_u32(o, type); }
static void kv_u32(out *o, const char *k, uint32_t v) { w_key(o, k, GGUF_U32); w_u32(o, v); }
static void kv_f32(out *o, const char *k, float v) { w_key(o, k, GGUF_F32); w_f32(o, v); }
static void kv_str(out *o, const char *k, const char *v) { w_key(o, k, GGUF_STRING); w_str(o, v); }
static void kv_bool(out *o, const char *k, bool v) { uint8_t b = v; w_key(o, k, GGUF_BOOL); w_bytes(o, &b, 1); }
static void pad_to(out *o, uint64_t align) {
    static const uint8_t zeros[ALIGN];
    w_bytes(o, zeros, (size_t)((align - o->pos % align) % align));
}

enum { N_KV = 22, N_KV_HYBRID = 30, N_KV_NEXT = 33 };   /* keep in step with write_header + write_vocab */

static void token_text(long i, char *buf, size_t cap) {
    if (i == 0) snprintf(buf, cap, "<unk>");
    else if (i == 1) snprintf(buf, cap, "<s>");
    else if (i == 2) snprintf(buf, cap, "</s>");
    else if (i < 259) snprintf(buf, cap, "<0x%02lX>", i - 3);
    else snprintf(buf, cap, "\xe2\x96\x81w%ld", i - 259);   /* "▁w<N>" */
}

static void write_vocab(out *o, long n) {
    char buf[32];
    kv_str(o, "tokenizer.ggml.model", "llama");
    w_key(o, "tokenizer.ggml.tokens", GGUF_ARRAY); w_u32(o, GGUF_STRING); w_u64(o, (uint64_t)n);
    for (long i = 0; i < n; i++) { token_text(i, buf, sizeof buf); w_str(o, buf); }
    w_key(o, "tokenizer.ggml.scores", GGUF_ARRAY); w_u32(o, GGUF_F32); w_u64(o, (uint64_t)n);
    for (long i = 0; i < n; i++) w_f32(o, i < 259 ? 0.0f : -(float)(i - 259));
    w_key(o, "tokenizer.ggml.token_type", GGUF_ARRAY); w_u32(o, GGUF_I32); w_u64(o, (uint64_t)n);
    for (long i = 0; i < n; i++) w_u32(o, i == 0 ? 2 : i < 3 ? 3 : i < 259 ? 6 : 1);  /* unknown, control, byte, normal */
    kv_u32(o, "tokenizer.ggml.bos_token_id", 1);
    kv_u32(o, "tokenizer.ggml.eos_token_id", 2);
    kv_u32(o, "tokenizer.ggml.unknown_token_id", 0);
    kv_bool(o, "tokenizer.ggml.add_bos_token", true);
    kv_bool(o, "tokenizer.ggml.add_eos_token", false);
}

/* "<hybrid arch>.<key>" = v */
static const char *hyb_arch = "qwen35";
static void kv_u32h(out *o, const char *key, uint32_t v) {
    char k[96];
    snprintf(k, sizeof k, "%s.%s", hyb_arch, key);
    kv_u32(o, k, v);
}
static void kv_f32h(out *o, const char *key, float v) {
    char k[96];
    snprintf(k, sizeof k, "%s.%s", hyb_arch, key);
    kv_f32(o, k, v);
}

static void write_header_hybrid(out *o, const gen *g) {
    const shape *s = &g->sh;
    char name[96];
    hyb_arch = s->hybrid == 2 ? "qwen3next" : "qwen35";
    snprintf(name, sizeof name, "theseus synthetic %s %s", hyb_arch, g->type_name);
    kv_str(o, "general.architecture", hyb_arch);                       /* 1 */
    kv_str(o, "general.name", name);
    kv_u32(o, "general.alignment", ALIGN);
    kv_u32h(o, "context_length", (uint32_t)s->ctx);
    kv_u32h(o, "embedding_length", (uint32_t)s->dim);                  /* 5 */
    kv_u32h(o, "block_count", (uint32_t)s->layers);
    kv_u32h(o, "feed_forward_length", (uint32_t)s->ffn);
    kv_u32h(o, "attention.head_count", (uint32_t)s->heads);
    kv_u32h(o, "attention.head_count_kv", (uint32_t)s->kv_heads);
    kv_u32h(o, "attention.key_length", (uint32_t)s->hd);               /* 10 */
    kv_u32h(o, "attention.value_length", (uint32_t)s->hd);
    kv_u32h(o, "rope.dimension_count", (uint32_t)s->rot);
    kv_f32h(o, "rope.freq_base", 10000000.0f);
    kv_f32h(o, "attention.layer_norm_rms_epsilon", 1e-6f);
    kv_u32h(o, "ssm.conv_kernel", (uint32_t)s->conv);                  /* 15 */
    kv_u32h(o, "ssm.state_size", (uint32_t)s->dk);
    kv_u32h(o, "ssm.group_count", (uint32_t)s->nk);
    kv_u32h(o, "ssm.time_step_rank", (uint32_t)s->nv);
    kv_u32h(o, "ssm.inner_size", (uint32_t)(s->dk * s->nv));
    kv_u32h(o, "full_attention_interval", (uint32_t)s->every);         /* 20 */
    if (s->hybrid == 1) {  /* M-RoPE sections (all at the text position); ik_llama.cpp requires the key */
        const uint32_t half = (uint32_t)s->rot / 2, s2 = half / 3, s0 = (half - s2 + 1) / 2;  /* 64: 11, 11, 10 */
        const uint32_t sec[4] = { s0, half - s2 - s0, s2, 0 };
        w_key(o, "qwen35.rope.dimension_sections", GGUF_ARRAY); w_u32(o, GGUF_I32); w_u64(o, 4);
        for (int i = 0; i < 4; i++) w_u32(o, sec[i]);                  /* 21 */
    }
    if (s->hybrid == 2) {
        kv_u32h(o, "expert_count", (uint32_t)s->experts);
        kv_u32h(o, "expert_used_count", (uint32_t)s->used);
        kv_u32h(o, "expert_feed_forward_length", (uint32_t)s->ffn_exp);
        kv_u32h(o, "expert_shared_feed_forward_length", (uint32_t)s->ffn_shexp);   /* 24 */
    }
    write_vocab(o, s->vocab);                                          /* 30 (33) */
}

static void write_header_llama(out *o, const gen *g) {
    const shape *s = &g->sh;
    char name[96];
    snprintf(name, sizeof name, "theseus synthetic llama %s", g->type_name);
    kv_str(o, "general.architecture", "llama");                        /* 1 */
    kv_str(o, "general.name", name);
    kv_u32(o, "general.alignment", ALIGN);
    kv_u32(o, "llama.context_length", (uint32_t)s->ctx);
    kv_u32(o, "llama.embedding_length", (uint32_t)s->dim);             /* 5 */
    kv_u32(o, "llama.block_count", (uint32_t)s->layers);
    kv_u32(o, "llama.feed_forward_length", (uint32_t)s->ffn);
    kv_u32(o, "llama.attention.head_count", (uint32_t)s->heads);
    kv_u32(o, "llama.attention.head_count_kv", (uint32_t)s->kv_heads);
    kv_u32(o, "llama.rope.dimension_count", (uint32_t)(s->dim / s->heads)); /* 10 */
    kv_f32(o, "llama.rope.freq_base", 10000.0f);
    kv_f32(o, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    kv_u32(o, "llama.vocab_size", (uint32_t)s->vocab);                 /* 13 */
    write_vocab(o, s->vocab);                                          /* 22 */
}

static void write_header(out *o, const gen *g) {
    w_u32(o, 0x46554747u);
    w_u32(o, 3);
    w_u64(o, (uint64_t)g->n_t);
    w_u64(o, g->sh.hybrid == 2 ? N_KV_NEXT : g->sh.hybrid ? N_KV_HYBRID : N_KV);
    if (g->sh.hybrid) write_header_hybrid(o, g);
    else write_header_llama(o, g);
    for (int i = 0; i < g->n_t; i++) {
        const tensor *t = &g->t[i];
        w_str(o, t->name);
        w_u32(o, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++) w_u64(o, t->ne[d]);
        w_u32(o, t->type);
        w_u64(o, t->offset);
    }
    pad_to(o, ALIGN);
}

/* Generates and writes one tensor, CHUNK_ELEMS-ish elements at a time. */
static bool write_tensor(out *o, const gen *g, const tensor *t, float *fbuf, uint8_t *qbuf) {
    const th_type_info *ti = th_type_info_get(t->type);
    uint64_t rb;
    th_row_bytes(t->type, t->ne[0], &rb);
    uint64_t rows_per = t->ne[0] >= CHUNK_ELEMS ? 1 : CHUNK_ELEMS / t->ne[0];
    bool is_float = t->type == TH_F32 || t->type == TH_F16 || t->type == TH_BF16;
    const block_scales *bs = find_scales(t->type);
    bool random = !is_float && bs && (g->random_blocks || !th_ref_can_quantize(t->type));
    if (!is_float && !random && !th_ref_can_quantize(t->type)) {
        fprintf(stderr, "gen_model: tensor %s: no way to generate type %s\n", t->name, ti->name);
        return false;
    }
    const uint64_t rows = t->ne[1] * t->ne[2];
    for (uint64_t r0 = 0; r0 < rows && o->ok; r0 += rows_per) {
        uint64_t nr = TH_MIN(rows_per, rows - r0), n = nr * t->ne[0];
        if (random) {
            fill_random_blocks(bs, qbuf, n / ti->block, ti->bytes, t->sd);
        } else {
            if (t->sd == 0) for (uint64_t i = 0; i < n; i++) fbuf[i] = t->cval;
            else fill_uniform(fbuf, n, t->sd);
            /* row by row: a type may start each row with a scale (IQ1_BN / IQ2_BN's row_meta) */
            for (uint64_t r = 0; r < nr; r++) th_ref_quantize(t->type, fbuf + r * t->ne[0], qbuf + r * rb, (int64_t)t->ne[0]);
        }
        w_bytes(o, qbuf, (size_t)(nr * rb));
    }
    pad_to(o, ALIGN);
    return o->ok;
}

/* ---------------------------------------------------------------- options */

static void usage(FILE *f) {
    fprintf(f, "usage: gen_model --shape 135M|1.1B|8B|qwen35|qwen3next|custom --type TYPE -o FILE [options]\n"
               "  --dim N --layers N --heads N --kv-heads N --ffn N --vocab N   (custom; override a preset)\n"
               "  --ctx N            llama.context_length (default 2048)\n"
               "  --tied | --untied  output shares token_embd (default: tied for 135M, else untied)\n"
               "  --type T           F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K Q6_K\n"
               "                     IQ4_NL IQ4_XS, theseus's q2..q8, or the mixes Q4_K_M Q5_K_M\n"
               "  --random-blocks    random valid blocks for every quantized type (fast, no quantizer)\n"
               "  --seed S           random seed\n");
}

static bool set_preset(shape *s, const char *name) {
    if (!strcmp(name, "135M")) *s = (shape){ 576, 30, 9, 3, 1536, 49152, 2048, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 };
    else if (!strcmp(name, "1.1B")) *s = (shape){ 2048, 16, 32, 8, 8192, 32000, 2048, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 };
    else if (!strcmp(name, "8B")) *s = (shape){ 4096, 32, 32, 8, 14336, 128256, 2048, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 };
    else if (!strcmp(name, "qwen35"))   /* make_hybrid.py --bench's shape */
        *s = (shape){ 1024, 8, 8, 2, 3584, 4096, 2048, 1, .hd = 256, .rot = 64, .dk = 128, .nk = 16, .nv = 16, .conv = 4,
                      .every = 4, .hybrid = 1 };
    else if (!strcmp(name, "qwen3next"))
        *s = (shape){ 1024, 8, 8, 2, 3584, 4096, 2048, 1, .hd = 256, .rot = 64, .dk = 128, .nk = 16, .nv = 32, .conv = 4,
                      .every = 4, .hybrid = 2, .experts = 32, .used = 8, .ffn_exp = 512, .ffn_shexp = 512 };
    else if (!strcmp(name, "custom")) *s = (shape){ 0, 0, 0, 0, 0, 0, 2048, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 };
    else return false;
    return true;
}

static bool set_type(gen *g, const char *name) {
    g->type_name = name;
    if (!strcmp(name, "Q4_K_M")) { g->base = TH_Q4_K; g->big = TH_Q6_K; return true; }
    if (!strcmp(name, "Q5_K_M")) { g->base = TH_Q5_K; g->big = TH_Q6_K; return true; }
    for (uint32_t t = 0; t < TH_TYPE_COUNT; t++) {
        const th_type_info *ti = th_type_info_get(t);
        if (ti && ti->supported && !strcmp(ti->name, name) && t != TH_Q8_1 && t != TH_Q8_K) {
            g->base = g->big = t;
            return true;
        }
    }
    return false;
}

static bool parse_long(const char *flag, const char *v, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || errno || *end || end == v || x < lo || x > hi) {
        fprintf(stderr, "gen_model: %s needs an integer in [%ld, %ld]\n", flag, lo, hi);
        return false;
    }
    *out = x;
    return true;
}

static int parse_args(int argc, char **argv, gen *g) {
    bool have_shape = false, have_type = false;
    int tied = -1;
    g->seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long *field = NULL, x;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 1; }
        if (!strcmp(a, "--tied")) { tied = 1; continue; }
        if (!strcmp(a, "--untied")) { tied = 0; continue; }
        if (!strcmp(a, "--random-blocks")) { g->random_blocks = true; continue; }
        if (!v) { fprintf(stderr, "gen_model: unknown or incomplete option '%s'\n", a); return 2; }
        i++;
        if (!strcmp(a, "--shape")) {
            if (!set_preset(&g->sh, v)) { fprintf(stderr, "gen_model: unknown shape '%s'\n", v); return 2; }
            have_shape = true;
        } else if (!strcmp(a, "--type")) {
            if (!set_type(g, v)) { fprintf(stderr, "gen_model: unknown or unsupported type '%s'\n", v); return 2; }
            have_type = true;
        } else if (!strcmp(a, "-o")) g->out = v;
        else if (!strcmp(a, "--seed")) { if (!parse_long(a, v, 0, 0x7fffffffffffffffL, &x)) return 2; g->seed = (uint64_t)x; }
        else if (!strcmp(a, "--dim")) field = &g->sh.dim;
        else if (!strcmp(a, "--layers")) field = &g->sh.layers;
        else if (!strcmp(a, "--heads")) field = &g->sh.heads;
        else if (!strcmp(a, "--kv-heads")) field = &g->sh.kv_heads;
        else if (!strcmp(a, "--ffn")) field = &g->sh.ffn;
        else if (!strcmp(a, "--vocab")) field = &g->sh.vocab;
        else if (!strcmp(a, "--ctx")) field = &g->sh.ctx;
        else { fprintf(stderr, "gen_model: unknown option '%s'\n", a); return 2; }
        if (field && !parse_long(a, v, 1, 1L << 24, field)) return 2;
        if (field && !have_shape) { fprintf(stderr, "gen_model: give --shape before %s\n", a); return 2; }
    }
    if (!have_shape || !have_type || !g->out) { usage(stderr); return 2; }
    if (tied >= 0) g->sh.tied = tied;
    const shape *s = &g->sh;
    if (s->dim <= 0 || s->layers <= 0 || s->heads <= 0 || s->kv_heads <= 0 || s->ffn <= 0 ||
        s->dim % s->heads || s->heads % s->kv_heads || (s->dim / s->heads) % 2 || s->vocab < 260) {
        fprintf(stderr, "gen_model: bad shape (dim %ld, layers %ld, heads %ld/%ld, ffn %ld, vocab %ld): every size "
                        "is needed, heads must divide dim into an even head size, kv-heads divide heads, vocab >= 260\n",
                s->dim, s->layers, s->heads, s->kv_heads, s->ffn, s->vocab);
        return 2;
    }
    return 0;
}

int main(int argc, char **argv) {
    gen g = { 0 };
    int rc = parse_args(argc, argv, &g);
    if (rc) return rc == 1 ? 0 : rc;
    rng_state ^= g.seed * 0x9E3779B97F4A7C15ULL;
    if (!rng_state) rng_state = 1;
    g.t = calloc(MAX_TENSORS, sizeof *g.t);
    float *fbuf = malloc((size_t)CHUNK_ELEMS * 4 + ((size_t)1 << 16));
    uint8_t *qbuf = malloc((size_t)CHUNK_ELEMS * 4 + ((size_t)1 << 16));
    if (!g.t || !fbuf || !qbuf) { fprintf(stderr, "gen_model: out of memory\n"); return 1; }
    if (!plan_tensors(&g)) return 1;
    /* a row longer than a chunk is generated alone: make sure the buffers hold it */
    for (int i = 0; i < g.n_t; i++)
        if (g.t[i].ne[0] > CHUNK_ELEMS) { fprintf(stderr, "gen_model: rows longer than %u\n", CHUNK_ELEMS); return 1; }
    double t0 = (double)clock();
    out o = { fopen(g.out, "wb"), true, 0 };
    if (!o.f) { fprintf(stderr, "gen_model: cannot create %s: %s\n", g.out, strerror(errno)); return 1; }
    setvbuf(o.f, NULL, _IOFBF, 1 << 22);
    write_header(&o, &g);
    for (int i = 0; i < g.n_t && o.ok; i++) write_tensor(&o, &g, &g.t[i], fbuf, qbuf);
    int e = errno;
    if (fclose(o.f) && o.ok) { o.ok = false; e = errno; }
    if (!o.ok) { fprintf(stderr, "gen_model: writing %s failed: %s\n", g.out, strerror(e)); remove(g.out); return 1; }
    fprintf(stderr, "gen_model: wrote %s (%d tensors, %.1f MiB, %.1f s CPU)\n", g.out, g.n_t,
            (double)o.pos / (1 << 20), ((double)clock() - t0) / CLOCKS_PER_SEC);
    free(fbuf); free(qbuf); free(g.t);
    return 0;
}
