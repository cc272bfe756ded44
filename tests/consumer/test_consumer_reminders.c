/* Payment reminders through the delay topics (schedule_cancels = 1, reminder_before_seconds
 * set, the consumer's outbox relay publishing what place_order wrote): a few hundred reminders
 * falling due over three seconds are each sent once by the consumer at their due time, never
 * before it, with their lateness (sent_at - due_at, both the database's clock) measured and held
 * to a bound; a paid order's reminder is never sent; a reminder whose deadline moved out comes
 * early, is answered not_due, re-scheduled, and sent at the new due time. */
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

#define REMINDERS 300

static void test_reminders_on_time(void **state)
{
    static struct ct t;
    struct ct_proc p;
    char short_topic[160], long_topic[160], topics[330];
    double p50, p99, max, sent;

    (void)state;
    ct_setup(&t, "crem", 1, 0);
    /* Reminders due in seconds go to the short topic, the cancels (a minute later) to the long
     * one: a reminder never waits behind a cancel due after it. */
    snprintf(short_topic, sizeof(short_topic), "og.%s.cancel.10s", t.base);
    snprintf(long_topic, sizeof(long_topic), "og.%s.cancel.5m", t.base);
    snprintf(topics, sizeof(topics), "%s,%s", short_topic, long_topic);
    ct_create_topic(short_topic, 2);
    ct_create_topic(long_topic, 1);
    testdb_exec(t.conn, "SELECT ordergate.set_setting('schedule_cancels', '1')");
    testdb_exec(t.conn, "SELECT ordergate.set_setting('reminder_before_seconds', '60')");
    ct_spawn(&t, &p, "c1", topics, NULL);
    ct_log_wait(&p, "event=partitions_assigned", 30000);

    /* Due 4 s from now, 10 ms apart; deadlines a minute later. */
    testdb_exec(t.conn, "SELECT ordergate.place_order('R-' || i, 100, '[]', NULL, "
                        "now() + interval '64 seconds' + i * interval '10 milliseconds') "
                        "FROM generate_series(1, 300) i");
    /* Paid before its reminder falls due: never reminded. */
    testdb_exec(t.conn, "SELECT ordergate.place_order('P-1', 100, '[]', NULL, "
                        "now() + interval '64 seconds')");
    testdb_exec(t.conn, "SELECT * FROM ordergate.claim_payment('P-1', 'T-P1', 100, 'card')");
    /* Its deadline moves 4 s out after the message was written: the message comes early. */
    testdb_exec(t.conn, "SELECT ordergate.place_order('D-1', 100, '[]', NULL, "
                        "now() + interval '64 seconds')");
    testdb_exec(t.conn, "UPDATE ordergate.orders SET expire_at = expire_at + interval '4 seconds' "
                        "WHERE order_no = 'D-1'");

    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM ordergate.reminders WHERE state = 'sent' "
                                    "AND order_no LIKE 'R-%'",
                                    REMINDERS, 30000),
                     REMINDERS);
    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM ordergate.reminders WHERE state = 'sent' "
                                    "AND order_no = 'D-1'",
                                    1, 20000),
                     1);
    /* Never before due: the moved one at its new due time. */
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.reminders "
                                   "WHERE state = 'sent' AND sent_at < due_at"),
                     0);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.reminders r JOIN "
                                   "ordergate.orders o USING (order_no) WHERE r.order_no = 'D-1' "
                                   "AND r.due_at = o.expire_at - interval '60 seconds'"),
                     1);
    assert_true(ct_log_count(&p, "event=rescheduled order_no=D-1") >= 1);
    /* The paid order: its message was answered not_pending, nothing sent. */
    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM ordergate.reminders WHERE order_no = "
                                    "'P-1' AND state = 'skipped' AND skip_reason = 'closed'",
                                    1, 10000),
                     1);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.outbox WHERE order_no = 'P-1' "
                                   "AND event_type = 'payment_reminder'"),
                     0);
    /* Once each. */
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.outbox "
                                   "WHERE event_type = 'payment_reminder'"),
                     REMINDERS + 1);

    p50 = (double)ct_scalar(&t, "SELECT (percentile_cont(0.5) WITHIN GROUP (ORDER BY "
                                "extract(epoch FROM sent_at - due_at)) * 1000)::bigint "
                                "FROM ordergate.reminders WHERE order_no LIKE 'R-%'");
    p99 = (double)ct_scalar(&t, "SELECT (percentile_cont(0.99) WITHIN GROUP (ORDER BY "
                                "extract(epoch FROM sent_at - due_at)) * 1000)::bigint "
                                "FROM ordergate.reminders WHERE order_no LIKE 'R-%'");
    max = (double)ct_scalar(&t, "SELECT (max(extract(epoch FROM sent_at - due_at)) * 1000)::bigint "
                                "FROM ordergate.reminders WHERE order_no LIKE 'R-%'");
    print_message("%d reminders: lateness p50 %.0f ms, p99 %.0f ms, max %.0f ms\n", REMINDERS, p50,
                  p99, max);
    /* A sane bound on a shared 2-core machine: the cancels' own target is a p99 of 250 ms. */
    assert_true(p99 < 3000);
    assert_true(max < 6000);
    sent = ct_metric_now(&p, "ordergate_reminders_sent_total{source=\"consumer\"}");
    assert_true(sent == REMINDERS + 1);
    assert_true(ct_metric_now(
                    &p, "ordergate_consumer_reminder_claims_total{outcome=\"not_pending\"}") >= 1);
    assert_int_equal(
        ct_scalar(&t, "SELECT coalesce(sum(violations), 0) FROM ordergate.reconcile()"), 0);
    assert_int_equal(ct_stop(&p, SIGTERM, 30000), 0);
    ct_teardown(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_reminders_on_time, ct_cleanup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
