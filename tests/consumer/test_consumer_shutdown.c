/* SIGTERM while the group is rebalancing: the consumer exits within 10 s, and no committed
 * offset is past a message whose order was not claimed.
 *
 * A and B share the group; B is stopped (SIGSTOP) with a long session timeout, and C joins:
 * the coordinator waits for B to rejoin (PreparingRebalance) and cannot finish the round
 * before B's session expires (30 s). A gets SIGTERM in that state: its final commit is
 * refused (a generation in flux) and a group leave would wait for the round. Half of the
 * orders fall due only after the test ends, so every partition holds unclaimed messages
 * behind the claimed ones. */
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
#define N     200

/* Per message below the committed offset of its partition: the order was claimed. */
struct scan {
    struct ct *t;
    int64_t committed;
    int below, unclaimed;
};

static void scan_message(void *arg, const rd_kafka_message_t *m)
{
    struct scan *s = arg;
    char sql[256];

    if (m->offset >= s->committed)
        return;
    s->below++;
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM ordergate.orders WHERE order_no = '%.*s' AND status = "
             "'cancelled'",
             (int)m->key_len, (const char *)m->key);
    if (ct_scalar(s->t, sql) != 1)
        s->unclaimed++;
}

static void test_sigterm_during_rebalance(void **state)
{
    static struct ct t; /* static: ct_cleanup may tear it down after a failure */
    struct ct_proc a, b, c;
    char sql[512], order[32];
    int64_t now, t0;
    const char *gs = "?";
    int status;

    (void)state;
    ct_setup(&t, "cshut", PARTS, 0);
    /* Odd orders due now, even ones in 10 minutes: every partition holds claimed messages, then
     * unclaimed ones. */
    snprintf(sql, sizeof(sql),
             "SELECT count(ordergate.place_order('T-' || g, 1000, "
             "'[{\"sku\":\"sku-1\",\"qty\":1}]'::jsonb, NULL, "
             "now() + CASE WHEN g %% 2 = 1 THEN interval '-1 second' ELSE interval '10 minutes' "
             "END)) FROM generate_series(1, %d) g",
             N);
    assert_int_equal(ct_scalar(&t, sql), N);
    now = ct_now_ms();
    /* The due ones first: a partition waits behind its first message that is not due. */
    for (int odd = 1; odd >= 0; odd--) {
        for (int i = 1; i <= N; i++) {
            if (i % 2 != odd)
                continue;
            snprintf(order, sizeof(order), "T-%d", i);
            ct_send_cancel(&t, t.topic, -1, order, odd ? now - 1000 : now + 600000);
        }
        ct_flush(&t);
    }

    /* B may stay silent for 30 s before the group gives up on it. */
    ct_config(&t, "", "\"session.timeout.ms=30000\", \"heartbeat.interval.ms=1000\"");
    ct_spawn(&t, &a, "a", t.topic, NULL);
    ct_log_wait(&a, "event=partitions_assigned", 30000);
    ct_spawn(&t, &b, "b", t.topic, NULL);
    ct_log_wait(&b, "event=partitions_assigned", 30000);
    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM ordergate.orders WHERE status = "
                                    "'cancelled'",
                                    N / 2, 30000),
                     N / 2);
    /* Both hold partitions (the second round of the cooperative join is done). */
    for (long waited = 0; waited < 20000; waited += 100) {
        gs = ct_group_state(t.group);
        if (strcmp(gs, "Stable") == 0 && ct_log_count(&a, "event=partitions_revoked") > 0)
            break;
        testutil_sleep_ms(100);
    }
    assert_string_equal(gs, "Stable");

    kill(b.pid, SIGSTOP);
    ct_spawn(&t, &c, "c", t.topic, NULL);
    for (long waited = 0; waited < 20000; waited += 100) {
        gs = ct_group_state(t.group);
        if (strcmp(gs, "PreparingRebalance") == 0)
            break;
        testutil_sleep_ms(100);
    }
    assert_string_equal(gs, "PreparingRebalance");
    /* A learns of the round from its next heartbeat (every second) and sends its JoinGroup,
     * which the coordinator holds until the round completes; the broker answers nothing else
     * on that connection meanwhile. Past two heartbeats, A's join is in flight. */
    testutil_sleep_ms(2500);
    assert_string_equal(ct_group_state(t.group), "PreparingRebalance");

    t0 = ct_now_ms();
    status = ct_stop(&a, SIGTERM, 10000);
    if (status != 0)
        fail_msg("A exited with %d after %lld ms (log %s)", status, (long long)(ct_now_ms() - t0),
                 a.log);
    printf("# A stopped %lld ms after SIGTERM (group %s)\n", (long long)(ct_now_ms() - t0),
           ct_group_state(t.group));
    assert_true(ct_log_has(&a, "event=shutdown_begin"));
    assert_true(ct_log_has(&a, "event=stopped status=0"));

    kill(b.pid, SIGKILL);
    ct_wait_exit(&b, 10000);
    assert_int_equal(ct_stop(&c, SIGTERM, 10000), 0);

    /* No committed offset passed an order that was not claimed, and nothing early. */
    for (int part = 0; part < PARTS; part++) {
        struct scan s = {&t, ct_committed(t.group, t.topic, part), 0, 0};
        if (s.committed < 0)
            continue;
        ct_consume_all(t.topic, part, scan_message, &s, 20000);
        if (s.unclaimed > 0)
            fail_msg("partition %d: committed %lld, %d of the %d messages below it not claimed",
                     part, (long long)s.committed, s.unclaimed, s.below);
    }
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.orders WHERE status = "
                                   "'cancelled' AND closed_at < expire_at"),
                     0);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.status_log"), N / 2);
    ct_teardown(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_sigterm_during_rebalance, ct_cleanup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
