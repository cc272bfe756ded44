/* The takeover drill: two consumers with static group membership, orders falling due
 * continuously, and one consumer SIGKILLed and started again at once, several times (the
 * two in turn). Every order ends cancelled exactly once, by the consumers, never early; the
 * lateness (expire_at to closed_at) is printed as p50/p99/max, not asserted.
 *
 * The same drill at benchmark length is tools/bench/consumer_takeover.sh, which sets:
 *   OG_TAKEOVER_SECONDS     how long orders keep falling due (default 20)
 *   OG_TAKEOVER_KILL_EVERY  seconds between two kills (default 5)
 *   OG_TAKEOVER_RATE        orders falling due per second (default 20)
 * The consumers run with the product's group settings (session.timeout.ms 10 s). */
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

static long env_long(const char *name, long def, long min, long max)
{
    const char *v = getenv(name);
    char *end = NULL;
    long n;

    if (v == NULL || *v == '\0')
        return def;
    n = strtol(v, &end, 10);
    if (*end != '\0' || n < min || n > max)
        fail_msg("%s=%s: expected an integer in %ld..%ld", name, v, min, max);
    return n;
}

static void spawn(struct ct *t, struct ct_proc *p, int who, int round)
{
    char name[32];

    snprintf(name, sizeof(name), "%c%d", 'a' + who, round);
    ct_spawn(t, p, name, t->topic, "--group-instance-id", who ? "og-drill-b" : "og-drill-a", NULL);
}

static void test_takeover_drill(void **state)
{
    static struct ct t; /* static: ct_cleanup may tear it down after a failure */
    struct ct_proc procs[2];
    char sql[768], order[32];
    long seconds = env_long("OG_TAKEOVER_SECONDS", 20, 5, 86400);
    long every = env_long("OG_TAKEOVER_KILL_EVERY", 5, 1, 3600);
    long rate = env_long("OG_TAKEOVER_RATE", 20, 1, 10000);
    long n = seconds * rate;
    int64_t start, next_kill;
    int kills = 0;
    long early;
    PGresult *res;

    (void)state;
    ct_setup(&t, "cdrill", PARTS, 0);
    /* The product's session settings: no kafka.properties. */
    ct_config(&t, "", "");
    /* The consumers first, so that joining the group is not counted as lateness. */
    spawn(&t, &procs[0], 0, 0);
    spawn(&t, &procs[1], 1, 0);
    ct_log_wait(&procs[0], "event=partitions_assigned", 30000);
    ct_log_wait(&procs[1], "event=partitions_assigned", 30000);
    /* Orders due evenly over `seconds`, from 3 s plus 1 ms per order on (now() is the start
     * of the placing statement: the lead covers placing them and producing their cancels,
     * which go out at once). */
    snprintf(sql, sizeof(sql),
             "SELECT count(ordergate.place_order('D-' || g, 1000, "
             "'[{\"sku\":\"sku-1\",\"qty\":1}]'::jsonb, NULL, "
             "now() + (3000 + %ld + (g - 1) * %ld / %ld) * interval '1 millisecond')) "
             "FROM generate_series(1, %ld) g",
             n, seconds * 1000, n, n);
    assert_int_equal(ct_scalar(&t, sql), n);
    res = PQexec(t.conn, "SELECT order_no, ceil(extract(epoch FROM expire_at) * 1000)::bigint "
                         "FROM ordergate.orders ORDER BY expire_at");
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    assert_int_equal(PQntuples(res), n);
    for (long i = 0; i < n; i++) {
        snprintf(order, sizeof(order), "%s", PQgetvalue(res, (int)i, 0));
        ct_send_cancel(&t, t.topic, -1, order, strtoll(PQgetvalue(res, (int)i, 1), NULL, 10));
    }
    PQclear(res);
    ct_flush(&t);
    /* Orders that were due before their message was out: their lateness is the setup's. */
    early = ct_scalar(&t, "SELECT count(*) FROM ordergate.orders WHERE expire_at < now()");

    /* Kill one, start it again at once; the other one next time. */
    start = ct_now_ms();
    next_kill = start + every * 1000;
    while (ct_now_ms() < start + (seconds + 3) * 1000) {
        if (ct_now_ms() >= next_kill) {
            int who = kills % 2;
            assert_int_equal(ct_stop(&procs[who], SIGKILL, 10000), 128 + SIGKILL);
            kills++;
            spawn(&t, &procs[who], who, kills);
            next_kill += every * 1000;
        }
        testutil_sleep_ms(50);
    }
    assert_true(kills >= 2);

    /* Exactly once: one transition, one outbox event, one stock return per order. */
    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM ordergate.orders WHERE status = "
                                    "'cancelled'",
                                    n, 60000),
                     n);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.status_log"), n);
    assert_int_equal(ct_scalar(&t, "SELECT count(DISTINCT order_no) FROM ordergate.status_log"), n);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.status_log WHERE source <> "
                                   "'timeout_consumer'"),
                     0);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.outbox WHERE event_type = "
                                   "'order_cancelled'"),
                     n);
    assert_int_equal(ct_scalar(&t, "SELECT available FROM ordergate.inventory WHERE sku = "
                                   "'sku-1'"),
                     1000000);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.orders WHERE closed_at < "
                                   "expire_at"),
                     0);

    res = PQexec(t.conn,
                 "SELECT round(percentile_disc(0.5) WITHIN GROUP (ORDER BY l) * 1000), "
                 "round(percentile_disc(0.99) WITHIN GROUP (ORDER BY l) * 1000), "
                 "round(max(l) * 1000) FROM (SELECT extract(epoch FROM closed_at - expire_at) "
                 "AS l FROM ordergate.orders) x");
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    printf("# takeover drill: %ld orders over %ld s, %d kills (every %ld s, restarted at once): "
           "lateness p50 %s ms, p99 %s ms, max %s ms (%ld orders were due before their "
           "message was produced)\n",
           n, seconds, kills, every, PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1),
           PQgetvalue(res, 0, 2), early);
    PQclear(res);

    for (int who = 0; who < 2; who++)
        assert_int_equal(ct_stop(&procs[who], SIGTERM, 10000), 0);
    ct_teardown(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_takeover_drill, ct_cleanup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
