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

/* ---------------------------------------------------------------- currencies */

static void test_currency(void **state)
{
    struct gfx *g = gfx_new("gmoney_currency");
    struct gate_payment_result r;
    struct og_error err = {0};
    char before[1024];

    (void)state;
    gfx_stock(g, "s1", 10);
    assert_int_equal(place(g, "E1", 1250, "EUR", false, "10 minutes", OG_OK, &err), GATE_PLACED);
    assert_int_equal(place(g, "J1", 1250, "JPY", false, "10 minutes", OG_OK, &err), GATE_PLACED);
    /* Without a currency: the default_currency setting's. */
    gfx_place(g, "D1", 1250, ITEMS, NULL, "10 minutes");
    assert_string_equal(gfx_text(g->sql, g->text, sizeof(g->text),
                                 "SELECT string_agg(order_no || ':' || currency, ',' ORDER BY "
                                 "order_no) FROM ordergate.orders",
                                 NULL),
                        "D1:USD,E1:EUR,J1:JPY");

    /* A code the database does not know: 22023, nothing written. */
    gfx_checksum(g->sql, before, sizeof(before));
    place(g, "Q1", 1250, "QQQ", false, "10 minutes", OG_ERR_ARG, &err);
    assert_string_equal(err.sqlstate, "22023");
    GFX_ASSERT_UNCHANGED(g, before);

    /* Another currency never claims: currency_mismatch, its exception for review, the order
     * unchanged. */
    struct gate_payment p = {.order_no = "E1",
                             .txn_no = "T-usd",
                             .amount_cents = 1250,
                             .channel = "card",
                             .currency = "USD"};
    assert_int_equal(pay(g, &p, &r), GATE_CURRENCY_MISMATCH);
    assert_int_equal(r.status, ORDER_PENDING);
    assert_string_equal(gfx_order_status(g, "E1"), "pending_payment");
    assert_string_equal(gfx_exception(g, "T-usd"),
                        "currency_mismatch|manual_review|open|1250|USD|E1");
    assert_int_equal(gfx_long(g->sql,
                              "SELECT count(*) FROM ordergate.payments WHERE txn_no = 'T-usd' AND "
                              "currency = 'USD' AND outcome = 'currency_mismatch'",
                              NULL),
                     1);
    /* An unknown payment currency: 22023, nothing written. */
    gfx_checksum(g->sql, before, sizeof(before));
    p.txn_no = "T-qqq";
    p.currency = "QQQ";
    assert_int_equal(gate_payment_claim(g->db, &p, &r, &err), OG_ERR_ARG);
    assert_string_equal(err.sqlstate, "22023");
    GFX_ASSERT_UNCHANGED(g, before);

    /* The order's own currency, named or not, pays. */
    p.txn_no = "T-eur";
    p.currency = "EUR";
    assert_int_equal(pay(g, &p, &r), GATE_PAID);
    assert_int_equal(gfx_pay(g, "J1", "T-jpy", 1250, &r), GATE_PAID);
    assert_int_equal(gfx_long(g->sql,
                              "SELECT count(*) FROM ordergate.payments WHERE txn_no = 'T-jpy' AND "
                              "currency = 'JPY'",
                              NULL),
                     1);
    gfx_reconcile_clean(g->sql);
    gfx_free(g);
}

/* ---------------------------------------------------------------- parts */

static void test_parts(void **state)
{
    struct gfx *g = gfx_new("gmoney_parts");
    struct gate_payment_result r;
    struct og_error err = {0};

    (void)state;
    gfx_stock(g, "s1", 10);
    assert_int_equal(place(g, "P1", 1000, "EUR", true, "10 minutes", OG_OK, &err), GATE_PLACED);
    assert_int_equal(place(g, "P2", 1000, "EUR", true, "10 minutes", OG_OK, &err), GATE_PLACED);
    assert_int_equal(place(g, "P3", 1000, "EUR", true, "-1 minute", OG_OK, &err), GATE_PLACED);
    assert_int_equal(place(g, "N1", 1000, "EUR", false, "10 minutes", OG_OK, &err), GATE_PLACED);

    /* A gift card, then a card for the rest: partial, then paid. */
    struct gate_payment gift = {
        .order_no = "P1", .txn_no = "T-gift", .amount_cents = 300, .channel = "gift_card"};
    assert_int_equal(pay(g, &gift, &r), GATE_PARTIAL);
    assert_int_equal(r.status, ORDER_PENDING);
    assert_int_equal(
        gfx_long(g->sql, "SELECT captured_cents FROM ordergate.orders WHERE order_no = 'P1'", NULL),
        300);
    assert_int_equal(
        gfx_long(g->sql, "SELECT count(*) FROM ordergate.exceptions WHERE order_no = 'P1'", NULL),
        0);
    assert_int_equal(pay(g, &gift, &r), GATE_DUPLICATE);
    assert_int_equal(r.first_outcome, GATE_PARTIAL);
    struct gate_payment card = {
        .order_no = "P1", .txn_no = "T-card", .amount_cents = 700, .channel = "card"};
    assert_int_equal(pay(g, &card, &r), GATE_PAID);
    assert_int_equal(r.status, ORDER_PAID);

    /* Beyond the amount: paid, and the excess is an exception with a refund request, automatic
     * within the currency's own limit (none set: every refund is reviewed). */
    gfx_exec(g->sql, "SELECT ordergate.set_setting('auto_refund_limit.EUR', '500')", NULL);
    gift.order_no = "P2";
    gift.txn_no = "T2-gift";
    gift.amount_cents = 600;
    assert_int_equal(pay(g, &gift, &r), GATE_PARTIAL);
    card.order_no = "P2";
    card.txn_no = "T2-card";
    card.amount_cents = 600;
    assert_int_equal(pay(g, &card, &r), GATE_OVERPAID);
    assert_int_equal(r.status, ORDER_PAID);
    assert_string_equal(gfx_order_status(g, "P2"), "paid");
    assert_string_equal(gfx_exception(g, "T2-card"), "overpaid|auto_refund|open|200|EUR|P2");

    /* A part of an order the cancel then claims: the part becomes a cancelled_part exception. */
    gift.order_no = "P3";
    gift.txn_no = "T3-gift";
    gift.amount_cents = 400;
    assert_int_equal(pay(g, &gift, &r), GATE_PARTIAL);
    assert_int_equal(gfx_cancel1(g, "P3", GATE_SRC_TIMEOUT_SCANNER), GATE_CANCELLED);
    assert_int_equal(
        gfx_long(g->sql,
                 "SELECT count(*) FROM ordergate.exceptions WHERE kind = 'cancelled_part' AND "
                 "txn_no = 'T3-gift' AND amount_cents = 400 AND currency = 'EUR'",
                 NULL),
        1);
    /* A part after the order closed is a late payment, as always. */
    gift.txn_no = "T3-late";
    assert_int_equal(pay(g, &gift, &r), GATE_LATE_PAYMENT);

    /* An order that does not allow parts: a short payment is amount_mismatch. */
    gift.order_no = "N1";
    gift.txn_no = "TN-gift";
    assert_int_equal(pay(g, &gift, &r), GATE_AMOUNT_MISMATCH);
    assert_string_equal(gfx_order_status(g, "N1"), "pending_payment");
    gfx_reconcile_clean(g->sql);
    gfx_free(g);
}

/* ---------------------------------------------------------------- staff */

static void test_staff_payment(void **state)
{
    struct gfx *g = gfx_new("gmoney_staff");
    struct gate_payment_result r;
    struct og_error err = {0};

    (void)state;
    gfx_stock(g, "s1", 10);
    gfx_place(g, "S1", 1000, ITEMS, NULL, "10 minutes");
    struct gate_payment p = {.order_no = "S1",
                             .txn_no = "cash-1",
                             .amount_cents = 1000,
                             .channel = "manual",
                             .operator_name = "alice",
                             .reason = "cash at the counter"};
    assert_int_equal(pay(g, &p, &r), GATE_PAID);
    assert_string_equal(gfx_text(g->sql, g->text, sizeof(g->text),
                                 "SELECT format('%s|%s|%s', source, actor, note) FROM "
                                 "ordergate.status_log WHERE order_no = 'S1'",
                                 NULL),
                        "manual_payment|alice|cash at the counter");
    assert_int_equal(gfx_long(g->sql,
                              "SELECT count(*) FROM ordergate.payments WHERE txn_no = 'cash-1' "
                              "AND operator = 'alice' AND reason = 'cash at the counter'",
                              NULL),
                     1);
    /* The client refuses half a staff payment or another channel before sending anything. */
    p.txn_no = "cash-2";
    p.channel = "card";
    assert_int_equal(gate_payment_claim(g->db, &p, &r, &err), OG_ERR_ARG);
    assert_string_equal(err.sqlstate, "");
    gfx_reconcile_clean(g->sql);
    gfx_free(g);
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
    assert_string_equal(gfx_order_status(g, "O1"), "pending_payment");

    /* duplicate: the same ref for the same order changes nothing. */
    gfx_checksum(g->sql, before, sizeof(before));
    assert_int_equal(begin(g, "O1", "ch-1", 60), GATE_DUPLICATE);
    GFX_ASSERT_UNCHANGED(g, before);
    /* Another order's ref: 22023, nothing written. */
    assert_int_equal(gate_begin_charge(g->db, "O2", "ch-1", 60, &outcome, NULL, 0, &err),
                     OG_ERR_ARG);
    assert_string_equal(err.sqlstate, "22023");
    /* Beyond max_pending_charge_seconds (3 days by default): 22023. */
    assert_int_equal(gate_begin_charge(g->db, "O2", "ch-2", 259201, &outcome, NULL, 0, &err),
                     OG_ERR_ARG);
    assert_string_equal(err.sqlstate, "22023");
    GFX_ASSERT_UNCHANGED(g, before);
    /* not_found: nothing recorded. */
    assert_int_equal(begin(g, "O-none", "ch-3", 60), GATE_NOT_FOUND);
    GFX_ASSERT_UNCHANGED(g, before);

    /* charge_failed: unknown ref and another order's are 22023, nothing written. */
    assert_int_equal(gate_charge_failed(g->db, "O1", "ch-unknown", &outcome, &err), OG_ERR_ARG);
    assert_string_equal(err.sqlstate, "22023");
    assert_int_equal(gate_charge_failed(g->db, "O2", "ch-1", &outcome, &err), OG_ERR_ARG);
    GFX_ASSERT_UNCHANGED(g, before);

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
    GFX_ASSERT_UNCHANGED(g, before);
    assert_int_equal(gfx_cancel1(g, "O1", GATE_SRC_TIMEOUT_SCANNER), GATE_CANCELLED);

    /* not_pending: the order is closed, nothing recorded. */
    gfx_checksum(g->sql, before, sizeof(before));
    assert_int_equal(begin(g, "O1", "ch-4", 60), GATE_NOT_PENDING);
    GFX_ASSERT_UNCHANGED(g, before);
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
    GFX_ASSERT_UNCHANGED(g, before);

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
    GFX_ASSERT_UNCHANGED(g, before);
    gfx_reconcile_clean(g->sql);
    gfx_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_currency, gfx_teardown),
        cmocka_unit_test_teardown(test_parts, gfx_teardown),
        cmocka_unit_test_teardown(test_staff_payment, gfx_teardown),
        cmocka_unit_test_teardown(test_charge_outcomes, gfx_teardown),
        cmocka_unit_test_teardown(test_charge_captured, gfx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
