/* Array literals for array parameters: every element comes back as written. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/pgarray.h"

static void test_empty(void **state)
{
    struct pgarray a;

    (void)state;
    pgarray_init(&a);
    assert_string_equal(pgarray_str(&a), "{}");
    /* Asking for the literal does not start the array: appends still do. */
    assert_true(pgarray_append(&a, "x"));
    assert_string_equal(pgarray_str(&a), "{\"x\"}");
    pgarray_free(&a);
    assert_null(a.s);
}

static void test_plain(void **state)
{
    struct pgarray a;

    (void)state;
    pgarray_init(&a);
    assert_true(pgarray_append(&a, "ORD-1"));
    assert_true(pgarray_append(&a, "ORD-2"));
    assert_string_equal(pgarray_str(&a), "{\"ORD-1\",\"ORD-2\"}");
    assert_int_equal(a.n, 2);
    pgarray_free(&a);
}

static void test_escaping(void **state)
{
    struct pgarray a;

    (void)state;
    pgarray_init(&a);
    assert_true(pgarray_append(&a, "a\"b"));
    assert_true(pgarray_append(&a, "back\\slash"));
    assert_true(pgarray_append(&a, "x,y"));
    assert_true(pgarray_append(&a, "{brace}"));
    assert_true(pgarray_append(&a, " spaced "));
    assert_string_equal(pgarray_str(&a),
                        "{\"a\\\"b\",\"back\\\\slash\",\"x,y\",\"{brace}\",\" spaced \"}");
    pgarray_free(&a);
}

/* The empty string and the word NULL are values; only a NULL pointer is SQL
 * NULL. */
static void test_null_and_empty(void **state)
{
    struct pgarray a;

    (void)state;
    pgarray_init(&a);
    assert_true(pgarray_append(&a, ""));
    assert_true(pgarray_append(&a, NULL));
    assert_true(pgarray_append(&a, "NULL"));
    assert_string_equal(pgarray_str(&a), "{\"\",NULL,\"NULL\"}");
    pgarray_free(&a);
}

static void test_len_and_int(void **state)
{
    struct pgarray a;

    (void)state;
    pgarray_init(&a);
    assert_true(pgarray_append_len(&a, "12345", 2));
    assert_true(pgarray_append_int(&a, INT64_MIN));
    assert_true(pgarray_append_int(&a, 0));
    assert_string_equal(pgarray_str(&a), "{\"12\",-9223372036854775808,0}");
    pgarray_free(&a);
}

/* Growth past the first allocation keeps every element. */
static void test_many(void **state)
{
    struct pgarray a;
    const char *s;

    (void)state;
    pgarray_init(&a);
    for (int i = 0; i < 5000; i++)
        assert_true(pgarray_append(&a, i % 2 ? "\\\"" : "ab"));
    s = pgarray_str(&a);
    assert_non_null(s);
    /* 2500 x "ab" (4 bytes) and 2500 x "\\\"" (6 bytes), 4999 commas, 2 braces. */
    assert_int_equal(strlen(s), 2500 * 4 + 2500 * 6 + 4999 + 2);
    assert_true(s[0] == '{' && s[strlen(s) - 1] == '}');
    pgarray_free(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty),       cmocka_unit_test(test_plain),
        cmocka_unit_test(test_escaping),    cmocka_unit_test(test_null_and_empty),
        cmocka_unit_test(test_len_and_int), cmocka_unit_test(test_many),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
