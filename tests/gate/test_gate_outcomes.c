/* Every outcome of every gate function, through the C client against the
 * real schema, with each side effect checked in SQL: stock, coupon state,
 * status_log (source, idempotency key, actor), exceptions, payments, outbox.
 * A call that must change nothing is checked against a checksum of every
 * table. One fresh database per test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gate/gate_fixture.h"

static long available(struct gfx *g, const char *sku)
{
    return gfx_long(g->sql, "SELECT available FROM ordergate.inventory WHERE sku = $1", sku, NULL);
}

static const char *coupon_state(struct gfx *g, const char *id)
{
    return gfx_text(g->sql, g->text, sizeof(g->text),
                    "SELECT state FROM ordergate.coupons WHERE coupon_id = $1", id, NULL);
}

static long log_rows(struct gfx *g, const char *no)
{
    return gfx_long(g->sql, "SELECT count(*) FROM ordergate.status_log WHERE order_no = $1", no,
                    NULL);
}

/* The one status_log row of an order as "from>to|source|key|actor|note". */
static const char *log_row(struct gfx *g, const char *no)
{
    assert_int_equal(log_rows(g, no), 1);
    return gfx_text(g->sql, g->text, sizeof(g->text),
                    "SELECT format('%s>%s|%s|%s|%s|%s', from_status, to_status, source, "
                    "idempotency_key, actor, coalesce(note, '-')) "
                    "FROM ordergate.status_log WHERE order_no = $1",
                    no, NULL);
}

static long outbox_rows(struct gfx *g, const char *no, const char *type)
{
    return gfx_long(g->sql,
                    "SELECT count(*) FROM ordergate.outbox WHERE order_no = $1 AND event_type = $2",
                    no, type, NULL);
}

static long outbox_all(struct gfx *g, const char *no)
{
    return gfx_long(g->sql, "SELECT count(*) FROM ordergate.outbox WHERE order_no = $1", no, NULL);
}

static const char *payment_outcome(struct gfx *g, const char *txn)
{
    return gfx_text(g->sql, g->text, sizeof(g->text),
                    "SELECT coalesce((SELECT outcome FROM ordergate.payments WHERE txn_no = $1), "
                    "'absent')",
                    txn, NULL);
}

/* ---------------------------------------------------------------- place_order */

static void test_place_outcomes(void **state)
{
    struct gfx *g = gfx_new("gout_place");
    char before[1024], when[64];
    enum gate_outcome outcome;
    struct og_error err = {0};
    PGresult *res;

    (void)state;
    gfx_stock(g, "s1", 10);
    gfx_stock(g, "s2", 5);
    gfx_coupon(g, "c1");
    gfx_ts(g, when, sizeof(when), "10 minutes");

    /* placed: the real success word of the schema is "placed". Repeated skus
     * are summed into one line. */
    assert_int_equal(gate_place(g->db, "o1", 1000,
                                "[{\"sku\":\"s1\",\"qty\":2},{\"sku\":\"s2\",\"qty\":1},"
                                "{\"sku\":\"s1\",\"qty\":1}]",
                                "c1", when, &outcome, &err),
                     OG_OK);
    assert_int_equal(outcome, GATE_PLACED);
    assert_string_equal(gfx_order_status(g, "o1"), "pending_payment");
    assert_int_equal(gfx_long(g->sql,
                              "SELECT count(*) FROM ordergate.orders WHERE order_no = 'o1' AND "
                              "amount_cents = 1000 AND coupon_id = 'c1' AND expire_at = $1 AND "
                              "original_expire_at = expire_at",
                              when, NULL),
                     1);
    assert_string_equal(gfx_text(g->sql, g->text, sizeof(g->text),
                                 "SELECT string_agg(sku || ':' || qty, ',' ORDER BY sku) "
                                 "FROM ordergate.order_items WHERE order_no = 'o1'",
                                 NULL),
                        "s1:3,s2:1");
    assert_int_equal(available(g, "s1"), 7);
    assert_int_equal(available(g, "s2"), 4);
    assert_string_equal(coupon_state(g, "c1"), "locked");
    /* Placing is not a transition: no log row, no event. */
    assert_int_equal(log_rows(g, "o1"), 0);
    assert_int_equal(outbox_all(g, "o1"), 0);

    /* The word travels unchanged through plain SQL too (other languages). */
    res =
        PQexec(g->sql, "SELECT ordergate.place_order('o-raw', 100, '[{\"sku\":\"s1\",\"qty\":1}]',"
                       " NULL, now() + interval '1 hour')");
    assert_string_equal(gfx_sqlstate(res), "");
    assert_string_equal(PQgetvalue(res, 0, 0), "placed");
    PQclear(res);
    assert_int_equal(available(g, "s1"), 6);

    gfx_checksum(g->sql, before, sizeof(before));

    /* duplicate: same order number, even with other items and no coupon. */
    assert_int_equal(
        gate_place(g->db, "o1", 5, "[{\"sku\":\"s2\",\"qty\":1}]", NULL, when, &outcome, &err),
        OG_OK);
    assert_int_equal(outcome, GATE_DUPLICATE);
    GFX_ASSERT_UNCHANGED(g, before);

    /* coupon_unavailable: c1 is locked by o1; an unknown coupon likewise. */
    assert_int_equal(
        gate_place(g->db, "o2", 1000, "[{\"sku\":\"s1\",\"qty\":1}]", "c1", when, &outcome, &err),
        OG_OK);
    assert_int_equal(outcome, GATE_COUPON_UNAVAILABLE);
    assert_int_equal(gate_place(g->db, "o2", 1000, "[{\"sku\":\"s1\",\"qty\":1}]", "c-none", when,
                                &outcome, &err),
                     OG_OK);
    assert_int_equal(outcome, GATE_COUPON_UNAVAILABLE);
    GFX_ASSERT_UNCHANGED(g, before);

    /* out_of_stock: one unit short on one line of two. */
    assert_int_equal(gate_place(g->db, "o3", 1000,
                                "[{\"sku\":\"s1\",\"qty\":1},{\"sku\":\"s2\",\"qty\":5}]", NULL,
                                when, &outcome, &err),
                     OG_OK);
    assert_int_equal(outcome, GATE_OUT_OF_STOCK);
    /* ... also when the shortage only appears once repeated lines are summed. */
    assert_int_equal(gate_place(g->db, "o3", 1000,
                                "[{\"sku\":\"s2\",\"qty\":3},{\"sku\":\"s2\",\"qty\":2}]", NULL,
                                when, &outcome, &err),
                     OG_OK);
    assert_int_equal(outcome, GATE_OUT_OF_STOCK);
    /* An unknown sku is out_of_stock (schema/README.md, place_order), and
     * changes nothing either. */
    assert_int_equal(gate_place(g->db, "o4", 1000, "[{\"sku\":\"no-such-sku\",\"qty\":1}]", NULL,
                                when, &outcome, &err),
                     OG_OK);
    assert_int_equal(outcome, GATE_OUT_OF_STOCK);
    GFX_ASSERT_UNCHANGED(g, before);

    /* The last units can be sold: exactly enough is not out of stock. */
    assert_int_equal(
        gate_place(g->db, "o5", 1000, "[{\"sku\":\"s2\",\"qty\":4}]", NULL, when, &outcome, &err),
        OG_OK);
    assert_int_equal(outcome, GATE_PLACED);
    assert_int_equal(available(g, "s2"), 0);

    /* A cancelled order frees its coupon for a new order. */
    assert_string_equal(gfx_text(g->sql, g->text, sizeof(g->text),
                                 "SELECT outcome FROM ordergate.close_order('o1', 'ops', 'test')",
                                 NULL),
                        "cancelled");
    assert_int_equal(
        gate_place(g->db, "o6", 1000, "[{\"sku\":\"s1\",\"qty\":1}]", "c1", when, &outcome, &err),
        OG_OK);
    assert_int_equal(outcome, GATE_PLACED);
    assert_string_equal(coupon_state(g, "c1"), "locked");
    gfx_reconcile_clean(g->sql);
    gfx_free(g);
}

/* ---------------------------------------------------------------- claim_cancel */

/* One batch meets every outcome, with duplicates in the array: one row per
 * distinct order, the right word and status for each, and side effects for
 * the winners only. */
static void test_cancel_outcomes(void **state)
{
    struct gfx *g = gfx_new("gout_cancel");
    const char *batch[] = {"A", "P", "C", "F", "X", "B", "A", "X", "P"};
    struct gate_cancel_row rows[9];
    size_t nrows = 0;
    struct og_error err = {0};
    char before[1024];
    int seen[6] = {0};

    (void)state;
    gfx_stock(g, "s1", 100);
    gfx_stock(g, "s2", 100);
    gfx_coupon(g, "cA");
    gfx_coupon(g, "cP");
    gfx_place(g, "A", 1000, "[{\"sku\":\"s1\",\"qty\":3},{\"sku\":\"s2\",\"qty\":1}]", "cA",
              "-1 minute");
    gfx_place(g, "B", 2000, "[{\"sku\":\"s1\",\"qty\":2}]", NULL, "-1 second");
    gfx_place(g, "P", 3000, "[{\"sku\":\"s2\",\"qty\":5}]", "cP", "-1 minute");
    gfx_place(g, "C", 4000, "[{\"sku\":\"s2\",\"qty\":7}]", NULL, "-1 minute");
    gfx_place(g, "F", 5000, "[{\"sku\":\"s1\",\"qty\":11}]", NULL, "1 hour");
    /* P: paid after its expiry, before any cancel (the payment wins). */
    assert_int_equal(gfx_pay(g, "P", "txn-P", 3000, NULL), GATE_PAID);
    /* C: cancelled earlier by the consumer. */
    assert_int_equal(gfx_cancel1(g, "C", GATE_SRC_TIMEOUT_CONSUMER), GATE_CANCELLED);
    assert_int_equal(available(g, "s1"), 100 - 3 - 2 - 11);
    assert_int_equal(available(g, "s2"), 100 - 1 - 5);

    assert_int_equal(
        gate_claim_cancel(g->db, batch, 9, GATE_SRC_TIMEOUT_SCANNER, rows, &nrows, &err), OG_OK);
    assert_int_equal(nrows, 6);
    for (size_t i = 0; i < nrows; i++) {
        const char *no = rows[i].order_no;
        const char *at = strchr("APCFXB", no[0]);
        assert_true(strlen(no) == 1 && at != NULL);
        seen[at - "APCFXB"]++;
        switch (no[0]) {
        case 'A':
        case 'B':
            assert_int_equal(rows[i].outcome, GATE_CANCELLED);
            assert_int_equal(rows[i].status, ORDER_CANCELLED);
            break;
        case 'P':
            assert_int_equal(rows[i].outcome, GATE_ALREADY_PAID);
            assert_int_equal(rows[i].status, ORDER_PAID);
            break;
        case 'C':
            assert_int_equal(rows[i].outcome, GATE_ALREADY_CANCELLED);
            assert_int_equal(rows[i].status, ORDER_CANCELLED);
            break;
        case 'F':
            assert_int_equal(rows[i].outcome, GATE_NOT_DUE);
            assert_int_equal(rows[i].status, ORDER_PENDING);
            break;
        case 'X':
            assert_int_equal(rows[i].outcome, GATE_NOT_FOUND);
            assert_int_equal(rows[i].status, ORDER_STATUS_NONE);
            break;
        }
    }
    for (int k = 0; k < 6; k++)
        assert_int_equal(seen[k], 1);

    /* Winners: stock back, coupon back, one log row, one event each. */
    assert_int_equal(available(g, "s1"), 100 - 11);
    assert_int_equal(available(g, "s2"), 100 - 5);
    assert_string_equal(coupon_state(g, "cA"), "available");
    assert_string_equal(coupon_state(g, "cP"), "used");
    assert_string_equal(log_row(g, "A"),
                        "pending_payment>cancelled|timeout_scanner|A|" GFX_APP "|-");
    assert_string_equal(log_row(g, "B"),
                        "pending_payment>cancelled|timeout_scanner|B|" GFX_APP "|-");
    assert_string_equal(log_row(g, "C"),
                        "pending_payment>cancelled|timeout_consumer|C|" GFX_APP "|-");
    assert_int_equal(outbox_rows(g, "A", "order_cancelled"), 1);
    assert_int_equal(outbox_all(g, "A"), 1);
    assert_int_equal(outbox_rows(g, "B", "order_cancelled"), 1);
    assert_string_equal(
        gfx_text(g->sql, g->text, sizeof(g->text),
                 "SELECT format('%s|%s|%s|%s', payload->>'order_no', "
                 "payload->>'source', payload->>'amount_cents', "
                 "payload->>'coupon_id') FROM ordergate.outbox WHERE order_no = 'A'",
                 NULL),
        "A|timeout_scanner|1000|cA");
    /* Losers: nothing written for them by this call. */
    assert_int_equal(log_rows(g, "F"), 0);
    assert_int_equal(outbox_all(g, "F"), 0);
    assert_string_equal(gfx_order_status(g, "F"), "pending_payment");
    assert_int_equal(outbox_all(g, "C"), 1);
    assert_string_equal(log_row(g, "P"),
                        "pending_payment>paid|payment_callback|txn-P|" GFX_APP "|-");
    assert_int_equal(outbox_all(g, "P"), 1);
    assert_int_equal(log_rows(g, "X"), 0);

    /* The same batch again (a redelivered message): every winner is now
     * already_cancelled and nothing at all changes. */
    gfx_checksum(g->sql, before, sizeof(before));
    assert_int_equal(
        gate_claim_cancel(g->db, batch, 9, GATE_SRC_TIMEOUT_CONSUMER, rows, &nrows, &err), OG_OK);
    assert_int_equal(nrows, 6);
    for (size_t i = 0; i < nrows; i++)
        if (rows[i].order_no[0] == 'A' || rows[i].order_no[0] == 'B')
            assert_int_equal(rows[i].outcome, GATE_ALREADY_CANCELLED);
    GFX_ASSERT_UNCHANGED(g, before);
    gfx_reconcile_clean(g->sql);
    gfx_free(g);
}

/* An empty batch is a valid no-op; the same through plain SQL. */
static void test_cancel_empty(void **state)
{
    struct gfx *g = gfx_new("gout_empty");
    struct gate_cancel_row row;
    size_t nrows = 42;
    struct og_error err = {0};
    char before[1024];

    (void)state;
    gfx_stock(g, "s1", 10);
    gfx_place(g, "E1", 100, "[{\"sku\":\"s1\",\"qty\":1}]", NULL, "-1 minute");
    gfx_checksum(g->sql, before, sizeof(before));
    assert_int_equal(
        gate_claim_cancel(g->db, NULL, 0, GATE_SRC_TIMEOUT_CONSUMER, NULL, &nrows, &err), OG_OK);
    assert_int_equal(nrows, 0);
    assert_int_equal(
        gate_claim_cancel(g->db, NULL, 0, GATE_SRC_TIMEOUT_SCANNER, &row, &nrows, &err), OG_OK);
    assert_int_equal(nrows, 0);
    assert_int_equal(
        gfx_long(g->sql, "SELECT count(*) FROM ordergate.claim_cancel('{}', 'timeout_scanner')",
                 NULL),
        0);
    GFX_ASSERT_UNCHANGED(g, before);
    gfx_free(g);
}

/* Several orders of the same SKUs in one batch: every quantity comes back
 * (an UPDATE ... FROM with repeated keys would apply only one of them). */
static void test_cancel_same_sku_batch(void **state)
{
    struct gfx *g = gfx_new("gout_samesku");
    const char *nos[8] = {"H1", "H2", "H3", "H4", "H5", "H6", "H7", "H8"};
    struct gate_cancel_row rows[8];
    size_t nrows = 0;
    struct og_error err = {0};
    char coupon[16], items[128];

    (void)state;
    gfx_stock(g, "hot", 1000);
    gfx_stock(g, "warm", 1000);
    for (int i = 0; i < 8; i++) {
        snprintf(coupon, sizeof(coupon), "cp%d", i);
        gfx_coupon(g, coupon);
        snprintf(items, sizeof(items),
                 "[{\"sku\":\"hot\",\"qty\":%d},{\"sku\":\"warm\",\"qty\":1}]", i + 1);
        gfx_place(g, nos[i], 100 + i, items, i % 2 ? coupon : NULL, "-5 seconds");
    }
    assert_int_equal(available(g, "hot"), 1000 - 36);
    assert_int_equal(available(g, "warm"), 1000 - 8);
    assert_int_equal(
        gate_claim_cancel(g->db, nos, 8, GATE_SRC_TIMEOUT_CONSUMER, rows, &nrows, &err), OG_OK);
    assert_int_equal(nrows, 8);
    for (size_t i = 0; i < nrows; i++)
        assert_int_equal(rows[i].outcome, GATE_CANCELLED);
    assert_int_equal(available(g, "hot"), 1000);
    assert_int_equal(available(g, "warm"), 1000);
    assert_int_equal(gfx_long(g->sql,
                              "SELECT count(*) FROM ordergate.coupons WHERE state <> "
                              "'available'",
                              NULL),
                     0);
    assert_int_equal(gfx_long(g->sql,
                              "SELECT count(*) FROM ordergate.status_log WHERE source = "
                              "'timeout_consumer' AND idempotency_key = order_no",
                              NULL),
                     8);
    assert_int_equal(gfx_long(g->sql,
                              "SELECT count(DISTINCT order_no) FROM ordergate.outbox "
                              "WHERE event_type = 'order_cancelled'",
                              NULL),
                     8);
    assert_int_equal(gfx_long(g->sql, "SELECT count(*) FROM ordergate.outbox", NULL), 8);
    gfx_reconcile_clean(g->sql);
    gfx_free(g);
}

/* ---------------------------------------------------------------- claim_payment */

static void test_payment_paid_and_duplicate(void **state)
{
    struct gfx *g = gfx_new("gout_paid");
    struct gate_payment_result r;
    char before[1024];

    (void)state;
    gfx_stock(g, "s1", 10);
    gfx_coupon(g, "c1");
    gfx_place(g, "O1", 1999, "[{\"sku\":\"s1\",\"qty\":4}]", "c1", "15 minutes");

    assert_int_equal(gfx_pay(g, "O1", "T1", 1999, &r), GATE_PAID);
    assert_int_equal(r.status, ORDER_PAID);
    assert_string_equal(gfx_order_status(g, "O1"), "paid");
    assert_string_equal(coupon_state(g, "c1"), "used");
    assert_int_equal(available(g, "s1"), 6); /* sold: stays taken */
    assert_string_equal(log_row(g, "O1"), "pending_payment>paid|payment_callback|T1|" GFX_APP "|-");
    assert_int_equal(outbox_rows(g, "O1", "order_paid"), 1);
    assert_int_equal(outbox_all(g, "O1"), 1);
    assert_string_equal(gfx_text(g->sql, g->text, sizeof(g->text),
                                 "SELECT format('%s|%s|%s', payload->>'txn_no', "
                                 "payload->>'amount_cents', payload->>'channel') "
                                 "FROM ordergate.outbox WHERE order_no = 'O1'",
                                 NULL),
                        "T1|1999|card");
    assert_string_equal(payment_outcome(g, "T1"), "paid");
    assert_int_equal(gfx_long(g->sql, "SELECT count(*) FROM ordergate.exceptions", NULL), 0);

    /* The same callback again: duplicate, first outcome paid, no change. A
     * duplicate with another amount or order number is still the same txn. */
    gfx_checksum(g->sql, before, sizeof(before));
    assert_int_equal(gfx_pay(g, "O1", "T1", 1999, &r), GATE_DUPLICATE);
    assert_int_equal(r.first_outcome, GATE_PAID);
    assert_int_equal(r.status, ORDER_PAID);
    assert_int_equal(gfx_pay(g, "O1", "T1", 5, &r), GATE_DUPLICATE);
    assert_int_equal(r.first_outcome, GATE_PAID);
    assert_int_equal(gfx_pay(g, "O-other", "T1", 1999, &r), GATE_DUPLICATE);
    assert_int_equal(r.first_outcome, GATE_PAID);
    GFX_ASSERT_UNCHANGED(g, before);

    /* A cancel after the payment cannot overwrite it. */
    assert_int_equal(gfx_cancel1(g, "O1", GATE_SRC_TIMEOUT_CONSUMER), GATE_ALREADY_PAID);
    GFX_ASSERT_UNCHANGED(g, before);
    gfx_reconcile_clean(g->sql);
    gfx_free(g);
}

/* The staff acts through the C client: a released order is answered already_released by the
 * cancel paths (a final answer, as already_paid), not_pending by an amendment or a deadline
 * change, and its payment pays it; the outcome words and the status released parse. */
static void test_staff_acts(void **state)
{
    struct gfx *g = gfx_new("gout_staff");
    struct gate_payment_result r;
    struct og_error err = {0};
    enum gate_outcome out;
    enum order_status st;
    char when[64], expire[64];

    (void)state;
    gfx_stock(g, "s1", 10);
    gfx_place(g, "R1", 1500, "[{\"sku\":\"s1\",\"qty\":2}]", NULL, "-1 minute");
    gfx_place(g, "A1", 900, "[{\"sku\":\"s1\",\"qty\":1}]", NULL, "1 hour");

    assert_int_equal(gate_order_release(g->db, "R1", "ops", "cash on delivery", &out, &st, &err),
                     OG_OK);
    assert_int_equal(out, GATE_RELEASED);
    assert_int_equal(st, ORDER_RELEASED);
    assert_string_equal(order_status_str(st), "released");
    assert_int_equal(gfx_cancel1(g, "R1", GATE_SRC_TIMEOUT_CONSUMER), GATE_ALREADY_RELEASED);
    assert_int_equal(gate_close(g->db, "R1", "ops", "x", &out, &st, &err), OG_OK);
    assert_int_equal(out, GATE_ALREADY_RELEASED);
    assert_int_equal(gate_order_amend(g->db, "R1", 1500, "[{\"sku\":\"s1\",\"qty\":1}]", NULL,
                                      "ops", &out, &st, &err),
                     OG_OK);
    assert_int_equal(out, GATE_NOT_PENDING);
    assert_int_equal(st, ORDER_RELEASED);
    assert_int_equal(available(g, "s1"), 7); /* kept, as a paid order's */
    assert_int_equal(gfx_pay(g, "R1", "TR1", 1500, &r), GATE_PAID);
    assert_int_equal(r.status, ORDER_PAID);

    /* Amend and move the deadline of a pending order; bad input is refused before sending. */
    assert_int_equal(gate_order_amend(g->db, "A1", 1200, "[{\"sku\":\"s1\",\"qty\":3}]",
                                      "{\"note\": 1}", "ops", &out, &st, &err),
                     OG_OK);
    assert_int_equal(out, GATE_AMENDED);
    assert_int_equal(available(g, "s1"), 5);
    assert_int_equal(gate_order_amend(g->db, "A1", 1200, "[]", "[1]", "ops", &out, &st, &err),
                     OG_ERR_ARG);
    og_error_clear(&err);
    assert_int_equal(gate_order_amend(g->db, "A1", 0, "[]", NULL, "ops", &out, &st, &err),
                     OG_ERR_ARG);
    og_error_clear(&err);
    gfx_ts(g, when, sizeof(when), "2 hours");
    assert_int_equal(
        gate_order_set_deadline(g->db, "A1", when, "ops", &out, expire, sizeof(expire), &err),
        OG_OK);
    assert_int_equal(out, GATE_SET);
    assert_true(expire[0] != '\0');
    assert_int_equal(gate_order_set_deadline(g->db, "A1", "", "ops", &out, NULL, 0, &err),
                     OG_ERR_ARG);
    og_error_clear(&err);
    assert_int_equal(gate_order_release(g->db, "A1", "ops", "", &out, &st, &err), OG_ERR_ARG);
    og_error_clear(&err);
    assert_int_equal(gfx_pay(g, "A1", "TA1", 1200, &r), GATE_PAID);
    gfx_reconcile_clean(g->sql);
    gfx_free(g);
}

/* First claim wins, the clock does not: an order past expire_at that no
 * cancel has claimed yet is paid, and the late cancel then loses. */
static void test_payment_after_expiry_before_cancel(void **state)
{
    struct gfx *g = gfx_new("gout_payexp");
    struct gate_payment_result r;

    (void)state;
    gfx_stock(g, "s1", 10);
    gfx_coupon(g, "c1");
    gfx_place(g, "O1", 700, "[{\"sku\":\"s1\",\"qty\":2}]", "c1", "-10 minutes");
    assert_int_equal(gfx_long(g->sql,
                              "SELECT count(*) FROM ordergate.orders WHERE expire_at < "
                              "now() AND status = 'pending_payment'",
                              NULL),
                     1);
    assert_int_equal(gfx_pay(g, "O1", "T1", 700, &r), GATE_PAID);
    assert_int_equal(r.status, ORDER_PAID);
    assert_int_equal(gfx_cancel1(g, "O1", GATE_SRC_TIMEOUT_SCANNER), GATE_ALREADY_PAID);
    assert_string_equal(gfx_order_status(g, "O1"), "paid");
    assert_string_equal(coupon_state(g, "c1"), "used");
    assert_int_equal(available(g, "s1"), 8);
    assert_int_equal(log_rows(g, "O1"), 1);
    assert_int_equal(outbox_rows(g, "O1", "order_cancelled"), 0);
    gfx_reconcile_clean(g->sql);
    gfx_free(g);
}

/* A payment that loses to a cancel: exception, refund policy by amount
 * (<= the configured limit: auto_refund, above: manual_review), the order
 * stays cancelled, stock and coupon stay returned, a duplicate of the late
 * callback changes nothing. */
static void test_payment_late(void **state)
{
    struct gfx *g = gfx_new("gout_late");
    struct gate_payment_result r;
    char before[1024];
    const char *nos[] = {"L1", "L2", "L3", "L4"};
    struct gate_cancel_row rows[4];
    size_t nrows;
    struct og_error err = {0};

    (void)state;
    gfx_stock(g, "s1", 10);
    gfx_coupon(g, "c1");
    gfx_place(g, "L1", 4999, "[{\"sku\":\"s1\",\"qty\":1}]", "c1", "-1 minute");
    gfx_place(g, "L2", 5000, "[{\"sku\":\"s1\",\"qty\":1}]", NULL, "-1 minute");
    gfx_place(g, "L3", 5001, "[{\"sku\":\"s1\",\"qty\":1}]", NULL, "-1 minute");
    gfx_place(g, "L4", 150, "[{\"sku\":\"s1\",\"qty\":1}]", NULL, "-1 minute");
    assert_int_equal(
        gate_claim_cancel(g->db, nos, 4, GATE_SRC_TIMEOUT_CONSUMER, rows, &nrows, &err), OG_OK);
    assert_int_equal(nrows, 4);
    assert_int_equal(available(g, "s1"), 10);
    /* The limit is the schema's default setting. */
    assert_int_equal(gfx_long(g->sql,
                              "SELECT value::bigint FROM ordergate.settings WHERE key = "
                              "'auto_refund_limit_cents'",
                              NULL),
                     5000);

    assert_int_equal(gfx_pay(g, "L1", "T1", 4999, &r), GATE_LATE_PAYMENT);
    assert_int_equal(r.status, ORDER_CANCELLED);
    assert_string_equal(gfx_exception(g, "T1"), "late_payment|auto_refund|open|4999|USD|L1");
    assert_int_equal(outbox_rows(g, "L1", "refund_requested"), 1);
    assert_int_equal(outbox_rows(g, "L1", "reconciliation_alert"), 0);

    assert_int_equal(gfx_pay(g, "L2", "T2", 5000, &r), GATE_LATE_PAYMENT);
    assert_string_equal(gfx_exception(g, "T2"), "late_payment|auto_refund|open|5000|USD|L2");

    assert_int_equal(gfx_pay(g, "L3", "T3", 5001, &r), GATE_LATE_PAYMENT);
    assert_string_equal(gfx_exception(g, "T3"), "late_payment|manual_review|open|5001|USD|L3");
    assert_int_equal(outbox_rows(g, "L3", "reconciliation_alert"), 1);
    assert_int_equal(outbox_rows(g, "L3", "refund_requested"), 0);

    /* The limit is configurable: at 100 cents, 150 goes to a person. */
    assert_string_equal(gfx_text(g->sql, g->text, sizeof(g->text),
                                 "SELECT ordergate.set_setting('auto_refund_limit_cents', '100')",
                                 NULL),
                        "5000");
    assert_int_equal(gfx_pay(g, "L4", "T4", 150, &r), GATE_LATE_PAYMENT);
    assert_string_equal(gfx_exception(g, "T4"), "late_payment|manual_review|open|150|USD|L4");

    /* Never reopened, nothing taken again, no log row for the loser. */
    for (int i = 0; i < 4; i++) {
        assert_string_equal(gfx_order_status(g, nos[i]), "cancelled");
        assert_int_equal(log_rows(g, nos[i]), 1);
        assert_int_equal(outbox_rows(g, nos[i], "order_paid"), 0);
        assert_int_equal(outbox_rows(g, nos[i], "order_cancelled"), 1);
    }
    assert_string_equal(coupon_state(g, "c1"), "available");
    assert_int_equal(available(g, "s1"), 10);
    assert_string_equal(payment_outcome(g, "T1"), "late_payment");

    /* Duplicate of a late callback: first outcome late_payment, no second
     * exception, no second refund. */
    gfx_checksum(g->sql, before, sizeof(before));
    assert_int_equal(gfx_pay(g, "L1", "T1", 4999, &r), GATE_DUPLICATE);
    assert_int_equal(r.first_outcome, GATE_LATE_PAYMENT);
    assert_int_equal(r.status, ORDER_CANCELLED);
    GFX_ASSERT_UNCHANGED(g, before);
    gfx_reconcile_clean(g->sql);
    gfx_free(g);
}

static void test_payment_double_mismatch_not_found(void **state)
{
    struct gfx *g = gfx_new("gout_double");
    struct gate_payment_result r;
    char before[1024];

    (void)state;
    gfx_stock(g, "s1", 10);
    gfx_place(g, "D1", 3000, "[{\"sku\":\"s1\",\"qty\":1}]", NULL, "10 minutes");
    gfx_place(g, "M1", 3000, "[{\"sku\":\"s1\",\"qty\":1}]", NULL, "10 minutes");
    assert_int_equal(gfx_pay(g, "D1", "T1", 3000, &r), GATE_PAID);

    /* double_payment: a second transaction for a paid order, small and large. */
    assert_int_equal(gfx_pay(g, "D1", "T2", 3000, &r), GATE_DOUBLE_PAYMENT);
    assert_int_equal(r.status, ORDER_PAID);
    assert_string_equal(gfx_exception(g, "T2"), "double_payment|auto_refund|open|3000|USD|D1");
    assert_int_equal(outbox_rows(g, "D1", "refund_requested"), 1);
    assert_int_equal(gfx_pay(g, "D1", "T3", 90000, &r), GATE_DOUBLE_PAYMENT);
    assert_string_equal(gfx_exception(g, "T3"), "double_payment|manual_review|open|90000|USD|D1");
    assert_int_equal(outbox_rows(g, "D1", "reconciliation_alert"), 1);
    assert_int_equal(log_rows(g, "D1"), 1);
    assert_int_equal(outbox_rows(g, "D1", "order_paid"), 1);
    assert_string_equal(payment_outcome(g, "T2"), "double_payment");

    /* amount_mismatch: the order stays pending, a person looks. */
    assert_int_equal(gfx_pay(g, "M1", "T4", 2999, &r), GATE_AMOUNT_MISMATCH);
    assert_int_equal(r.status, ORDER_PENDING);
    assert_string_equal(gfx_order_status(g, "M1"), "pending_payment");
    assert_string_equal(gfx_exception(g, "T4"), "amount_mismatch|manual_review|open|2999|USD|M1");
    assert_int_equal(outbox_rows(g, "M1", "reconciliation_alert"), 1);
    assert_int_equal(log_rows(g, "M1"), 0);
    assert_int_equal(available(g, "s1"), 8);
    /* ... and the right amount under a new txn still pays it. */
    assert_int_equal(gfx_pay(g, "M1", "T5", 3000, &r), GATE_PAID);
    assert_int_equal(log_rows(g, "M1"), 1);

    /* not_found: an unknown order; recorded for follow-up. */
    assert_int_equal(gfx_pay(g, "nobody", "T6", 100, &r), GATE_NOT_FOUND);
    assert_int_equal(r.status, ORDER_STATUS_NONE);
    assert_string_equal(gfx_exception(g, "T6"), "unknown_order|manual_review|open|100|USD|nobody");
    assert_string_equal(payment_outcome(g, "T6"), "not_found");
    assert_string_equal(gfx_order_status(g, "nobody"), "absent");

    /* Duplicates of each answer with their first outcome and change nothing. */
    gfx_checksum(g->sql, before, sizeof(before));
    assert_int_equal(gfx_pay(g, "D1", "T2", 3000, &r), GATE_DUPLICATE);
    assert_int_equal(r.first_outcome, GATE_DOUBLE_PAYMENT);
    assert_int_equal(gfx_pay(g, "M1", "T4", 2999, &r), GATE_DUPLICATE);
    assert_int_equal(r.first_outcome, GATE_AMOUNT_MISMATCH);
    assert_int_equal(r.status, ORDER_PAID); /* the order's status now */
    assert_int_equal(gfx_pay(g, "nobody", "T6", 100, &r), GATE_DUPLICATE);
    assert_int_equal(r.first_outcome, GATE_NOT_FOUND);
    GFX_ASSERT_UNCHANGED(g, before);
    gfx_reconcile_clean(g->sql);
    gfx_free(g);
}

/* A due order whose row another session holds locked (an order service's open transaction)
 * does not hold the batch: the others are cancelled at once, the locked one is answered busy
 * (status pending) and nothing of it changes; once the lock goes a retry cancels it. The
 * manual close waits for the lock instead (here until lock_timeout). */
static void test_cancel_busy(void **state)
{
    struct gfx *g = gfx_new("gout_busy");
    const char *nos[] = {"K3", "K1", "K2", "K1"};
    struct gate_cancel_row rows[4];
    struct og_error err = {0};
    enum gate_outcome outcome;
    enum order_status status;
    size_t nrows = 0;
    PGconn *locker;

    (void)state;
    /* Should the lock pass wait after all, the call fails (55P03) instead of hanging. */
    assert_int_equal(db_set_session(g->db, &(struct db_session){.lock_timeout_ms = 500}, &err),
                     OG_OK);
    gfx_stock(g, "s1", 10);
    gfx_coupon(g, "c1");
    gfx_place(g, "K1", 100, "[{\"sku\":\"s1\",\"qty\":2}]", "c1", "-1 minute");
    gfx_place(g, "K2", 100, "[{\"sku\":\"s1\",\"qty\":1}]", NULL, "-1 minute");
    gfx_place(g, "K3", 100, "[{\"sku\":\"s1\",\"qty\":1}]", NULL, "-1 minute");
    locker = testdb_connect(&g->t);
    testdb_exec(locker, "BEGIN");
    testdb_exec(locker, "SELECT 1 FROM ordergate.orders WHERE order_no = 'K1' FOR UPDATE");

    assert_int_equal(
        gate_claim_cancel(g->db, nos, 4, GATE_SRC_TIMEOUT_CONSUMER, rows, &nrows, &err), OG_OK);
    assert_int_equal(nrows, 3);
    for (size_t i = 0; i < nrows; i++) {
        bool locked = strcmp(rows[i].order_no, "K1") == 0;
        assert_int_equal(rows[i].outcome, locked ? GATE_BUSY : GATE_CANCELLED);
        assert_int_equal(rows[i].status, locked ? ORDER_PENDING : ORDER_CANCELLED);
    }
    assert_int_equal(log_rows(g, "K1"), 0);
    assert_int_equal(outbox_all(g, "K1"), 0);
    assert_string_equal(coupon_state(g, "c1"), "locked");
    assert_int_equal(
        gfx_long(g->sql, "SELECT available FROM ordergate.inventory WHERE sku = 's1'", NULL), 8);
    /* The manual close waits for the row (and gives up at lock_timeout). */
    assert_int_equal(gate_close(g->db, "K1", "ops", "test", &outcome, &status, &err), OG_ERR_DB);
    assert_string_equal(err.sqlstate, "55P03");

    testdb_exec(locker, "COMMIT");
    PQfinish(locker);
    assert_int_equal(gfx_cancel1(g, "K1", GATE_SRC_TIMEOUT_CONSUMER), GATE_CANCELLED);
    assert_string_equal(coupon_state(g, "c1"), "available");
    assert_int_equal(
        gfx_long(g->sql, "SELECT available FROM ordergate.inventory WHERE sku = 's1'", NULL), 10);
    gfx_reconcile_clean(g->sql);
    gfx_free(g);
}

/* ---------------------------------------------------------------- hold_for_payment */

static void test_hold_outcomes(void **state)
{
    struct gfx *g = gfx_new("gout_hold");
    enum gate_outcome outcome;
    struct og_error err = {0};
    char expire[64], before[1024];

    (void)state;
    gfx_stock(g, "s1", 10);
    gfx_place(g, "H1", 100, "[{\"sku\":\"s1\",\"qty\":1}]", NULL, "-2 seconds");
    gfx_place(g, "H2", 100, "[{\"sku\":\"s1\",\"qty\":1}]", NULL, "-10 minutes");
    gfx_place(g, "P1", 100, "[{\"sku\":\"s1\",\"qty\":1}]", NULL, "1 minute");
    gfx_place(g, "C1", 100, "[{\"sku\":\"s1\",\"qty\":1}]", NULL, "-1 minute");
    assert_int_equal(gfx_pay(g, "P1", "T1", 100, NULL), GATE_PAID);
    assert_int_equal(gfx_cancel1(g, "C1", GATE_SRC_TIMEOUT_SCANNER), GATE_CANCELLED);

    /* held: the user is on the payment page; a due order gets 60 s more and
     * a cancel arriving now is told not_due and changes nothing. */
    assert_int_equal(gate_hold(g->db, "H1", 60, &outcome, expire, sizeof(expire), &err), OG_OK);
    assert_int_equal(outcome, GATE_HELD);
    assert_int_equal(gfx_long(g->sql,
                              "SELECT count(*) FROM ordergate.orders WHERE order_no = 'H1' AND "
                              "expire_at = $1::timestamptz AND expire_at BETWEEN now() + "
                              "interval '59 seconds' AND now() + interval '61 seconds'",
                              expire, NULL),
                     1);
    gfx_checksum(g->sql, before, sizeof(before));
    assert_int_equal(gfx_cancel1(g, "H1", GATE_SRC_TIMEOUT_CONSUMER), GATE_NOT_DUE);
    GFX_ASSERT_UNCHANGED(g, before);
    /* A hold is not a transition: no log row, no event. */
    assert_int_equal(log_rows(g, "H1"), 0);
    assert_int_equal(outbox_all(g, "H1"), 0);
    /* A shorter hold never brings the expiry closer. */
    assert_int_equal(gate_hold(g->db, "H1", 5, &outcome, expire, sizeof(expire), &err), OG_OK);
    assert_int_equal(outcome, GATE_HELD);
    GFX_ASSERT_UNCHANGED(g, before);

    /* Bound by max: never past the original expiry + max_hold_seconds (900
     * by default), however often the hold is asked for. H2 expired 10 minutes
     * ago, so only 5 minutes are left of the allowance. */
    assert_int_equal(gfx_long(g->sql,
                              "SELECT value::int FROM ordergate.settings WHERE key = "
                              "'max_hold_seconds'",
                              NULL),
                     900);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(gate_hold(g->db, "H2", 900, &outcome, expire, sizeof(expire), &err),
                         OG_OK);
        assert_int_equal(outcome, GATE_HELD);
        assert_int_equal(gfx_long(g->sql,
                                  "SELECT count(*) FROM ordergate.orders WHERE order_no = 'H2' "
                                  "AND expire_at = original_expire_at + interval '900 seconds' "
                                  "AND expire_at = $1::timestamptz",
                                  expire, NULL),
                         1);
    }
    /* More than the maximum per call is refused by the database (22023)
     * and reported as a bad argument; nothing changes. */
    gfx_checksum(g->sql, before, sizeof(before));
    assert_int_equal(gate_hold(g->db, "H2", 901, &outcome, expire, sizeof(expire), &err),
                     OG_ERR_ARG);
    assert_string_equal(err.sqlstate, "22023");
    assert_false(err.retriable);
    GFX_ASSERT_UNCHANGED(g, before);

    /* not_pending: paid or cancelled; the expiry is reported, not moved. */
    assert_int_equal(gate_hold(g->db, "P1", 60, &outcome, expire, sizeof(expire), &err), OG_OK);
    assert_int_equal(outcome, GATE_NOT_PENDING);
    assert_int_equal(gfx_long(g->sql,
                              "SELECT count(*) FROM ordergate.orders WHERE order_no = 'P1' "
                              "AND expire_at = $1::timestamptz",
                              expire, NULL),
                     1);
    assert_int_equal(gate_hold(g->db, "C1", 60, &outcome, expire, sizeof(expire), &err), OG_OK);
    assert_int_equal(outcome, GATE_NOT_PENDING);
    /* not_found */
    assert_int_equal(gate_hold(g->db, "nope", 60, &outcome, expire, sizeof(expire), &err), OG_OK);
    assert_int_equal(outcome, GATE_NOT_FOUND);
    assert_string_equal(expire, "");
    GFX_ASSERT_UNCHANGED(g, before);
    gfx_reconcile_clean(g->sql);
    gfx_free(g);
}

/* ---------------------------------------------------------------- close_order */

static void test_close_outcomes(void **state)
{
    struct gfx *g = gfx_new("gout_close");
    enum gate_outcome outcome;
    enum order_status status;
    struct og_error err = {0};
    char before[1024];

    (void)state;
    gfx_stock(g, "s1", 10);
    gfx_coupon(g, "c1");
    /* Not due yet: a manual close does not wait for the expiry. */
    gfx_place(g, "K1", 800, "[{\"sku\":\"s1\",\"qty\":3}]", "c1", "1 hour");
    gfx_place(g, "P1", 100, "[{\"sku\":\"s1\",\"qty\":1}]", NULL, "1 hour");
    assert_int_equal(gfx_pay(g, "P1", "T1", 100, NULL), GATE_PAID);

    assert_int_equal(
        gate_close(g->db, "K1", "alice", "customer asked by phone", &outcome, &status, &err),
        OG_OK);
    assert_int_equal(outcome, GATE_CANCELLED);
    assert_int_equal(status, ORDER_CANCELLED);
    assert_string_equal(gfx_order_status(g, "K1"), "cancelled");
    assert_int_equal(available(g, "s1"), 9);
    assert_string_equal(coupon_state(g, "c1"), "available");
    /* The operator is the actor, the reason the note, the source manual. */
    assert_string_equal(log_row(g, "K1"),
                        "pending_payment>cancelled|manual|K1|alice|customer asked by phone");
    assert_int_equal(outbox_rows(g, "K1", "order_cancelled"), 1);
    assert_string_equal(gfx_text(g->sql, g->text, sizeof(g->text),
                                 "SELECT payload->>'source' FROM ordergate.outbox WHERE order_no = "
                                 "'K1'",
                                 NULL),
                        "manual");

    gfx_checksum(g->sql, before, sizeof(before));
    assert_int_equal(gate_close(g->db, "K1", "bob", "again", &outcome, &status, &err), OG_OK);
    assert_int_equal(outcome, GATE_ALREADY_CANCELLED);
    assert_int_equal(status, ORDER_CANCELLED);
    assert_int_equal(gate_close(g->db, "P1", "bob", "refund wanted", &outcome, &status, &err),
                     OG_OK);
    assert_int_equal(outcome, GATE_ALREADY_PAID);
    assert_int_equal(status, ORDER_PAID);
    assert_int_equal(gate_close(g->db, "nope", "bob", "typo", &outcome, &status, &err), OG_OK);
    assert_int_equal(outcome, GATE_NOT_FOUND);
    assert_int_equal(status, ORDER_STATUS_NONE);
    /* A timeout cancel after the manual close is already_cancelled. */
    assert_int_equal(gfx_cancel1(g, "K1", GATE_SRC_TIMEOUT_CONSUMER), GATE_ALREADY_CANCELLED);
    GFX_ASSERT_UNCHANGED(g, before);
    assert_string_equal(log_row(g, "K1"),
                        "pending_payment>cancelled|manual|K1|alice|customer asked by phone");
    gfx_reconcile_clean(g->sql);
    gfx_free(g);
}

/* record_payment_refused through the client: any bytes become printable
 * text within the bounds, and a key is recorded once. */
static void test_payment_refused_recorded_once(void **state)
{
    struct gfx *g = gfx_new("gout_refused");
    struct gate_refusal_result res;
    struct og_error err = {0};
    static char big[20000];
    static const char raw[] = {'{', 0, '\x01', '\xff', '\\', '"', 'v', '"', '}'};

    (void)state;
    memset(big, 'z', sizeof(big));
    struct gate_refusal bin = {
        .source = "og.pay/0/5",
        .order_no = "RF1",
        .reason = "bad_json: \x02 at byte 1",
        .message = raw,
        .message_len = sizeof(raw),
    };
    assert_int_equal(gate_record_payment_refused(g->db, &bin, &res, &err), OG_OK);
    assert_true(res.recorded);
    /* The position and the content: sha256 of the order number, a newline, the message as
     * sent (escaped). */
    assert_int_equal(strncmp(res.key, "msg:og.pay/0/5#", 15), 0);
    assert_int_equal(strlen(res.key), 15 + 64);
    assert_int_equal(res.exception_id,
                     gfx_long(g->sql,
                              "SELECT id FROM ordergate.exceptions WHERE refused_key = "
                              "'msg:og.pay/0/5#' || encode(sha256(convert_to($1, 'UTF8')), 'hex')",
                              "RF1\n{\\x00\\x01\\xff\\x5c\"v\"}", NULL));
    assert_int_equal(gfx_long(g->sql,
                              "SELECT count(*) FROM ordergate.exceptions WHERE order_no = 'RF1' "
                              "AND kind = 'refused_payment' AND strpos(note, $1) > 0 AND "
                              "strpos(note, $2) > 0",
                              "{\\x00\\x01\\xff\\x5c\"v\"}", "bad_json: \\x02 at byte 1", NULL),
                     1);
    /* The same message again: nothing new. */
    assert_int_equal(gate_record_payment_refused(g->db, &bin, &res, &err), OG_OK);
    assert_false(res.recorded);
    /* Another message at the same position (offsets repeat once a topic is re-created), differing
     * only beyond what the note keeps: recorded; the same again: nothing new. */
    struct gate_refusal later = {
        .source = "og.pay/0/5",
        .reason = "bad_json: x",
        .message = big,
        .message_len = sizeof(big),
    };
    assert_int_equal(gate_record_payment_refused(g->db, &later, &res, &err), OG_OK);
    assert_true(res.recorded);
    big[sizeof(big) - 1] = 'y';
    assert_int_equal(gate_record_payment_refused(g->db, &later, &res, &err), OG_OK);
    assert_true(res.recorded);
    assert_int_equal(gate_record_payment_refused(g->db, &later, &res, &err), OG_OK);
    assert_false(res.recorded);
    big[sizeof(big) - 1] = 'z';

    /* A transaction number is the key; a long message is cut, marked. */
    struct gate_refusal longer = {
        .source = "og.pay/1/9",
        .order_no = "RF2",
        .txn_no = "TXN-RF2",
        .amount_cents = 1999,
        .reason = "payment_rejected: refused",
        .message = big,
        .message_len = sizeof(big),
    };
    assert_int_equal(gate_record_payment_refused(g->db, &longer, &res, &err), OG_OK);
    assert_true(res.recorded);
    assert_string_equal(res.key, "txn:TXN-RF2");
    assert_int_equal(gfx_long(g->sql,
                              "SELECT count(*) FROM ordergate.exceptions WHERE refused_key = "
                              "'txn:TXN-RF2' AND amount_cents = 1999 AND txn_no IS NULL AND note "
                              "LIKE '%zzz...' AND length(note) < 2200",
                              NULL),
                     1);
    longer.source = "og.pay/1/10"; /* the same transaction produced twice */
    assert_int_equal(gate_record_payment_refused(g->db, &longer, &res, &err), OG_OK);
    assert_false(res.recorded);
    assert_int_equal(gfx_long(g->sql, "SELECT count(*) FROM ordergate.exceptions", NULL), 4);
    assert_int_equal(gfx_long(g->sql,
                              "SELECT count(*) FROM ordergate.outbox WHERE event_type = "
                              "'reconciliation_alert'",
                              NULL),
                     4);
    gfx_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_place_outcomes, gfx_teardown),
        cmocka_unit_test_teardown(test_cancel_outcomes, gfx_teardown),
        cmocka_unit_test_teardown(test_cancel_empty, gfx_teardown),
        cmocka_unit_test_teardown(test_cancel_same_sku_batch, gfx_teardown),
        cmocka_unit_test_teardown(test_payment_paid_and_duplicate, gfx_teardown),
        cmocka_unit_test_teardown(test_staff_acts, gfx_teardown),
        cmocka_unit_test_teardown(test_payment_after_expiry_before_cancel, gfx_teardown),
        cmocka_unit_test_teardown(test_payment_late, gfx_teardown),
        cmocka_unit_test_teardown(test_payment_double_mismatch_not_found, gfx_teardown),
        cmocka_unit_test_teardown(test_cancel_busy, gfx_teardown),
        cmocka_unit_test_teardown(test_hold_outcomes, gfx_teardown),
        cmocka_unit_test_teardown(test_close_outcomes, gfx_teardown),
        cmocka_unit_test_teardown(test_payment_refused_recorded_once, gfx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
