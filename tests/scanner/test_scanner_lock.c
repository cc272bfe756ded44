/* Overlapping runs: the sweep lease makes the second one skip (exit 0, a
 * 'skipped' row, nothing touched), and so does a session holding the sweep
 * lock's advisory key (an operator's pause); a run whose process died stays
 * visible, keeps the lease until it expires, and the next run after that
 * reports it as crashed, then finishes its work; a run whose lease another
 * run took over stops. Skips that go on past --max-skip with nothing sweeping
 * are an alarm (exit 4), and the sweep timestamp moves only when a run
 * sweeps. */
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

#include "common/scrape.h"
#include "scanner_child.h"
#include "support/testdb.h"
#include "support/testutil.h"

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
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.scanner_lease WHERE "
                                            "run_id IS NULL AND expires_at IS NULL"),
                     1);
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
    /* Kept out by the first run's lease, which it names. */
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.scanner_runs s, "
                                            "ordergate.scanner_runs r WHERE s.status = 'skipped' "
                                            "AND r.status = 'running' AND s.detail LIKE 'run ' "
                                            "|| r.run_id || ' (% pid ' || r.os_pid || ') holds "
                                            "the sweep lease until %'"),
                     1);

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

/* kill -9 mid-run: the row stays 'running' and its lease keeps later runs out
 * until it expires; then the next run marks it 'crashed', reports it, and
 * cancels what the dead one left. */
static void test_crashed_run_reported(void **state)
{
    struct scanner_fixture *f = *state;
    struct scanner_child a, b;
    const char *slow[] = {"--db", f->t.conninfo, "--grace", "0", "--batch-size", "1", "--pause-ms",
                          "2000", "--lease-s",   "2",       NULL};
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
    /* The dead run still holds the lease (renewed for 2 s + the 2 s pause after its last
     * batch), whatever became of its session; it is free only once expired. */
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM ordergate.scanner_lease WHERE run_id = %ld AND expires_at > "
             "taken_at",
             dead_run);
    assert_int_equal(testdb_scalar(f->conn, sql), 1);
    assert_true(scanner_poll_at_least(
        f->conn, "SELECT (expires_at < clock_timestamp())::int FROM ordergate.scanner_lease", 1,
        20000));

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
    assert_non_null(strstr(b.output, "its sweep lease expired at"));
    scanner_child_free(&a);
    scanner_child_free(&b);
}

/* A run that stalls past its lease is taken over: the next run marks it crashed and sweeps
 * (two orders: --max-orders); the stalled run, at its next batch, finds it lost the sweep and
 * stops (exit 1). Every order is cancelled once. (The stall is the test moving the lease's
 * expiry into the past: what a run stuck longer than --lease-s looks like to the others.) */
static void test_lease_taken_over(void **state)
{
    struct scanner_fixture *f = *state;
    struct scanner_child a, b;
    const char *slow[] = {"--db", f->t.conninfo, "--grace", "0", "--batch-size", "1", "--pause-ms",
                          "3000", "--lease-s",   "60",      NULL};
    const char *next[] = {"--db", f->t.conninfo, "--grace", "0", "--max-orders", "2", NULL};
    const char *rest[] = {"--db", f->t.conninfo, "--grace", "0", NULL};
    char sql[256];
    long first;

    scanner_place(f->conn, "TO", 6, -120);
    scanner_child_start(&a, slow);
    assert_true(scanner_poll_at_least(
        f->conn, "SELECT coalesce(max(batches), 0) FROM ordergate.scanner_runs", 1, 20000));
    first = testdb_scalar(f->conn, "SELECT run_id FROM ordergate.scanner_runs");
    /* Within the lease the second run skips. */
    assert_int_equal(scanner_child_run(&b, next), 0);
    assert_non_null(strstr(b.output, "event=scanner_run_skipped"));
    scanner_child_free(&b);

    testdb_exec(f->conn, "UPDATE ordergate.scanner_lease SET expires_at = clock_timestamp() - "
                         "interval '1 second'");
    assert_int_equal(scanner_child_run(&b, next), 0);
    assert_non_null(strstr(b.output, "event=scanner_crashed_run"));
    assert_int_equal(scanner_child_wait(&a, 30000), 1);
    assert_non_null(strstr(a.output, "crashed (its sweep lease had expired) and took the sweep"));
    scanner_child_free(&b);
    /* What the two left (the taking run stopped at --max-orders) is the next run's. */
    assert_int_equal(scanner_child_run(&b, rest), 0);
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM ordergate.scanner_runs WHERE run_id = %ld AND status = "
             "'failed' AND reported_by IS NOT NULL",
             first);
    assert_int_equal(testdb_scalar(f->conn, sql), 1);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.orders WHERE status "
                                            "= 'cancelled'"),
                     6);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.status_log"), 6);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.scanner_lease WHERE "
                                            "run_id IS NULL"),
                     1);
    scanner_child_free(&a);
    scanner_child_free(&b);
}

/* A sample of the scanner's textfile; fails the test when it is absent. */
static double prom_value(const char *path, const char *sample)
{
    char *text = testutil_slurp(path);
    double v = -1;

    assert_non_null(text);
    if (!scrape_sample(text, sample, &v))
        fail_msg("%s: no sample %s in:\n%s", path, sample, text);
    free(text);
    return v;
}

/* Unix seconds of the newest done run's end, as the database has it. */
static double last_done_at(PGconn *conn)
{
    return (double)testdb_scalar(conn, "SELECT floor(extract(epoch FROM max(finished_at)))::bigint "
                                       "FROM ordergate.scanner_runs WHERE status = 'done'");
}

/* Done runs as if they had ended `age` ago (the lock then held all along). */
static void backdate_sweeps(PGconn *conn, const char *age)
{
    char sql[320];

    snprintf(sql, sizeof(sql),
             "UPDATE ordergate.scanner_runs SET started_at = started_at - interval '%s', "
             "finished_at = finished_at - interval '%s', progress_at = progress_at - interval "
             "'%s' WHERE status = 'done'",
             age, age, age);
    testdb_exec(conn, sql);
}

/* Another session has held the lock for ten minutes, longer than the
 * default --max-skip (3 x a one-minute schedule): the skipped run alarms
 * (exit 4, success 0, the age of the last sweep) instead of passing for a
 * successful run, and the sweep timestamp stays where the last sweep left
 * it. Before --max-skip existed this run exited 0 and looked successful. */
static void test_lock_held_past_max_skip_alarms(void **state)
{
    struct scanner_fixture *f = *state;
    struct scanner_child c;
    const char *run[] = {"--db", f->t.conninfo, "--grace", "0", "--textfile", f->textfile, NULL};
    const char *lenient[] = {"--db", f->t.conninfo, "--grace",   "0", "--max-skip",
                             "3600", "--textfile",  f->textfile, NULL};
    char expect[64];
    long holder = testdb_scalar(f->conn, "SELECT pg_backend_pid()");
    double swept_at;

    scanner_place(f->conn, "MS", 3, -120);
    assert_int_equal(scanner_child_run(&c, run), 0);
    scanner_child_free(&c);
    backdate_sweeps(f->conn, "10 minutes");
    swept_at = last_done_at(f->conn);

    /* Held by a session that never sweeps; more orders fall due. */
    testdb_exec(f->conn, "SELECT pg_advisory_lock(ordergate.scanner_lock_key())");
    scanner_place(f->conn, "MT", 2, -120);

    assert_int_equal(scanner_child_run(&c, run), 4);
    assert_non_null(strstr(c.output, "event=scanner_run_skipped"));
    assert_non_null(strstr(c.output, "event=scanner_not_sweeping"));
    snprintf(expect, sizeof(expect), "holder_pid=%ld holder_role=", holder);
    assert_non_null(strstr(c.output, expect));
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.orders WHERE status "
                                            "= 'pending_payment'"),
                     2);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.scanner_runs WHERE "
                                            "status = 'skipped' AND stop_reason = 'lock_held'"),
                     1);
    assert_true(prom_value(f->textfile, "ordergate_scanner_last_run_success") == 0);
    assert_true(prom_value(f->textfile, "ordergate_scanner_last_run_status{status=\"skipped\"}") ==
                1);
    assert_true(prom_value(f->textfile, "ordergate_scanner_max_skip_seconds") == 180);
    assert_true(prom_value(f->textfile, "ordergate_scanner_last_sweep_age_seconds") >= 600);
    /* Not refreshed by the skip: still the end of the run that swept. */
    assert_true(
        prom_value(f->textfile, "ordergate_scanner_last_sweep_timestamp_seconds") - swept_at < 1.0);
    scanner_child_free(&c);

    /* A limit longer than the hold: the same skip is no alarm. */
    assert_int_equal(scanner_child_run(&c, lenient), 0);
    assert_null(strstr(c.output, "event=scanner_not_sweeping"));
    assert_true(prom_value(f->textfile, "ordergate_scanner_last_run_success") == 1);
    scanner_child_free(&c);

    /* Released: the next run sweeps, succeeds and moves the timestamp. */
    testdb_exec(f->conn, "SELECT pg_advisory_unlock(ordergate.scanner_lock_key())");
    assert_int_equal(scanner_child_run(&c, run), 0);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.orders WHERE status "
                                            "= 'pending_payment'"),
                     0);
    assert_true(prom_value(f->textfile, "ordergate_scanner_last_run_success") == 1);
    assert_true(prom_value(f->textfile, "ordergate_scanner_last_sweep_age_seconds") < 60);
    assert_true(prom_value(f->textfile, "ordergate_scanner_last_sweep_timestamp_seconds") >
                swept_at + 500);
    scanner_child_free(&c);
}

/* A skip within --max-skip (the default: 180 s) stays exit 0, as does a skip
 * behind a long sweep that is making progress, however old the last finished
 * sweep. */
static void test_short_skip_exits_0(void **state)
{
    struct scanner_fixture *f = *state;
    struct scanner_child a, c;
    const char *run[] = {"--db", f->t.conninfo, "--grace", "0", "--textfile", f->textfile, NULL};
    const char *slow[] = {"--db", f->t.conninfo, "--grace", "0", "--batch-size",
                          "1",    "--pause-ms",  "1000",    NULL};
    const char *skip30[] = {"--db", f->t.conninfo, "--grace",   "0", "--max-skip",
                            "30",   "--textfile",  f->textfile, NULL};
    double swept_at;

    scanner_place(f->conn, "SS", 1, -120);
    assert_int_equal(scanner_child_run(&c, run), 0);
    scanner_child_free(&c);
    swept_at = last_done_at(f->conn);
    testdb_exec(f->conn, "SELECT pg_advisory_lock(ordergate.scanner_lock_key())");
    assert_int_equal(scanner_child_run(&c, run), 0);
    assert_non_null(strstr(c.output, "event=scanner_run_skipped"));
    assert_null(strstr(c.output, "event=scanner_not_sweeping"));
    assert_true(prom_value(f->textfile, "ordergate_scanner_last_run_success") == 1);
    assert_true(prom_value(f->textfile, "ordergate_scanner_last_run_status{status=\"skipped\"}") ==
                1);
    assert_true(prom_value(f->textfile, "ordergate_scanner_max_skip_seconds") == 180);
    assert_true(prom_value(f->textfile, "ordergate_scanner_last_sweep_age_seconds") < 180);
    assert_true(
        prom_value(f->textfile, "ordergate_scanner_last_sweep_timestamp_seconds") - swept_at < 1.0);
    scanner_child_free(&c);
    testdb_exec(f->conn, "SELECT pg_advisory_unlock(ordergate.scanner_lock_key())");

    /* The last finished sweep an hour ago, and a real sweep holding the lock,
     * one order per second: it is sweeping, so no alarm. */
    backdate_sweeps(f->conn, "1 hour");
    scanner_place(f->conn, "SL", 4, -120);
    scanner_child_start(&a, slow);
    assert_true(scanner_poll_at_least(
        f->conn,
        "SELECT coalesce(max(batches), 0) FROM ordergate.scanner_runs WHERE status = "
        "'running'",
        1, 20000));
    assert_int_equal(scanner_child_run(&c, skip30), 0);
    assert_non_null(strstr(c.output, "event=scanner_run_skipped"));
    assert_true(prom_value(f->textfile, "ordergate_scanner_last_run_success") == 1);
    assert_true(prom_value(f->textfile, "ordergate_scanner_last_sweep_age_seconds") < 30);
    scanner_child_free(&c);
    assert_int_equal(scanner_child_wait(&a, 30000), 0);
    scanner_child_free(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_lock_held_skips, setup, scanner_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_two_scanners, setup, scanner_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_crashed_run_reported, setup, scanner_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_lease_taken_over, setup, scanner_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_lock_held_past_max_skip_alarms, setup,
                                        scanner_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_short_skip_exits_0, setup, scanner_fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
