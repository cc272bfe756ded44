/* A due order whose row another session holds locked (an order service's open transaction, here
 * BEGIN; SELECT ... FOR UPDATE left open) neither blocks nor fails a sweep: every other due order
 * is cancelled in the run, the locked one is answered busy, claimed again at the end of the run
 * (with backoff, for scanner.busy_retry_ms) and counted in scanner_runs.busy; still locked, it is
 * left to the next run, which cancels it once the lock is gone. A lock that goes away during the
 * retries is cancelled by the same run. With and without claim sessions (--workers). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "scanner_child.h"
#include "support/testdb.h"
#include "support/testutil.h"

/* Long enough to see a scanner that waits for the lock (it would not exit at all). */
#define RUN_TIMEOUT_MS 30000

static int setup(void **state)
{
    return scanner_fixture_setup(state, "scan_busy", true);
}

static char *slurp(const char *path)
{
    char *text = testutil_slurp(path);

    assert_non_null(text);
    return text;
}

static void run_locked(void **state, const char *workers)
{
    struct scanner_fixture *f = *state;
    struct scanner_child c;
    const char *args[] = {
        "--db",       f->t.conninfo, "--grace",   "0",     "--batch-size",    "10",
        "--pause-ms", "0",           "--workers", workers, "--busy-retry-ms", "700",
        "--textfile", f->textfile,   NULL};
    PGconn *locker;
    char *prom;

    scanner_place(f->conn, "B", 30, -60);
    locker = testdb_connect(&f->t);
    testdb_exec(locker, "BEGIN");
    testdb_exec(locker, "SELECT 1 FROM ordergate.orders WHERE order_no = 'B-7' FOR UPDATE");

    /* The lock is held for the whole run: the run still ends, done. */
    scanner_child_start(&c, args);
    assert_int_equal(scanner_child_wait(&c, RUN_TIMEOUT_MS), 0);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.orders WHERE status = "
                                            "'cancelled'"),
                     29);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.orders WHERE order_no "
                                            "= 'B-7' AND status = 'pending_payment'"),
                     1);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.status_log WHERE "
                                            "order_no = 'B-7'"),
                     0);
    /* One run row: done, complete, 29 cancelled; B-7 busy at its first claim and at every
     * retry round (at least one within 700 ms), nothing else answered. */
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.scanner_runs WHERE "
                                            "status = 'done' AND stop_reason = 'complete' AND "
                                            "cancelled = 29 AND already_cancelled = 0 AND "
                                            "not_due = 0 AND not_found = 0 AND already_paid = 0 "
                                            "AND scanned = cancelled + busy"),
                     1);
    assert_true(testdb_scalar(f->conn, "SELECT busy FROM ordergate.scanner_runs") >= 2);
    assert_non_null(strstr(c.output, "event=scanner_busy_left"));
    assert_non_null(strstr(c.output, "first_orders=B-7"));
    prom = slurp(f->textfile);
    assert_non_null(strstr(prom, "ordergate_scanner_last_run_busy_left 1\n"));
    assert_non_null(strstr(prom, "ordergate_scanner_last_run_orders{outcome=\"cancelled\"} 29\n"));
    assert_non_null(strstr(prom, "ordergate_scanner_last_run_success 1\n"));
    free(prom);
    scanner_child_free(&c);

    /* The lock goes: the next run cancels B-7. */
    testdb_exec(locker, "COMMIT");
    PQfinish(locker);
    assert_int_equal(scanner_child_run(&c, args), 0);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.orders WHERE status = "
                                            "'cancelled'"),
                     30);
    assert_int_equal(testdb_scalar(f->conn, "SELECT cancelled FROM ordergate.scanner_runs ORDER BY "
                                            "run_id DESC LIMIT 1"),
                     1);
    scanner_child_free(&c);
    assert_int_equal(testdb_scalar(f->conn, "SELECT sum(violations) FROM ordergate.reconcile()"),
                     0);
}

static void test_locked_order_left_to_next_run(void **state)
{
    run_locked(state, "1");
}

static void test_locked_order_with_claim_sessions(void **state)
{
    run_locked(state, "2");
}

/* The lock goes while the run retries: the same run cancels the order. */
static void test_lock_released_during_retries(void **state)
{
    struct scanner_fixture *f = *state;
    struct scanner_child c;
    const char *args[] = {
        "--db", f->t.conninfo,     "--grace", "0", "--batch-size", "10", "--pause-ms",
        "0",    "--busy-retry-ms", "10000",   NULL};
    PGconn *locker;

    scanner_place(f->conn, "R", 25, -60);
    locker = testdb_connect(&f->t);
    /* Holds R-3 for about a second, in a transaction of its own, without the test's help. */
    assert_int_equal(PQsendQuery(locker, "BEGIN; SELECT 1 FROM ordergate.orders WHERE order_no = "
                                         "'R-3' FOR UPDATE; SELECT pg_sleep(1.5); COMMIT"),
                     1);
    assert_true(scanner_poll_at_least(f->conn,
                                      "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a "
                                      "USING (pid) WHERE a.wait_event = 'PgSleep' AND "
                                      "l.locktype = 'transactionid'",
                                      1, 10000));
    assert_int_equal(scanner_child_run(&c, args), 0);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.orders WHERE status = "
                                            "'cancelled'"),
                     25);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.scanner_runs WHERE "
                                            "status = 'done' AND cancelled = 25 AND busy >= 1 AND "
                                            "scanned = cancelled + busy"),
                     1);
    assert_non_null(strstr(c.output, "event=scanner_busy_retry"));
    assert_null(strstr(c.output, "event=scanner_busy_left"));
    scanner_child_free(&c);
    /* The locker's transaction committed (nothing of it is left open). */
    for (PGresult *r; (r = PQgetResult(locker)) != NULL;) {
        assert_true(PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK);
        PQclear(r);
    }
    PQfinish(locker);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_locked_order_left_to_next_run, setup,
                                        scanner_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_locked_order_with_claim_sessions, setup,
                                        scanner_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_lock_released_during_retries, setup,
                                        scanner_fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
