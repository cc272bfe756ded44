/* A shop's hook that fails (tests/support/failing_hook.sql) neither fails a sweep nor stops it:
 * the page is bisected, every other due order is cancelled in the run (through the hook, once
 * each), the one the hook fails is left pending, counted in scanner_runs.hook_failed, named
 * with the hook in one log line and the textfile; the next run tries it again and cancels it
 * once the hook is mended. A hook that fails every order fails the run, naming the hook: no
 * sweep is possible then. With and without claim sessions (--workers). A hook slower than the
 * statement_timeout for one order (57014, query_canceled) is a hook failure of that order like
 * any other: the run finishes without it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "scanner_child.h"
#include "support/testdb.h"
#include "support/testutil.h"

#define HOOK "shop_t.on_cancelled(text[],text)"

static int setup(void **state)
{
    int rc = scanner_fixture_setup(state, "scan_hooks", true);
    struct scanner_fixture *f = *state;

    if (rc == 0)
        testdb_exec_file(f->conn, "tests/support/failing_hook.sql");
    return rc;
}

static void run_with_failing_hook(void **state, const char *workers)
{
    struct scanner_fixture *f = *state;
    struct scanner_child c;
    const char *args[] = {"--db",       f->t.conninfo, "--grace", "0",         "--batch-size",
                          "10",         "--pause-ms",  "0",       "--workers", workers,
                          "--textfile", f->textfile,   NULL};
    char *prom;

    scanner_place(f->conn, "H", 30, -60);
    testdb_exec(f->conn, "INSERT INTO shop_t.poison VALUES ('H-7'), ('H-23')");

    assert_int_equal(scanner_child_run(&c, args), 0);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.orders WHERE status = "
                                            "'cancelled'"),
                     28);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM shop_t.seen WHERE source = "
                                            "'timeout_scanner'"),
                     28);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.orders WHERE order_no "
                                            "IN ('H-7', 'H-23') AND status = 'pending_payment'"),
                     2);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.status_log WHERE "
                                            "order_no IN ('H-7', 'H-23')"),
                     0);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.scanner_runs WHERE "
                                            "status = 'done' AND stop_reason = 'complete' AND "
                                            "cancelled = 28 AND hook_failed = 2 AND "
                                            "scanned = cancelled + hook_failed"),
                     1);
    /* Pages come back in any order with claim sessions: the two orders, either way round. */
    assert_non_null(strstr(c.output, "event=scanner_hook_failed"));
    assert_true(
        strstr(c.output, "orders=2 first_orders=H-7,H-23 hook=" HOOK " sqlstate=P0001") != NULL ||
        strstr(c.output, "orders=2 first_orders=H-23,H-7 hook=" HOOK " sqlstate=P0001") != NULL);
    prom = testutil_slurp(f->textfile);
    assert_non_null(prom);
    assert_non_null(strstr(prom, "ordergate_scanner_last_run_orders{outcome=\"hook_failed\"} 2\n"));
    assert_non_null(strstr(prom, "ordergate_scanner_hook_failures_total{hook=\"" HOOK "\"} 2\n"));
    /* Every call of the hook timed, the failed ones too (the gate's notices). */
    assert_non_null(strstr(prom, "ordergate_scanner_hook_seconds_count{hook=\"" HOOK "\"} "));
    assert_non_null(
        strstr(prom, "ordergate_scanner_hook_seconds_bucket{hook=\"" HOOK "\",le=\"+Inf\"} "));
    assert_non_null(strstr(prom, "ordergate_scanner_last_run_success 1\n"));
    assert_non_null(strstr(prom, "ordergate_scanner_grace_seconds 0\n"));
    free(prom);
    scanner_child_free(&c);

    /* Mended: the next run cancels both. */
    testdb_exec(f->conn, "DELETE FROM shop_t.poison");
    assert_int_equal(scanner_child_run(&c, args), 0);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.orders WHERE status = "
                                            "'cancelled'"),
                     30);
    assert_int_equal(testdb_scalar(f->conn, "SELECT hook_failed * 100 + cancelled FROM "
                                            "ordergate.scanner_runs ORDER BY run_id DESC LIMIT 1"),
                     2);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM shop_t.seen"), 30);
    scanner_child_free(&c);
    assert_int_equal(testdb_scalar(f->conn, "SELECT sum(violations) FROM ordergate.reconcile()"),
                     0);
}

static void test_failing_order_skipped_in_run(void **state)
{
    run_with_failing_hook(state, "1");
}

static void test_failing_order_skipped_with_claim_sessions(void **state)
{
    run_with_failing_hook(state, "2");
}

/* One order's hook outlasts statement_timeout: the cancel of the timeout keeps the hook marker
 * (and 57014), so the page is bisected like for any hook failure and the run completes. */
static void run_with_slow_hook(void **state, const char *workers)
{
    struct scanner_fixture *f = *state;
    struct scanner_child c;
    const char *args[] = {
        "--db",       f->t.conninfo, "--grace",   "0",     "--batch-size",           "10",
        "--pause-ms", "0",           "--workers", workers, "--statement-timeout-ms", "1000",
        "--textfile", f->textfile,   NULL};
    char *prom;

    scanner_place(f->conn, "T", 12, -60);
    testdb_exec(f->conn, "INSERT INTO shop_t.sleep VALUES ('T-4')");

    assert_int_equal(scanner_child_run(&c, args), 0);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.orders WHERE status = "
                                            "'cancelled'"),
                     11);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.orders WHERE order_no "
                                            "= 'T-4' AND status = 'pending_payment'"),
                     1);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.status_log WHERE "
                                            "order_no = 'T-4'"),
                     0);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.scanner_runs WHERE "
                                            "status = 'done' AND stop_reason = 'complete' AND "
                                            "cancelled = 11 AND hook_failed = 1"),
                     1);
    assert_non_null(strstr(c.output, "orders=1 first_orders=T-4 hook=" HOOK " sqlstate=57014"));
    prom = testutil_slurp(f->textfile);
    assert_non_null(prom);
    assert_non_null(strstr(prom, "ordergate_scanner_last_run_success 1\n"));
    /* The timed-out calls are timed too: at least the second each had. */
    {
        const char *sum = strstr(prom, "ordergate_scanner_hook_seconds_sum{hook=\"" HOOK "\"} ");
        assert_non_null(sum);
        assert_true(strtod(strchr(sum, '}') + 2, NULL) >= 0.9);
    }
    free(prom);
    scanner_child_free(&c);
    assert_int_equal(testdb_scalar(f->conn, "SELECT sum(violations) FROM ordergate.reconcile()"),
                     0);
}

static void test_slow_order_skipped_in_run(void **state)
{
    run_with_slow_hook(state, "1");
}

static void test_slow_order_skipped_with_claim_sessions(void **state)
{
    run_with_slow_hook(state, "2");
}

static void test_hook_failing_everyone_fails_the_run(void **state)
{
    struct scanner_fixture *f = *state;
    struct scanner_child c;
    const char *args[] = {"--db",         f->t.conninfo, "--grace",    "0",
                          "--batch-size", "10",          "--pause-ms", "0",
                          "--textfile",   f->textfile,   NULL};
    char *prom;

    scanner_place(f->conn, "E", 12, -60);
    testdb_exec(f->conn, "INSERT INTO shop_t.poison VALUES ('*')");
    assert_int_equal(scanner_child_run(&c, args), 1);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.status_log"), 0);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.scanner_runs WHERE "
                                            "status = 'failed' AND detail LIKE '%hook " HOOK
                                            ": no stock row for order E-%'"),
                     1);
    assert_non_null(strstr(c.output, "event=scanner_run_failed"));
    prom = testutil_slurp(f->textfile);
    assert_non_null(prom);
    assert_non_null(strstr(prom, "ordergate_scanner_last_run_success 0\n"));
    assert_non_null(strstr(prom, "ordergate_scanner_hook_failures_total{hook=\"" HOOK "\"} 10\n"));
    free(prom);
    scanner_child_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_failing_order_skipped_in_run, setup,
                                        scanner_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_failing_order_skipped_with_claim_sessions, setup,
                                        scanner_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_hook_failing_everyone_fails_the_run, setup,
                                        scanner_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_slow_order_skipped_in_run, setup,
                                        scanner_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_slow_order_skipped_with_claim_sessions, setup,
                                        scanner_fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
