/* The gate client without a database: outcome words, statuses and sources
 * round trip; order and transaction numbers are validated exactly as the
 * schema's CHECK constraints do; db_sqlstate_retriable() retries only what a
 * retry can fix; and bad arguments are refused before any connection is made. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/db.h"
#include "common/gate.h"

static void test_outcome_words_round_trip(void **state)
{
    (void)state;
    for (int i = 1; i < GATE_OUTCOME_COUNT; i++) {
        const char *word = gate_outcome_str((enum gate_outcome)i);
        assert_non_null(word);
        assert_string_not_equal(word, "unknown");
        assert_int_equal(gate_outcome_parse(word), i);
        /* Every word is distinct: parse of word i gives i, never an earlier one. */
        for (int j = 1; j < i; j++)
            assert_string_not_equal(word, gate_outcome_str((enum gate_outcome)j));
    }
}

static void test_outcome_words_are_the_contract(void **state)
{
    /* schema/README.md ("The gate") spells these words; other programs
     * compare them. */
    static const struct {
        const char *word;
        enum gate_outcome outcome;
    } words[] = {
        {"cancelled", GATE_CANCELLED},
        {"already_cancelled", GATE_ALREADY_CANCELLED},
        {"already_paid", GATE_ALREADY_PAID},
        {"not_due", GATE_NOT_DUE},
        {"not_found", GATE_NOT_FOUND},
        {"busy", GATE_BUSY},
        {"paid", GATE_PAID},
        {"duplicate", GATE_DUPLICATE},
        {"late_payment", GATE_LATE_PAYMENT},
        {"double_payment", GATE_DOUBLE_PAYMENT},
        {"amount_mismatch", GATE_AMOUNT_MISMATCH},
        {"partial", GATE_PARTIAL},
        {"overpaid", GATE_OVERPAID},
        {"currency_mismatch", GATE_CURRENCY_MISMATCH},
        {"pending", GATE_PENDING},
        {"failed", GATE_FAILED},
        {"already_captured", GATE_ALREADY_CAPTURED},
        {"held", GATE_HELD},
        {"not_pending", GATE_NOT_PENDING},
        {"out_of_stock", GATE_OUT_OF_STOCK},
        {"coupon_unavailable", GATE_COUPON_UNAVAILABLE},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        assert_int_equal(gate_outcome_parse(words[i].word), words[i].outcome);
        assert_string_equal(gate_outcome_str(words[i].outcome), words[i].word);
    }
}

static void test_outcome_parse_rejects(void **state)
{
    static const char *const bad[] = {"",          "Cancelled", "cancelled ", " cancelled",
                                      "cancel",    "unknown",   "PAID",       "paid\n",
                                      "not-found", "placed!"};

    (void)state;
    assert_int_equal(gate_outcome_parse(NULL), GATE_UNKNOWN);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (gate_outcome_parse(bad[i]) != GATE_UNKNOWN)
            fail_msg("'%s' parsed as an outcome", bad[i]);
    /* Out-of-range values print as "unknown" instead of reading past the table. */
    assert_string_equal(gate_outcome_str(GATE_OUTCOME_COUNT), "unknown");
    assert_string_equal(gate_outcome_str((enum gate_outcome) - 1), "unknown");
    assert_string_equal(gate_outcome_str((enum gate_outcome)1000), "unknown");
}

static void test_status_round_trip(void **state)
{
    static const enum order_status all[] = {ORDER_PENDING, ORDER_PAID, ORDER_CANCELLED};

    (void)state;
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        assert_int_equal(order_status_parse(order_status_str(all[i])), all[i]);
    assert_string_equal(order_status_str(ORDER_PENDING), "pending_payment");
    assert_string_equal(order_status_str(ORDER_PAID), "paid");
    assert_string_equal(order_status_str(ORDER_CANCELLED), "cancelled");
    assert_int_equal(order_status_parse(NULL), ORDER_STATUS_NONE);
    assert_int_equal(order_status_parse(""), ORDER_STATUS_NONE);
    assert_int_equal(order_status_parse("pending"), ORDER_STATUS_NONE);
    assert_int_equal(order_status_parse("none"), ORDER_STATUS_NONE);
}

static void test_source_words(void **state)
{
    (void)state;
    assert_string_equal(gate_source_str(GATE_SRC_TIMEOUT_CONSUMER), "timeout_consumer");
    assert_string_equal(gate_source_str(GATE_SRC_TIMEOUT_SCANNER), "timeout_scanner");
    assert_string_equal(gate_source_str(GATE_SRC_PAYMENT_CALLBACK), "payment_callback");
    assert_string_equal(gate_source_str(GATE_SRC_MANUAL), "manual");
    assert_string_equal(gate_source_str((enum gate_source)42), "unknown");
}

static int valid_order(const char *s)
{
    return gate_order_no_valid(s, s != NULL ? strlen(s) : 0);
}

static int valid_txn(const char *s)
{
    return gate_txn_no_valid(s, s != NULL ? strlen(s) : 0);
}

static void test_order_no_validation(void **state)
{
    static const char *const good[] = {"A", "o-1", "ORD.2026:11_30-0001", "0", "a.b:c_d-e"};
    static const char *const bad[] = {"",    "a b", "a'b",  "a\"b", "a,b",  "a{b}", "a\\b",
                                      "a/b", "a;b", "a\nb", "ä",    "a\tb", "a%b",  "a*b",
                                      "(a)", "a+b", "a=b",  "a|b",  "a@b",  "a#b"};
    char buf[GATE_TXN_NO_MAX + 2];

    (void)state;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        if (!valid_order(good[i]))
            fail_msg("'%s' refused", good[i]);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (valid_order(bad[i]))
            fail_msg("'%s' accepted", bad[i]);
    /* "NULL" is a perfectly good order number (letters only). */
    assert_true(valid_order("NULL"));
    assert_false(gate_order_no_valid(NULL, 0));
    assert_false(gate_order_no_valid(NULL, 5));

    /* Length bounds: 64 is the last valid length for an order, 128 for a txn. */
    memset(buf, 'x', sizeof(buf));
    assert_true(gate_order_no_valid(buf, GATE_ORDER_NO_MAX));
    assert_false(gate_order_no_valid(buf, GATE_ORDER_NO_MAX + 1));
    assert_true(gate_txn_no_valid(buf, GATE_ORDER_NO_MAX + 1));
    assert_true(gate_txn_no_valid(buf, GATE_TXN_NO_MAX));
    assert_false(gate_txn_no_valid(buf, GATE_TXN_NO_MAX + 1));

    /* The length argument is honoured: an embedded NUL or a bad byte past it. */
    assert_false(gate_order_no_valid("ab\0cd", 5));
    assert_true(gate_order_no_valid("ab cd", 2));
}

static void test_txn_no_validation(void **state)
{
    (void)state;
    assert_true(valid_txn("TXN-2026.11.30:0001_a"));
    assert_false(valid_txn(""));
    assert_false(valid_txn(NULL));
    assert_false(valid_txn("txn 1"));
    assert_false(valid_txn("txn'1"));
    assert_false(valid_txn("txn\x01"));
    assert_false(valid_txn("txn\xff"));
}

/* A currency is three upper-case letters (ISO 4217 alpha-3); nothing else passes, so a bad code
 * never reaches the database. */
static void test_currency_validation(void **state)
{
    static const char *const good[] = {"EUR", "USD", "JPY", "KWD", "AAA", "ZZZ"};
    static const char *const bad[] = {"",    "EU", "EURO", "eur", "Eur", "EU1",
                                      "E R", "€",  "EU\n", "@AA", "[AA", "EU-"};

    (void)state;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        assert_true(gate_currency_valid(good[i], strlen(good[i])));
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (gate_currency_valid(bad[i], strlen(bad[i])))
            fail_msg("'%s' passed as a currency", bad[i]);
    assert_false(gate_currency_valid(NULL, 3));
    /* The length is what counts: "EURO" cut to 3 is a code. */
    assert_true(gate_currency_valid("EURO", 3));
}

static void test_charge_ref_validation(void **state)
{
    char ref[GATE_CHARGE_REF_MAX + 2];

    (void)state;
    memset(ref, 'c', sizeof(ref) - 1);
    ref[sizeof(ref) - 1] = '\0';
    assert_true(gate_charge_ref_valid("pi_3Nx.7:a-b", 12));
    assert_true(gate_charge_ref_valid(ref, GATE_CHARGE_REF_MAX));
    assert_false(gate_charge_ref_valid(ref, GATE_CHARGE_REF_MAX + 1));
    assert_false(gate_charge_ref_valid("", 0));
    assert_false(gate_charge_ref_valid(NULL, 1));
    assert_false(gate_charge_ref_valid("a b", 3));
    assert_false(gate_charge_ref_valid("a/b", 3));
}

static void test_sqlstate_retriable(void **state)
{
    static const char *const yes[] = {"40001", "40P01", "55P03", "57P01", "57P02",
                                      "57P03", "53300", "25P03", "08000", "08003",
                                      "08006", "08001", "08004", "08P01"};
    /* Caller's faults and broken invariants: repeating cannot help. 57014
     * (query_canceled, e.g. statement_timeout) is not repeated either: the
     * same statement would time out again. */
    static const char *const no[] = {"22023", "22P02", "23505", "23503", "23514", "42501",
                                     "42883", "42P01", "P0001", "OG001", "OG002", "57014",
                                     "XX000", "0A000", "40002", "00000", "4",     "400010"};

    (void)state;
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
        if (!db_sqlstate_retriable(yes[i]))
            fail_msg("%s not retriable", yes[i]);
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
        if (db_sqlstate_retriable(no[i]))
            fail_msg("%s retriable", no[i]);
    assert_false(db_sqlstate_retriable(NULL));
    assert_false(db_sqlstate_retriable(""));
}

/* A client whose server does not exist: argument errors must come back
 * before any connection attempt (which would fail differently, and slowly). */
static struct db *unreachable_db(void)
{
    struct db_retry retry = {.max_attempts = 1, .base_ms = 1, .cap_ms = 1};
    struct db *db = db_new("host=/nonexistent-ordergate-socket-dir port=1 connect_timeout=1", NULL,
                           "test_gate_unit", &retry, NULL);

    assert_non_null(db);
    return db;
}

static void expect_arg(enum og_status st, const struct og_error *err, struct db *db)
{
    assert_int_equal(st, OG_ERR_ARG);
    assert_int_equal(err->status, OG_ERR_ARG);
    assert_false(err->retriable);
    assert_true(strlen(err->msg) > 0);
    assert_null(db_conn(db));
}

static void test_bad_arguments_never_connect(void **state)
{
    struct db *db = unreachable_db();
    struct og_error err;
    struct gate_cancel_row rows[4];
    struct gate_payment_result pay;
    enum gate_outcome outcome;
    enum order_status status;
    size_t nrows = 99;
    char long_no[10001];
    char expire[64];
    const char *with_null[] = {"o-1", NULL};
    const char *with_bad[] = {"o-1", "o 2"};
    const char *with_long[] = {long_no};

    (void)state;
    memset(long_no, '7', sizeof(long_no) - 1);
    long_no[sizeof(long_no) - 1] = '\0';

    /* claim_cancel */
    expect_arg(gate_claim_cancel(db, with_null, 2, GATE_SRC_TIMEOUT_CONSUMER, rows, &nrows, &err),
               &err, db);
    assert_int_equal(nrows, 0);
    expect_arg(gate_claim_cancel(db, with_bad, 2, GATE_SRC_TIMEOUT_SCANNER, rows, &nrows, &err),
               &err, db);
    expect_arg(gate_claim_cancel(db, with_long, 1, GATE_SRC_TIMEOUT_SCANNER, rows, &nrows, &err),
               &err, db);
    expect_arg(gate_claim_cancel(db, NULL, 1, GATE_SRC_TIMEOUT_SCANNER, rows, &nrows, &err), &err,
               db);
    expect_arg(gate_claim_cancel(db, with_bad, 1, GATE_SRC_TIMEOUT_SCANNER, NULL, &nrows, &err),
               &err, db);
    /* Only the timeout triggers cancel through claim_cancel. */
    expect_arg(gate_claim_cancel(db, with_bad, 1, GATE_SRC_MANUAL, rows, &nrows, &err), &err, db);
    expect_arg(gate_claim_cancel(db, with_bad, 1, GATE_SRC_PAYMENT_CALLBACK, rows, &nrows, &err),
               &err, db);
    expect_arg(gate_claim_cancel(db, with_bad, 1, (enum gate_source)77, rows, &nrows, &err), &err,
               db);
    expect_arg(gate_claim_cancel(db, with_bad, GATE_BATCH_MAX + 1, GATE_SRC_TIMEOUT_SCANNER, rows,
                                 &nrows, &err),
               &err, db);

    /* claim_payment */
    expect_arg(gate_claim_payment(db, NULL, "t1", 100, "card", &pay, &err), &err, db);
    expect_arg(gate_claim_payment(db, "", "t1", 100, "card", &pay, &err), &err, db);
    expect_arg(gate_claim_payment(db, long_no, "t1", 100, "card", &pay, &err), &err, db);
    expect_arg(gate_claim_payment(db, "o-1", NULL, 100, "card", &pay, &err), &err, db);
    expect_arg(gate_claim_payment(db, "o-1", "", 100, "card", &pay, &err), &err, db);
    expect_arg(gate_claim_payment(db, "o-1", long_no, 100, "card", &pay, &err), &err, db);
    expect_arg(gate_claim_payment(db, "o-1", "t1", 0, "card", &pay, &err), &err, db);
    expect_arg(gate_claim_payment(db, "o-1", "t1", -5, "card", &pay, &err), &err, db);
    expect_arg(gate_claim_payment(db, "o-1", "t1", INT64_MIN, "card", &pay, &err), &err, db);
    expect_arg(gate_claim_payment(db, "o-1", "t1", 100, NULL, &pay, &err), &err, db);
    expect_arg(gate_claim_payment(db, "o-1", "t1", 100, "", &pay, &err), &err, db);
    expect_arg(gate_claim_payment(db, "o-1", "t1", 100, long_no, &pay, &err), &err, db);
    assert_int_equal(pay.outcome, GATE_UNKNOWN);

    /* claim_payment's optional fields */
    const struct gate_payment base = {
        .order_no = "o-1", .txn_no = "t1", .amount_cents = 100, .channel = "card"};
    struct gate_payment p = base;
    p.currency = "eur";
    expect_arg(gate_payment_claim(db, &p, &pay, &err), &err, db);
    p.currency = "EURO";
    expect_arg(gate_payment_claim(db, &p, &pay, &err), &err, db);
    p.currency = "";
    expect_arg(gate_payment_claim(db, &p, &pay, &err), &err, db);
    p = base;
    p.charge_ref = "";
    expect_arg(gate_payment_claim(db, &p, &pay, &err), &err, db);
    p.charge_ref = "c 1";
    expect_arg(gate_payment_claim(db, &p, &pay, &err), &err, db);
    p.charge_ref = long_no;
    expect_arg(gate_payment_claim(db, &p, &pay, &err), &err, db);
    /* Staff: both operator and reason, blank is none, and the channel manual. */
    p = base;
    p.channel = "manual";
    p.operator_name = "alice";
    expect_arg(gate_payment_claim(db, &p, &pay, &err), &err, db);
    p.operator_name = NULL;
    p.reason = "cash at the counter";
    expect_arg(gate_payment_claim(db, &p, &pay, &err), &err, db);
    p.operator_name = "  ";
    expect_arg(gate_payment_claim(db, &p, &pay, &err), &err, db);
    p.operator_name = "alice";
    p.reason = "";
    expect_arg(gate_payment_claim(db, &p, &pay, &err), &err, db);
    p.reason = long_no;
    expect_arg(gate_payment_claim(db, &p, &pay, &err), &err, db);
    p.reason = "cash at the counter";
    p.channel = "card";
    expect_arg(gate_payment_claim(db, &p, &pay, &err), &err, db);
    p = base;
    p.lock_wait_ms = -1;
    expect_arg(gate_payment_claim(db, &p, &pay, &err), &err, db);
    p.lock_wait_ms = GATE_LOCK_WAIT_MAX + 1;
    expect_arg(gate_payment_claim(db, &p, &pay, &err), &err, db);
    assert_int_equal(pay.outcome, GATE_UNKNOWN);

    /* begin_charge, charge_failed */
    char bound[64] = "x";
    expect_arg(gate_begin_charge(db, NULL, "c1", 60, &outcome, bound, sizeof(bound), &err), &err,
               db);
    assert_string_equal(bound, "");
    expect_arg(gate_begin_charge(db, long_no, "c1", 60, &outcome, bound, sizeof(bound), &err), &err,
               db);
    expect_arg(gate_begin_charge(db, "o-1", NULL, 60, &outcome, bound, sizeof(bound), &err), &err,
               db);
    expect_arg(gate_begin_charge(db, "o-1", "", 60, &outcome, bound, sizeof(bound), &err), &err,
               db);
    expect_arg(gate_begin_charge(db, "o-1", long_no, 60, &outcome, bound, sizeof(bound), &err),
               &err, db);
    expect_arg(gate_begin_charge(db, "o-1", "c 1", 60, &outcome, NULL, 0, &err), &err, db);
    expect_arg(gate_begin_charge(db, "o-1", "c1", 0, &outcome, NULL, 0, &err), &err, db);
    expect_arg(gate_begin_charge(db, "o-1", "c1", -1, &outcome, NULL, 0, &err), &err, db);
    expect_arg(
        gate_begin_charge(db, "o-1", "c1", GATE_CHARGE_SECONDS_MAX + 1, &outcome, NULL, 0, &err),
        &err, db);
    expect_arg(gate_charge_failed(db, NULL, "c1", &outcome, &err), &err, db);
    expect_arg(gate_charge_failed(db, "o 1", "c1", &outcome, &err), &err, db);
    expect_arg(gate_charge_failed(db, "o-1", NULL, &outcome, &err), &err, db);
    expect_arg(gate_charge_failed(db, "o-1", "", &outcome, &err), &err, db);
    expect_arg(gate_charge_failed(db, "o-1", long_no, &outcome, &err), &err, db);
    assert_int_equal(outcome, GATE_UNKNOWN);

    /* hold_for_payment */
    expect_arg(gate_hold(db, NULL, 60, &outcome, expire, sizeof(expire), &err), &err, db);
    expect_arg(gate_hold(db, "", 60, &outcome, expire, sizeof(expire), &err), &err, db);
    expect_arg(gate_hold(db, long_no, 60, &outcome, expire, sizeof(expire), &err), &err, db);
    expect_arg(gate_hold(db, "o-1", 0, &outcome, expire, sizeof(expire), &err), &err, db);
    expect_arg(gate_hold(db, "o-1", -1, &outcome, expire, sizeof(expire), &err), &err, db);
    assert_int_equal(outcome, GATE_UNKNOWN);

    /* close_order */
    expect_arg(gate_close(db, NULL, "alice", "fraud", &outcome, &status, &err), &err, db);
    expect_arg(gate_close(db, long_no, "alice", "fraud", &outcome, &status, &err), &err, db);
    expect_arg(gate_close(db, "o-1", NULL, "fraud", &outcome, &status, &err), &err, db);
    expect_arg(gate_close(db, "o-1", "", "fraud", &outcome, &status, &err), &err, db);
    expect_arg(gate_close(db, "o-1", "alice", NULL, &outcome, &status, &err), &err, db);
    expect_arg(gate_close(db, "o-1", "alice", "", &outcome, &status, &err), &err, db);
    expect_arg(gate_close(db, "o-1", long_no, "fraud", &outcome, &status, &err), &err, db);
    expect_arg(gate_close(db, "o-1", "alice", long_no, &outcome, &status, &err), &err, db);
    assert_int_equal(status, ORDER_STATUS_NONE);

    /* place_order */
    const char *items = "[{\"sku\":\"s1\",\"qty\":1}]";
    const char *when = "2026-11-30T16:00:00Z";
    expect_arg(gate_place(db, NULL, 100, items, NULL, when, &outcome, &err), &err, db);
    expect_arg(gate_place(db, long_no, 100, items, NULL, when, &outcome, &err), &err, db);
    expect_arg(gate_place(db, "o-1", 0, items, NULL, when, &outcome, &err), &err, db);
    expect_arg(gate_place(db, "o-1", -100, items, NULL, when, &outcome, &err), &err, db);
    expect_arg(gate_place(db, "o-1", 100, NULL, NULL, when, &outcome, &err), &err, db);
    expect_arg(gate_place(db, "o-1", 100, "", NULL, when, &outcome, &err), &err, db);
    expect_arg(gate_place(db, "o-1", 100, items, NULL, NULL, &outcome, &err), &err, db);
    expect_arg(gate_place(db, "o-1", 100, items, NULL, "", &outcome, &err), &err, db);
    expect_arg(gate_place(db, "o-1", 100, items, long_no, when, &outcome, &err), &err, db);
    /* place_order's optional fields, and the amount's bound in any currency */
    const struct gate_order order = {
        .order_no = "o-1", .amount_cents = 100, .items_json = items, .expire_at = when};
    struct gate_order o = order;
    o.amount_cents = GATE_AMOUNT_MAX + 1;
    expect_arg(gate_order_place(db, &o, &outcome, &err), &err, db);
    o.amount_cents = INT64_MAX;
    o.currency = "JPY";
    expect_arg(gate_order_place(db, &o, &outcome, &err), &err, db);
    o = order;
    o.currency = "jpy";
    o.allow_partial = true;
    expect_arg(gate_order_place(db, &o, &outcome, &err), &err, db);
    o.currency = "JP";
    expect_arg(gate_order_place(db, &o, &outcome, &err), &err, db);
    o.currency = "";
    expect_arg(gate_order_place(db, &o, &outcome, &err), &err, db);

    /* record_payment_refused */
    struct gate_refusal_result refused;
    struct gate_refusal ok = {.source = "t/0/1", .reason = "bad_json: x"};
    struct gate_refusal r = ok;
    r.source = NULL;
    expect_arg(gate_record_payment_refused(db, &r, &refused, &err), &err, db);
    r.source = "";
    expect_arg(gate_record_payment_refused(db, &r, &refused, &err), &err, db);
    r.source = long_no;
    expect_arg(gate_record_payment_refused(db, &r, &refused, &err), &err, db);
    r = ok;
    r.order_no = "o 1";
    expect_arg(gate_record_payment_refused(db, &r, &refused, &err), &err, db);
    r = ok;
    r.txn_no = long_no;
    expect_arg(gate_record_payment_refused(db, &r, &refused, &err), &err, db);
    r = ok;
    r.amount_cents = -1;
    expect_arg(gate_record_payment_refused(db, &r, &refused, &err), &err, db);
    r = ok;
    r.reason = NULL;
    expect_arg(gate_record_payment_refused(db, &r, &refused, &err), &err, db);
    r.reason = " \t";
    expect_arg(gate_record_payment_refused(db, &r, &refused, &err), &err, db);
    r = ok;
    r.message_len = 3; /* bytes promised, none given */
    expect_arg(gate_record_payment_refused(db, &r, &refused, &err), &err, db);
    assert_false(refused.recorded);

    db_free(db);
}

/* place_order's items are checked as the schema checks them: a malformed
 * list never reaches the server. */
static void test_bad_items_never_connect(void **state)
{
    static const char *const bad[] = {
        "[",                                           /* not JSON */
        "{\"sku\":\"s1\",\"qty\":1}",                  /* not an array */
        "[]",                                          /* empty */
        "[1]",                                         /* not an object */
        "[{\"sku\":\"s1\"}]",                          /* no qty */
        "[{\"qty\":1}]",                               /* no sku */
        "[{\"sku\":\"s1\",\"qty\":0}]",                /* qty 0 */
        "[{\"sku\":\"s1\",\"qty\":-2}]",               /* negative */
        "[{\"sku\":\"s1\",\"qty\":1.5}]",              /* fraction */
        "[{\"sku\":\"s1\",\"qty\":\"1\"}]",            /* string qty */
        "[{\"sku\":\"s1\",\"qty\":2147483648}]",       /* beyond int */
        "[{\"sku\":\"\",\"qty\":1}]",                  /* empty sku */
        "[{\"sku\":7,\"qty\":1}]",                     /* numeric sku */
        "[{\"sku\":null,\"qty\":1}]",                  /* null sku */
        "[{\"sku\":\"s1\",\"sku\":\"s2\",\"qty\":1}]", /* duplicate key */
        "[{\"sku\":\"s1\",\"qty\":1}] trailing",       /* trailing bytes */
    };
    struct db *db = unreachable_db();
    struct og_error err;
    enum gate_outcome outcome;
    char *many;
    char sku[GATE_SKU_MAX + 40];
    size_t used = 0, cap = (GATE_ITEMS_MAX + 1) * 32 + 4;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        enum og_status st =
            gate_place(db, "o-1", 100, bad[i], NULL, "2026-11-30T16:00:00Z", &outcome, &err);
        if (st != OG_ERR_ARG)
            fail_msg("items %s: status %d, expected OG_ERR_ARG", bad[i], st);
        expect_arg(st, &err, db);
    }
    /* A sku one character too long. */
    snprintf(sku, sizeof(sku), "[{\"sku\":\"%0*d\",\"qty\":1}]", GATE_SKU_MAX + 1, 0);
    expect_arg(gate_place(db, "o-1", 100, sku, NULL, "2026-11-30T16:00:00Z", &outcome, &err), &err,
               db);
    /* One line more than the schema accepts. */
    many = malloc(cap);
    assert_non_null(many);
    many[used++] = '[';
    for (int i = 0; i <= GATE_ITEMS_MAX; i++)
        used += (size_t)snprintf(many + used, cap - used, "%s{\"sku\":\"s%d\",\"qty\":1}",
                                 i > 0 ? "," : "", i);
    snprintf(many + used, cap - used, "]");
    expect_arg(gate_place(db, "o-1", 100, many, NULL, "2026-11-30T16:00:00Z", &outcome, &err), &err,
               db);
    assert_non_null(strstr(err.msg, "items"));
    free(many);
    db_free(db);
}

/* A retry bound of zero still runs the statement once: it must never come
 * back OG_OK without having asked the server. */
static void test_zero_attempts_still_runs_once(void **state)
{
    struct db_retry retry = {.max_attempts = 0, .base_ms = 1, .cap_ms = 1};
    struct db *db = db_new("host=/nonexistent-ordergate-socket-dir port=1 connect_timeout=1", NULL,
                           "test_gate_unit", &retry, NULL);
    struct og_error err;
    enum gate_outcome outcome = GATE_HELD;

    (void)state;
    assert_non_null(db);
    assert_int_equal(gate_hold(db, "o-1", 60, &outcome, NULL, 0, &err), OG_ERR_DB);
    assert_int_equal(outcome, GATE_UNKNOWN);
    assert_true(err.retriable);
    db_free(db);
}

/* A valid call on an unreachable server is a retriable database error, not
 * an argument error: the caller should try again later. */
static void test_unreachable_is_retriable(void **state)
{
    struct db *db = unreachable_db();
    struct og_error err;
    enum gate_outcome outcome;
    char expire[64];

    (void)state;
    assert_int_equal(gate_hold(db, "o-1", 60, &outcome, expire, sizeof(expire), &err), OG_ERR_DB);
    assert_true(err.retriable);
    assert_string_equal(err.sqlstate, "08001");
    db_free(db);
    db_free(NULL); /* a no-op */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_outcome_words_round_trip),
        cmocka_unit_test(test_outcome_words_are_the_contract),
        cmocka_unit_test(test_outcome_parse_rejects),
        cmocka_unit_test(test_status_round_trip),
        cmocka_unit_test(test_source_words),
        cmocka_unit_test(test_order_no_validation),
        cmocka_unit_test(test_txn_no_validation),
        cmocka_unit_test(test_currency_validation),
        cmocka_unit_test(test_charge_ref_validation),
        cmocka_unit_test(test_sqlstate_retriable),
        cmocka_unit_test(test_bad_arguments_never_connect),
        cmocka_unit_test(test_bad_items_never_connect),
        cmocka_unit_test(test_zero_attempts_still_runs_once),
        cmocka_unit_test(test_unreachable_is_retriable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
