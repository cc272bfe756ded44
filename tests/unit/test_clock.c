/* Timestamps of the message contract: what parses, what is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/clock.h"

static int64_t parse_ok(const char *s)
{
    int64_t ms = -1;
    assert_int_equal(clock_parse_iso(s, strlen(s), &ms), 0);
    return ms;
}

static void test_parse_utc(void **state)
{
    (void)state;
    assert_int_equal(parse_ok("1970-01-01T00:00:00Z"), 0);
    assert_int_equal(parse_ok("1970-01-01T00:00:00.001Z"), 1);
    assert_int_equal(parse_ok("2026-11-30T16:00:00.000Z"), INT64_C(1796054400000));
    /* Fractions are cut to the millisecond, not rounded up past a second. */
    assert_int_equal(parse_ok("2026-11-30T16:00:00.999999999Z"), INT64_C(1796054400999));
    assert_int_equal(parse_ok("2024-02-29T12:00:00.5Z"), INT64_C(1709208000500));
}

static void test_parse_offsets(void **state)
{
    (void)state;
    assert_int_equal(parse_ok("2026-11-30T17:00:00+01:00"), parse_ok("2026-11-30T16:00:00Z"));
    assert_int_equal(parse_ok("2026-11-30T10:30:00-05:30"), parse_ok("2026-11-30T16:00:00Z"));
}

static void test_parse_rejects(void **state)
{
    static const char *const bad[] = {
        "",
        "2026-11-30",
        "2026-11-30T16:00:00",             /* no zone */
        "2026-11-30 16:00:00Z",            /* space instead of T */
        "2026-13-01T00:00:00Z",            /* month */
        "2026-02-29T00:00:00Z",            /* not a leap year */
        "2026-11-31T00:00:00Z",            /* day */
        "2026-11-30T24:00:00Z",            /* hour */
        "2026-11-30T16:60:00Z",            /* minute */
        "2026-11-30T16:00:00.Z",           /* empty fraction */
        "2026-11-30T16:00:00Zjunk",        /* trailing bytes */
        "2026-11-30T16:00:00+2:00",        /* short offset */
        "2026-11-30T16:00:00.1234567890Z", /* ten fraction digits */
        "+2026-11-30T16:00:00Z",
    };
    int64_t ms;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (clock_parse_iso(bad[i], strlen(bad[i]), &ms) == 0)
            fail_msg("accepted '%s'", bad[i]);
    }
    assert_int_equal(clock_parse_iso(NULL, 0, &ms), -1);
    /* Length is honoured: a valid prefix of a longer buffer is not enough. */
    assert_int_equal(clock_parse_iso("2026-11-30T16:00:00Z", 19, &ms), -1);
}

static void test_format_roundtrip(void **state)
{
    char buf[32];
    int64_t values[] = {0, 1, 999, INT64_C(1796054400123), INT64_C(4102444799999)};

    (void)state;
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        clock_format_iso(values[i], buf, sizeof(buf));
        assert_int_equal(parse_ok(buf), values[i]);
    }
    assert_string_equal(clock_format_iso(INT64_C(1796054400123), buf, sizeof(buf)),
                        "2026-11-30T16:00:00.123Z");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_utc),
        cmocka_unit_test(test_parse_offsets),
        cmocka_unit_test(test_parse_rejects),
        cmocka_unit_test(test_format_roundtrip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
