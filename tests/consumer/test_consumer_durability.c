/* The consumer looks at the server's commit settings before it claims anything: on a database
 * whose commits may be lost after a crash (here synchronous_commit = off for the test database,
 * as ALTER DATABASE sets it for every session), a claim could vanish after its offset was
 * committed, so the consumer refuses to run, saying why in one line; with
 * consumer.allow_nondurable it runs, says so once and exports ordergate_consumer_commit_durable
 * 0. On an ordinary database the gauge is 1 and, without synchronous standbys,
 * ordergate_consumer_commit_replicated 0. */
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

static void set_sync_commit_off(struct ct *t)
{
    char sql[200];

    snprintf(sql, sizeof(sql), "ALTER DATABASE %s SET synchronous_commit = off", t->db.name);
    testdb_exec(t->conn, sql);
}

static void test_durable_database(void **state)
{
    static struct ct t;
    struct ct_proc p;

    (void)state;
    ct_setup(&t, "cdurable", 1, 0);
    ct_spawn(&t, &p, "c1", t.topic, NULL);
    assert_true(ct_metric_wait(&p, "ordergate_consumer_commit_durable", 1, 10000) == 1);
    assert_true(ct_metric_wait(&p, "ordergate_consumer_commit_replicated", 0, 10000) == 0);
    assert_true(ct_log_has(&p, "event=commit_durable fsync=on synchronous_commit=on"));
    assert_int_equal(ct_stop(&p, SIGTERM, 30000), 0);
    ct_teardown(&t);
}

static void test_nondurable_database_refused(void **state)
{
    static struct ct t;
    struct ct_proc p;

    (void)state;
    ct_setup(&t, "cnondur", 1, 0);
    set_sync_commit_off(&t);
    ct_spawn(&t, &p, "c1", t.topic, NULL);
    assert_int_equal(ct_wait_exit(&p, 20000), 1);
    assert_int_equal(ct_log_count(&p, "event=commit_not_durable"), 1);
    assert_true(ct_log_has(&p, "synchronous_commit=off"));
    assert_true(ct_log_has(&p, "set consumer.allow_nondurable to run anyway"));
    ct_teardown(&t);
}

static void test_nondurable_database_allowed(void **state)
{
    static struct ct t;
    struct ct_proc p;
    int64_t expire;

    (void)state;
    ct_setup(&t, "cnondura", 1, 0);
    ct_config(&t, "allow_nondurable = true;", CT_SHORT_SESSION);
    set_sync_commit_off(&t);
    expire = ct_place(&t, "D-1", -1000);
    ct_produce_cancel(&t, t.topic, 0, "D-1", expire);
    ct_spawn(&t, &p, "c1", t.topic, NULL);
    assert_true(ct_metric_wait(&p, "ordergate_consumer_commit_durable", 0, 10000) == 0);
    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM ordergate.orders WHERE status = "
                                    "'cancelled'",
                                    1, 20000),
                     1);
    assert_int_equal(ct_log_count(&p, "event=commit_not_durable"), 1);
    assert_true(ct_log_has(&p, "running because consumer.allow_nondurable is set"));
    assert_int_equal(ct_stop(&p, SIGTERM, 30000), 0);
    ct_teardown(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_durable_database, ct_cleanup),
        cmocka_unit_test_teardown(test_nondurable_database_refused, ct_cleanup),
        cmocka_unit_test_teardown(test_nondurable_database_allowed, ct_cleanup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
