/* test_bytes.c — th_bytes (core/bytes.h), the library's one growable byte buffer:
 * content always NUL-terminated (also an empty buffer that was only taken), growth
 * across many doublings, printf of long output, the limit and the sticky failure,
 * take resetting the buffer. */
#include "check.h"
#include "core/bytes.h"

static void test_empty_take_is_empty_string(void) {
    th_bytes b = { 0 };
    char *s = th_bytes_take(&b);
    CHECK(s && s[0] == 0, "an empty buffer takes as \"\"");
    free(s);
    th_bytes c = { 0 };
    th_bytes_put(&c, "", 0);
    CHECK(c.p && c.n == 0 && c.p[0] == 0, "put of nothing leaves a terminated empty text");
    th_bytes_free(&c);
}

static void test_growth_and_printf(void) {
    th_bytes b = { 0 };
    for (int i = 0; i < 10000; i++) th_bytes_printf(&b, "%d,", i % 10);
    CHECK(b.n == 20000 && !b.failed, "n=%zu", b.n);
    CHECK(b.p[b.n] == 0 && b.p[0] == '0' && b.p[19998] == '9', "content");
    char big[5000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    th_bytes_printf(&b, "[%s]", big);
    CHECK(b.n == 20000 + 5001 && b.p[20000] == '[' && b.p[b.n - 1] == ']' && b.p[b.n] == 0, "long printf");
    char *s = th_bytes_take(&b);
    CHECK(s && strlen(s) == 25001, "take");
    CHECK(b.p == NULL && b.n == 0, "take resets");
    free(s);
}

static void test_limit_is_sticky(void) {
    th_bytes b = { .limit = 10 };
    th_bytes_str(&b, "0123456789");
    CHECK(!b.failed && b.n == 10, "exactly the limit fits");
    th_bytes_str(&b, "a");
    CHECK(b.failed && b.n == 10, "past the limit fails");
    th_bytes_str(&b, "");
    CHECK(b.failed, "failure is sticky");
    CHECK(th_bytes_take(&b) == NULL, "a failed buffer takes as NULL");
    CHECK(b.limit == 10 && !b.failed, "take keeps the limit, clears the failure");
}

int main(void) {
    RUN(test_empty_take_is_empty_string);
    RUN(test_growth_and_printf);
    RUN(test_limit_is_sticky);
    return CHECK_DONE();
}
