/* --reconcile: checks the fourteen invariants (schema/README.md, "The
 * invariants reconcile() checks") with ordergate.reconcile()
 * (schema/functions/scanner/reconcile.sql), repairs what may be repaired (a
 * successful payment that hit a cancelled order without its exception gets
 * one, through ordergate.reconcile_repair()), and prints a report. */
#ifndef OG_SCANNER_RECONCILE_H
#define OG_SCANNER_RECONCILE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/db.h"
#include "common/error.h"

struct reconcile_params {
    const char *since; /* timestamptz text; NULL = every order */
    int grace_s;
    int scan_interval_s; /* how often the sweep runs (invariant 6) */
    bool repair;         /* false under --dry-run: report only */
};

/* Invariant numbers reconcile() may return, 1..this; not all of them are used (1-14, 20, 21):
 * numbers are kept when invariants are added, so the set may have gaps. */
#define RECONCILE_MAX_INVARIANT 32

struct reconcile_result {
    int invariants; /* rows reconcile() returned (16) */
    int invariants_violated;
    int64_t violations;                                /* total after any repair */
    int64_t by_invariant[RECONCILE_MAX_INVARIANT + 1]; /* index = invariant number */
    bool checked[RECONCILE_MAX_INVARIANT + 1];         /* reconcile() returned that number */
    int64_t repaired;                                  /* exceptions created by reconcile_repair */
    int64_t exceptions_open;     /* payment exceptions waiting for an operator or a refund */
    int64_t refunds_unconfirmed; /* auto-refunds older than refund_confirm_seconds, unconfirmed */
    int64_t reviews_overdue;     /* manual reviews older than manual_review_max_age_seconds */
};

/* Writes the report to out. OG_OK means the check ran (violations or not). */
enum og_status reconcile_run(struct db *db, const struct reconcile_params *params, FILE *out,
                             struct reconcile_result *result, struct og_error *err);

#endif
