/* ordergatectl show ORDER: everything recorded under an order number, read in
 * one statement (ordergate.order_report, schema/functions/gate/order_report.sql), so the
 * order, its history, payments, charges and exceptions come from one snapshot. The JSON output
 * is the report as the database wrote it (amounts in integer minor units with their currency);
 * the text output shows amounts in their currency's unit (12.50 EUR, 1250 JPY). */
#include <libpq-fe.h>
#include <string.h>

#include "common/gate.h"
#include "tools/ctl/ctl.h"

static const struct db_stmt show_stmt_report = {"ctl_order_report",
                                                "SELECT ordergate.order_report($1)::text", 1};

/* The one reader of order_report (show and schedule use it): charges and charge_until come in
 * the report itself. */
enum og_status ctl_order_report(struct db *db, const char *order_no, json_t **report,
                                struct og_error *err)
{
    const char *params[1] = {order_no};
    PGresult *res = NULL;
    json_error_t jerr;
    enum og_status st;

    *report = NULL;
    st = db_call(db, &show_stmt_report, params, &res, err);
    if (st != OG_OK)
        return st;
    if (PQntuples(res) != 1 || PQnfields(res) != 1) {
        st = og_error_set(err, OG_ERR_INTERNAL, false, "order_report returned %d rows",
                          PQntuples(res));
    } else if (!PQgetisnull(res, 0, 0)) {
        *report = json_loads(PQgetvalue(res, 0, 0), 0, &jerr);
        if (*report == NULL || !json_is_object(*report))
            st = og_error_set(err, OG_ERR_INTERNAL, false, "order_report: unreadable JSON: %s",
                              jerr.text);
    }
    PQclear(res);
    return st;
}

static enum og_status show_run(struct ctl *ctl, const struct opt_args *a, json_t **result,
                               struct og_error *err)
{
    const char *order_no = a->pos[0];
    json_t *report = NULL, *out;
    struct db *db;
    enum og_status st;

    if (!gate_order_no_valid(order_no, strlen(order_no)))
        return og_error_set(err, OG_ERR_ARG, false,
                            "invalid order number '%s' (1 to %d characters of A-Z a-z 0-9 . _ : -)",
                            order_no, GATE_ORDER_NO_MAX);
    db = ctl_db(ctl, err);
    if (db == NULL)
        return err->status;
    st = ctl_order_report(db, order_no, &report, err);
    if (st != OG_OK) {
        json_decref(report);
        return st;
    }
    if (report == NULL)
        return og_error_set(err, OG_ERR_DB, false, "order %s not found (nothing recorded)",
                            order_no);
    out = json_object();
    if (out == NULL) {
        json_decref(report);
        return og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
    }
    ctl_json_set(out, "command", json_string("show"));
    ctl_json_set(out, "ok", json_true());
    ctl_json_set(out, "order", report);
    *result = out;
    return OG_OK;
}

static void show_section(FILE *out, const char *title, const json_t *list, size_t ncols,
                         const char *const *headers, const char *const *keys)
{
    struct ctl_table *t;
    const json_t *row;
    size_t i;

    fprintf(out, "\n%s:", title);
    if (json_array_size(list) == 0) {
        fprintf(out, " none\n");
        return;
    }
    fputc('\n', out);
    t = ctl_table_new(ncols, headers);
    if (t == NULL)
        return;
    json_array_foreach(list, i, row)
    {
        const char *cells[12];
        char bufs[12][32];
        for (size_t c = 0; c < ncols && c < 12; c++)
            cells[c] = ctl_json_text(json_object_get(row, keys[c]), bufs[c], sizeof(bufs[c]));
        if (ctl_table_add(t, cells) != 0)
            break;
    }
    ctl_table_print(t, out, "  ");
    ctl_table_free(t);
}

/* Adds "amount" (text) to every row of list: its amount_cents in its own currency, else in
 * the order's (currency NULL: the integer as it is). */
static void show_money_rows(json_t *list, const char *currency)
{
    json_t *row;
    size_t i;
    char buf[64];

    json_array_foreach(list, i, row)
    {
        const json_t *cents = json_object_get(row, "amount_cents");
        const char *own = ctl_json_str(row, "currency");

        if (json_is_integer(cents))
            ctl_json_set(
                row, "amount",
                json_string(ctl_format_money(json_integer_value(cents),
                                             own != NULL ? own : currency, buf, sizeof(buf))));
    }
}

/* Adds to every amendment of list what its text row shows: the amounts before and after in the
 * order's currency, and the lines after as "SKU xQTY ..." (cut to fit a cell). */
static void show_amendments(json_t *list, const char *currency)
{
    json_t *row;
    size_t i;

    json_array_foreach(list, i, row)
    {
        char buf[64], lines[32] = "";
        size_t used = 0, k;
        json_t *line;

        ctl_format_money(
            json_integer_value(json_object_get(json_object_get(row, "before"), "amount_cents")),
            currency, buf, sizeof(buf));
        ctl_json_set(row, "amount_before", json_string(buf));
        ctl_format_money(
            json_integer_value(json_object_get(json_object_get(row, "after"), "amount_cents")),
            currency, buf, sizeof(buf));
        ctl_json_set(row, "amount_after", json_string(buf));
        json_array_foreach(json_object_get(json_object_get(row, "after"), "items"), k, line)
        {
            int n = snprintf(lines + used, sizeof(lines) - used, "%s%s x%" JSON_INTEGER_FORMAT,
                             k > 0 ? " " : "", ctl_json_str(line, "sku"),
                             json_integer_value(json_object_get(line, "qty")));
            if (n < 0 || (size_t)n >= sizeof(lines) - used)
                break;
            used += (size_t)n;
        }
        ctl_json_set(row, "lines_after", json_string(used > 0 ? lines : "(gate-only)"));
    }
}

static void show_text(const json_t *r, FILE *out)
{
    static const char *const keys[] = {
        "order_no",   "status",       "amount",    "currency",  "allow_partial",
        "captured",   "charge_until", "coupon_id", "expire_at", "original_expire_at",
        "created_at", "closed_at",    NULL};
    static const char *const item_h[] = {"SKU", "QTY"};
    static const char *const item_k[] = {"sku", "qty"};
    static const char *const hist_h[] = {"AT", "FROM", "TO", "SOURCE", "KEY", "ACTOR", "NOTE"};
    static const char *const hist_k[] = {
        "at", "from_status", "to_status", "source", "idempotency_key", "actor", "note"};
    static const char *const pay_h[] = {"AT",      "TXN",    "AMOUNT",   "CHANNEL",
                                        "OUTCOME", "CHARGE", "OPERATOR", "REASON"};
    static const char *const pay_k[] = {"at",      "txn_no",     "amount",   "channel",
                                        "outcome", "charge_ref", "operator", "reason"};
    static const char *const chg_h[] = {"CHARGE",   "STATE", "BEGAN_AT", "UNTIL",
                                        "ENDED_AT", "TXN",   "LATE"};
    static const char *const chg_k[] = {"charge_ref", "state",  "began_at",  "until",
                                        "ended_at",   "txn_no", "ended_late"};
    static const char *const exc_h[] = {"ID",         "CREATED_AT", "KIND",        "TXN", "AMOUNT",
                                        "RESOLUTION", "STATE",      "RESOLVED_BY", "NOTE"};
    static const char *const exc_k[] = {"id",     "created_at",  "kind",
                                        "txn_no", "amount",      "resolution",
                                        "state",  "resolved_by", "note"};
    static const char *const amd_h[] = {"AT", "OPERATOR", "AMOUNT_BEFORE", "AMOUNT_AFTER",
                                        "LINES_AFTER"};
    static const char *const amd_k[] = {"at", "operator", "amount_before", "amount_after",
                                        "lines_after"};
    static const char *const dl_h[] = {"AT", "OPERATOR", "BEFORE", "AFTER"};
    static const char *const dl_k[] = {"at", "operator", "before", "after"};
    static const char *const rem_h[] = {"OFFSET_S", "STATE", "DUE_AT", "SENT_AT", "SKIPPED"};
    static const char *const rem_k[] = {"offset_seconds", "state", "due_at", "sent_at",
                                        "skip_reason"};
    json_t *o = json_deep_copy(json_object_get(r, "order"));
    const char *currency = ctl_json_str(o, "currency");
    char buf[64];

    if (o == NULL)
        return;
    if (json_is_integer(json_object_get(o, "amount_cents")))
        ctl_json_set(
            o, "amount",
            json_string(ctl_format_money(json_integer_value(json_object_get(o, "amount_cents")),
                                         currency, buf, sizeof(buf))));
    if (json_is_integer(json_object_get(o, "captured_cents")))
        ctl_json_set(
            o, "captured",
            json_string(ctl_format_money(json_integer_value(json_object_get(o, "captured_cents")),
                                         currency, buf, sizeof(buf))));
    show_money_rows(json_object_get(o, "payments"), currency);
    show_money_rows(json_object_get(o, "exceptions"), currency);
    if (!json_is_true(json_object_get(o, "found")))
        fprintf(out, "order_no  %s\nstatus    (no such order; payments or exceptions name it)\n",
                ctl_json_str(o, "order_no"));
    else
        ctl_print_fields(out, o, keys);
    show_section(out, "items", json_object_get(o, "items"), 2, item_h, item_k);
    show_section(out, "history", json_object_get(o, "history"), 7, hist_h, hist_k);
    show_section(out, "payments", json_object_get(o, "payments"), 8, pay_h, pay_k);
    show_section(out, "charges", json_object_get(o, "charges"), 7, chg_h, chg_k);
    show_section(out, "exceptions", json_object_get(o, "exceptions"), 9, exc_h, exc_k);
    show_amendments(json_object_get(o, "amendments"), currency);
    show_section(out, "amendments", json_object_get(o, "amendments"), 5, amd_h, amd_k);
    show_section(out, "deadline changes", json_object_get(o, "deadline_changes"), 4, dl_h, dl_k);
    /* Only for an order that has payment reminders (reminder_before_seconds set when it was
     * placed): every other order's output stays as it was. */
    if (json_array_size(json_object_get(o, "reminders")) > 0)
        show_section(out, "reminders", json_object_get(o, "reminders"), 5, rem_h, rem_k);
    json_decref(o);
}

const struct ctl_command ctl_cmd_show = {
    .name = "show",
    .usage = "show ORDER",
    .summary = "an order with its currency, items, transition history, payments, charges, "
               "exceptions, amendments, deadline changes and payment reminders",
    .details = "Exits 1 when nothing at all is recorded under ORDER. Payments and exceptions of\n"
               "an unknown order number (e.g. an unknown_order exception) are shown too.\n",
    .opts = NULL,
    .min_pos = 1,
    .pos_name = "ORDER",
    .max_pos = 1,
    .run = show_run,
    .text = show_text,
};
