/* kld_file.c — llama.cpp's KL-divergence base file (--kl-divergence-base):
 * reading (a parser of untrusted bytes: every count checked, the exact size the
 * header implies, every token id inside the vocabulary) and writing, byte for byte
 * what llama-perplexity writes:
 *   "_logits_" | i32 n_ctx | i32 n_vocab | i32 n_chunk | i32 tokens[n_chunk*n_ctx] |
 *   n_chunk * (n_ctx - 1 - n_ctx/2) rows of th_kld_row_len(n_vocab) uint16
 * (row: f32 scale, f32 min_log_prob, n_vocab uint16, zero padding to even). */
#include "eval/eval.h"
#include "core/core.h"
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

enum { HEADER_BYTES = 8 + 3 * 4 };

struct th_kld_base {
    char *name;
    const uint8_t *data;      /* the whole file */
    size_t size;
    void *map;                /* owned mapping (th_kld_base_open), or NULL */
    size_t map_size;
    int32_t n_ctx, n_vocab, n_chunk, n_scored;
    th_token *tokens;         /* copy, aligned */
    uint64_t rows_offset;     /* byte offset of the first row */
    uint64_t row_bytes;
};

static int32_t rd_i32(const uint8_t *p) { int32_t v; memcpy(&v, p, 4); return v; }

static th_status parse_header(th_kld_base *b) {
    const char *nm = b->name;
    if (b->size < HEADER_BYTES || memcmp(b->data, "_logits_", 8) != 0)
        return th_set_error(TH_ERR_FORMAT, "%s: not a KL-divergence base file (no \"_logits_\" header%s)", nm,
                            b->size < HEADER_BYTES ? ", file too short" : "");
    b->n_ctx = rd_i32(b->data + 8);
    b->n_vocab = rd_i32(b->data + 12);
    b->n_chunk = rd_i32(b->data + 16);
    if (b->n_ctx < 3 || b->n_ctx > (1 << 24))
        return th_set_error(TH_ERR_FORMAT, "%s: n_ctx %d at byte offset 8 is outside [3, 16777216]", nm, b->n_ctx);
    if (b->n_vocab < 1 || b->n_vocab > (1 << 28))
        return th_set_error(TH_ERR_FORMAT, "%s: n_vocab %d at byte offset 12 is outside [1, 268435456]", nm, b->n_vocab);
    if (b->n_chunk < 1)
        return th_set_error(TH_ERR_FORMAT, "%s: n_chunk %d at byte offset 16 is not positive", nm, b->n_chunk);
    b->n_scored = b->n_ctx - 1 - b->n_ctx / 2;
    return TH_OK;
}

/* Sizes from the header, with checked arithmetic; a short file names the chunk. */
static th_status check_size(th_kld_base *b) {
    const char *nm = b->name;
    uint64_t n_tok, tok_bytes, row_bytes, chunk_bytes, rows_bytes, total;
    if (!th_mul_u64((uint64_t)b->n_chunk, (uint64_t)b->n_ctx, &n_tok) || !th_mul_u64(n_tok, 4, &tok_bytes) ||
        !th_mul_u64((uint64_t)th_kld_row_len(b->n_vocab), 2, &row_bytes) ||
        !th_mul_u64(row_bytes, (uint64_t)b->n_scored, &chunk_bytes) ||
        !th_mul_u64(chunk_bytes, (uint64_t)b->n_chunk, &rows_bytes) ||
        !th_add_u64(HEADER_BYTES, tok_bytes, &b->rows_offset) || !th_add_u64(b->rows_offset, rows_bytes, &total))
        return th_set_error(TH_ERR_FORMAT, "%s: header (n_ctx %d, n_vocab %d, n_chunk %d) implies a size that overflows",
                            nm, b->n_ctx, b->n_vocab, b->n_chunk);
    b->row_bytes = row_bytes;
    if (b->size < b->rows_offset)
        return th_set_error(TH_ERR_FORMAT, "%s: truncated: %zu bytes, but its %d chunks of %d tokens need %llu bytes "
                            "before the first log-probabilities", nm, b->size, b->n_chunk, b->n_ctx,
                            (unsigned long long)b->rows_offset);
    if (b->size < total) {
        uint64_t have = (b->size - b->rows_offset) / chunk_bytes;
        return th_set_error(TH_ERR_FORMAT, "%s: truncated: %zu bytes, %llu expected for %d chunks of %d tokens and a "
                            "vocabulary of %d (the file ends inside chunk %llu)", nm, b->size,
                            (unsigned long long)total, b->n_chunk, b->n_ctx, b->n_vocab, (unsigned long long)have + 1);
    }
    if (b->size > total)
        return th_set_error(TH_ERR_FORMAT, "%s: %llu bytes after the end of the last chunk (%llu expected for %d chunks "
                            "of %d tokens and a vocabulary of %d)", nm, (unsigned long long)(b->size - total),
                            (unsigned long long)total, b->n_chunk, b->n_ctx, b->n_vocab);
    return TH_OK;
}

static th_status read_tokens(th_kld_base *b) {
    size_t n = (size_t)b->n_chunk * (size_t)b->n_ctx;
    b->tokens = malloc(n * sizeof *b->tokens);
    if (!b->tokens) return th_set_error(TH_ERR_NOMEM, "%s: out of memory for %zu tokens", b->name, n);
    memcpy(b->tokens, b->data + HEADER_BYTES, n * sizeof *b->tokens);
    for (size_t i = 0; i < n; i++)
        if (b->tokens[i] < 0 || b->tokens[i] >= b->n_vocab)
            return th_set_error(TH_ERR_FORMAT, "%s: token %zu (chunk %zu, position %zu, byte offset %zu) is %d, outside "
                                "the file's vocabulary [0, %d)", b->name, i, i / (size_t)b->n_ctx + 1,
                                i % (size_t)b->n_ctx, HEADER_BYTES + 4 * i, b->tokens[i], b->n_vocab);
    return TH_OK;
}

th_status th_kld_base_parse(const uint8_t *data, size_t size, const char *name, th_kld_base **out) {
    *out = NULL;
    th_kld_base *b = calloc(1, sizeof *b);
    if (!b || !(b->name = strdup(name ? name : "(base file)"))) {
        free(b);
        return th_set_error(TH_ERR_NOMEM, "out of memory opening a base file");
    }
    b->data = data;
    b->size = size;
    th_status s;
    if ((s = parse_header(b)) || (s = check_size(b)) || (s = read_tokens(b))) {
        th_kld_base_close(b);
        return s;
    }
    *out = b;
    return TH_OK;
}

th_status th_kld_base_open(const char *path, th_kld_base **out) {
    *out = NULL;
    if (!path) return th_set_error(TH_ERR_ARG, "th_kld_base_open: no path");
    int fd = open(path, O_RDONLY);
    if (fd < 0) return th_set_error(TH_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return th_set_error(TH_ERR_IO, "%s: not a regular file", path);
    }
    size_t size = (size_t)st.st_size;
    void *map = NULL;
    if (size > 0) {
        map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            int e = errno;
            close(fd);
            return th_set_error(TH_ERR_IO, "%s: cannot map %zu bytes: %s", path, size, strerror(e));
        }
    }
    close(fd);
    static const uint8_t empty[1];
    th_status s = th_kld_base_parse(map ? map : empty, size, path, out);
    if (s) {
        if (map) munmap(map, size);
        return s;
    }
    (*out)->map = map;
    (*out)->map_size = size;
    return TH_OK;
}

void th_kld_base_close(th_kld_base *b) {
    if (!b) return;
    if (b->map) munmap(b->map, b->map_size);
    free(b->tokens);
    free(b->name);
    free(b);
}

int32_t th_kld_base_n_ctx(const th_kld_base *b) { return b ? b->n_ctx : 0; }
int32_t th_kld_base_n_vocab(const th_kld_base *b) { return b ? b->n_vocab : 0; }
int32_t th_kld_base_n_chunks(const th_kld_base *b) { return b ? b->n_chunk : 0; }
const th_token *th_kld_base_tokens(const th_kld_base *b) { return b ? b->tokens : NULL; }
const char *th_kld_base_name(const th_kld_base *b) { return b ? b->name : ""; }

const uint16_t *th_kld_base_row(const th_kld_base *b, int32_t chunk, int32_t j) {
    if (!b || chunk < 0 || chunk >= b->n_chunk || j < 0 || j >= b->n_scored) return NULL;
    uint64_t off = b->rows_offset + ((uint64_t)chunk * (uint64_t)b->n_scored + (uint64_t)j) * b->row_bytes;
    return (const uint16_t *)(const void *)(b->data + off);   /* off is a multiple of 4 */
}

th_status th_kld_base_logprobs(const th_kld_base *b, int32_t chunk, int32_t j, float *out) {
    const uint16_t *row = th_kld_base_row(b, chunk, j);
    if (!row || !out)
        return th_set_error(TH_ERR_ARG, "%s: no scored position %d in chunk %d (the file has %d chunks of %d)",
                            b ? b->name : "(no base file)", j, chunk + 1, b ? b->n_chunk : 0, b ? b->n_scored : 0);
    float scale, min_lp;
    th_row_header(row, &scale, &min_lp);
    if (!isfinite(scale) || scale < 0 || !isfinite(min_lp) || min_lp > 0)
        return th_set_error(TH_ERR_FORMAT, "%s: chunk %d, position %d (byte offset %llu): scale %g and min_log_prob %g "
                            "are not a row of log-probabilities", b->name, chunk + 1, b->n_ctx / 2 + j,
                            (unsigned long long)((const uint8_t *)row - b->data), scale, min_lp);
    const uint16_t *v = row + 4;
    for (int32_t i = 0; i < b->n_vocab; i++) out[i] = scale * v[i] + min_lp;
    return TH_OK;
}

/* ---- writer */

struct th_kld_writer {
    FILE *f;
    char *path;
    int64_t row_len;
    bool failed;
};

th_status th_kld_writer_open(const char *path, int32_t n_ctx, int32_t n_vocab, int32_t n_chunk,
                             const th_token *tokens, th_kld_writer **out) {
    *out = NULL;
    th_kld_writer *w = calloc(1, sizeof *w);
    if (!w || !(w->path = strdup(path))) { free(w); return th_set_error(TH_ERR_NOMEM, "%s: out of memory", path); }
    w->row_len = th_kld_row_len(n_vocab);
    if (!(w->f = fopen(path, "wb"))) {
        th_status s = th_set_error(TH_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
        free(w->path);
        free(w);
        return s;
    }
    int32_t hdr[3] = { n_ctx, n_vocab, n_chunk };
    size_t n_tok = (size_t)n_ctx * (size_t)n_chunk;
    if (fwrite("_logits_", 1, 8, w->f) != 8 || fwrite(hdr, 4, 3, w->f) != 3 ||
        fwrite(tokens, sizeof *tokens, n_tok, w->f) != n_tok) {
        th_set_error(TH_ERR_IO, "%s: write failed: %s", path, strerror(errno));
        th_kld_writer_close(w, false);
        return TH_ERR_IO;
    }
    *out = w;
    return TH_OK;
}

th_status th_kld_writer_rows(th_kld_writer *w, const uint16_t *rows, int64_t n_rows) {
    size_t n = (size_t)(n_rows * w->row_len);
    if (fwrite(rows, sizeof *rows, n, w->f) != n) {
        w->failed = true;
        return th_set_error(TH_ERR_IO, "%s: write failed: %s", w->path, strerror(errno));
    }
    return TH_OK;
}

th_status th_kld_writer_close(th_kld_writer *w, bool ok) {
    if (!w) return TH_OK;
    th_status s = TH_OK;
    bool closed = fclose(w->f) == 0;
    if (ok && !w->failed && !closed) s = th_set_error(TH_ERR_IO, "%s: write failed: %s", w->path, strerror(errno));
    if (!ok || w->failed || s) unlink(w->path);
    free(w->path);
    free(w);
    return s;
}
