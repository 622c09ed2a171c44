/* check.h — the tiny test harness every tests/test_*.c uses.
 * A test is a function; RUN(fn) runs it and prints "ok NAME" or "FAIL NAME"
 * (tests/run.sh counts those lines). CHECK records a failure and goes on;
 * SKIP("why") marks the current test skipped; TH_TEST picks tests by name.
 * Helpers for fixture paths. */
#ifndef TH_CHECK_H
#define TH_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_cur_failed, check_cur_skipped, check_total_failed;

#define CHECK(cond, ...) do { if (!(cond)) { check_cur_failed++; \
    fprintf(stderr, "  %s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
    fprintf(stderr, " " __VA_ARGS__); fputc('\n', stderr); } } while (0)

/* |a-b| <= tol */
#define CHECK_NEAR(a, b, tol) do { double a_ = (a), b_ = (b); CHECK(fabs(a_ - b_) <= (tol), \
    "%s=%.9g %s=%.9g tol %.3g", #a, a_, #b, b_, (double)(tol)); } while (0)

#define SKIP(...) do { check_cur_skipped = 1; printf("  skipped: " __VA_ARGS__); printf("\n"); return; } while (0)

/* TH_TEST=a,b,...: run only the tests of those names (unset or empty: all). */
static inline int check_selected(const char *name) {
    const char *f = getenv("TH_TEST");
    size_t n = strlen(name);
    if (!f || !*f) return 1;
    for (const char *p = f; (p = strstr(p, name)); p += n)
        if ((p == f || p[-1] == ',') && (p[n] == 0 || p[n] == ',')) return 1;
    return 0;
}

#define RUN(fn) do { if (!check_selected(#fn)) break; check_cur_failed = 0; check_cur_skipped = 0; fn(); \
    if (check_cur_skipped) { printf("SKIP %s\n", #fn); } \
    else if (check_cur_failed) { printf("FAIL %s\n", #fn); check_total_failed++; } \
    else { printf("ok %s\n", #fn); } \
    fflush(stdout); } while (0)

#define CHECK_DONE() (check_total_failed ? 1 : 0)

/* Path under the shared fixtures folder ($SHARED or ../shared). */
static inline const char *fixture(const char *rel) {
    static char buf[8][1024];
    static int slot;
    const char *root = getenv("SHARED");
    char *b = buf[slot++ & 7];
    snprintf(b, sizeof buf[0], "%s/fixtures/%s", root && *root ? root : "../shared", rel);
    return b;
}

/* The whole file at path, NUL-terminated (malloc'd; free with free()), its length in
 * *len when len is not NULL; NULL if it cannot be opened or read. */
static inline char *check_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) { free(b); b = NULL; }
    fclose(f);
    if (b) { b[n] = 0; if (len) *len = (size_t)n; }
    return b;
}

/* Path of the default model ($THESEUS_MODEL or models/SmolLM2-135M-Instruct.Q4_1.gguf). */
static inline const char *default_model_path(void) {
    const char *m = getenv("THESEUS_MODEL");
    return m && *m ? m : "models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

#endif
