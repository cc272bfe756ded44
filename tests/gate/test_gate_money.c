/* Currencies, payments in parts, payments taken by staff and charges pending at the deadline,
 * through the C client (gate_order_place, gate_payment_claim, gate_begin_charge,
 * gate_charge_failed) against the real schema: every new outcome with its side effects in SQL,
 * and every refusal of the database (22023: OG_ERR_ARG) with nothing written. One fresh
 * database per test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gate/gate_fixture.h"

#define ITEMS "[{\"sku\":\"s1\",\"qty\":1}]"

static char sbuf[4096];

#define ASSERT_UNCHANGED(g, before)                                                                \
    do {                                                                                           \
        char after_[1024];                                                                         \
        gfx_checksum((g)->sql, after_, sizeof(after_));                                            \
        assert_string_equal(before, after_);                                                       \
    } while (0)

static const char *order_status(struct gfx *g, const char *no)
{
    return gfx_text(g->sql, sbuf, sizeof(sbuf),
                    "SELECT coalesce((SELECT status FROM ordergate.orders WHERE order_no = $1), "
                    "'absent')",
                    no, NULL);
}

static enum gate_outcome place(struct gfx *g, const char *no, int64_t amount, const char *currency,
                               bool allow_partial, const char *expire_offset, enum og_status expect,
                               struct og_error *err)
{
    char when[64];
    enum gate_outcome outcome = GATE_UNKNOWN;
    struct gate_order o = {.order_no = no,
                           .amount_cents = amount,
                           .items_json = ITEMS,
                           .expire_at = gfx_ts(g, when, sizeof(when), expire_offset),
                           .currency = currency,
                           .allow_partial = allow_partial};

    og_error_clear(err);
    if (gate_order_place(g->db, &o, &outcome, err) != expect)
        fail_msg("place %s: %s (expected status %d)", no, err->msg, (int)expect);
    return outcome;
}

static enum gate_outcome pay(struct gfx *g, const struct gate_payment *p,
                             struct gate_payment_result *r)
{
    struct og_error err = {0};

    if (gate_payment_claim(g->db, p, r, &err) != OG_OK)
        fail_msg("claim_payment %s/%s: %s", p->order_no, p->txn_no, err.msg);
    return r->outcome;
}

static enum gate_outcome begin(struct gfx *g, const char *no, const char *ref, int seconds)
{
    struct og_error err = {0};
    enum gate_outcome outcome;

    if (gate_begin_charge(g->db, no, ref, seconds, &outcome, NULL, 0, &err) != OG_OK)
        fail_msg("begin_charge %s/%s: %s", no, ref, err.msg);
    return outcome;
}

static enum gate_outcome failed(struct gfx *g, const char *no, const char *ref)
{
    struct og_error err = {0};
    enum gate_outcome outcome;

    if (gate_charge_failed(g->db, no, ref, &outcome, &err) != OG_OK)
        fail_msg("charge_failed %s/%s: %s", no, ref, err.msg);
    return outcome;
}

/* ---------------------------------------------------------------- charges */

static void test_charge_outcomes(void **state)
{
    struct gfx *g = gfx_new("gmoney_charge");
    struct og_error err = {0};
    enum gate_outcome outcome;
    char before[1024], bound[64] = "", expect[64];

    (void)state;
    gfx_stock(g, "s1", 10);
    gfx_place(g, "O1", 1000, ITEMS, NULL, "-1 minute");
    gfx_place(g, "O2", 1000, ITEMS, NULL, "10 minutes");

    /* pending: bound_at is now() + seconds on the database clock; the order is protected. */
    assert_int_equal(
        gate_begin_charge(g->db, "O1", "ch-1", 3600, &outcome, bound, sizeof(bound), &err), OG_OK);
    assert_int_equal(outcome, GATE_PENDING);
    assert_true(bound[0] != '\0');
    gfx_text(g->sql, expect, sizeof(expect),
             "SELECT (abs(extract(epoch FROM $1::timestamptz - now()) - 3600) < 5)::text", bound,
             NULL);
    assert_string_equal(expect, "true");
    assert_int_equal(gfx_long(g->sql,
                              "SELECT count(*) FROM ordergate.orders WHERE order_no = 'O1' AND "
                              "charge_until = $1::timestamptz",
                              bound, NULL),
                     1);
    /* Past its deadline but a charge is pending: the timeout cancel does not claim it. */
    assert_int_equal(gfx_cancel1(g, "O1", GATE_SRC_TIMEOUT_SCANNER), GATE_NOT_DUE);
    assert_string_equal(order_status(g, "O1"), "pending_payment");

    /* duplicate: the same ref for the same order changes nothing. */
    gfx_checksum(g->sql, before, sizeof(before));
    assert_int_equal(begin(g, "O1", "ch-1", 60), GATE_DUPLICATE);
    ASSERT_UNCHANGED(g, before);
    /* Another order's ref: 22023, nothing written. */
    assert_int_equal(gate_begin_charge(g->db, "O2", "ch-1", 60, &outcome, NULL, 0, &err),
                     OG_ERR_ARG);
    assert_string_equal(err.sqlstate, "22023");
    /* Beyond max_pending_charge_seconds (3 days by default): 22023. */
    assert_int_equal(gate_begin_charge(g->db, "O2", "ch-2", 259201, &outcome, NULL, 0, &err),
                     OG_ERR_ARG);
    assert_string_equal(err.sqlstate, "22023");
    ASSERT_UNCHANGED(g, before);
    /* not_found: nothing recorded. */
    assert_int_equal(begin(g, "O-none", "ch-3", 60), GATE_NOT_FOUND);
    ASSERT_UNCHANGED(g, before);

    /* charge_failed: unknown ref and another order's are 22023, nothing written. */
    assert_int_equal(gate_charge_failed(g->db, "O1", "ch-unknown", &outcome, &err), OG_ERR_ARG);
    assert_string_equal(err.sqlstate, "22023");
    assert_int_equal(gate_charge_failed(g->db, "O2", "ch-1", &outcome, &err), OG_ERR_ARG);
    ASSERT_UNCHANGED(g, before);

    /* failed: the last pending charge of an order past its deadline: the order is due again
     * (charge_until NULL) and the timeout cancel claims it. */
    assert_int_equal(failed(g, "O1", "ch-1"), GATE_FAILED);
    assert_int_equal(gfx_long(g->sql,
                              "SELECT count(*) FROM ordergate.charges WHERE charge_ref = 'ch-1' "
                              "AND state = 'failed'",
                              NULL),
                     1);
    assert_int_equal(gfx_long(g->sql,
                              "SELECT count(*) FROM ordergate.orders WHERE order_no = 'O1' AND "
                              "charge_until IS NULL",
                              NULL),
                     1);
    gfx_checksum(g->sql, before, sizeof(before));
    assert_int_equal(failed(g, "O1", "ch-1"), GATE_DUPLICATE);
    ASSERT_UNCHANGED(g, before);
    assert_int_equal(gfx_cancel1(g, "O1", GATE_SRC_TIMEOUT_SCANNER), GATE_CANCELLED);

    /* not_pending: the order is closed, nothing recorded. */
    gfx_checksum(g->sql, before, sizeof(before));
    assert_int_equal(begin(g, "O1", "ch-4", 60), GATE_NOT_PENDING);
    ASSERT_UNCHANGED(g, before);
    gfx_reconcile_clean(g->sql);
    gfx_free(g);
}

/* A charge captured by claim_payment with its charge_ref: the payment decides the order, the
 * charge is captured, and its failure reported afterwards is already_captured. */
static void test_charge_captured(void **state)
{
    struct gfx *g = gfx_new("gmoney_capture");
    struct gate_payment_result r;
    struct og_error err = {0};
    char before[1024];

    (void)state;
    gfx_stock(g, "s1", 10);
    gfx_place(g, "O1", 1000, ITEMS, NULL, "-1 minute");
    gfx_place(g, "O2", 1000, ITEMS, NULL, "10 minutes");
    assert_int_equal(begin(g, "O1", "ch-1", 3600), GATE_PENDING);

    /* A capture naming another order's charge: 22023, nothing written. */
    struct gate_payment wrong = {.order_no = "O2",
                                 .txn_no = "T-wrong",
                                 .amount_cents = 1000,
                                 .channel = "card",
                                 .charge_ref = "ch-1"};
    gfx_checksum(g->sql, before, sizeof(before));
    assert_int_equal(gate_payment_claim(g->db, &wrong, &r, &err), OG_ERR_ARG);
    assert_string_equal(err.sqlstate, "22023");
    wrong.order_no = "O1";
    wrong.charge_ref = "ch-never";
    assert_int_equal(gate_payment_claim(g->db, &wrong, &r, &err), OG_ERR_ARG);
    ASSERT_UNCHANGED(g, before);

    struct gate_payment p = {.order_no = "O1",
                             .txn_no = "T1",
                             .amount_cents = 1000,
                             .channel = "card",
                             .charge_ref = "ch-1"};
    assert_int_equal(pay(g, &p, &r), GATE_PAID);
    assert_int_equal(r.status, ORDER_PAID);
    assert_int_equal(gfx_long(g->sql,
                              "SELECT count(*) FROM ordergate.charges WHERE charge_ref = 'ch-1' "
                              "AND state = 'captured' AND txn_no = 'T1'",
                              NULL),
                     1);
    assert_int_equal(gfx_long(g->sql,
                              "SELECT count(*) FROM ordergate.payments WHERE txn_no = 'T1' AND "
                              "charge_ref = 'ch-1'",
                              NULL),
                     1);
    gfx_checksum(g->sql, before, sizeof(before));
    assert_int_equal(failed(g, "O1", "ch-1"), GATE_ALREADY_CAPTURED);
    assert_int_equal(pay(g, &p, &r), GATE_DUPLICATE);
    assert_int_equal(r.first_outcome, GATE_PAID);
    ASSERT_UNCHANGED(g, before);
    gfx_reconcile_clean(g->sql);
    gfx_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_charge_outcomes, gfx_teardown),
        cmocka_unit_test_teardown(test_charge_captured, gfx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
