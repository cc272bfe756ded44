/* --reconcile against planted violations: each of invariants 1-9 is
 * broken on purpose in its own database (bypassing the gate as a superuser:
 * direct writes, triggers disabled) and must be reported with the offending
 * key and exit 3; a clean book exits 0; a payment that hit a cancelled order
 * without its exception is repaired (not under --dry-run). The shop's checks
 * (add_check): a violated one and one that fails each make the run exit 3,
 * with their log line and metric, like a violated invariant. */
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

/* A small, consistent book made through the gate: one order paid, one
 * pending with a coupon, one cancelled by the scanner with a coupon, one
 * cancelled then paid late (exception), one pending without coupon. */
static int setup(void **state)
{
    struct scanner_fixture *f;
    static const char *const book[] = {
        "SELECT ordergate.add_stock('SKU-A', 100)",
        "SELECT ordergate.add_stock('SKU-B', 50)",
        "SELECT ordergate.add_coupon('CPN-1'), ordergate.add_coupon('CPN-2'), "
        "ordergate.add_coupon('CPN-3')",
        "SELECT ordergate.place_order('P-1', 100, '[{\"sku\":\"SKU-A\",\"qty\":2}]', 'CPN-1', "
        "now() + interval '1 hour')",
        "SELECT ordergate.place_order('P-2', 100, '[{\"sku\":\"SKU-B\",\"qty\":1}]', 'CPN-2', "
        "now() + interval '1 hour')",
        "SELECT ordergate.place_order('P-3', 100, '[{\"sku\":\"SKU-A\",\"qty\":1}]', 'CPN-3', "
        "now() - interval '1 minute')",
        "SELECT ordergate.place_order('P-4', 100, '[{\"sku\":\"SKU-A\",\"qty\":1}]', NULL, "
        "now() - interval '1 minute')",
        "SELECT ordergate.place_order('P-5', 100, '[{\"sku\":\"SKU-B\",\"qty\":3}]', NULL, "
        "now() + interval '1 hour')",
        "SELECT * FROM ordergate.claim_payment('P-1', 'TX-1', 100, 'card')",
        "SELECT * FROM ordergate.claim_cancel(ARRAY['P-3', 'P-4'], 'timeout_scanner')",
        "SELECT * FROM ordergate.claim_payment('P-4', 'TX-4', 100, 'card')",
    };

    scanner_fixture_setup(state, "scan_recon", false);
    f = *state;
    for (size_t i = 0; i < sizeof(book) / sizeof(book[0]); i++)
        testdb_exec(f->conn, book[i]);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.exceptions WHERE "
                                            "kind = 'late_payment' AND txn_no = 'TX-4'"),
                     1);
    return 0;
}

/* The violation count printed for an invariant ("  N  count  name"). */
static long report_count(const char *out, int invariant)
{
    char key[16];
    const char *p;

    snprintf(key, sizeof(key), "\n  %d  ", invariant);
    p = strstr(out, key);
    if (p == NULL)
        fail_msg("no line for invariant %d in:\n%s", invariant, out);
    return strtol(p + strlen(key), NULL, 10);
}

/* The "first:" line following an invariant's line (empty when none). */
static void report_first(const char *out, int invariant, char *buf, size_t size)
{
    char key[16];
    const char *p, *q, *end;

    buf[0] = '\0';
    snprintf(key, sizeof(key), "\n  %d  ", invariant);
    p = strstr(out, key);
    assert_non_null(p);
    p = strchr(p + 1, '\n');
    assert_non_null(p);
    if (strncmp(p, "\n     first: ", 13) != 0)
        return;
    q = p + 13;
    end = strchr(q, '\n');
    snprintf(buf, size, "%.*s", (int)(end ? end - q : (long)strlen(q)), q);
}

static struct scanner_child run_reconcile(struct scanner_fixture *f, int want_exit,
                                          const char *extra)
{
    struct scanner_child c;
    const char *args[] = {"--db", f->t.conninfo, "--reconcile", "--grace", "60", "--scan-interval",
                          "60",   extra,         NULL};

    assert_int_equal(scanner_child_run(&c, args), want_exit);
    return c;
}

static void expect_flagged(struct scanner_fixture *f, int invariant, const char *key)
{
    struct scanner_child c = run_reconcile(f, 3, NULL);
    char first[800];

    assert_true(report_count(c.output, invariant) >= 1);
    report_first(c.output, invariant, first, sizeof(first));
    if (strstr(first, key) == NULL)
        fail_msg("invariant %d: expected %s among the first offenders, got '%s'", invariant, key,
                 first);
    assert_non_null(strstr(c.output, "result: VIOLATED"));
    assert_non_null(strstr(c.output, "event=reconcile_violation"));
    scanner_child_free(&c);
}

/* The textfile the run wrote (--textfile) into text, NUL-terminated; the file is
 * removed. */
static void prom_take(const char *path, char *text, size_t size)
{
    FILE *fp = fopen(path, "r");
    size_t n;

    assert_non_null(fp);
    n = fread(text, 1, size - 1, fp);
    fclose(fp);
    unlink(path);
    assert_true(n > 0);
    text[n] = '\0';
}

static void test_clean_book_exits_0(void **state)
{
    struct scanner_fixture *f = *state;
    struct scanner_child c = run_reconcile(f, 0, NULL);

    for (int i = 1; i <= 7; i++)
        assert_int_equal(report_count(c.output, i), 0);
    assert_non_null(strstr(c.output, "result: clean: all 18 invariants hold"));
    scanner_child_free(&c);
    /* The run is recorded: clean, every invariant with its count, the window it checked. */
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.reconcile_runs WHERE "
                                            "result = 'clean' AND repaired = 0 AND "
                                            "since > now() - interval '8 days' AND "
                                            "started_at <= finished_at AND detail IS NULL AND "
                                            "(SELECT count(*) FROM jsonb_each(violations)) = 18 "
                                            "AND violations->>'18' = '0'"),
                     1);
}

/* 1: the state-machine trigger disabled, a paid order put back to pending. */
static void test_inv1_status_went_back(void **state)
{
    struct scanner_fixture *f = *state;

    testdb_exec(f->conn, "ALTER TABLE ordergate.orders DISABLE TRIGGER orders_guard_update");
    testdb_exec(f->conn,
                "UPDATE ordergate.orders SET status = 'pending_payment' WHERE order_no = 'P-1'");
    testdb_exec(f->conn, "ALTER TABLE ordergate.orders ENABLE TRIGGER orders_guard_update");
    expect_flagged(f, 1, "P-1");
}

/* 2: stock written directly. Also the textfile monitoring reads. */
static void test_inv2_stock_drift(void **state)
{
    struct scanner_fixture *f = *state;
    struct scanner_child c;
    char prom[128], text[8192] = "";
    const char *args[] = {"--db", f->t.conninfo, "--reconcile", "--textfile", prom, NULL};

    testdb_exec(f->conn,
                "UPDATE ordergate.inventory SET available = available + 5 WHERE sku = 'SKU-B'");
    expect_flagged(f, 2, "SKU-B");

    snprintf(prom, sizeof(prom), "/tmp/og-scanner-recon.%d.prom", (int)getpid());
    assert_int_equal(scanner_child_run(&c, args), 3);
    /* The late payment of P-4 is an open exception (auto refund pending). */
    assert_non_null(strstr(c.output, "open payment exceptions: 1 "));
    scanner_child_free(&c);
    prom_take(prom, text, sizeof(text));
    assert_non_null(strstr(text, "ordergate_reconcile_violations{invariant=\"2\"} 1\n"));
    assert_non_null(strstr(text, "ordergate_reconcile_violations{invariant=\"1\"} 0\n"));
    assert_non_null(strstr(text, "ordergate_reconcile_violations{invariant=\"7\"} 0\n"));
    /* Every invariant is exported under its own number, the last one too. */
    assert_non_null(strstr(text, "ordergate_reconcile_violations{invariant=\"18\"} 0\n"));
    assert_null(strstr(text, "ordergate_reconcile_violations{invariant=\"19\"}"));
    assert_non_null(strstr(text, "ordergate_exceptions_open 1\n"));
    assert_non_null(strstr(text, "ordergate_reconcile_last_run_success 1\n"));
    assert_null(strstr(text, "ordergate_scanner_")); /* the sweep's metrics are not in it */
}

/* 3: the coupon of a pending order released behind its back. */
static void test_inv3_coupon_state(void **state)
{
    struct scanner_fixture *f = *state;

    testdb_exec(f->conn,
                "UPDATE ordergate.coupons SET state = 'available' WHERE coupon_id = 'CPN-2'");
    expect_flagged(f, 3, "CPN-2");
}

/* 4: the append-only guard disabled, a log row's idempotency key rewritten. */
static void test_inv4_status_log(void **state)
{
    struct scanner_fixture *f = *state;

    testdb_exec(f->conn, "ALTER TABLE ordergate.status_log DISABLE TRIGGER status_log_append_only");
    testdb_exec(f->conn, "UPDATE ordergate.status_log SET idempotency_key = 'SOMETHING-ELSE' "
                         "WHERE order_no = 'P-3'");
    testdb_exec(f->conn, "ALTER TABLE ordergate.status_log ENABLE TRIGGER status_log_append_only");
    expect_flagged(f, 4, "P-3");
}

/* 5: a payment left 'processing' cannot be repaired: exit 3. A late payment
 * without exception beside it is repaired in the same run. */
static void test_inv5_payments(void **state)
{
    struct scanner_fixture *f = *state;
    struct scanner_child c;
    char first[800];

    testdb_exec(f->conn, "INSERT INTO ordergate.payments (txn_no, order_no, amount_cents, "
                         "channel, outcome) VALUES ('TX-LATE', 'P-3', 100, 'card', "
                         "'late_payment')");
    testdb_exec(f->conn, "INSERT INTO ordergate.payments (txn_no, order_no, amount_cents) VALUES "
                         "('TX-STUCK', 'P-2', 100)");

    /* --dry-run: reports both, repairs nothing. */
    c = run_reconcile(f, 3, "--dry-run");
    assert_int_equal(report_count(c.output, 5), 2);
    assert_non_null(strstr(c.output, "repair: skipped (--dry-run)"));
    scanner_child_free(&c);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.exceptions WHERE "
                                            "txn_no = 'TX-LATE'"),
                     0);

    c = run_reconcile(f, 3, NULL);
    assert_non_null(strstr(c.output, "repair: created 1 missing late-payment exception "
                                     "(manual review); invariant 5 went from 2 to 1"));
    assert_int_equal(report_count(c.output, 5), 1);
    report_first(c.output, 5, first, sizeof(first));
    assert_string_equal(first, "TX-STUCK");
    scanner_child_free(&c);
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.exceptions WHERE "
                                            "txn_no = 'TX-LATE' AND kind = 'late_payment' AND "
                                            "resolution = 'manual_review'"),
                     1);
}

/* 5, repairable only: after the repair the book is clean, exit 0. */
static void test_inv5_repair_makes_clean(void **state)
{
    struct scanner_fixture *f = *state;
    struct scanner_child c;

    testdb_exec(f->conn, "INSERT INTO ordergate.payments (txn_no, order_no, amount_cents, "
                         "channel, outcome) VALUES ('TX-LATE', 'P-3', 100, 'card', "
                         "'late_payment')");
    c = run_reconcile(f, 0, NULL);
    assert_non_null(strstr(c.output, "repair: created 1 missing late-payment exception"));
    assert_non_null(strstr(c.output, "result: clean"));
    scanner_child_free(&c);
    assert_int_equal(testdb_scalar(f->conn, "SELECT repaired FROM ordergate.reconcile_runs"), 1);
    /* Repaired once: a second reconcile has nothing to do. */
    c = run_reconcile(f, 0, NULL);
    assert_null(strstr(c.output, "repair:"));
    scanner_child_free(&c);
}

/* 6: a pending order far past its expiry (nobody swept). Never windowed: --since does not hide
 * an overdue pending order, however recent the window. */
static void test_inv6_overdue_pending(void **state)
{
    struct scanner_fixture *f = *state;
    struct scanner_child c;

    testdb_exec(f->conn, "UPDATE ordergate.orders SET expire_at = now() - interval '2 hours' "
                         "WHERE order_no = 'P-5'");
    expect_flagged(f, 6, "P-5");

    c = run_reconcile(f, 3, "--since=1h");
    assert_int_equal(report_count(c.output, 6), 1);
    scanner_child_free(&c);
    c = run_reconcile(f, 3, "--since=2099-01-01T00:00:00Z");
    assert_non_null(strstr(c.output, "orders since 2099-01-01T00:00:00.000Z"));
    assert_int_equal(report_count(c.output, 6), 1);
    scanner_child_free(&c);
}

/* 7: a winning transition whose event was lost (deleted behind the gate's
 * back), and an event for an order that never moved. */
static void test_inv7_outbox(void **state)
{
    struct scanner_fixture *f = *state;

    testdb_exec(f->conn, "DELETE FROM ordergate.outbox WHERE order_no = 'P-1' AND event_type = "
                         "'order_paid'");
    expect_flagged(f, 7, "P-1");
    testdb_exec(f->conn, "INSERT INTO ordergate.outbox (event_type, order_no) VALUES "
                         "('order_cancelled', 'P-5')");
    expect_flagged(f, 7, "P-5");
}

/* 8: an auto-refund nobody confirmed within refund_confirm_seconds; the
 * overdue count reaches the metrics. */
static void test_inv8_refund_unconfirmed(void **state)
{
    struct scanner_fixture *f = *state;
    struct scanner_child c;
    char prom[128], text[8192] = "";
    const char *args[] = {"--db", f->t.conninfo, "--reconcile", "--textfile", prom, NULL};

    testdb_exec(f->conn, "INSERT INTO ordergate.exceptions (order_no, kind, txn_no, amount_cents, "
                         "resolution, created_at) VALUES ('P-5', 'late_payment', 'T-UNCONFIRMED', "
                         "100, 'auto_refund', now() - interval '2 days')");
    expect_flagged(f, 8, "T-UNCONFIRMED");

    snprintf(prom, sizeof(prom), "/tmp/og-scanner-recon8.%d.prom", (int)getpid());
    assert_int_equal(scanner_child_run(&c, args), 3);
    assert_non_null(strstr(c.output, "overdue: 1 unconfirmed auto-refunds, 0 manual reviews"));
    scanner_child_free(&c);
    prom_take(prom, text, sizeof(text));
    assert_non_null(strstr(text, "ordergate_reconcile_violations{invariant=\"8\"} 1\n"));
    assert_non_null(strstr(text, "ordergate_refunds_unconfirmed_overdue 1\n"));
    assert_non_null(strstr(text, "ordergate_reviews_overdue 0\n"));
}

/* 9: an outbox event the relay quarantined as unpublishable, whatever --since says; its id
 * is the sample. */
static void test_inv9_outbox_quarantined(void **state)
{
    struct scanner_fixture *f = *state;
    struct scanner_child c;
    char id[24];

    snprintf(id, sizeof(id), "%ld", testdb_scalar(f->conn, "SELECT min(id) FROM ordergate.outbox"));
    testdb_exec(f->conn, "UPDATE ordergate.outbox SET published_at = NULL, quarantined_at = "
                         "now(), quarantine_reason = 'Broker: Message size too large' "
                         "WHERE id = (SELECT min(id) FROM ordergate.outbox)");
    expect_flagged(f, 9, id);
    c = run_reconcile(f, 3, "--since=2099-01-01T00:00:00Z");
    assert_int_equal(report_count(c.output, 9), 1);
    scanner_child_free(&c);
}

/* Without --since only the window (scanner.reconcile_window_s, 7 days) is checked; --since all
 * checks everything. A paid order placed 8 days ago whose event was lost is outside the window;
 * an order placed 8 days ago and left pending past its expiry is reported either way (invariant
 * 6 is never windowed: a 9-day payment window or a stuck order must not fall out of sight). */
static void test_window_default_and_all(void **state)
{
    struct scanner_fixture *f = *state;
    struct scanner_child c;

    /* Old orders, as if placed a week ago: the guard refuses both columns of a closed order. */
    testdb_exec(f->conn, "ALTER TABLE ordergate.orders DISABLE TRIGGER orders_guard_immutable, "
                         "DISABLE TRIGGER orders_guard_expiry");
    testdb_exec(f->conn, "UPDATE ordergate.orders SET created_at = now() - interval '8 days', "
                         "expire_at = now() - interval '8 days' WHERE order_no IN ('P-1', 'P-5')");
    testdb_exec(f->conn, "ALTER TABLE ordergate.orders ENABLE TRIGGER orders_guard_immutable, "
                         "ENABLE TRIGGER orders_guard_expiry");
    testdb_exec(f->conn, "DELETE FROM ordergate.outbox WHERE order_no = 'P-1' AND event_type = "
                         "'order_paid'");

    c = run_reconcile(f, 3, NULL);
    assert_int_equal(report_count(c.output, 6), 1);
    assert_int_equal(report_count(c.output, 7), 0);
    assert_null(strstr(c.output, "orders since the beginning"));
    scanner_child_free(&c);
    c = run_reconcile(f, 3, "--since=all");
    assert_int_equal(report_count(c.output, 6), 1);
    assert_int_equal(report_count(c.output, 7), 1);
    assert_non_null(strstr(c.output, "orders since the beginning"));
    scanner_child_free(&c);
}

/* The shop's checks: its own stock table beside ordergate's, a check comparing them, and a
 * check that raises. A violation and a failure each reach the report, the log, the metrics and
 * the exit status; clean again, the run exits 0 and names the check among what holds. */
static void test_shop_checks(void **state)
{
    struct scanner_fixture *f = *state;
    struct scanner_child c;
    char prom[128], text[8192] = "", sql[2048];
    const char *args[] = {"--db", f->t.conninfo, "--reconcile", "--textfile", prom, NULL};
    int pid = (int)getpid();

    /* Roles are cluster-wide: this one's name carries the pid, and it goes at the end. */
    snprintf(sql, sizeof(sql),
             "CREATE ROLE og_recon_shop_%d NOLOGIN;"
             "CREATE SCHEMA shop AUTHORIZATION og_recon_shop_%d;"
             "GRANT USAGE ON SCHEMA ordergate TO og_recon_shop_%d;"
             "GRANT SELECT ON ordergate.inventory TO og_recon_shop_%d;"
             "GRANT USAGE ON SCHEMA shop TO ordergate_owner;"
             "SET ROLE og_recon_shop_%d;"
             "CREATE TABLE shop.stock (sku text PRIMARY KEY, qty bigint NOT NULL);"
             "INSERT INTO shop.stock SELECT sku, available FROM ordergate.inventory;"
             "CREATE FUNCTION shop.check_stock() RETURNS TABLE (detail text) LANGUAGE sql STABLE "
             "SECURITY DEFINER SET search_path = shop, pg_temp AS $$ "
             "SELECT format('sku %%s: shop %%s, ordergate %%s', s.sku, s.qty, i.available) "
             "FROM stock s JOIN ordergate.inventory i USING (sku) WHERE s.qty <> i.available $$;"
             "CREATE FUNCTION shop.check_books() RETURNS SETOF text LANGUAGE plpgsql "
             "SECURITY DEFINER SET search_path = shop, pg_temp AS $$ BEGIN "
             "IF (SELECT count(*) FROM stock) > 2 THEN RAISE EXCEPTION 'books unreadable'; END IF; "
             "END $$;"
             "GRANT EXECUTE ON FUNCTION shop.check_stock(), shop.check_books() TO ordergate_owner;"
             "RESET ROLE;"
             "SELECT ordergate.add_check('stock', 'shop.check_stock()');"
             "SELECT ordergate.add_check('books', 'shop.check_books()');",
             pid, pid, pid, pid, pid);
    testdb_exec(f->conn, sql);

    c = run_reconcile(f, 0, NULL);
    assert_non_null(strstr(c.output, "\n  -  0           shop:stock\n"));
    assert_non_null(strstr(c.output, "result: clean: all 18 invariants and 2 shop checks hold"));
    scanner_child_free(&c);

    /* The shop's stock drifts from ordergate's, and its books cannot be read. */
    testdb_exec(f->conn, "UPDATE shop.stock SET qty = qty - 1 WHERE sku = 'SKU-B';"
                         "INSERT INTO shop.stock VALUES ('SKU-X', 0)");
    snprintf(prom, sizeof(prom), "/tmp/og-scanner-recon-shop.%d.prom", pid);
    assert_int_equal(scanner_child_run(&c, args), 3);
    assert_non_null(
        strstr(c.output, "\n  -  1           shop:stock\n     first: sku SKU-B: shop "));
    assert_non_null(strstr(c.output, "\n  -  FAILED      shop:books\n     error: failed: P0001 "
                                     "books unreadable\n"));
    assert_non_null(strstr(c.output, "result: VIOLATED: 2 invariants, 1 violation, shop checks "
                                     "failed"));
    assert_non_null(
        strstr(c.output, "event=reconcile_violation invariant=shop:stock violations=1"));
    assert_non_null(
        strstr(c.output, "event=reconcile_violation invariant=shop:books violations=-1"));
    /* The built-in invariants still hold and are reported before the shop's. */
    assert_int_equal(report_count(c.output, 14), 0);
    assert_true(strstr(c.output, "\n  14  ") < strstr(c.output, "\n  -  1           shop:stock"));
    scanner_child_free(&c);
    prom_take(prom, text, sizeof(text));
    assert_non_null(strstr(text, "ordergate_reconcile_violations{invariant=\"shop:stock\"} 1\n"));
    assert_non_null(strstr(text, "ordergate_reconcile_violations{invariant=\"shop:books\"} -1\n"));
    assert_non_null(strstr(text, "ordergate_reconcile_violations{invariant=\"2\"} 0\n"));
    assert_non_null(strstr(text, "ordergate_reconcile_last_run_success 1\n"));
    /* The newest recorded run names the violated check and the failed one (-1). */
    assert_int_equal(testdb_scalar(f->conn, "SELECT count(*) FROM ordergate.reconcile_runs WHERE "
                                            "run_id = (SELECT max(run_id) FROM "
                                            "ordergate.reconcile_runs) AND result = 'violated' "
                                            "AND violations->>'shop:stock' = '1' AND "
                                            "violations->>'shop:books' = '-1' AND "
                                            "violations->>'2' = '0'"),
                     1);

    snprintf(sql, sizeof(sql),
             "SELECT ordergate.drop_check('stock'), ordergate.drop_check('books');"
             "DROP SCHEMA shop CASCADE;"
             "REVOKE ALL ON ordergate.inventory FROM og_recon_shop_%d;"
             "REVOKE ALL ON SCHEMA ordergate FROM og_recon_shop_%d;"
             "DROP ROLE og_recon_shop_%d;",
             pid, pid, pid);
    testdb_exec(f->conn, sql);
    c = run_reconcile(f, 0, NULL);
    assert_non_null(strstr(c.output, "result: clean: all 18 invariants hold"));
    scanner_child_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_clean_book_exits_0, setup, scanner_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_inv1_status_went_back, setup,
                                        scanner_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_inv2_stock_drift, setup, scanner_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_inv3_coupon_state, setup, scanner_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_inv4_status_log, setup, scanner_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_inv5_payments, setup, scanner_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_inv5_repair_makes_clean, setup,
                                        scanner_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_inv6_overdue_pending, setup, scanner_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_inv7_outbox, setup, scanner_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_inv8_refund_unconfirmed, setup,
                                        scanner_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_inv9_outbox_quarantined, setup,
                                        scanner_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_window_default_and_all, setup,
                                        scanner_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_shop_checks, setup, scanner_fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
