/* ordergatectl through the transaction-pooling PgBouncer of deploy/local/services.sh, with
 * --pool-mode transaction: migrate on an empty database (and again: idempotent), the gate by
 * hand (place, hold, pay, close, a late payment), show, exceptions and their resolution. Every
 * command is a new client that may get a server connection another used before; nothing it
 * does may stay on one (migrate's lock is the transaction's). Fails, never skips, without the
 * pooler. */
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

static void admin_exec(const char *sql)
{
    PGconn *admin = PQconnectdb("dbname=postgres");

    if (PQstatus(admin) != CONNECTION_OK)
        fail_msg("cannot reach PostgreSQL: %s", PQerrorMessage(admin));
    testdb_exec(admin, sql);
    PQfinish(admin);
}

static void test_migrate_empty(void **state)
{
    struct testdb t;
    struct ctl_result r;
    char pooled[200], sql[200];
    PGconn *conn;

    (void)state;
    snprintf(t.name, sizeof(t.name), "og_ctl_pgb_m_%d", (int)getpid());
    snprintf(t.conninfo, sizeof(t.conninfo), "dbname=%s", t.name);
    snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS %s WITH (FORCE)", t.name);
    admin_exec(sql);
    snprintf(sql, sizeof(sql), "CREATE DATABASE %s TEMPLATE template0", t.name);
    admin_exec(sql);
    testdb_pgbouncer_conninfo(&t, pooled, sizeof(pooled));

    ctl_run(&r, "migrate", "--db", pooled, "--pool-mode", "transaction", "--json", NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(r.json);
    assert_true(json_is_true(json_object_get(r.json, "ok")));
    ctl_result_free(&r);
    ctl_run(&r, "migrate", "--db", pooled, "--pool-mode", "transaction", NULL);
    assert_int_equal(r.status, 0);
    ctl_result_free(&r);
    ctl_run(&r, "migrate", "--db", pooled, "--pool-mode", "transaction", "--dry-run", "--json",
            NULL);
    assert_int_equal(r.status, 0);
    ctl_result_free(&r);

    conn = testdb_connect(&t);
    assert_int_equal(testdb_scalar(conn, "SELECT count(*) FROM ordergate.schema_migrations"),
                     testdb_scalar(conn, "SELECT count(*) FROM ordergate.schema_migrations WHERE "
                                         "checksum IS NOT NULL"));
    assert_true(testdb_scalar(conn, "SELECT count(*) FROM ordergate.schema_migrations WHERE "
                                    "version = '006'") == 1);
    assert_int_equal(testdb_scalar(conn, "SELECT count(*) FROM ordergate.scanner_lease"), 1);
    /* No lock left behind on a pooled server connection. */
    assert_int_equal(testdb_scalar(conn, "SELECT count(*) FROM pg_locks WHERE locktype = "
                                         "'advisory' AND database = (SELECT oid FROM "
                                         "pg_database WHERE datname = current_database())"),
                     0);
    PQfinish(conn);
    testdb_drop(&t);
}

static void test_gate_by_hand(void **state)
{
    struct testdb t;
    struct ctl_result r;
    char pooled[200], id[24];
    PGconn *conn, *next;
    const json_t *e;

    (void)state;
    testdb_create(&t, "ctl_pgb");
    testdb_pgbouncer_conninfo(&t, pooled, sizeof(pooled));
    conn = testdb_connect(&t);
    testdb_exec(conn, "SELECT ordergate.add_stock('S1', 10)");

#define CTL(...) ctl_run(&r, __VA_ARGS__, "--db", pooled, "--pool-mode", "transaction", NULL)
    CTL("place", "A1", "--amount", "1999", "--item", "S1:2", "--expire-in", "600", "--json");
    assert_int_equal(r.status, 0);
    assert_string_equal(ctl_json_s(r.json, "outcome"), "placed");
    ctl_result_free(&r);
    CTL("hold", "A1", "--seconds", "700", "--json");
    assert_int_equal(r.status, 0);
    assert_string_equal(ctl_json_s(r.json, "outcome"), "held");
    ctl_result_free(&r);
    CTL("pay", "A1", "--txn", "T1", "--amount", "1999", "--channel", "card", "--json");
    assert_int_equal(r.status, 0);
    assert_string_equal(ctl_json_s(r.json, "outcome"), "paid");
    ctl_result_free(&r);
    CTL("pay", "A1", "--txn", "T1", "--amount", "1999", "--channel", "card", "--json");
    assert_int_equal(r.status, 0);
    assert_string_equal(ctl_json_s(r.json, "outcome"), "duplicate");
    ctl_result_free(&r);

    CTL("place", "B1", "--amount", "1500", "--item", "S1:1", "--expire-in", "600");
    assert_int_equal(r.status, 0);
    ctl_result_free(&r);
    CTL("close", "B1", "--operator", "ops", "--reason", "customer asked", "--json");
    assert_int_equal(r.status, 0);
    assert_string_equal(ctl_json_s(r.json, "outcome"), "cancelled");
    ctl_result_free(&r);
    /* A payment after the close: a late payment with its exception. */
    CTL("pay", "B1", "--txn", "T2", "--amount", "1500", "--channel", "card", "--json");
    assert_int_equal(r.status, 0);
    assert_string_equal(ctl_json_s(r.json, "outcome"), "late_payment");
    e = json_object_get(r.json, "exception");
    assert_true(json_is_object(e));
    snprintf(id, sizeof(id), "%lld", ctl_json_i(e, "id"));
    ctl_result_free(&r);

    CTL("show", "B1", "--json");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "\"late_payment\""));
    ctl_result_free(&r);
    CTL("exceptions", "--json");
    assert_int_equal(r.status, 0);
    assert_int_equal(ctl_json_i(r.json, "total"), 1);
    ctl_result_free(&r);
    CTL("exceptions", "resolve", id, "--note", "refunded by hand", "--operator", "ops", "--json");
    assert_int_equal(r.status, 0);
    ctl_result_free(&r);
    CTL("exceptions");
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "no open exceptions\n");
    ctl_result_free(&r);
#undef CTL

    assert_int_equal(testdb_scalar(conn, "SELECT count(*) FROM ordergate.orders WHERE (order_no "
                                         "= 'A1' AND status = 'paid') OR (order_no = 'B1' AND "
                                         "status = 'cancelled')"),
                     2);
    assert_int_equal(testdb_scalar(conn, "SELECT count(*) FROM ordergate.exceptions WHERE "
                                         "resolved_at IS NOT NULL"),
                     1);
    assert_int_equal(testdb_scalar(conn, "SELECT available FROM ordergate.inventory WHERE sku = "
                                         "'S1'"),
                     8);
    /* The pooled server sessions hold no prepared statement and no lock afterwards. */
    next = PQconnectdb(pooled);
    assert_int_equal(PQstatus(next), CONNECTION_OK);
    for (int i = 0; i < 3; i++)
        assert_int_equal(testdb_scalar(next, "SELECT count(*) FROM pg_prepared_statements"), 0);
    PQfinish(next);
    assert_int_equal(testdb_scalar(conn, "SELECT count(*) FROM pg_locks WHERE locktype = "
                                         "'advisory' AND database = (SELECT oid FROM "
                                         "pg_database WHERE datname = current_database())"),
                     0);
    PQfinish(conn);
    testdb_drop(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_migrate_empty),
        cmocka_unit_test(test_gate_by_hand),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
