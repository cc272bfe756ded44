/* scanner/runlog.c against the database: a start whose reply is lost after
 * its commit. db_call() repeats a statement whose reply it did not get; here
 * the wrapped db_call runs the start once, throws its reply away (as a
 * connection lost after the commit would) and runs it again with the same
 * parameters, exactly as db_call's repeat does. The repeat must resume the
 * run the first attempt recorded: without the run token it found the lease
 * held by that run and was skipped, and the orphaned run kept the lease. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "scanner/runlog.h"
#include "support/testdb.h"

enum og_status __real_db_call(struct db *db, const struct db_stmt *stmt, const char *const *params,
                              PGresult **res, struct og_error *err);
enum og_status __wrap_db_call(struct db *db, const struct db_stmt *stmt, const char *const *params,
                              PGresult **res, struct og_error *err);

static bool lose_start_reply; /* the next scanner_run_start's first reply is lost */
static int start_attempts;    /* scanner_run_start statements sent */

enum og_status __wrap_db_call(struct db *db, const struct db_stmt *stmt, const char *const *params,
                              PGresult **res, struct og_error *err)
{
    if (strcmp(stmt->name, "og_scan_run_start") != 0)
        return __real_db_call(db, stmt, params, res, err);
    start_attempts++;
    if (lose_start_reply) {
        PGresult *lost = NULL;
        enum og_status st = __real_db_call(db, stmt, params, &lost, err);

        lose_start_reply = false;
        PQclear(lost);
        if (st != OG_OK)
            return st;
        start_attempts++;
    }
    return __real_db_call(db, stmt, params, res, err);
}

struct fixture {
    struct testdb t;
    PGconn *conn;
    struct db *db;
};

static int setup(void **state)
{
    static struct fixture f;

    memset(&f, 0, sizeof(f));
    testdb_create(&f.t, "scan_runlog");
    f.conn = testdb_connect(&f.t);
    f.db = testdb_open(&f.t, "ordergate-scanner");
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    db_free(f->db);
    PQfinish(f->conn);
    testdb_drop(&f->t);
    return 0;
}

static const struct runlog_settings settings = {
    .grace_s = 0, .batch_size = 100, .max_orders = 0, .max_seconds = 0, .lease_ms = 60000};

/* The repeated start resumes the run its first attempt recorded; the run
 * then finishes normally and releases the lease. */
static void test_start_reply_lost(void **state)
{
    struct fixture *f = *state;
    struct runlog_start_result start;
    struct runlog_counts counts = {0};
    struct runlog_checkpoint cp = {{0}, {0}};
    struct og_error err = {0};
    char sql[256];

    start_attempts = 0;
    lose_start_reply = true;
    if (runlog_start(f->db, &settings, &start, &err) != OG_OK)
        fail_msg("runlog_start: %s", err.msg);
    assert_int_equal(start_attempts, 2);
    if (start.skipped)
        fail_msg("the repeated start was skipped: %s", start.detail);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.scanner_runs"), 1);
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM ordergate.scanner_runs r JOIN ordergate.scanner_lease l ON "
             "l.run_id = r.run_id WHERE r.run_id = %lld AND r.status = 'running' AND "
             "r.run_token = '%s'",
             (long long)start.run_id, start.token);
    assert_int_equal(testdb_scalar(f->conn, sql), 1);

    assert_int_equal(
        runlog_finish(f->db, start.run_id, "done", "complete", NULL, &counts, &cp, NULL, &err),
        OG_OK);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.scanner_lease WHERE "
                                            "run_id IS NULL"),
                     1);
}

/* Each run draws its own token: a second run while the first holds the lease
 * is skipped, not mistaken for a repeat. */
static void test_tokens_differ(void **state)
{
    struct fixture *f = *state;
    struct runlog_start_result a, b;
    struct runlog_counts counts = {0};
    struct runlog_checkpoint cp = {{0}, {0}};
    struct og_error err = {0};

    assert_int_equal(runlog_start(f->db, &settings, &a, &err), OG_OK);
    assert_false(a.skipped);
    assert_int_equal(runlog_start(f->db, &settings, &b, &err), OG_OK);
    assert_true(b.skipped);
    assert_true(b.run_id != a.run_id);
    assert_string_not_equal(a.token, b.token);
    assert_true(strlen(a.token) >= 16);
    assert_int_equal(
        runlog_finish(f->db, a.run_id, "done", "complete", NULL, &counts, &cp, NULL, &err), OG_OK);
}

/* A lease past the bound (70 minutes) is refused with 22023 and writes nothing. */
static void test_lease_bound(void **state)
{
    struct fixture *f = *state;
    struct runlog_start_result start;
    struct runlog_settings s = settings;
    struct og_error err = {0};
    long before = testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.scanner_runs");

    s.lease_ms = 70L * 60 * 1000 + 1;
    assert_int_not_equal(runlog_start(f->db, &s, &start, &err), OG_OK);
    assert_string_equal(err.sqlstate, "22023");
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.scanner_runs"), before);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.scanner_lease WHERE "
                                            "run_id IS NULL"),
                     1);
}

/* The sweep lock's advisory key pauses sweeps only in the hands of a role that may run or
 * administer them: an order service's login holding it (pg_advisory_lock needs no privilege)
 * is passed over, a trigger's login holding it still pauses. */
static void hold_key_as(struct fixture *f, const char *kind, const char *member_of, bool pauses)
{
    struct runlog_start_result start;
    struct runlog_counts counts = {0};
    struct runlog_checkpoint cp = {{0}, {0}};
    struct og_error err = {0};
    char role[64], sql[256], conninfo[256];
    PGconn *holder;

    snprintf(role, sizeof(role), "og_runlog_%s_%d", kind, (int)getpid());
    snprintf(sql, sizeof(sql), "DROP ROLE IF EXISTS %s; CREATE ROLE %s LOGIN IN ROLE %s", role,
             role, member_of);
    testdb_exec(f->conn, sql);
    snprintf(conninfo, sizeof(conninfo), "%s user=%s", f->t.conninfo, role);
    holder = PQconnectdb(conninfo);
    assert_int_equal(PQstatus(holder), CONNECTION_OK);
    assert_int_equal(testdb_scalar(holder, "SELECT pg_try_advisory_lock(8027511731484753921)::int"),
                     1);

    assert_int_equal(runlog_start(f->db, &settings, &start, &err), OG_OK);
    if (start.skipped != pauses)
        fail_msg("a key held by a member of %s: skipped=%d, want %d (%s)", member_of, start.skipped,
                 pauses, start.detail);
    if (!start.skipped)
        assert_int_equal(
            runlog_finish(f->db, start.run_id, "done", "complete", NULL, &counts, &cp, NULL, &err),
            OG_OK);
    PQfinish(holder);
    snprintf(sql, sizeof(sql), "DROP ROLE %s", role);
    testdb_exec(f->conn, sql);
}

static void test_key_of_another_role(void **state)
{
    struct fixture *f = *state;

    hold_key_as(f, "svc", "ordergate_order_service", false);
    hold_key_as(f, "trg", "ordergate_trigger", true);
    hold_key_as(f, "adm", "ordergate_admin", true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_start_reply_lost, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tokens_differ, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lease_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_key_of_another_role, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
