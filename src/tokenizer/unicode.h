/* unicode.h — the small Unicode toolkit the tokenizers need, with llama.cpp's
 * conventions: UTF-8 decoding where each invalid byte becomes U+FFFD, code point
 * classes (letter, number, ...; whitespace = the White_Space property), simple
 * lower-casing, the first code point of a canonical decomposition, and the
 * GPT-2 byte <-> code point mapping used by byte-level BPE. */
#ifndef TH_TOK_UNICODE_H
#define TH_TOK_UNICODE_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

enum {
    TH_CPT_NUMBER = 1 << 0, TH_CPT_LETTER = 1 << 1, TH_CPT_MARK = 1 << 2,
    TH_CPT_PUNCT = 1 << 3, TH_CPT_SYMBOL = 1 << 4, TH_CPT_CONTROL = 1 << 5,
    TH_CPT_SEPARATOR = 1 << 6, TH_CPT_WHITESPACE = 1 << 7,
};

/* Flags of one code point (TH_CPT_*). */
unsigned th_cpt_flags(uint32_t cpt);
static inline bool th_cpt_is_ws(uint32_t c) {
    return (c >= 9 && c <= 13) || c == 32 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

/* Byte length of a UTF-8 sequence from its lead byte (1 for continuation bytes),
 * as llama.cpp's unicode_len_utf8. */
static inline size_t th_utf8_len(uint8_t lead) {
    static const uint8_t lut[16] = { 1,1,1,1,1,1,1,1, 1,1,1,1, 2,2, 3, 4 };
    return lut[lead >> 4];
}

/* Decode one code point at s[*i] (n bytes in all); an invalid sequence yields
 * U+FFFD and consumes one byte. Overlong forms and surrogates are accepted as
 * llama.cpp does; values above U+10FFFF count as invalid. */
uint32_t th_utf8_next(const uint8_t *s, size_t n, size_t *i);
/* Encode; returns bytes written (1..4). cpt must be <= 0x10FFFF. */
int th_utf8_put(uint32_t cpt, char *out);

uint32_t th_cpt_tolower(uint32_t cpt);
/* First code point of the canonical decomposition (cpt itself if none). */
uint32_t th_cpt_nfd_first(uint32_t cpt);

/* GPT-2 byte-level mapping: byte -> UTF-8 of its code point (2 bytes max). */
const char *th_gpt2_byte_utf8(uint8_t byte, int *len);
/* Inverse for one code point: the byte, or -1 if cpt is not in the mapping. */
int th_gpt2_cpt_byte(uint32_t cpt);

#endif
