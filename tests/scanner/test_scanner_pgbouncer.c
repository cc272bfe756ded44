/* The scanner through the transaction-pooling PgBouncer of deploy/local/services.sh (pool
 * size 2), with --pool-mode transaction: a sweep (also with --workers 2: three clients on two
 * server connections); two scanners at once, one sweeps and one skips; a run killed mid-sweep
 * is reported crashed by the first run after its lease expired. Nothing of a run stays on a
 * pooled server connection: no advisory lock is left, and the run after a crash is not kept
 * out by one; not even a run left at pool_mode = session sets its bounds on a server
 * connection that other clients of the pool then get. Fails, never skips, without the
 * pooler. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "scanner_child.h"
#include "support/testdb.h"

static char pooled[200];

static int setup(void **state)
{
    int rc = scanner_fixture_setup(state, "scan_pgb", true);
    struct scanner_fixture *f = *state;

    testdb_pgbouncer_conninfo(&f->t, pooled, sizeof(pooled));
    return rc;
}

static void assert_no_advisory_lock(PGconn *conn)
{
    assert_int_equal(testdb_scalar(conn, "SELECT count(*) FROM pg_locks WHERE locktype = "
                                         "'advisory' AND database = (SELECT oid FROM "
                                         "pg_database WHERE datname = current_database())"),
                     0);
}

static void test_sweep(void **state)
{
    struct scanner_fixture *f = *state;
    struct scanner_child c;
    const char *one[] = {"--db", pooled,         "--pool-mode", "transaction", "--grace",
                         "0",    "--batch-size", "7",           NULL};
    const char *workers[] = {"--db",         pooled, "--pool-mode", "transaction", "--grace", "0",
                             "--batch-size", "5",    "--workers",   "2",           NULL};

    scanner_place(f->conn, "PA", 30, -120);
    assert_int_equal(scanner_child_run(&c, one), 0);
    assert_non_null(strstr(c.output, "event=scanner_run_done"));
    scanner_child_free(&c);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.scanner_runs WHERE "
                                            "status = 'done' AND cancelled = 30 AND batches = 5"),
                     1);

    scanner_place(f->conn, "PB", 40, -120);
    assert_int_equal(scanner_child_run(&c, workers), 0);
    assert_null(strstr(c.output, "database.pool_mode"));
    scanner_child_free(&c);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.scanner_runs WHERE "
                                            "status = 'done' AND cancelled = 40"),
                     1);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.orders WHERE status "
                                            "= 'cancelled'"),
                     70);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.status_log"), 70);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.scanner_lease WHERE "
                                            "run_id IS NULL"),
                     1);
    assert_no_advisory_lock(f->conn);
    /* Nothing of the runs stays in the pooled server sessions: a client that gets them next
     * sees the server's own bounds, no prepared statement, no lock (a session-level setting
     * or PREPARE would still be there). */
    {
        PGconn *next = PQconnectdb(pooled);
        assert_int_equal(PQstatus(next), CONNECTION_OK);
        for (int i = 0; i < 4; i++) {
            assert_int_equal(testdb_scalar(next, "SELECT (current_setting('lock_timeout') = '0' "
                                                 "AND current_setting('statement_timeout') = "
                                                 "'0' AND current_setting('idle_session_timeout') "
                                                 "= '0')::int"),
                             1);
            assert_int_equal(testdb_scalar(next, "SELECT count(*) FROM pg_prepared_statements"), 0);
        }
        PQfinish(next);
    }
}

/* Every server connection of the pool (pool size 2), each held by a client of its own inside
 * a transaction, shows the server's own lock_timeout and statement_timeout, and no
 * ordergate.hook_timing (the scanner's hook timing is per transaction too). */
static void assert_pool_bounds_default(void)
{
    PGconn *held[2];

    for (int i = 0; i < 2; i++) {
        held[i] = PQconnectdb(pooled);
        assert_int_equal(PQstatus(held[i]), CONNECTION_OK);
        PQclear(PQexec(held[i], "BEGIN"));
    }
    for (int i = 0; i < 2; i++) {
        assert_int_equal(
            testdb_scalar(held[i], "SELECT (current_setting('lock_timeout') = '0' AND "
                                   "current_setting('statement_timeout') = '0' AND "
                                   "coalesce(current_setting('ordergate.hook_timing', true), '') "
                                   "<> 'on')::int"),
            1);
        PQclear(PQexec(held[i], "COMMIT"));
        PQfinish(held[i]);
    }
}

/* A run with the default pool_mode = session behind the transaction pooler: its bounds
 * (--lock-timeout-ms, --statement-timeout-ms) and its hook timing held for its own
 * transactions only; no other client of the pool inherits them on the server connection the
 * run used. */
static void test_session_mode_bounds_stay_local(void **state)
{
    struct scanner_fixture *f = *state;
    struct scanner_child c;
    const char *run[] = {"--db",
                         pooled,
                         "--grace",
                         "0",
                         "--lock-timeout-ms",
                         "4321",
                         "--statement-timeout-ms",
                         "8765",
                         "--batch-size",
                         "3",
                         NULL};

    assert_pool_bounds_default();
    scanner_place(f->conn, "PS", 7, -120);
    assert_int_equal(scanner_child_run(&c, run), 0);
    assert_non_null(strstr(c.output, "event=scanner_run_done"));
    scanner_child_free(&c);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.orders WHERE status "
                                            "= 'cancelled'"),
                     7);
    assert_pool_bounds_default();
}

static void test_two_scanners(void **state)
{
    struct scanner_fixture *f = *state;
    struct scanner_child a, b;
    const char *slow[] = {"--db",         pooled, "--pool-mode", "transaction", "--grace", "0",
                          "--batch-size", "1",    "--pause-ms",  "800",         NULL};
    const char *fast[] = {"--db", pooled, "--pool-mode", "transaction", "--grace", "0", NULL};

    scanner_place(f->conn, "PT", 4, -120);
    scanner_child_start(&a, slow);
    assert_true(scanner_poll_at_least(
        f->conn, "SELECT count(*) FROM ordergate.scanner_runs WHERE status = 'running'", 1, 20000));
    assert_int_equal(scanner_child_run(&b, fast), 0);
    assert_non_null(strstr(b.output, "event=scanner_run_skipped"));
    assert_int_equal(scanner_child_wait(&a, 30000), 0);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.scanner_runs WHERE "
                                            "status = 'done' AND cancelled = 4"),
                     1);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.scanner_runs WHERE "
                                            "status = 'skipped' AND detail LIKE '% holds the "
                                            "sweep lease until %'"),
                     1);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.status_log"), 4);
    scanner_child_free(&a);
    scanner_child_free(&b);
    /* After both, the next run sweeps: nothing was left behind on a pooled connection. */
    scanner_place(f->conn, "PU", 2, -120);
    assert_int_equal(scanner_child_run(&b, fast), 0);
    assert_non_null(strstr(b.output, "event=scanner_run_done"));
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.status_log"), 6);
    scanner_child_free(&b);
    assert_no_advisory_lock(f->conn);
}

static void test_crashed_run(void **state)
{
    struct scanner_fixture *f = *state;
    struct scanner_child a, b;
    const char *slow[] = {
        "--db", pooled,       "--pool-mode", "transaction", "--grace", "0", "--batch-size",
        "1",    "--pause-ms", "1500",        "--lease-s",   "1",       NULL};
    const char *next[] = {"--db", pooled, "--pool-mode", "transaction", "--grace", "0", NULL};
    char expect[64];
    long dead;

    scanner_place(f->conn, "PC", 5, -120);
    scanner_child_start(&a, slow);
    assert_true(scanner_poll_at_least(
        f->conn, "SELECT coalesce(max(batches), 0) FROM ordergate.scanner_runs", 1, 20000));
    kill(a.pid, SIGKILL);
    assert_int_equal(scanner_child_wait(&a, 10000), -1);
    dead = testdb_scalar(f->conn, "SELECT run_id FROM ordergate.scanner_runs");
    assert_true(scanner_poll_at_least(
        f->conn, "SELECT (expires_at < clock_timestamp())::int FROM ordergate.scanner_lease", 1,
        20000));
    assert_int_equal(scanner_child_run(&b, next), 0);
    snprintf(expect, sizeof(expect), "event=scanner_crashed_run run_id=%ld ", dead);
    assert_non_null(strstr(b.output, expect));
    assert_non_null(strstr(b.output, "event=scanner_run_done"));
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.scanner_runs WHERE "
                                            "status = 'crashed' AND stop_reason = 'crashed'"),
                     1);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.orders WHERE status "
                                            "= 'cancelled'"),
                     5);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.status_log"), 5);
    scanner_child_free(&a);
    scanner_child_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sweep, setup, scanner_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_session_mode_bounds_stay_local, setup,
                                        scanner_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_two_scanners, setup, scanner_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_crashed_run, setup, scanner_fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
