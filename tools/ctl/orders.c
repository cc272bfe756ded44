/* ordergatectl place, pay, hold, close, release, amend, deadline: the gate by hand, through the
 * same client (common/gate.h) the services use. Every argument is checked here first, so bad input
 * exits 2 with nothing sent; the gate then decides. */
#include <inttypes.h>
#include <libpq-fe.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/gate.h"
#include "tools/ctl/ctl.h"

#define ORDERS_MAX_ITEMS  1000
#define ORDERS_SKU_MAX    128
#define ORDERS_COUPON_MAX 128
#define ORDERS_MAX_EXPIRE (INT64_C(3650) * 86400)

/* The payment window is measured on the database's clock, the one the gate
 * compares expire_at with, not on this machine's. */
static const struct db_stmt orders_stmt_expire_in = {
    "ctl_expire_in",
    "SELECT to_char((now() + make_interval(secs => $1::double precision)) AT TIME ZONE 'UTC', "
    "'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')",
    1};
static const struct db_stmt orders_stmt_exception = {
    "ctl_exception_of_txn",
    "SELECT id, kind, resolution, state FROM ordergate.exceptions WHERE txn_no = $1", 1};

static enum og_status orders_check_order_no(const struct opt_args *a, const char **order_no,
                                            struct og_error *err)
{
    *order_no = a->pos[0];
    if (!gate_order_no_valid(*order_no, strlen(*order_no)))
        return og_error_set(err, OG_ERR_ARG, false,
                            "invalid order number '%s' (1 to %d characters of A-Z a-z 0-9 . _ : -)",
                            *order_no, GATE_ORDER_NO_MAX);
    return OG_OK;
}

static json_t *orders_result(const char *command, const char *order_no)
{
    json_t *o = json_object();

    if (o != NULL) {
        ctl_json_set(o, "command", json_string(command));
        ctl_json_set(o, "ok", json_true());
        ctl_json_set(o, "order_no", json_string(order_no));
    }
    return o;
}

static json_t *orders_status_json(enum order_status status)
{
    return status == ORDER_STATUS_NONE ? json_null() : json_string(order_status_str(status));
}

/* Sets shown[key] to the amount src[amount_key] in its currency (src's "currency"; none: the
 * default currency, shown as minor units), for text output. */
static void orders_money_field(json_t *shown, const char *key, const json_t *src,
                               const char *amount_key, char *buf, size_t size)
{
    const char *currency = ctl_json_str(src, "currency");

    ctl_format_money(json_integer_value(json_object_get(src, amount_key)), currency, buf, size);
    if (currency == NULL)
        snprintf(buf + strlen(buf), size - strlen(buf), " (minor units, default currency)");
    ctl_json_set(shown, key, json_string(buf));
}

/* ---- place ------------------------------------------------------------- */

/* One --item SKU:QTY. The last colon splits, so a SKU may contain colons. */
static enum og_status orders_parse_item(const char *arg, json_t *items, struct og_error *err)
{
    const char *colon = strrchr(arg, ':');
    size_t sku_len = colon != NULL ? (size_t)(colon - arg) : 0;
    char sku[ORDERS_SKU_MAX + 1];
    int64_t qty;
    struct og_error inner = {0};
    json_t *line;

    if (colon == NULL || sku_len == 0 || colon[1] == '\0')
        return og_error_set(err, OG_ERR_ARG, false, "--item '%s': expected SKU:QTY (e.g. BOOK-1:2)",
                            arg);
    if (sku_len > ORDERS_SKU_MAX)
        return og_error_set(err, OG_ERR_ARG, false, "--item: SKU longer than %d characters",
                            ORDERS_SKU_MAX);
    memcpy(sku, arg, sku_len);
    sku[sku_len] = '\0';
    for (size_t i = 0; i < sku_len; i++)
        if ((unsigned char)sku[i] < 0x20 || sku[i] == ' ')
            return og_error_set(err, OG_ERR_ARG, false,
                                "--item '%s': SKU contains a blank or control character", arg);
    if (parse_int64("qty", colon + 1, 1, INT_MAX, &qty, &inner) != OG_OK)
        return og_error_set(err, OG_ERR_ARG, false,
                            "--item '%s': quantity must be a whole number from 1 to %d", arg,
                            INT_MAX);
    line = json_object();
    if (line == NULL)
        return og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
    ctl_json_set(line, "sku", json_string(sku));
    ctl_json_set(line, "qty", json_integer(qty));
    json_array_append_new(items, line);
    return OG_OK;
}

/* Every --item line as a JSON array (*items) and its compact text (*items_json): both the
 * caller's to free, also after an error. */
static enum og_status orders_parse_items(const struct opt_args *a, json_t **items,
                                         char **items_json, struct og_error *err)
{
    enum og_status st = OG_OK;

    *items_json = NULL;
    *items = json_array();
    if (*items == NULL)
        return og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
    for (int i = 0; i < opt_count(a, "item") && st == OG_OK; i++)
        st = orders_parse_item(opt_nth(a, "item", i), *items, err);
    if (st != OG_OK)
        return st;
    *items_json = json_dumps(*items, JSON_COMPACT);
    if (*items_json == NULL)
        return og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
    return OG_OK;
}

/* --expire-in: seconds ("600") or a duration ("10m"); 0 = due now. */
static enum og_status orders_parse_expire_in(const char *s, int64_t *seconds, struct og_error *err)
{
    return parse_duration("--expire-in", s, 0, ORDERS_MAX_EXPIRE, seconds, err);
}

static enum og_status place_run(struct ctl *ctl, const struct opt_args *a, json_t **result,
                                struct og_error *err)
{
    const char *order_no, *coupon = opt_arg(a, "coupon");
    const char *in = opt_arg(a, "expire-in"), *at = opt_arg(a, "expire-at");
    const char *currency = opt_arg(a, "currency");
    bool allow_partial = opt_flag(a, "allow-partial");
    int nitems = opt_count(a, "item");
    int64_t amount = 0, in_s = 0, at_ms = 0;
    char expire[40] = "", secs[24];
    char *items_json = NULL;
    json_t *items = NULL, *out = NULL;
    const char *params[1];
    PGresult *res = NULL;
    enum gate_outcome outcome;
    struct db *db;
    enum og_status st;

    st = orders_check_order_no(a, &order_no, err);
    if (st != OG_OK)
        return st;
    if (opt_arg(a, "amount") == NULL)
        return og_error_set(err, OG_ERR_ARG, false, "--amount CENTS is required");
    st = ctl_parse_cents("--amount", opt_arg(a, "amount"), &amount, err);
    if (st != OG_OK)
        return st;
    if (nitems == 0)
        return og_error_set(err, OG_ERR_ARG, false, "at least one --item SKU:QTY is required");
    if (nitems > ORDERS_MAX_ITEMS)
        return og_error_set(err, OG_ERR_ARG, false, "at most %d --item lines", ORDERS_MAX_ITEMS);
    if (coupon != NULL && (*coupon == '\0' || strlen(coupon) > ORDERS_COUPON_MAX))
        return og_error_set(err, OG_ERR_ARG, false, "--coupon must be 1 to %d characters",
                            ORDERS_COUPON_MAX);
    if (currency != NULL) {
        st = ctl_check_currency("--currency", currency, err);
        if (st != OG_OK)
            return st;
    }
    if ((in == NULL) == (at == NULL))
        return og_error_set(err, OG_ERR_ARG, false,
                            "give exactly one of --expire-in SECONDS and --expire-at TIMESTAMP");
    if (in != NULL)
        st = orders_parse_expire_in(in, &in_s, err);
    else
        st = ctl_parse_time("--expire-at", at, &at_ms, err);
    if (st != OG_OK)
        return st;

    st = orders_parse_items(a, &items, &items_json, err);
    if (st != OG_OK)
        goto out;

    db = ctl_db(ctl, err);
    if (db == NULL) {
        st = err->status;
        goto out;
    }
    if (in != NULL) {
        snprintf(secs, sizeof(secs), "%" PRId64, in_s);
        params[0] = secs;
        st = db_call(db, &orders_stmt_expire_in, params, &res, err);
        if (st != OG_OK)
            goto out;
        snprintf(expire, sizeof(expire), "%s", PQgetvalue(res, 0, 0));
    } else {
        clock_format_iso(at_ms, expire, sizeof(expire));
    }
    struct gate_order order = {.order_no = order_no,
                               .amount_cents = amount,
                               .items_json = items_json,
                               .coupon_id = coupon,
                               .expire_at = expire,
                               .currency = currency,
                               .allow_partial = allow_partial};
    st = gate_order_place(db, &order, &outcome, err);
    if (st != OG_OK)
        goto out;

    out = orders_result("place", order_no);
    if (out == NULL) {
        st = og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
        goto out;
    }
    ctl_json_set(out, "outcome", json_string(gate_outcome_str(outcome)));
    ctl_json_set(out, "amount_cents", json_integer(amount));
    /* null: the database's default_currency */
    ctl_json_set(out, "currency", ctl_json_str_or_null(currency));
    ctl_json_set(out, "allow_partial", json_boolean(allow_partial));
    ctl_json_set(out, "items", json_incref(items));
    ctl_json_set(out, "coupon_id", ctl_json_str_or_null(coupon));
    ctl_json_set(out, "expire_at", json_string(expire));
    *result = out;
out:
    PQclear(res);
    free(items_json);
    json_decref(items);
    return st;
}

static void place_text(const json_t *r, FILE *out)
{
    static const char *const keys[] = {"order_no",  "outcome",   "amount", "parts",
                                       "coupon_id", "expire_at", NULL};
    const json_t *items = json_object_get(r, "items");
    const json_t *line;
    json_t *shown = json_copy((json_t *)r);
    char money[64];
    size_t i;

    if (shown == NULL)
        return;
    orders_money_field(shown, "amount", r, "amount_cents", money, sizeof(money));
    ctl_json_set(shown, "parts",
                 json_string(json_is_true(json_object_get(r, "allow_partial")) ? "allowed" : "no"));
    ctl_print_fields(out, shown, keys);
    json_decref(shown);
    json_array_foreach(items, i, line)
    {
        fprintf(out, "%-12s  %s x %" JSON_INTEGER_FORMAT "\n", i == 0 ? "items" : "",
                ctl_json_str(line, "sku"), json_integer_value(json_object_get(line, "qty")));
    }
}

static const struct opt place_opts[] = {
    {"amount", "CENTS", OPT_ARG,
     "order total in minor units of its currency (> 0: 1250 is 12.50 EUR, 1250 JPY)", NULL, 0, 0},
    {"currency", "CODE", OPT_ARG, "ISO 4217 code of the order (default: default_currency)", NULL, 0,
     0},
    {"allow-partial", NULL, 0, "the order may be paid in parts (gift card + card)", NULL, 0, 0},
    {"item", "SKU:QTY", OPT_ARG | OPT_REPEAT, "an order line; repeat for more (>= 1)", NULL, 0, 0},
    {"coupon", "ID", OPT_ARG, "coupon to lock for the order", NULL, 0, 0},
    {"expire-in", "SECONDS", OPT_ARG, "payment window from now on the database clock (600, or 10m)",
     NULL, 0, 0},
    {"expire-at", "TIMESTAMP", OPT_ARG, "payment deadline, RFC 3339 with zone", NULL, 0, 0},
    {NULL, NULL, 0, NULL, NULL, 0, 0},
};

const struct ctl_command ctl_cmd_place = {
    .name = "place",
    .usage = "place ORDER --amount CENTS --item SKU:QTY [--item ...] [--coupon ID]\n"
             "       [--currency CODE] [--allow-partial] (--expire-in SECONDS | --expire-at "
             "TIMESTAMP)",
    .summary = "place an order: reserve stock, lock the coupon (ordergate.place_order)",
    .details = "Outcomes: placed | duplicate (order number exists: nothing changes) |\n"
               "out_of_stock | coupon_unavailable (nothing changes). An unknown --currency is\n"
               "refused by the database, nothing written.\n",
    .opts = place_opts,
    .min_pos = 1,
    .pos_name = "ORDER",
    .max_pos = 1,
    .run = place_run,
    .text = place_text,
};

/* ---- pay --------------------------------------------------------------- */

static enum og_status pay_run(struct ctl *ctl, const struct opt_args *a, json_t **result,
                              struct og_error *err)
{
    const char *order_no, *txn = opt_arg(a, "txn");
    const char *channel = opt_arg(a, "channel") ? opt_arg(a, "channel") : "manual";
    const char *currency = opt_arg(a, "currency"), *charge = opt_arg(a, "charge");
    const char *operator_name = opt_arg(a, "operator"), *reason = opt_arg(a, "reason");
    struct gate_payment_result pr;
    int64_t amount = 0;
    json_t *out = NULL, *exc = NULL;
    const char *params[1];
    PGresult *res = NULL;
    struct db *db;
    enum og_status st;

    st = orders_check_order_no(a, &order_no, err);
    if (st != OG_OK)
        return st;
    if (txn == NULL)
        return og_error_set(err, OG_ERR_ARG, false,
                            "--txn TXN is required (the channel's transaction number)");
    if (!gate_txn_no_valid(txn, strlen(txn)))
        return og_error_set(err, OG_ERR_ARG, false,
                            "--txn '%s': 1 to %d characters of A-Z a-z 0-9 . _ : -", txn,
                            GATE_TXN_NO_MAX);
    if (opt_arg(a, "amount") == NULL)
        return og_error_set(err, OG_ERR_ARG, false, "--amount CENTS is required");
    st = ctl_parse_cents("--amount", opt_arg(a, "amount"), &amount, err);
    if (st != OG_OK)
        return st;
    st = ctl_check_text("--channel", channel, 64, err);
    if (st != OG_OK)
        return st;
    if (currency != NULL && (st = ctl_check_currency("--currency", currency, err)) != OG_OK)
        return st;
    if (charge != NULL && !gate_charge_ref_valid(charge, strlen(charge)))
        return og_error_set(err, OG_ERR_ARG, false,
                            "--charge '%s': 1 to %d characters of A-Z a-z 0-9 . _ : -", charge,
                            GATE_CHARGE_REF_MAX);
    /* A payment taken by staff says who and why, and is a manual one. */
    if ((operator_name == NULL) != (reason == NULL))
        return og_error_set(err, OG_ERR_ARG, false,
                            "give both --operator NAME and --reason TEXT (a payment taken by "
                            "staff), or neither");
    if (operator_name != NULL) {
        st = ctl_check_text("--operator", operator_name, GATE_OPERATOR_MAX, err);
        if (st == OG_OK)
            st = ctl_check_text("--reason", reason, GATE_REASON_MAX, err);
        if (st != OG_OK)
            return st;
        if (strcmp(channel, "manual") != 0)
            return og_error_set(err, OG_ERR_ARG, false,
                                "a payment taken by staff (--operator) has --channel manual, "
                                "got '%s'",
                                channel);
    }

    db = ctl_db(ctl, err);
    if (db == NULL)
        return err->status;
    struct gate_payment payment = {.order_no = order_no,
                                   .txn_no = txn,
                                   .amount_cents = amount,
                                   .channel = channel,
                                   .currency = currency,
                                   .charge_ref = charge,
                                   .operator_name = operator_name,
                                   .reason = reason};
    st = gate_payment_claim(db, &payment, &pr, err);
    if (st != OG_OK)
        return st;
    /* A payment that did not win has an exception row (late, double,
     * mismatch, unknown order): name it, the operator's next step. */
    params[0] = txn;
    st = db_call(db, &orders_stmt_exception, params, &res, err);
    if (st != OG_OK)
        goto out;
    if (PQntuples(res) == 1) {
        exc = json_object();
        if (exc != NULL) {
            ctl_json_set(exc, "id", json_integer(strtoll(PQgetvalue(res, 0, 0), NULL, 10)));
            ctl_json_set(exc, "kind", json_string(PQgetvalue(res, 0, 1)));
            ctl_json_set(exc, "resolution", json_string(PQgetvalue(res, 0, 2)));
            ctl_json_set(exc, "state", json_string(PQgetvalue(res, 0, 3)));
        }
    }
    out = orders_result("pay", order_no);
    if (out == NULL) {
        st = og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
        goto out;
    }
    ctl_json_set(out, "txn_no", json_string(txn));
    ctl_json_set(out, "amount_cents", json_integer(amount));
    ctl_json_set(out, "channel", json_string(channel));
    /* null: the order's currency */
    ctl_json_set(out, "currency", ctl_json_str_or_null(currency));
    ctl_json_set(out, "charge_ref", ctl_json_str_or_null(charge));
    ctl_json_set(out, "operator", ctl_json_str_or_null(operator_name));
    ctl_json_set(out, "outcome", json_string(gate_outcome_str(pr.outcome)));
    ctl_json_set(out, "status", orders_status_json(pr.status));
    ctl_json_set(out, "first_outcome",
                 pr.outcome == GATE_DUPLICATE ? json_string(gate_outcome_str(pr.first_outcome))
                                              : json_null());
    ctl_json_set(out, "exception", exc != NULL ? json_incref(exc) : json_null());
    *result = out;
out:
    json_decref(exc);
    PQclear(res);
    return st;
}

static void pay_text(const json_t *r, FILE *out)
{
    static const char *const keys[] = {"order_no",  "txn_no",  "amount", "charge_ref",
                                       "operator",  "outcome", "status", "first_outcome",
                                       "exception", NULL};
    const json_t *exc = json_object_get(r, "exception");
    json_t *shown = json_copy((json_t *)r);
    char line[256];

    if (shown == NULL)
        return;
    if (ctl_json_str(r, "currency") != NULL)
        orders_money_field(shown, "amount", r, "amount_cents", line, sizeof(line));
    else
        ctl_json_set(shown, "amount",
                     json_sprintf("%" JSON_INTEGER_FORMAT " (minor units, the order's currency)",
                                  json_integer_value(json_object_get(r, "amount_cents"))));
    /* One aligned block: the exception as one line of text. */
    if (json_is_object(exc)) {
        snprintf(line, sizeof(line), "%" JSON_INTEGER_FORMAT " (%s, %s, %s)",
                 json_integer_value(json_object_get(exc, "id")), ctl_json_str(exc, "kind"),
                 ctl_json_str(exc, "resolution"), ctl_json_str(exc, "state"));
        ctl_json_set(shown, "exception", json_string(line));
    }
    ctl_print_fields(out, shown, keys);
    json_decref(shown);
}

static const struct opt pay_opts[] = {
    {"txn", "TXN", OPT_ARG, "the channel's transaction number (idempotency key)", NULL, 0, 0},
    {"amount", "CENTS", OPT_ARG, "amount paid in minor units of its currency (> 0)", NULL, 0, 0},
    {"channel", "NAME", OPT_ARG, "payment channel, for refunds (default: manual)", NULL, 0, 0},
    {"currency", "CODE", OPT_ARG,
     "ISO 4217 code of the payment (default: the order's; another is currency_mismatch)", NULL, 0,
     0},
    {"charge", "REF", OPT_ARG, "the pending charge this payment captures (charge begin)", NULL, 0,
     0},
    {"operator", "NAME", OPT_ARG, "staff member who took the payment (with --reason)", NULL, 0, 0},
    {"reason", "TEXT", OPT_ARG, "why staff took it (cash at the counter; with --operator)", NULL, 0,
     0},
    {NULL, NULL, 0, NULL, NULL, 0, 0},
};

const struct ctl_command ctl_cmd_pay = {
    .name = "pay",
    .usage = "pay ORDER --txn TXN --amount CENTS [--channel NAME] [--currency CODE]\n"
             "       [--charge REF] [--operator NAME --reason TEXT]",
    .summary = "apply a payment callback by hand (ordergate.claim_payment)",
    .details = "Outcomes: paid | duplicate (txn seen before: nothing changes; first_outcome is\n"
               "the first call's outcome) | partial (a part of an --allow-partial order: it stays\n"
               "pending) | overpaid (paid; the excess is an exception) | late_payment |\n"
               "double_payment | amount_mismatch | currency_mismatch | not_found. All but paid,\n"
               "partial and duplicate record an exception, shown with its id. With --operator and\n"
               "--reason the payment was taken by staff: channel manual, logged as\n"
               "manual_payment by the operator.\n",
    .opts = pay_opts,
    .min_pos = 1,
    .pos_name = "ORDER",
    .max_pos = 1,
    .run = pay_run,
    .text = pay_text,
};

/* ---- hold -------------------------------------------------------------- */

static enum og_status hold_run(struct ctl *ctl, const struct opt_args *a, json_t **result,
                               struct og_error *err)
{
    const char *order_no;
    int64_t seconds = 0;
    enum gate_outcome outcome;
    char expire[64] = "";
    json_t *out;
    struct db *db;
    enum og_status st;

    st = orders_check_order_no(a, &order_no, err);
    if (st != OG_OK)
        return st;
    if (opt_arg(a, "seconds") == NULL)
        return og_error_set(err, OG_ERR_ARG, false, "--seconds N is required");
    st = parse_int64("--seconds", opt_arg(a, "seconds"), 1, INT_MAX, &seconds, err);
    if (st != OG_OK)
        return st;
    db = ctl_db(ctl, err);
    if (db == NULL)
        return err->status;
    st = gate_hold(db, order_no, (int)seconds, &outcome, expire, sizeof(expire), err);
    if (st != OG_OK)
        return st;
    out = orders_result("hold", order_no);
    if (out == NULL)
        return og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
    ctl_json_set(out, "outcome", json_string(gate_outcome_str(outcome)));
    ctl_json_set(out, "expire_at", ctl_json_pg_time(expire));
    *result = out;
    return OG_OK;
}

static void hold_text(const json_t *r, FILE *out)
{
    static const char *const keys[] = {"order_no", "outcome", "expire_at", NULL};

    ctl_print_fields(out, r, keys);
}

static const struct opt hold_opts[] = {
    {"seconds", "N", OPT_ARG,
     "push expire_at to now + N (never earlier, at most the original expiry + max_hold_seconds)",
     NULL, 0, 0},
    {NULL, NULL, 0, NULL, NULL, 0, 0},
};

const struct ctl_command ctl_cmd_hold = {
    .name = "hold",
    .usage = "hold ORDER --seconds N",
    .summary = "the user is on the payment page: hold the order (ordergate.hold_for_payment)",
    .details = "Outcomes: held | not_pending | not_found. N above the database's\n"
               "max_hold_seconds setting is refused (exit 2).\n",
    .opts = hold_opts,
    .min_pos = 1,
    .pos_name = "ORDER",
    .max_pos = 1,
    .run = hold_run,
    .text = hold_text,
};

/* ---- close ------------------------------------------------------------- */

/* --operator (and --reason when reason_what is not NULL) of a staff act, both required. */
static enum og_status orders_check_staff(const struct opt_args *a, const char *act,
                                         const char *reason_what, struct og_error *err)
{
    const char *op = opt_arg(a, "operator"), *reason = opt_arg(a, "reason");
    enum og_status st;

    if (op == NULL)
        return og_error_set(err, OG_ERR_ARG, false, "--operator NAME is required: %s names who",
                            act);
    st = ctl_check_text("--operator", op, GATE_OPERATOR_MAX, err);
    if (st != OG_OK || reason_what == NULL)
        return st;
    if (reason == NULL)
        return og_error_set(err, OG_ERR_ARG, false, "--reason TEXT is required: %s", reason_what);
    return ctl_check_text("--reason", reason, GATE_REASON_MAX, err);
}

/* A staff act that takes a pending order out of the gate (close, release): --operator and
 * --reason checked (act, why: for the messages), the gate call, and the answer with its
 * outcome, the order's status, who and why. */
typedef enum og_status (*orders_staff_fn)(struct db *db, const char *order_no,
                                          const char *operator_name, const char *reason,
                                          enum gate_outcome *outcome, enum order_status *status,
                                          struct og_error *err);

static enum og_status orders_staff_run(struct ctl *ctl, const struct opt_args *a,
                                       const char *command, const char *act, const char *why,
                                       orders_staff_fn fn, json_t **result, struct og_error *err)
{
    const char *order_no, *op = opt_arg(a, "operator"), *reason = opt_arg(a, "reason");
    enum gate_outcome outcome;
    enum order_status status;
    json_t *out;
    struct db *db;
    enum og_status st;

    st = orders_check_order_no(a, &order_no, err);
    if (st == OG_OK)
        st = orders_check_staff(a, act, why, err);
    if (st != OG_OK)
        return st;
    db = ctl_db(ctl, err);
    if (db == NULL)
        return err->status;
    st = fn(db, order_no, op, reason, &outcome, &status, err);
    if (st != OG_OK)
        return st;
    out = orders_result(command, order_no);
    if (out == NULL)
        return og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
    ctl_json_set(out, "outcome", json_string(gate_outcome_str(outcome)));
    ctl_json_set(out, "status", orders_status_json(status));
    ctl_json_set(out, "operator", json_string(op));
    ctl_json_set(out, "reason", json_string(reason));
    *result = out;
    return OG_OK;
}

static enum og_status close_run(struct ctl *ctl, const struct opt_args *a, json_t **result,
                                struct og_error *err)
{
    return orders_staff_run(ctl, a, "close", "a manual close", "a manual close says why",
                            gate_close, result, err);
}

static void close_text(const json_t *r, FILE *out)
{
    static const char *const keys[] = {"order_no", "outcome", "status", NULL};

    ctl_print_fields(out, r, keys);
}

static const struct opt close_opts[] = {
    {"operator", "NAME", OPT_ARG, "who closes the order (required; recorded as the actor)", NULL, 0,
     0},
    {"reason", "TEXT", OPT_ARG, "why (required; recorded in the status log)", NULL, 0, 0},
    {NULL, NULL, 0, NULL, NULL, 0, 0},
};

const struct ctl_command ctl_cmd_close = {
    .name = "close",
    .usage = "close ORDER --operator NAME --reason TEXT",
    .summary = "close a pending order by hand, source 'manual' (ordergate.close_order)",
    .details = "Same side effects as a timeout cancel (stock and coupon returned, one status log\n"
               "row, one outbox event). Outcomes: cancelled | already_cancelled | already_paid |\n"
               "not_found. A paid order is never closed.\n",
    .opts = close_opts,
    .min_pos = 1,
    .pos_name = "ORDER",
    .max_pos = 1,
    .run = close_run,
    .text = close_text,
};

/* ---- release, amend, deadline: more staff acts on a pending order ---------- */

static enum og_status release_run(struct ctl *ctl, const struct opt_args *a, json_t **result,
                                  struct og_error *err)
{
    return orders_staff_run(ctl, a, "release", "a release",
                            "a release says why (cash on delivery, invoice)", gate_order_release,
                            result, err);
}

static const struct opt release_opts[] = {
    {"operator", "NAME", OPT_ARG, "who releases the order (required; recorded as the actor)", NULL,
     0, 0},
    {"reason", "TEXT", OPT_ARG, "why (required; recorded in the status log and the event)", NULL, 0,
     0},
    {NULL, NULL, 0, NULL, NULL, 0, 0},
};

const struct ctl_command ctl_cmd_release = {
    .name = "release",
    .usage = "release ORDER --operator NAME --reason TEXT",
    .summary = "take a pending order out of the gate unpaid (ordergate.release_order)",
    .details = "Staff confirm an order that is paid later or elsewhere (cash on delivery, an\n"
               "invoice): status released, never cancelled afterwards; stock stays reserved and\n"
               "the coupon used. A payment that comes later pays it. Outcomes: released |\n"
               "not_pending (closed: its status is shown) | not_found.\n",
    .opts = release_opts,
    .min_pos = 1,
    .pos_name = "ORDER",
    .max_pos = 1,
    .run = release_run,
    .text = close_text,
};

static enum og_status amend_run(struct ctl *ctl, const struct opt_args *a, json_t **result,
                                struct og_error *err)
{
    const char *order_no, *op = opt_arg(a, "operator"), *shop = opt_arg(a, "shop");
    bool gate_only = opt_flag(a, "gate-only");
    int nitems = opt_count(a, "item");
    int64_t amount = 0;
    char *items_json = NULL;
    json_t *items = NULL, *shop_obj = NULL, *out = NULL;
    enum gate_outcome outcome;
    enum order_status status;
    struct db *db;
    enum og_status st;

    st = orders_check_order_no(a, &order_no, err);
    if (st != OG_OK)
        return st;
    if (opt_arg(a, "amount") == NULL)
        return og_error_set(err, OG_ERR_ARG, false,
                            "--amount CENTS is required: the order's amount after the amendment");
    st = ctl_parse_cents("--amount", opt_arg(a, "amount"), &amount, err);
    if (st != OG_OK)
        return st;
    if ((nitems == 0) == !gate_only)
        return og_error_set(err, OG_ERR_ARG, false,
                            "give the order's lines after the amendment (--item SKU:QTY, repeated) "
                            "or --gate-only for an order whose stock the shop keeps, not both");
    if (nitems > ORDERS_MAX_ITEMS)
        return og_error_set(err, OG_ERR_ARG, false, "at most %d --item lines", ORDERS_MAX_ITEMS);
    if (shop != NULL) {
        json_error_t jerr;

        shop_obj = json_loads(shop, JSON_REJECT_DUPLICATES, &jerr);
        if (!json_is_object(shop_obj)) {
            json_decref(shop_obj);
            return og_error_set(err, OG_ERR_ARG, false,
                                "--shop must be a JSON object (the order's own data), got '%.40s'",
                                shop);
        }
    }
    st = orders_check_staff(a, "an amendment", NULL, err);
    if (st != OG_OK)
        goto out;
    st = orders_parse_items(a, &items, &items_json, err);
    if (st != OG_OK)
        goto out;
    db = ctl_db(ctl, err);
    if (db == NULL) {
        st = err->status;
        goto out;
    }
    st = gate_order_amend(db, order_no, amount, items_json, shop, op, &outcome, &status, err);
    if (st != OG_OK)
        goto out;
    out = orders_result("amend", order_no);
    if (out == NULL) {
        st = og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
        goto out;
    }
    ctl_json_set(out, "outcome", json_string(gate_outcome_str(outcome)));
    ctl_json_set(out, "status", orders_status_json(status));
    ctl_json_set(out, "amount_cents", json_integer(amount));
    ctl_json_set(out, "items", json_incref(items));
    ctl_json_set(out, "shop", shop_obj != NULL ? json_incref(shop_obj) : json_null());
    ctl_json_set(out, "operator", json_string(op));
    *result = out;
out:
    free(items_json);
    json_decref(items);
    json_decref(shop_obj);
    return st;
}

static void amend_text(const json_t *r, FILE *out)
{
    static const char *const keys[] = {"order_no", "outcome", "status", "amount_cents", NULL};
    const json_t *line;
    size_t i;

    ctl_print_fields(out, r, keys);
    json_array_foreach(json_object_get(r, "items"), i, line)
    {
        fprintf(out, "%-12s  %s x %" JSON_INTEGER_FORMAT "\n", i == 0 ? "items" : "",
                ctl_json_str(line, "sku"), json_integer_value(json_object_get(line, "qty")));
    }
}

static const struct opt amend_opts[] = {
    {"amount", "CENTS", OPT_ARG, "the order's amount after the amendment, in its currency", NULL, 0,
     0},
    {"item", "SKU:QTY", OPT_ARG | OPT_REPEAT,
     "an order line after the amendment; repeat for more (all of them)", NULL, 0, 0},
    {"gate-only", NULL, 0, "the order has no lines here (the shop keeps its stock)", NULL, 0, 0},
    {"shop", "JSON", OPT_ARG, "the order's own data after the amendment (default: kept)", NULL, 0,
     0},
    {"operator", "NAME", OPT_ARG, "who amends the order (required; kept with the amendment)", NULL,
     0, 0},
    {NULL, NULL, 0, NULL, NULL, 0, 0},
};

const struct ctl_command ctl_cmd_amend = {
    .name = "amend",
    .usage = "amend ORDER --amount CENTS (--item SKU:QTY [--item ...] | --gate-only)\n"
             "       [--shop JSON] --operator NAME",
    .summary = "change a pending order's amount, lines and shop data (ordergate.amend_order)",
    .details = "The lines given replace the order's; stock moves by the difference per SKU.\n"
               "Payments afterwards are judged against the new amount. Every amendment is kept\n"
               "(ordergatectl show lists them). Outcomes: amended | out_of_stock (nothing\n"
               "changed) | not_pending | not_found. An order with lines cannot become gate-only\n"
               "nor the reverse (exit 2).\n",
    .opts = amend_opts,
    .min_pos = 1,
    .pos_name = "ORDER",
    .max_pos = 1,
    .run = amend_run,
    .text = amend_text,
};

static enum og_status deadline_run(struct ctl *ctl, const struct opt_args *a, json_t **result,
                                   struct og_error *err)
{
    const char *order_no, *op = opt_arg(a, "operator");
    const char *in = opt_arg(a, "expire-in"), *at = opt_arg(a, "expire-at");
    int64_t in_s = 0, at_ms = 0;
    char deadline[40] = "", secs[24], expire[64] = "";
    const char *params[1];
    PGresult *res = NULL;
    enum gate_outcome outcome;
    json_t *out;
    struct db *db;
    enum og_status st;

    st = orders_check_order_no(a, &order_no, err);
    if (st != OG_OK)
        return st;
    if ((in == NULL) == (at == NULL))
        return og_error_set(err, OG_ERR_ARG, false,
                            "give exactly one of --expire-in SECONDS and --expire-at TIMESTAMP");
    if (in != NULL)
        st = orders_parse_expire_in(in, &in_s, err);
    else
        st = ctl_parse_time("--expire-at", at, &at_ms, err);
    if (st == OG_OK)
        st = orders_check_staff(a, "a deadline change", NULL, err);
    if (st != OG_OK)
        return st;
    db = ctl_db(ctl, err);
    if (db == NULL)
        return err->status;
    if (in != NULL) {
        snprintf(secs, sizeof(secs), "%" PRId64, in_s);
        params[0] = secs;
        st = db_call(db, &orders_stmt_expire_in, params, &res, err);
        if (st != OG_OK)
            return st;
        snprintf(deadline, sizeof(deadline), "%s", PQgetvalue(res, 0, 0));
        PQclear(res);
    } else {
        clock_format_iso(at_ms, deadline, sizeof(deadline));
    }
    st = gate_order_set_deadline(db, order_no, deadline, op, &outcome, expire, sizeof(expire), err);
    if (st != OG_OK)
        return st;
    out = orders_result("deadline", order_no);
    if (out == NULL)
        return og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
    ctl_json_set(out, "outcome", json_string(gate_outcome_str(outcome)));
    ctl_json_set(out, "expire_at", ctl_json_pg_time(expire));
    ctl_json_set(out, "operator", json_string(op));
    *result = out;
    return OG_OK;
}

static const struct opt deadline_opts[] = {
    {"expire-in", "SECONDS", OPT_ARG,
     "the new deadline from now on the database clock (600, or 10m; 0 = due now)", NULL, 0, 0},
    {"expire-at", "TIMESTAMP", OPT_ARG,
     "the new deadline, RFC 3339 with zone (the past means due now)", NULL, 0, 0},
    {"operator", "NAME", OPT_ARG, "who moves it (required; kept with the change)", NULL, 0, 0},
    {NULL, NULL, 0, NULL, NULL, 0, 0},
};

const struct ctl_command ctl_cmd_deadline = {
    .name = "deadline",
    .usage = "deadline ORDER (--expire-in SECONDS | --expire-at TIMESTAMP) --operator NAME",
    .summary = "move a pending order's deadline, shorter or longer (ordergate.set_deadline)",
    .details = "At most max_deadline_seconds ahead (else exit 2). With schedule_cancels = 1 the\n"
               "cancel message follows. Outcomes: set | not_pending (closed: its deadline is\n"
               "shown) | not_found.\n",
    .opts = deadline_opts,
    .min_pos = 1,
    .pos_name = "ORDER",
    .max_pos = 1,
    .run = deadline_run,
    .text = hold_text,
};
