/* Overlapping runs: the advisory lock makes the second one skip (exit 0, a
 * 'skipped' row, nothing touched); a run whose process died stays visible and
 * the next run reports it as crashed, then finishes its work. */
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

static int setup(void **state)
{
    return scanner_fixture_setup(state, "scan_lock", true);
}

/* Deterministic overlap: the test's own session holds the sweep lock. */
static void test_lock_held_skips(void **state)
{
    struct scanner_fixture *f = *state;
    struct scanner_child c;
    const char *args[] = {"--db", f->t.conninfo, "--grace", "0", NULL};
    char expect[128];
    long holder = testdb_scalar(f->conn, "SELECT pg_backend_pid()");

    scanner_place(f->conn, "L", 5, -120);
    testdb_exec(f->conn, "SELECT pg_advisory_lock(ordergate.scanner_lock_key())");

    assert_int_equal(scanner_child_run(&c, args), 0);
    assert_non_null(strstr(c.output, "event=scanner_run_skipped"));
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.orders WHERE status "
                                            "= 'pending_payment'"),
                     5);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.status_log"), 0);
    snprintf(expect, sizeof(expect),
             "SELECT count(*) FROM ordergate.scanner_runs WHERE status = 'skipped' AND "
             "stop_reason = 'lock_held' AND finished_at IS NOT NULL AND detail LIKE '%%pid %ld)'",
             holder);
    assert_int_equal(testdb_scalar(f->conn, expect), 1);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.scanner_runs"), 1);
    scanner_child_free(&c);

    /* Released: the next run sweeps, and leaves the lock free behind it. */
    testdb_exec(f->conn, "SELECT pg_advisory_unlock(ordergate.scanner_lock_key())");
    assert_int_equal(scanner_child_run(&c, args), 0);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.orders WHERE status "
                                            "= 'cancelled'"),
                     5);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.scanner_runs WHERE "
                                            "status = 'done' AND cancelled = 5"),
                     1);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM pg_locks WHERE locktype = "
                                            "'advisory' AND database = (SELECT oid FROM "
                                            "pg_database WHERE datname = current_database())"),
                     0);
    scanner_child_free(&c);
}

/* Two scanner processes: the first sweeps slowly (one order per batch, one
 * second apart); the second starts once the first's row says running. */
static void test_two_scanners(void **state)
{
    struct scanner_fixture *f = *state;
    struct scanner_child a, b;
    const char *slow[] = {"--db", f->t.conninfo, "--grace", "0", "--batch-size",
                          "1",    "--pause-ms",  "1000",    NULL};
    const char *fast[] = {"--db", f->t.conninfo, "--grace", "0", NULL};

    scanner_place(f->conn, "TWO", 4, -120);
    scanner_child_start(&a, slow);
    assert_true(scanner_poll_at_least(
        f->conn, "SELECT count(*) FROM ordergate.scanner_runs WHERE status = 'running'", 1, 20000));

    assert_int_equal(scanner_child_run(&b, fast), 0);
    assert_non_null(strstr(b.output, "event=scanner_run_skipped"));

    assert_int_equal(scanner_child_wait(&a, 30000), 0);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.scanner_runs WHERE "
                                            "status = 'done' AND cancelled = 4 AND batches = 4"),
                     1);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.scanner_runs WHERE "
                                            "status = 'skipped' AND cancelled = 0"),
                     1);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.status_log"), 4);
    scanner_child_free(&a);
    scanner_child_free(&b);
}

/* kill -9 mid-run: the row stays 'running'; the next run marks it 'crashed',
 * reports it, and cancels what the dead one left. */
static void test_crashed_run_reported(void **state)
{
    struct scanner_fixture *f = *state;
    struct scanner_child a, b;
    const char *slow[] = {"--db", f->t.conninfo, "--grace", "0", "--batch-size",
                          "1",    "--pause-ms",  "2000",    NULL};
    const char *next[] = {"--db", f->t.conninfo, "--grace", "0", NULL};
    char sql[256], expect[64];
    long dead_run;

    scanner_place(f->conn, "CR", 5, -120);
    scanner_child_start(&a, slow);
    assert_true(scanner_poll_at_least(
        f->conn, "SELECT coalesce(max(batches), 0) FROM ordergate.scanner_runs", 1, 20000));
    kill(a.pid, SIGKILL);
    assert_int_equal(scanner_child_wait(&a, 10000), -1);
    dead_run = testdb_scalar(f->conn, "SELECT run_id FROM ordergate.scanner_runs");
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.scanner_runs WHERE "
                                            "status = 'running'"),
                     1);
    /* The server ends the dead client's session (and its lock) on its own. */
    assert_true(scanner_poll_at_least(
        f->conn,
        "SELECT (count(*) = 0)::int FROM pg_locks WHERE locktype = 'advisory' AND database = "
        "(SELECT oid FROM pg_database WHERE datname = current_database())",
        1, 20000));

    assert_int_equal(scanner_child_run(&b, next), 0);
    snprintf(expect, sizeof(expect), "event=scanner_crashed_run run_id=%ld ", dead_run);
    assert_non_null(strstr(b.output, expect));
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM ordergate.scanner_runs WHERE run_id = %ld AND status = "
             "'crashed' AND stop_reason = 'crashed' AND batches >= 1 AND reported_by = %ld + 1",
             dead_run, dead_run);
    assert_int_equal(testdb_scalar(f->conn, sql), 1);
    /* Together they cancelled each order once. */
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.orders WHERE status "
                                            "= 'cancelled'"),
                     5);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.status_log"), 5);
    assert_int_equal(testdb_scalar(f->conn, "SELECT sum(cancelled) FROM ordergate.scanner_runs"),
                     5);
    scanner_child_free(&a);
    scanner_child_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_lock_held_skips, setup, scanner_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_two_scanners, setup, scanner_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_crashed_run_reported, setup, scanner_fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
