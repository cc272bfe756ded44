/* ordergatectl outbox quarantined / outbox retry against a real PostgreSQL: the quarantined
 * events are listed with their reason (text and JSON), a bad ID exits 2 and changes nothing, a
 * role without ordergate_admin gets one clear error and changes nothing, and a retry gives the
 * event back to the relay (released, then not_quarantined, not_found). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ctl/ctl_run.h"
#include "support/testdb.h"

static void test_outbox_quarantine(void **state)
{
    struct testdb t;
    struct ctl_result r;
    PGconn *conn;
    const json_t *events, *e;
    char svc[200];
    long id;

    (void)state;
    testdb_create(&t, "ctl_outbox");
    conn = testdb_connect(&t);

    ctl_run(&r, "outbox", "quarantined", "--db", t.conninfo, NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "no quarantined outbox events"));
    ctl_result_free(&r);

    testdb_exec(conn, "SELECT ordergate.place_order('Q' || i, 100, '[]', NULL, "
                      "now() + interval '1 hour') FROM generate_series(1, 3) i");
    testdb_exec(conn, "SELECT ordergate.close_order('Q' || i, 'ops', 'test') "
                      "FROM generate_series(1, 3) i");
    id = testdb_scalar(conn, "SELECT id FROM ordergate.outbox WHERE order_no = 'Q2'");
    testdb_exec(conn, "BEGIN");
    testdb_exec(conn, "SELECT count(*) FROM ordergate.outbox_lock_batch(10)");
    testdb_exec(conn, "SELECT ordergate.outbox_quarantine(id, 'Broker: Message size too large') "
                      "FROM ordergate.outbox WHERE order_no = 'Q2'");
    testdb_exec(conn, "COMMIT");

    ctl_run(&r, "outbox", "quarantined", "--db", t.conninfo, NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "Broker: Message size too large"));
    assert_non_null(strstr(r.out, "order_cancelled"));
    assert_non_null(strstr(r.out, "1 of 1 quarantined events"));
    ctl_result_free(&r);
    ctl_run(&r, "outbox", "quarantined", "--db", t.conninfo, "--json", NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(r.json);
    assert_int_equal(ctl_json_i(r.json, "total"), 1);
    events = json_object_get(r.json, "events");
    assert_int_equal(json_array_size(events), 1);
    e = json_array_get(events, 0);
    assert_int_equal(ctl_json_i(e, "id"), id);
    assert_string_equal(ctl_json_s(e, "order_no"), "Q2");
    assert_string_equal(ctl_json_s(e, "reason"), "Broker: Message size too large");
    ctl_result_free(&r);

    /* Bad input: exit 2, nothing changed. */
    ctl_run(&r, "outbox", "retry", "--db", t.conninfo, "x1", NULL);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "event ID"));
    ctl_result_free(&r);
    ctl_run(&r, "outbox", "quarantined", "--db", t.conninfo, "--limit", "0", NULL);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "--limit"));
    ctl_result_free(&r);
    assert_int_equal(testdb_scalar(conn, "SELECT ordergate.outbox_quarantine_count()"), 1);

    /* Without ordergate_admin: one clear error, exit 1, still quarantined. */
    testdb_exec(conn, "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = "
                      "'og_ctl_outbox_svc') THEN CREATE ROLE og_ctl_outbox_svc LOGIN; END IF; "
                      "END $$");
    testdb_exec(conn, "GRANT ordergate_service TO og_ctl_outbox_svc");
    snprintf(svc, sizeof(svc), "%s user=og_ctl_outbox_svc", t.conninfo);
    {
        char id_s[24];
        snprintf(id_s, sizeof(id_s), "%ld", id);
        ctl_run(&r, "outbox", "retry", id_s, "--db", svc, NULL);
        assert_int_equal(r.status, 1);
        assert_non_null(strstr(r.err, "ordergate_admin"));
        ctl_result_free(&r);
        assert_int_equal(testdb_scalar(conn, "SELECT ordergate.outbox_quarantine_count()"), 1);

        ctl_run(&r, "outbox", "retry", id_s, "--db", t.conninfo, "--json", NULL);
        assert_int_equal(r.status, 0);
        assert_string_equal(ctl_json_s(r.json, "outcome"), "released");
        ctl_result_free(&r);
        assert_int_equal(testdb_scalar(conn, "SELECT ordergate.outbox_quarantine_count()"), 0);
        assert_int_equal(testdb_scalar(conn, "SELECT count(*) FROM "
                                             "ordergate.outbox_lock_batch(10)"),
                         3);
        ctl_run(&r, "outbox", "retry", id_s, "--db", t.conninfo, NULL);
        assert_int_equal(r.status, 0);
        assert_non_null(strstr(r.out, "not_quarantined"));
        ctl_result_free(&r);
    }
    ctl_run(&r, "outbox", "retry", "999999", "--db", t.conninfo, NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "not_found"));
    ctl_result_free(&r);

    PQfinish(conn);
    testdb_drop(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_outbox_quarantine),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
