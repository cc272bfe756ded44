/* The fallback sweep: one run of the scanner.
 *
 * A run takes the sweep lock through the run log (or is skipped), then pages
 * through pending orders with expire_at < now() - grace (database clock) in
 * keyset order on the partial index, claims each page with
 * gate_claim_cancel(GATE_SRC_TIMEOUT_SCANNER), records totals and checkpoint
 * after every page, pauses, and stops when the pages run dry, at a cap (order
 * count or seconds), on a stop request, or on an error. Correctness rests on
 * the claim alone: a page may be stale by the time it is claimed (paid, held,
 * cancelled by the consumer) and the claim reports that as an outcome.
 *
 * The run's lock is the sweep lease (a row, renewed after every batch), not
 * its database session: when db_call() reconnects mid-run (a restarted
 * database or pooler, a terminated backend) the run goes on; behind a
 * transaction pooler each of its transactions may run on another server
 * connection. A run whose lease another run took over (it stalled past
 * lease_ms) stops at its next batch ('failed', exit 1).
 *
 * With claim sessions (--workers N > 1) that session only reads pages and
 * keeps the run log; N threads, each with its own session, claim them. Pages
 * are disjoint ranges of the keyset, so the claims never compete for an
 * order; the recorded checkpoint is the end of the last page before which
 * every page has been claimed.
 *
 * An order answered busy (its row locked by another transaction: an order service's open
 * transaction, a payment in flight) never stops or blocks the run: it is kept (up to
 * SWEEP_BUSY_MAX) and claimed again once the walk is done, in rounds with backoff, for up to
 * busy_retry_ms, on the run's own session. Every claim row counts in the totals (a retried
 * order counts once as busy and once with its final outcome). */
#ifndef OG_SCANNER_SWEEP_H
#define OG_SCANNER_SWEEP_H

#include <signal.h>
#include <stdint.h>

#include "common/db.h"
#include "common/error.h"
#include "scanner/runlog.h"

#define SWEEP_SAMPLE_MAX    10
#define SCANNER_WORKERS_MAX 16 /* scanner.workers' upper bound in common/cfg.c */
/* Most busy orders a run keeps for its retries (one claim's worth); more are counted and left
 * to the next run. */
#define SWEEP_BUSY_MAX 10000
/* Backoff between busy retry rounds: this, doubling, at most SWEEP_BUSY_CAP_MS. */
#define SWEEP_BUSY_BASE_MS 100
#define SWEEP_BUSY_CAP_MS  1000

struct sweep_busy;

enum sweep_status { SWEEP_DONE, SWEEP_FAILED, SWEEP_SKIPPED };

struct sweep_params {
    int grace_s;
    int batch_size;  /* 1..GATE_BATCH_MAX */
    int pause_ms;    /* between batches */
    int max_orders;  /* 0 = no cap */
    int max_seconds; /* 0 = no cap; checked before each batch */
    /* Orders answered busy are claimed again after the walk, with backoff, for up to this long
     * (0: not retried); what is still busy then is left to the next run. */
    int busy_retry_ms;
    /* Sessions that claim pages in parallel, each used by one thread only;
     * nclaim 0 or 1 claims on the run's own session (claim_dbs unused). */
    struct db **claim_dbs;
    int nclaim;
    /* How long the sweep lease lasts past each renewal (the run's start and every
     * batch): longer than one batch and its pause. A run that dies keeps later runs out
     * for at most this long, then the next run reports it crashed. */
    long lease_ms;
    volatile sig_atomic_t *stop;
    /* Optional: called after each claimed batch with the seconds spent on
     * the page query and on the claim. */
    void (*on_batch)(double page_s, double claim_s, void *arg);
    void *on_batch_arg;
};

struct sweep_result {
    enum sweep_status status;
    int64_t run_id; /* 0 when no run row could be written */
    struct runlog_counts counts;
    struct runlog_checkpoint checkpoint;
    /* complete | max_orders | max_seconds | stopped | lock_held | error */
    const char *stop_reason;
    int crashed_found;
    double duration_s; /* wall time of the run as this process saw it */
    /* The first orders this run had to cancel: the consumer missed them. */
    int nmissed;
    char missed[SWEEP_SAMPLE_MAX][GATE_ORDER_NO_MAX + 1];
    /* Orders a registered hook failed (counts.hook_failed of them): skipped this run, tried
     * again by the next. The first of them, and the last hook failure seen. */
    int nhook_orders;
    char hook_orders[SWEEP_SAMPLE_MAX][GATE_ORDER_NO_MAX + 1];
    char hook[GATE_HOOK_NAME_MAX];
    struct og_error hook_err;
    /* Orders still busy (locked) when the run ended: left to the next run. */
    int64_t busy_left;
    struct sweep_busy *busy; /* sweep_run's own list; NULL once it returns */
    char detail[512];        /* why it failed or was skipped */
};

/* Runs one sweep. Returns OG_OK when the run ended done or skipped; on
 * failure res->status is SWEEP_FAILED, err says why, and the run row says
 * 'failed' when the database still accepted that. */
enum og_status sweep_run(struct db *db, const struct sweep_params *params, struct sweep_result *res,
                         struct og_error *err);

struct sweep_preview {
    int64_t overdue;
    char oldest_expire_at[RUNLOG_TS_MAX]; /* "" when nothing is overdue */
    int nsample;
    char sample[SWEEP_SAMPLE_MAX][GATE_ORDER_NO_MAX + 1];
    char sample_expire_at[SWEEP_SAMPLE_MAX][RUNLOG_TS_MAX];
};

/* The dry run: what a sweep with this grace would claim now. Reads only:
 * no lock, no run row, no claim. */
enum og_status sweep_preview(struct db *db, int grace_s, struct sweep_preview *out,
                             struct og_error *err);

#endif
