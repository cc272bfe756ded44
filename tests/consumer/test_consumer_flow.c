/* The consumer against the real broker and database, one instance, two delay
 * topics: nothing is cancelled before the database's expire_at; a message
 * delivered three times cancels once; an order whose message was lost stays
 * pending (the scanner's job); a paid order is left alone; a message that is
 * early by the database's clock (a payment hold moved expire_at) is
 * re-scheduled, not dropped; metrics count all of it; SIGTERM exits 0 with
 * the group's committed offsets covering every message. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ct.h"
#include "support/testutil.h"

#define PARTS 4

static const char *const early_orders[] = {"E-1", "E-2", "E-3", "E-4"};

static void expect_metric(const char *body, const char *sample, double want)
{
    double got = ct_metric(body, sample);

    if (got != want)
        fail_msg("%s = %g, expected %g", sample, got, want);
}

static void test_flow(void **state)
{
    static struct ct t; /* static: ct_cleanup may tear it down after a failure */
    struct ct_proc p;
    char topics[300], sql[512], body[65536], sample[512];
    int64_t expire[4], hold_expire, paid_expire;
    int port;

    (void)state;
    ct_setup(&t, "cflow", PARTS, 0);
    snprintf(topics, sizeof(topics), "%s,%s", t.topic, t.topic2);
    ct_spawn(&t, &p, "c1", topics, NULL);
    ct_log_wait(&p, "event=partitions_assigned", 30000);

    /* D-1: already due, delivered three times. */
    int64_t d_expire = ct_place(&t, "D-1", -1000);
    for (int i = 0; i < 3; i++)
        ct_produce_cancel(&t, t.topic, 1, "D-1", d_expire);
    /* P-1: paid before its message is due. */
    paid_expire = ct_place(&t, "P-1", 1500);
    testdb_exec(t.conn, "SELECT * FROM ordergate.claim_payment('P-1', 'TXN-P-1', 1000, 'card')");
    ct_produce_cancel(&t, t.topic2, 2, "P-1", paid_expire);
    /* L-1: due, but its message was lost. */
    ct_place(&t, "L-1", -2000);
    /* H-1: the message says "due now" but the database holds it 4 s more. */
    hold_expire = ct_place(&t, "H-1", 4000);
    ct_produce_cancel(&t, t.topic, 3, "H-1", ct_now_ms() - 10);
    /* E-*: due in 5 s, messages due exactly at the database's expire_at
     * (the producer is warm by now: they go out at once). Beyond the window lead
     * (CONSUMER_WINDOW_LEAD_MS, 3 s): their partitions are paused (deferred) first, then
     * resume, and the consumer holds them until they fall due. */
    for (int i = 0; i < 4; i++) {
        expire[i] = ct_place(&t, early_orders[i], 5000);
        ct_send_cancel(&t, i % 2 ? t.topic2 : t.topic, -1, early_orders[i], expire[i]);
    }
    ct_flush(&t);

    /* Shortly before their due time the E-orders are untouched (on a
     * machine so slow that this moment has passed already, the checks
     * after the cancel below still hold the consumer to the clock). */
    if (ct_now_ms() < expire[0] - 300) {
        while (ct_now_ms() < expire[0] - 300)
            testutil_sleep_ms(20);
        assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.orders WHERE order_no "
                                       "LIKE 'E-%' AND status = 'pending_payment'"),
                         4);
    } else {
        print_message("setup took too long to look at the E-orders before their due time\n");
    }
    /* The duplicate cancelled once. */
    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM ordergate.orders WHERE order_no = 'D-1' "
                                    "AND status = 'cancelled'",
                                    1, 15000),
                     1);
    /* Then they are cancelled, none before its expire_at, promptly after. */
    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM ordergate.orders WHERE order_no LIKE "
                                    "'E-%' AND status = 'cancelled'",
                                    4, 15000),
                     4);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.orders WHERE status = "
                                   "'cancelled' AND closed_at < expire_at"),
                     0);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.orders WHERE order_no LIKE "
                                   "'E-%' AND closed_at > expire_at + interval '10 seconds'"),
                     0);
    /* H-1: re-scheduled to the database's due time, then cancelled, not early. */
    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM ordergate.orders WHERE order_no = 'H-1' "
                                    "AND status = 'cancelled'",
                                    1, 20000),
                     1);
    assert_true(ct_now_ms() >= hold_expire);
    ct_log_wait(&p, "event=rescheduled order_no=H-1", 1000);

    /* Exactly one transition each, one outbox event each; nothing for the
     * paid order's cancel, nothing for the lost one. */
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.status_log WHERE source = "
                                   "'timeout_consumer'"),
                     6);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.status_log WHERE order_no = "
                                   "'D-1'"),
                     1);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.outbox WHERE order_no = 'D-1'"),
                     1);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.orders WHERE order_no = 'P-1' "
                                   "AND status = 'paid'"),
                     1);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.status_log WHERE order_no = "
                                   "'P-1' AND source <> 'payment_callback'"),
                     0);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.orders WHERE order_no = 'L-1' "
                                   "AND status = 'pending_payment'"),
                     1);

    /* The metrics tell the same story. The counters are exact: E-1..4, D-1
     * and H-1 cancelled; P-1 already paid; H-1's first claim not due; every
     * other claim was made at or after the due time. */
    port = ct_metrics_port(&p);
    assert_int_equal(ct_http_get(port, "/healthz", body, sizeof(body)), 200);
    assert_int_equal(ct_http_get(port, "/readyz", body, sizeof(body)), 200);
    assert_int_equal(ct_http_get(port, "/metrics", body, sizeof(body)), 200);
    expect_metric(body, "ordergate_consumer_claims_total{outcome=\"cancelled\"}", 6);
    expect_metric(body, "ordergate_consumer_claims_total{outcome=\"already_paid\"}", 1);
    expect_metric(body, "ordergate_consumer_claims_total{outcome=\"not_due\"}", 1);
    expect_metric(body, "ordergate_consumer_rescheduled_total", 1);
    expect_metric(body, "ordergate_consumer_dead_lettered_total", 0);
    expect_metric(body, "ordergate_consumer_lateness_seconds_count", 6);
    /* 4 E + 3 D + 1 P + 1 H + 1 re-scheduled H on the two topics. */
    snprintf(sample, sizeof(sample), "ordergate_consumer_messages_consumed_total{topic=\"%s\"}",
             t.topic);
    double a = ct_metric(body, sample);
    snprintf(sample, sizeof(sample), "ordergate_consumer_messages_consumed_total{topic=\"%s\"}",
             t.topic2);
    double b = ct_metric(body, sample);
    /* Deferred messages are received again after the resume: at least 10. */
    assert_true(a + b >= 10);
    assert_true(ct_metric(body, "ordergate_consumer_messages_deferred_total") >= 1);

    /* SIGTERM: exit 0, offsets committed up to the end of every partition. */
    assert_int_equal(ct_stop(&p, SIGTERM, 30000), 0);
    assert_true(ct_log_has(&p, "event=shutdown_begin"));
    assert_true(ct_log_has(&p, "event=stopped status=0"));
    for (int part = 0; part < PARTS; part++) {
        const char *tp[2] = {t.topic, t.topic2};
        for (int k = 0; k < 2; k++) {
            int64_t end = ct_end_offset(tp[k], part);
            int64_t committed = ct_committed(t.group, tp[k], part);
            if (end > 0 && committed != end)
                fail_msg("%s/%d: committed %lld, end %lld", tp[k], part, (long long)committed,
                         (long long)end);
        }
    }
    /* due_times (schema/functions/gate/due_times.sql) is the triggers' to call, nobody else's. */
    assert_int_equal(ct_scalar(&t, "SELECT has_function_privilege('ordergate_trigger', "
                                   "'ordergate.due_times(text[])', 'execute')::int"),
                     1);
    assert_int_equal(ct_scalar(&t, "SELECT has_function_privilege('public', "
                                   "'ordergate.due_times(text[])', 'execute')::int"),
                     0);
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM ordergate.orders WHERE status = 'cancelled'");
    assert_int_equal(ct_scalar(&t, sql), 6);
    ct_teardown(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_flow, ct_cleanup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
