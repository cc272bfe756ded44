/* Static group membership (kafka.group_instance_id).
 *
 * A static member killed with -9 and started again under the same instance id gets its
 * partitions back without a rebalance: the other member keeps exactly what it had, and the
 * orders that fell due meanwhile are cancelled exactly once.
 *
 * Two running instances with one id are a misconfiguration: the broker fences the older one,
 * which first joins again under its id (a fence can also be the coordinator's doing,
 * consumer/fence.h) and so fences the newer one, which does the same; fenced a second time
 * soon after its rejoin, the older one logs one group_instance_fenced line and exits 2, while
 * the newer one goes on and cancels every order exactly once.
 *
 * Fenced by a join of its id whose process is gone (what a coordinator that moves does to a
 * static member), a consumer joins again and works on. */
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

static const char *cancelled_sql = "SELECT count(*) FROM ordergate.orders WHERE status = "
                                   "'cancelled'";

/* n orders O-<from>..O-<from+n-1>, due at once, one cancel message each. */
static void place_due(struct ct *t, const char *prefix, int from, int n)
{
    char sql[512], order[32];
    int64_t due = ct_now_ms() - 1000;

    snprintf(sql, sizeof(sql),
             "SELECT count(ordergate.place_order('%s-' || g, 1000, "
             "'[{\"sku\":\"sku-1\",\"qty\":1}]'::jsonb, NULL, now() - interval '1 second')) "
             "FROM generate_series(%d, %d) g",
             prefix, from, from + n - 1);
    assert_int_equal(ct_scalar(t, sql), n);
    for (int i = from; i < from + n; i++) {
        snprintf(order, sizeof(order), "%s-%d", prefix, i);
        ct_send_cancel(t, t->topic, -1, order, due);
    }
    ct_flush(t);
}

static void assert_exactly_once(struct ct *t, long n)
{
    assert_int_equal(ct_wait_scalar(t, cancelled_sql, n, 30000), n);
    assert_int_equal(ct_scalar(t, "SELECT count(*) FROM ordergate.status_log"), n);
    assert_int_equal(ct_scalar(t, "SELECT count(DISTINCT order_no) FROM ordergate.status_log"), n);
    assert_int_equal(ct_scalar(t, "SELECT count(*) FROM ordergate.outbox WHERE event_type = "
                                  "'order_cancelled'"),
                     n);
}

static void test_restart_keeps_partitions(void **state)
{
    static struct ct t; /* static: ct_cleanup may tear it down after a failure */
    struct ct_proc a, b, b2;
    int a_assigned, a_revoked;

    (void)state;
    ct_setup(&t, "cstatic", PARTS, 0);
    ct_spawn(&t, &a, "a", t.topic, "--group-instance-id", "og-test-a", NULL);
    ct_log_wait(&a, "membership=static instance_id=og-test-a", 10000);
    ct_log_wait(&a, "event=partitions_assigned", 30000);
    ct_spawn(&t, &b, "b", t.topic, "--group-instance-id", "og-test-b", NULL);
    ct_log_wait(&b, "event=partitions_assigned", 30000);
    place_due(&t, "S", 1, 40);
    assert_exactly_once(&t, 40);
    a_assigned = ct_log_count(&a, "event=partitions_assigned");
    a_revoked = ct_log_count(&a, "event=partitions_revoked");

    /* B dies and comes back at once, as systemd or a StatefulSet restarts it. */
    assert_int_equal(ct_stop(&b, SIGKILL, 10000), 128 + SIGKILL);
    place_due(&t, "S", 41, 40);
    ct_spawn(&t, &b2, "b2", t.topic, "--group-instance-id", "og-test-b", NULL);
    ct_log_wait(&b2, "event=partitions_assigned", 30000);
    assert_exactly_once(&t, 80);
    /* Past the session timeout of the dead process (4 s here): still no rebalance for A. */
    testutil_sleep_ms(5000);
    assert_int_equal(ct_log_count(&a, "event=partitions_assigned"), a_assigned);
    assert_int_equal(ct_log_count(&a, "event=partitions_revoked"), a_revoked);
    assert_false(ct_log_has(&a, "event=partitions_lost"));

    assert_int_equal(ct_stop(&b2, SIGTERM, 15000), 0);
    assert_int_equal(ct_stop(&a, SIGTERM, 15000), 0);
    for (int part = 0; part < PARTS; part++)
        assert_int_equal(ct_committed(t.group, t.topic, part), ct_end_offset(t.topic, part));
    ct_teardown(&t);
}

/* A consumer under instance id `id` that has cancelled 20 orders (<prefix>-1..20), then a second
 * process started under the same id. */
static void start_twins(struct ct *t, const char *tag, const char *prefix, const char *id,
                        struct ct_proc *first, struct ct_proc *second)
{
    ct_setup(t, tag, PARTS, 0);
    place_due(t, prefix, 1, 20);
    ct_spawn(t, first, "first", t->topic, "--group-instance-id", id, NULL);
    ct_log_wait(first, "event=partitions_assigned", 30000);
    assert_exactly_once(t, 20);
    ct_spawn(t, second, "second", t->topic, "--group-instance-id", id, NULL);
}

static void test_same_instance_id_fenced(void **state)
{
    static struct ct t;
    struct ct_proc first, second;

    (void)state;
    start_twins(&t, "cfence", "F", "og-test-twin", &first, &second);
    /* The older member is the one fenced, twice: a rejoin, then one clear line and exit 2
     * (configuration). */
    assert_int_equal(ct_wait_exit(&first, 30000), 2);
    assert_int_equal(ct_log_count(&first, "event=group_instance_rejoin"), 1);
    assert_int_equal(ct_log_count(&first, "event=group_rejoin "), 1);
    assert_int_equal(ct_log_count(&first, "event=group_instance_fenced"), 1);
    assert_true(ct_log_has(&first, "instance_id=og-test-twin"));
    assert_false(ct_log_has(&first, "event=consumer_fatal"));
    assert_int_equal(ct_log_count(&first, "level=error"),
                     ct_log_count(&first, "level=error prog=ordergate-consumer event=kafka_log") +
                         1);

    /* The newer one owns the group and works on. */
    ct_log_wait(&second, "event=partitions_assigned", 30000);
    place_due(&t, "F", 21, 20);
    assert_exactly_once(&t, 40);
    assert_false(ct_log_has(&second, "event=group_instance_fenced"));
    /* Fenced once by the older one's rejoin, it joined again and kept the id. */
    assert_int_equal(ct_log_count(&second, "event=group_instance_rejoin"), 1);
    assert_int_equal(ct_log_count(&second, "event=group_rejoin "), 1);
    assert_int_equal(ct_stop(&second, SIGTERM, 15000), 0);
    ct_teardown(&t);
}

/* Fenced with nobody left holding the id, as when the coordinator's broker dies (the new
 * coordinator fenced both static members of the cluster drill's group, consumer/fence.h): here
 * a process joins with A's id and is gone before A answers. A joins again under its id, once,
 * and goes on cancelling every order exactly once; it does not exit. */
static void test_fenced_by_departed_twin_rejoins(void **state)
{
    static struct ct t;
    struct ct_proc a, ghost;

    (void)state;
    /* The ghost takes A's place and stops at once (SIGSTOP: it answers nothing more), then dies
     * once A has been fenced, before A's rejoin (FENCE_BACKOFF_MS later). */
    start_twins(&t, "cghost", "G", "og-test-ghost", &a, &ghost);
    ct_log_wait(&ghost, "event=partitions_assigned", 30000);
    kill(ghost.pid, SIGSTOP);
    ct_log_wait(&a, "event=group_instance_", 30000);
    assert_int_equal(ct_stop(&ghost, SIGKILL, 10000), 128 + SIGKILL);

    ct_log_wait(&a, "event=group_rejoin ", 30000);
    place_due(&t, "G", 21, 20);
    assert_exactly_once(&t, 40);
    assert_int_equal(ct_log_count(&a, "event=group_instance_rejoin"), 1);
    assert_false(ct_log_has(&a, "event=group_instance_fenced"));
    assert_int_equal(ct_stop(&a, SIGTERM, 15000), 0);
    for (int part = 0; part < PARTS; part++)
        assert_int_equal(ct_committed(t.group, t.topic, part), ct_end_offset(t.topic, part));
    ct_teardown(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_restart_keeps_partitions, ct_cleanup),
        cmocka_unit_test_teardown(test_same_instance_id_fenced, ct_cleanup),
        cmocka_unit_test_teardown(test_fenced_by_departed_twin_rejoins, ct_cleanup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
