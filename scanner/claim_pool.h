/* Claim sessions for --workers N: N threads, each with its own database
 * session, claim the pages the run hands them.
 *
 * The run's thread keeps every decision (caps, stop, checkpoint, run log):
 * it hands out pages in keyset order with claim_pool_submit, takes the
 * finished claims back with claim_pool_collect, and asks for the
 * checkpoint. A thread only claims the page it was given and reports. Each
 * function here is called by the run's thread only. */
#ifndef OG_SCANNER_CLAIM_POOL_H
#define OG_SCANNER_CLAIM_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/db.h"
#include "common/error.h"
#include "common/gate.h"
#include "scanner/runlog.h"

/* One page of the keyset walk, with room for its claim's outcomes. */
struct claim_page {
    int n;
    char (*order_no)[GATE_ORDER_NO_MAX + 1];
    char (*expire_at)[RUNLOG_TS_MAX];
    const char **ptrs; /* order_no[i], for gate_claim_cancel */
    struct gate_cancel_row *rows;
};

/* Room for size orders. */
enum og_status claim_page_alloc(struct claim_page *page, int size, struct og_error *err);
void claim_page_free(struct claim_page *page);

/* A finished claim, as claim_pool_collect hands it back. */
struct claim_done {
    const struct claim_page *page; /* rows[0..nrows) hold the outcomes */
    size_t nrows;
    int64_t seq;    /* page number of the run, from 0 */
    int session;    /* which claim session, from 1 */
    double page_s;  /* the page query, as given to claim_pool_submit */
    double claim_s; /* the claim */
    enum og_status st;
    const struct og_error *err;      /* why, when st is not OG_OK */
    const struct og_error *hook_err; /* the hook's failure when a row is GATE_HOOK_FAILED */
};

struct claim_pool;

/* Starts one thread per session (dbs[0..n), each used by its thread only)
 * with pages of batch_size. *out is NULL unless OG_OK. */
enum og_status claim_pool_start(struct claim_pool **out, struct db **dbs, int n, int batch_size,
                                struct og_error *err);
/* Stops the threads after the claims in flight and frees the pool. Waits
 * only for claims already handed out (each bounded by the database retry
 * policy). NULL is fine. */
void claim_pool_free(struct claim_pool *pool);

/* True when a session is free for claim_pool_submit. */
bool claim_pool_has_idle(struct claim_pool *pool);
/* Hands a copy of page (n >= 1, at most batch_size) to a free session; the
 * caller checked claim_pool_has_idle. The pool's cursor moves to the page's
 * end. */
void claim_pool_submit(struct claim_pool *pool, const struct claim_page *page, double page_s);
/* Where the next page starts: the end of the last page handed out. */
const struct runlog_checkpoint *claim_pool_cursor(const struct claim_pool *pool);

/* Calls done for every finished claim, in no particular order, and frees
 * their sessions. done returns false for a claim that failed or could not be
 * counted: from then on the checkpoint stays where it is. Returns how many
 * claims it handed back. */
int claim_pool_collect(struct claim_pool *pool, bool (*done)(const struct claim_done *, void *),
                       void *arg);
/* Blocks until a claim has finished, unless none is in flight. */
void claim_pool_wait(struct claim_pool *pool);
/* True while a claim is in flight or finished but not collected. */
bool claim_pool_busy(struct claim_pool *pool);
/* Pages go out in keyset order and each claim is all or nothing, so all
 * before the oldest page not yet collected is claimed and counted: the
 * checkpoint is where that page starts (with none out, the cursor). Sets *cp
 * and returns true, or returns false once a claim has failed. */
bool claim_pool_checkpoint(struct claim_pool *pool, struct runlog_checkpoint *cp);

#endif
