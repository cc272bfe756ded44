/* One locked row must not stall the consumer. A due order's row held locked by another session
 * (BEGIN; SELECT ... FOR UPDATE, left open: an order service's open transaction): every other
 * due order, in the same batch and partition, is cancelled at once; the locked one is claimed
 * again from the local retry set, the group's committed offset of its partition stays at its
 * message meanwhile, and it is cancelled once the lock goes. Locked beyond
 * consumer.busy_retry_ms it is re-scheduled through the delay topic and the offset moves on.
 * A database call stuck on a lock that the claim does wait for (a stock row held by an open
 * place_order transaction) turns /healthz and /readyz 503 past consumer.health_db_call_ms. */
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

#define PARTS 2

/* How long the test lets the consumer work while the lock is held: ample for orders that are
 * due now, and the whole point: the code before the retry set never cancels them meanwhile. */
#define PROGRESS_MS 20000

static long cancelled(struct ct *t, const char *like)
{
    char sql[256];

    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM ordergate.orders WHERE order_no LIKE '%s' AND status = "
             "'cancelled'",
             like);
    return ct_scalar(t, sql);
}

static long wait_cancelled(struct ct *t, const char *like, long want, long timeout_ms)
{
    char sql[256];

    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM ordergate.orders WHERE order_no LIKE '%s' AND status = "
             "'cancelled'",
             like);
    return ct_wait_scalar(t, sql, want, timeout_ms);
}

static void test_locked_order_does_not_hold_the_rest(void **state)
{
    static struct ct t;
    struct ct_proc p;
    PGconn *locker;
    char no[32];
    int64_t expire;

    (void)state;
    ct_setup(&t, "cbusy", PARTS, 0);
    ct_config(&t, "busy_retry_ms = 120000;", CT_SHORT_SESSION ", \"auto.commit.interval.ms=300\"");
    /* Partition 0: O-1, then the locked L-1, then O-2..O-10; partition 1: O-11..O-20. */
    expire = ct_place(&t, "L-1", -1000);
    for (int i = 1; i <= 20; i++) {
        snprintf(no, sizeof(no), "O-%d", i);
        ct_place(&t, no, -1000);
    }
    locker = testdb_connect(&t.db);
    testdb_exec(locker, "BEGIN");
    testdb_exec(locker, "SELECT 1 FROM ordergate.orders WHERE order_no = 'L-1' FOR UPDATE");
    ct_send_cancel(&t, t.topic, 0, "O-1", expire);
    ct_send_cancel(&t, t.topic, 0, "L-1", expire);
    for (int i = 2; i <= 20; i++) {
        snprintf(no, sizeof(no), "O-%d", i);
        ct_send_cancel(&t, t.topic, i <= 10 ? 0 : 1, no, expire);
    }
    ct_flush(&t);
    ct_spawn(&t, &p, "c1", t.topic, NULL);

    /* Every other order is cancelled while L-1 stays locked. */
    assert_int_equal(wait_cancelled(&t, "O-%", 20, PROGRESS_MS), 20);
    assert_int_equal(cancelled(&t, "L-1"), 0);
    assert_true(ct_metric_now(&p, "ordergate_consumer_claims_total{outcome=\"busy\"}") >= 1);
    /* ... and claimed again locally meanwhile: the loop turns, nothing was produced. */
    for (int i = 0;
         i < 50 && ct_metric_now(&p, "ordergate_consumer_retries_total{reason=\"busy\"}") < 2; i++)
        testutil_sleep_ms(100);
    assert_true(ct_metric_now(&p, "ordergate_consumer_retries_total{reason=\"busy\"}") >= 2);
    assert_true(ct_metric_wait(&p, "ordergate_consumer_retry_pending", 1, 5000) == 1);
    assert_true(ct_metric_now(&p, "ordergate_consumer_rescheduled_total") == 0);
    assert_int_equal(ct_end_offset(t.topic, 0), 11);
    /* Partition 1 is committed to its end; partition 0 only up to L-1's message (offset 1),
     * although O-2..O-10 behind it are done. */
    assert_int_equal(ct_wait_committed(&t, t.topic, 1, 10, 15000), 10);
    assert_int_equal(ct_wait_committed(&t, t.topic, 0, 1, 15000), 1);
    testutil_sleep_ms(1000); /* a few more auto-commits */
    assert_int_equal(ct_committed(t.group, t.topic, 0), 1);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.status_log WHERE order_no = "
                                   "'L-1'"),
                     0);

    /* The lock goes: L-1 is cancelled, the offset moves to the end. */
    testdb_exec(locker, "ROLLBACK");
    PQfinish(locker);
    assert_int_equal(wait_cancelled(&t, "L-1", 1, 15000), 1);
    assert_int_equal(ct_wait_committed(&t, t.topic, 0, 11, 15000), 11);
    assert_true(ct_metric_wait(&p, "ordergate_consumer_retry_pending", 0, 5000) == 0);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.status_log"), 21);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.outbox WHERE event_type = "
                                   "'order_cancelled'"),
                     21);
    assert_int_equal(ct_scalar(&t, "SELECT sum(violations) FROM ordergate.reconcile()"), 0);
    assert_int_equal(ct_stop(&p, SIGTERM, 30000), 0);
    ct_teardown(&t);
}

/* Locked beyond consumer.busy_retry_ms: re-scheduled through the delay topic (due now), the
 * partition's offset moves past the original message, and the re-scheduled message cancels
 * the order once the lock goes. */
static void test_locked_too_long_is_rescheduled(void **state)
{
    static struct ct t;
    struct ct_proc p;
    PGconn *locker;
    int64_t expire;

    (void)state;
    ct_setup(&t, "cbusylong", 1, 0);
    ct_config(&t, "busy_retry_ms = 800;", CT_SHORT_SESSION ", \"auto.commit.interval.ms=300\"");
    expire = ct_place(&t, "L-2", -1000);
    ct_place(&t, "O-1", -1000);
    locker = testdb_connect(&t.db);
    testdb_exec(locker, "BEGIN");
    testdb_exec(locker, "SELECT 1 FROM ordergate.orders WHERE order_no = 'L-2' FOR UPDATE");
    ct_send_cancel(&t, t.topic, 0, "L-2", expire);
    ct_send_cancel(&t, t.topic, 0, "O-1", expire);
    ct_flush(&t);
    ct_spawn(&t, &p, "c1", t.topic, NULL);

    ct_log_wait(&p, "event=busy_rescheduled order_no=L-2", PROGRESS_MS);
    ct_log_wait(&p, "event=rescheduled order_no=L-2", 10000);
    assert_int_equal(cancelled(&t, "O-1"), 1);
    assert_true(ct_metric_now(&p, "ordergate_consumer_retry_given_up_total{reason=\"busy\"}") >= 1);
    /* The original message is behind the committed offset now (the re-scheduled copy is at 2
     * or later). */
    {
        int64_t committed = ct_committed(t.group, t.topic, 0);
        for (int i = 0; i < 50 && committed < 2; i++) {
            testutil_sleep_ms(200);
            committed = ct_committed(t.group, t.topic, 0);
        }
        assert_true(committed >= 2);
    }
    assert_int_equal(cancelled(&t, "L-2"), 0);
    testdb_exec(locker, "COMMIT");
    PQfinish(locker);
    assert_int_equal(wait_cancelled(&t, "L-2", 1, 15000), 1);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.status_log"), 2);
    assert_int_equal(ct_stop(&p, SIGTERM, 30000), 0);
    ct_teardown(&t);
}

/* A claim stuck on a stock row (the claim waits for those: an open place_order transaction
 * holds it) shows in the health endpoints once it passes consumer.health_db_call_ms. */
static void test_stuck_call_fails_health(void **state)
{
    static struct ct t;
    struct ct_proc p;
    char body[65536];
    PGconn *locker;
    int64_t expire;
    int port, code = 0;

    (void)state;
    ct_setup(&t, "cstuck", 1, 0);
    ct_config(&t, "health_db_call_ms = 1000;", CT_SHORT_SESSION);
    expire = ct_place(&t, "S-1", -1000);
    ct_spawn(&t, &p, "c1", t.topic, "--lock-timeout-ms", "60000", NULL);
    ct_log_wait(&p, "event=partitions_assigned", 30000);
    port = ct_metrics_port(&p);
    for (int i = 0; i < 100 && code != 200; i++) {
        code = ct_http_get(port, "/readyz", body, sizeof(body));
        if (code != 200)
            testutil_sleep_ms(100);
    }
    assert_int_equal(code, 200);

    locker = testdb_connect(&t.db);
    testdb_exec(locker, "BEGIN");
    testdb_exec(locker, "SELECT 1 FROM ordergate.inventory WHERE sku = 'sku-1' FOR UPDATE");
    ct_produce_cancel(&t, t.topic, 0, "S-1", expire);
    /* The claim waits on the stock row: the loop does not turn, the endpoints say so. */
    code = 0;
    for (int i = 0; i < 150 && code != 503; i++) {
        code = ct_http_get(port, "/healthz", body, sizeof(body));
        if (code != 503)
            testutil_sleep_ms(100);
    }
    assert_int_equal(code, 503);
    assert_non_null(strstr(body, "database call running for"));
    assert_int_equal(ct_http_get(port, "/readyz", body, sizeof(body)), 503);
    assert_int_equal(ct_http_get(port, "/metrics", body, sizeof(body)), 200);
    assert_true(ct_metric(body, "ordergate_consumer_db_call_age_seconds") > 1.0);
    assert_int_equal(cancelled(&t, "S-1"), 0);

    testdb_exec(locker, "ROLLBACK");
    PQfinish(locker);
    assert_int_equal(wait_cancelled(&t, "S-1", 1, 15000), 1);
    code = 0;
    for (int i = 0; i < 50 && code != 200; i++) {
        code = ct_http_get(port, "/healthz", body, sizeof(body));
        if (code != 200)
            testutil_sleep_ms(100);
    }
    assert_int_equal(code, 200);
    assert_int_equal(ct_http_get(port, "/metrics", body, sizeof(body)), 200);
    assert_true(ct_metric(body, "ordergate_consumer_db_call_age_seconds") < 1.0);
    assert_int_equal(ct_stop(&p, SIGTERM, 30000), 0);
    ct_teardown(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_locked_order_does_not_hold_the_rest, ct_cleanup),
        cmocka_unit_test_teardown(test_locked_too_long_is_rescheduled, ct_cleanup),
        cmocka_unit_test_teardown(test_stuck_call_fails_health, ct_cleanup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
