/* PostgreSQL goes away while due messages keep coming: first a real restart
 * of the server (pg_ctl restart -m fast; this test runs alone for that), then
 * a longer outage of the test database (no connections for 4 s, sessions
 * killed). The consumer keeps polling, stalls with the batch and every
 * partition paused, retries with backoff, moves no offset, and afterwards every order
 * is cancelled exactly once, none early, nothing lost. */
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
#define N     160

static long cancelled(struct ct *t)
{
    return ct_scalar(t, "SELECT count(*) FROM ordergate.orders WHERE status = 'cancelled'");
}

static void test_database_outages(void **state)
{
    static struct ct t; /* static: ct_cleanup may tear it down after a failure */
    struct ct_proc p;
    char sql[512], order[32];
    int64_t t0;
    bool restarted;

    (void)state;
    ct_setup(&t, "coutage", PARTS, 0);
    /* Due from 1 s to 13 s from now. */
    snprintf(sql, sizeof(sql),
             "SELECT count(ordergate.place_order('U-' || g, 1000, "
             "'[{\"sku\":\"sku-1\",\"qty\":1}]'::jsonb, NULL, "
             "now() + (1000 + g * 12000 / %d) * interval '1 millisecond')) "
             "FROM generate_series(1, %d) g",
             N, N);
    assert_int_equal(ct_scalar(&t, sql), N);
    for (int i = 1; i <= N; i++) {
        snprintf(order, sizeof(order), "U-%d", i);
        snprintf(sql, sizeof(sql),
                 "SELECT ceil(extract(epoch FROM expire_at) * 1000)::bigint FROM ordergate.orders "
                 "WHERE order_no = '%s'",
                 order);
        ct_send_cancel(&t, t.topic, -1, order, ct_scalar(&t, sql));
    }
    ct_flush(&t);
    t0 = ct_now_ms();
    ct_spawn(&t, &p, "c1", t.topic, NULL);
    ct_log_wait(&p, "event=partitions_assigned", 30000);
    while (cancelled(&t) == 0 && ct_now_ms() - t0 < 15000)
        testutil_sleep_ms(50);
    assert_true(cancelled(&t) > 0);

    /* 1. The server restarts (fast shutdown: sessions are cut). */
    restarted = ct_pg_restart();
    if (restarted) {
        ct_reconnect(&t);
    } else {
        /* No local cluster to restart (an existing PostgreSQL was given):
         * cut the consumer's sessions instead. */
        ct_db_outage(&t, true);
        ct_db_outage(&t, false);
    }
    long mid = cancelled(&t);
    assert_true(mid < N);

    /* 2. Four seconds without the database while messages fall due. */
    testutil_sleep_ms(500);
    ct_db_outage(&t, true);
    long frozen = cancelled(&t);
    testutil_sleep_ms(4000);
    /* Nothing can have been cancelled meanwhile, and the consumer stalls. */
    assert_int_equal(cancelled(&t), frozen);
    ct_log_wait(&p, "event=stall_begin", 1000);
    ct_db_outage(&t, false);

    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM ordergate.orders WHERE status = "
                                    "'cancelled'",
                                    N, 40000),
                     N);
    ct_log_wait(&p, "event=stall_end", 5000);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.status_log"), N);
    assert_int_equal(ct_scalar(&t, "SELECT count(DISTINCT order_no) FROM ordergate.status_log"), N);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.outbox WHERE event_type = "
                                   "'order_cancelled'"),
                     N);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.orders WHERE closed_at < "
                                   "expire_at"),
                     0);
    assert_true(ct_log_has(&p, "event=db_retry") || ct_log_has(&p, "event=batch_db_retry"));
    assert_int_equal(ct_stop(&p, SIGTERM, 30000), 0);
    for (int part = 0; part < PARTS; part++)
        assert_int_equal(ct_committed(t.group, t.topic, part), ct_end_offset(t.topic, part));
    print_message("PostgreSQL %s; %ld of %d cancelled before the outage\n",
                  restarted ? "restarted with pg_ctl" : "sessions terminated", frozen, N);
    ct_teardown(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_database_outages, ct_cleanup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
