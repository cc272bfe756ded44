/* The database failing mid-run: exit 1, a 'failed' run row saying why, and
 * nothing lost or doubled (every cancelled order has exactly one log row and
 * the next run finishes the job); a lost session alone is ridden out. */
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

/* The scanner's backend is terminated between batches: db_call reconnects and the run goes
 * on, since its lock is the sweep lease and not its session (so does a run behind a restarted
 * pooler). One line says what happened; the run ends done with every order cancelled once. */
static void test_backend_terminated(void **state)
{
    struct scanner_fixture *f = *state;
    struct scanner_child c;
    const char *args[] = {"--db",         f->t.conninfo, "--grace",    "0",
                          "--batch-size", "2",           "--pause-ms", "300",
                          "--textfile",   f->textfile,   NULL};
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
    assert_int_equal(scanner_child_wait(&c, 60000), 0);
    assert_non_null(strstr(c.output, "event=scanner_run_done"));
    assert_null(strstr(c.output, "event=scanner_run_failed"));
    /* The one line about the lost connection: which statement, the server's word, how long. */
    {
        const char *line = strstr(c.output, "event=db_reconnected");
        assert_non_null(line);
        assert_null(strstr(line + 1, "event=db_reconnected"));
        assert_non_null(strstr(line, "lost_in=og_scan_"));
        assert_non_null(strstr(line, "terminating connection due to administrator command"));
        assert_non_null(strstr(line, "down_ms="));
    }
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.scanner_runs WHERE "
                                            "status = 'done' AND stop_reason = 'complete' AND "
                                            "cancelled = 30"),
                     1);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.orders WHERE status "
                                            "= 'cancelled'"),
                     30);
    assert_books(f->conn);
    /* The lease was released by the run's last call, on the new session. */
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.scanner_lease WHERE "
                                            "run_id IS NULL"),
                     1);
    fp = fopen(f->textfile, "r");
    assert_non_null(fp);
    assert_true(fread(prom, 1, sizeof(prom) - 1, fp) > 0);
    fclose(fp);
    assert_non_null(strstr(prom, "ordergate_scanner_last_run_success 1\n"));
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
