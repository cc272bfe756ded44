/* The sweep against a real database, through the built binary: what it
 * cancels and what it leaves, the run log, the alarm (log and textfile),
 * caps, a second run, the dry run, and least privilege. */
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

static int setup(void **state)
{
    return scanner_fixture_setup(state, "scan_sweep", true);
}

/* The textfile a run wrote; fails the test when there is none. */
static char *slurp(const char *path)
{
    char *text = testutil_slurp(path);

    assert_non_null(text);
    return text;
}

/* Totals that must not move when nothing is due. */
static void snapshot(PGconn *conn, long out[5])
{
    out[0] = testdb_scalar(conn, "SELECT count(*) FROM ordergate.status_log");
    out[1] = testdb_scalar(conn, "SELECT count(*) FROM ordergate.outbox");
    out[2] = testdb_scalar(conn, "SELECT sum(available) FROM ordergate.inventory");
    out[3] = testdb_scalar(
        conn, "SELECT count(*) FROM ordergate.orders WHERE status = 'pending_payment'");
    out[4] =
        testdb_scalar(conn, "SELECT count(*) FROM ordergate.orders WHERE status = 'cancelled'");
}

static void test_overdue_vs_not_due_vs_grace(void **state)
{
    struct scanner_fixture *f = *state;
    struct scanner_child c;
    const char *args[] = {"--db",         f->t.conninfo, "--grace",    "60",
                          "--batch-size", "7",           "--pause-ms", "0",
                          "--textfile",   f->textfile,   NULL};
    long before[5], after[5];
    char *prom;

    scanner_place(f->conn, "OVER", 25, -600); /* 10 minutes overdue */
    scanner_place(f->conn, "LATER", 3, 600);  /* not due for 10 minutes */
    scanner_place(f->conn, "GRACE", 3, -30);  /* due, but within the 60 s grace */
    assert_int_equal(testdb_scalar(f->conn, "SELECT sum(available) FROM ordergate.inventory"),
                     1000000 - 31);

    assert_int_equal(scanner_child_run(&c, args), 0);

    /* Exactly the overdue ones, through the gate, logged as the scanner's. */
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.orders WHERE "
                                            "order_no LIKE 'OVER-%' AND status = 'cancelled'"),
                     25);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.orders WHERE "
                                            "order_no NOT LIKE 'OVER-%' AND status = "
                                            "'pending_payment'"),
                     6);
    assert_int_equal(testdb_scalar(f->conn,
                                   "SELECT count(*) FROM ordergate.status_log WHERE source = "
                                   "'timeout_scanner' AND actor = 'ordergate-scanner' AND "
                                   "order_no LIKE 'OVER-%' AND idempotency_key = order_no"),
                     25);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.outbox WHERE "
                                            "event_type = 'order_cancelled'"),
                     25);
    /* Stock came back for the cancelled orders only. */
    assert_int_equal(testdb_scalar(f->conn, "SELECT sum(available) FROM ordergate.inventory"),
                     1000000 - 6);

    /* The run log: one done row, 4 batches (7+7+7+4), counters, the checkpoint
     * at the last (latest-expiring) overdue order. */
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.scanner_runs"), 1);
    assert_int_equal(
        testdb_scalar(f->conn,
                      "SELECT count(*) FROM ordergate.scanner_runs WHERE status = 'done' AND "
                      "stop_reason = 'complete' AND batches = 4 AND scanned = 25 AND cancelled = "
                      "25 AND already_cancelled = 0 AND already_paid = 0 AND not_due = 0 AND "
                      "not_found = 0 AND checkpoint_order_no = 'OVER-25' AND finished_at IS NOT "
                      "NULL AND duration_ms >= 0 AND grace = interval '60 seconds' AND batch_size "
                      "= 7"),
        1);

    /* The alarm: a warning naming counts and the first orders... */
    assert_non_null(strstr(c.output, "level=warn"));
    assert_non_null(strstr(c.output, "event=scanner_missed_orders"));
    assert_non_null(strstr(c.output, "cancelled=25"));
    assert_non_null(strstr(c.output, "first_orders=OVER-1,OVER-2,"));
    assert_null(strstr(c.output, "OVER-11")); /* at most 10 named */
    /* ...and the textfile for node_exporter. */
    prom = slurp(f->textfile);
    assert_non_null(strstr(prom, "\nordergate_scanner_missed_orders 25\n"));
    assert_non_null(strstr(prom, "ordergate_scanner_last_run_success 1\n"));
    assert_non_null(strstr(prom, "ordergate_scanner_last_run_status{status=\"done\"} 1\n"));
    assert_non_null(strstr(prom, "ordergate_scanner_last_run_orders{outcome=\"cancelled\"} 25\n"));
    assert_non_null(strstr(prom, "ordergate_scanner_claim_seconds_count 4\n"));
    free(prom);
    scanner_child_free(&c);

    /* A second run finds nothing and changes nothing but its own row. */
    snapshot(f->conn, before);
    assert_int_equal(scanner_child_run(&c, args), 0);
    snapshot(f->conn, after);
    assert_memory_equal(before, after, sizeof(before));
    assert_int_equal(testdb_scalar(f->conn,
                                   "SELECT count(*) FROM ordergate.scanner_runs WHERE run_id = 2 "
                                   "AND status = 'done' AND batches = 0 AND scanned = 0 AND "
                                   "cancelled = 0"),
                     1);
    assert_null(strstr(c.output, "scanner_missed_orders"));
    prom = slurp(f->textfile);
    assert_non_null(strstr(prom, "\nordergate_scanner_missed_orders 0\n"));
    free(prom);
    scanner_child_free(&c);
}

static void test_caps(void **state)
{
    struct scanner_fixture *f = *state;
    struct scanner_child c;
    const char *args[] = {"--db", f->t.conninfo,  "--grace", "0", "--batch-size", "4", "--pause-ms",
                          "0",    "--max-orders", "10",      NULL};

    scanner_place(f->conn, "CAP", 20, -300);
    assert_int_equal(scanner_child_run(&c, args), 0);
    /* The ten oldest, in three batches of 4, 4 and 2. */
    assert_int_equal(testdb_scalar(f->conn,
                                   "SELECT count(*) FROM ordergate.orders WHERE status = "
                                   "'cancelled' AND order_no IN ('CAP-1','CAP-2','CAP-3','CAP-4',"
                                   "'CAP-5','CAP-6','CAP-7','CAP-8','CAP-9','CAP-10')"),
                     10);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.orders WHERE status "
                                            "= 'pending_payment'"),
                     10);
    assert_int_equal(testdb_scalar(f->conn,
                                   "SELECT count(*) FROM ordergate.scanner_runs WHERE status = "
                                   "'done' AND stop_reason = 'max_orders' AND batches = 3 AND "
                                   "cancelled = 10 AND checkpoint_order_no = 'CAP-10'"),
                     1);
    scanner_child_free(&c);

    /* The next run starts from the beginning again and takes the rest. */
    assert_int_equal(scanner_child_run(&c, args), 0);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.orders WHERE status "
                                            "= 'cancelled'"),
                     20);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.status_log"), 20);
    scanner_child_free(&c);
}

/* --workers 3: one claim session stuck on a row lock does not stall the
 * sweep. The test holds the stock row of the first overdue order's SKU (a
 * locked order row would only be skipped and answered busy), so the session
 * that claims the first page waits; the other two must claim every later
 * page meanwhile, and the recorded checkpoint must not pass the stuck page.
 * When the lock goes, the run completes: every order cancelled exactly once,
 * stock back, the checkpoint at the last order. */
static void test_workers_parallel_claims(void **state)
{
    struct scanner_fixture *f = *state;
    struct scanner_child c;
    const char *args[] = {"--db", f->t.conninfo, "--grace", "0", "--batch-size", "50", "--pause-ms",
                          "0",    "--workers",   "3",       NULL};
    PGconn *blocker = testdb_connect(&f->t);

    testdb_exec(f->conn, "SELECT ordergate.add_stock('SKU-Z', 10)");
    testdb_exec(f->conn,
                "SELECT ordergate.place_order('W-0', 100, '[{\"sku\":\"SKU-Z\",\"qty\":1}]', "
                "NULL, now() - interval '300 seconds')");
    scanner_place(f->conn, "W", 2000, -300);
    scanner_place(f->conn, "NOTYET", 5, 600);
    testdb_exec(blocker, "BEGIN");
    testdb_exec(blocker, "SELECT 1 FROM ordergate.inventory WHERE sku = 'SKU-Z' FOR UPDATE");

    scanner_child_start(&c, args);
    /* Every page but the first (W-0..W-49) gets claimed while SKU-Z is locked. */
    assert_true(scanner_poll_at_least(f->conn,
                                      "SELECT count(*) FROM ordergate.orders WHERE status = "
                                      "'cancelled' AND order_no LIKE 'W-%'",
                                      1951, 60000));
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.orders WHERE status "
                                            "= 'pending_payment' AND order_no LIKE 'W-%'"),
                     50);
    /* The run log counts what was claimed, but its checkpoint waits for page 1. */
    assert_true(scanner_poll_at_least(f->conn,
                                      "SELECT coalesce(max(scanned), 0) FROM "
                                      "ordergate.scanner_runs WHERE status = 'running'",
                                      1951, 30000));
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.scanner_runs WHERE "
                                            "status = 'running' AND checkpoint_order_no IS NULL"),
                     1);
    testdb_exec(blocker, "COMMIT");
    assert_int_equal(scanner_child_wait(&c, 60000), 0);

    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.orders WHERE status "
                                            "= 'cancelled' AND order_no LIKE 'W-%'"),
                     2001);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.orders WHERE status "
                                            "= 'pending_payment'"),
                     5);
    assert_int_equal(testdb_scalar(f->conn,
                                   "SELECT count(*) FROM ordergate.status_log WHERE source = "
                                   "'timeout_scanner'"),
                     2001);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.outbox WHERE "
                                            "event_type = 'order_cancelled'"),
                     2001);
    assert_int_equal(testdb_scalar(f->conn, "SELECT sum(available) FROM ordergate.inventory"),
                     1000000 - 5 + 10);
    assert_int_equal(
        testdb_scalar(f->conn,
                      "SELECT count(*) FROM ordergate.scanner_runs WHERE status = 'done' AND "
                      "stop_reason = 'complete' AND batches = 41 AND scanned = 2001 AND "
                      "cancelled = 2001 AND not_due = 0 AND busy = 0 AND "
                      "checkpoint_order_no = 'W-2000'"),
        1);
    assert_int_equal(testdb_scalar(f->conn, "SELECT sum(violations) FROM ordergate.reconcile()"),
                     0);
    scanner_child_free(&c);
    PQfinish(blocker);
}

/* Caps hold with claim sessions: pages are cut to the cap before they are
 * handed out, so exactly max_orders are claimed. */
static void test_workers_caps(void **state)
{
    struct scanner_fixture *f = *state;
    struct scanner_child c;
    const char *args[] = {"--db",       f->t.conninfo, "--grace",      "0",  "--batch-size", "4",
                          "--pause-ms", "0",           "--max-orders", "10", "--workers",    "2",
                          NULL};

    scanner_place(f->conn, "WCAP", 20, -300);
    assert_int_equal(scanner_child_run(&c, args), 0);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.orders WHERE status "
                                            "= 'cancelled'"),
                     10);
    assert_int_equal(testdb_scalar(f->conn,
                                   "SELECT count(*) FROM ordergate.scanner_runs WHERE status = "
                                   "'done' AND stop_reason = 'max_orders' AND batches = 3 AND "
                                   "scanned = 10 AND cancelled = 10 AND checkpoint_order_no = "
                                   "'WCAP-10'"),
                     1);
    scanner_child_free(&c);
}

static void test_dry_run_changes_nothing(void **state)
{
    struct scanner_fixture *f = *state;
    struct scanner_child c;
    const char *args[] = {"--db", f->t.conninfo, "--grace", "60", "--dry-run", NULL};
    long before[5], after[5];

    scanner_place(f->conn, "DRY", 12, -600);
    scanner_place(f->conn, "SOON", 2, -10);
    snapshot(f->conn, before);
    assert_int_equal(scanner_child_run(&c, args), 0);
    snapshot(f->conn, after);
    assert_memory_equal(before, after, sizeof(before));
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.scanner_runs"), 0);
    assert_non_null(strstr(c.output, "dry run: 12 pending orders are overdue by more than 60 s"));
    assert_non_null(strstr(c.output, "a sweep now would claim 12 of them; nothing was changed"));
    assert_non_null(strstr(c.output, "  DRY-1  expire_at "));
    assert_non_null(strstr(c.output, "... and 2 more"));
    assert_null(strstr(c.output, "SOON-1"));
    scanner_child_free(&c);
}

/* The scanner needs nothing beyond ordergate_trigger: a login role that is
 * only a member of it sweeps (schema/README.md, "Roles"). */
static void test_least_privilege(void **state)
{
    struct scanner_fixture *f = *state;
    struct scanner_child c;
    char role[64], sql[256], db_arg[256];
    const char *args[] = {"--db", db_arg, "--grace", "0", NULL};

    snprintf(role, sizeof(role), "og_scan_login_%d", (int)getpid());
    snprintf(sql, sizeof(sql), "DROP ROLE IF EXISTS %s", role);
    testdb_exec(f->conn, sql);
    snprintf(sql, sizeof(sql), "CREATE ROLE %s LOGIN IN ROLE ordergate_trigger", role);
    testdb_exec(f->conn, sql);
    snprintf(db_arg, sizeof(db_arg), "%s user=%s", f->t.conninfo, role);
    scanner_place(f->conn, "PRIV", 3, -120);

    assert_int_equal(scanner_child_run(&c, args), 0);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.orders WHERE status "
                                            "= 'cancelled'"),
                     3);
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM ordergate.scanner_runs WHERE status = 'done' AND cancelled = "
             "3 AND actor = 'ordergate-scanner'");
    assert_int_equal(testdb_scalar(f->conn, sql), 1);
    scanner_child_free(&c);
    /* Direct writes stay refused for that role. */
    snprintf(sql, sizeof(sql),
             "SELECT has_table_privilege('%s', 'ordergate.scanner_runs', 'UPDATE')::int", role);
    assert_int_equal(testdb_scalar(f->conn, sql), 0);
    snprintf(sql, sizeof(sql), "DROP ROLE %s", role);
    testdb_exec(f->conn, sql);
}

/* No --db and no database.conninfo: libpq's environment (PGDATABASE here). */
static void test_libpq_environment(void **state)
{
    struct scanner_fixture *f = *state;
    struct scanner_child c;
    const char *args[] = {"--grace", "0", NULL};
    const char *old = getenv("PGDATABASE");
    char *saved = old != NULL ? strdup(old) : NULL;

    scanner_place(f->conn, "ENV", 2, -120);
    setenv("PGDATABASE", f->t.name, 1);
    unsetenv("ORDERGATE_DB");
    scanner_child_start(&c, args);
    if (saved != NULL)
        setenv("PGDATABASE", saved, 1);
    else
        unsetenv("PGDATABASE");
    free(saved);
    assert_int_equal(scanner_child_wait(&c, 60000), 0);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.scanner_runs WHERE "
                                            "status = 'done' AND cancelled = 2"),
                     1);
    scanner_child_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_overdue_vs_not_due_vs_grace, setup,
                                        scanner_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_caps, setup, scanner_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_workers_parallel_claims, setup,
                                        scanner_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_workers_caps, setup, scanner_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_dry_run_changes_nothing, setup,
                                        scanner_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_least_privilege, setup, scanner_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_libpq_environment, setup, scanner_fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
