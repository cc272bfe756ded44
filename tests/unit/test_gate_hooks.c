/* gate_claim_cancel_isolating (common/gate_hooks.c) against a gate chosen here: the build links
 * this test with --wrap=gate_claim_cancel. The fake gate cancels every order, except that a list
 * holding an order named "H..." fails whole, as a claim does when a registered hook raises for
 * one of its orders; "X..." fails with a lost connection instead. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/gate.h"

enum og_status __wrap_gate_claim_cancel(struct db *db, const char *const *order_nos, size_t n,
                                        enum gate_source source, struct gate_cancel_row *rows,
                                        size_t *nrows, struct og_error *err);

static int claims;

enum og_status __wrap_gate_claim_cancel(struct db *db, const char *const *order_nos, size_t n,
                                        enum gate_source source, struct gate_cancel_row *rows,
                                        size_t *nrows, struct og_error *err)
{
    size_t out = 0;

    (void)db;
    assert_int_equal(source, GATE_SRC_TIMEOUT_SCANNER);
    claims++;
    *nrows = 0;
    for (size_t i = 0; i < n; i++) {
        if (order_nos[i][0] == 'H') {
            og_error_set(err, OG_ERR_DB, false,
                         "hook shop.on_cancelled(text[],text): no stock row for order %s",
                         order_nos[i]);
            snprintf(err->sqlstate, sizeof(err->sqlstate), "P0001");
            snprintf(err->object, sizeof(err->object), "ordergate.hooks");
            return OG_ERR_DB;
        }
        if (order_nos[i][0] == 'X') {
            og_error_set(err, OG_ERR_DB, true, "server closed the connection unexpectedly");
            snprintf(err->sqlstate, sizeof(err->sqlstate), "08006");
            return OG_ERR_DB;
        }
    }
    /* One row per distinct order, as the gate answers. */
    for (size_t i = 0; i < n; i++) {
        bool seen = false;
        for (size_t j = 0; j < out && !seen; j++)
            seen = strcmp(rows[j].order_no, order_nos[i]) == 0;
        if (seen)
            continue;
        snprintf(rows[out].order_no, sizeof(rows[out].order_no), "%s", order_nos[i]);
        rows[out].outcome = GATE_CANCELLED;
        rows[out].status = ORDER_CANCELLED;
        out++;
    }
    *nrows = out;
    return OG_OK;
}

/* n orders "O-<i>", those listed in bad renamed "H-<i>". */
static size_t make_orders(char (*buf)[16], const char **nos, size_t n, const size_t *bad,
                          size_t nbad)
{
    for (size_t i = 0; i < n; i++) {
        bool h = false;
        for (size_t j = 0; j < nbad; j++)
            h |= bad[j] == i;
        snprintf(buf[i], sizeof(buf[i]), "%s-%04zu", h ? "H" : "O", i);
        nos[i] = buf[i];
    }
    return n;
}

static size_t count(const struct gate_cancel_row *rows, size_t n, enum gate_outcome o)
{
    size_t c = 0;

    for (size_t i = 0; i < n; i++)
        c += rows[i].outcome == o;
    return c;
}

static void test_one_failing_order_is_isolated(void **state)
{
    static char buf[500][16];
    const char *nos[500];
    struct gate_cancel_row rows[500];
    struct og_error err = {0}, hook_err = {0};
    char hook[GATE_HOOK_NAME_MAX];
    size_t nrows = 0, bad[] = {317};

    (void)state;
    claims = 0;
    make_orders(buf, nos, 500, bad, 1);
    assert_int_equal(gate_claim_cancel_isolating(NULL, nos, 500, GATE_SRC_TIMEOUT_SCANNER, rows,
                                                 &nrows, &hook_err, &err),
                     OG_OK);
    assert_int_equal(nrows, 500);
    assert_int_equal(count(rows, nrows, GATE_CANCELLED), 499);
    assert_int_equal(count(rows, nrows, GATE_HOOK_FAILED), 1);
    for (size_t i = 0; i < nrows; i++)
        if (rows[i].outcome == GATE_HOOK_FAILED)
            assert_string_equal(rows[i].order_no, "H-0317");
    /* The whole list, then two parts per level down to the one order: 1 + 2 * ceil(log2 500). */
    assert_true(claims <= 1 + 2 * (int)ceil(log2(500.0)));
    assert_true(gate_hook_failed(&hook_err, hook, sizeof(hook)));
    assert_string_equal(hook, "shop.on_cancelled(text[],text)");
    assert_string_equal(hook_err.sqlstate, "P0001");
}

static void test_several_failing_orders_and_duplicates(void **state)
{
    static char buf[64][16];
    const char *nos[70];
    struct gate_cancel_row rows[70];
    struct og_error err = {0}, hook_err = {0};
    size_t nrows = 0, bad[] = {0, 13, 63};

    (void)state;
    claims = 0;
    make_orders(buf, nos, 64, bad, 3);
    /* Duplicates of a failing and of a good order, out of order. */
    nos[64] = buf[13];
    nos[65] = buf[5];
    assert_int_equal(gate_claim_cancel_isolating(NULL, nos, 66, GATE_SRC_TIMEOUT_SCANNER, rows,
                                                 &nrows, &hook_err, &err),
                     OG_OK);
    assert_int_equal(nrows, 64); /* one row per distinct order */
    assert_int_equal(count(rows, nrows, GATE_CANCELLED), 61);
    assert_int_equal(count(rows, nrows, GATE_HOOK_FAILED), 3);
    assert_true(claims <= GATE_ISOLATE_CLAIMS_MAX);
}

static void test_hook_failing_every_order_is_an_error(void **state)
{
    static char buf[300][16];
    const char *nos[300];
    struct gate_cancel_row rows[300];
    struct og_error err = {0}, hook_err = {0};
    size_t nrows = 7, bad[300];

    (void)state;
    for (size_t i = 0; i < 300; i++)
        bad[i] = i;
    claims = 0;
    make_orders(buf, nos, 300, bad, 300);
    assert_int_equal(gate_claim_cancel_isolating(NULL, nos, 300, GATE_SRC_TIMEOUT_SCANNER, rows,
                                                 &nrows, &hook_err, &err),
                     OG_ERR_DB);
    assert_int_equal(nrows, 0);
    assert_true(gate_hook_failed(&err, NULL, 0));
    assert_string_equal(err.sqlstate, "P0001");
    /* Bounded: never one claim per order. */
    assert_int_equal(claims, GATE_ISOLATE_CLAIMS_MAX);
}

static void test_single_order_failing_is_a_row(void **state)
{
    const char *nos[2] = {"H-1", "H-1"};
    struct gate_cancel_row rows[2];
    struct og_error err = {0}, hook_err = {0};
    size_t nrows = 0;

    (void)state;
    claims = 0;
    assert_int_equal(gate_claim_cancel_isolating(NULL, nos, 2, GATE_SRC_TIMEOUT_SCANNER, rows,
                                                 &nrows, &hook_err, &err),
                     OG_OK);
    assert_int_equal(nrows, 1);
    assert_string_equal(rows[0].order_no, "H-1");
    assert_int_equal(rows[0].outcome, GATE_HOOK_FAILED);
    assert_int_equal(claims, 1);
    assert_true(gate_hook_failed(&hook_err, NULL, 0));
}

static void test_other_errors_pass_through(void **state)
{
    const char *nos[4] = {"O-1", "H-2", "O-3", "X-4"};
    struct gate_cancel_row rows[4];
    struct og_error err = {0}, hook_err = {0};
    size_t nrows = 9;

    (void)state;
    /* A lost connection while bisecting is the caller's to retry, not a hook failure. */
    assert_int_equal(gate_claim_cancel_isolating(NULL, nos, 4, GATE_SRC_TIMEOUT_SCANNER, rows,
                                                 &nrows, &hook_err, &err),
                     OG_ERR_DB);
    assert_int_equal(nrows, 0);
    assert_false(gate_hook_failed(&err, NULL, 0));
    assert_true(err.retriable);
    assert_string_equal(err.sqlstate, "08006");
}

static void test_hook_failed_reads_the_error(void **state)
{
    struct og_error err = {0};
    char hook[GATE_HOOK_NAME_MAX];

    (void)state;
    og_error_set(&err, OG_ERR_DB, false, "hook mall.x(text[],text): boom: really");
    assert_false(gate_hook_failed(&err, hook, sizeof(hook))); /* no object: the gate's own */
    snprintf(err.object, sizeof(err.object), "ordergate.orders");
    assert_false(gate_hook_failed(&err, hook, sizeof(hook)));
    snprintf(err.object, sizeof(err.object), "ordergate.hooks");
    assert_true(gate_hook_failed(&err, hook, sizeof(hook)));
    assert_string_equal(hook, "mall.x(text[],text)");
    og_error_set(&err, OG_ERR_DB, false, "something else");
    assert_false(gate_hook_failed(&err, NULL, 0)); /* og_error_set clears the object */
    snprintf(err.object, sizeof(err.object), "ordergate.hooks");
    assert_true(gate_hook_failed(&err, hook, sizeof(hook)));
    assert_string_equal(hook, "unknown");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_failing_order_is_isolated),
        cmocka_unit_test(test_several_failing_orders_and_duplicates),
        cmocka_unit_test(test_hook_failing_every_order_is_an_error),
        cmocka_unit_test(test_single_order_failing_is_a_row),
        cmocka_unit_test(test_other_errors_pass_through),
        cmocka_unit_test(test_hook_failed_reads_the_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
