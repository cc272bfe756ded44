/* The consumer through a transaction-pooling PgBouncer (deploy/local/services.sh, pool size 2):
 * two consumers (four client connections: two loops, two outbox relays) share two server
 * connections; cancels are consumed, the orders cancelled once each, the outbox published and
 * the offsets committed. Then PgBouncer is restarted (every client and server connection
 * dropped at once) while a claim is running: nothing is lost, nothing applied twice
 * (reconcile() finds no violation, one transition, one outbox event and one hook call per
 * order), and one log line says what happened. Fails, never skips, without the pooler. */
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

static char pooled[200];

/* Every partition of both topics committed up to its end. */
static void wait_committed(struct ct *t, long timeout_ms)
{
    int64_t deadline = ct_now_ms() + timeout_ms;
    const char *topics[] = {t->topic, t->topic2};

    for (;;) {
        int behind = 0;
        for (int k = 0; k < 2; k++)
            for (int p = 0; p < PARTS; p++) {
                int64_t end = ct_end_offset(topics[k], p);
                int64_t c = ct_committed(t->group, topics[k], p);
                if (end > 0 && c != end)
                    behind++;
            }
        if (behind == 0)
            return;
        if (ct_now_ms() > deadline)
            fail_msg("%d partitions not committed to their end", behind);
        testutil_sleep_ms(200);
    }
}

/* Exactly once: one transition and one outbox event per cancelled order, none for the
 * others; the books balance. */
static void assert_once(struct ct *t, long cancelled)
{
    assert_int_equal(ct_scalar(t, "SELECT count(*) FROM ordergate.orders WHERE status = "
                                  "'cancelled'"),
                     cancelled);
    assert_int_equal(ct_scalar(t, "SELECT count(*) FROM ordergate.status_log"), cancelled);
    assert_int_equal(ct_scalar(t, "SELECT count(*) FROM (SELECT order_no FROM "
                                  "ordergate.status_log GROUP BY order_no HAVING count(*) > 1) d"),
                     0);
    assert_int_equal(ct_scalar(t, "SELECT count(*) FROM ordergate.outbox WHERE event_type = "
                                  "'order_cancelled'"),
                     cancelled);
    assert_int_equal(ct_scalar(t, "SELECT coalesce(sum(violations), 0) FROM ordergate.reconcile()"),
                     0);
}

static void place_and_send(struct ct *t, const char *prefix, int n)
{
    char no[32];

    for (int i = 1; i <= n; i++) {
        snprintf(no, sizeof(no), "%s-%d", prefix, i);
        int64_t due = ct_place(t, no, -1000);
        ct_send_cancel(t, i % 2 ? t->topic : t->topic2, -1, no, due);
        if (i % 5 == 0) /* some delivered twice */
            ct_send_cancel(t, i % 2 ? t->topic : t->topic2, -1, no, due);
    }
    ct_flush(t);
}

static void test_flow_shared_servers(void **state)
{
    static struct ct t;
    struct ct_proc a, b;
    char topics[300];
    PGconn *admin;
    long clients, servers;

    (void)state;
    ct_setup(&t, "cpgb", PARTS, 0);
    testdb_pgbouncer_conninfo(&t.db, pooled, sizeof(pooled));
    ct_db_override = pooled;
    snprintf(topics, sizeof(topics), "%s,%s", t.topic, t.topic2);
    ct_spawn(&t, &a, "a", topics, "--pool-mode", "transaction", NULL);
    ct_spawn(&t, &b, "b", topics, "--pool-mode", "transaction", NULL);
    ct_log_wait(&a, "event=partitions_assigned", 30000);
    ct_log_wait(&b, "event=partitions_assigned", 30000);

    place_and_send(&t, "F", 40);
    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM ordergate.orders WHERE status = "
                                    "'cancelled'",
                                    40, 30000),
                     40);
    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM ordergate.outbox WHERE published_at IS "
                                    "NULL",
                                    0, 20000),
                     0);
    wait_committed(&t, 20000);
    assert_once(&t, 40);

    /* Four clients of this database, at most two server connections: shared. */
    admin = testdb_pgbouncer_admin();
    clients = testdb_pgbouncer_count(admin, "SHOW CLIENTS", t.db.name, NULL);
    servers = testdb_pgbouncer_count(admin, "SHOW SERVERS", t.db.name, NULL);
    print_message("pgbouncer: %ld clients, %ld server connections for %s\n", clients, servers,
                  t.db.name);
    assert_true(clients >= 4);
    assert_true(servers >= 1 && servers <= 2);
    PQfinish(admin);
    /* Named statements would have failed the first time a client landed on a server
     * connection another had prepared on; nothing of the kind was logged. */
    assert_false(ct_log_has(&a, "database.pool_mode"));
    assert_false(ct_log_has(&b, "database.pool_mode"));

    assert_int_equal(ct_stop(&a, SIGTERM, 20000), 0);
    assert_int_equal(ct_stop(&b, SIGTERM, 20000), 0);
    ct_db_override = NULL;
    ct_teardown(&t);
}

/* A hook that sleeps while shop_t.slow has a row: the claim is held open long enough to
 * restart the pooler under it. failing_hook.sql's hook records every cancelled order in
 * shop_t.seen, whose key refuses a second call for an order: a claim applied twice would
 * fail. */
static const char slow_hook_sql[] =
    "SET ROLE og_test_shop;"
    "CREATE TABLE shop_t.slow (x int);"
    "CREATE FUNCTION shop_t.slow_cancelled(p_nos text[], p_source text) RETURNS void "
    "LANGUAGE plpgsql SECURITY DEFINER SET search_path = shop_t, pg_temp AS $$ BEGIN "
    "  IF EXISTS (SELECT 1 FROM shop_t.slow) THEN PERFORM pg_sleep(3); END IF; END $$;"
    "GRANT USAGE ON SCHEMA shop_t TO ordergate_owner;"
    "GRANT EXECUTE ON FUNCTION shop_t.slow_cancelled(text[], text) TO ordergate_owner;"
    "RESET ROLE;"
    "SELECT ordergate.add_hook('cancelled', 'shop_t.slow_cancelled(text[],text)');"
    "INSERT INTO shop_t.slow VALUES (1);";

static void test_restart_mid_batch(void **state)
{
    static struct ct t;
    struct ct_proc a;
    char topics[300], cmd[512], sql[512];
    const char *state_dir = getenv("ORDERGATE_STATE_DIR");
    const char *line;
    char *text;

    (void)state;
    if (state_dir == NULL || *state_dir == '\0')
        fail_msg("ORDERGATE_STATE_DIR is not set: the test restarts the PgBouncer of "
                 "deploy/local/services.sh");
    ct_setup(&t, "cpgbr", PARTS, 0);
    testdb_exec_file(t.conn, "tests/support/failing_hook.sql");
    testdb_exec(t.conn, slow_hook_sql);
    testdb_pgbouncer_conninfo(&t.db, pooled, sizeof(pooled));
    ct_db_override = pooled;
    snprintf(topics, sizeof(topics), "%s,%s", t.topic, t.topic2);
    ct_spawn(&t, &a, "r", topics, "--pool-mode", "transaction", NULL);
    ct_log_wait(&a, "event=partitions_assigned", 30000);

    place_and_send(&t, "R", 30);
    /* A claim is in the hook's sleep, its transaction open on a server connection. */
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM pg_stat_activity WHERE datname = '%s' AND wait_event = "
             "'PgSleep' AND query LIKE '%%claim_cancel%%'",
             t.db.name);
    assert_int_equal(ct_wait_scalar(&t, sql, 1, 20000), 1);
    snprintf(cmd, sizeof(cmd), "'%s/deploy/local/services.sh' restart-pgbouncer >/dev/null 2>&1",
             OG_SOURCE_DIR);
    assert_int_equal(system(cmd), 0);
    testdb_exec(t.conn, "DELETE FROM shop_t.slow");

    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM ordergate.orders WHERE status = "
                                    "'cancelled'",
                                    30, 60000),
                     30);
    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM ordergate.outbox WHERE published_at IS "
                                    "NULL",
                                    0, 30000),
                     0);
    wait_committed(&t, 30000);
    assert_once(&t, 30);
    /* The hook ran once per order (a second call would have broken shop_t.seen's key). */
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM shop_t.seen WHERE event = 'cancelled'"),
                     30);

    /* One line says what happened to the claim: the connection lost in it, the error, how
     * long until the database answered again. */
    ct_log_wait(&a, "event=db_reconnected app=ordergate-consumer lost_in=og_claim_cancel", 10000);
    assert_int_equal(ct_log_count(&a, "event=db_reconnected app=ordergate-consumer "), 1);
    text = testutil_slurp(a.log);
    assert_non_null(text);
    line = strstr(text, "event=db_reconnected app=ordergate-consumer ");
    assert_non_null(line);
    assert_non_null(strstr(line, "down_ms="));
    assert_non_null(strstr(line, "failed_attempts="));
    free(text);
    assert_false(ct_log_has(&a, "event=dead_lettered"));
    assert_int_equal(ct_stop(&a, SIGTERM, 20000), 0);
    ct_db_override = NULL;
    ct_teardown(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_flow_shared_servers, ct_cleanup),
        cmocka_unit_test_teardown(test_restart_mid_batch, ct_cleanup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
