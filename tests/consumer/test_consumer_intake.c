/* The intake while a claim is outstanding: the consumer takes in and decodes the messages that
 * arrive while its claim waits for the database, and stores no offset for any of them, nor for
 * the claim's own message, until the claim that covers it has committed; also when the claim's
 * connection is dropped while the claim is outstanding, and the claim is tried again.
 *
 * The claim is held outstanding by a lock it waits for (the stock row, held by an open
 * transaction, as an order service's place_order would), with the lock timeout raised, so the
 * test does not depend on timing: everything it checks happens while the claim cannot finish. */
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
#define LATER 20 /* messages produced while the claim is outstanding, half per partition */

/* The consumer's sessions waiting for a lock (its claim, stuck on the stock row). */
#define SQL_CLAIM_WAITING                                                                          \
    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND "                \
    "application_name LIKE 'ordergate-consumer%' AND wait_event_type = 'Lock'"

static void assert_nothing_committed(const struct ct *t)
{
    /* -1001: no offset committed for the partition (the claim of its first message has not
     * committed, so nothing may be). */
    for (int part = 0; part < PARTS; part++) {
        int64_t committed = ct_committed(t->group, t->topic, part);
        if (committed >= 0)
            fail_msg("partition %d: offset %lld committed while its claim is outstanding", part,
                     (long long)committed);
    }
}

static void test_intake_stores_no_offset_before_the_commit(void **state)
{
    static struct ct t; /* static: ct_cleanup may tear it down after a failure */
    struct ct_proc p;
    char order[32], sql[256];
    PGconn *locker;
    int64_t expire;
    double consumed;

    (void)state;
    ct_setup(&t, "cintake", PARTS, 0);
    ct_config(&t, "", CT_SHORT_SESSION ", \"auto.commit.interval.ms=200\"");
    expire = ct_place(&t, "S-1", -1000);
    for (int i = 1; i <= LATER; i++) {
        snprintf(order, sizeof(order), "D-%d", i);
        ct_place(&t, order, -1000);
    }
    ct_spawn(&t, &p, "c1", t.topic, "--lock-timeout-ms", "120000", NULL);
    ct_log_wait(&p, "event=partitions_assigned", 30000);

    /* The claim of S-1 waits for the stock row. */
    locker = testdb_connect(&t.db);
    testdb_exec(locker, "BEGIN");
    testdb_exec(locker, "SELECT 1 FROM ordergate.inventory WHERE sku = 'sku-1' FOR UPDATE");
    ct_produce_cancel(&t, t.topic, 0, "S-1", expire);
    assert_int_equal(ct_wait_scalar(&t, SQL_CLAIM_WAITING, 1, 20000), 1);

    /* Due messages arrive on both partitions meanwhile: taken in while the claim is out. */
    for (int i = 1; i <= LATER; i++) {
        snprintf(order, sizeof(order), "D-%d", i);
        ct_send_cancel(&t, t.topic, i <= LATER / 2 ? 0 : 1, order, expire);
    }
    ct_flush(&t);
    snprintf(sql, sizeof(sql), "ordergate_consumer_messages_consumed_total{topic=\"%s\"}", t.topic);
    consumed = ct_metric_wait(&p, sql, 1 + LATER, 20000);
    if (consumed != 1 + LATER)
        fail_msg("consumed %g messages while the claim was outstanding, expected %d", consumed,
                 1 + LATER);
    assert_int_equal(ct_scalar(&t, SQL_CLAIM_WAITING), 1);
    /* Several auto-commit intervals: nothing stored, nothing committed, nothing cancelled. */
    testutil_sleep_ms(1500);
    assert_nothing_committed(&t);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.status_log"), 0);

    /* The claim's connection drops while the claim is outstanding: the claim fails, is tried
     * again (stuck again on the same lock), and still nothing is stored. */
    assert_true(ct_scalar(&t, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                              "WHERE datname = current_database() AND application_name LIKE "
                              "'ordergate-consumer%'") >= 1);
    ct_log_wait(&p, "event=batch_retry", 20000);
    assert_int_equal(ct_wait_scalar(&t, SQL_CLAIM_WAITING, 1, 20000), 1);
    testutil_sleep_ms(1000);
    assert_nothing_committed(&t);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.status_log"), 0);

    /* The lock goes: every order is cancelled once, and the offsets reach the ends. */
    testdb_exec(locker, "ROLLBACK");
    PQfinish(locker);
    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM ordergate.orders WHERE status = "
                                    "'cancelled'",
                                    1 + LATER, 30000),
                     1 + LATER);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.status_log"), 1 + LATER);
    for (int part = 0; part < PARTS; part++)
        assert_int_equal(ct_wait_committed(&t, t.topic, part, ct_end_offset(t.topic, part), 20000),
                         ct_end_offset(t.topic, part));
    assert_int_equal(ct_stop(&p, SIGTERM, 30000), 0);
    ct_teardown(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_intake_stores_no_offset_before_the_commit, ct_cleanup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
