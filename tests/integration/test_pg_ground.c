/* Ground truth for the database layer: the throwaway PostgreSQL answers
 * through libpq, the template carries the schema, db_call reports errors
 * with their SQLSTATE and retriability, every session is bounded (lock and
 * statement timeouts, TCP keepalives), and a wait hook runs while an answer is
 * outstanding. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/clock.h"
#include "common/db.h"
#include "support/testdb.h"

static void test_connect_and_query(void **state)
{
    struct testdb t;
    PGconn *conn;

    (void)state;
    testdb_create(&t, "ground");
    conn = testdb_connect(&t);
    assert_true(testdb_scalar(conn, "SELECT current_setting('server_version_num')::int") >= 150000);
    /* The template carries the schema and records its migrations. */
    assert_true(testdb_scalar(conn, "SELECT count(*) FROM ordergate.schema_migrations") >= 1);
    PQfinish(conn);
    testdb_drop(&t);
}

static const struct db_stmt stmt_ok = {"ground_ok", "SELECT $1::int + 1", 1};
static const struct db_stmt stmt_bad = {"ground_bad", "SELECT 1 / $1::int", 1};

static void test_db_call_errors(void **state)
{
    struct testdb t;
    struct db *db;
    struct og_error err = {0};
    PGresult *res = NULL;
    const char *one[] = {"1"};
    const char *zero[] = {"0"};

    (void)state;
    testdb_create(&t, "groundcall");
    db = testdb_open(&t, "test_pg_ground");
    assert_int_equal(db_call(db, &stmt_ok, one, &res, &err), OG_OK);
    assert_string_equal(PQgetvalue(res, 0, 0), "2");
    PQclear(res);
    /* A permanent error is reported once, not retried, with its SQLSTATE. */
    assert_int_equal(db_call(db, &stmt_bad, zero, &res, &err), OG_ERR_DB);
    assert_false(err.retriable);
    assert_string_equal(err.sqlstate, "22012");
    assert_null(res);
    /* The connection is still usable afterwards. */
    assert_int_equal(db_call(db, &stmt_ok, one, NULL, &err), OG_OK);
    db_free(db);
    testdb_drop(&t);
}

static void test_unreachable_is_retriable(void **state)
{
    struct db_retry retry = {.max_attempts = 2, .base_ms = 1, .cap_ms = 2};
    struct db *db = db_new("host=127.0.0.1 port=1 dbname=none", NULL, "t", &retry, NULL);
    struct og_error err = {0};

    (void)state;
    assert_non_null(db);
    assert_int_equal(db_call(db, &stmt_ok, (const char *[]){"1"}, NULL, &err), OG_ERR_DB);
    assert_true(err.retriable);
    assert_non_null(strstr(err.msg, "cannot connect"));
    db_free(db);
}

/* The value libpq settled on for a connection option. */
static void expect_conninfo(PGconn *conn, const char *key, const char *want)
{
    PQconninfoOption *opts = PQconninfo(conn);
    const char *got = NULL;

    assert_non_null(opts);
    for (PQconninfoOption *o = opts; o->keyword != NULL; o++)
        if (strcmp(o->keyword, key) == 0)
            got = o->val;
    if (got == NULL || strcmp(got, want) != 0)
        fail_msg("%s = %s, expected %s", key, got != NULL ? got : "(unset)", want);
    PQconninfoFree(opts);
}

static const struct db_stmt stmt_show = {
    "ground_show", "SELECT current_setting('lock_timeout'), current_setting('statement_timeout')",
    0};
static const struct db_stmt stmt_lock = {
    "ground_lock", "SELECT 1 FROM ordergate.inventory WHERE sku = 'g-1' FOR UPDATE", 0};
static const struct db_stmt stmt_sleep = {"ground_sleep", "SELECT pg_sleep(5)", 0};

/* Every call runs under the configured lock_timeout and statement_timeout (set for its own
 * transaction), also after a reconnect; the keepalive defaults apply unless the conninfo names
 * its own. */
static void test_session_bounds(void **state)
{
    struct testdb t;
    struct db_retry retry = {.max_attempts = 1, .base_ms = 1, .cap_ms = 2};
    struct db_session session = {.lock_timeout_ms = 300, .statement_timeout_ms = 700};
    struct og_error err = {0};
    PGresult *res = NULL;
    PGconn *locker;
    struct db *db;
    char conninfo[300];

    (void)state;
    testdb_create(&t, "groundsess");
    db = db_new(t.conninfo, NULL, "test_pg_ground", &retry, NULL);
    assert_non_null(db);
    assert_int_equal(db_set_session(db, &session, &err), OG_OK);
    assert_int_equal(db_call(db, &stmt_show, NULL, &res, &err), OG_OK);
    assert_string_equal(PQgetvalue(res, 0, 0), "300ms");
    assert_string_equal(PQgetvalue(res, 0, 1), "700ms");
    PQclear(res);
    /* Only the call's own transaction had them: the session keeps the server's, so that no
     * other client a pooler lends this server connection to inherits them, whatever
     * database.pool_mode says. */
    res = PQexec(db_conn(db), "SELECT current_setting('lock_timeout'), "
                              "current_setting('statement_timeout')");
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    assert_string_equal(PQgetvalue(res, 0, 0), "0");
    assert_string_equal(PQgetvalue(res, 0, 1), "0");
    PQclear(res);
    expect_conninfo(db_conn(db), "keepalives", "1");
    expect_conninfo(db_conn(db), "keepalives_idle", DB_KEEPALIVES_IDLE);
    expect_conninfo(db_conn(db), "keepalives_interval", DB_KEEPALIVES_INTERVAL);
    expect_conninfo(db_conn(db), "keepalives_count", DB_KEEPALIVES_COUNT);
    expect_conninfo(db_conn(db), "tcp_user_timeout", DB_TCP_USER_TIMEOUT_MS);

    /* A row lock held by another session ends the wait after lock_timeout: 55P03, which is
     * transient (the caller tries again later). */
    locker = testdb_connect(&t);
    testdb_exec(locker, "SELECT ordergate.add_stock('g-1', 5)");
    testdb_exec(locker, "BEGIN");
    testdb_exec(locker, "SELECT 1 FROM ordergate.inventory WHERE sku = 'g-1' FOR UPDATE");
    assert_int_equal(db_call(db, &stmt_lock, NULL, NULL, &err), OG_ERR_DB);
    assert_string_equal(err.sqlstate, "55P03");
    assert_true(err.retriable);
    testdb_exec(locker, "ROLLBACK");
    assert_int_equal(db_call(db, &stmt_lock, NULL, NULL, &err), OG_OK);
    /* A statement that runs too long is cancelled: 57014. */
    assert_int_equal(db_call(db, &stmt_sleep, NULL, NULL, &err), OG_ERR_DB);
    assert_string_equal(err.sqlstate, "57014");

    /* After the session is lost, the new one gets the bounds again. */
    testdb_exec(locker, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                        "application_name = 'test_pg_ground'");
    PQfinish(locker);
    db_call(db, &stmt_show, NULL, NULL, &err); /* finds the session gone */
    assert_int_equal(db_call(db, &stmt_show, NULL, &res, &err), OG_OK);
    assert_string_equal(PQgetvalue(res, 0, 0), "300ms");
    PQclear(res);
    db_free(db);

    /* The conninfo's own keepalive values win over the defaults; 0 leaves the server's
     * timeouts alone. */
    snprintf(conninfo, sizeof(conninfo), "%s keepalives_idle=77 tcp_user_timeout=1234", t.conninfo);
    db = db_new(conninfo, NULL, "test_pg_ground", &retry, NULL);
    assert_non_null(db);
    assert_int_equal(db_set_session(db, &(struct db_session){0, 0, false}, &err), OG_OK);
    assert_int_equal(db_call(db, &stmt_show, NULL, &res, &err), OG_OK);
    assert_string_equal(PQgetvalue(res, 0, 0), "0");
    assert_string_equal(PQgetvalue(res, 0, 1), "0");
    PQclear(res);
    expect_conninfo(db_conn(db), "keepalives_idle", "77");
    expect_conninfo(db_conn(db), "tcp_user_timeout", "1234");
    expect_conninfo(db_conn(db), "keepalives_interval", DB_KEEPALIVES_INTERVAL);
    db_free(db);
    testdb_drop(&t);
}

/* A server that keeps the connection up and stops answering (its backend stopped here; behind
 * a proxy or pooler a database host gone silent looks the same, and keepalives and
 * tcp_user_timeout see nothing, the kernel acknowledging every byte): a call, in a pipeline or
 * in a transaction (its COMMIT), fails within database.statement_timeout_ms + DB_REPLY_SLACK_MS
 * as a lost connection (08006, retriable), and the connection is dropped. */
static void test_silent_server(void **state)
{
    struct testdb t;
    struct db_retry retry = {.max_attempts = 1, .base_ms = 1, .cap_ms = 2};
    struct db_session session = {.lock_timeout_ms = 300, .statement_timeout_ms = 500};
    struct og_error err = {0};
    struct db *db;
    int pid;
    int64_t t0, ms;

    (void)state;
    testdb_create(&t, "groundsilent");
    db = db_new(t.conninfo, NULL, "test_pg_ground", &retry, NULL);
    assert_non_null(db);
    assert_int_equal(db_set_session(db, &session, &err), OG_OK);
    for (int commit = 0; commit < 2; commit++) {
        assert_int_equal(db_call(db, &stmt_show, NULL, NULL, &err), OG_OK);
        if (commit)
            assert_int_equal(db_exec(db, "BEGIN", &err), OG_OK);
        pid = PQbackendPID(db_conn(db));
        assert_true(pid > 0);
        assert_int_equal(kill(pid, SIGSTOP), 0);
        t0 = clock_mono_ms();
        if (commit)
            assert_int_equal(db_exec(db, "COMMIT", &err), OG_ERR_DB);
        else
            assert_int_equal(db_call(db, &stmt_show, NULL, NULL, &err), OG_ERR_DB);
        ms = clock_mono_ms() - t0;
        assert_int_equal(kill(pid, SIGCONT), 0);
        assert_true(err.retriable);
        assert_string_equal(err.sqlstate, "08006");
        assert_non_null(strstr(err.msg, "database.statement_timeout_ms"));
        assert_null(db_conn(db));
        assert_true(ms >= 500 + DB_REPLY_SLACK_MS - 100);
        assert_true(ms < 500 + DB_REPLY_SLACK_MS + 5000);
    }
    /* The next call connects again. */
    assert_int_equal(db_call(db, &stmt_show, NULL, NULL, &err), OG_OK);
    db_free(db);
    testdb_drop(&t);
}

/* The wait hook: called while a statement's answer is outstanding (here a 200 ms sleep, so at
 * least a few times at 1 ms slices), never with the answer in hand, and the answer is the
 * statement's; a statement that fails while the hook runs fails as without it. */
static const struct db_stmt stmt_nap = {"ground_nap", "SELECT pg_sleep(0.2), $1::int", 1};

static bool wait_count(void *arg)
{
    (*(int *)arg)++;
    return true;
}

/* A hook with nothing left to do after its first call in a wait. */
static bool wait_once(void *arg)
{
    (*(int *)arg)++;
    return false;
}

static void test_wait_hook(void **state)
{
    struct testdb t;
    struct db_retry retry = {.max_attempts = 1, .base_ms = 1, .cap_ms = 2};
    struct db_session session = {.lock_timeout_ms = 300, .statement_timeout_ms = 700};
    struct og_error err = {0};
    PGresult *res = NULL;
    const char *seven[] = {"7"};
    struct db *db;
    int calls = 0;

    (void)state;
    testdb_create(&t, "groundwait");
    db = db_new(t.conninfo, NULL, "test_pg_ground", &retry, NULL);
    assert_non_null(db);
    assert_int_equal(db_set_session(db, &session, &err), OG_OK);
    db_set_wait_hook(db, wait_count, &calls, 1);
    assert_int_equal(db_call(db, &stmt_nap, seven, &res, &err), OG_OK);
    assert_string_equal(PQgetvalue(res, 0, 1), "7");
    PQclear(res);
    if (calls < 3)
        fail_msg("wait hook called %d times during a 200 ms statement", calls);
    /* Past the statement_timeout: 57014, as without the hook. */
    assert_int_equal(db_call(db, &stmt_sleep, NULL, NULL, &err), OG_ERR_DB);
    assert_string_equal(err.sqlstate, "57014");
    /* A hook that says it is done is not woken every millisecond for the rest of the wait: once
     * per result of the pipeline (SET LOCALs, the statement, the sync), where the 200 ms
     * statement above woke it every millisecond. */
    db_set_wait_hook(db, wait_once, &calls, 1);
    calls = 0;
    assert_int_equal(db_call(db, &stmt_nap, seven, &res, &err), OG_OK);
    assert_string_equal(PQgetvalue(res, 0, 1), "7");
    PQclear(res);
    if (calls < 1 || calls > 8)
        fail_msg("a hook done after its first call was called %d times during a 200 ms statement",
                 calls);
    /* Removed: not called any more. */
    db_set_wait_hook(db, NULL, NULL, 1);
    calls = 0;
    assert_int_equal(db_call(db, &stmt_nap, seven, NULL, &err), OG_OK);
    assert_int_equal(calls, 0);
    db_free(db);
    testdb_drop(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_connect_and_query),
        cmocka_unit_test(test_db_call_errors),
        cmocka_unit_test(test_unreachable_is_retriable),
        cmocka_unit_test(test_session_bounds),
        cmocka_unit_test(test_silent_server),
        cmocka_unit_test(test_wait_hook),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
