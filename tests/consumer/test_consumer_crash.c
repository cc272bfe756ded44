/* kill -9 in the middle of the work, then a restart: the messages after the
 * last committed offset are delivered again, the gate answers
 * already_cancelled for what was done, and at the end every order was
 * cancelled exactly once, by the consumer (nothing skipped), with exactly
 * one transition, one outbox event and one stock return each. */
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
#define N     1200

static void test_kill9_restart(void **state)
{
    static struct ct t; /* static: ct_cleanup may tear it down after a failure */
    struct ct_proc first, second;
    char sql[512], order[32], body[131072];
    long before, after;
    int64_t due;

    (void)state;
    ct_setup(&t, "ccrash", PARTS, 0);
    snprintf(sql, sizeof(sql),
             "SELECT count(ordergate.place_order('K-' || g, 1000, "
             "'[{\"sku\":\"sku-1\",\"qty\":1}]'::jsonb, NULL, now() - interval '1 second')) "
             "FROM generate_series(1, %d) g",
             N);
    assert_int_equal(ct_scalar(&t, sql), N);
    due = ct_now_ms() - 1000;
    for (int i = 1; i <= N; i++) {
        snprintf(order, sizeof(order), "K-%d", i);
        ct_send_cancel(&t, t.topic, -1, order, due);
    }
    ct_flush(&t);

    /* Small batches: many commits, so the kill lands between and inside them. */
    ct_spawn(&t, &first, "first", t.topic, "--batch-size", "4", NULL);
    before = 0;
    for (int i = 0; i < 600 && before < N / 5; i++) {
        testutil_sleep_ms(20);
        before = ct_scalar(&t, "SELECT count(*) FROM ordergate.status_log");
    }
    assert_int_equal(ct_stop(&first, SIGKILL, 10000), 128 + SIGKILL);
    /* A statement the killed process had sent still runs to its end on the
     * server: count only once its sessions are gone. */
    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM pg_stat_activity WHERE datname = "
                                    "current_database() AND application_name LIKE "
                                    "'ordergate-consumer%'",
                                    0, 10000),
                     0);
    before = ct_scalar(&t, "SELECT count(*) FROM ordergate.status_log");
    if (before >= N)
        fail_msg("the consumer finished all %d orders before the kill: nothing was tested", N);
    assert_true(before > 0);

    /* The restarted member picks up from the last committed offsets. */
    ct_spawn(&t, &second, "second", t.topic, "--batch-size", "200", NULL);
    after = ct_wait_scalar(&t, "SELECT count(*) FROM ordergate.orders WHERE status = 'cancelled'",
                           N, 60000);
    assert_int_equal(after, N);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.status_log"), N);
    assert_int_equal(ct_scalar(&t, "SELECT count(DISTINCT order_no) FROM ordergate.status_log"), N);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.status_log WHERE source <> "
                                   "'timeout_consumer'"),
                     0);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.outbox"), N);
    /* Stock: every unit came back exactly once. */
    assert_int_equal(ct_scalar(&t, "SELECT available FROM ordergate.inventory WHERE sku = "
                                   "'sku-1'"),
                     1000000);

    /* The second run saw every message after the last commit: what the
     * first had already done came back as already_cancelled, and the rest
     * was cancelled by it. */
    int port = ct_metrics_port(&second);
    assert_int_equal(ct_http_get(port, "/metrics", body, sizeof(body)), 200);
    double won = ct_metric(body, "ordergate_consumer_claims_total{outcome=\"cancelled\"}");
    double again =
        ct_metric(body, "ordergate_consumer_claims_total{outcome=\"already_cancelled\"}");
    if (won != N - before)
        fail_msg("second run cancelled %g, expected %ld", won, N - before);
    assert_true(again >= 0);
    assert_int_equal(ct_stop(&second, SIGTERM, 30000), 0);
    for (int part = 0; part < PARTS; part++)
        assert_int_equal(ct_committed(t.group, t.topic, part), ct_end_offset(t.topic, part));
    ct_teardown(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_kill9_restart, ct_cleanup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
