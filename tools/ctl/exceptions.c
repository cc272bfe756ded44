/* ordergatectl exceptions: the follow-up queue of payments that did not win
 * (late, double, mismatched, unknown order), and resolving one with a note.
 * Listing: ordergate.exception_list (schema/functions/gate/exception_list.sql);
 * resolving: ordergate.resolve_exception
 * (schema/functions/admin/resolve_exception.sql, role ordergate_admin). */
#include <inttypes.h>
#include <libpq-fe.h>
#include <stdlib.h>
#include <string.h>

#include "tools/ctl/ctl.h"

#define EXC_DEFAULT_LIMIT 50
#define EXC_MAX_LIMIT     10000

static const struct db_stmt exc_stmt_list = {
    "ctl_exception_list",
    "SELECT id, order_no, kind, txn_no, amount_cents, resolution, state, note, created_at, "
    "resolved_at, resolved_by, currency, total FROM ordergate.exception_list($1, $2::int)",
    2};
static const struct db_stmt exc_stmt_resolve = {
    "ctl_exception_resolve", "SELECT ordergate.resolve_exception($1::bigint, $2, $3)", 3};

static enum og_status exc_list_run(struct ctl *ctl, const struct opt_args *a, json_t **result,
                                   struct og_error *err)
{
    static const char *const cols[] = {"id",           "order_no",    "kind",        "txn_no",
                                       "amount_cents", "resolution",  "state",       "note",
                                       "created_at",   "resolved_at", "resolved_by", "currency"};
    const char *state = opt_flag(a, "all") ? "all" : "open";
    int64_t limit = EXC_DEFAULT_LIMIT;
    char limit_s[24];
    const char *params[2];
    PGresult *res = NULL;
    struct db *db;
    enum og_status st;

    if (opt_flag(a, "all") && opt_flag(a, "open"))
        return og_error_set(err, OG_ERR_ARG, false, "give --open or --all, not both");
    if (opt_arg(a, "limit") != NULL) {
        st = parse_int64("--limit", opt_arg(a, "limit"), 1, EXC_MAX_LIMIT, &limit, err);
        if (st != OG_OK)
            return st;
    }
    db = ctl_db(ctl, err);
    if (db == NULL)
        return err->status;
    snprintf(limit_s, sizeof(limit_s), "%" PRId64, limit);
    params[0] = state;
    params[1] = limit_s;
    st = db_call(db, &exc_stmt_list, params, &res, err);
    if (st != OG_OK)
        return st;
    st = ctl_list_json(res, cols, "itttittttttt", "exceptions", "exceptions", result, err);
    if (st == OG_OK) {
        ctl_json_set(*result, "state", json_string(state));
        ctl_json_set(*result, "limit", json_integer(limit));
        ctl_json_set(
            *result, "total",
            json_integer(PQntuples(res) > 0 ? strtoll(PQgetvalue(res, 0, 12), NULL, 10) : 0));
    }
    PQclear(res);
    return st;
}

static void exc_list_text(const json_t *r, FILE *out)
{
    static const char *const heads[] = {"ID",    "CREATED_AT",  "ORDER",    "KIND",
                                        "TXN",   "AMOUNT",      "CURRENCY", "RESOLUTION",
                                        "STATE", "RESOLVED_BY", "NOTE"};
    static const char *const keys[] = {"id",     "created_at",  "order_no", "kind",
                                       "txn_no", "amount",      "currency", "resolution",
                                       "state",  "resolved_by", "note"};
    json_t *list = json_deep_copy(json_object_get(r, "exceptions"));
    json_t *row;
    size_t i;
    const char *state = ctl_json_str(r, "state");
    const char *what = strcmp(state, "open") == 0 ? "open exceptions" : "exceptions";
    json_int_t total = json_integer_value(json_object_get(r, "total"));

    if (json_array_size(list) == 0) {
        fprintf(out, "no %s\n", what);
        json_decref(list);
        return;
    }
    /* The amount in its currency's unit (12.50, 1250 for JPY); the code has its column. */
    json_array_foreach(list, i, row)
    {
        const json_t *cents = json_object_get(row, "amount_cents");
        const char *currency = ctl_json_str(row, "currency");
        char buf[64];
        size_t n;

        if (!json_is_integer(cents))
            continue;
        ctl_format_money(json_integer_value(cents), currency, buf, sizeof(buf));
        n = strlen(buf);
        if (currency != NULL && n > 4 && buf[n - 4] == ' ' && strcmp(buf + n - 3, currency) == 0)
            buf[n - 4] = '\0';
        ctl_json_set(row, "amount", json_string(buf));
    }
    ctl_table_print_list(out, list, 11, heads, keys);
    fprintf(out, "%zu of %" JSON_INTEGER_FORMAT " %s (newest first)\n", json_array_size(list),
            total, what);
    json_decref(list);
}

static const struct opt exc_list_opts[] = {
    {"open", NULL, 0, "only open exceptions (the default)", NULL, 0, 0},
    {"all", NULL, 0, "open and resolved exceptions", NULL, 0, 0},
    {"limit", "N", OPT_ARG, "show at most N, newest first (default 50, at most 10000)", NULL, 0, 0},
    {NULL, NULL, 0, NULL, NULL, 0, 0},
};

const struct ctl_command ctl_cmd_exceptions = {
    .name = "exceptions",
    .usage = "exceptions [--open | --all] [--limit N]",
    .summary = "list payment exceptions (late, double, overpaid, amount or currency mismatch, "
               "a cancelled order's captured part, unknown order)",
    .details = "Resolution auto_refund: a refund request went to the payment channel through\n"
               "the outbox; check it arrived, then resolve. manual_review: decide, act, resolve.\n",
    .opts = exc_list_opts,
    .min_pos = 0,
    .max_pos = 0,
    .run = exc_list_run,
    .text = exc_list_text,
};

/* ---- resolve ----------------------------------------------------------- */

static enum og_status exc_resolve_run(struct ctl *ctl, const struct opt_args *a, json_t **result,
                                      struct og_error *err)
{
    const char *note = opt_arg(a, "note"), *op = opt_arg(a, "operator");
    int64_t id = 0;
    char id_s[24];
    const char *params[3];
    PGresult *res = NULL;
    json_t *out;
    struct db *db;
    enum og_status st;

    st = parse_int64("exception ID", a->pos[0], 1, INT64_MAX, &id, err);
    if (st != OG_OK)
        return st;
    if (op == NULL)
        return og_error_set(err, OG_ERR_ARG, false, "--operator NAME is required");
    if (note == NULL)
        return og_error_set(err, OG_ERR_ARG, false,
                            "--note TEXT is required: say what was done (refund seen, ...)");
    st = ctl_check_text("--operator", op, 128, err);
    if (st == OG_OK)
        st = ctl_check_text("--note", note, 2000, err);
    if (st != OG_OK)
        return st;
    db = ctl_db(ctl, err);
    if (db == NULL)
        return err->status;
    snprintf(id_s, sizeof(id_s), "%" PRId64, id);
    params[0] = id_s;
    params[1] = op;
    params[2] = note;
    st = db_call(db, &exc_stmt_resolve, params, &res, err);
    if (st != OG_OK) {
        ctl_error_needs_role(err, "resolving", "ordergate_admin");
        return st;
    }
    out = json_object();
    if (out == NULL) {
        PQclear(res);
        return og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
    }
    ctl_json_set(out, "command", json_string("exceptions resolve"));
    ctl_json_set(out, "ok", json_true());
    ctl_json_set(out, "id", json_integer(id));
    ctl_json_set(out, "outcome", json_string(PQgetvalue(res, 0, 0)));
    ctl_json_set(out, "operator", json_string(op));
    ctl_json_set(out, "note", json_string(note));
    PQclear(res);
    *result = out;
    return OG_OK;
}

static void exc_resolve_text(const json_t *r, FILE *out)
{
    static const char *const keys[] = {"id", "outcome", NULL};

    ctl_print_fields(out, r, keys);
}

static const struct opt exc_resolve_opts[] = {
    {"note", "TEXT", OPT_ARG, "what was done (required; appended to the exception's note)", NULL, 0,
     0},
    {"operator", "NAME", OPT_ARG, "who resolves it (required)", NULL, 0, 0},
    {NULL, NULL, 0, NULL, NULL, 0, 0},
};

const struct ctl_command ctl_cmd_exceptions_resolve = {
    .name = "exceptions resolve",
    .usage = "exceptions resolve ID --note TEXT --operator NAME",
    .summary = "mark an exception resolved (outcomes: resolved, already_resolved, not_found)",
    .details = "Needs the database role ordergate_admin. Resolving twice changes nothing the\n"
               "second time (already_resolved).\n",
    .opts = exc_resolve_opts,
    .min_pos = 1,
    .pos_name = "ID",
    .max_pos = 1,
    .run = exc_resolve_run,
    .text = exc_resolve_text,
};
