/* The scanner's fallback for payment reminders: pending reminders of pending orders whose due
 * time (expire_at - offset) passed more than the grace ago, which the consumer never claimed
 * (schedule_cancels = 0, a lost or late message, no consumer at all), are claimed here with
 * claim_reminder, one bounded page (ordergate.scan_reminders) after another.
 *
 * Owns nothing but its statement; must not touch the sweep of orders (scanner/sweep.c) or its
 * lease: claim_reminder is idempotent (sent once whoever claims first), so a run that overlaps
 * the consumer or another scanner sends nothing twice. */
#ifndef OG_SCANNER_REMINDERS_H
#define OG_SCANNER_REMINDERS_H

#include <signal.h>
#include <stdint.h>

#include "common/db.h"
#include "common/error.h"

/* Pages of REMINDERS_PAGE reminders, at most REMINDERS_MAX_PAGES per run: a backlog beyond that
 * is worked off over the next runs, and the run's lateness shows it. */
#define REMINDERS_PAGE      500
#define REMINDERS_MAX_PAGES 20

struct reminders_result {
    int64_t scanned;   /* reminders the pages returned */
    int64_t sent;      /* claim_reminder answered sent */
    int64_t held;      /* in_flight (a hold or a charge; a locked row): left for later */
    int64_t other;     /* not_pending, already_sent, not_due, not_found: nothing to do */
    double max_late_s; /* the latest sent reminder's send time minus its due time */
};

/* One fallback pass. on_sent (may be NULL) is called with each sent reminder's lateness in
 * seconds (the scanner's clock minus the database's due time, at least 0). Stops between claims
 * when *stop is set. */
enum og_status reminders_sweep(struct db *db, int grace_s, volatile sig_atomic_t *stop,
                               void (*on_sent)(double late_s), struct reminders_result *out,
                               struct og_error *err);

#endif
