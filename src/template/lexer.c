/* lexer.c — template source -> tokens, as Jinja2's lexer does it with the
 * settings Hugging Face uses: newlines normalised to "\n", one trailing
 * newline dropped (keep_trailing_newline=False), "{%- -%}" style whitespace
 * control, trim_blocks (the newline after a block or comment tag goes) and
 * lstrip_blocks (spaces/tabs before a block or comment tag on its own line
 * go), {% raw %} blocks, and string literals decoded like Python's
 * unicode-escape. */
#include "template/chat_template.h"
#include <stdlib.h>

typedef struct {
    tctx *c;
    const char *s;
    size_t n, pos;
    int line;
    bool line_starting;
    ttokens *out;
} lexer;

static ttoken *emit(lexer *L, int type) {
    ttokens *t = L->out;
    if (t->n == t->cap) { /* outside the arena: realloc keeps growth cheap */
        size_t cap = t->cap ? t->cap * 2 : 256;
        if (cap * sizeof(ttoken) > L->c->mem_limit)
            tt_fail(L->c, "template memory limit exceeded (%zu MiB)", L->c->mem_limit >> 20);
        ttoken *nv = realloc(t->v, cap * sizeof(ttoken));
        if (!nv) tt_fail(L->c, "out of memory while lexing the template");
        t->v = nv;
        t->cap = cap;
    }
    ttoken *k = &t->v[t->n++];
    memset(k, 0, sizeof *k);
    k->type = type;
    k->line = L->line;
    return k;
}

static bool is_space(char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v'; }
static bool is_digit(char ch) { return ch >= '0' && ch <= '9'; }
static bool is_name0(char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_'; }

static void count_lines(lexer *L, size_t from, size_t to) {
    for (size_t i = from; i < to; i++) if (L->s[i] == '\n') L->line++;
}

/* Emit the text before a tag, after whitespace control. sign: '-', '+' or 0. */
static void emit_text(lexer *L, size_t from, size_t to, char sign, bool is_var) {
    const char *s = L->s;
    int line = L->line;
    if (sign == '-') {
        while (to > from && is_space(s[to - 1])) to--;
    } else if (sign != '+' && !is_var) {
        size_t l = to;
        while (l > from && s[l - 1] != '\n') l--;
        if (l > from || L->line_starting) {
            size_t k = l;
            while (k < to && (s[k] == ' ' || s[k] == '\t' || s[k] == '\f' || s[k] == '\v' || s[k] == '\r')) k++;
            if (k == to) to = l;
        }
    }
    if (to > from) {
        ttoken *t = emit(L, T_TEXT);
        t->line = line;
        t->s = s + from;
        t->n = to - from;
    }
}

/* After a block/comment end marker at L->pos: the sign before it decides. */
static void after_block_end(lexer *L, char sign) {
    if (sign == '-') {
        size_t p = L->pos;
        while (p < L->n && is_space(L->s[p])) p++;
        count_lines(L, L->pos, p);
        L->pos = p;
    } else if (sign != '+' && L->pos < L->n && L->s[L->pos] == '\n') {
        L->pos++;
        L->line++;
    }
    L->line_starting = L->pos > 0 && L->s[L->pos - 1] == '\n';
}

static void put_utf8(tctx *c, tbuf *b, uint32_t cp) {
    char u[4];
    if (cp >= 0xd800 && cp < 0xe000) cp = 0xfffd;
    if (cp > 0x10ffff) tt_fail(c, "illegal Unicode character \\U%08x in a string literal", cp);
    if (cp < 0x80) { u[0] = (char)cp; tb_put(c, b, u, 1); }
    else if (cp < 0x800) { u[0] = (char)(0xc0 | cp >> 6); u[1] = (char)(0x80 | (cp & 63)); tb_put(c, b, u, 2); }
    else if (cp < 0x10000) {
        u[0] = (char)(0xe0 | cp >> 12); u[1] = (char)(0x80 | ((cp >> 6) & 63)); u[2] = (char)(0x80 | (cp & 63));
        tb_put(c, b, u, 3);
    } else {
        u[0] = (char)(0xf0 | cp >> 18); u[1] = (char)(0x80 | ((cp >> 12) & 63));
        u[2] = (char)(0x80 | ((cp >> 6) & 63)); u[3] = (char)(0x80 | (cp & 63));
        tb_put(c, b, u, 4);
    }
}

static int hexval(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* Decode the body of a string literal like Python's unicode-escape codec. */
static void decode_string(lexer *L, const char *p, size_t n, ttoken *t) {
    tctx *c = L->c;
    tbuf b = { 0 };
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '\\' || i + 1 >= n) { tb_putc(c, &b, p[i]); continue; }
        char e = p[++i];
        int digits = 0;
        switch (e) {
        case '\n': break;
        case '\\': tb_putc(c, &b, '\\'); break;
        case '\'': tb_putc(c, &b, '\''); break;
        case '"': tb_putc(c, &b, '"'); break;
        case 'a': tb_putc(c, &b, '\a'); break;
        case 'b': tb_putc(c, &b, '\b'); break;
        case 'f': tb_putc(c, &b, '\f'); break;
        case 'n': tb_putc(c, &b, '\n'); break;
        case 'r': tb_putc(c, &b, '\r'); break;
        case 't': tb_putc(c, &b, '\t'); break;
        case 'v': tb_putc(c, &b, '\v'); break;
        case 'x': digits = 2; break;
        case 'u': digits = 4; break;
        case 'U': digits = 8; break;
        default:
            if (e >= '0' && e <= '7') {
                uint32_t v = 0;
                int k = 0;
                while (k < 3 && i < n && p[i] >= '0' && p[i] <= '7') { v = v * 8 + (uint32_t)(p[i] - '0'); i++; k++; }
                i--;
                put_utf8(c, &b, v);
            } else { tb_putc(c, &b, '\\'); tb_putc(c, &b, e); }
        }
        if (digits) {
            uint32_t v = 0;
            for (int k = 0; k < digits; k++) {
                int h = i + 1 + (size_t)k < n ? hexval(p[i + 1 + k]) : -1;
                if (h < 0) tt_fail(c, "line %d: truncated \\%cXX escape in a string literal", t->line, e);
                v = v * 16 + (uint32_t)h;
            }
            i += (size_t)digits;
            put_utf8(c, &b, v);
        }
    }
    t->s = b.p ? b.p : "";
    t->n = b.n;
}

static const char *const ops2[] = { "//", "**", "==", "!=", ">=", "<=" };

/* Lex the inside of a {% %} / {{ }} tag up to and including its end marker. */
static void lex_tag(lexer *L, bool is_var) {
    const char *s = L->s;
    int depth = 0;
    for (;;) {
        while (L->pos < L->n && is_space(s[L->pos])) { if (s[L->pos] == '\n') L->line++; L->pos++; }
        if (L->pos >= L->n)
            tt_fail(L->c, "line %d: unexpected end of template, expected end of %s", L->line,
                    is_var ? "print statement '}}'" : "block tag '%}'");
        size_t p = L->pos;
        char endc = is_var ? '}' : '%';
        if (depth == 0) {
            char sign = (s[p] == '-' || s[p] == '+') ? s[p] : 0;
            size_t q = p + (sign ? 1 : 0);
            if (q + 1 < L->n && s[q] == endc && s[q + 1] == '}' && !(is_var && sign == '+')) {
                emit(L, is_var ? T_VAR_END : T_BLOCK_END);
                L->pos = q + 2;
                if (is_var) {
                    if (sign == '-') after_block_end(L, '-');
                    else L->line_starting = false;
                } else after_block_end(L, sign);
                return;
            }
        }
        char ch = s[p];
        if (is_name0(ch)) {
            size_t q = p;
            while (q < L->n && (is_name0(s[q]) || is_digit(s[q]))) q++;
            ttoken *t = emit(L, T_NAME);
            t->s = s + p;
            t->n = q - p;
            L->pos = q;
        } else if (is_digit(ch)) {
            size_t q = p;
            bool is_float = false;
            while (q < L->n && (is_digit(s[q]) || s[q] == '_')) q++;
            bool after_dot = p > 0 && s[p - 1] == '.';
            if (!after_dot && q + 1 < L->n && s[q] == '.' && is_digit(s[q + 1])) {
                is_float = true;
                q++;
                while (q < L->n && (is_digit(s[q]) || s[q] == '_')) q++;
            }
            if (!after_dot && q < L->n && (s[q] == 'e' || s[q] == 'E')) {
                size_t r = q + 1;
                if (r < L->n && (s[r] == '+' || s[r] == '-')) r++;
                if (r < L->n && is_digit(s[r])) {
                    is_float = true;
                    q = r;
                    while (q < L->n && is_digit(s[q])) q++;
                }
            }
            char num[64];
            size_t k = 0;
            for (size_t i = p; i < q && k < sizeof num - 1; i++) if (s[i] != '_') num[k++] = s[i];
            num[k] = 0;
            ttoken *t = emit(L, is_float ? T_FLOAT : T_INT);
            if (is_float) t->f = strtod(num, NULL);
            else {
                int64_t v = 0;
                for (size_t i = 0; i < k; i++)
                    if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, num[i] - '0', &v)) {
                        t->overflow = true;
                        break;
                    }
                if (q - p >= sizeof num - 1) t->overflow = true;
                t->i = v;
            }
            L->pos = q;
        } else if (ch == '\'' || ch == '"') {
            size_t q = p + 1;
            int line = L->line;
            while (q < L->n && s[q] != ch) {
                if (s[q] == '\\' && q + 1 < L->n) { if (s[q + 1] == '\n') L->line++; q++; }
                if (s[q] == '\n') L->line++;
                q++;
            }
            if (q >= L->n) tt_fail(L->c, "line %d: unexpected char '%c' (unterminated string literal)", line, ch);
            ttoken *t = emit(L, T_STRING);
            t->line = line;
            decode_string(L, s + p + 1, q - p - 1, t);
            L->pos = q + 1;
        } else {
            int op = 0;
            for (size_t i = 0; i < sizeof ops2 / sizeof ops2[0]; i++)
                if (p + 1 < L->n && s[p] == ops2[i][0] && s[p + 1] == ops2[i][1]) op = OP2(s[p], s[p + 1]);
            if (!op) {
                if (!strchr("+-*/%~[](){}<>=.:|,;", ch) || ch == 0)
                    tt_fail(L->c, "line %d: unexpected char '%c' in a tag", L->line, ch);
                op = ch;
                if (ch == '(' || ch == '[' || ch == '{') depth++;
                if (ch == ')' || ch == ']' || ch == '}') {
                    if (depth == 0) tt_fail(L->c, "line %d: unexpected '%c'", L->line, ch);
                    depth--;
                }
            }
            emit(L, T_OP)->op = op;
            L->pos = p + (op > 255 ? 2 : 1);
        }
    }
}

/* {% raw %} ... {% endraw %}: returns true if the block at L->pos was raw. */
static bool try_raw(lexer *L, size_t body) {
    const char *s = L->s;
    size_t p = body;
    while (p < L->n && is_space(s[p])) p++;
    if (p + 3 > L->n || memcmp(s + p, "raw", 3) || (p + 3 < L->n && (is_name0(s[p + 3]) || is_digit(s[p + 3]))))
        return false;
    p += 3;
    while (p < L->n && is_space(s[p])) p++;
    char sign = p < L->n && s[p] == '-' ? '-' : 0;  /* no trim_blocks after {% raw %}, no "+" form */
    if (sign) p++;
    if (p + 1 >= L->n || s[p] != '%' || s[p + 1] != '}') return false;
    count_lines(L, L->pos, p + 2);
    L->pos = p + 2;
    if (sign) after_block_end(L, sign);
    else L->line_starting = false;
    for (size_t q = L->pos; q + 1 < L->n; q++) {
        if (s[q] != '{' || s[q + 1] != '%') continue;
        size_t r = q + 2;
        char bsign = r < L->n && (s[r] == '-' || s[r] == '+') ? s[r] : 0;
        if (bsign) r++;
        while (r < L->n && is_space(s[r])) r++;
        if (r + 6 > L->n || memcmp(s + r, "endraw", 6)) continue;
        r += 6;
        while (r < L->n && is_space(s[r])) r++;
        char esign = r < L->n && (s[r] == '-' || s[r] == '+') ? s[r] : 0;
        if (esign) r++;
        if (r + 1 >= L->n || s[r] != '%' || s[r + 1] != '}') continue;
        emit_text(L, L->pos, q, bsign, false);
        count_lines(L, L->pos, r + 2);
        L->pos = r + 2;
        after_block_end(L, esign);
        return true;
    }
    tt_fail(L->c, "line %d: missing end of raw directive", L->line);
}

void tt_lex(tctx *c, const char *src, size_t n, ttokens *out) {
    /* normalise newlines, drop one trailing newline */
    char *s = tt_alloc(c, n + 1);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (src[i] == '\r') { s[m++] = '\n'; if (i + 1 < n && src[i + 1] == '\n') i++; }
        else s[m++] = src[i];
    }
    if (m && s[m - 1] == '\n') m--;
    s[m] = 0;
    lexer L = { .c = c, .s = s, .n = m, .pos = 0, .line = 1, .line_starting = true, .out = out };
    while (L.pos < L.n) {
        size_t t = L.pos;
        while (t + 1 < L.n && !(s[t] == '{' && (s[t + 1] == '{' || s[t + 1] == '%' || s[t + 1] == '#'))) t++;
        if (t + 1 >= L.n) {
            emit_text(&L, L.pos, L.n, 0, true);
            break;
        }
        char kind = s[t + 1];
        size_t body = t + 2;
        char sign = body < L.n && (s[body] == '-' || s[body] == '+') ? s[body] : 0;
        emit_text(&L, L.pos, t, sign, kind == '{');
        count_lines(&L, L.pos, t);
        L.pos = t;
        if (kind == '%' && try_raw(&L, body + (sign ? 1 : 0))) continue;
        if (sign) body++;
        if (kind == '#') {
            size_t q = body;
            while (q + 1 < L.n && !(s[q] == '#' && s[q + 1] == '}')) q++;
            if (q + 1 >= L.n) tt_fail(c, "line %d: Missing end of comment tag", L.line);
            char esign = q > body && (s[q - 1] == '-' || s[q - 1] == '+') ? s[q - 1] : 0;
            count_lines(&L, L.pos, q + 2);
            L.pos = q + 2;
            after_block_end(&L, esign);
            continue;
        }
        emit(&L, kind == '{' ? T_VAR_BEGIN : T_BLOCK_BEGIN);
        L.pos = body;
        lex_tag(&L, kind == '{');
    }
    emit(&L, T_EOF);
}
