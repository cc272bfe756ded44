#include "common/gate.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/pgarray.h"

static const char *const gate_outcome_words[GATE_OUTCOME_COUNT] = {
    [GATE_UNKNOWN] = "unknown",
    [GATE_CANCELLED] = "cancelled",
    [GATE_ALREADY_CANCELLED] = "already_cancelled",
    [GATE_ALREADY_PAID] = "already_paid",
    [GATE_NOT_DUE] = "not_due",
    [GATE_NOT_FOUND] = "not_found",
    [GATE_BUSY] = "busy",
    [GATE_PAID] = "paid",
    [GATE_DUPLICATE] = "duplicate",
    [GATE_LATE_PAYMENT] = "late_payment",
    [GATE_DOUBLE_PAYMENT] = "double_payment",
    [GATE_AMOUNT_MISMATCH] = "amount_mismatch",
    [GATE_PARTIAL] = "partial",
    [GATE_OVERPAID] = "overpaid",
    [GATE_CURRENCY_MISMATCH] = "currency_mismatch",
    [GATE_HELD] = "held",
    [GATE_NOT_PENDING] = "not_pending",
    [GATE_PENDING] = "pending",
    [GATE_FAILED] = "failed",
    [GATE_ALREADY_CAPTURED] = "already_captured",
    [GATE_PLACED] = "placed",
    [GATE_OUT_OF_STOCK] = "out_of_stock",
    [GATE_COUPON_UNAVAILABLE] = "coupon_unavailable",
    [GATE_SENT] = "sent",
    [GATE_IN_FLIGHT] = "in_flight",
    [GATE_ALREADY_SENT] = "already_sent",
    [GATE_HOOK_FAILED] = "hook_failed",
    [GATE_ALREADY_RELEASED] = "already_released",
    [GATE_RELEASED] = "released",
    [GATE_AMENDED] = "amended",
    [GATE_SET] = "set",
};

/* Statements: each calls one gate function (schema/README.md, "The gate"). */
static const struct db_stmt gate_stmt_cancel = {
    "og_claim_cancel",
    "SELECT order_no, outcome, status FROM ordergate.claim_cancel($1::text[], $2)", 2};
static const struct db_stmt gate_stmt_payment = {
    "og_claim_payment",
    "SELECT outcome, status, first_outcome FROM ordergate.claim_payment($1, $2, $3::bigint, $4)",
    4};
/* The claim's arguments are evaluated before the claim runs, so lock_timeout is set (for this
 * statement's transaction only) before its first lock wait. */
static const struct db_stmt gate_stmt_payment_bounded = {
    "og_claim_payment_bounded",
    "SELECT outcome, status, first_outcome FROM ordergate.claim_payment("
    "CASE WHEN set_config('lock_timeout', $5, true) IS NOT NULL THEN $1::text END, "
    "$2, $3::bigint, $4)",
    5};
/* A payment with any optional field: the new arguments by name (schema/README.md names them),
 * lock_timeout set as above only when $9 is not NULL. */
static const struct db_stmt gate_stmt_payment_full = {
    "og_claim_payment_full",
    "SELECT outcome, status, first_outcome FROM ordergate.claim_payment("
    "CASE WHEN $9::text IS NULL OR set_config('lock_timeout', $9, true) IS NOT NULL "
    "THEN $1::text END, $2, $3::bigint, $4, currency => $5, charge_ref => $6, operator => $7, "
    "reason => $8)",
    9};
static const struct db_stmt gate_stmt_begin_charge = {
    "og_begin_charge", "SELECT outcome, bound_at FROM ordergate.begin_charge($1, $2, $3::int)", 3};
static const struct db_stmt gate_stmt_charge_failed = {"og_charge_failed",
                                                       "SELECT ordergate.charge_failed($1, $2)", 2};
static const struct db_stmt gate_stmt_place_full = {
    "og_place_full",
    "SELECT ordergate.place_order($1, $2::bigint, $3::jsonb, $4, $5::timestamptz, "
    "currency => $6, allow_partial => $7::boolean)",
    7};
static const struct db_stmt gate_stmt_hold = {
    "og_hold", "SELECT outcome, expire_at FROM ordergate.hold_for_payment($1, $2::int)", 2};
static const struct db_stmt gate_stmt_reminder = {
    "og_claim_reminder",
    "SELECT outcome, ceil(extract(epoch FROM due_at) * 1000)::bigint "
    "FROM ordergate.claim_reminder($1, $2::int)",
    2};
/* Sorted by order number and offset first (OFFSET 0 keeps the sort below the lateral call), so
 * the claims take their row locks in the gate's order. */
static const struct db_stmt gate_stmt_reminders = {
    "og_claim_reminders",
    "SELECT u.i, r.outcome, ceil(extract(epoch FROM r.due_at) * 1000)::bigint "
    "FROM (SELECT * FROM unnest($1::text[], $2::int[]) WITH ORDINALITY AS x(o, s, i) "
    "      ORDER BY x.o, x.s, x.i OFFSET 0) u "
    "CROSS JOIN LATERAL ordergate.claim_reminder(u.o, u.s) r",
    2};
static const struct db_stmt gate_stmt_close = {
    "og_close", "SELECT outcome, status FROM ordergate.close_order($1, $2, $3)", 3};
static const struct db_stmt gate_stmt_release = {
    "og_release", "SELECT outcome, status FROM ordergate.release_order($1, $2, $3)", 3};
static const struct db_stmt gate_stmt_amend = {
    "og_amend",
    "SELECT outcome, status FROM ordergate.amend_order($1, $2::bigint, $3::jsonb, $4::jsonb, $5)",
    5};
static const struct db_stmt gate_stmt_set_deadline = {
    "og_set_deadline",
    "SELECT outcome, expire_at FROM ordergate.set_deadline($1, $2::timestamptz, $3)", 3};
static const struct db_stmt gate_stmt_refused = {
    "og_record_payment_refused",
    "SELECT outcome, exception_id, refused_key FROM ordergate.record_payment_refused($1, $2, $3, "
    "$4::bigint, $5, $6)",
    6};
static const struct db_stmt gate_stmt_refund = {
    "og_record_refund",
    "SELECT result, exception_id, state, resolution FROM ordergate.record_refund($1, $2, $3)", 3};
static const struct db_stmt gate_stmt_place = {
    "og_place", "SELECT ordergate.place_order($1, $2::bigint, $3::jsonb, $4, $5::timestamptz)", 5};

const char *gate_outcome_str(enum gate_outcome outcome)
{
    if ((int)outcome < 0 || outcome >= GATE_OUTCOME_COUNT)
        return "unknown";
    return gate_outcome_words[outcome];
}

enum gate_outcome gate_outcome_parse(const char *word)
{
    if (word == NULL)
        return GATE_UNKNOWN;
    for (int i = 1; i < GATE_OUTCOME_COUNT; i++)
        if (strcmp(word, gate_outcome_words[i]) == 0)
            return (enum gate_outcome)i;
    return GATE_UNKNOWN;
}

const char *gate_source_str(enum gate_source source)
{
    switch (source) {
    case GATE_SRC_TIMEOUT_CONSUMER:
        return "timeout_consumer";
    case GATE_SRC_TIMEOUT_SCANNER:
        return "timeout_scanner";
    case GATE_SRC_PAYMENT_CALLBACK:
        return "payment_callback";
    case GATE_SRC_MANUAL:
        return "manual";
    }
    return "unknown";
}

const char *order_status_str(enum order_status status)
{
    switch (status) {
    case ORDER_PENDING:
        return "pending_payment";
    case ORDER_PAID:
        return "paid";
    case ORDER_CANCELLED:
        return "cancelled";
    case ORDER_RELEASED:
        return "released";
    case ORDER_STATUS_NONE:
        break;
    }
    return "none";
}

enum order_status order_status_parse(const char *word)
{
    if (word == NULL)
        return ORDER_STATUS_NONE;
    if (strcmp(word, "pending_payment") == 0)
        return ORDER_PENDING;
    if (strcmp(word, "paid") == 0)
        return ORDER_PAID;
    if (strcmp(word, "cancelled") == 0)
        return ORDER_CANCELLED;
    if (strcmp(word, "released") == 0)
        return ORDER_RELEASED;
    return ORDER_STATUS_NONE;
}

static int gate_key_valid(const char *s, size_t len, size_t max)
{
    if (s == NULL || len == 0 || len > max)
        return 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == ':' || c == '-'))
            return 0;
    }
    return 1;
}

int gate_order_no_valid(const char *s, size_t len)
{
    return gate_key_valid(s, len, GATE_ORDER_NO_MAX);
}

int gate_txn_no_valid(const char *s, size_t len)
{
    return gate_key_valid(s, len, GATE_TXN_NO_MAX);
}

int gate_currency_valid(const char *s, size_t len)
{
    if (s == NULL || len != GATE_CURRENCY_LEN)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (s[i] < 'A' || s[i] > 'Z')
            return 0;
    return 1;
}

int gate_charge_ref_valid(const char *s, size_t len)
{
    return gate_key_valid(s, len, GATE_CHARGE_REF_MAX);
}

/* Length in characters of a UTF-8 string (what the schema's length()
 * counts): the bytes that are not continuation bytes. It does not validate
 * the encoding (the database refuses invalid UTF-8 itself) and never fails. */
static long gate_utf8_chars(const char *s)
{
    long n = 0;

    for (; *s != '\0'; s++)
        if (((unsigned char)*s & 0xC0) != 0x80)
            n++;
    return n;
}

/* True when s holds 1..max characters and is not only blanks (the schema
 * trims operator and reason before checking them). */
static int gate_text_valid(const char *s, long max)
{
    long n;

    if (s == NULL || *s == '\0')
        return 0;
    n = gate_utf8_chars(s);
    if (n > max)
        return 0;
    return s[strspn(s, " \t\r\n")] != '\0';
}

/* Parses an outcome word and checks it belongs to what fn may answer
 * (allowed: bit i set for enum value i). Anything else means this client and
 * the schema disagree, which must not pass as a quiet GATE_UNKNOWN. */
static enum og_status gate_outcome_expect(const char *word, unsigned allowed, const char *fn,
                                          enum gate_outcome *out, struct og_error *err)
{
    enum gate_outcome o = gate_outcome_parse(word);

    *out = o;
    if (o == GATE_UNKNOWN || !(allowed & (1u << o)))
        return og_error_set(err, OG_ERR_INTERNAL, false, "%s answered unexpected outcome '%.64s'",
                            fn, word != NULL ? word : "(null)");
    return OG_OK;
}

_Static_assert(GATE_OUTCOME_COUNT <= 32, "outcome sets are bit masks of an unsigned int");
#define GATE_BIT(o) (1u << (o))
#define GATE_CANCEL_OUTCOMES                                                                       \
    (GATE_BIT(GATE_CANCELLED) | GATE_BIT(GATE_ALREADY_CANCELLED) | GATE_BIT(GATE_ALREADY_PAID) |   \
     GATE_BIT(GATE_NOT_DUE) | GATE_BIT(GATE_NOT_FOUND) | GATE_BIT(GATE_BUSY) |                     \
     GATE_BIT(GATE_ALREADY_RELEASED))
#define GATE_CLOSE_OUTCOMES                                                                        \
    (GATE_BIT(GATE_CANCELLED) | GATE_BIT(GATE_ALREADY_CANCELLED) | GATE_BIT(GATE_ALREADY_PAID) |   \
     GATE_BIT(GATE_NOT_FOUND) | GATE_BIT(GATE_ALREADY_RELEASED))
#define GATE_RELEASE_OUTCOMES                                                                      \
    (GATE_BIT(GATE_RELEASED) | GATE_BIT(GATE_NOT_PENDING) | GATE_BIT(GATE_NOT_FOUND))
#define GATE_AMEND_OUTCOMES                                                                        \
    (GATE_BIT(GATE_AMENDED) | GATE_BIT(GATE_OUT_OF_STOCK) | GATE_BIT(GATE_NOT_PENDING) |           \
     GATE_BIT(GATE_NOT_FOUND))
#define GATE_SET_DEADLINE_OUTCOMES                                                                 \
    (GATE_BIT(GATE_SET) | GATE_BIT(GATE_NOT_PENDING) | GATE_BIT(GATE_NOT_FOUND))
#define GATE_PAYMENT_OUTCOMES                                                                      \
    (GATE_BIT(GATE_PAID) | GATE_BIT(GATE_LATE_PAYMENT) | GATE_BIT(GATE_DOUBLE_PAYMENT) |           \
     GATE_BIT(GATE_AMOUNT_MISMATCH) | GATE_BIT(GATE_NOT_FOUND) | GATE_BIT(GATE_PARTIAL) |          \
     GATE_BIT(GATE_OVERPAID) | GATE_BIT(GATE_CURRENCY_MISMATCH))
#define GATE_HOLD_OUTCOMES                                                                         \
    (GATE_BIT(GATE_HELD) | GATE_BIT(GATE_NOT_PENDING) | GATE_BIT(GATE_NOT_FOUND))
#define GATE_REMINDER_OUTCOMES                                                                     \
    (GATE_BIT(GATE_SENT) | GATE_BIT(GATE_NOT_DUE) | GATE_BIT(GATE_IN_FLIGHT) |                     \
     GATE_BIT(GATE_NOT_PENDING) | GATE_BIT(GATE_ALREADY_SENT) | GATE_BIT(GATE_NOT_FOUND))
#define GATE_BEGIN_CHARGE_OUTCOMES                                                                 \
    (GATE_BIT(GATE_PENDING) | GATE_BIT(GATE_DUPLICATE) | GATE_BIT(GATE_NOT_PENDING) |              \
     GATE_BIT(GATE_NOT_FOUND))
#define GATE_CHARGE_FAILED_OUTCOMES                                                                \
    (GATE_BIT(GATE_FAILED) | GATE_BIT(GATE_DUPLICATE) | GATE_BIT(GATE_ALREADY_CAPTURED))
#define GATE_PLACE_OUTCOMES                                                                        \
    (GATE_BIT(GATE_PLACED) | GATE_BIT(GATE_DUPLICATE) | GATE_BIT(GATE_OUT_OF_STOCK) |              \
     GATE_BIT(GATE_COUPON_UNAVAILABLE))

/* Checks the items of place_order as the schema will, so a bad list is an
 * OG_ERR_ARG with a message saying which line, without a round trip. */
static enum og_status gate_check_items(const char *items_json, struct og_error *err)
{
    json_error_t jerr;
    json_t *items = json_loads(items_json, JSON_REJECT_DUPLICATES, &jerr);
    enum og_status st = OG_OK;
    size_t i;
    json_t *line;

    if (items == NULL)
        return og_error_set(err, OG_ERR_ARG, false, "items are not valid JSON: %s (column %d)",
                            jerr.text, jerr.column);
    if (!json_is_array(items) || json_array_size(items) == 0 ||
        json_array_size(items) > GATE_ITEMS_MAX) {
        st = og_error_set(err, OG_ERR_ARG, false,
                          "items must be a JSON array of 1 to %d {\"sku\": text, \"qty\": positive "
                          "integer}",
                          GATE_ITEMS_MAX);
        goto out;
    }
    json_array_foreach(items, i, line)
    {
        json_t *sku = json_object_get(line, "sku");
        json_t *qty = json_object_get(line, "qty");

        if (!json_is_object(line) || !json_is_string(sku) || !json_is_integer(qty)) {
            st = og_error_set(err, OG_ERR_ARG, false,
                              "items[%zu] must be {\"sku\": text, \"qty\": integer}", i);
            goto out;
        }
        if (json_string_length(sku) == 0 ||
            gate_utf8_chars(json_string_value(sku)) > GATE_SKU_MAX) {
            st = og_error_set(err, OG_ERR_ARG, false, "items[%zu].sku must be 1 to %d characters",
                              i, GATE_SKU_MAX);
            goto out;
        }
        if (json_integer_value(qty) < 1 || json_integer_value(qty) > INT32_MAX) {
            st = og_error_set(err, OG_ERR_ARG, false,
                              "items[%zu].qty must be 1 to %" PRId32 ", got %" JSON_INTEGER_FORMAT,
                              i, INT32_MAX, json_integer_value(qty));
            goto out;
        }
    }
out:
    json_decref(items);
    return st;
}

static enum og_status gate_check_order_no(const char *order_no, struct og_error *err)
{
    if (order_no == NULL)
        return og_error_set(err, OG_ERR_ARG, false, "order number is missing");
    if (!gate_order_no_valid(order_no, strlen(order_no)))
        return og_error_set(err, OG_ERR_ARG, false,
                            "invalid order number (1 to %d characters of A-Z a-z 0-9 . _ : -)",
                            GATE_ORDER_NO_MAX);
    return OG_OK;
}

/* Checks that a result has the expected shape before reading it, so a schema
 * that drifted from this client fails loudly instead of reading garbage. */
static enum og_status gate_check_shape(PGresult *res, int ncols, int nrows_exact, const char *fn,
                                       struct og_error *err)
{
    if (PQnfields(res) != ncols)
        return og_error_set(err, OG_ERR_INTERNAL, false, "%s returned %d columns, expected %d", fn,
                            PQnfields(res), ncols);
    if (nrows_exact >= 0 && PQntuples(res) != nrows_exact)
        return og_error_set(err, OG_ERR_INTERNAL, false, "%s returned %d rows, expected %d", fn,
                            PQntuples(res), nrows_exact);
    return OG_OK;
}

/* One call of a gate function that answers one row (outcome, ...): the statement, the row's shape
 * (ncols columns) and its outcome among `allowed`; fn names the function in errors. *res is the
 * caller's to clear, whatever the result. */
static enum og_status gate_call_outcome(struct db *db, const struct db_stmt *stmt,
                                        const char *const *params, const char *fn, int ncols,
                                        unsigned allowed, enum gate_outcome *outcome,
                                        PGresult **res, struct og_error *err)
{
    enum og_status st = db_call(db, stmt, params, res, err);

    if (st == OG_OK)
        st = gate_check_shape(*res, ncols, 1, fn, err);
    if (st == OG_OK)
        st = gate_outcome_expect(PQgetvalue(*res, 0, 0), allowed, fn, outcome, err);
    return st;
}

enum og_status gate_claim_cancel(struct db *db, const char *const *order_nos, size_t n,
                                 enum gate_source source, struct gate_cancel_row *rows,
                                 size_t *nrows, struct og_error *err)
{
    struct pgarray array;
    PGresult *res = NULL;
    enum og_status st = OG_OK;
    const char *params[2];

    *nrows = 0;
    pgarray_init(&array);
    if (source != GATE_SRC_TIMEOUT_CONSUMER && source != GATE_SRC_TIMEOUT_SCANNER)
        return og_error_set(err, OG_ERR_ARG, false,
                            "claim_cancel source must be timeout_consumer or timeout_scanner");
    if (n > GATE_BATCH_MAX)
        return og_error_set(err, OG_ERR_ARG, false, "batch of %zu orders exceeds the limit of %d",
                            n, GATE_BATCH_MAX);
    if (n > 0 && (order_nos == NULL || rows == NULL))
        return og_error_set(err, OG_ERR_ARG, false, "order list is missing");
    for (size_t i = 0; i < n; i++) {
        st = gate_check_order_no(order_nos[i], err);
        if (st != OG_OK)
            goto out;
        pgarray_append(&array, order_nos[i]);
    }
    params[0] = pgarray_str(&array);
    if (params[0] == NULL) {
        st = og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
        goto out;
    }
    params[1] = gate_source_str(source);
    st = db_call(db, &gate_stmt_cancel, params, &res, err);
    if (st != OG_OK)
        goto out;
    st = gate_check_shape(res, 3, -1, "claim_cancel", err);
    if (st != OG_OK)
        goto out;
    if ((size_t)PQntuples(res) > n) {
        st = og_error_set(err, OG_ERR_INTERNAL, false,
                          "claim_cancel returned %d rows for %zu orders", PQntuples(res), n);
        goto out;
    }
    for (int i = 0; i < PQntuples(res); i++) {
        struct gate_cancel_row *row = &rows[i];
        snprintf(row->order_no, sizeof(row->order_no), "%s", PQgetvalue(res, i, 0));
        st = gate_outcome_expect(PQgetvalue(res, i, 1), GATE_CANCEL_OUTCOMES, "claim_cancel",
                                 &row->outcome, err);
        if (st != OG_OK)
            goto out;
        row->status =
            PQgetisnull(res, i, 2) ? ORDER_STATUS_NONE : order_status_parse(PQgetvalue(res, i, 2));
    }
    *nrows = (size_t)PQntuples(res);
out:
    PQclear(res);
    pgarray_free(&array);
    return st;
}

enum og_status gate_claim_payment(struct db *db, const char *order_no, const char *txn_no,
                                  int64_t amount_cents, const char *channel,
                                  struct gate_payment_result *out, struct og_error *err)
{
    struct gate_payment p = {
        .order_no = order_no, .txn_no = txn_no, .amount_cents = amount_cents, .channel = channel};

    return gate_payment_claim(db, &p, out, err);
}

bool gate_payment_locked(const struct og_error *err)
{
    return err != NULL && strcmp(err->sqlstate, "55P03") == 0 && !gate_hook_failed(err, NULL, 0);
}

enum og_status gate_claim_payment_bounded(struct db *db, const char *order_no, const char *txn_no,
                                          int64_t amount_cents, const char *channel,
                                          int lock_wait_ms, struct gate_payment_result *out,
                                          struct og_error *err)
{
    struct gate_payment p = {.order_no = order_no,
                             .txn_no = txn_no,
                             .amount_cents = amount_cents,
                             .channel = channel,
                             .lock_wait_ms = lock_wait_ms};

    return gate_payment_claim(db, &p, out, err);
}

/* The checks claim_payment makes with 22023, made here so nothing is sent. */
static enum og_status gate_payment_check(const struct gate_payment *p, struct og_error *err)
{
    enum og_status st = gate_check_order_no(p->order_no, err);
    bool has_operator = p->operator_name != NULL, has_reason = p->reason != NULL;

    if (st != OG_OK)
        return st;
    if (p->txn_no == NULL || !gate_txn_no_valid(p->txn_no, strlen(p->txn_no)))
        return og_error_set(
            err, OG_ERR_ARG, false,
            "invalid transaction number (1 to %d characters of A-Z a-z 0-9 . _ : -)",
            GATE_TXN_NO_MAX);
    if (p->amount_cents <= 0)
        return og_error_set(err, OG_ERR_ARG, false, "amount must be positive, got %" PRId64,
                            p->amount_cents);
    if (p->channel == NULL || *p->channel == '\0' || gate_utf8_chars(p->channel) > GATE_CHANNEL_MAX)
        return og_error_set(err, OG_ERR_ARG, false, "payment channel must be 1 to %d characters",
                            GATE_CHANNEL_MAX);
    if (p->lock_wait_ms < 0 || p->lock_wait_ms > GATE_LOCK_WAIT_MAX)
        return og_error_set(err, OG_ERR_ARG, false,
                            "lock wait must be 0 (the session's) to %d ms, got %d",
                            GATE_LOCK_WAIT_MAX, p->lock_wait_ms);
    if (p->currency != NULL && !gate_currency_valid(p->currency, strlen(p->currency)))
        return og_error_set(
            err, OG_ERR_ARG, false,
            "currency must be an ISO 4217 code of 3 upper-case letters, got '%.16s'", p->currency);
    if (p->charge_ref != NULL && !gate_charge_ref_valid(p->charge_ref, strlen(p->charge_ref)))
        return og_error_set(err, OG_ERR_ARG, false,
                            "invalid charge reference (1 to %d characters of A-Z a-z 0-9 . _ : -)",
                            GATE_CHARGE_REF_MAX);
    if (has_operator != has_reason)
        return og_error_set(err, OG_ERR_ARG, false,
                            "a payment taken by staff needs both operator and reason");
    if (has_operator && !gate_text_valid(p->operator_name, GATE_OPERATOR_MAX))
        return og_error_set(err, OG_ERR_ARG, false, "operator must be 1 to %d characters",
                            GATE_OPERATOR_MAX);
    if (has_reason && !gate_text_valid(p->reason, GATE_REASON_MAX))
        return og_error_set(err, OG_ERR_ARG, false, "reason must be 1 to %d characters",
                            GATE_REASON_MAX);
    if (has_operator && strcmp(p->channel, "manual") != 0)
        return og_error_set(err, OG_ERR_ARG, false,
                            "a payment taken by staff must have the channel 'manual', got '%.64s'",
                            p->channel);
    return OG_OK;
}

enum og_status gate_payment_claim(struct db *db, const struct gate_payment *p,
                                  struct gate_payment_result *out, struct og_error *err)
{
    char amount[24], wait[24];
    const char *params[9];
    const struct db_stmt *stmt;
    PGresult *res = NULL;
    enum og_status st;
    bool full;

    memset(out, 0, sizeof(*out));
    st = gate_payment_check(p, err);
    if (st != OG_OK)
        return st;
    snprintf(amount, sizeof(amount), "%" PRId64, p->amount_cents);
    snprintf(wait, sizeof(wait), "%dms", p->lock_wait_ms);
    /* Without an optional field the statement is the four-argument call it always was. */
    full = p->currency != NULL || p->charge_ref != NULL || p->operator_name != NULL;
    params[0] = p->order_no;
    params[1] = p->txn_no;
    params[2] = amount;
    params[3] = p->channel;
    if (full) {
        params[4] = p->currency;
        params[5] = p->charge_ref;
        params[6] = p->operator_name;
        params[7] = p->reason;
        params[8] = p->lock_wait_ms > 0 ? wait : NULL;
        stmt = &gate_stmt_payment_full;
    } else {
        params[4] = wait;
        stmt = p->lock_wait_ms > 0 ? &gate_stmt_payment_bounded : &gate_stmt_payment;
    }
    st = db_call(db, stmt, params, &res, err);
    if (st == OG_OK)
        st = gate_check_shape(res, 3, 1, "claim_payment", err);
    if (st == OG_OK)
        st = gate_outcome_expect(PQgetvalue(res, 0, 0),
                                 GATE_PAYMENT_OUTCOMES | GATE_BIT(GATE_DUPLICATE), "claim_payment",
                                 &out->outcome, err);
    /* A duplicate must say what the first call answered: that answer is
     * what the caller acts on. */
    if (st == OG_OK && out->outcome == GATE_DUPLICATE)
        st = gate_outcome_expect(PQgetisnull(res, 0, 2) ? NULL : PQgetvalue(res, 0, 2),
                                 GATE_PAYMENT_OUTCOMES, "claim_payment (first_outcome)",
                                 &out->first_outcome, err);
    else if (st == OG_OK && !PQgetisnull(res, 0, 2))
        out->first_outcome = gate_outcome_parse(PQgetvalue(res, 0, 2));
    if (st == OG_OK)
        out->status = order_status_parse(PQgetvalue(res, 0, 1));
    PQclear(res);
    return st;
}

static enum og_status gate_check_charge_ref(const char *charge_ref, struct og_error *err)
{
    if (charge_ref == NULL || !gate_charge_ref_valid(charge_ref, strlen(charge_ref)))
        return og_error_set(err, OG_ERR_ARG, false,
                            "invalid charge reference (1 to %d characters of A-Z a-z 0-9 . _ : -)",
                            GATE_CHARGE_REF_MAX);
    return OG_OK;
}

enum og_status gate_begin_charge(struct db *db, const char *order_no, const char *charge_ref,
                                 int max_seconds, enum gate_outcome *outcome, char *bound_at,
                                 size_t bound_at_size, struct og_error *err)
{
    char secs[16];
    const char *params[3];
    PGresult *res = NULL;
    enum og_status st;

    *outcome = GATE_UNKNOWN;
    if (bound_at != NULL && bound_at_size > 0)
        bound_at[0] = '\0';
    st = gate_check_order_no(order_no, err);
    if (st == OG_OK)
        st = gate_check_charge_ref(charge_ref, err);
    if (st != OG_OK)
        return st;
    if (max_seconds < 1 || max_seconds > GATE_CHARGE_SECONDS_MAX)
        return og_error_set(err, OG_ERR_ARG, false, "charge seconds must be 1 to %d, got %d",
                            GATE_CHARGE_SECONDS_MAX, max_seconds);
    snprintf(secs, sizeof(secs), "%d", max_seconds);
    params[0] = order_no;
    params[1] = charge_ref;
    params[2] = secs;
    st = gate_call_outcome(db, &gate_stmt_begin_charge, params, "begin_charge", 2,
                           GATE_BEGIN_CHARGE_OUTCOMES, outcome, &res, err);
    if (st == OG_OK && bound_at != NULL && bound_at_size > 0)
        snprintf(bound_at, bound_at_size, "%s", PQgetvalue(res, 0, 1));
    PQclear(res);
    return st;
}

enum og_status gate_charge_failed(struct db *db, const char *order_no, const char *charge_ref,
                                  enum gate_outcome *outcome, struct og_error *err)
{
    const char *params[2];
    PGresult *res = NULL;
    enum og_status st;

    *outcome = GATE_UNKNOWN;
    st = gate_check_order_no(order_no, err);
    if (st == OG_OK)
        st = gate_check_charge_ref(charge_ref, err);
    if (st != OG_OK)
        return st;
    params[0] = order_no;
    params[1] = charge_ref;
    st = gate_call_outcome(db, &gate_stmt_charge_failed, params, "charge_failed", 1,
                           GATE_CHARGE_FAILED_OUTCOMES, outcome, &res, err);
    PQclear(res);
    return st;
}

enum og_status gate_hold(struct db *db, const char *order_no, int seconds,
                         enum gate_outcome *outcome, char *expire_at, size_t expire_at_size,
                         struct og_error *err)
{
    char secs[16];
    const char *params[2];
    PGresult *res = NULL;
    enum og_status st;

    *outcome = GATE_UNKNOWN;
    if (expire_at != NULL && expire_at_size > 0)
        expire_at[0] = '\0';
    st = gate_check_order_no(order_no, err);
    if (st != OG_OK)
        return st;
    if (seconds <= 0)
        return og_error_set(err, OG_ERR_ARG, false, "hold seconds must be positive, got %d",
                            seconds);
    snprintf(secs, sizeof(secs), "%d", seconds);
    params[0] = order_no;
    params[1] = secs;
    st = gate_call_outcome(db, &gate_stmt_hold, params, "hold_for_payment", 2, GATE_HOLD_OUTCOMES,
                           outcome, &res, err);
    if (st == OG_OK) {
        if (expire_at != NULL && expire_at_size > 0)
            snprintf(expire_at, expire_at_size, "%s", PQgetvalue(res, 0, 1));
    }
    PQclear(res);
    return st;
}

enum og_status gate_claim_reminder(struct db *db, const char *order_no, int offset_seconds,
                                   enum gate_outcome *outcome, int64_t *due_ms,
                                   struct og_error *err)
{
    char off[16];
    const char *params[2];
    PGresult *res = NULL;
    enum og_status st;

    *outcome = GATE_UNKNOWN;
    *due_ms = 0;
    st = gate_check_order_no(order_no, err);
    if (st != OG_OK)
        return st;
    if (offset_seconds < 1 || offset_seconds > GATE_REMINDER_OFFSET_MAX)
        return og_error_set(err, OG_ERR_ARG, false, "reminder offset must be 1..%d, got %d",
                            GATE_REMINDER_OFFSET_MAX, offset_seconds);
    snprintf(off, sizeof(off), "%d", offset_seconds);
    params[0] = order_no;
    params[1] = off;
    st = gate_call_outcome(db, &gate_stmt_reminder, params, "claim_reminder", 2,
                           GATE_REMINDER_OUTCOMES, outcome, &res, err);
    if (st == OG_OK && !PQgetisnull(res, 0, 1))
        *due_ms = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
    PQclear(res);
    return st;
}

enum og_status gate_claim_reminders(struct db *db, size_t n, const char *const *order_nos,
                                    const int *offsets, enum gate_outcome *outcomes,
                                    int64_t *due_ms, struct og_error *err)
{
    struct pgarray nos, offs;
    const char *params[2];
    PGresult *res = NULL;
    enum og_status st = OG_OK;

    if (n == 0 || n > GATE_BATCH_MAX)
        return og_error_set(err, OG_ERR_ARG, false, "reminder batch of %zu (1..%d)", n,
                            GATE_BATCH_MAX);
    for (size_t i = 0; i < n; i++) {
        outcomes[i] = GATE_UNKNOWN;
        due_ms[i] = 0;
        st = gate_check_order_no(order_nos[i], err);
        if (st != OG_OK)
            return st;
        if (offsets[i] < 1 || offsets[i] > GATE_REMINDER_OFFSET_MAX)
            return og_error_set(err, OG_ERR_ARG, false, "reminder offset must be 1..%d, got %d",
                                GATE_REMINDER_OFFSET_MAX, offsets[i]);
    }
    pgarray_init(&nos);
    pgarray_init(&offs);
    for (size_t i = 0; i < n; i++) {
        pgarray_append(&nos, order_nos[i]);
        pgarray_append_int(&offs, offsets[i]);
    }
    params[0] = pgarray_str(&nos);
    params[1] = pgarray_str(&offs);
    if (params[0] == NULL || params[1] == NULL) {
        st = og_error_set(err, OG_ERR_NOMEM, false, "reminder batch: out of memory");
        goto out;
    }
    st = db_call(db, &gate_stmt_reminders, params, &res, err);
    if (st == OG_OK)
        st = gate_check_shape(res, 3, (int)n, "claim_reminder", err);
    for (int r = 0; st == OG_OK && r < PQntuples(res); r++) {
        long i = strtol(PQgetvalue(res, r, 0), NULL, 10) - 1;
        if (i < 0 || (size_t)i >= n) {
            st = og_error_set(err, OG_ERR_INTERNAL, false, "claim_reminder: row %ld of %zu", i, n);
            break;
        }
        st = gate_outcome_expect(PQgetvalue(res, r, 1), GATE_REMINDER_OUTCOMES, "claim_reminder",
                                 &outcomes[i], err);
        if (st == OG_OK && !PQgetisnull(res, r, 2))
            due_ms[i] = strtoll(PQgetvalue(res, r, 2), NULL, 10);
    }
out:
    PQclear(res);
    pgarray_free(&nos);
    pgarray_free(&offs);
    return st;
}

/* A staff act that takes a pending order out of the gate (close_order, release_order): who and
 * why are required; the answer is an outcome among `allowed` and the order's status. */
static enum og_status gate_staff_act(struct db *db, const struct db_stmt *stmt, const char *fn,
                                     const char *act, unsigned allowed, const char *order_no,
                                     const char *operator_name, const char *reason,
                                     enum gate_outcome *outcome, enum order_status *status,
                                     struct og_error *err)
{
    const char *params[3];
    PGresult *res = NULL;
    enum og_status st;

    *outcome = GATE_UNKNOWN;
    *status = ORDER_STATUS_NONE;
    st = gate_check_order_no(order_no, err);
    if (st != OG_OK)
        return st;
    if (!gate_text_valid(operator_name, GATE_OPERATOR_MAX))
        return og_error_set(err, OG_ERR_ARG, false,
                            "operator is required for %s (1 to %d characters)", act,
                            GATE_OPERATOR_MAX);
    if (!gate_text_valid(reason, GATE_REASON_MAX))
        return og_error_set(err, OG_ERR_ARG, false,
                            "reason is required for %s (1 to %d characters)", act, GATE_REASON_MAX);
    params[0] = order_no;
    params[1] = operator_name;
    params[2] = reason;
    st = gate_call_outcome(db, stmt, params, fn, 2, allowed, outcome, &res, err);
    if (st == OG_OK)
        *status = order_status_parse(PQgetvalue(res, 0, 1));
    PQclear(res);
    return st;
}

enum og_status gate_close(struct db *db, const char *order_no, const char *operator_name,
                          const char *reason, enum gate_outcome *outcome, enum order_status *status,
                          struct og_error *err)
{
    return gate_staff_act(db, &gate_stmt_close, "close_order", "a manual close",
                          GATE_CLOSE_OUTCOMES, order_no, operator_name, reason, outcome, status,
                          err);
}

enum og_status gate_order_release(struct db *db, const char *order_no, const char *operator_name,
                                  const char *reason, enum gate_outcome *outcome,
                                  enum order_status *status, struct og_error *err)
{
    return gate_staff_act(db, &gate_stmt_release, "release_order", "a release",
                          GATE_RELEASE_OUTCOMES, order_no, operator_name, reason, outcome, status,
                          err);
}

/* An amendment's lines: place_order's, or "[]" (a gate-only order stays so). */
static enum og_status gate_check_amend_items(const char *items_json, struct og_error *err)
{
    json_t *items;
    bool empty;

    if (items_json == NULL || *items_json == '\0')
        return og_error_set(err, OG_ERR_ARG, false,
                            "items are required (\"[]\" for a gate-only order)");
    items = json_loads(items_json, JSON_REJECT_DUPLICATES, NULL);
    empty = json_is_array(items) && json_array_size(items) == 0;
    json_decref(items);
    return empty ? OG_OK : gate_check_items(items_json, err);
}

enum og_status gate_order_amend(struct db *db, const char *order_no, int64_t amount_cents,
                                const char *items_json, const char *shop_json,
                                const char *operator_name, enum gate_outcome *outcome,
                                enum order_status *status, struct og_error *err)
{
    char amount[24];
    const char *params[5];
    PGresult *res = NULL;
    enum og_status st;

    *outcome = GATE_UNKNOWN;
    *status = ORDER_STATUS_NONE;
    st = gate_check_order_no(order_no, err);
    if (st != OG_OK)
        return st;
    if (amount_cents <= 0 || amount_cents > GATE_AMOUNT_MAX)
        return og_error_set(err, OG_ERR_ARG, false, "amount must be 1 to %lld, got %" PRId64,
                            GATE_AMOUNT_MAX, amount_cents);
    st = gate_check_amend_items(items_json, err);
    if (st != OG_OK)
        return st;
    if (shop_json != NULL) {
        json_t *shop = json_loads(shop_json, JSON_REJECT_DUPLICATES, NULL);
        bool object = json_is_object(shop);

        json_decref(shop);
        if (!object)
            return og_error_set(err, OG_ERR_ARG, false, "shop data must be a JSON object");
    }
    if (!gate_text_valid(operator_name, GATE_OPERATOR_MAX))
        return og_error_set(err, OG_ERR_ARG, false,
                            "operator is required for an amendment (1 to %d characters)",
                            GATE_OPERATOR_MAX);
    snprintf(amount, sizeof(amount), "%" PRId64, amount_cents);
    params[0] = order_no;
    params[1] = amount;
    params[2] = items_json;
    params[3] = shop_json;
    params[4] = operator_name;
    st = gate_call_outcome(db, &gate_stmt_amend, params, "amend_order", 2, GATE_AMEND_OUTCOMES,
                           outcome, &res, err);
    if (st == OG_OK)
        *status = order_status_parse(PQgetvalue(res, 0, 1));
    PQclear(res);
    return st;
}

enum og_status gate_order_set_deadline(struct db *db, const char *order_no, const char *deadline,
                                       const char *operator_name, enum gate_outcome *outcome,
                                       char *expire_at, size_t expire_at_size, struct og_error *err)
{
    const char *params[3];
    PGresult *res = NULL;
    enum og_status st;

    *outcome = GATE_UNKNOWN;
    if (expire_at != NULL && expire_at_size > 0)
        expire_at[0] = '\0';
    st = gate_check_order_no(order_no, err);
    if (st != OG_OK)
        return st;
    if (deadline == NULL || *deadline == '\0')
        return og_error_set(err, OG_ERR_ARG, false, "the new deadline is required");
    if (!gate_text_valid(operator_name, GATE_OPERATOR_MAX))
        return og_error_set(err, OG_ERR_ARG, false,
                            "operator is required for a deadline change (1 to %d characters)",
                            GATE_OPERATOR_MAX);
    params[0] = order_no;
    params[1] = deadline;
    params[2] = operator_name;
    st = gate_call_outcome(db, &gate_stmt_set_deadline, params, "set_deadline", 2,
                           GATE_SET_DEADLINE_OUTCOMES, outcome, &res, err);
    if (st == OG_OK && expire_at != NULL && expire_at_size > 0)
        snprintf(expire_at, expire_at_size, "%s", PQgetvalue(res, 0, 1));
    PQclear(res);
    return st;
}

enum og_status gate_place(struct db *db, const char *order_no, int64_t amount_cents,
                          const char *items_json, const char *coupon_id, const char *expire_at,
                          enum gate_outcome *outcome, struct og_error *err)
{
    struct gate_order o = {.order_no = order_no,
                           .amount_cents = amount_cents,
                           .items_json = items_json,
                           .coupon_id = coupon_id,
                           .expire_at = expire_at};

    return gate_order_place(db, &o, outcome, err);
}

enum og_status gate_order_place(struct db *db, const struct gate_order *o,
                                enum gate_outcome *outcome, struct og_error *err)
{
    char amount[24];
    const char *params[7];
    PGresult *res = NULL;
    enum og_status st;
    bool full = o->currency != NULL || o->allow_partial;

    *outcome = GATE_UNKNOWN;
    st = gate_check_order_no(o->order_no, err);
    if (st != OG_OK)
        return st;
    if (o->amount_cents <= 0 || o->amount_cents > GATE_AMOUNT_MAX)
        return og_error_set(err, OG_ERR_ARG, false, "amount must be 1 to %lld, got %" PRId64,
                            GATE_AMOUNT_MAX, o->amount_cents);
    if (o->items_json == NULL || *o->items_json == '\0')
        return og_error_set(err, OG_ERR_ARG, false, "items are required");
    st = gate_check_items(o->items_json, err);
    if (st != OG_OK)
        return st;
    if (o->coupon_id != NULL && gate_utf8_chars(o->coupon_id) > GATE_COUPON_MAX)
        return og_error_set(err, OG_ERR_ARG, false, "coupon id must be 1 to %d characters",
                            GATE_COUPON_MAX);
    if (o->expire_at == NULL || *o->expire_at == '\0')
        return og_error_set(err, OG_ERR_ARG, false, "expire_at is required");
    if (o->currency != NULL && !gate_currency_valid(o->currency, strlen(o->currency)))
        return og_error_set(
            err, OG_ERR_ARG, false,
            "currency must be an ISO 4217 code of 3 upper-case letters, got '%.16s'", o->currency);
    snprintf(amount, sizeof(amount), "%" PRId64, o->amount_cents);
    params[0] = o->order_no;
    params[1] = amount;
    params[2] = o->items_json;
    params[3] = (o->coupon_id != NULL && *o->coupon_id != '\0') ? o->coupon_id : NULL;
    params[4] = o->expire_at;
    params[5] = o->currency;
    params[6] = o->allow_partial ? "true" : "false";
    /* Without an optional field the statement is the five-argument call it always was. */
    st = gate_call_outcome(db, full ? &gate_stmt_place_full : &gate_stmt_place, params,
                           "place_order", 1, GATE_PLACE_OUTCOMES, outcome, &res, err);
    PQclear(res);
    return st;
}

/* Writes up to len bytes of data into buf (size > 0) as printable ASCII: a byte outside
 * 0x20..0x7e, and the backslash, becomes \xHH. Stops before a byte whose form would not fit in
 * max characters (and in buf); "..." then marks the cut, within max. */
static void gate_escape(char *buf, size_t size, const void *data, size_t len, size_t max)
{
    const unsigned char *p = data;
    size_t o = 0, cap = max < size - 1 ? max : size - 1;
    size_t i;

    for (i = 0; i < len; i++) {
        bool plain = p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\';
        size_t need = plain ? 1 : 4;
        /* Room for this byte, and for "..." should more follow it. */
        if (o + need + (i + 1 < len ? 3 : 0) > cap)
            break;
        if (plain)
            buf[o++] = (char)p[i];
        else
            o += (size_t)snprintf(buf + o, size - o, "\\x%02x", p[i]);
    }
    if (i < len && o + 3 <= cap) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o] = '\0';
}

enum og_status gate_record_payment_refused(struct db *db, const struct gate_refusal *r,
                                           struct gate_refusal_result *out, struct og_error *err)
{
    char amount[24], reason[GATE_REFUSAL_REASON_MAX + 1], *message = NULL;
    const char *params[6];
    PGresult *res = NULL;
    enum og_status st;

    memset(out, 0, sizeof(*out));
    if (r->source == NULL || *r->source == '\0' || strlen(r->source) > GATE_REFUSAL_SOURCE_MAX)
        return og_error_set(err, OG_ERR_ARG, false,
                            "the refused message's source must be 1 to %d characters",
                            GATE_REFUSAL_SOURCE_MAX);
    if (r->order_no != NULL && !gate_order_no_valid(r->order_no, strlen(r->order_no)))
        return og_error_set(err, OG_ERR_ARG, false,
                            "invalid order number (1 to %d characters of A-Z a-z 0-9 . _ : -); "
                            "pass none instead",
                            GATE_ORDER_NO_MAX);
    if (r->txn_no != NULL && !gate_txn_no_valid(r->txn_no, strlen(r->txn_no)))
        return og_error_set(err, OG_ERR_ARG, false,
                            "invalid transaction number (1 to %d characters of A-Z a-z 0-9 . _ : "
                            "-); pass none instead",
                            GATE_TXN_NO_MAX);
    if (r->amount_cents < 0)
        return og_error_set(err, OG_ERR_ARG, false, "amount must be positive or 0 (unknown)");
    if (r->reason == NULL || r->reason[strspn(r->reason, " \t\r\n")] == '\0')
        return og_error_set(err, OG_ERR_ARG, false, "the reason of a refusal is required");
    if (r->message == NULL && r->message_len > 0)
        return og_error_set(err, OG_ERR_ARG, false, "message bytes are missing");
    gate_escape(reason, sizeof(reason), r->reason, strlen(r->reason), GATE_REFUSAL_REASON_MAX);
    /* Whole (up to the bound): the database keys an unnamed record by all of it. */
    message = r->message != NULL ? malloc(GATE_REFUSAL_MESSAGE_SEND_MAX + 1) : NULL;
    if (r->message != NULL && message == NULL)
        return og_error_set(err, OG_ERR_NOMEM, false, "out of memory for a refused message");
    if (message != NULL)
        gate_escape(message, GATE_REFUSAL_MESSAGE_SEND_MAX + 1, r->message, r->message_len,
                    GATE_REFUSAL_MESSAGE_SEND_MAX);
    snprintf(amount, sizeof(amount), "%" PRId64, r->amount_cents);
    params[0] = r->source;
    params[1] = r->order_no;
    params[2] = r->txn_no;
    params[3] = r->amount_cents > 0 ? amount : NULL;
    params[4] = reason;
    params[5] = r->message != NULL ? message : NULL;
    st = db_call(db, &gate_stmt_refused, params, &res, err);
    if (st == OG_OK)
        st = gate_check_shape(res, 3, 1, "record_payment_refused", err);
    if (st == OG_OK) {
        const char *outcome = PQgetvalue(res, 0, 0);
        if (strcmp(outcome, "recorded") != 0 && strcmp(outcome, "duplicate") != 0)
            st =
                og_error_set(err, OG_ERR_INTERNAL, false,
                             "record_payment_refused answered unexpected outcome '%.64s'", outcome);
        else {
            out->recorded = strcmp(outcome, "recorded") == 0;
            out->exception_id = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
            snprintf(out->key, sizeof(out->key), "%s", PQgetvalue(res, 0, 2));
        }
    }
    PQclear(res);
    free(message);
    return st;
}

static const char *const gate_refund_words[GATE_REFUND_RESULT_COUNT] = {
    [GATE_REFUND_REFUNDED] = "refunded",
    [GATE_REFUND_MANUAL_REVIEW] = "manual_review",
    [GATE_REFUND_DUPLICATE] = "duplicate",
    [GATE_REFUND_CONFLICT] = "conflict",
    [GATE_REFUND_ALREADY_REFUNDED] = "already_refunded",
    [GATE_REFUND_NOT_REQUESTED] = "not_requested",
    [GATE_REFUND_NOT_FOUND] = "not_found",
};

const char *gate_refund_result_str(enum gate_refund_result r)
{
    return r >= 0 && r < GATE_REFUND_RESULT_COUNT ? gate_refund_words[r] : "unknown";
}

enum og_status gate_record_refund(struct db *db, const char *txn_no, const char *refund_ref,
                                  bool succeeded, struct gate_refund_outcome *out,
                                  struct og_error *err)
{
    const char *params[3];
    PGresult *res = NULL;
    enum og_status st;

    memset(out, 0, sizeof(*out));
    if (txn_no == NULL || !gate_txn_no_valid(txn_no, strlen(txn_no)))
        return og_error_set(err, OG_ERR_ARG, false,
                            "txn_no must be 1 to %d characters of A-Z a-z 0-9 . _ : -",
                            GATE_TXN_NO_MAX);
    if (refund_ref == NULL || !gate_txn_no_valid(refund_ref, strlen(refund_ref)))
        return og_error_set(err, OG_ERR_ARG, false,
                            "refund_ref must be 1 to %d characters of A-Z a-z 0-9 . _ : -",
                            GATE_TXN_NO_MAX);
    params[0] = txn_no;
    params[1] = refund_ref;
    params[2] = succeeded ? "succeeded" : "failed";
    st = db_call(db, &gate_stmt_refund, params, &res, err);
    if (st == OG_OK)
        st = gate_check_shape(res, 4, 1, "record_refund", err);
    if (st == OG_OK) {
        const char *word = PQgetvalue(res, 0, 0);
        int found = -1;

        for (int i = 0; i < GATE_REFUND_RESULT_COUNT && found < 0; i++)
            if (strcmp(word, gate_refund_words[i]) == 0)
                found = i;
        if (found < 0) {
            st = og_error_set(err, OG_ERR_INTERNAL, false,
                              "record_refund answered unexpected result '%.64s'", word);
        } else {
            out->result = (enum gate_refund_result)found;
            out->exception_id =
                PQgetisnull(res, 0, 1) ? 0 : strtoll(PQgetvalue(res, 0, 1), NULL, 10);
            snprintf(out->state, sizeof(out->state), "%s",
                     PQgetisnull(res, 0, 2) ? "" : PQgetvalue(res, 0, 2));
            snprintf(out->resolution, sizeof(out->resolution), "%s",
                     PQgetisnull(res, 0, 3) ? "" : PQgetvalue(res, 0, 3));
        }
    }
    PQclear(res);
    return st;
}
