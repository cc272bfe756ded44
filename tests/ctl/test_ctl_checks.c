/* ordergatectl check add / drop / list against a real PostgreSQL: a bad name exits 2 and sends
 * nothing; a function that is not a fit check exits 2 (SECURITY INVOKER: the database's 22023
 * and its reason) or 1 (missing), and registers nothing; a fit one is registered (its id), listed
 * (text and JSON) and dropped (dropped, then not_found); a role without ordergate_admin gets one
 * clear error. Roles are cluster-wide: the shop role's name carries the pid and goes at the end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ctl/ctl_run.h"
#include "support/testdb.h"

static void test_checks(void **state)
{
    struct testdb t;
    struct ctl_result r;
    PGconn *conn;
    const json_t *list;
    char sql[1600], svc[200];
    int pid = (int)getpid();

    (void)state;
    testdb_create(&t, "ctl_checks");
    conn = testdb_connect(&t);
    snprintf(sql, sizeof(sql),
             "CREATE ROLE og_ctl_check_%d NOLOGIN;"
             "CREATE SCHEMA shop AUTHORIZATION og_ctl_check_%d;"
             "GRANT USAGE ON SCHEMA shop TO ordergate_owner;"
             "SET ROLE og_ctl_check_%d;"
             "CREATE FUNCTION shop.check_ok() RETURNS TABLE (detail text) LANGUAGE sql "
             "SECURITY DEFINER SET search_path = shop, pg_temp AS $$ SELECT 'x' WHERE false $$;"
             "CREATE FUNCTION shop.check_invoker() RETURNS TABLE (detail text) LANGUAGE sql "
             "SET search_path = shop, pg_temp AS $$ SELECT 'x' $$;"
             "GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA shop TO ordergate_owner;"
             "RESET ROLE",
             pid, pid, pid);
    testdb_exec(conn, sql);

    ctl_run(&r, "check", "list", "--db", t.conninfo, NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "no shop checks registered"));
    ctl_result_free(&r);

    ctl_run(&r, "check", "add", "Stock!", "shop.check_ok()", "--db", t.conninfo, NULL);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "check NAME"));
    ctl_result_free(&r);
    ctl_run(&r, "check", "add", "stock", "shop.check_invoker()", "--db", t.conninfo, NULL);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "it is not SECURITY DEFINER"));
    ctl_result_free(&r);
    ctl_run(&r, "check", "add", "stock", "shop.nope()", "--db", t.conninfo, NULL);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "does not exist"));
    ctl_result_free(&r);
    assert_int_equal(testdb_scalar(conn, "SELECT count(*) FROM ordergate.checks"), 0);

    ctl_run(&r, "check", "add", "stock", "shop.check_ok()", "--db", t.conninfo, "--json", NULL);
    assert_int_equal(r.status, 0);
    assert_int_equal(ctl_json_i(r.json, "id"),
                     testdb_scalar(conn, "SELECT id FROM ordergate.checks WHERE name = 'stock'"));
    ctl_result_free(&r);
    ctl_run(&r, "check", "list", "--db", t.conninfo, NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "shop.check_ok()"));
    assert_non_null(strstr(r.out, "1 shop check;"));
    ctl_result_free(&r);
    ctl_run(&r, "check", "list", "--db", t.conninfo, "--json", NULL);
    assert_int_equal(r.status, 0);
    list = json_object_get(r.json, "checks");
    assert_int_equal(json_array_size(list), 1);
    assert_string_equal(ctl_json_s(json_array_get(list, 0), "name"), "stock");
    ctl_result_free(&r);

    /* Without ordergate_admin: one clear error, still registered. */
    testdb_exec(conn, "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = "
                      "'og_ctl_check_svc') THEN CREATE ROLE og_ctl_check_svc LOGIN; END IF; "
                      "END $$");
    testdb_exec(conn, "GRANT ordergate_order_service TO og_ctl_check_svc");
    snprintf(svc, sizeof(svc), "%s user=og_ctl_check_svc", t.conninfo);
    ctl_run(&r, "check", "drop", "stock", "--db", svc, NULL);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "ordergate_admin"));
    ctl_result_free(&r);
    assert_int_equal(testdb_scalar(conn, "SELECT count(*) FROM ordergate.checks"), 1);

    ctl_run(&r, "check", "drop", "stock", "--db", t.conninfo, NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "dropped"));
    ctl_result_free(&r);
    ctl_run(&r, "check", "drop", "stock", "--db", t.conninfo, NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "not_found"));
    ctl_result_free(&r);

    snprintf(sql, sizeof(sql), "DROP SCHEMA shop CASCADE; DROP ROLE og_ctl_check_%d", pid);
    testdb_exec(conn, sql);
    PQfinish(conn);
    testdb_drop(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
