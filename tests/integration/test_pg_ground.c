/* Ground truth for the database layer: the throwaway PostgreSQL answers
 * through libpq, the template carries the schema, and db_call reports errors
 * with their SQLSTATE and retriability. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_connect_and_query),
        cmocka_unit_test(test_db_call_errors),
        cmocka_unit_test(test_unreachable_is_retriable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
