/* What the gate refuses: bad arguments through the C client (OG_ERR_ARG) and
 * through plain libpq (SQLSTATE 22023), each leaving every table exactly as
 * it was; the state-machine trigger against direct UPDATEs; and least
 * privilege: the service role can run the gate but not write a table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "gate/gate_fixture.h"

#define LONG_LEN 10000

static char long_no[LONG_LEN + 1]; /* a 10,000-character order number */
static char s129[130];
static char s65[66];
static char long_array[LONG_LEN + 16]; /* {"<long_no>"} */
static char *big_array;                /* 10,001 valid order numbers */

static int guard_setup(void **state)
{
    size_t cap = 10001 * 12 + 3, used = 0;

    (void)state;
    memset(s129, 'x', 129);
    memset(s65, 'y', 65);
    memset(long_no, '9', LONG_LEN);
    long_no[LONG_LEN] = '\0';
    snprintf(long_array, sizeof(long_array), "{\"%s\"}", long_no);
    big_array = malloc(cap);
    if (big_array == NULL)
        return -1;
    big_array[used++] = '{';
    for (int i = 0; i < 10001; i++)
        used += (size_t)snprintf(big_array + used, cap - used, "%sn%d", i ? "," : "", i);
    snprintf(big_array + used, cap - used, "}");
    return 0;
}

static int guard_teardown(void **state)
{
    (void)state;
    free(big_array);
    return 0;
}

/* Data that a wrongly accepted call would change: a due pending order with
 * a coupon, a future one, a paid one, a cancelled one. */
static void seed(struct gfx *g)
{
    testdb_exec(g->sql, "SELECT ordergate.set_setting('max_deadline_seconds', '3153600000')");
    gfx_stock(g, "s1", 50);
    gfx_coupon(g, "c1");
    gfx_coupon(g, "c2");
    gfx_place(g, "o-due", 1000, "[{\"sku\":\"s1\",\"qty\":2}]", "c1", "-1 minute");
    gfx_place(g, "o-future", 1000, "[{\"sku\":\"s1\",\"qty\":2}]", NULL, "1 hour");
    gfx_place(g, "o-paid", 1000, "[{\"sku\":\"s1\",\"qty\":2}]", "c2", "1 hour");
    gfx_place(g, "o-gone", 1000, "[{\"sku\":\"s1\",\"qty\":2}]", NULL, "-1 minute");
    assert_int_equal(gfx_pay(g, "o-paid", "t-paid", 1000, NULL), GATE_PAID);
    assert_int_equal(gfx_cancel1(g, "o-gone", GATE_SRC_TIMEOUT_SCANNER), GATE_CANCELLED);
}

#define SQL_PLACE  "SELECT ordergate.place_order($1, $2::bigint, $3::jsonb, $4, $5::timestamptz)"
#define SQL_CANCEL "SELECT * FROM ordergate.claim_cancel($1::text[], $2)"
#define SQL_PAY    "SELECT * FROM ordergate.claim_payment($1, $2, $3::bigint, $4)"
#define SQL_HOLD   "SELECT * FROM ordergate.hold_for_payment($1, $2::int)"
#define SQL_CLOSE  "SELECT * FROM ordergate.close_order($1, $2, $3)"

#define LONG  "\001long"  /* placeholder: the 10,000-character order number */
#define S129  "\001s129"  /* placeholder: 129 characters (one over operator/coupon) */
#define S65   "\001s65"   /* placeholder: 65 characters (one over channel) */
#define LONGA "\001longa" /* placeholder: an array holding it */
#define BIGA  "\001biga"  /* placeholder: an array of 10,001 order numbers */

struct raw_case {
    const char *sql;
    int n;
    const char *p[5];
    const char *sqlstate;
};

static const char *expand(const char *p)
{
    if (p == NULL)
        return NULL;
    if (strcmp(p, LONG) == 0)
        return long_no;
    if (strcmp(p, LONGA) == 0)
        return long_array;
    if (strcmp(p, BIGA) == 0)
        return big_array;
    if (strcmp(p, S129) == 0)
        return s129;
    if (strcmp(p, S65) == 0)
        return s65;
    return p;
}

#define ITEMS "[{\"sku\":\"s1\",\"qty\":1}]"
/* Far ahead, inside the horizon seed() sets (max_deadline_seconds, 100 years). */
#define FUTURE "2099-01-01T00:00:00Z"

static const struct raw_case raw_cases[] = {
    /* place_order */
    {SQL_PLACE, 5, {NULL, "100", ITEMS, NULL, FUTURE}, "22023"},
    {SQL_PLACE, 5, {"", "100", ITEMS, NULL, FUTURE}, "22023"},
    {SQL_PLACE, 5, {LONG, "100", ITEMS, NULL, FUTURE}, "22023"},
    {SQL_PLACE, 5, {"o new", "100", ITEMS, NULL, FUTURE}, "22023"},
    {SQL_PLACE, 5, {"o-new", "0", ITEMS, NULL, FUTURE}, "22023"},
    {SQL_PLACE, 5, {"o-new", "-100", ITEMS, NULL, FUTURE}, "22023"},
    {SQL_PLACE, 5, {"o-new", NULL, ITEMS, NULL, FUTURE}, "22023"},
    {SQL_PLACE, 5, {"o-new", "100", NULL, NULL, FUTURE}, "22023"},
    {SQL_PLACE, 5, {"o-new", "100", "{}", NULL, FUTURE}, "22023"},
    {SQL_PLACE, 5, {"o-new", "100", "\"s1\"", NULL, FUTURE}, "22023"},
    {SQL_PLACE, 5, {"o-new", "100", "[1]", NULL, FUTURE}, "22023"},
    {SQL_PLACE, 5, {"o-new", "100", "[{\"sku\":\"s1\",\"qty\":0}]", NULL, FUTURE}, "22023"},
    {SQL_PLACE, 5, {"o-new", "100", "[{\"sku\":\"s1\",\"qty\":-1}]", NULL, FUTURE}, "22023"},
    {SQL_PLACE, 5, {"o-new", "100", "[{\"sku\":\"s1\",\"qty\":1.5}]", NULL, FUTURE}, "22023"},
    {SQL_PLACE, 5, {"o-new", "100", "[{\"sku\":\"s1\",\"qty\":\"1\"}]", NULL, FUTURE}, "22023"},
    {SQL_PLACE, 5, {"o-new", "100", "[{\"sku\":\"s1\"}]", NULL, FUTURE}, "22023"},
    {SQL_PLACE, 5, {"o-new", "100", "[{\"qty\":1}]", NULL, FUTURE}, "22023"},
    {SQL_PLACE, 5, {"o-new", "100", "[{\"sku\":\"\",\"qty\":1}]", NULL, FUTURE}, "22023"},
    {SQL_PLACE,
     5,
     {"o-new", "100", "[{\"sku\":\"s1\",\"qty\":1},{\"sku\":\"s1\",\"qty\":0}]", NULL, FUTURE},
     "22023"},
    {SQL_PLACE, 5, {"o-new", "100", ITEMS, "", FUTURE}, "22023"},
    {SQL_PLACE, 5, {"o-new", "100", ITEMS, S129, FUTURE}, "22023"},
    {SQL_PLACE, 5, {"o-new", "100", ITEMS, NULL, NULL}, "22023"},
    {SQL_PLACE, 5, {"o-new", "100", ITEMS, NULL, "infinity"}, "22023"},
    /* Not JSON at all: jsonb's input function refuses it before the call. */
    {SQL_PLACE, 5, {"o-new", "100", "[{\"sku\":", NULL, FUTURE}, "22P02"},
    /* claim_cancel: o-due sits in most arrays and must stay pending. */
    {SQL_CANCEL, 2, {"{o-due}", "bogus"}, "22023"},
    {SQL_CANCEL, 2, {"{o-due}", NULL}, "22023"},
    {SQL_CANCEL, 2, {"{o-due}", ""}, "22023"},
    {SQL_CANCEL, 2, {"{o-due}", "manual"}, "22023"},
    {SQL_CANCEL, 2, {"{o-due}", "payment_callback"}, "22023"},
    {SQL_CANCEL, 2, {NULL, "timeout_scanner"}, "22023"},
    {SQL_CANCEL, 2, {"{o-due,NULL}", "timeout_scanner"}, "22023"},
    {SQL_CANCEL, 2, {"{o-due,\"\"}", "timeout_scanner"}, "22023"},
    {SQL_CANCEL, 2, {"{o-due,\"o x\"}", "timeout_scanner"}, "22023"},
    {SQL_CANCEL, 2, {LONGA, "timeout_scanner"}, "22023"},
    {SQL_CANCEL, 2, {"{{o-due},{o-gone}}", "timeout_scanner"}, "22023"},
    {SQL_CANCEL, 2, {BIGA, "timeout_scanner"}, "22023"},
    /* claim_payment */
    {SQL_PAY, 4, {NULL, "t-new", "1000", "card"}, "22023"},
    {SQL_PAY, 4, {"", "t-new", "1000", "card"}, "22023"},
    {SQL_PAY, 4, {LONG, "t-new", "1000", "card"}, "22023"},
    {SQL_PAY, 4, {"o-due", NULL, "1000", "card"}, "22023"},
    {SQL_PAY, 4, {"o-due", "", "1000", "card"}, "22023"},
    {SQL_PAY, 4, {"o-due", LONG, "1000", "card"}, "22023"},
    {SQL_PAY, 4, {"o-due", "t new", "1000", "card"}, "22023"},
    {SQL_PAY, 4, {"o-due", "t-new", "0", "card"}, "22023"},
    {SQL_PAY, 4, {"o-due", "t-new", "-1000", "card"}, "22023"},
    {SQL_PAY, 4, {"o-due", "t-new", NULL, "card"}, "22023"},
    {SQL_PAY, 4, {"o-due", "t-new", "1000", NULL}, "22023"},
    {SQL_PAY, 4, {"o-due", "t-new", "1000", ""}, "22023"},
    {SQL_PAY, 4, {"o-due", "t-new", "1000", S65}, "22023"},
    /* hold_for_payment */
    {SQL_HOLD, 2, {NULL, "60"}, "22023"},
    {SQL_HOLD, 2, {LONG, "60"}, "22023"},
    {SQL_HOLD, 2, {"o-due", "0"}, "22023"},
    {SQL_HOLD, 2, {"o-due", "-60"}, "22023"},
    {SQL_HOLD, 2, {"o-due", NULL}, "22023"},
    {SQL_HOLD, 2, {"o-due", "901"}, "22023"},
    /* close_order */
    {SQL_CLOSE, 3, {NULL, "alice", "why"}, "22023"},
    {SQL_CLOSE, 3, {"", "alice", "why"}, "22023"},
    {SQL_CLOSE, 3, {LONG, "alice", "why"}, "22023"},
    {SQL_CLOSE, 3, {"o-due", NULL, "why"}, "22023"},
    {SQL_CLOSE, 3, {"o-due", "", "why"}, "22023"},
    {SQL_CLOSE, 3, {"o-due", "   ", "why"}, "22023"},
    {SQL_CLOSE, 3, {"o-due", S129, "why"}, "22023"},
    {SQL_CLOSE, 3, {"o-due", "alice", NULL}, "22023"},
    {SQL_CLOSE, 3, {"o-due", "alice", ""}, "22023"},
    {SQL_CLOSE, 3, {"o-due", "alice", LONG}, "22023"},
};

/* Sent raw through libpq, as a program in any language would: each bad call
 * fails with its SQLSTATE and every table is byte for byte unchanged. */
static void test_raw_bad_arguments(void **state)
{
    struct gfx *g = gfx_new("gguard_raw");
    char before[1024], after[1024];

    (void)state;
    seed(g);
    gfx_checksum(g->sql, before, sizeof(before));
    for (size_t i = 0; i < sizeof(raw_cases) / sizeof(raw_cases[0]); i++) {
        const struct raw_case *c = &raw_cases[i];
        const char *p[5];
        PGresult *res;

        for (int k = 0; k < c->n; k++)
            p[k] = expand(c->p[k]);
        res = gfx_raw(g->sql, c->sql, c->n, p);
        if (strcmp(gfx_sqlstate(res), c->sqlstate) != 0)
            fail_msg("case %zu (%s, first arg %.20s): SQLSTATE '%s', expected %s: %s", i, c->sql,
                     p[0] ? p[0] : "NULL", gfx_sqlstate(res), c->sqlstate,
                     PQresultErrorMessage(res));
        /* The message says what is wrong, naming the function. */
        if (strcmp(c->sqlstate, "22023") == 0 &&
            strstr(PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY), "_") == NULL)
            fail_msg("case %zu: unclear message '%s'", i,
                     PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY));
        PQclear(res);
        gfx_checksum(g->sql, after, sizeof(after));
        if (strcmp(before, after) != 0)
            fail_msg("case %zu changed the database:\n%s\n%s", i, before, after);
    }
    assert_string_equal(gfx_text(g->sql, (char[32]){0}, 32,
                                 "SELECT status FROM ordergate.orders WHERE order_no = 'o-due'",
                                 NULL),
                        "pending_payment");
    gfx_free(g);
}

#define CHECK_ARG(g, before, call)                                                                 \
    do {                                                                                           \
        char after_[1024];                                                                         \
        struct og_error e_ = {0};                                                                  \
        struct og_error *err = &e_;                                                                \
        enum og_status st_ = (call);                                                               \
        if (st_ != OG_ERR_ARG)                                                                     \
            fail_msg("%s: status %s (%s), expected invalid argument", #call, og_status_str(st_),   \
                     e_.msg);                                                                      \
        assert_false(e_.retriable);                                                                \
        assert_true(strlen(e_.msg) > 5);                                                           \
        gfx_checksum((g)->sql, after_, sizeof(after_));                                            \
        assert_string_equal(before, after_);                                                       \
    } while (0)

/* Through the C client: refused with OG_ERR_ARG (by the client before
 * sending, or by the database's 22023 and input errors), nothing changed, and
 * the connection stays usable. */
static void test_client_bad_arguments(void **state)
{
    struct gfx *g = gfx_new("gguard_client");
    struct db *db = g->db;
    char before[1024], expire[64];
    struct gate_cancel_row rows[4];
    struct gate_payment_result pay;
    enum gate_outcome outcome;
    enum order_status status;
    size_t nrows;
    const char *with_bad[] = {"o-due", "o x"};
    const char *with_long[] = {"o-due", long_no};
    const char *with_null[] = {"o-due", NULL};
    const char *due[] = {"o-due"};

    (void)state;
    seed(g);
    gfx_checksum(g->sql, before, sizeof(before));

    /* claim_cancel: one bad number spoils the batch; unknown sources. */
    CHECK_ARG(g, before,
              gate_claim_cancel(db, with_bad, 2, GATE_SRC_TIMEOUT_SCANNER, rows, &nrows, err));
    CHECK_ARG(g, before,
              gate_claim_cancel(db, with_long, 2, GATE_SRC_TIMEOUT_SCANNER, rows, &nrows, err));
    CHECK_ARG(g, before,
              gate_claim_cancel(db, with_null, 2, GATE_SRC_TIMEOUT_SCANNER, rows, &nrows, err));
    CHECK_ARG(g, before, gate_claim_cancel(db, due, 1, GATE_SRC_MANUAL, rows, &nrows, err));
    CHECK_ARG(g, before,
              gate_claim_cancel(db, due, 1, GATE_SRC_PAYMENT_CALLBACK, rows, &nrows, err));
    CHECK_ARG(g, before, gate_claim_cancel(db, due, 1, (enum gate_source)99, rows, &nrows, err));

    /* claim_payment */
    CHECK_ARG(g, before, gate_claim_payment(db, NULL, "t-new", 1000, "card", &pay, err));
    CHECK_ARG(g, before, gate_claim_payment(db, "", "t-new", 1000, "card", &pay, err));
    CHECK_ARG(g, before, gate_claim_payment(db, long_no, "t-new", 1000, "card", &pay, err));
    CHECK_ARG(g, before, gate_claim_payment(db, "o-due", NULL, 1000, "card", &pay, err));
    CHECK_ARG(g, before, gate_claim_payment(db, "o-due", long_no, 1000, "card", &pay, err));
    CHECK_ARG(g, before, gate_claim_payment(db, "o-due", "t-new", 0, "card", &pay, err));
    CHECK_ARG(g, before, gate_claim_payment(db, "o-due", "t-new", -1000, "card", &pay, err));
    CHECK_ARG(g, before, gate_claim_payment(db, "o-due", "t-new", 1000, "", &pay, err));
    CHECK_ARG(g, before, gate_claim_payment(db, "o-due", "t-new", 1000, s65, &pay, err));

    /* hold: the per-call maximum is a database setting, refused there. */
    CHECK_ARG(g, before, gate_hold(db, NULL, 60, &outcome, expire, sizeof(expire), err));
    CHECK_ARG(g, before, gate_hold(db, long_no, 60, &outcome, expire, sizeof(expire), err));
    CHECK_ARG(g, before, gate_hold(db, "o-due", 0, &outcome, expire, sizeof(expire), err));
    CHECK_ARG(g, before, gate_hold(db, "o-due", -5, &outcome, expire, sizeof(expire), err));
    CHECK_ARG(g, before, gate_hold(db, "o-due", 901, &outcome, expire, sizeof(expire), err));
    CHECK_ARG(g, before, gate_hold(db, "o-due", 2000000000, &outcome, expire, sizeof(expire), err));

    /* close */
    CHECK_ARG(g, before, gate_close(db, NULL, "alice", "why", &outcome, &status, err));
    CHECK_ARG(g, before, gate_close(db, long_no, "alice", "why", &outcome, &status, err));
    CHECK_ARG(g, before, gate_close(db, "o-due", NULL, "why", &outcome, &status, err));
    CHECK_ARG(g, before, gate_close(db, "o-due", "", "why", &outcome, &status, err));
    CHECK_ARG(g, before, gate_close(db, "o-due", "  ", "why", &outcome, &status, err));
    CHECK_ARG(g, before, gate_close(db, "o-due", s129, "why", &outcome, &status, err));
    CHECK_ARG(g, before, gate_close(db, "o-due", "alice", "", &outcome, &status, err));
    CHECK_ARG(g, before, gate_close(db, "o-due", "alice", long_no, &outcome, &status, err));

    /* place: bad numbers, amounts, items, coupon, expiry (the last two are
     * refused by the database: 22023 and 22007). */
    CHECK_ARG(g, before, gate_place(db, NULL, 100, ITEMS, NULL, FUTURE, &outcome, err));
    CHECK_ARG(g, before, gate_place(db, "", 100, ITEMS, NULL, FUTURE, &outcome, err));
    CHECK_ARG(g, before, gate_place(db, long_no, 100, ITEMS, NULL, FUTURE, &outcome, err));
    CHECK_ARG(g, before, gate_place(db, "o-new", 0, ITEMS, NULL, FUTURE, &outcome, err));
    CHECK_ARG(g, before, gate_place(db, "o-new", -1, ITEMS, NULL, FUTURE, &outcome, err));
    CHECK_ARG(g, before, gate_place(db, "o-new", 100, "[{\"sku\":", NULL, FUTURE, &outcome, err));
    CHECK_ARG(
        g, before,
        gate_place(db, "o-new", 100, "{\"sku\":\"s1\",\"qty\":1}", NULL, FUTURE, &outcome, err));
    CHECK_ARG(
        g, before,
        gate_place(db, "o-new", 100, "[{\"sku\":\"s1\",\"qty\":0}]", NULL, FUTURE, &outcome, err));
    CHECK_ARG(g, before,
              gate_place(db, "o-new", 100, "[{\"sku\":\"s1\",\"qty\":1},{\"qty\":1}]", NULL, FUTURE,
                         &outcome, err));
    CHECK_ARG(g, before, gate_place(db, "o-new", 100, ITEMS, s129, FUTURE, &outcome, err));
    CHECK_ARG(g, before, gate_place(db, "o-new", 100, ITEMS, NULL, "infinity", &outcome, err));
    CHECK_ARG(g, before, gate_place(db, "o-new", 100, ITEMS, NULL, "not-a-date", &outcome, err));
    CHECK_ARG(g, before, gate_place(db, "o-new", 100, ITEMS, NULL, "", &outcome, err));

    /* The same client still works, and o-due was waiting all along. */
    assert_int_equal(gfx_cancel1(g, "o-due", GATE_SRC_TIMEOUT_SCANNER), GATE_CANCELLED);
    gfx_reconcile_clean(g->sql);
    gfx_free(g);
}

static void expect_state(PGconn *c, const char *sql, const char *sqlstate)
{
    PGresult *res = PQexec(c, sql);

    if (strcmp(gfx_sqlstate(res), sqlstate) != 0)
        fail_msg("%s: SQLSTATE '%s', expected '%s' (%s)", sql, gfx_sqlstate(res), sqlstate,
                 PQresultErrorMessage(res));
    PQclear(res);
}

/* The state machine holds against anyone, even a superuser's ad-hoc UPDATE. */
static void test_trigger_guards_status(void **state)
{
    struct gfx *g = gfx_new("gguard_trigger");
    char before[1024];

    (void)state;
    seed(g);
    gfx_checksum(g->sql, before, sizeof(before));
    expect_state(g->sql,
                 "UPDATE ordergate.orders SET status = 'pending_payment' WHERE order_no = 'o-paid'",
                 "OG001");
    expect_state(g->sql,
                 "UPDATE ordergate.orders SET status = 'cancelled' WHERE order_no = 'o-paid'",
                 "OG001");
    expect_state(g->sql,
                 "UPDATE ordergate.orders SET status = 'pending_payment' WHERE order_no = 'o-gone'",
                 "OG001");
    expect_state(g->sql, "UPDATE ordergate.orders SET status = 'paid' WHERE order_no = 'o-gone'",
                 "OG001");
    /* A set-wide update is refused whole: the pending orders do not move either. */
    expect_state(g->sql, "UPDATE ordergate.orders SET status = 'cancelled'", "OG001");
    /* A pending order's amount changes only through amend_order, a closed order's never; its
     * currency never. */
    expect_state(g->sql, "UPDATE ordergate.orders SET amount_cents = 1 WHERE order_no = 'o-paid'",
                 "OG002");
    expect_state(g->sql, "UPDATE ordergate.orders SET currency = 'EUR' WHERE order_no = 'o-due'",
                 "OG002");
    expect_state(g->sql,
                 "UPDATE ordergate.orders SET expire_at = now() + interval '1 day' "
                 "WHERE order_no = 'o-paid'",
                 "OG002");
    expect_state(g->sql, "DELETE FROM ordergate.orders WHERE order_no = 'o-paid'", "OG003");
    expect_state(g->sql, "UPDATE ordergate.status_log SET source = 'manual'", "OG004");
    expect_state(g->sql, "DELETE FROM ordergate.status_log", "OG004");
    {
        char after[1024];
        gfx_checksum(g->sql, after, sizeof(after));
        assert_string_equal(before, after);
    }
    gfx_free(g);
}

/* ordergate_service (SET ROLE, as a login role that is a member would be):
 * no direct write to any table, no internal helper, no admin function; the
 * gate functions work and record the caller as actor. */
static void test_service_role_least_privilege(void **state)
{
    struct gfx *g = gfx_new("gguard_role");
    PGconn *svc = testdb_connect(&g->t);
    char before[1024], after[1024], buf[256];

    (void)state;
    seed(g);
    gfx_checksum(g->sql, before, sizeof(before));
    testdb_exec(svc, "SET application_name = 'svc-test'");
    testdb_exec(svc, "SET ROLE ordergate_service");
    assert_string_equal(gfx_text(svc, buf, sizeof(buf), "SELECT current_user", NULL),
                        "ordergate_service");

    expect_state(svc, "UPDATE ordergate.orders SET status = 'cancelled' WHERE order_no = 'o-due'",
                 "42501");
    expect_state(svc, "UPDATE ordergate.orders SET expire_at = now() WHERE order_no = 'o-future'",
                 "42501");
    expect_state(svc, "DELETE FROM ordergate.orders WHERE order_no = 'o-due'", "42501");
    expect_state(svc,
                 "INSERT INTO ordergate.orders (order_no, amount_cents, expire_at) "
                 "VALUES ('o-sneak', 1, now())",
                 "42501");
    expect_state(svc, "UPDATE ordergate.inventory SET available = available + 1", "42501");
    expect_state(svc, "UPDATE ordergate.coupons SET state = 'available'", "42501");
    expect_state(svc,
                 "INSERT INTO ordergate.status_log (order_no, from_status, to_status, source, "
                 "idempotency_key) VALUES ('o-due', 'pending_payment', 'cancelled', 'manual', 'x')",
                 "42501");
    expect_state(svc, "INSERT INTO ordergate.outbox (event_type, order_no) VALUES ('x', 'y')",
                 "42501");
    expect_state(svc, "UPDATE ordergate.settings SET value = '0'", "42501");
    expect_state(svc, "SELECT ordergate._cancel_orders(ARRAY['o-due'], 'manual', 'me', NULL)",
                 "42501");
    expect_state(svc, "SELECT ordergate.add_stock('s1', 1000)", "42501");
    expect_state(svc, "SELECT ordergate.set_setting('auto_refund_limit_cents', '99999999')",
                 "42501");
    gfx_checksum(g->sql, after, sizeof(after));
    assert_string_equal(before, after);

    /* It may read (reconciliation, reports) ... */
    assert_int_equal(gfx_long(svc, "SELECT count(*) FROM ordergate.orders", NULL), 4);
    /* ... and run every gate function. */
    assert_string_equal(gfx_text(svc, buf, sizeof(buf),
                                 "SELECT outcome FROM ordergate.claim_cancel(ARRAY['o-due'], "
                                 "'timeout_scanner')",
                                 NULL),
                        "cancelled");
    assert_string_equal(gfx_text(svc, buf, sizeof(buf),
                                 "SELECT ordergate.place_order('o-svc', 500, "
                                 "'[{\"sku\":\"s1\",\"qty\":1}]', NULL, now() + interval '1 hour')",
                                 NULL),
                        "placed");
    assert_string_equal(gfx_text(svc, buf, sizeof(buf),
                                 "SELECT outcome FROM ordergate.hold_for_payment('o-svc', 60)",
                                 NULL),
                        "held");
    assert_string_equal(gfx_text(svc, buf, sizeof(buf),
                                 "SELECT outcome FROM ordergate.claim_payment('o-svc', 'tx-svc', "
                                 "500, 'card')",
                                 NULL),
                        "paid");
    assert_string_equal(gfx_text(svc, buf, sizeof(buf),
                                 "SELECT outcome FROM ordergate.close_order('o-future', 'ops', "
                                 "'test')",
                                 NULL),
                        "cancelled");
    assert_int_equal(gfx_long(svc, "SELECT count(*) FROM ordergate.outbox_lock_batch(10)", NULL),
                     5);
    assert_int_equal(
        gfx_long(svc, "SELECT violations FROM ordergate.reconcile() WHERE invariant = 4", NULL), 0);
    /* The actor is the caller's application_name, not the function owner. */
    assert_string_equal(gfx_text(g->sql, buf, sizeof(buf),
                                 "SELECT actor FROM ordergate.status_log WHERE order_no = 'o-due'",
                                 NULL),
                        "svc-test");
    assert_string_equal(gfx_text(g->sql, buf, sizeof(buf),
                                 "SELECT actor FROM ordergate.status_log WHERE order_no = 'o-svc'",
                                 NULL),
                        "svc-test");
    PQfinish(svc);
    gfx_reconcile_clean(g->sql);
    gfx_free(g);
}

/* The C client logged in as a real role that has only the order service's
 * and the triggers' roles (schema/README.md, "Roles"): every call it makes
 * works under least privilege. */
static void test_client_as_service_login(void **state)
{
    struct gfx *g = gfx_new("gguard_login");
    char role[64], sql[256], conninfo[256];
    struct db_retry retry = {.max_attempts = 3, .base_ms = 10, .cap_ms = 100};
    struct db *svc;
    struct og_error err = {0};
    enum gate_outcome outcome;
    enum order_status status;
    struct gate_payment_result pay;
    struct gate_cancel_row rows[2];
    size_t nrows;
    const char *due[] = {"o-due", "o-future"};
    char expire[64];

    (void)state;
    seed(g);
    snprintf(role, sizeof(role), "og_gate_svc_%d", (int)getpid());
    snprintf(sql, sizeof(sql), "DROP ROLE IF EXISTS %s", role);
    testdb_exec(g->sql, sql);
    snprintf(sql, sizeof(sql),
             "CREATE ROLE %s LOGIN IN ROLE ordergate_order_service, ordergate_trigger", role);
    testdb_exec(g->sql, sql);
    snprintf(conninfo, sizeof(conninfo), "%s user=%s", g->t.conninfo, role);
    svc = db_new(conninfo, NULL, "svc-login", &retry, NULL);
    assert_non_null(svc);

    assert_int_equal(gate_claim_cancel(svc, due, 2, GATE_SRC_TIMEOUT_CONSUMER, rows, &nrows, &err),
                     OG_OK);
    assert_int_equal(nrows, 2);
    assert_int_equal(gate_place(svc, "o-login", 100, ITEMS, NULL, FUTURE, &outcome, &err), OG_OK);
    assert_int_equal(outcome, GATE_PLACED);
    assert_int_equal(gate_hold(svc, "o-login", 30, &outcome, expire, sizeof(expire), &err), OG_OK);
    assert_int_equal(outcome, GATE_HELD);
    /* The new calls work under the same role: an order in a currency paid in parts, a charge
     * begun, captured, then reported failed too late; a staff payment. */
    {
        struct gate_order o = {.order_no = "o-parts",
                               .amount_cents = 100,
                               .items_json = ITEMS,
                               .expire_at = FUTURE,
                               .currency = "EUR",
                               .allow_partial = true};
        struct gate_payment part = {.order_no = "o-parts",
                                    .txn_no = "t-part-1",
                                    .amount_cents = 40,
                                    .channel = "gift_card",
                                    .currency = "EUR"};
        struct gate_payment rest = {.order_no = "o-parts",
                                    .txn_no = "t-part-2",
                                    .amount_cents = 60,
                                    .channel = "card",
                                    .charge_ref = "ch-login"};
        assert_int_equal(gate_order_place(svc, &o, &outcome, &err), OG_OK);
        assert_int_equal(outcome, GATE_PLACED);
        assert_int_equal(gate_payment_claim(svc, &part, &pay, &err), OG_OK);
        assert_int_equal(pay.outcome, GATE_PARTIAL);
        assert_int_equal(gate_begin_charge(svc, "o-parts", "ch-login", 60, &outcome, NULL, 0, &err),
                         OG_OK);
        assert_int_equal(outcome, GATE_PENDING);
        assert_int_equal(gate_payment_claim(svc, &rest, &pay, &err), OG_OK);
        assert_int_equal(pay.outcome, GATE_PAID);
        assert_int_equal(gate_charge_failed(svc, "o-parts", "ch-login", &outcome, &err), OG_OK);
        assert_int_equal(outcome, GATE_ALREADY_CAPTURED);
    }
    {
        struct gate_payment staff = {.order_no = "o-login",
                                     .txn_no = "t-login",
                                     .amount_cents = 100,
                                     .channel = "manual",
                                     .operator_name = "alice",
                                     .reason = "cash at the counter"};
        assert_int_equal(gate_payment_claim(svc, &staff, &pay, &err), OG_OK);
        assert_int_equal(pay.outcome, GATE_PAID);
    }
    assert_int_equal(gate_close(svc, "o-future", "ops", "test", &outcome, &status, &err), OG_OK);
    assert_int_equal(outcome, GATE_CANCELLED);
    /* A direct write through the same connection is refused (42501 is not
     * retriable and not an argument error). */
    {
        static const struct db_stmt sneak = {
            "sneak", "UPDATE ordergate.orders SET status = 'cancelled' WHERE order_no = $1", 1};
        const char *p[] = {"o-login"};
        assert_int_equal(db_call(svc, &sneak, p, NULL, &err), OG_ERR_DB);
        assert_string_equal(err.sqlstate, "42501");
        assert_false(err.retriable);
    }
    assert_int_equal(gfx_long(g->sql,
                              "SELECT count(*) FROM ordergate.status_log WHERE actor = 'svc-login'",
                              NULL),
                     2);
    assert_int_equal(gfx_long(g->sql,
                              "SELECT count(*) FROM ordergate.status_log WHERE actor = 'alice' "
                              "AND source = 'manual_payment' AND order_no = 'o-login'",
                              NULL),
                     1);
    assert_int_equal(gfx_long(g->sql,
                              "SELECT count(*) FROM ordergate.status_log WHERE actor = 'ops' "
                              "AND source = 'manual' AND order_no = 'o-future'",
                              NULL),
                     1);
    db_free(svc);
    gfx_reconcile_clean(g->sql);
    snprintf(sql, sizeof(sql), "DROP ROLE %s", role);
    testdb_exec(g->sql, sql);
    gfx_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_raw_bad_arguments, gfx_teardown),
        cmocka_unit_test_teardown(test_client_bad_arguments, gfx_teardown),
        cmocka_unit_test_teardown(test_trigger_guards_status, gfx_teardown),
        cmocka_unit_test_teardown(test_service_role_least_privilege, gfx_teardown),
        cmocka_unit_test_teardown(test_client_as_service_login, gfx_teardown),
    };
    return cmocka_run_group_tests(tests, guard_setup, guard_teardown);
}
