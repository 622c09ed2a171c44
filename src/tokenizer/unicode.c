/* unicode.c — implementation of unicode.h: code point classes come from
 * utf8proc's tables; decoding and the GPT-2 byte map follow llama.cpp. */
#include "tokenizer/unicode.h"
#include <pthread.h>
#include <utf8proc.h>

unsigned th_cpt_flags(uint32_t cpt) {
    unsigned f = th_cpt_is_ws(cpt) ? TH_CPT_WHITESPACE : 0;
    if (cpt > 0x10FFFF) return f | TH_CPT_CONTROL;
    switch (utf8proc_category((utf8proc_int32_t)cpt)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: return f | TH_CPT_LETTER;
    case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME: return f | TH_CPT_MARK;
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO: return f | TH_CPT_NUMBER;
    case UTF8PROC_CATEGORY_PC: case UTF8PROC_CATEGORY_PD: case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE: case UTF8PROC_CATEGORY_PI: case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO: return f | TH_CPT_PUNCT;
    case UTF8PROC_CATEGORY_SM: case UTF8PROC_CATEGORY_SC: case UTF8PROC_CATEGORY_SK:
    case UTF8PROC_CATEGORY_SO: return f | TH_CPT_SYMBOL;
    case UTF8PROC_CATEGORY_ZS: case UTF8PROC_CATEGORY_ZL: case UTF8PROC_CATEGORY_ZP: return f | TH_CPT_SEPARATOR;
    default: return f | TH_CPT_CONTROL; /* Cc Cf Cs Co Cn */
    }
}

uint32_t th_utf8_next(const uint8_t *s, size_t n, size_t *i) {
    size_t p = *i;
    uint8_t c = s[p];
    if (c < 0x80) { *i = p + 1; return c; }
    size_t len = (c & 0x40) == 0 ? 0 : (c & 0x20) == 0 ? 2 : (c & 0x10) == 0 ? 3 : (c & 0x08) == 0 ? 4 : 0;
    if (len == 0 || p + len > n) goto bad;
    uint32_t v = c & (0xFF >> (len + 1));
    for (size_t k = 1; k < len; k++) {
        if ((s[p + k] & 0xC0) != 0x80) goto bad;
        v = (v << 6) | (s[p + k] & 0x3F);
    }
    if (v > 0x10FFFF) goto bad;
    *i = p + len;
    return v;
bad:
    *i = p + 1;
    return 0xFFFD;
}

int th_utf8_put(uint32_t c, char *o) {
    if (c < 0x80) { o[0] = (char)c; return 1; }
    if (c < 0x800) { o[0] = (char)(0xC0 | (c >> 6)); o[1] = (char)(0x80 | (c & 0x3F)); return 2; }
    if (c < 0x10000) {
        o[0] = (char)(0xE0 | (c >> 12)); o[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        o[2] = (char)(0x80 | (c & 0x3F)); return 3;
    }
    o[0] = (char)(0xF0 | (c >> 18)); o[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((c >> 6) & 0x3F)); o[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

uint32_t th_cpt_tolower(uint32_t cpt) {
    if (cpt > 0x10FFFF) return cpt;
    return (uint32_t)utf8proc_tolower((utf8proc_int32_t)cpt);
}

uint32_t th_cpt_nfd_first(uint32_t cpt) {
    if (cpt < 0xC0 || cpt > 0x10FFFF) return cpt;
    utf8proc_int32_t buf[32];
    int last = 0;
    utf8proc_ssize_t n = utf8proc_decompose_char((utf8proc_int32_t)cpt, buf, 32, UTF8PROC_DECOMPOSE, &last);
    return n >= 1 && n <= 32 ? (uint32_t)buf[0] : cpt;
}

/* GPT-2: printable bytes ! .. ~, ¡ .. ¬, ® .. ÿ map to themselves; the other 68
 * bytes map, in byte order, to U+0100, U+0101, ... */
static bool gpt2_self(int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE); }

static struct { char s[256][2]; uint8_t len[256]; int16_t from_cpt[324]; } g2;
static pthread_once_t g2_once = PTHREAD_ONCE_INIT;

static void gpt2_build(void) {
    int n = 0;
    for (int i = 0; i < 324; i++) g2.from_cpt[i] = -1;
    for (int b = 0; b < 256; b++) {
        uint32_t c = gpt2_self(b) ? (uint32_t)b : (uint32_t)(256 + n++);
        g2.len[b] = (uint8_t)th_utf8_put(c, g2.s[b]);
        g2.from_cpt[c] = (int16_t)b;
    }
}

static void gpt2_init(void) { pthread_once(&g2_once, gpt2_build); }

const char *th_gpt2_byte_utf8(uint8_t byte, int *len) {
    gpt2_init();
    *len = g2.len[byte];
    return g2.s[byte];
}

int th_gpt2_cpt_byte(uint32_t cpt) {
    gpt2_init();
    return cpt < 324 ? g2.from_cpt[cpt] : -1;
}
