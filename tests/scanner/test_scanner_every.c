/* --every: the scanner alone as the primary trigger (no cron, no Kafka):
 * repeated runs in one process, each catching what came due since the last,
 * and a clean exit 0 on SIGTERM. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "scanner_child.h"
#include "support/testdb.h"

static void test_every_repeats_until_sigterm(void **state)
{
    struct testdb t;
    PGconn *conn;
    struct scanner_child c;
    const char *args[] = {"--db", NULL, "--grace", "0", "--every", "1", NULL};
    long runs;

    (void)state;
    testdb_create(&t, "scan_every");
    conn = testdb_connect(&t);
    args[1] = t.conninfo;
    scanner_seed(conn);
    scanner_place(conn, "E1", 3, -60);

    scanner_child_start(&c, args);
    assert_true(scanner_poll_at_least(
        conn, "SELECT count(*) FROM ordergate.orders WHERE status = 'cancelled'", 3, 20000));
    /* Orders that come due while it runs are caught by a later run. */
    scanner_place(conn, "E2", 2, -1);
    assert_true(scanner_poll_at_least(
        conn, "SELECT count(*) FROM ordergate.orders WHERE status = 'cancelled'", 5, 20000));
    assert_true(scanner_poll_at_least(
        conn, "SELECT count(*) FROM ordergate.scanner_runs WHERE status = 'done'", 3, 20000));

    kill(c.pid, SIGTERM);
    assert_int_equal(scanner_child_wait(&c, 10000), 0);
    assert_non_null(strstr(c.output, "event=scanner_every_stopped"));

    runs = testdb_scalar(conn, "SELECT count(*) FROM ordergate.scanner_runs");
    assert_true(runs >= 3);
    /* Every run ended properly: none left running, none failed or skipped. */
    assert_int_equal(
        testdb_scalar(conn, "SELECT count(*) FROM ordergate.scanner_runs WHERE status = 'done'"),
        runs);
    assert_int_equal(testdb_scalar(conn, "SELECT sum(cancelled) FROM ordergate.scanner_runs"), 5);
    assert_int_equal(testdb_scalar(conn, "SELECT count(*) FROM ordergate.status_log WHERE "
                                         "source = 'timeout_scanner'"),
                     5);
    /* Runs are about a second apart, start to start. */
    assert_true(testdb_scalar(conn, "SELECT (min(gap) >= interval '900 milliseconds')::int FROM "
                                    "(SELECT started_at - lag(started_at) OVER (ORDER BY run_id) "
                                    "AS gap FROM ordergate.scanner_runs) g") == 1);
    scanner_child_free(&c);
    PQfinish(conn);
    testdb_drop(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_repeats_until_sigterm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
