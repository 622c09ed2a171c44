/* pretok.c — byte-level BPE pre-tokenizers: the regexes each tokenizer.ggml.pre
 * type splits text with (as llama.cpp's llama-vocab.cpp writes them), compiled
 * with PCRE2 + JIT, and the splitting itself. As in llama.cpp, the regexes of a
 * type are applied one after another, each splitting every piece left by the
 * previous one into its matches and the text between them.
 *
 * Exactness notes (what llama.cpp's unicode.cpp does, reproduced here):
 *  - invalid UTF-8 input bytes become U+FFFD, one per byte;
 *  - \s is the White_Space property. The subject the regexes see has each
 *    non-ASCII whitespace code point replaced by a same-length stand-in (U+0085 or
 *    U+E001) and \s / \S are rewritten to a class holding exactly the ASCII
 *    whitespace and the stand-ins. This keeps explicit ranges such as
 *    [\x{0800}-\x{4E00}] from matching whitespace, as llama.cpp's std::wregex
 *    path (which maps such code points to 0x0B) behaves;
 *  - surrogate code points (accepted by llama.cpp's decoder) are shown to the
 *    regexes as U+E000 (category "other");
 *  - \d, \w, \b are ASCII-only (no PCRE2_UCP), as std::regex; $ matches only
 *    at the very end (PCRE2_DOLLAR_ENDONLY), as ECMAScript.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/vocab_internal.h"
#include "tokenizer/unicode.h"
#include <pcre2.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* ---- the regexes (llama.cpp's adapted forms) ---- */

#define CONTR "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RX_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RX_LLAMA3 CONTR "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_QWEN2 CONTR "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_BLOOM " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{0964}\\x{06D4}\\x{060C})]+"
#define UPPERISH "((?=[\\p{L}])([^a-z]))"
#define LOWERISH "((?=[\\p{L}])([^A-Z]))"
#define CJK_DS "[\\x{4E00}-\\x{9FA5}\\x{0800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+"

static const char *const RS_DEFAULT[] = { "[\\p{P}\\$\\+<=>\\^~\\|]+", RX_GPT2, "\\p{N}+", "[0-9][0-9][0-9]", NULL };
static const char *const RS_GPT2[] = { RX_GPT2, NULL };
static const char *const RS_LLAMA3[] = { RX_LLAMA3, NULL };
static const char *const RS_QWEN2[] = { RX_QWEN2, NULL };
static const char *const RS_QWEN35[] = {
    CONTR "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", NULL };
static const char *const RS_STARCODER[] = { "\\p{N}", RX_GPT2, NULL };
static const char *const RS_FALCON[] = { "[\\p{P}\\$\\+<=>\\^~\\|`]+", RX_GPT2, "[0-9][0-9][0-9]", NULL };
static const char *const RS_DEEPSEEK_LLM[] = {
    "[\\r\\n]",
    "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+",
    "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
    "\\s+$",
    CJK_DS,
    "\\p{N}+", NULL };
static const char *const RS_DEEPSEEK_CODER[] = { "[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", CJK_DS, "\\p{N}", NULL };
static const char *const RS_DEEPSEEK3[] = {
    "\\p{N}{1,3}",
    "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL };
static const char *const RS_BLOOM[] = { RX_BLOOM, NULL };
static const char *const RS_VIKING[] = { RX_BLOOM, "\\p{N}", NULL };
static const char *const RS_TEKKEN[] = {
    "[^\\r\\n\\p{L}\\p{N}]?" UPPERISH "*" LOWERISH "+|[^\\r\\n\\p{L}\\p{N}]?" UPPERISH "+" LOWERISH "*"
    "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", NULL };
static const char *const RS_GPT4O[] = {
    "[^\\r\\n\\p{L}\\p{N}]?" UPPERISH "*" LOWERISH "+" CONTR "?|[^\\r\\n\\p{L}\\p{N}]?" UPPERISH "+" LOWERISH "*" CONTR "?"
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", NULL };
static const char *const RS_CHAMELEON[] = {
    "<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )", "\\p{N}",
    "[\\p{P}!-/:-@\\[-`{-~]", RX_GPT2, NULL };
static const char *const RS_BAILINGMOE[] = {
    "'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+", NULL };
static const char *const RS_SEED_CODER[] = {
    CONTR "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", NULL };
static const char *const RS_UFAKZEKA[] = {
    "[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", NULL };
static const char *const RS_MINICPM5[] = {
    "\\p{N}{1,3}",
    CONTR "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", NULL };
static const char *const RS_LAGUNA[] = { "[^\\n]+|[\\n]+", RX_QWEN2, NULL };
static const char *const RS_EXAONE_MOE[] = {
    CONTR "|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+", NULL };
static const char *const RS_JAIS2[] = {
    CONTR "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+"
    "|\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}", NULL };

/* ---- names -> regex set + the vocab flags llama.cpp ties to the name ---- */

typedef struct pre_def {
    const char *names;              /* '|'-separated aliases */
    const char *const *rx;
    bool keep_clean_spaces;         /* clean_spaces stays true (else set to false) */
    bool ignore_merges, add_bos, no_bos;
} pre_def;

static const pre_def PRE_DEFS[] = {
    { "default", RS_DEFAULT, true, false, false, false },
    { "llama3|llama-v3|llama-bpe|falcon3|falcon-h1|pixtral|midm-2.0|lfm2|jina-v5-nano", RS_LLAMA3, true, true, true, false },
    { "dbrx|smaug-bpe", RS_LLAMA3, true, false, false, false },
    { "glm4|chatglm-bpe", RS_LLAMA3, true, false, false, true },
    { "jais-2", RS_JAIS2, true, false, false, false },
    { "deepseek-llm", RS_DEEPSEEK_LLM, false, false, false, false },
    { "deepseek-coder", RS_DEEPSEEK_CODER, false, false, false, false },
    { "deepseek-v3|hunyuan-dense|joyai-llm|hy_v4", RS_DEEPSEEK3, false, false, false, false },
    { "falcon", RS_FALCON, true, false, false, false },
    { "starcoder|refact|codeshell|exaone|minerva-7b|mellum2", RS_STARCODER, true, false, false, false },
    { "command-r|smollm", RS_STARCODER, false, false, false, false },
    { "gpt-2|phi-2|jina-es|jina-de|gigachat|jina-v2-es|jina-v2-de|a.x-4.0|mellum|modern-bert|mpt|olmo|jais|exaone4"
      "|jina-v1-en|jina-v2-code|roberta-bpe", RS_GPT2, true, false, false, false },
    { "trillion|granite-docling", RS_GPT2, false, false, false, false },
    { "stablelm2|megrez", RS_QWEN2, true, false, false, false },
    { "qwen2|deepseek-r1-qwen|kormo|f2llmv2|hunyuan|solar-open|grok-2", RS_QWEN2, false, false, false, false },
    { "qwen35", RS_QWEN35, false, false, false, false },
    { "poro-chat", RS_BLOOM, false, false, false, false },
    { "bloom|gpt3-finnish", RS_BLOOM, true, false, false, false },
    { "viking", RS_VIKING, false, false, false, false },
    { "tekken", RS_TEKKEN, false, true, true, false },
    { "chameleon", RS_CHAMELEON, false, false, true, false },
    { "gpt-4o|llama4|kanana2|talkie|minimax-m2", RS_GPT4O, false, false, false, false },
    { "bailingmoe|bailingmoe2|llada-moe", RS_BAILINGMOE, false, false, false, false },
    { "seed-coder", RS_SEED_CODER, false, false, false, false },
    { "ufakzeka", RS_UFAKZEKA, false, false, false, false },
    { "minicpm5", RS_MINICPM5, true, true, false, false },
    { "laguna", RS_LAGUNA, false, false, false, false },
    { "exaone-moe", RS_EXAONE_MOE, true, false, false, false },
};

static bool name_in(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, '|');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == n && !memcmp(p, name, n)) return true;
        if (!e) break;
        p = e + 1;
    }
    return false;
}

static const char *pre_names[128];
static char pre_names_store[2048];

static void build_names(void) {
    size_t k = 0, used = 0;
    for (size_t i = 0; i < sizeof PRE_DEFS / sizeof PRE_DEFS[0]; i++) {
        for (const char *p = PRE_DEFS[i].names; *p && k + 1 < 128;) {
            const char *e = strchr(p, '|');
            size_t l = e ? (size_t)(e - p) : strlen(p);
            if (used + l + 1 > sizeof pre_names_store) break;
            memcpy(pre_names_store + used, p, l);
            pre_names_store[used + l] = 0;
            pre_names[k++] = pre_names_store + used;
            used += l + 1;
            if (!e) break;
            p = e + 1;
        }
    }
    pre_names[k] = NULL;
}

const char *const *th_pretok_names(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, build_names);
    return pre_names;
}

/* ---- compiling ---- */

#define WS_STANDIN2 0x85u    /* 2-byte stand-in for non-ASCII whitespace */
#define WS_STANDIN3 0xE001u  /* 3-byte stand-in */
#define SURROGATE_STANDIN 0xE000u
#define WS_CLASS_BODY "\\t\\n\\x0B\\f\\r\\x20\\x{85}\\x{E001}"

#define MAX_RX 8
struct th_pretok {
    pcre2_code *code[MAX_RX];
    int n;
};

/* Rewrite \s and \S (see the top of the file). Returns false if the pattern
 * has \S inside a class (not used by any pre type). */
static bool rewrite_ws(const char *rx, th_bytes *out) {
    bool in_class = false;
    for (const char *p = rx; *p; p++) {
        if (*p == '\\' && p[1]) {
            char c = p[1];
            p++;
            if (c == 's') {
                if (!in_class) th_bytes_put(out, "[", 1);
                th_bytes_put(out, WS_CLASS_BODY, strlen(WS_CLASS_BODY));
                if (!in_class) th_bytes_put(out, "]", 1);
            } else if (c == 'S') {
                if (in_class) return false;
                th_bytes_put(out, "[^" WS_CLASS_BODY "]", strlen("[^" WS_CLASS_BODY "]"));
            } else {
                char two[2] = { '\\', c };
                th_bytes_put(out, two, 2);
            }
            continue;
        }
        if (*p == '[' && !in_class) in_class = true;
        else if (*p == ']' && in_class) in_class = false;
        th_bytes_put(out, p, 1);
    }
    th_bytes_put(out, "", 1);
    return !out->failed;
}

void th_pretok_free(th_pretok *p) {
    if (!p) return;
    for (int i = 0; i < p->n; i++) pcre2_code_free(p->code[i]);
    free(p);
}

static th_status compile_one(const char *name, const char *rx, pcre2_code **out) {
    th_bytes pat = {0};
    if (!rewrite_ws(rx, &pat)) {
        free(pat.p);
        return th_set_error(TH_ERR_INTERNAL, "pre-tokenizer '%s': cannot rewrite regex %s", name, rx);
    }
    int err = 0;
    PCRE2_SIZE erroff = 0;
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)pat.p, PCRE2_ZERO_TERMINATED,
                                     PCRE2_UTF | PCRE2_DOLLAR_ENDONLY | PCRE2_NO_UTF_CHECK, &err, &erroff, NULL);
    free(pat.p);
    if (!code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return th_set_error(TH_ERR_INTERNAL, "pre-tokenizer '%s': regex %s does not compile at %zu: %s",
                            name, rx, (size_t)erroff, (const char *)msg);
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE); /* failure: the interpreter is used */
    *out = code;
    return TH_OK;
}

th_status th_pretok_new(const char *name, th_pretok_cfg *cfg, th_pretok **out) {
    *out = NULL;
    const pre_def *d = NULL;
    for (size_t i = 0; i < sizeof PRE_DEFS / sizeof PRE_DEFS[0] && !d; i++)
        if (name_in(PRE_DEFS[i].names, name)) d = &PRE_DEFS[i];
    if (!d) return th_set_error(TH_ERR_UNSUPPORTED, "unknown pre-tokenizer type tokenizer.ggml.pre = '%s'", name);
    cfg->clean_spaces = d->keep_clean_spaces;
    cfg->ignore_merges = d->ignore_merges;
    cfg->add_bos = d->add_bos;
    cfg->no_bos = d->no_bos;
    th_pretok *p = calloc(1, sizeof *p);
    if (!p) return th_set_error(TH_ERR_NOMEM, "pre-tokenizer '%s': out of memory", name);
    for (int i = 0; d->rx[i] && i < MAX_RX; i++) {
        th_status st = compile_one(name, d->rx[i], &p->code[p->n]);
        if (st != TH_OK) { th_pretok_free(p); return st; }
        p->n++;
    }
    *out = p;
    return TH_OK;
}

/* ---- splitting ---- */

typedef struct span { uint32_t off, len; } span;
typedef struct spans { span *p; size_t n, cap; } spans;

static bool spans_push(spans *s, size_t off, size_t len) {
    if (len == 0) return true;
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 64;
        span *np = realloc(s->p, nc * sizeof *np);
        if (!np) return false;
        s->p = np; s->cap = nc;
    }
    s->p[s->n++] = (span){ (uint32_t)off, (uint32_t)len };
    return true;
}

/* norm: the text as llama.cpp re-encodes it; subj: what the regexes see (same length). */
static bool normalize(const uint8_t *in, size_t n, th_bytes *norm, th_bytes *subj) {
    if (!th_bytes_reserve(norm, n * 3 + 4) || !th_bytes_reserve(subj, n * 3 + 4)) return false;
    for (size_t i = 0; i < n;) {
        uint32_t c = th_utf8_next(in, n, &i);
        int l = th_utf8_put(c, norm->p + norm->n);
        uint32_t s = c;
        if (c >= 0xD800 && c <= 0xDFFF) s = SURROGATE_STANDIN;
        else if (c >= 0x80 && th_cpt_is_ws(c)) s = l == 2 ? WS_STANDIN2 : WS_STANDIN3;
        th_utf8_put(s, subj->p + subj->n);
        norm->n += l;
        subj->n += l;
    }
    return true;
}

typedef struct matcher {
    pcre2_match_data *md;
    pcre2_match_context *mc;
    pcre2_jit_stack *js;
} matcher;

static int run_match(const pcre2_code *code, const char *s, size_t len, size_t start, matcher *m) {
    int rc = pcre2_match(code, (PCRE2_SPTR)s, len, start, PCRE2_NO_UTF_CHECK, m->md, m->mc);
    if (rc < 0 && rc != PCRE2_ERROR_NOMATCH)   /* JIT stack or limits: retry interpreted */
        rc = pcre2_match(code, (PCRE2_SPTR)s, len, start, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, m->md, m->mc);
    return rc;
}

/* Split every span of `in` by one regex into `out` (matches and the gaps between). */
static th_status split_by(const pcre2_code *code, const char *subj, const spans *in, spans *out, matcher *m) {
    out->n = 0;
    for (size_t k = 0; k < in->n; k++) {
        const char *s = subj + in->p[k].off;
        size_t len = in->p[k].len, pos = 0, done = 0;
        while (pos <= len) {
            int rc = run_match(code, s, len, pos, m);
            if (rc == PCRE2_ERROR_NOMATCH) break;
            if (rc < 0) return th_set_error(TH_ERR_INTERNAL, "pre-tokenizer regex failed (PCRE2 error %d)", rc);
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(m->md);
            size_t ms = ov[0], me = ov[1];
            if (me == ms) {             /* empty match: step one character */
                pos = ms + 1;
                while (pos < len && ((uint8_t)s[pos] & 0xC0) == 0x80) pos++;
                continue;
            }
            if (!spans_push(out, in->p[k].off + done, ms - done) ||
                !spans_push(out, in->p[k].off + ms, me - ms))
                return th_set_error(TH_ERR_NOMEM, "pre-tokenizer: out of memory");
            done = pos = me;
        }
        if (!spans_push(out, in->p[k].off + done, len - done))
            return th_set_error(TH_ERR_NOMEM, "pre-tokenizer: out of memory");
    }
    return TH_OK;
}

th_status th_pretok_split(const th_pretok *p, const char *text, size_t len, th_word_fn emit, void *ctx) {
    th_bytes norm = {0}, subj = {0};
    spans a = {0}, b = {0};
    matcher m = {0};
    th_status st = TH_OK;
    if (len == 0) return TH_OK;
    if (len > UINT32_MAX / 4) return th_set_error(TH_ERR_ARG, "tokenize: text of %zu bytes is too long", len);
    m.md = pcre2_match_data_create(1, NULL);
    m.mc = pcre2_match_context_create(NULL);
    m.js = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, NULL);
    if (!m.md || !m.mc || !m.js || !normalize((const uint8_t *)text, len, &norm, &subj) ||
        !spans_push(&a, 0, norm.n)) {
        st = th_set_error(TH_ERR_NOMEM, "pre-tokenizer: out of memory");
        goto done;
    }
    pcre2_jit_stack_assign(m.mc, NULL, m.js);
    pcre2_set_heap_limit(m.mc, 512 * 1024);
    for (int i = 0; i < p->n && st == TH_OK; i++) {
        st = split_by(p->code[i], subj.p, &a, &b, &m);
        spans t = a; a = b; b = t;
    }
    if (st == TH_OK)
        for (size_t k = 0; k < a.n; k++) emit(ctx, norm.p + a.p[k].off, a.p[k].len);
done:
    pcre2_jit_stack_free(m.js);
    pcre2_match_context_free(m.mc);
    pcre2_match_data_free(m.md);
    free(norm.p); free(subj.p); free(a.p); free(b.p);
    return st;
}
