/* A partition whose window is full: more cancels due within the lead than the window holds, all
 * produced before the lead starts. The partition is paused once the window is full and resumed
 * only when the window's head falls due, not fetched, found full and paused again every
 * CONSUMER_MIN_PAUSE_MS for the whole lead (the pauses with a seek are counted in
 * messages_deferred_total); and every order is still cancelled once, never before its due time,
 * with the offset at the partition's end. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "consumer/window.h"
#include "ct.h"
#include "support/testutil.h"

#define ORDERS    (WINDOW_PART_MAX + 300)
#define DUE_IN_MS 6000 /* past the 3 s lead: the first message pauses the partition until it */
/* Pauses with a seek: one until the lead, one when the window is full (2 in all, measured), a few
 * more at most as it drains after the due time. Refetching a full window every 50 ms through the
 * 3 s lead made 31. */
#define DEFERRED_MAX 12

static void test_full_window_waits_for_its_head(void **state)
{
    static struct ct t; /* static: ct_cleanup may tear it down after a failure */
    struct ct_proc p;
    char order[32], sql[512];
    int64_t due;
    double deferred;

    (void)state;
    ct_setup(&t, "cwfull", 1, 0);
    /* Overdue in the database: only the messages' due time holds them back. */
    snprintf(sql, sizeof(sql),
             "SELECT count(ordergate.place_order('W-' || i, 1000, "
             "'[{\"sku\":\"sku-1\",\"qty\":1}]'::jsonb, NULL, now() - interval '1 s')) "
             "FROM generate_series(1, %d) i",
             ORDERS);
    testdb_exec(t.conn, sql);
    ct_spawn(&t, &p, "c1", t.topic, NULL);
    ct_log_wait(&p, "event=partitions_assigned", 30000);
    due = ct_now_ms() + DUE_IN_MS;
    for (int i = 1; i <= ORDERS; i++) {
        snprintf(order, sizeof(order), "W-%d", i);
        ct_send_cancel(&t, t.topic, 0, order, due);
    }
    ct_flush(&t);
    if (ct_now_ms() > due - 3500)
        fail_msg("producing %d messages took until %lld ms before their due time; the lead "
                 "(3 s) must start after it",
                 ORDERS, (long long)(due - ct_now_ms()));

    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM ordergate.orders WHERE status = "
                                    "'cancelled'",
                                    ORDERS, 60000),
                     ORDERS);
    assert_int_equal(ct_wait_committed(&t, t.topic, 0, ct_end_offset(t.topic, 0), 20000),
                     ct_end_offset(t.topic, 0));
    /* Once each, and none before the due time. */
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.status_log"), ORDERS);
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM ordergate.status_log WHERE created_at < "
             "to_timestamp(%lld / 1000.0)",
             (long long)due);
    assert_int_equal(ct_scalar(&t, sql), 0);
    deferred = ct_metric_now(&p, "ordergate_consumer_messages_deferred_total");
    if (deferred < 1 || deferred > DEFERRED_MAX)
        fail_msg("%g pauses with a seek, expected 1 to %d", deferred, DEFERRED_MAX);
    assert_int_equal(ct_stop(&p, SIGTERM, 30000), 0);
    ct_teardown(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_full_window_waits_for_its_head, ct_cleanup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
