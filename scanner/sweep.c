#include "scanner/sweep.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/gate.h"
#include "common/log.h"
#include "scanner/claim_pool.h"
#include "scanner/scanner_metrics.h"

static const struct db_stmt sweep_stmt_page = {
    "og_scan_page",
    "SELECT order_no, expire_at FROM ordergate.scan_overdue(make_interval(secs => $1::int), "
    "$2::timestamptz, $3, $4::int)",
    4};

static const struct db_stmt sweep_stmt_count = {
    "og_scan_count",
    "SELECT overdue, oldest_expire_at FROM ordergate.scan_overdue_count("
    "make_interval(secs => $1::int))",
    1};

/* The orders of a run answered busy, waiting for their retry. */
struct sweep_busy {
    int n, dropped;
    char (*order_no)[GATE_ORDER_NO_MAX + 1]; /* SWEEP_BUSY_MAX of them */
};

/* Keeps a busy order for the retries; false (counted as dropped) when the list is full or
 * cannot be allocated. */
static bool sweep_busy_add(struct sweep_result *res, const char *order_no)
{
    struct sweep_busy *b = res->busy;

    if (b == NULL)
        return false;
    if (b->order_no == NULL)
        b->order_no = calloc(SWEEP_BUSY_MAX, sizeof(*b->order_no));
    if (b->order_no == NULL || b->n == SWEEP_BUSY_MAX) {
        b->dropped++;
        return false;
    }
    snprintf(b->order_no[b->n++], sizeof(b->order_no[0]), "%s", order_no);
    return true;
}

/* Fetches up to limit overdue orders after the checkpoint (from the start
 * when the checkpoint is empty). */
static enum og_status sweep_fetch(struct db *db, int grace_s, const struct runlog_checkpoint *cp,
                                  int limit, struct claim_page *page, struct og_error *err)
{
    char grace[16], lim[16];
    const char *params[4];
    PGresult *res = NULL;
    enum og_status st;

    page->n = 0;
    snprintf(grace, sizeof(grace), "%d", grace_s);
    snprintf(lim, sizeof(lim), "%d", limit);
    params[0] = grace;
    params[1] = cp->expire_at[0] ? cp->expire_at : NULL;
    params[2] = cp->order_no[0] ? cp->order_no : NULL;
    params[3] = lim;
    st = db_call(db, &sweep_stmt_page, params, &res, err);
    if (st != OG_OK)
        goto out;
    if (PQnfields(res) != 2 || PQntuples(res) > limit) {
        st = og_error_set(err, OG_ERR_INTERNAL, false,
                          "scan_overdue returned %d columns and %d rows for a page of %d",
                          PQnfields(res), PQntuples(res), limit);
        goto out;
    }
    for (int i = 0; i < PQntuples(res); i++) {
        snprintf(page->order_no[i], sizeof(page->order_no[i]), "%s", PQgetvalue(res, i, 0));
        snprintf(page->expire_at[i], sizeof(page->expire_at[i]), "%s", PQgetvalue(res, i, 1));
        page->ptrs[i] = page->order_no[i];
    }
    page->n = PQntuples(res);
out:
    PQclear(res);
    return st;
}

/* Adds one claim's outcomes to the totals; an outcome word this scanner does
 * not know means the schema and the binary disagree: stop rather than guess. */
static enum og_status sweep_tally(struct sweep_result *res, const struct gate_cancel_row *rows,
                                  size_t nrows, struct og_error *err)
{
    struct runlog_counts *c = &res->counts;

    for (size_t i = 0; i < nrows; i++) {
        switch (rows[i].outcome) {
        case GATE_CANCELLED:
            c->cancelled++;
            if (res->nmissed < SWEEP_SAMPLE_MAX)
                snprintf(res->missed[res->nmissed++], sizeof(res->missed[0]), "%s",
                         rows[i].order_no);
            break;
        case GATE_ALREADY_CANCELLED:
            c->already_cancelled++;
            break;
        case GATE_ALREADY_PAID:
        case GATE_ALREADY_RELEASED: /* closed by someone else, not by a cancel: final, as paid
                                       (the run log has no column of its own for it) */
            c->already_paid++;
            break;
        case GATE_NOT_DUE:
            c->not_due++;
            break;
        case GATE_NOT_FOUND:
            c->not_found++;
            break;
        case GATE_BUSY:
            c->busy++;
            sweep_busy_add(res, rows[i].order_no);
            break;
        case GATE_HOOK_FAILED:
            c->hook_failed++;
            if (res->nhook_orders < SWEEP_SAMPLE_MAX)
                snprintf(res->hook_orders[res->nhook_orders++], sizeof(res->hook_orders[0]), "%s",
                         rows[i].order_no);
            break;
        default:
            return og_error_set(err, OG_ERR_INTERNAL, false,
                                "claim_cancel answered '%s' for order %s: not a cancel outcome",
                                gate_outcome_str(rows[i].outcome), rows[i].order_no);
        }
    }
    c->scanned += (int64_t)nrows;
    return OG_OK;
}

/* How many rows of a claim a hook failed. */
static size_t sweep_hook_failed_rows(const struct gate_cancel_row *rows, size_t n)
{
    size_t failed = 0;

    for (size_t i = 0; i < n; i++)
        failed += rows[i].outcome == GATE_HOOK_FAILED;
    return failed;
}

/* A hook failure of one claim: the last one seen is the run's to report (sweep_log_hooks),
 * every one counts in the hook's metric. */
static void sweep_hook_seen(struct sweep_result *res, const struct og_error *hook_err, size_t n)
{
    if (!gate_hook_failed(hook_err, res->hook, sizeof(res->hook)))
        return;
    res->hook_err = *hook_err;
    scanner_metrics_hook_failed(res->hook, (double)n);
}

/* One claim on the run's own session, a hook's failure of single orders isolated
 * (gate_claim_cancel_isolating): those come back GATE_HOOK_FAILED and the run goes on; a hook
 * failing every order of the page fails the run with the hook's error. */
static enum og_status sweep_claim(struct db *db, struct claim_page *page, size_t *nrows,
                                  struct sweep_result *res, struct og_error *err)
{
    struct og_error hook_err = {0};
    enum og_status st;

    st = gate_claim_cancel_isolating(db, page->ptrs, (size_t)page->n, GATE_SRC_TIMEOUT_SCANNER,
                                     page->rows, nrows, &hook_err, err);
    if (st != OG_OK) {
        sweep_hook_seen(res, err, (size_t)page->n);
        return st;
    }
    size_t failed = sweep_hook_failed_rows(page->rows, *nrows);
    if (failed > 0)
        sweep_hook_seen(res, &hook_err, failed);
    return OG_OK;
}

/* The bookkeeping of one claimed page, the same with or without claim
 * sessions: outcomes, batch count, the caller's callback, the debug line.
 * session 0 is the run's own. */
static enum og_status sweep_count_batch(const struct sweep_params *p, struct sweep_result *res,
                                        const struct claim_page *page, size_t nrows, int64_t seq,
                                        int session, double page_s, double claim_s,
                                        struct og_error *err)
{
    enum og_status st = sweep_tally(res, page->rows, nrows, err);

    if (st != OG_OK)
        return st;
    res->counts.batches++;
    if (p->on_batch != NULL)
        p->on_batch(page_s, claim_s, p->on_batch_arg);
    log_debug("scanner_batch",
              "run_id=%" PRId64 " batch=%" PRId64 " orders=%d page_ms=%.1f claim_ms=%.1f "
              "session=%d cancelled_total=%" PRId64,
              res->run_id, seq + 1, page->n, page_s * 1000.0, claim_s * 1000.0, session,
              res->counts.cancelled);
    return OG_OK;
}

static void sweep_log_missed(const struct sweep_result *res)
{
    char list[SWEEP_SAMPLE_MAX * (GATE_ORDER_NO_MAX + 1) + 1] = "";
    size_t used = 0;

    if (res->counts.cancelled == 0)
        return;
    for (int i = 0; i < res->nmissed; i++)
        used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s", i ? "," : "",
                                 res->missed[i]);
    log_warn("scanner_missed_orders",
             "run_id=%" PRId64 " cancelled=%" PRId64 " already_cancelled=%" PRId64
             " already_paid=%" PRId64 " not_due=%" PRId64 " not_found=%" PRId64 " busy=%" PRId64
             " first_orders=%s msg=\"the consumer missed these orders; the scanner cancelled "
             "them\"",
             res->run_id, res->counts.cancelled, res->counts.already_cancelled,
             res->counts.already_paid, res->counts.not_due, res->counts.not_found, res->counts.busy,
             list);
}

/* The orders a hook failed in this run, once, at its end: the hook, its error, the first
 * orders. */
static void sweep_log_hooks(const struct sweep_result *res)
{
    char list[SWEEP_SAMPLE_MAX * (GATE_ORDER_NO_MAX + 1) + 1] = "", q[600];
    size_t used = 0;

    if (res->counts.hook_failed == 0)
        return;
    for (int i = 0; i < res->nhook_orders; i++)
        used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s", i ? "," : "",
                                 res->hook_orders[i]);
    log_error("scanner_hook_failed",
              "run_id=%" PRId64 " orders=%" PRId64 " first_orders=%s hook=%s sqlstate=%s error=%s "
              "msg=\"a registered hook failed these orders' cancel (rolled back); skipped in this "
              "run, tried again by the next\"",
              res->run_id, res->counts.hook_failed, list, res->hook, res->hook_err.sqlstate,
              log_quote(q, sizeof(q), res->hook_err.msg));
}

/* Records totals and checkpoint in the run row and renews the sweep lease; stops the run if
 * another run has taken the lease over. */
static enum og_status sweep_progress(struct db *db, struct sweep_result *res, struct og_error *err)
{
    bool still_running = true;
    enum og_status st =
        runlog_progress(db, res->run_id, &res->counts, &res->checkpoint, &still_running, err);

    if (st == OG_OK && !still_running)
        st = og_error_set(err, OG_ERR_DB, false,
                          "another run declared run %" PRId64
                          " crashed (its sweep lease had expired) and took the sweep; stopping",
                          res->run_id);
    return st;
}

/* Before each page: the reason to stop (stop signal, a cap reached), or
 * NULL to go on with a page of *limit orders, cut to what the order cap
 * leaves. taken: the orders this run has already taken on. */
static const char *sweep_limit(const struct sweep_params *p, int64_t t_start, int64_t taken,
                               int *limit)
{
    if (p->stop != NULL && *p->stop)
        return "stopped";
    if (p->max_seconds > 0 && clock_mono_ms() - t_start >= (int64_t)p->max_seconds * 1000)
        return "max_seconds";
    if (p->max_orders > 0) {
        int64_t left = (int64_t)p->max_orders - taken;
        if (left <= 0)
            return "max_orders";
        if (left < *limit)
            *limit = (int)left;
    }
    return NULL;
}

static enum og_status sweep_batches(struct db *db, const struct sweep_params *p,
                                    struct sweep_result *res, struct og_error *err)
{
    struct claim_page page;
    int64_t t_start = clock_mono_ms();
    enum og_status st;

    st = claim_page_alloc(&page, p->batch_size, err);
    if (st != OG_OK)
        return st;
    for (;;) {
        int limit = p->batch_size;
        const char *why;
        size_t nrows = 0;
        int64_t t0, t1;

        why = sweep_limit(p, t_start, res->counts.scanned, &limit);
        if (why != NULL) {
            res->stop_reason = why;
            break;
        }

        t0 = clock_mono_us();
        st = sweep_fetch(db, p->grace_s, &res->checkpoint, limit, &page, err);
        if (st != OG_OK)
            break;
        if (page.n == 0) {
            res->stop_reason = "complete";
            break;
        }
        t1 = clock_mono_us();
        st = sweep_claim(db, &page, &nrows, res, err);
        if (st != OG_OK)
            break;
        /* Whatever session the claim ran on, its outcomes happened: count
         * them before looking at the session. */
        st = sweep_count_batch(p, res, &page, nrows, res->counts.batches, 0,
                               (double)(t1 - t0) / 1e6, (double)(clock_mono_us() - t1) / 1e6, err);
        if (st != OG_OK)
            break;
        snprintf(res->checkpoint.expire_at, sizeof(res->checkpoint.expire_at), "%s",
                 page.expire_at[page.n - 1]);
        snprintf(res->checkpoint.order_no, sizeof(res->checkpoint.order_no), "%s",
                 page.order_no[page.n - 1]);
        st = sweep_progress(db, res, err);
        if (st != OG_OK)
            break;
        if (page.n < limit) {
            /* A short page: nothing more was overdue at that snapshot. */
            res->stop_reason = "complete";
            break;
        }
        if (p->pause_ms > 0)
            clock_sleep_until_flag(p->pause_ms, p->stop, NULL);
    }
    claim_page_free(&page);
    return st;
}

/* What claim_pool_collect hands to sweep_collected. */
struct sweep_collect {
    const struct sweep_params *p;
    struct sweep_result *res;
    enum og_status st; /* the first failure */
    struct og_error *err;
};

/* The outcomes of a claim happened whatever else failed, so they are counted
 * first; the first error is kept. */
static bool sweep_collected(const struct claim_done *d, void *arg)
{
    struct sweep_collect *c = arg;
    struct og_error e = {0};
    enum og_status st = d->st;

    if (st == OG_OK) {
        size_t failed = sweep_hook_failed_rows(d->page->rows, d->nrows);
        if (failed > 0)
            sweep_hook_seen(c->res, d->hook_err, failed);
        st = sweep_count_batch(c->p, c->res, d->page, d->nrows, d->seq, d->session, d->page_s,
                               d->claim_s, &e);
    } else {
        e = *d->err;
        sweep_hook_seen(c->res, &e, (size_t)d->page->n);
    }
    if (st == OG_OK)
        return true;
    if (c->st == OG_OK)
        c->st =
            og_error_set(c->err, e.status, e.retriable, "claim session %d: %s", d->session, e.msg);
    return false;
}

/* Folds every finished claim into the totals and moves the checkpoint.
 * Returns the first failure; *collected says how many claims came back. */
static enum og_status sweep_collect(struct claim_pool *pool, const struct sweep_params *p,
                                    struct sweep_result *res, int *collected, struct og_error *err)
{
    struct sweep_collect c = {p, res, OG_OK, err};

    *collected = claim_pool_collect(pool, sweep_collected, &c);
    claim_pool_checkpoint(pool, &res->checkpoint);
    return c.st;
}

/* --workers N: the run's session reads pages, the claim pool's sessions
 * claim them. This thread owns every decision (caps, stop, checkpoint, run
 * log). */
static enum og_status sweep_batches_parallel(struct db *db, const struct sweep_params *p,
                                             struct sweep_result *res, struct og_error *err)
{
    struct claim_pool *pool = NULL;
    struct claim_page page = {0};
    int64_t dispatched = 0; /* orders handed out (the max_orders cap) */
    int64_t t_start = clock_mono_ms();
    bool more = true;
    enum og_status st;

    st = claim_page_alloc(&page, p->batch_size, err);
    if (st == OG_OK)
        st = claim_pool_start(&pool, p->claim_dbs, p->nclaim, p->batch_size, err);
    while (st == OG_OK) {
        int limit = p->batch_size, collected = 0;
        const char *why;
        int64_t t0;

        /* Fold in whatever finished; record it before handing out more. */
        st = sweep_collect(pool, p, res, &collected, err);
        if (st != OG_OK)
            break;
        if (collected > 0) {
            st = sweep_progress(db, res, err);
            if (st != OG_OK)
                break;
            continue; /* collecting may have freed several sessions */
        }
        if (!claim_pool_has_idle(pool)) {
            claim_pool_wait(pool);
            continue;
        }
        if (!more)
            break;
        why = sweep_limit(p, t_start, dispatched, &limit);
        if (why != NULL) {
            res->stop_reason = why;
            break;
        }

        t0 = clock_mono_us();
        st = sweep_fetch(db, p->grace_s, claim_pool_cursor(pool), limit, &page, err);
        if (st != OG_OK)
            break;
        if (page.n == 0) {
            res->stop_reason = "complete";
            more = false;
            continue; /* drain */
        }
        claim_pool_submit(pool, &page, (double)(clock_mono_us() - t0) / 1e6);
        dispatched += page.n;
        if (page.n < limit) {
            /* A short page: nothing more was overdue at that snapshot. */
            res->stop_reason = "complete";
            more = false;
            continue;
        }
        if (p->pause_ms > 0)
            clock_sleep_until_flag(p->pause_ms, p->stop, NULL);
    }
    /* Drain: every page handed out is claimed (or failed) and counted before
     * the run is recorded; progress goes on being written meanwhile. */
    while (pool != NULL) {
        int collected = 0;
        struct og_error cerr = {0};
        enum og_status cst = sweep_collect(pool, p, res, &collected, &cerr);

        if (st == OG_OK && cst != OG_OK) {
            st = cst;
            *err = cerr;
        }
        if (st == OG_OK && collected > 0) {
            st = sweep_progress(db, res, err);
            continue;
        }
        if (!claim_pool_busy(pool))
            break;
        claim_pool_wait(pool);
    }
    claim_pool_free(pool);
    claim_page_free(&page);
    return st;
}

/* After the walk: the busy orders claimed again, on the run's session, in rounds with backoff
 * (SWEEP_BUSY_BASE_MS doubling up to SWEEP_BUSY_CAP_MS) until none is left, busy_retry_ms have
 * passed, the run's max_seconds is reached or a stop is asked for. The orders still busy then
 * are logged and left to the next run (res->busy_left). */
static enum og_status sweep_retry_busy(struct db *db, const struct sweep_params *p,
                                       struct sweep_result *res, int64_t t_start,
                                       struct og_error *err)
{
    struct sweep_busy *b = res->busy;
    struct sweep_busy todo = {0};
    struct claim_page page = {0};
    int64_t t0 = clock_mono_ms();
    enum og_status st = OG_OK;

    if (b->n == 0 || p->busy_retry_ms <= 0)
        goto out;
    todo.order_no = calloc(SWEEP_BUSY_MAX, sizeof(*todo.order_no));
    if (todo.order_no == NULL) {
        st = og_error_set(err, OG_ERR_NOMEM, false, "out of memory for the busy retries");
        goto out;
    }
    st = claim_page_alloc(&page, p->batch_size, err);
    for (int round = 0; st == OG_OK && b->n > 0; round++) {
        long left = p->busy_retry_ms - (long)(clock_mono_ms() - t0);
        long wait = clock_backoff_ms(SWEEP_BUSY_BASE_MS, SWEEP_BUSY_CAP_MS, round);

        if (left <= 0 || (p->stop != NULL && *p->stop))
            break;
        if (p->max_seconds > 0 && clock_mono_ms() - t_start + (wait < left ? wait : left) >=
                                      (int64_t)p->max_seconds * 1000)
            break;
        if (!clock_sleep_until_flag(wait < left ? wait : left, p->stop, NULL) || wait >= left)
            break;
        /* This round's orders move to todo; the claims put back the ones still busy. */
        memcpy(todo.order_no, b->order_no, (size_t)b->n * sizeof(*b->order_no));
        todo.n = b->n;
        b->n = 0;
        for (int i = 0; i < todo.n && st == OG_OK;) {
            size_t nrows = 0;
            int64_t t1 = clock_mono_us();

            page.n = 0;
            for (; i < todo.n && page.n < p->batch_size; i++, page.n++) {
                memcpy(page.order_no[page.n], todo.order_no[i], sizeof(page.order_no[0]));
                page.ptrs[page.n] = page.order_no[page.n];
            }
            st = sweep_claim(db, &page, &nrows, res, err);
            if (st == OG_OK)
                st = sweep_tally(res, page.rows, nrows, err);
            if (st == OG_OK) {
                res->counts.batches++;
                log_debug("scanner_batch",
                          "run_id=%" PRId64 " batch=%d orders=%d claim_ms=%.1f busy_retry=%d",
                          res->run_id, res->counts.batches, page.n,
                          (double)(clock_mono_us() - t1) / 1000.0, round + 1);
                st = sweep_progress(db, res, err);
            }
        }
        log_info("scanner_busy_retry", "run_id=%" PRId64 " round=%d orders=%d still_busy=%d",
                 res->run_id, round + 1, todo.n, b->n);
    }
out:
    res->busy_left = (int64_t)b->n + b->dropped;
    if (res->busy_left > 0 && st == OG_OK) {
        char list[SWEEP_SAMPLE_MAX * (GATE_ORDER_NO_MAX + 1) + 1] = "";
        size_t used = 0;
        for (int i = 0; i < b->n && i < SWEEP_SAMPLE_MAX; i++)
            used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s", i ? "," : "",
                                     b->order_no[i]);
        log_warn("scanner_busy_left",
                 "run_id=%" PRId64 " orders=%" PRId64 " first_orders=%s msg=\"due, but locked "
                 "by another transaction the whole run; left to the next run\"",
                 res->run_id, res->busy_left, list);
    }
    claim_page_free(&page);
    free(todo.order_no);
    return st;
}

enum og_status sweep_run(struct db *db, const struct sweep_params *p, struct sweep_result *res,
                         struct og_error *err)
{
    struct runlog_settings settings = {p->grace_s, p->batch_size, p->max_orders, p->max_seconds,
                                       p->lease_ms > 0 ? p->lease_ms : 60000L + p->pause_ms};
    struct runlog_start_result start;
    struct og_error ferr = {0};
    int64_t t0 = clock_mono_us(), t_start_ms = clock_mono_ms();
    int64_t duration_ms = 0;
    struct sweep_busy busy = {0};
    enum og_status st;
    char q[600];

    memset(res, 0, sizeof(*res));
    res->busy = &busy;
    res->status = SWEEP_FAILED;
    res->stop_reason = "error";

    if (p->batch_size < 1 || p->batch_size > GATE_BATCH_MAX) {
        st = og_error_set(err, OG_ERR_ARG, false, "batch size %d is outside 1..%d", p->batch_size,
                          GATE_BATCH_MAX);
        goto out;
    }
    st = runlog_start(db, &settings, &start, err);
    if (st != OG_OK)
        goto out;
    res->run_id = start.run_id;
    res->crashed_found = start.crashed_found;
    if (start.skipped) {
        res->status = SWEEP_SKIPPED;
        res->stop_reason = "lock_held";
        snprintf(res->detail, sizeof(res->detail), "%s", start.detail);
        log_info("scanner_run_skipped", "run_id=%" PRId64 " detail=%s", res->run_id,
                 log_quote(q, sizeof(q), start.detail));
        goto out;
    }
    log_info("scanner_run_started",
             "run_id=%" PRId64 " grace_s=%d batch_size=%d pause_ms=%d max_orders=%d "
             "max_seconds=%d lease_ms=%ld crashed_runs_found=%d",
             res->run_id, p->grace_s, p->batch_size, p->pause_ms, p->max_orders, p->max_seconds,
             settings.lease_ms, start.crashed_found);

    if (p->nclaim > 1)
        st = sweep_batches_parallel(db, p, res, err);
    else
        st = sweep_batches(db, p, res, err);
    if (st == OG_OK)
        st = sweep_retry_busy(db, p, res, t_start_ms, err);
    if (st != OG_OK) {
        res->stop_reason = "error";
        snprintf(res->detail, sizeof(res->detail), "%s", err != NULL ? err->msg : "error");
    }
    /* The final row is written even after an error, on whatever session
     * db_call() can get; if the database is gone altogether the row stays
     * 'running' and the first run after its lease expired reports it as
     * crashed. */
    if (runlog_finish(db, res->run_id, st == OG_OK ? "done" : "failed", res->stop_reason,
                      st == OG_OK ? NULL : res->detail, &res->counts, &res->checkpoint,
                      &duration_ms, &ferr) != OG_OK) {
        log_error("scanner_run_finish_failed", "run_id=%" PRId64 " error=%s", res->run_id,
                  log_quote(q, sizeof(q), ferr.msg));
        if (st == OG_OK) {
            st = og_error_set(err, ferr.status, ferr.retriable,
                              "could not record the end of run %" PRId64 ": %s", res->run_id,
                              ferr.msg);
            res->stop_reason = "error";
            snprintf(res->detail, sizeof(res->detail), "%s", ferr.msg);
        }
    }
    res->status = st == OG_OK ? SWEEP_DONE : SWEEP_FAILED;
out:
    res->duration_s = (double)(clock_mono_us() - t0) / 1e6;
    free(busy.order_no);
    res->busy = NULL;
    if (res->status == SWEEP_FAILED && res->detail[0] == '\0' && err != NULL)
        snprintf(res->detail, sizeof(res->detail), "%s", err->msg);
    sweep_log_missed(res);
    sweep_log_hooks(res);
    if (res->status == SWEEP_DONE)
        log_info("scanner_run_done",
                 "run_id=%" PRId64 " stop_reason=%s batches=%d scanned=%" PRId64
                 " cancelled=%" PRId64 " already_cancelled=%" PRId64 " already_paid=%" PRId64
                 " not_due=%" PRId64 " not_found=%" PRId64 " busy=%" PRId64 " busy_left=%" PRId64
                 " hook_failed=%" PRId64 " duration_ms=%" PRId64,
                 res->run_id, res->stop_reason, res->counts.batches, res->counts.scanned,
                 res->counts.cancelled, res->counts.already_cancelled, res->counts.already_paid,
                 res->counts.not_due, res->counts.not_found, res->counts.busy, res->busy_left,
                 res->counts.hook_failed, duration_ms);
    else if (res->status == SWEEP_FAILED)
        log_error("scanner_run_failed",
                  "run_id=%" PRId64 " batches=%d scanned=%" PRId64 " cancelled=%" PRId64
                  " error=%s",
                  res->run_id, res->counts.batches, res->counts.scanned, res->counts.cancelled,
                  log_quote(q, sizeof(q), res->detail));
    return res->status == SWEEP_FAILED ? st : OG_OK;
}

enum og_status sweep_preview(struct db *db, int grace_s, struct sweep_preview *out,
                             struct og_error *err)
{
    char grace[16], lim[16];
    const char *params[4];
    PGresult *res = NULL;
    enum og_status st;

    memset(out, 0, sizeof(*out));
    snprintf(grace, sizeof(grace), "%d", grace_s);
    snprintf(lim, sizeof(lim), "%d", SWEEP_SAMPLE_MAX);
    params[0] = grace;
    st = db_call(db, &sweep_stmt_count, params, &res, err);
    if (st != OG_OK)
        goto out;
    if (PQnfields(res) != 2 || PQntuples(res) != 1) {
        st = og_error_set(err, OG_ERR_INTERNAL, false, "scan_overdue_count: unexpected result");
        goto out;
    }
    out->overdue = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    if (!PQgetisnull(res, 0, 1))
        snprintf(out->oldest_expire_at, sizeof(out->oldest_expire_at), "%s", PQgetvalue(res, 0, 1));
    PQclear(res);
    res = NULL;

    params[1] = NULL;
    params[2] = NULL;
    params[3] = lim;
    st = db_call(db, &sweep_stmt_page, params, &res, err);
    if (st != OG_OK)
        goto out;
    if (PQnfields(res) != 2 || PQntuples(res) > SWEEP_SAMPLE_MAX) {
        st = og_error_set(err, OG_ERR_INTERNAL, false, "scan_overdue: unexpected result");
        goto out;
    }
    for (int i = 0; i < PQntuples(res); i++) {
        snprintf(out->sample[i], sizeof(out->sample[i]), "%s", PQgetvalue(res, i, 0));
        snprintf(out->sample_expire_at[i], sizeof(out->sample_expire_at[i]), "%s",
                 PQgetvalue(res, i, 1));
    }
    out->nsample = PQntuples(res);
out:
    PQclear(res);
    return st;
}
