#include "scanner/reminders.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/gate.h"
#include "common/log.h"

static const struct db_stmt reminders_stmt_page = {
    "og_scan_reminders",
    "SELECT order_no, offset_seconds FROM ordergate.scan_reminders("
    "make_interval(secs => $1::int), $2::int)",
    2};

enum og_status reminders_sweep(struct db *db, int grace_s, volatile sig_atomic_t *stop,
                               void (*on_sent)(double late_s), struct reminders_result *out,
                               struct og_error *err)
{
    char grace[16], lim[16];
    const char *params[2] = {grace, lim};
    enum og_status st = OG_OK;

    memset(out, 0, sizeof(*out));
    snprintf(grace, sizeof(grace), "%d", grace_s);
    snprintf(lim, sizeof(lim), "%d", REMINDERS_PAGE);
    for (int page = 0; page < REMINDERS_MAX_PAGES && st == OG_OK; page++) {
        PGresult *res = NULL;
        int64_t done_before = out->sent + out->other;
        int n;

        st = db_call(db, &reminders_stmt_page, params, &res, err);
        if (st != OG_OK)
            break;
        n = PQntuples(res);
        for (int i = 0; i < n && st == OG_OK && !(stop != NULL && *stop); i++) {
            enum gate_outcome outcome;
            int64_t due_ms = 0;
            int off = atoi(PQgetvalue(res, i, 1));

            st = gate_claim_reminder(db, PQgetvalue(res, i, 0), off, &outcome, &due_ms, err);
            if (st != OG_OK)
                break;
            out->scanned++;
            if (outcome == GATE_SENT) {
                double late = (double)(clock_wall_ms() - due_ms) / 1000.0;
                if (late < 0)
                    late = 0;
                out->sent++;
                if (late > out->max_late_s)
                    out->max_late_s = late;
                if (on_sent != NULL)
                    on_sent(late);
                log_info("reminder_sent",
                         "order_no=%s offset_seconds=%d lateness_ms=%.0f source=scanner",
                         PQgetvalue(res, i, 0), off, late * 1000);
            } else if (outcome == GATE_IN_FLIGHT) {
                out->held++;
            } else {
                out->other++;
            }
        }
        PQclear(res);
        /* A short page was the last; in_flight ones come back on every page, so a page of
         * nothing but them ends the pass too. */
        if (n < REMINDERS_PAGE || out->sent + out->other == done_before || (stop != NULL && *stop))
            break;
    }
    if (st == OG_OK && out->scanned > 0)
        log_info("reminders_swept",
                 "scanned=%" PRId64 " sent=%" PRId64 " in_flight=%" PRId64 " other=%" PRId64
                 " max_lateness_ms=%.0f",
                 out->scanned, out->sent, out->held, out->other, out->max_late_s * 1000);
    return st;
}
