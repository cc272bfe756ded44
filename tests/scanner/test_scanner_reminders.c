/* The scanner as the payment reminders' fallback, through the built binary: the overdue unsent
 * reminders of pending orders (no consumer sent them) are sent once, after the grace; one within
 * the grace, one not due, a paid order's and one held back by a payment in flight are not; a
 * second run sends nothing; the textfile counts them. */
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
    return scanner_fixture_setup(state, "scan_rem", true);
}

static void test_reminders_fallback(void **state)
{
    struct scanner_fixture *f = *state;
    struct scanner_child c;
    const char *args[] = {"--db",         f->t.conninfo, "--grace",    "60",
                          "--batch-size", "7",           "--pause-ms", "0",
                          "--textfile",   f->textfile,   NULL};
    char *prom;

    testdb_exec(f->conn, "SELECT ordergate.set_setting('reminder_before_seconds', '600,60')");
    scanner_place(f->conn, "RM", 30, 1200);
    scanner_place(f->conn, "RG", 1, 1200);
    scanner_place(f->conn, "RP", 1, 1200);
    scanner_place(f->conn, "RH", 1, 1200);
    /* RM: the 600 s reminder 5 minutes overdue, the 60 s one not due; RG: due 30 s ago, within
     * the grace; RP: paid; RH: overdue, but its buyer is on the payment page for 2 minutes. */
    testdb_exec(f->conn, "UPDATE ordergate.orders SET expire_at = now() + interval '5 minutes' "
                         "WHERE order_no LIKE 'RM-%' OR order_no LIKE 'RP-%' OR order_no LIKE "
                         "'RH-%'");
    testdb_exec(f->conn, "UPDATE ordergate.orders SET expire_at = now() + interval '570 seconds' "
                         "WHERE order_no LIKE 'RG-%'");
    testdb_exec(f->conn, "SELECT * FROM ordergate.claim_payment('RP-1', 'T-RP1', "
                         "(SELECT amount_cents FROM ordergate.orders WHERE order_no = 'RP-1'), "
                         "'card')");
    testdb_exec(f->conn, "SELECT * FROM ordergate.hold_for_payment('RH-1', 120)");

    assert_int_equal(scanner_child_run(&c, args), 0);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.reminders WHERE "
                                            "state = 'sent' AND offset_seconds = 600 AND "
                                            "order_no LIKE 'RM-%' AND sent_at >= due_at"),
                     30);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.reminders WHERE "
                                            "state = 'sent' AND order_no NOT LIKE 'RM-%'"),
                     0);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.reminders WHERE "
                                            "state = 'pending' AND offset_seconds = 60"),
                     33);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.outbox WHERE "
                                            "event_type = 'payment_reminder'"),
                     30);
    assert_non_null(strstr(c.output, "event=reminders_swept"));
    scanner_child_free(&c);
    prom = testutil_slurp(f->textfile);
    assert_non_null(prom);
    assert_non_null(strstr(prom, "ordergate_reminders_sent_total{source=\"scanner\"} 30\n"));
    assert_non_null(strstr(prom, "ordergate_scanner_last_run_reminders_sent 30\n"));
    assert_non_null(
        strstr(prom, "ordergate_reminder_lateness_seconds_count{source=\"scanner\"} 30\n"));
    free(prom);

    /* Exactly once: a second run finds nothing to send. */
    assert_int_equal(scanner_child_run(&c, args), 0);
    scanner_child_free(&c);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.outbox WHERE "
                                            "event_type = 'payment_reminder'"),
                     30);
    prom = testutil_slurp(f->textfile);
    assert_non_null(prom);
    assert_non_null(strstr(prom, "ordergate_scanner_last_run_reminders_sent 0\n"));
    free(prom);
    assert_int_equal(testdb_scalar(f->conn, "SELECT coalesce(sum(violations), 0) FROM "
                                            "ordergate.reconcile()"),
                     0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_reminders_fallback, setup, scanner_fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
