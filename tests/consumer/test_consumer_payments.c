/* One payment never holds the others back. Against the real broker and database:
 *  - payments whose paid hook fails (tests/support/failing_hook.sql; the cancel hook dropped):
 *    each is held back alone in the local retry set, the other payments are applied and the 50
 *    due cancels of the batch are cancelled at once, the payments partition's offset waits at
 *    the first held payment; a due cancel of a held order that arrives meanwhile waits behind
 *    its payment, so once the hook is mended the payment, first to arrive, claims first (paid,
 *    never cancelled);
 *  - a payment whose order row an order service holds locked: its claim waits at most a moment,
 *    the 50 due cancels behind it are cancelled at once while the lock is held, and the payment
 *    is applied once the lock goes (never dead-lettered for it).
 *  - payments that name a currency, come in parts or capture a pending charge
 *    (test_currency_and_parts).
 * Before, the first payment that failed made the whole batch retry: no cancel for
 * consumer.hook_retry_ms per failing payment, or for as long as the lock. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ct.h"
#include "support/testutil.h"

/* Ample for a due order; the code before this never got there meanwhile. */
#define PROGRESS_MS 10000

static void produce_payment(struct ct *t, const char *order_no)
{
    char value[256];

    snprintf(value, sizeof(value),
             "{\"v\":1,\"order_no\":\"%s\",\"txn_no\":\"TXN-%s\",\"amount_cents\":1000,"
             "\"channel\":\"card\"}",
             order_no, order_no);
    ct_produce_raw(t, t->payments, 0, order_no, strlen(order_no), value, strlen(value));
}

static long count_status(struct ct *t, const char *like, const char *status, long want,
                         long timeout_ms)
{
    char sql[256];

    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM ordergate.orders WHERE order_no LIKE '%s' AND status = '%s'",
             like, status);
    return ct_wait_scalar(t, sql, want, timeout_ms);
}

/* Places C-1..C-n, due already, and sends their cancels to partition 0 of the delay topic. */
static void due_cancels(struct ct *t, int n)
{
    char no[32];
    int64_t expire = 0;

    for (int i = 1; i <= n; i++) {
        snprintf(no, sizeof(no), "C-%d", i);
        expire = ct_place(t, no, -1000);
    }
    for (int i = 1; i <= n; i++) {
        snprintf(no, sizeof(no), "C-%d", i);
        ct_send_cancel(t, t->topic, 0, no, expire);
    }
    ct_flush(t);
}

/* Polls the consumer's retry_pending gauge until it is at least want or timeout_ms passes;
 * returns the last value. */
static double retry_pending_at_least(const struct ct_proc *p, double want, long timeout_ms)
{
    int64_t end = ct_now_ms() + timeout_ms;
    double v = ct_metric_now(p, "ordergate_consumer_retry_pending");

    while (v < want && ct_now_ms() < end) {
        usleep(100 * 1000);
        v = ct_metric_now(p, "ordergate_consumer_retry_pending");
    }
    return v;
}

static void test_failing_paid_hook_holds_its_order_only(void **state)
{
    static struct ct t;
    struct ct_proc p;

    (void)state;
    ct_setup(&t, "cpayhook", 1, CT_PAYMENTS);
    /* A bound far away: nothing may wait for it. */
    ct_config(&t, "hook_retry_ms = 600000;", CT_SHORT_SESSION ", \"auto.commit.interval.ms=300\"");
    testdb_exec_file(t.conn, "tests/support/failing_hook.sql");
    testdb_exec(t.conn,
                "SELECT ordergate.drop_hook('cancelled', 'shop_t.on_cancelled(text[],text)')");
    testdb_exec(t.conn, "INSERT INTO shop_t.poison VALUES ('PH-1'), ('PH-2'), ('PH-3')");
    /* The held orders are due: a cancel that got past their payments would cancel them. */
    ct_place(&t, "PH-1", -1000);
    ct_place(&t, "PH-2", -1000);
    ct_place(&t, "PH-3", -1000);
    ct_place(&t, "PG-1", 3600 * 1000L);
    ct_place(&t, "PG-2", 3600 * 1000L);
    /* Payments partition 0: PH-1 (offset 0), PG-1, PH-2, PG-2, PH-3. */
    produce_payment(&t, "PH-1");
    produce_payment(&t, "PG-1");
    produce_payment(&t, "PH-2");
    produce_payment(&t, "PG-2");
    produce_payment(&t, "PH-3");
    ct_spawn(&t, &p, "c1", t.topic, NULL);
    ct_log_wait(&p, "event=hook_failed order_no=PH-1 txn_no=TXN-PH-1", 30000);

    /* The payments arrived first; now the cancels, PH-1's among them. */
    ct_produce_cancel(&t, t.topic, 0, "PH-1", ct_now_ms() - 1000);
    due_cancels(&t, 50);
    assert_int_equal(count_status(&t, "C-%", "cancelled", 50, PROGRESS_MS), 50);
    assert_int_equal(count_status(&t, "PG-%", "paid", 2, PROGRESS_MS), 2);
    /* Held back, not lost, not dead-lettered: pending, the offset at the first of them. */
    assert_int_equal(count_status(&t, "PH-%", "pending_payment", 3, 0), 3);
    assert_true(ct_committed(t.group, t.payments, 0) <= 0);
    assert_int_equal(ct_end_offset(t.dlq, 0), 0);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.exceptions"), 0);
    /* The gauge is refreshed once a second (and PH-1's cancel may wait in the set too). */
    assert_true(retry_pending_at_least(&p, 3, 10000) >= 3);

    /* Mended: the held payments are applied by their retries; PH-1's cancel, which arrived
     * after its payment, finds it paid. */
    testdb_exec(t.conn, "DELETE FROM shop_t.poison");
    assert_int_equal(count_status(&t, "PH-%", "paid", 3, 60000), 3);
    assert_int_equal(ct_wait_committed(&t, t.payments, 0, 5, 15000), 5);
    assert_int_equal(ct_wait_committed(&t, t.topic, 0, 51, 15000), 51);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.status_log WHERE order_no "
                                   "LIKE 'PH-%' AND to_status = 'cancelled'"),
                     0);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.exceptions"), 0);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM shop_t.seen WHERE event = 'paid'"), 5);
    assert_int_equal(ct_scalar(&t, "SELECT sum(violations) FROM ordergate.reconcile()"), 0);
    assert_int_equal(ct_stop(&p, SIGTERM, 30000), 0);
    ct_teardown(&t);
}

static void test_locked_order_holds_its_payment_only(void **state)
{
    static struct ct t;
    struct ct_proc p;
    PGconn *holder;

    (void)state;
    ct_setup(&t, "cpaylock", 1, CT_PAYMENTS);
    ct_config(&t, "", CT_SHORT_SESSION ", \"auto.commit.interval.ms=300\"");
    ct_place(&t, "PL-1", 3600 * 1000L);
    /* An order service holds PL-1's row (a transaction left open around it). */
    holder = testdb_connect(&t.db);
    testdb_exec(holder, "BEGIN");
    testdb_exec(holder, "SELECT 1 FROM ordergate.orders WHERE order_no = 'PL-1' FOR UPDATE");
    produce_payment(&t, "PL-1");
    due_cancels(&t, 50);
    ct_spawn(&t, &p, "c1", t.topic, NULL);

    assert_int_equal(count_status(&t, "C-%", "cancelled", 50, PROGRESS_MS), 50);
    ct_log_wait(&p, "event=payment_locked order_no=PL-1 txn_no=TXN-PL-1", PROGRESS_MS);
    assert_int_equal(ct_wait_committed(&t, t.topic, 0, 50, PROGRESS_MS), 50);
    /* Still locked: the payment waits, its offset with it; nothing dead-lettered. */
    testutil_sleep_ms(2000);
    assert_int_equal(count_status(&t, "PL-1", "pending_payment", 1, 0), 1);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.payments"), 0);
    assert_true(ct_committed(t.group, t.payments, 0) <= 0);
    assert_int_equal(ct_end_offset(t.dlq, 0), 0);

    /* The lock goes: the payment is applied. */
    testdb_exec(holder, "ROLLBACK");
    PQfinish(holder);
    assert_int_equal(count_status(&t, "PL-1", "paid", 1, PROGRESS_MS), 1);
    assert_int_equal(ct_wait_committed(&t, t.payments, 0, 1, 15000), 1);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.exceptions"), 0);
    assert_int_equal(ct_stop(&p, SIGTERM, 30000), 0);
    ct_teardown(&t);
}

static void produce_value(struct ct *t, const char *order_no, const char *value)
{
    ct_produce_raw(t, t->payments, 0, order_no, strlen(order_no), value, strlen(value));
}

/* A payment result names its currency and parts: one in another currency than the order's ends
 * as currency_mismatch with its exception (the order stays pending); two parts of an order that
 * allows them pay it (partial, then paid); a malformed currency is dead-lettered after its
 * refused_payment record, like any bad field. */
static void test_currency_and_parts(void **state)
{
    static struct ct t;
    struct ct_proc p;
    char body[65536];

    (void)state;
    ct_setup(&t, "cpaycur", 1, CT_PAYMENTS);
    ct_config(&t, "", CT_SHORT_SESSION ", \"auto.commit.interval.ms=300\"");
    testdb_exec(t.conn, "SELECT ordergate.place_order('M-1', 1250, "
                        "'[{\"sku\":\"sku-1\",\"qty\":1}]'::jsonb, NULL, now() + interval "
                        "'1 hour', currency => 'EUR')");
    testdb_exec(t.conn, "SELECT ordergate.place_order('M-2', 1000, "
                        "'[{\"sku\":\"sku-1\",\"qty\":1}]'::jsonb, NULL, now() + interval "
                        "'1 hour', currency => 'JPY', allow_partial => true)");
    ct_place(&t, "M-3", 3600 * 1000L);
    /* M-4: past its deadline, protected by a pending charge that the payment result captures. */
    ct_place(&t, "M-4", -1000);
    testdb_exec(t.conn, "SELECT ordergate.begin_charge('M-4', 'ch-M4', 3600)");
    produce_value(&t, "M-1",
                  "{\"v\":1,\"order_no\":\"M-1\",\"txn_no\":\"T-M1\",\"amount_cents\":1250,"
                  "\"channel\":\"card\",\"currency\":\"USD\"}");
    produce_value(&t, "M-2",
                  "{\"v\":1,\"order_no\":\"M-2\",\"txn_no\":\"T-M2-gift\",\"amount_cents\":400,"
                  "\"channel\":\"gift_card\",\"currency\":\"JPY\"}");
    produce_value(&t, "M-2",
                  "{\"v\":1,\"order_no\":\"M-2\",\"txn_no\":\"T-M2-card\",\"amount_cents\":600,"
                  "\"channel\":\"card\"}");
    produce_value(&t, "M-3",
                  "{\"v\":1,\"order_no\":\"M-3\",\"txn_no\":\"T-M3\",\"amount_cents\":1000,"
                  "\"channel\":\"card\",\"currency\":\"usd\"}");
    produce_value(&t, "M-4",
                  "{\"v\":1,\"order_no\":\"M-4\",\"txn_no\":\"T-M4\",\"amount_cents\":1000,"
                  "\"channel\":\"sepa\",\"charge_ref\":\"ch-M4\"}");
    ct_spawn(&t, &p, "c1", t.topic, NULL);

    assert_int_equal(count_status(&t, "M-2", "paid", 1, PROGRESS_MS), 1);
    assert_int_equal(ct_wait_committed(&t, t.payments, 0, 5, 15000), 5);
    /* The charge's capture paid its order, past the deadline, and ended the charge. */
    assert_int_equal(count_status(&t, "M-4", "paid", 1, 0), 1);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.charges WHERE charge_ref = "
                                   "'ch-M4' AND state = 'captured' AND txn_no = 'T-M4'"),
                     1);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.payments WHERE order_no = "
                                   "'M-2' AND currency = 'JPY' AND ((txn_no = 'T-M2-gift' AND "
                                   "outcome = 'partial') OR (txn_no = 'T-M2-card' AND outcome = "
                                   "'paid'))"),
                     2);
    /* Another currency: recorded, never claims, an exception for review in its currency. */
    assert_int_equal(count_status(&t, "M-1", "pending_payment", 1, 0), 1);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.payments WHERE txn_no = "
                                   "'T-M1' AND outcome = 'currency_mismatch' AND currency = 'USD'"),
                     1);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.exceptions WHERE txn_no = "
                                   "'T-M1' AND kind = 'currency_mismatch' AND resolution = "
                                   "'manual_review' AND currency = 'USD'"),
                     1);
    /* A malformed currency: refused like any bad field, recorded, then dead-lettered. */
    assert_int_equal(count_status(&t, "M-3", "pending_payment", 1, 0), 1);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.payments WHERE txn_no = "
                                   "'T-M3'"),
                     0);
    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM ordergate.exceptions WHERE kind = "
                                    "'refused_payment' AND refused_key = 'txn:T-M3' AND note LIKE "
                                    "'%bad_currency%'",
                                    1, 15000),
                     1);
    for (int tries = 0; tries < 100 && ct_end_offset(t.dlq, 0) < 1; tries++)
        testutil_sleep_ms(100);
    assert_int_equal(ct_end_offset(t.dlq, 0), 1);
    int port = ct_metrics_port(&p);
    assert_int_equal(ct_http_get(port, "/metrics", body, sizeof(body)), 200);
    assert_true(ct_metric(body, "ordergate_consumer_payments_total{outcome=\"partial\"}") == 1);
    assert_true(
        ct_metric(body, "ordergate_consumer_payments_total{outcome=\"currency_mismatch\"}") == 1);
    assert_int_equal(ct_stop(&p, SIGTERM, 30000), 0);
    ct_teardown(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_failing_paid_hook_holds_its_order_only, ct_cleanup),
        cmocka_unit_test_teardown(test_locked_order_holds_its_payment_only, ct_cleanup),
        cmocka_unit_test_teardown(test_currency_and_parts, ct_cleanup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
