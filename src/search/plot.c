/* plot.c — the frontier as a PNG, drawn here without a graphics library: an RGB
 * raster (axes, ticks, a 3x5 digit font for the tick labels), written as PNG with
 * uncompressed ("stored") deflate blocks, CRC-32 and Adler-32 computed here.
 * x: bits per weight; y: gate value, log10 scale; uniform types as blue squares,
 * explored points as grey dots, the frontier as a red line, the best as a green
 * ring, the gate's limit as a dashed line. */
#include "search/search_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { W = 800, H = 520, ML = 70, MR = 20, MT = 20, MB = 50 };

typedef struct img { uint8_t *px; } img;

static void put(img *im, int x, int y, uint32_t rgb) {
    if (x < 0 || y < 0 || x >= W || y >= H) return;
    uint8_t *p = im->px + ((size_t)y * W + (size_t)x) * 3;
    p[0] = (uint8_t)(rgb >> 16); p[1] = (uint8_t)(rgb >> 8); p[2] = (uint8_t)rgb;
}

static void line(img *im, int x0, int y0, int x1, int y1, uint32_t rgb, int dash) {
    int dx = abs(x1 - x0), dy = -abs(y1 - y0), sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1, e = dx + dy, k = 0;
    for (;;) {
        if (!dash || (k++ / dash) % 2 == 0) put(im, x0, y0, rgb);
        if (x0 == x1 && y0 == y1) break;
        int e2 = 2 * e;
        if (e2 >= dy) { e += dy; x0 += sx; }
        if (e2 <= dx) { e += dx; y0 += sy; }
    }
}

static void box(img *im, int x, int y, int r, uint32_t rgb, bool fill) {
    for (int j = -r; j <= r; j++)
        for (int i = -r; i <= r; i++)
            if (fill || abs(i) == r || abs(j) == r) put(im, x + i, y + j, rgb);
}

static void ring(img *im, int x, int y, int r, uint32_t rgb) {
    for (int a = 0; a < 360; a += 2) {
        double t = a * M_PI / 180;
        put(im, x + (int)lround(r * cos(t)), y + (int)lround(r * sin(t)), rgb);
    }
}

/* 3x5 glyphs: digits, '.', '-', 'e' (bit 2 = left column, rows top to bottom) */
static const uint8_t FONT[13][5] = {
    { 7, 5, 5, 5, 7 }, { 2, 6, 2, 2, 7 }, { 7, 1, 7, 4, 7 }, { 7, 1, 7, 1, 7 }, { 5, 5, 7, 1, 1 },
    { 7, 4, 7, 1, 7 }, { 7, 4, 7, 5, 7 }, { 7, 1, 1, 1, 1 }, { 7, 5, 7, 5, 7 }, { 7, 5, 7, 1, 7 },
    { 0, 0, 0, 0, 2 }, { 0, 0, 7, 0, 0 }, { 0, 7, 5, 6, 7 },
};

static void text(img *im, int x, int y, const char *s, uint32_t rgb) {
    for (; *s; s++, x += 8) {
        int g = *s >= '0' && *s <= '9' ? *s - '0' : *s == '.' ? 10 : *s == '-' ? 11 : *s == 'e' ? 12 : -1;
        if (g < 0) continue;
        for (int r = 0; r < 5; r++)
            for (int c = 0; c < 3; c++)
                if (FONT[g][r] >> (2 - c) & 1)
                    for (int k = 0; k < 4; k++) put(im, x + 2 * c + (k & 1), y + 2 * r + (k >> 1), rgb);
    }
}

/* ---------------------------------------------------------------- PNG */

static uint32_t crc_table[256];

static uint32_t crc(uint32_t c, const uint8_t *p, size_t n) {
    if (!crc_table[1])
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t v = i;
            for (int k = 0; k < 8; k++) v = v & 1 ? 0xedb88320u ^ (v >> 1) : v >> 1;
            crc_table[i] = v;
        }
    c = ~c;
    for (size_t i = 0; i < n; i++) c = crc_table[(c ^ p[i]) & 0xff] ^ (c >> 8);
    return ~c;
}

static void be32(uint8_t *p, uint32_t v) { p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v; }

static bool chunk(FILE *f, const char *type, const uint8_t *data, uint32_t n) {
    uint8_t h[8];
    be32(h, n);
    memcpy(h + 4, type, 4);
    uint32_t c = crc(0, h + 4, 4);
    c = crc(c, data, n);
    uint8_t t[4];
    be32(t, c);
    return fwrite(h, 1, 8, f) == 8 && (n == 0 || fwrite(data, 1, n, f) == n) && fwrite(t, 1, 4, f) == 4;
}

static th_status write_png(const img *im, const char *path) {
    size_t row = 1 + (size_t)W * 3, raw_n = row * H;
    uint8_t *raw = malloc(raw_n);
    size_t nblk = (raw_n + 65534) / 65535, z_n = 2 + raw_n + 5 * nblk + 4;
    uint8_t *z = malloc(z_n);
    if (!raw || !z) { free(raw); free(z); return th_set_error(TH_ERR_NOMEM, "search plot: out of memory"); }
    for (int y = 0; y < H; y++) {
        raw[(size_t)y * row] = 0;   /* filter: none */
        memcpy(raw + (size_t)y * row + 1, im->px + (size_t)y * W * 3, (size_t)W * 3);
    }
    size_t o = 0;
    z[o++] = 0x78; z[o++] = 0x01;
    uint32_t a = 1, b = 0;
    for (size_t i = 0; i < raw_n; i++) { a = (a + raw[i]) % 65521; b = (b + a) % 65521; }
    for (size_t k = 0; k < nblk; k++) {
        size_t off = k * 65535, n = raw_n - off < 65535 ? raw_n - off : 65535;
        z[o++] = k + 1 == nblk;
        z[o++] = (uint8_t)n; z[o++] = (uint8_t)(n >> 8);
        z[o++] = (uint8_t)~n; z[o++] = (uint8_t)(~n >> 8);
        memcpy(z + o, raw + off, n);
        o += n;
    }
    be32(z + o, (b << 16) | a);
    o += 4;
    free(raw);
    FILE *f = fopen(path, "wb");
    if (!f) { free(z); return th_set_error(TH_ERR_IO, "search plot: cannot write %s", path); }
    uint8_t ihdr[13];
    be32(ihdr, W); be32(ihdr + 4, H);
    ihdr[8] = 8; ihdr[9] = 2; ihdr[10] = ihdr[11] = ihdr[12] = 0;
    bool ok = fwrite("\x89PNG\r\n\x1a\n", 1, 8, f) == 8 && chunk(f, "IHDR", ihdr, 13) && chunk(f, "IDAT", z, (uint32_t)o) &&
              chunk(f, "IEND", NULL, 0);
    free(z);
    if (fclose(f) != 0) ok = false;
    return ok ? TH_OK : th_set_error(TH_ERR_IO, "search plot: writing %s failed", path);
}

/* ---------------------------------------------------------------- the plot */

static int by_bpw(const void *x, const void *y) {
    const th_search_point *a = x, *b = y;
    return a->bpw < b->bpw ? -1 : a->bpw > b->bpw;
}

th_status th_search_plot(const th_search_result *r, const char *path) {
    if (!r || !r->n_points) return th_set_error(TH_ERR_ARG, "search plot: no points");
    double x0 = 1e30, x1 = -1e30, y0 = 1e30, y1 = -1e30;
    for (size_t i = 0; i < r->n_points; i++) {
        const th_search_point *p = &r->points[i];
        double g = log10(p->gate > 1e-7 ? p->gate : 1e-7);
        x0 = fmin(x0, p->bpw); x1 = fmax(x1, p->bpw);
        y0 = fmin(y0, g); y1 = fmax(y1, g);
    }
    if (r->gate_max > 0) { y0 = fmin(y0, log10(r->gate_max)); y1 = fmax(y1, log10(r->gate_max)); }
    x0 = floor(x0 - 0.25); x1 = ceil(x1 + 0.25);
    y0 = floor(y0); y1 = ceil(y1 + 1e-9);
    if (y1 <= y0) y1 = y0 + 1;
    img im = { calloc((size_t)W * H * 3, 1) };
    if (!im.px) return th_set_error(TH_ERR_NOMEM, "search plot: out of memory");
    memset(im.px, 255, (size_t)W * H * 3);
#define PX(v) (ML + (int)lround(((v) - x0) / (x1 - x0) * (W - ML - MR)))
#define PY(v) (H - MB - (int)lround(((v) - y0) / (y1 - y0) * (H - MT - MB)))
    line(&im, ML, H - MB, W - MR, H - MB, 0, 0);
    line(&im, ML, MT, ML, H - MB, 0, 0);
    char lab[32];
    for (double x = x0; x <= x1 + 1e-9; x += 1) {
        line(&im, PX(x), H - MB, PX(x), H - MB + 6, 0, 0);
        line(&im, PX(x), MT, PX(x), H - MB, 0xe0e0e0, 3);
        snprintf(lab, sizeof lab, "%.0f", x);
        text(&im, PX(x) - 4 * (int)strlen(lab), H - MB + 12, lab, 0);
    }
    for (double y = y0; y <= y1 + 1e-9; y += 1) {
        line(&im, ML - 6, PY(y), ML, PY(y), 0, 0);
        line(&im, ML, PY(y), W - MR, PY(y), 0xe0e0e0, 3);
        snprintf(lab, sizeof lab, "1e%.0f", y);
        text(&im, ML - 10 - 8 * (int)strlen(lab), PY(y) - 5, lab, 0);
    }
    if (r->gate_max > 0) line(&im, ML, PY(log10(r->gate_max)), W - MR, PY(log10(r->gate_max)), 0x808080, 6);
    th_search_point *v = malloc(r->n_points * sizeof *v);
    if (!v) { free(im.px); return th_set_error(TH_ERR_NOMEM, "search plot: out of memory"); }
    memcpy(v, r->points, r->n_points * sizeof *v);
    qsort(v, r->n_points, sizeof *v, by_bpw);
    int px = -1, py = -1;
    for (size_t i = 0; i < r->n_points; i++) {
        int x = PX(v[i].bpw), y = PY(log10(v[i].gate > 1e-7 ? v[i].gate : 1e-7));
        if (v[i].uniform) box(&im, x, y, 4, 0x2050d0, true);
        else box(&im, x, y, 2, 0x909090, true);
        if (v[i].frontier && !v[i].uniform) {
            if (px >= 0) line(&im, px, py, x, y, 0xd02020, 0);
            px = x; py = y;
        }
    }
    if (r->best.bytes) {
        int x = PX(r->best.bpw), y = PY(log10(r->best.gate > 1e-7 ? r->best.gate : 1e-7));
        ring(&im, x, y, 7, 0x10a010);
        ring(&im, x, y, 8, 0x10a010);
    }
#undef PX
#undef PY
    free(v);
    th_status s = write_png(&im, path);
    free(im.px);
    return s;
}
