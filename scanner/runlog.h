/* The scanner's run log: the C face of ordergate.scanner_runs and the
 * scanner_run_* functions in schema/ (docs/scanner.md, "The run log").
 *
 * One sweep run is one row of ordergate.scanner_runs: runlog_start() takes
 * the sweep lease (ordergate.scanner_lease: a row with an expiry, no session
 * state) and writes the row ('running'), or writes a 'skipped' row when
 * another run's lease has not expired or a session holds the sweep lock's
 * advisory key; each start carries a run token drawn for it, so a start
 * repeated after a lost reply resumes the run it recorded; runlog_progress()
 * records the totals and the keyset checkpoint after each batch and renews
 * the lease; runlog_finish() writes the final status and releases the lease.
 * Counters are absolute totals, so a call repeated by db_call() after a lost
 * reply is harmless. */
#ifndef OG_SCANNER_RUNLOG_H
#define OG_SCANNER_RUNLOG_H

#include <stdbool.h>
#include <stdint.h>

#include "common/db.h"
#include "common/error.h"
#include "common/gate.h"

#define RUNLOG_TS_MAX    64
#define RUNLOG_TOKEN_MAX 64 /* a run token's length at most (scanner_run_start: 16..64) */

/* Claim outcomes of every order a run sent to claim_cancel. */
struct runlog_counts {
    int batches;
    int64_t scanned;
    int64_t cancelled; /* missed by the consumer: the alarm */
    int64_t already_cancelled;
    int64_t already_paid;
    int64_t not_due;
    int64_t not_found;
    int64_t busy;        /* locked by another transaction when claimed (each retry counts again) */
    int64_t hook_failed; /* a registered hook failed the order's claim: skipped in this run */
};

/* Keyset position after the last finished batch; empty before the first. */
struct runlog_checkpoint {
    char expire_at[RUNLOG_TS_MAX]; /* timestamptz as the server printed it */
    char order_no[GATE_ORDER_NO_MAX + 1];
};

struct runlog_settings {
    int grace_s;
    int batch_size;
    int max_orders;  /* 0 = no cap */
    int max_seconds; /* 0 = no cap */
    long lease_ms;   /* the sweep lease's length past each renewal, > 0 */
};

struct runlog_start_result {
    int64_t run_id;
    bool skipped; /* another run holds the lease (or a session the key); the row is final */
    char token[RUNLOG_TOKEN_MAX + 1]; /* the run token this start sent */
    char detail[256];                 /* for a skipped run: who holds the sweep */
    int crashed_found; /* runs left 'running' whose lease expired, now marked 'crashed' */
};

/* When orders were last swept (ordergate.scanner_sweep_status): the end of
 * the newest 'done' run, or the last progress of the running sweep whose
 * lease has not expired. */
struct runlog_sweep_status {
    bool have_sweep;      /* false: no run ever swept */
    double last_sweep_at; /* Unix seconds (database clock) when have_sweep */
    double age_s;         /* since then; with no sweep, since the first recorded run */
    int holder_pid;       /* the session holding the key, else the lease's run's backend; 0 */
    char holder_role[64]; /* its role and application ("" when unknown) */
    char holder_application[64];
};

enum og_status runlog_sweep_status(struct db *db, struct runlog_sweep_status *out,
                                   struct og_error *err);

/* Starts a run. Every crashed run found is logged as a warning
 * (event scanner_crashed_run) with its counters and checkpoint. */
enum og_status runlog_start(struct db *db, const struct runlog_settings *settings,
                            struct runlog_start_result *out, struct og_error *err);

/* Records the totals so far and renews the lease. *still_running is false when another run
 * has declared this one crashed (it then holds the lease: this run must stop). */
enum og_status runlog_progress(struct db *db, int64_t run_id, const struct runlog_counts *counts,
                               const struct runlog_checkpoint *cp, bool *still_running,
                               struct og_error *err);

/* Writes the final status ("done" or "failed"), why the run stopped and an
 * optional detail; releases the sweep lease. *duration_ms may be NULL. */
enum og_status runlog_finish(struct db *db, int64_t run_id, const char *status,
                             const char *stop_reason, const char *detail,
                             const struct runlog_counts *counts, const struct runlog_checkpoint *cp,
                             int64_t *duration_ms, struct og_error *err);

#endif
