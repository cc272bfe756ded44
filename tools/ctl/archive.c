/* ordergatectl archive: retention. Calls ordergate.archive (schema/functions/admin/archive.sql,
 * role ordergate_admin) in batches until nothing older than --before is left, one log line per
 * batch, and prints what moved per table. --dry-run counts the orders a run would move and changes
 * nothing. docs/operations.md, "Retention". */
#include <inttypes.h>
#include <libpq-fe.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/signals.h"
#include "tools/ctl/ctl.h"

#define ARC_DEFAULT_BATCH 10000
#define ARC_MAX_BATCH     100000
#define ARC_NCOUNTS       9

/* The age form uses the database's clock, as archive() does for its own checks. */
static const struct db_stmt arc_stmt_at = {
    "ctl_archive_at",
    "SELECT orders, order_items, status_log, payments, exceptions, refunds, outbox, scanner_runs, "
    "kept, more, $1::timestamptz FROM ordergate.archive($1::timestamptz, $2::int)",
    2};
static const struct db_stmt arc_stmt_age = {
    "ctl_archive_age",
    "SELECT a.orders, a.order_items, a.status_log, a.payments, a.exceptions, a.refunds, a.outbox, "
    "a.scanner_runs, a.kept, a.more, b.t FROM (SELECT now() - make_interval(secs => $1::bigint) "
    "AS t) b, ordergate.archive(b.t, $2::int) a",
    2};
/* --dry-run: the orders archive() would take (closed before, nothing open, all published). */
static const struct db_stmt arc_stmt_count = {
    "ctl_archive_count",
    "SELECT count(o.order_no), b.t FROM (SELECT CASE WHEN $1 = '' THEN now() - make_interval(secs "
    "=> "
    "$2::bigint) ELSE $1::timestamptz END AS t) b LEFT JOIN ordergate.orders o ON "
    "o.status <> 'pending_payment' AND o.closed_at < b.t AND NOT EXISTS (SELECT 1 FROM "
    "ordergate.exceptions x WHERE x.order_no = o.order_no AND x.state = 'open') AND NOT EXISTS "
    "(SELECT 1 FROM ordergate.outbox e WHERE e.order_no = o.order_no AND e.published_at IS NULL) "
    "GROUP BY b.t",
    2};

static const char *const arc_keys[ARC_NCOUNTS] = {"orders",   "order_items",  "status_log",
                                                  "payments", "exceptions",   "refunds",
                                                  "outbox",   "scanner_runs", "kept"};

/* --before: an RFC 3339 time (text kept in *at) or an age back from now (*age_s). */
static enum og_status arc_parse_before(const char *s, char *at, size_t size, int64_t *age_s,
                                       struct og_error *err)
{
    int64_t ms;

    at[0] = '\0';
    *age_s = 0;
    if (s == NULL)
        return og_error_set(err, OG_ERR_ARG, false,
                            "--before is required: an age (e.g. 90d) or an RFC 3339 time");
    if (clock_parse_iso(s, strlen(s), &ms) == 0) {
        if (ms > clock_wall_ms())
            return og_error_set(err, OG_ERR_ARG, false, "--before %s is in the future", s);
        clock_format_iso(ms, at, size);
        return OG_OK;
    }
    if (parse_duration("--before", s, 1, CTL_DURATION_MAX, age_s, NULL) != OG_OK)
        return og_error_set(err, OG_ERR_ARG, false,
                            "--before: expected an age such as 90d or 12h, or an RFC 3339 time "
                            "(e.g. 2026-09-01T00:00:00Z), got \"%.64s\"",
                            s);
    return OG_OK;
}

static enum og_status arc_run(struct ctl *ctl, const struct opt_args *a, json_t **result,
                              struct og_error *err)
{
    char at[40], age_s_txt[24], batch_txt[24], before_db[64] = "";
    int64_t age_s, batch = ARC_DEFAULT_BATCH, totals[ARC_NCOUNTS] = {0}, batches = 0;
    int64_t t0 = clock_mono_ms(), moved_rows = 0;
    bool dry = opt_flag(a, "dry-run"), more = false, stopped = false;
    const char *params[2];
    PGresult *res = NULL;
    json_t *out = NULL, *moved = NULL;
    struct db *db;
    enum og_status st;

    st = arc_parse_before(opt_arg(a, "before"), at, sizeof(at), &age_s, err);
    if (st != OG_OK)
        return st;
    if (opt_arg(a, "batch") != NULL) {
        st = parse_int64("--batch", opt_arg(a, "batch"), 1, ARC_MAX_BATCH, &batch, err);
        if (st != OG_OK)
            return st;
    }
    db = ctl_db(ctl, err);
    if (db == NULL)
        return err->status;
    snprintf(age_s_txt, sizeof(age_s_txt), "%" PRId64, age_s);
    snprintf(batch_txt, sizeof(batch_txt), "%" PRId64, batch);
    out = json_object();
    moved = json_object();
    if (out == NULL || moved == NULL) {
        st = og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
        goto out;
    }

    if (dry) {
        params[0] = at;
        params[1] = age_s_txt;
        st = db_call(db, &arc_stmt_count, params, &res, err);
        if (st != OG_OK)
            goto out;
        ctl_json_set(out, "would_archive_orders",
                     json_integer(strtoll(PQgetvalue(res, 0, 0), NULL, 10)));
        snprintf(before_db, sizeof(before_db), "%s", PQgetvalue(res, 0, 1));
        PQclear(res);
        res = NULL;
    } else {
        /* An age is fixed once, at the first batch: later batches use the same cut-off. */
        params[0] = at[0] ? at : age_s_txt;
        params[1] = batch_txt;
        do {
            int64_t b0 = clock_mono_ms(), n[ARC_NCOUNTS], sum = 0;
            char line[400];
            size_t len = 0;

            st =
                db_call(db, at[0] || batches > 0 ? &arc_stmt_at : &arc_stmt_age, params, &res, err);
            if (st != OG_OK) {
                char q[600];
                ctl_error_needs_role(err, "archiving", "ordergate_admin");
                log_error("archive_failed", "batch=%" PRId64 " error=%s", batches + 1,
                          log_quote(q, sizeof(q), err->msg));
                goto out;
            }
            for (int i = 0; i < ARC_NCOUNTS; i++) {
                n[i] = strtoll(PQgetvalue(res, 0, i), NULL, 10);
                totals[i] += n[i];
                if (i < ARC_NCOUNTS - 1)
                    sum += n[i];
                len += (size_t)snprintf(line + len, len < sizeof(line) ? sizeof(line) - len : 0,
                                        "%s%s=%" PRId64, i ? " " : "", arc_keys[i], n[i]);
            }
            more = strcmp(PQgetvalue(res, 0, 9), "t") == 0;
            if (batches == 0) {
                snprintf(before_db, sizeof(before_db), "%s", PQgetvalue(res, 0, 10));
                params[0] = before_db;
            }
            PQclear(res);
            res = NULL;
            batches++;
            moved_rows += sum;
            log_info("archive_batch", "batch=%" PRId64 " %s more=%s ms=%" PRId64, batches, line,
                     more ? "true" : "false", clock_mono_ms() - b0);
            /* A full batch that moved nothing (every candidate held by another transaction)
             * would repeat itself: leave the rest to the next run. */
            if (sum == 0)
                break;
            if (signals_stop) {
                stopped = true;
                break;
            }
        } while (more);
        for (int i = 0; i < ARC_NCOUNTS; i++)
            ctl_json_set(moved, arc_keys[i], json_integer(totals[i]));
    }
    ctl_json_set(out, "command", json_string("archive"));
    ctl_json_set(out, "ok", json_true());
    ctl_json_set(out, "dry_run", json_boolean(dry));
    ctl_json_set(out, "before", ctl_json_pg_time(before_db));
    if (!dry) {
        double s = (double)(clock_mono_ms() - t0) / 1000.0;
        ctl_json_set(out, "batches", json_integer(batches));
        ctl_json_set(out, "moved", json_incref(moved));
        ctl_json_set(out, "more", json_boolean(more));
        ctl_json_set(out, "stopped", json_boolean(stopped));
        ctl_json_set(out, "seconds", json_real(s));
        ctl_json_set(out, "rows_per_s", json_integer(s > 0 ? (json_int_t)(moved_rows / s) : 0));
    }
    *result = out;
    out = NULL;
out:
    json_decref(out);
    json_decref(moved);
    PQclear(res);
    return st;
}

static void arc_text(const json_t *r, FILE *out)
{
    const json_t *moved = json_object_get(r, "moved");
    char buf[64];

    if (json_is_true(json_object_get(r, "dry_run"))) {
        fprintf(out,
                "would archive %" JSON_INTEGER_FORMAT " orders closed before %s (with their "
                "rows); nothing was changed\n",
                json_integer_value(json_object_get(r, "would_archive_orders")),
                ctl_json_str(r, "before"));
        return;
    }
    fprintf(out,
            "archived history closed before %s in %" JSON_INTEGER_FORMAT
            " batches (%.1f s, %" JSON_INTEGER_FORMAT " rows/s)\n",
            ctl_json_str(r, "before"), json_integer_value(json_object_get(r, "batches")),
            json_real_value(json_object_get(r, "seconds")),
            json_integer_value(json_object_get(r, "rows_per_s")));
    for (int i = 0; i < ARC_NCOUNTS; i++)
        fprintf(out, "  %-13s %s\n", arc_keys[i],
                ctl_json_text(json_object_get(moved, arc_keys[i]), buf, sizeof(buf)));
    if (json_is_true(json_object_get(r, "more")))
        fprintf(out, "more is left (%s): run again\n",
                json_is_true(json_object_get(r, "stopped")) ? "stopped"
                                                            : "rows held by other transactions");
}

static const struct opt arc_opts[] = {
    {"before", "AGE|TIME", OPT_ARG,
     "archive history closed before this: an age (90d, 12h) or an RFC 3339 time (required)", NULL,
     0, 0},
    {"batch", "N", OPT_ARG, "orders per batch, 1..100000 (default 10000)", NULL, 0, 0},
    {"dry-run", NULL, 0, "count the orders a run would archive; change nothing", NULL, 0, 0},
    {NULL, NULL, 0, NULL, NULL, 0, 0},
};

const struct ctl_command ctl_cmd_archive = {
    .name = "archive",
    .usage = "archive --before AGE|TIME [--batch N] [--dry-run]",
    .summary = "move closed history older than --before to the archive tables",
    .details =
        "Moves paid and cancelled orders closed before --before, with no open exception and\n"
        "every event published, together with their lines, log row, payments, exceptions,\n"
        "refunds and events, to ordergate.archived_*; also closed exceptions and published\n"
        "events of no order, and deletes finished scanner runs (the newest stays). Pending\n"
        "orders are never touched. Batches until nothing is left; one log line per batch.\n"
        "Needs the database role ordergate_admin. docs/operations.md, \"Retention\".\n",
    .opts = arc_opts,
    .min_pos = 0,
    .max_pos = 0,
    .run = arc_run,
    .text = arc_text,
};
