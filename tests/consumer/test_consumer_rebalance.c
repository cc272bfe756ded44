/* Two consumers in one group over two delay topics: the second joins while
 * the first is waiting on paused partitions and working through due ones.
 * The cooperative rebalance moves some partitions (the first consumer keeps
 * the rest, and its pauses there), every order is cancelled exactly once and
 * never early, and both leave with every offset committed. */
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
#define N     240

static double metric_of(const struct ct_proc *p, const char *sample)
{
    static char body[131072];
    double v;

    assert_int_equal(ct_http_get(ct_metrics_port(p), "/metrics", body, sizeof(body)), 200);
    v = ct_metric(body, sample);
    return v < 0 ? 0 : v;
}

static void test_two_consumers_rebalance(void **state)
{
    static struct ct t; /* static: ct_cleanup may tear it down after a failure */
    struct ct_proc a, b;
    char topics[300], sql[512], order[32];
    int64_t start;
    long done;

    (void)state;
    ct_setup(&t, "creb", PARTS, 0);
    /* Orders due from 3 s to 13 s from now, spread over both topics; their
     * due times read back in one query so the messages go out at once. */
    snprintf(sql, sizeof(sql),
             "SELECT count(ordergate.place_order('R-' || g, 1000, "
             "'[{\"sku\":\"sku-1\",\"qty\":1}]'::jsonb, NULL, "
             "now() + (3000 + g * 10000 / %d) * interval '1 millisecond')) "
             "FROM generate_series(1, %d) g",
             N, N);
    assert_int_equal(ct_scalar(&t, sql), N);
    PGresult *res = PQexec(t.conn, "SELECT order_no, ceil(extract(epoch FROM expire_at) * 1000)"
                                   "::bigint FROM ordergate.orders ORDER BY expire_at");
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    assert_int_equal(PQntuples(res), N);
    for (int i = 0; i < N; i++) {
        snprintf(order, sizeof(order), "%s", PQgetvalue(res, i, 0));
        ct_send_cancel(&t, i % 2 ? t.topic : t.topic2, -1, order,
                       strtoll(PQgetvalue(res, i, 1), NULL, 10));
    }
    PQclear(res);
    ct_flush(&t);
    start = ct_now_ms();

    snprintf(topics, sizeof(topics), "%s,%s", t.topic, t.topic2);
    ct_spawn(&t, &a, "a", topics, NULL);
    ct_log_wait(&a, "event=partitions_assigned", 30000);
    /* B joins once A is at work: cancelling due orders, paused on the rest. */
    while (ct_scalar(&t, "SELECT count(*) FROM ordergate.orders WHERE status = 'cancelled'") == 0 &&
           ct_now_ms() - start < 30000)
        testutil_sleep_ms(50);
    ct_spawn(&t, &b, "b", topics, NULL);
    ct_log_wait(&b, "event=partitions_assigned", 30000);
    /* Cooperative: A gives up some partitions, not all, and is not reassigned all. */
    ct_log_wait(&a, "event=partitions_revoked", 30000);
    assert_true(ct_log_has(&a, "protocol=cooperative"));
    assert_true(ct_log_has(&b, "protocol=cooperative"));

    done = ct_wait_scalar(&t, "SELECT count(*) FROM ordergate.orders WHERE status = 'cancelled'", N,
                          40000);
    assert_int_equal(done, N);
    /* Exactly once: one transition and one outbox event per order. */
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.status_log"), N);
    assert_int_equal(ct_scalar(&t, "SELECT count(DISTINCT order_no) FROM ordergate.status_log"), N);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.outbox WHERE event_type = "
                                   "'order_cancelled'"),
                     N);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.orders WHERE closed_at < "
                                   "expire_at"),
                     0);
    /* Both did part of the work, and together exactly all of it. */
    double ca = metric_of(&a, "ordergate_consumer_claims_total{outcome=\"cancelled\"}");
    double cb = metric_of(&b, "ordergate_consumer_claims_total{outcome=\"cancelled\"}");
    if (ca + cb != N || ca == 0 || cb == 0)
        fail_msg("cancelled by A %g, by B %g, expected both > 0 and %d together", ca, cb, N);
    /* Nobody asked the database early. */
    assert_true(metric_of(&a, "ordergate_consumer_claims_total{outcome=\"not_due\"}") == 0);
    assert_true(metric_of(&b, "ordergate_consumer_claims_total{outcome=\"not_due\"}") == 0);

    assert_int_equal(ct_stop(&b, SIGTERM, 30000), 0);
    assert_int_equal(ct_stop(&a, SIGTERM, 30000), 0);
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
    ct_teardown(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_two_consumers_rebalance, ct_cleanup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
