/* ordergatectl archive against a real PostgreSQL: bad input exits 2 and changes nothing,
 * --dry-run counts and changes nothing, a run batches until nothing is left (one log line per
 * batch) and moves exactly the closed, settled orders, the books reconcile after it, a second
 * run moves nothing, and a role without ordergate_admin gets one clear error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ctl/ctl_run.h"
#include "support/testdb.h"

static int count_lines(const char *text, const char *needle)
{
    int n = 0;

    for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

static long moved(const json_t *j, const char *table)
{
    const json_t *m = json_object_get(j, "moved");

    assert_non_null(m);
    return ctl_json_i(m, table);
}

#define BOOKS                                                                                      \
    "SELECT (SELECT count(*) FROM ordergate.orders) * 1000 + "                                     \
    "(SELECT count(*) FROM ordergate.archived_orders)"

static void test_archive(void **state)
{
    struct testdb t;
    struct ctl_result r;
    PGconn *conn;
    PGresult *res;
    char cut[64], svc[200];

    (void)state;
    testdb_create(&t, "ctl_archive");
    conn = testdb_connect(&t);
    /* 30 orders: 24 paid and settled, 1 paid with its event unpublished, 5 pending. */
    testdb_exec(conn, "SELECT ordergate.add_stock('S1', 1000)");
    testdb_exec(conn, "SELECT ordergate.place_order('A' || i, 100, '[{\"sku\":\"S1\",\"qty\":2}]', "
                      "NULL, now() + interval '1 hour') FROM generate_series(1, 30) i");
    testdb_exec(conn, "SELECT ordergate.claim_payment('A' || i, 'T' || i, 100, 'card') "
                      "FROM generate_series(1, 25) i");
    testdb_exec(conn, "UPDATE ordergate.outbox SET published_at = now() WHERE order_no <> 'A25'");
    res = PQexec(conn, "SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', "
                       "'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')");
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    snprintf(cut, sizeof(cut), "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    assert_int_equal(testdb_scalar(conn, BOOKS), 30000);

    /* Bad input: exit 2, one line naming the flag, nothing changed. */
    ctl_run(&r, "archive", "--db", t.conninfo, NULL);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "--before is required"));
    ctl_result_free(&r);
    ctl_run(&r, "archive", "--db", t.conninfo, "--before", "2999-01-01T00:00:00Z", NULL);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "in the future"));
    ctl_result_free(&r);
    ctl_run(&r, "archive", "--db", t.conninfo, "--before", "soon", NULL);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "--before"));
    ctl_result_free(&r);
    ctl_run(&r, "archive", "--db", t.conninfo, "--before", cut, "--batch", "0", NULL);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "--batch"));
    ctl_result_free(&r);
    assert_int_equal(testdb_scalar(conn, BOOKS), 30000);

    /* --dry-run: counts, changes nothing. */
    ctl_run(&r, "archive", "--db", t.conninfo, "--before", cut, "--dry-run", "--json", NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(r.json);
    assert_int_equal(ctl_json_i(r.json, "would_archive_orders"), 24);
    ctl_result_free(&r);
    assert_int_equal(testdb_scalar(conn, BOOKS), 30000);

    /* Without ordergate_admin: one clear error, exit 1, nothing changed. */
    testdb_exec(conn, "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = "
                      "'og_ctl_archive_svc') THEN CREATE ROLE og_ctl_archive_svc LOGIN; END IF; "
                      "END $$");
    testdb_exec(conn, "GRANT ordergate_order_service TO og_ctl_archive_svc");
    snprintf(svc, sizeof(svc), "%s user=og_ctl_archive_svc", t.conninfo);
    ctl_run(&r, "archive", "--db", svc, "--before", cut, NULL);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "ordergate_admin"));
    assert_int_equal(count_lines(r.err, "\n"), 2); /* the log line and the error line */
    ctl_result_free(&r);
    assert_int_equal(testdb_scalar(conn, BOOKS), 30000);

    /* The run: batches of 10 until nothing is left, one log line each. */
    ctl_run(&r, "archive", "--db", t.conninfo, "--before", cut, "--batch", "10", "--json", NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(r.json);
    assert_int_equal(moved(r.json, "orders"), 24);
    assert_int_equal(moved(r.json, "order_items"), 24);
    assert_int_equal(moved(r.json, "status_log"), 24);
    assert_int_equal(moved(r.json, "payments"), 24);
    assert_int_equal(moved(r.json, "outbox"), 24);
    assert_int_equal(ctl_json_i(r.json, "batches"), 3);
    assert_false(json_is_true(json_object_get(r.json, "more")));
    assert_int_equal(count_lines(r.err, "event=archive_batch"), 3);
    ctl_result_free(&r);
    assert_int_equal(testdb_scalar(conn, BOOKS), 6024);
    assert_int_equal(testdb_scalar(conn, "SELECT count(*) FROM ordergate.orders WHERE order_no = "
                                         "'A25' OR status = 'pending_payment'"),
                     6);
    assert_int_equal(testdb_scalar(conn, "SELECT archived_qty FROM ordergate.inventory"), 48);
    assert_int_equal(
        testdb_scalar(conn, "SELECT coalesce(sum(violations), 0) FROM ordergate.reconcile()"), 0);

    /* Again: nothing to move. Text output names the cut-off. */
    ctl_run(&r, "archive", "--db", t.conninfo, "--before", cut, NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "archived history closed before"));
    assert_non_null(strstr(r.out, "orders        0"));
    ctl_result_free(&r);
    assert_int_equal(testdb_scalar(conn, BOOKS), 6024);

    PQfinish(conn);
    testdb_drop(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_archive),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
