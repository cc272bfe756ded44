/* The database failing mid-run: exit 1, a 'failed' run row saying why, and
 * nothing lost or doubled (every cancelled order has exactly one log row and
 * the next run finishes the job). */
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

static int setup(void **state)
{
    return scanner_fixture_setup(state, "scan_fault", true);
}

/* Every cancelled order was cancelled exactly once, through the gate. */
static void assert_books(PGconn *conn)
{
    assert_int_equal(
        testdb_scalar(conn, "SELECT count(*) FROM ordergate.orders o WHERE o.status = "
                            "'cancelled' AND (SELECT count(*) FROM ordergate.status_log s WHERE "
                            "s.order_no = o.order_no) <> 1"),
        0);
    assert_int_equal(testdb_scalar(conn, "SELECT count(*) FROM ordergate.status_log"),
                     testdb_scalar(conn, "SELECT count(*) FROM ordergate.orders WHERE status = "
                                         "'cancelled'"));
    assert_int_equal(testdb_scalar(conn, "SELECT count(*) FROM ordergate.outbox"),
                     testdb_scalar(conn, "SELECT count(*) FROM ordergate.orders WHERE status = "
                                         "'cancelled'"));
}

/* The scanner's backend is terminated between batches: db_call reconnects,
 * but the sweep lock went with the old session, so the run fails. */
static void test_backend_terminated(void **state)
{
    struct scanner_fixture *f = *state;
    struct scanner_child c;
    const char *args[] = {"--db",         f->t.conninfo, "--grace",    "0",
                          "--batch-size", "2",           "--pause-ms", "300",
                          "--textfile",   f->textfile,   NULL};
    const char *again[] = {"--db", f->t.conninfo, "--grace", "0", NULL};
    FILE *fp;
    char prom[8192] = "";

    scanner_place(f->conn, "TERM", 30, -120);
    scanner_child_start(&c, args);
    assert_true(scanner_poll_at_least(
        f->conn,
        "SELECT coalesce(max(batches), 0) FROM ordergate.scanner_runs WHERE status = 'running'", 1,
        20000));
    assert_int_equal(testdb_scalar(f->conn, "SELECT pg_terminate_backend(backend_pid)::int FROM "
                                            "ordergate.scanner_runs WHERE status = 'running'"),
                     1);
    assert_int_equal(scanner_child_wait(&c, 60000), 1);
    assert_non_null(strstr(c.output, "event=scanner_run_failed"));
    assert_int_equal(testdb_scalar(f->conn,
                                   "SELECT count(*) FROM ordergate.scanner_runs WHERE status = "
                                   "'failed' AND stop_reason = 'error' AND detail LIKE "
                                   "'database session lost mid-run%' AND finished_at IS NOT NULL"),
                     1);
    /* Its counters match what it did: each claimed order is in the log. */
    assert_int_equal(testdb_scalar(f->conn, "SELECT cancelled FROM ordergate.scanner_runs"),
                     testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.status_log"));
    assert_true(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.orders WHERE status = "
                                       "'pending_payment'") > 0);
    assert_books(f->conn);
    /* Monitoring hears of it. */
    fp = fopen(f->textfile, "r");
    assert_non_null(fp);
    assert_true(fread(prom, 1, sizeof(prom) - 1, fp) > 0);
    fclose(fp);
    assert_non_null(strstr(prom, "ordergate_scanner_last_run_success 0\n"));
    assert_non_null(strstr(prom, "ordergate_scanner_last_run_status{status=\"failed\"} 1\n"));
    scanner_child_free(&c);

    /* The lock is free again and the next run takes the rest. */
    assert_int_equal(scanner_child_run(&c, again), 0);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.orders WHERE status "
                                            "= 'cancelled'"),
                     30);
    assert_books(f->conn);
    scanner_child_free(&c);
}

/* The database starts refusing the claim (a constraint the scanner's rows
 * break): the failing batch rolls back whole, the run fails with the reason. */
static void test_database_refuses(void **state)
{
    struct scanner_fixture *f = *state;
    struct scanner_child c;
    const char *args[] = {"--db", f->t.conninfo, "--grace", "0", "--batch-size",
                          "3",    "--pause-ms",  "300",     NULL};
    long cancelled;

    scanner_place(f->conn, "REF", 20, -120);
    scanner_child_start(&c, args);
    assert_true(scanner_poll_at_least(
        f->conn,
        "SELECT coalesce(max(batches), 0) FROM ordergate.scanner_runs WHERE status = 'running'", 1,
        20000));
    testdb_exec(f->conn, "ALTER TABLE ordergate.status_log ADD CONSTRAINT og_test_refuse CHECK "
                         "(source <> 'timeout_scanner') NOT VALID");
    assert_int_equal(scanner_child_wait(&c, 60000), 1);
    assert_int_equal(testdb_scalar(f->conn,
                                   "SELECT count(*) FROM ordergate.scanner_runs WHERE status = "
                                   "'failed' AND detail LIKE '%og_test_refuse%'"),
                     1);
    cancelled = testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.orders WHERE status = "
                                       "'cancelled'");
    assert_true(cancelled >= 3 && cancelled < 20);
    assert_int_equal(testdb_scalar(f->conn, "SELECT cancelled FROM ordergate.scanner_runs"),
                     cancelled);
    assert_books(f->conn);
    scanner_child_free(&c);

    testdb_exec(f->conn, "ALTER TABLE ordergate.status_log DROP CONSTRAINT og_test_refuse");
    assert_int_equal(scanner_child_run(&c, args), 0);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.orders WHERE status "
                                            "= 'cancelled'"),
                     20);
    assert_books(f->conn);
    scanner_child_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_backend_terminated, setup, scanner_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_database_refuses, setup, scanner_fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
