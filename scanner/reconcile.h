/* --reconcile: checks the invariants 1-18 (schema/README.md, "The
 * invariants reconcile() checks") and the shop's own checks (add_check, "Shop
 * checks": a violated or failed one counts as a violated invariant) with
 * ordergate.reconcile() (schema/functions/scanner/reconcile.sql), repairs what may be repaired (a
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

/* Invariant numbers reconcile() may return, 1..this; today 1-18:
 * numbers are kept when invariants are added, so the set may have gaps. */
#define RECONCILE_MAX_INVARIANT 32

/* The shop's checks (add_check) reconcile() runs after its invariants, each a row named
 * shop:<name> with no invariant number; violations -1 = the check failed (raised, or could not
 * run). add_check registers at most this many. */
#define RECONCILE_MAX_CHECKS 64

struct reconcile_check {
    char name[80];      /* shop:<name> */
    int64_t violations; /* -1: failed */
};

struct reconcile_result {
    int invariants;          /* built-in rows reconcile() returned (18) */
    int invariants_violated; /* built-in invariants violated, shop checks violated or failed */
    int checks;              /* shop checks run */
    int checks_failed;       /* shop checks that failed (counted in invariants_violated too) */
    struct reconcile_check check[RECONCILE_MAX_CHECKS];
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

/* Records the run in ordergate.reconcile_runs (reconcile_run_record): started_at (ISO text, the
 * scanner's clock when the run began), params->since, and either result (clean or violated, the
 * violations of every invariant and shop check it ran) or, when result is NULL, a failed run
 * with failure as its detail. A connection lost at the commit may, through db_call's repeat,
 * leave the run recorded twice. */
enum og_status reconcile_record(struct db *db, const struct reconcile_params *params,
                                const char *started_at, const struct reconcile_result *result,
                                const char *failure, struct og_error *err);

#endif
