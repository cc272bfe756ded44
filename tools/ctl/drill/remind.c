/* --schedule-in-db with reminders: the database also writes each order's payment reminders
 * (setting reminder_before_seconds, --reminders) and their messages, the consumers send them at
 * their due times. Owns the reminder_before_seconds setting for the drill's time (set, put back)
 * and the count of the drill's reminders for the ledger and the report. It must not touch the
 * broker or the orders; whether a reminder went out for an order after it closed, or twice, is
 * reconcile's (invariants 17 and 18). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/ctl/drill/drill.h"

static const struct db_stmt drill_remind_stmt_setting = {
    "drill_remind_setting", "SELECT ordergate.set_setting('reminder_before_seconds', $1)", 1};

/* The drill's reminders by state, and its reminder messages still unpublished. */
static const struct db_stmt drill_remind_stmt_count = {
    "drill_remind_count",
    "SELECT count(*), count(*) FILTER (WHERE state = 'sent'), "
    "       count(*) FILTER (WHERE state = 'skipped'), count(*) FILTER (WHERE state = 'pending'), "
    "       (SELECT count(*) FROM ordergate.outbox b WHERE b.event_type = 'reminder_scheduled' "
    "           AND b.published_at IS NULL AND starts_with(b.order_no, $1)) "
    "  FROM ordergate.reminders r WHERE starts_with(r.order_no, $1)",
    1};

enum og_status drill_remind_on(struct drill *d, struct db *db, struct og_error *err)
{
    PGresult *res = NULL;

    if (d->o.reminders[0] == '\0')
        return OG_OK;
    if (db_call(db, &drill_remind_stmt_setting, (const char *[]){d->o.reminders}, &res, err) !=
        OG_OK) {
        og_error_prefix(err, "--reminders: set_setting('reminder_before_seconds', '%s')",
                        d->o.reminders);
        return err->status;
    }
    snprintf(d->remind_before, sizeof(d->remind_before), "%s", PQgetvalue(res, 0, 0));
    d->remind_set = 1;
    PQclear(res);
    return OG_OK;
}

enum og_status drill_remind_restore(const struct drill *d, struct db *db, struct og_error *err)
{
    if (!d->remind_set || strcmp(d->remind_before, d->o.reminders) == 0)
        return OG_OK;
    return drill_setup_restore_setting(db, &drill_remind_stmt_setting, "reminder_before_seconds",
                                       d->o.reminders, d->remind_before, err);
}

/* After the settle: every reminder of a drill order left pending (a pending one of an order
 * still pending is fine only if its due time is ahead, which the drill never leaves), and every
 * reminder message published. The count goes to the report. */
enum og_status drill_remind_check(struct drill *d, struct db *db, struct og_error *err)
{
    PGresult *res = NULL;
    long unpublished;

    if (!d->remind_set)
        return OG_OK;
    if (db_call(db, &drill_remind_stmt_count, (const char *[]){d->prefix}, &res, err) != OG_OK) {
        og_error_prefix(err, "counting the drill's reminders");
        return err->status;
    }
    d->reminders_total = atol(PQgetvalue(res, 0, 0));
    d->reminders_sent = atol(PQgetvalue(res, 0, 1));
    d->reminders_skipped = atol(PQgetvalue(res, 0, 2));
    d->reminders_pending = atol(PQgetvalue(res, 0, 3));
    unpublished = atol(PQgetvalue(res, 0, 4));
    PQclear(res);
    if (unpublished > 0) {
        drill_report_finding("VIOLATION %ld of the drill's reminder messages were never published",
                             unpublished);
        d->ledger_violations++;
    }
    drill_report_progress(d, "reminders: %ld written, %ld sent, %ld skipped, %ld left pending",
                          d->reminders_total, d->reminders_sent, d->reminders_skipped,
                          d->reminders_pending);
    return OG_OK;
}
