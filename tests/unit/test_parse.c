/* The strict number parser: what it takes, what it refuses (each form by name), the one
 * wording of a refusal, and that a refusal leaves the caller's value alone. */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/parse.h"

#define UNTOUCHED 4242

static void test_long_valid(void **state)
{
    long v = UNTOUCHED;

    (void)state;
    assert_int_equal(parse_long("0", 0, 10, &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(parse_long("7", 0, 10, &v), 0);
    assert_int_equal(v, 7);
    assert_int_equal(parse_long("1000000", 1, 10000000, &v), 0);
    assert_int_equal(v, 1000000);
    /* Leading zeros are still base 10, not octal. */
    assert_int_equal(parse_long("010", 0, 100, &v), 0);
    assert_int_equal(v, 10);
    assert_int_equal(parse_long("-0", -1, 1, &v), 0);
    assert_int_equal(v, 0);
}

static void test_long_bounds_inclusive(void **state)
{
    char max[32], min[32];
    long v = UNTOUCHED;

    (void)state;
    snprintf(max, sizeof(max), "%ld", LONG_MAX);
    snprintf(min, sizeof(min), "%ld", LONG_MIN);
    assert_int_equal(parse_long("1", 1, 99, &v), 0);
    assert_int_equal(v, 1);
    assert_int_equal(parse_long("99", 1, 99, &v), 0);
    assert_int_equal(v, 99);
    assert_int_equal(parse_long("5", 5, 5, &v), 0);
    assert_int_equal(v, 5);
    assert_int_equal(parse_long(max, 0, LONG_MAX, &v), 0);
    assert_true(v == LONG_MAX);
    assert_int_equal(parse_long(min, LONG_MIN, 0, &v), 0);
    assert_true(v == LONG_MIN);
}

static void test_long_out_of_bounds(void **state)
{
    long v = UNTOUCHED;

    (void)state;
    errno = 0;
    assert_int_equal(parse_long("0", 1, 99, &v), -1);
    assert_int_equal(errno, ERANGE);
    errno = 0;
    assert_int_equal(parse_long("100", 1, 99, &v), -1);
    assert_int_equal(errno, ERANGE);
    assert_int_equal(parse_long("-1", 0, 10, &v), -1);
    assert_int_equal(parse_long("6", 5, 5, &v), -1);
    /* Bounds the wrong way round admit nothing. */
    errno = 0;
    assert_int_equal(parse_long("5", 10, 1, &v), -1);
    assert_int_equal(errno, EINVAL);
    assert_int_equal(v, UNTOUCHED);
}

static void test_long_overflow(void **state)
{
    char above[32];
    long v = UNTOUCHED;

    (void)state;
    snprintf(above, sizeof(above), "%lu", (unsigned long)LONG_MAX + 1);
    errno = 0;
    assert_int_equal(parse_long("99999999999999999999", LONG_MIN, LONG_MAX, &v), -1);
    assert_int_equal(errno, ERANGE);
    errno = 0;
    assert_int_equal(parse_long("-99999999999999999999", LONG_MIN, LONG_MAX, &v), -1);
    assert_int_equal(errno, ERANGE);
    errno = 0;
    assert_int_equal(parse_long(above, LONG_MIN, LONG_MAX, &v), -1);
    assert_int_equal(errno, ERANGE);
    assert_int_equal(v, UNTOUCHED);
}

static void test_long_negative(void **state)
{
    long v = UNTOUCHED;

    (void)state;
    assert_int_equal(parse_long("-5", -10, 10, &v), 0);
    assert_int_equal(v, -5);
    assert_int_equal(parse_long("-10", -10, 10, &v), 0);
    assert_int_equal(v, -10);
    v = UNTOUCHED;
    assert_int_equal(parse_long("-11", -10, 10, &v), -1);
    /* A negative number where only counts make sense is refused, not wrapped. */
    assert_int_equal(parse_long("-1", 1, LONG_MAX, &v), -1);
    assert_int_equal(v, UNTOUCHED);
}

static void test_long_rejects_text(void **state)
{
    static const char *const bad[] = {
        "",    "12x", " 12", "12 ", "\t12",  "12\n", "0x10", "+12", "-",   "--1",
        "- 1", "abc", "1e3", "1.5", "1,000", "x12",  "+",    " ",   "1 2", "\xef\xbc\x91",
    };
    long v = UNTOUCHED;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        errno = 0;
        if (parse_long(bad[i], LONG_MIN, LONG_MAX, &v) == 0)
            fail_msg("accepted '%s'", bad[i]);
        if (errno != EINVAL)
            fail_msg("'%s': errno %d, not EINVAL", bad[i], errno);
    }
    errno = 0;
    assert_int_equal(parse_long(NULL, LONG_MIN, LONG_MAX, &v), -1);
    assert_int_equal(errno, EINVAL);
    assert_int_equal(v, UNTOUCHED);
}

static void test_int(void **state)
{
    int v = UNTOUCHED;

    (void)state;
    assert_int_equal(parse_int("16", 1, 16, &v), 0);
    assert_int_equal(v, 16);
    assert_int_equal(parse_int("1", 1, 16, &v), 0);
    assert_int_equal(v, 1);
    assert_int_equal(parse_int("-3", -3, 3, &v), 0);
    assert_int_equal(v, -3);
    assert_int_equal(parse_int("2147483647", 0, INT_MAX, &v), 0);
    assert_int_equal(v, INT_MAX);
    assert_int_equal(parse_int("-2147483648", INT_MIN, 0, &v), 0);
    assert_int_equal(v, INT_MIN);

    v = UNTOUCHED;
    assert_int_equal(parse_int("0", 1, 16, &v), -1);
    assert_int_equal(parse_int("17", 1, 16, &v), -1);
    /* Fits a long but not an int: refused, never truncated. */
    errno = 0;
    assert_int_equal(parse_int("2147483648", INT_MIN, INT_MAX, &v), -1);
    assert_int_equal(errno, ERANGE);
    assert_int_equal(parse_int("-2147483649", INT_MIN, INT_MAX, &v), -1);
    assert_int_equal(parse_int("4294967297", INT_MIN, INT_MAX, &v), -1);
    assert_int_equal(parse_int("99999999999999999999", INT_MIN, INT_MAX, &v), -1);
    assert_int_equal(parse_int("", 0, 10, &v), -1);
    assert_int_equal(parse_int(NULL, 0, 10, &v), -1);
    assert_int_equal(parse_int("12x", 0, 100, &v), -1);
    assert_int_equal(parse_int(" 12", 0, 100, &v), -1);
    assert_int_equal(parse_int("0x10", 0, 100, &v), -1);
    assert_int_equal(v, UNTOUCHED);
}

/* Asserts parse_int64 refuses s within [min, max] with the uniform message. */
static void int64_refused(const char *s, int64_t min, int64_t max, const char *message)
{
    struct og_error err = {0};
    int64_t v = UNTOUCHED;

    if (parse_int64("--batch-size", s, min, max, &v, &err) != OG_ERR_ARG)
        fail_msg("accepted \"%s\"", s != NULL ? s : "(null)");
    assert_int_equal(v, UNTOUCHED);
    if (strcmp(err.msg, message) != 0)
        fail_msg("\"%s\": message '%s', expected '%s'", s != NULL ? s : "(null)", err.msg, message);
}

static void test_int64_refused_forms(void **state)
{
    (void)state;
    int64_refused("", 1, 10000, "--batch-size: expected an integer in 1..10000, got \"\"");
    int64_refused(NULL, 1, 10000, "--batch-size: expected an integer in 1..10000, got \"\"");
    int64_refused(" 12", 1, 10000, "--batch-size: expected an integer in 1..10000, got \" 12\"");
    int64_refused("12 ", 1, 10000, "--batch-size: expected an integer in 1..10000, got \"12 \"");
    int64_refused("+12", 1, 10000, "--batch-size: expected an integer in 1..10000, got \"+12\"");
    int64_refused("1e3", 1, 10000, "--batch-size: expected an integer in 1..10000, got \"1e3\"");
    int64_refused("abc", 1, 10000, "--batch-size: expected an integer in 1..10000, got \"abc\"");
    /* Out of the caller's bounds, on either side. */
    int64_refused("0", 1, 10000, "--batch-size: expected an integer in 1..10000, got \"0\"");
    int64_refused("10001", 1, 10000,
                  "--batch-size: expected an integer in 1..10000, got \"10001\"");
    /* Overflow of int64 itself, whatever the bounds. */
    int64_refused("9223372036854775808", INT64_MIN, INT64_MAX,
                  "--batch-size: expected an integer in -9223372036854775808..9223372036854775807, "
                  "got \"9223372036854775808\"");
    int64_refused("-9223372036854775809", INT64_MIN, INT64_MAX,
                  "--batch-size: expected an integer in -9223372036854775808..9223372036854775807, "
                  "got \"-9223372036854775809\"");
}

static void test_int64_accepted(void **state)
{
    struct og_error err = {0};
    int64_t v = 0;

    (void)state;
    assert_int_equal(parse_int64("x", "12", 1, 10000, &v, &err), OG_OK);
    assert_int_equal(v, 12);
    assert_int_equal(parse_int64(NULL, "9223372036854775807", 0, INT64_MAX, &v, &err), OG_OK);
    assert_true(v == INT64_MAX);
    assert_int_equal(parse_int64(NULL, "-9223372036854775808", INT64_MIN, 0, &v, &err), OG_OK);
    assert_true(v == INT64_MIN);
    /* Without a name the message has no prefix. */
    assert_int_equal(parse_int64(NULL, "x", 0, 9, &v, &err), OG_ERR_ARG);
    assert_string_equal(err.msg, "expected an integer in 0..9, got \"x\"");
}

static void test_duration(void **state)
{
    static const struct {
        const char *s;
        int64_t seconds;
    } good[] = {{"90s", 90}, {"15m", 900}, {"2h", 7200}, {"1d", 86400},
                {"45", 45},  {"10s", 10},  {"5m", 300},  {"3650d", 3650 * INT64_C(86400)}};
    static const char *const bad[] = {
        "",     " 5m", "5m ", "+5m", "-5m", "5 m",   "5x",
        "m",    "5mm", "1e3", "0s",  "0",   "3651d", "99999999999999999999d",
        "250ms"};
    struct og_error err = {0};
    int64_t v;

    (void)state;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        v = -1;
        if (parse_duration("--expire-in", good[i].s, 1, INT64_C(3650) * 86400, &v, &err) != OG_OK)
            fail_msg("refused \"%s\": %s", good[i].s, err.msg);
        assert_true(v == good[i].seconds);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        v = UNTOUCHED;
        if (parse_duration("--expire-in", bad[i], 1, INT64_C(3650) * 86400, &v, &err) == OG_OK)
            fail_msg("accepted \"%s\"", bad[i]);
        assert_int_equal(v, UNTOUCHED);
    }
    assert_int_equal(parse_duration("--expire-in", "5 m", 1, INT64_C(3650) * 86400, &v, &err),
                     OG_ERR_ARG);
    assert_string_equal(err.msg, "--expire-in: expected a duration in 1s..3650d (e.g. 90s, 15m, "
                                 "2h, 1d), got \"5 m\"");
    /* Zero is a duration when the caller allows it. */
    assert_int_equal(parse_duration(NULL, "0m", 0, 60, &v, &err), OG_OK);
    assert_int_equal(v, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_long_valid),
        cmocka_unit_test(test_long_bounds_inclusive),
        cmocka_unit_test(test_long_out_of_bounds),
        cmocka_unit_test(test_long_overflow),
        cmocka_unit_test(test_long_negative),
        cmocka_unit_test(test_long_rejects_text),
        cmocka_unit_test(test_int),
        cmocka_unit_test(test_int64_refused_forms),
        cmocka_unit_test(test_int64_accepted),
        cmocka_unit_test(test_duration),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
