/* ordergatectl outbox: the events the relay set aside because they can never
 * be published as they are (quarantined, with the reason), and giving one
 * back to the relay once its cause is fixed.
 * Listing: ordergate.outbox_quarantine_list (schema/functions/outbox/outbox_quarantine_list.sql);
 * retrying: ordergate.outbox_release (schema/functions/admin/outbox_release.sql, role
 * ordergate_admin). */
#include <inttypes.h>
#include <libpq-fe.h>
#include <stdlib.h>
#include <string.h>

#include "tools/ctl/ctl.h"

#define OUTBOX_DEFAULT_LIMIT 50
#define OUTBOX_MAX_LIMIT     10000

static const struct db_stmt outbox_stmt_list = {
    "ctl_outbox_quarantine_list",
    "SELECT id, event_type, order_no, created_at, quarantined_at, reason, due_at, "
    "ordergate.outbox_quarantine_count() FROM ordergate.outbox_quarantine_list($1::int)",
    1};
static const struct db_stmt outbox_stmt_release = {
    "ctl_outbox_release", "SELECT ordergate.outbox_release($1::bigint)", 1};

static enum og_status outbox_list_run(struct ctl *ctl, const struct opt_args *a, json_t **result,
                                      struct og_error *err)
{
    static const char *const cols[] = {
        "id", "event_type", "order_no", "created_at", "quarantined_at", "reason", "due_at"};
    int64_t limit = OUTBOX_DEFAULT_LIMIT;
    char limit_s[24];
    const char *params[1];
    PGresult *res = NULL;
    struct db *db;
    enum og_status st;

    if (opt_arg(a, "limit") != NULL) {
        st = parse_int64("--limit", opt_arg(a, "limit"), 1, OUTBOX_MAX_LIMIT, &limit, err);
        if (st != OG_OK)
            return st;
    }
    db = ctl_db(ctl, err);
    if (db == NULL)
        return err->status;
    snprintf(limit_s, sizeof(limit_s), "%" PRId64, limit);
    params[0] = limit_s;
    st = db_call(db, &outbox_stmt_list, params, &res, err);
    if (st != OG_OK)
        return st;
    st = ctl_list_json(res, cols, "ittTTtt", "outbox quarantined", "events", result, err);
    if (st == OG_OK) {
        ctl_json_set(*result, "limit", json_integer(limit));
        ctl_json_set(
            *result, "total",
            json_integer(PQntuples(res) > 0 ? strtoll(PQgetvalue(res, 0, 7), NULL, 10) : 0));
    }
    PQclear(res);
    return st;
}

static void outbox_list_text(const json_t *r, FILE *out)
{
    static const char *const heads[] = {"ID",    "QUARANTINED_AT", "EVENT",
                                        "ORDER", "DUE_AT",         "REASON"};
    static const char *const keys[] = {"id",       "quarantined_at", "event_type",
                                       "order_no", "due_at",         "reason"};
    const json_t *list = json_object_get(r, "events");
    json_int_t total = json_integer_value(json_object_get(r, "total"));

    if (json_array_size(list) == 0) {
        fprintf(out, "no quarantined outbox events\n");
        return;
    }
    ctl_table_print_list(out, list, 6, heads, keys);
    fprintf(out,
            "%zu of %" JSON_INTEGER_FORMAT " quarantined events (oldest first); after fixing the "
            "cause: ordergatectl outbox retry ID\n",
            json_array_size(list), total);
}

static const struct opt outbox_list_opts[] = {
    {"limit", "N", OPT_ARG, "show at most N, oldest first (default 50, at most 10000)", NULL, 0, 0},
    {NULL, NULL, 0, NULL, NULL, 0, 0},
};

const struct ctl_command ctl_cmd_outbox_quarantined = {
    .name = "outbox quarantined",
    .usage = "outbox quarantined [--limit N]",
    .summary = "list outbox events the relay set aside as unpublishable, with the reason",
    .details =
        "A quarantined event is not published and keeps its order out of archive; reconcile\n"
        "reports it (invariant 9). Fix the cause (a message larger than the broker takes: raise\n"
        "message.max.bytes; a cancel message due beyond year 9999: close the order), then\n"
        "`ordergatectl outbox retry ID`.\n",
    .opts = outbox_list_opts,
    .min_pos = 0,
    .max_pos = 0,
    .run = outbox_list_run,
    .text = outbox_list_text,
};

/* ---- retry ------------------------------------------------------------- */

static enum og_status outbox_retry_run(struct ctl *ctl, const struct opt_args *a, json_t **result,
                                       struct og_error *err)
{
    int64_t id = 0;
    char id_s[24];
    const char *params[1];
    PGresult *res = NULL;
    json_t *out;
    struct db *db;
    enum og_status st;

    st = parse_int64("event ID", a->pos[0], 1, INT64_MAX, &id, err);
    if (st != OG_OK)
        return st;
    db = ctl_db(ctl, err);
    if (db == NULL)
        return err->status;
    snprintf(id_s, sizeof(id_s), "%" PRId64, id);
    params[0] = id_s;
    st = db_call(db, &outbox_stmt_release, params, &res, err);
    if (st != OG_OK) {
        ctl_error_needs_role(err, "retrying", "ordergate_admin");
        return st;
    }
    out = json_object();
    if (out == NULL) {
        PQclear(res);
        return og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
    }
    ctl_json_set(out, "command", json_string("outbox retry"));
    ctl_json_set(out, "ok", json_true());
    ctl_json_set(out, "id", json_integer(id));
    ctl_json_set(out, "outcome", json_string(PQgetvalue(res, 0, 0)));
    PQclear(res);
    *result = out;
    return OG_OK;
}

static void outbox_retry_text(const json_t *r, FILE *out)
{
    static const char *const keys[] = {"id", "outcome", NULL};

    ctl_print_fields(out, r, keys);
}

static const struct opt outbox_retry_opts[] = {
    {NULL, NULL, 0, NULL, NULL, 0, 0},
};

const struct ctl_command ctl_cmd_outbox_retry = {
    .name = "outbox retry",
    .usage = "outbox retry ID",
    .summary = "give a quarantined outbox event back to the relay (outcomes: released, "
               "not_quarantined, not_found)",
    .details = "Needs the database role ordergate_admin. The relay tries the event at its next\n"
               "step; one that still cannot be published is quarantined again with the reason\n"
               "of that attempt.\n",
    .opts = outbox_retry_opts,
    .min_pos = 1,
    .pos_name = "ID",
    .max_pos = 1,
    .run = outbox_retry_run,
    .text = outbox_retry_text,
};
