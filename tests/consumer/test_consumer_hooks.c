/* A shop's hook that fails (tests/support/failing_hook.sql) must not stop the consumer.
 *
 * One order the hook fails: the batch is bisected, every other order of it is cancelled at
 * once (the hook called exactly once for each), the failing one is claimed again from the local
 * retry set with backoff, the partition's committed offset waits at its message; past
 * consumer.hook_retry_ms it is dead-lettered with the hook's error as the reason, the offset
 * moves on and the order stays pending, untouched. Mended, a new message cancels it.
 *
 * A hook that fails every order: nothing is claimed, nothing dead-lettered, the batch is
 * retried with backoff (an outage, like the database's); mended, every order is cancelled.
 *
 * A payment whose paid hook fails: retried with the batch for consumer.hook_retry_ms, then
 * recorded as refused (an exception row: the money was taken) and dead-lettered.
 *
 * A hook slower than the statement_timeout for one order (57014, query_canceled): isolated like
 * any hook failure, every other order of the batch cancelled, the slow one reported and left
 * pending. */
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

#define HOOK "shop_t.on_cancelled(text[],text)"

/* The dead letters of a topic: how many, and the key and reason of the last. */
struct dlq_seen {
    int n;
    char key[80];
    char reason[600];
};

static void dlq_record(void *arg, const rd_kafka_message_t *m)
{
    struct dlq_seen *s = arg;
    char buf[600];

    s->n++;
    snprintf(s->key, sizeof(s->key), "%.*s", (int)m->key_len, m->key ? (const char *)m->key : "");
    snprintf(s->reason, sizeof(s->reason), "%s",
             ct_header(m, "ordergate-reason", buf, sizeof(buf)) ? buf : "");
}

static void hook_setup(struct ct *t, const char *poison)
{
    char sql[256];

    testdb_exec_file(t->conn, "tests/support/failing_hook.sql");
    snprintf(sql, sizeof(sql), "INSERT INTO shop_t.poison VALUES ('%s')", poison);
    testdb_exec(t->conn, sql);
}

static void test_one_failing_order_is_isolated(void **state)
{
    static struct ct t;
    struct ct_proc p;
    struct dlq_seen dlq = {0};
    char no[32];
    int64_t expire;

    (void)state;
    ct_setup(&t, "chook1", 1, 0);
    ct_config(&t, "hook_retry_ms = 4000;", CT_SHORT_SESSION ", \"auto.commit.interval.ms=300\"");
    hook_setup(&t, "BAD-1");
    /* Partition 0: O-1..O-10, BAD-1 (offset 10), O-11..O-20. */
    expire = ct_place(&t, "BAD-1", -1000);
    for (int i = 1; i <= 20; i++) {
        snprintf(no, sizeof(no), "O-%d", i);
        ct_place(&t, no, -1000);
    }
    for (int i = 1; i <= 20; i++) {
        snprintf(no, sizeof(no), "O-%d", i);
        ct_send_cancel(&t, t.topic, 0, no, expire);
        if (i == 10)
            ct_send_cancel(&t, t.topic, 0, "BAD-1", expire);
    }
    ct_flush(&t);
    ct_spawn(&t, &p, "c1", t.topic, NULL);

    /* The others are cancelled at once, each through the hook exactly once. */
    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM ordergate.orders WHERE order_no LIKE "
                                    "'O-%' AND status = 'cancelled'",
                                    20, 20000),
                     20);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM shop_t.seen WHERE event = 'cancelled' "
                                   "AND source = 'timeout_consumer'"),
                     20);
    ct_log_wait(&p, "event=hook_failed order_no=BAD-1 hook=" HOOK " sqlstate=P0001", 10000);
    assert_true(ct_metric_now(&p, "ordergate_consumer_hook_failures_total{hook=\"" HOOK "\"}") >=
                1);
    assert_true(ct_metric_now(&p, "ordergate_consumer_claims_total{outcome=\"hook_failed\"}") >= 1);
    /* Retried locally: the offset waits at BAD-1's message meanwhile. */
    for (int i = 0;
         i < 50 &&
         ct_metric_now(&p, "ordergate_consumer_retries_total{reason=\"hook_failed\"}") < 1;
         i++)
        testutil_sleep_ms(100);
    assert_true(ct_metric_now(&p, "ordergate_consumer_retries_total{reason=\"hook_failed\"}") >= 1);
    assert_int_equal(ct_committed(t.group, t.topic, 0) <= 10, 1);

    /* Past hook_retry_ms: dead-lettered with the hook's error, the offset moves to the end. */
    ct_log_wait(&p, "event=hook_dead_lettered order_no=BAD-1 hook=" HOOK, 20000);
    assert_int_equal(ct_wait_committed(&t, t.topic, 0, 21, 15000), 21);
    assert_true(
        ct_metric_now(&p, "ordergate_consumer_retry_given_up_total{reason=\"hook_failed\"}") >= 1);
    assert_int_equal(ct_consume_all(t.dlq, 0, dlq_record, &dlq, 10000), 1);
    assert_string_equal(dlq.key, "BAD-1");
    assert_non_null(strstr(dlq.reason, "hook_failed: sqlstate P0001: hook " HOOK
                                       ": no stock row for order BAD-1"));
    /* The order is untouched: pending, no log row, no event, the hook's writes rolled back. */
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.orders WHERE order_no = "
                                   "'BAD-1' AND status = 'pending_payment'"),
                     1);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.status_log WHERE order_no = "
                                   "'BAD-1'"),
                     0);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.outbox WHERE order_no = "
                                   "'BAD-1'"),
                     0);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM shop_t.seen WHERE order_no = 'BAD-1'"), 0);

    /* Mended: a new message for it (the scanner would send none; it claims by itself). */
    testdb_exec(t.conn, "DELETE FROM shop_t.poison");
    ct_produce_cancel(&t, t.topic, 0, "BAD-1", expire);
    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM ordergate.orders WHERE order_no = "
                                    "'BAD-1' AND status = 'cancelled'",
                                    1, 15000),
                     1);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM shop_t.seen"), 21);
    assert_int_equal(ct_scalar(&t, "SELECT sum(violations) FROM ordergate.reconcile()"), 0);
    assert_int_equal(ct_stop(&p, SIGTERM, 30000), 0);
    ct_teardown(&t);
}

static void test_hook_failing_everyone_stalls(void **state)
{
    static struct ct t;
    struct ct_proc p;
    struct dlq_seen dlq = {0};
    char no[32];
    int64_t expire = 0;

    (void)state;
    ct_setup(&t, "chook2", 1, 0);
    /* A bound far away: a test that saw a dead letter here would have dropped one order of a
     * batch the hook fails whole. */
    ct_config(&t, "hook_retry_ms = 600000;", CT_SHORT_SESSION ", \"auto.commit.interval.ms=300\"");
    hook_setup(&t, "*");
    for (int i = 1; i <= 10; i++) {
        snprintf(no, sizeof(no), "E-%d", i);
        expire = ct_place(&t, no, -1000);
    }
    for (int i = 1; i <= 10; i++) {
        snprintf(no, sizeof(no), "E-%d", i);
        ct_send_cancel(&t, t.topic, 0, no, expire);
    }
    ct_flush(&t);
    ct_spawn(&t, &p, "c1", t.topic, NULL);

    ct_log_wait(&p, "event=hook_failed_batch hook=" HOOK " sqlstate=P0001 orders=10", 20000);
    /* Retried with backoff, not skipped: nothing claimed, nothing dead-lettered, no offset. */
    ct_log_wait(&p, "event=stall_begin", 10000);
    testutil_sleep_ms(3000);
    assert_true(ct_log_count(&p, "event=hook_failed_batch") >= 2);
    assert_true(ct_metric_now(&p, "ordergate_consumer_hook_failures_total{hook=\"" HOOK "\"}") >=
                20);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.status_log"), 0);
    assert_true(ct_committed(t.group, t.topic, 0) <= 0);
    assert_int_equal(ct_consume_all(t.dlq, 0, dlq_record, &dlq, 5000), 0);

    /* Mended: every order is cancelled by the retries, each through the hook once. */
    testdb_exec(t.conn, "DELETE FROM shop_t.poison");
    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM ordergate.orders WHERE status = "
                                    "'cancelled'",
                                    10, 40000),
                     10);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM shop_t.seen"), 10);
    assert_int_equal(ct_wait_committed(&t, t.topic, 0, 10, 15000), 10);
    assert_int_equal(ct_stop(&p, SIGTERM, 30000), 0);
    ct_teardown(&t);
}

static void test_failing_paid_hook_is_recorded_refused(void **state)
{
    static struct ct t;
    struct ct_proc p;
    struct dlq_seen dlq = {0};
    const char *pay =
        "{\"v\":1,\"order_no\":\"PB-1\",\"txn_no\":\"TXN-PB-1\",\"amount_cents\":1000,"
        "\"channel\":\"card\"}";

    (void)state;
    ct_setup(&t, "chook3", 1, CT_PAYMENTS);
    ct_config(&t, "hook_retry_ms = 2000;", CT_SHORT_SESSION ", \"auto.commit.interval.ms=300\"");
    hook_setup(&t, "PB-1");
    ct_place(&t, "PB-1", 3600 * 1000L);
    ct_produce_raw(&t, t.payments, 0, "PB-1", 4, pay, strlen(pay));
    ct_spawn(&t, &p, "c1", t.topic, NULL);

    ct_log_wait(&p, "event=hook_failed order_no=PB-1 txn_no=TXN-PB-1 hook=shop_t.on_paid", 20000);
    ct_log_wait(&p, "event=hook_dead_lettered order_no=PB-1 txn_no=TXN-PB-1", 20000);
    ct_log_wait(&p, "event=payment_refused_recorded", 10000);
    ct_log_wait(&p, "event=dead_lettered", 10000);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.exceptions WHERE order_no = "
                                   "'PB-1' AND kind = 'refused_payment' AND note LIKE "
                                   "'%hook_failed: sqlstate P0001%'"),
                     1);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.orders WHERE order_no = "
                                   "'PB-1' AND status = 'pending_payment'"),
                     1);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.payments"), 0);
    assert_int_equal(ct_consume_all(t.dlq, 0, dlq_record, &dlq, 10000), 1);
    assert_non_null(strstr(dlq.reason, "hook shop_t.on_paid(text[],text)"));
    assert_int_equal(ct_wait_committed(&t, t.payments, 0, 1, 15000), 1);
    assert_int_equal(ct_stop(&p, SIGTERM, 30000), 0);
    ct_teardown(&t);
}

/* A paid hook slower than the statement_timeout: a hook failure like any other (57014 with the
 * marker), so consumer.hook_retry_ms bounds it: recorded refused and dead-lettered, not retried
 * for ever as a database failure. */
static void test_slow_paid_hook_is_bounded(void **state)
{
    static struct ct t;
    struct ct_proc p;
    struct dlq_seen dlq = {0};
    const char *pay =
        "{\"v\":1,\"order_no\":\"PS-1\",\"txn_no\":\"TXN-PS-1\",\"amount_cents\":1000,"
        "\"channel\":\"card\"}";

    (void)state;
    ct_setup(&t, "chook5", 1, CT_PAYMENTS);
    ct_config(&t, "hook_retry_ms = 2000;", CT_SHORT_SESSION ", \"auto.commit.interval.ms=300\"");
    hook_setup(&t, "none");
    testdb_exec(t.conn, "INSERT INTO shop_t.sleep VALUES ('PS-1')");
    ct_place(&t, "PS-1", 3600 * 1000L);
    ct_produce_raw(&t, t.payments, 0, "PS-1", 4, pay, strlen(pay));
    ct_spawn(&t, &p, "c1", t.topic, "--statement-timeout-ms", "1000", NULL);

    ct_log_wait(&p, "event=hook_failed order_no=PS-1 txn_no=TXN-PS-1 hook=shop_t.on_paid", 20000);
    ct_log_wait(&p, "event=hook_dead_lettered order_no=PS-1 txn_no=TXN-PS-1", 30000);
    ct_log_wait(&p, "event=payment_refused_recorded", 10000);
    ct_log_wait(&p, "event=dead_lettered", 10000);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.exceptions WHERE order_no = "
                                   "'PS-1' AND kind = 'refused_payment' AND note LIKE "
                                   "'%hook_failed: sqlstate 57014%'"),
                     1);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.orders WHERE order_no = "
                                   "'PS-1' AND status = 'pending_payment'"),
                     1);
    assert_int_equal(ct_consume_all(t.dlq, 0, dlq_record, &dlq, 10000), 1);
    assert_int_equal(ct_wait_committed(&t, t.payments, 0, 1, 15000), 1);
    assert_int_equal(ct_stop(&p, SIGTERM, 30000), 0);
    ct_teardown(&t);
}

static void test_slow_order_is_isolated(void **state)
{
    static struct ct t;
    struct ct_proc p;
    char no[32];
    int64_t expire = 0;

    (void)state;
    ct_setup(&t, "chook4", 1, 0);
    ct_config(&t, "hook_retry_ms = 3000;", CT_SHORT_SESSION ", \"auto.commit.interval.ms=300\"");
    hook_setup(&t, "none");
    testdb_exec(t.conn, "INSERT INTO shop_t.sleep VALUES ('SLOW-1')");
    expire = ct_place(&t, "SLOW-1", -1000);
    for (int i = 1; i <= 20; i++) {
        snprintf(no, sizeof(no), "Q-%d", i);
        ct_place(&t, no, -1000);
    }
    for (int i = 1; i <= 20; i++) {
        snprintf(no, sizeof(no), "Q-%d", i);
        ct_send_cancel(&t, t.topic, 0, no, expire);
        if (i == 10)
            ct_send_cancel(&t, t.topic, 0, "SLOW-1", expire);
    }
    ct_flush(&t);
    ct_spawn(&t, &p, "c1", t.topic, "--statement-timeout-ms", "1000", NULL);

    /* Every other due order is cancelled, through the hook once each. */
    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM ordergate.orders WHERE order_no LIKE "
                                    "'Q-%' AND status = 'cancelled'",
                                    20, 30000),
                     20);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM shop_t.seen WHERE order_no LIKE 'Q-%'"),
                     20);
    /* The slow one: a hook failure with the timeout's SQLSTATE, dead-lettered past
     * hook_retry_ms, left pending. */
    ct_log_wait(&p, "event=hook_failed order_no=SLOW-1 hook=" HOOK " sqlstate=57014", 20000);
    ct_log_wait(&p, "event=hook_dead_lettered order_no=SLOW-1 hook=" HOOK " sqlstate=57014", 30000);
    assert_int_equal(ct_wait_committed(&t, t.topic, 0, 21, 15000), 21);
    /* Every call of the hook timed (the gate's notices), the cut-off ones too: at least the
     * second each had. */
    assert_true(ct_metric_now(&p, "ordergate_consumer_hook_seconds_count{hook=\"" HOOK "\"}") >= 3);
    assert_true(ct_metric_now(&p, "ordergate_consumer_hook_seconds_sum{hook=\"" HOOK "\"}") >= 1.8);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.orders WHERE order_no = "
                                   "'SLOW-1' AND status = 'pending_payment'"),
                     1);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.status_log WHERE order_no = "
                                   "'SLOW-1'"),
                     0);
    assert_int_equal(ct_scalar(&t, "SELECT sum(violations) FROM ordergate.reconcile()"), 0);
    assert_int_equal(ct_stop(&p, SIGTERM, 30000), 0);
    ct_teardown(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_one_failing_order_is_isolated, ct_cleanup),
        cmocka_unit_test_teardown(test_hook_failing_everyone_stalls, ct_cleanup),
        cmocka_unit_test_teardown(test_failing_paid_hook_is_recorded_refused, ct_cleanup),
        cmocka_unit_test_teardown(test_slow_order_is_isolated, ct_cleanup),
        cmocka_unit_test_teardown(test_slow_paid_hook_is_bounded, ct_cleanup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
