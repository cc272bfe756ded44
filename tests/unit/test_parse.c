/* The strict command-line number parser: what it takes, what it refuses, and
 * that a refusal leaves the caller's value alone. */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
