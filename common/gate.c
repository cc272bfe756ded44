#include "common/gate.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const gate_outcome_words[GATE_OUTCOME_COUNT] = {
    [GATE_UNKNOWN] = "unknown",
    [GATE_CANCELLED] = "cancelled",
    [GATE_ALREADY_CANCELLED] = "already_cancelled",
    [GATE_ALREADY_PAID] = "already_paid",
    [GATE_NOT_DUE] = "not_due",
    [GATE_NOT_FOUND] = "not_found",
    [GATE_PAID] = "paid",
    [GATE_DUPLICATE] = "duplicate",
    [GATE_LATE_PAYMENT] = "late_payment",
    [GATE_DOUBLE_PAYMENT] = "double_payment",
    [GATE_AMOUNT_MISMATCH] = "amount_mismatch",
    [GATE_HELD] = "held",
    [GATE_NOT_PENDING] = "not_pending",
    [GATE_PLACED] = "placed",
    [GATE_OUT_OF_STOCK] = "out_of_stock",
    [GATE_COUPON_UNAVAILABLE] = "coupon_unavailable",
};

/* Statements: each calls one gate function of schema/002_gate.sql. */
static const struct db_stmt gate_stmt_cancel = {
    "og_claim_cancel", "SELECT order_no, outcome, status FROM ordergate.claim_cancel($1::text[], $2)",
    2};
static const struct db_stmt gate_stmt_payment = {
    "og_claim_payment",
    "SELECT outcome, status, first_outcome FROM ordergate.claim_payment($1, $2, $3::bigint, $4)",
    4};
static const struct db_stmt gate_stmt_hold = {
    "og_hold", "SELECT outcome, expire_at FROM ordergate.hold_for_payment($1, $2::int)", 2};
static const struct db_stmt gate_stmt_close = {
    "og_close", "SELECT outcome, status FROM ordergate.close_order($1, $2, $3)", 3};
static const struct db_stmt gate_stmt_place = {
    "og_place",
    "SELECT ordergate.place_order($1, $2::bigint, $3::jsonb, $4, $5::timestamptz)", 5};

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
static enum og_status gate_check_shape(PGresult *res, int ncols, int nrows_exact,
                                       const char *fn, struct og_error *err)
{
    if (PQnfields(res) != ncols)
        return og_error_set(err, OG_ERR_INTERNAL, false, "%s returned %d columns, expected %d", fn,
                            PQnfields(res), ncols);
    if (nrows_exact >= 0 && PQntuples(res) != nrows_exact)
        return og_error_set(err, OG_ERR_INTERNAL, false, "%s returned %d rows, expected %d", fn,
                            PQntuples(res), nrows_exact);
    return OG_OK;
}

enum og_status gate_claim_cancel(struct db *db, const char *const *order_nos, size_t n,
                                 enum gate_source source, struct gate_cancel_row *rows,
                                 size_t *nrows, struct og_error *err)
{
    char *array = NULL;
    size_t cap, used = 0;
    PGresult *res = NULL;
    enum og_status st = OG_OK;
    const char *params[2];

    *nrows = 0;
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
            return st;
    }
    /* Valid order numbers contain no quote, backslash, comma or brace, so
     * each element can be written into the array literal verbatim, quoted. */
    cap = 3 + n * (GATE_ORDER_NO_MAX + 3);
    array = malloc(cap);
    if (array == NULL)
        return og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
    array[used++] = '{';
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(order_nos[i]);
        if (i > 0)
            array[used++] = ',';
        array[used++] = '"';
        memcpy(array + used, order_nos[i], len);
        used += len;
        array[used++] = '"';
    }
    array[used++] = '}';
    array[used] = '\0';

    params[0] = array;
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
        row->outcome = gate_outcome_parse(PQgetvalue(res, i, 1));
        row->status = PQgetisnull(res, i, 2) ? ORDER_STATUS_NONE
                                             : order_status_parse(PQgetvalue(res, i, 2));
    }
    *nrows = (size_t)PQntuples(res);
out:
    PQclear(res);
    free(array);
    return st;
}

enum og_status gate_claim_payment(struct db *db, const char *order_no, const char *txn_no,
                                  int64_t amount_cents, const char *channel,
                                  struct gate_payment_result *out, struct og_error *err)
{
    char amount[24];
    const char *params[4];
    PGresult *res = NULL;
    enum og_status st;

    memset(out, 0, sizeof(*out));
    st = gate_check_order_no(order_no, err);
    if (st != OG_OK)
        return st;
    if (txn_no == NULL || !gate_txn_no_valid(txn_no, strlen(txn_no)))
        return og_error_set(err, OG_ERR_ARG, false,
                            "invalid transaction number (1 to %d characters of A-Z a-z 0-9 . _ : -)",
                            GATE_TXN_NO_MAX);
    if (amount_cents <= 0)
        return og_error_set(err, OG_ERR_ARG, false, "amount must be positive, got %" PRId64,
                            amount_cents);
    if (channel == NULL || *channel == '\0' || strlen(channel) > 64)
        return og_error_set(err, OG_ERR_ARG, false, "payment channel must be 1 to 64 characters");
    snprintf(amount, sizeof(amount), "%" PRId64, amount_cents);
    params[0] = order_no;
    params[1] = txn_no;
    params[2] = amount;
    params[3] = channel;
    st = db_call(db, &gate_stmt_payment, params, &res, err);
    if (st == OG_OK)
        st = gate_check_shape(res, 3, 1, "claim_payment", err);
    if (st == OG_OK) {
        out->outcome = gate_outcome_parse(PQgetvalue(res, 0, 0));
        out->status = order_status_parse(PQgetvalue(res, 0, 1));
        out->first_outcome = PQgetisnull(res, 0, 2) ? GATE_UNKNOWN
                                                    : gate_outcome_parse(PQgetvalue(res, 0, 2));
    }
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
    st = gate_check_order_no(order_no, err);
    if (st != OG_OK)
        return st;
    if (seconds <= 0)
        return og_error_set(err, OG_ERR_ARG, false, "hold seconds must be positive, got %d",
                            seconds);
    snprintf(secs, sizeof(secs), "%d", seconds);
    params[0] = order_no;
    params[1] = secs;
    st = db_call(db, &gate_stmt_hold, params, &res, err);
    if (st == OG_OK)
        st = gate_check_shape(res, 2, 1, "hold_for_payment", err);
    if (st == OG_OK) {
        *outcome = gate_outcome_parse(PQgetvalue(res, 0, 0));
        if (expire_at != NULL && expire_at_size > 0)
            snprintf(expire_at, expire_at_size, "%s", PQgetvalue(res, 0, 1));
    }
    PQclear(res);
    return st;
}

enum og_status gate_close(struct db *db, const char *order_no, const char *operator_name,
                          const char *reason, enum gate_outcome *outcome,
                          enum order_status *status, struct og_error *err)
{
    const char *params[3];
    PGresult *res = NULL;
    enum og_status st;

    *outcome = GATE_UNKNOWN;
    *status = ORDER_STATUS_NONE;
    st = gate_check_order_no(order_no, err);
    if (st != OG_OK)
        return st;
    if (operator_name == NULL || *operator_name == '\0')
        return og_error_set(err, OG_ERR_ARG, false, "operator is required for a manual close");
    if (reason == NULL || *reason == '\0')
        return og_error_set(err, OG_ERR_ARG, false, "reason is required for a manual close");
    params[0] = order_no;
    params[1] = operator_name;
    params[2] = reason;
    st = db_call(db, &gate_stmt_close, params, &res, err);
    if (st == OG_OK)
        st = gate_check_shape(res, 2, 1, "close_order", err);
    if (st == OG_OK) {
        *outcome = gate_outcome_parse(PQgetvalue(res, 0, 0));
        *status = order_status_parse(PQgetvalue(res, 0, 1));
    }
    PQclear(res);
    return st;
}

enum og_status gate_place(struct db *db, const char *order_no, int64_t amount_cents,
                          const char *items_json, const char *coupon_id, const char *expire_at,
                          enum gate_outcome *outcome, struct og_error *err)
{
    char amount[24];
    const char *params[5];
    PGresult *res = NULL;
    enum og_status st;

    *outcome = GATE_UNKNOWN;
    st = gate_check_order_no(order_no, err);
    if (st != OG_OK)
        return st;
    if (amount_cents <= 0)
        return og_error_set(err, OG_ERR_ARG, false, "amount must be positive, got %" PRId64,
                            amount_cents);
    if (items_json == NULL || *items_json == '\0')
        return og_error_set(err, OG_ERR_ARG, false, "items are required");
    if (expire_at == NULL || *expire_at == '\0')
        return og_error_set(err, OG_ERR_ARG, false, "expire_at is required");
    snprintf(amount, sizeof(amount), "%" PRId64, amount_cents);
    params[0] = order_no;
    params[1] = amount;
    params[2] = items_json;
    params[3] = (coupon_id != NULL && *coupon_id != '\0') ? coupon_id : NULL;
    params[4] = expire_at;
    st = db_call(db, &gate_stmt_place, params, &res, err);
    if (st == OG_OK)
        st = gate_check_shape(res, 1, 1, "place_order", err);
    if (st == OG_OK)
        *outcome = gate_outcome_parse(PQgetvalue(res, 0, 0));
    PQclear(res);
    return st;
}
