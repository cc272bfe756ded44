/* The claim pool: the database sessions past the consume loop's own that a batch's claim of
 * cancels is split across (consumer.claim_sessions - 1 of them), one worker thread per session.
 * In a burst the claim's backend is the limit, not the consumer: a second backend claiming a
 * disjoint part of the batch at the same time adds most of a second one's speed.
 *
 * Owns the worker threads, their sessions (each a struct db made like the loop's: the same
 * settings, the same role, application_name "ordergate-consumer-claim-N") and the parts handed
 * to them. A worker runs gate_claim_cancel for the parts it is given, one at a time in the order
 * they were handed over, and nothing else: it never touches the batch, the retry set, Kafka or
 * the loop. The caller (consumer/commit.c, on the loop's thread) builds each part's order list
 * and rows buffer, hands it to the worker it chooses, waits for the answers (bounded) and reads
 * them. A worker writes only its own session, the parts it was handed (each until it reports it
 * done) and the connected-sessions gauge, which, like the logs it writes, is safe from any thread
 * (common/metrics.h, common/log.h).
 *
 * Each worker has a FIFO of CLAIM_POOL_QUEUE_MAX parts: the part it is claiming and the next
 * batch's part queued behind it, so that its session starts on the next part the moment it
 * commits one, without waiting for the loop. A worker whose FIFO is full takes no part
 * (claim_pool_submit returns false, and the caller claims the part itself at once). That does not
 * happen in the consumer's use (two batches out at most, one part each per worker); if it did,
 * an order of the part still held by the worker's call would answer busy to the caller's claim
 * (SKIP LOCKED) and be retried: late, never claimed twice.
 *
 * A worker connects on its own thread, with the database settings' backoff, and again whenever
 * its session is lost: until then it takes no part, and the claims go on the sessions there
 * are (the loop's own at least). A worker that loses its session, or drops it because its
 * caller stopped waiting for its call, answers every part still queued behind as failed (nothing
 * was sent for them): their batches claim those orders again. */
#ifndef OG_CONSUMER_CLAIM_POOL_H
#define OG_CONSUMER_CLAIM_POOL_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/cfg.h"
#include "common/error.h"
#include "common/gate.h"
#include "common/hook_timing.h"
#include "common/metrics.h"

/* The most sessions consumer.claim_sessions allows (the loop's own and 7 workers). */
#define CLAIM_POOL_SESSIONS_MAX 8
/* The parts one worker holds at most: the one it claims and one queued behind it. Two because at
 * most two batches are out at once (consumer/commit.h: the one whose claim runs while the loop
 * builds and hands out the next), and each batch gives a worker at most one part. */
#define CLAIM_POOL_QUEUE_MAX 2

/* One part of a split claim: set by the caller before claim_pool_submit, answered by the worker
 * (st, err, nrows, db_ms, then done) at the latest before claim_pool_wait on it returns. nos
 * (the strings too) and rows (room for n rows) belong to the caller and must stay put until
 * then. */
struct claim_pool_part {
    const char *const *nos;
    size_t n;
    struct gate_cancel_row *rows;
    size_t nrows;
    enum og_status st;
    struct og_error err;
    double db_ms; /* the worker's wait for the server (db_last_ms) */
    bool done;    /* answered; false until then, and for a part abandoned past the bound */
};

struct claim_pool;

/* workers (0..CLAIM_POOL_SESSIONS_MAX - 1) sessions made from cfg like the loop's (nothing
 * connected, no thread started: the first claim_pool_ready does). wait_ms bounds
 * claim_pool_wait. connected: the gauge of the workers' sessions connected (each worker adds
 * its own while connected), may be NULL. timing: the hooks' wall-time histogram the loop's
 * session feeds (common/hook_timing.h; its metric updates are safe from any thread), attached
 * to every worker's session too; NULL: none. stop: the
 * process's stop flag, for the sessions' retries. *out is NULL when workers is 0. connected
 * and stop must outlive the pool; cfg is read only here. */
enum og_status claim_pool_new(const struct og_config *cfg, int workers, int wait_ms,
                              struct metric *connected, struct hook_timing *timing,
                              volatile sig_atomic_t *stop, struct claim_pool **out,
                              struct og_error *err);
/* Starts the workers on the first call (each connects on its own thread) and returns how many
 * are connected with room in their FIFO now: the parts a claim may hand out besides the loop's
 * own. Their indexes (0..workers - 1), in order, go to idx when not NULL (room for
 * CLAIM_POOL_SESSIONS_MAX). pool may be NULL (0). */
size_t claim_pool_ready(struct claim_pool *pool, int *idx);
/* Queues part on worker (an index claim_pool_ready gave), which claims it once the parts
 * queued before it have answered; false when that worker is not connected or its FIFO is full
 * (the caller claims the part itself). */
bool claim_pool_submit(struct claim_pool *pool, int worker, struct claim_pool_part *part);
/* True when every one of parts[0..n) (each handed over with claim_pool_submit, or answered by
 * the caller itself) is answered; does not wait. */
bool claim_pool_answered(struct claim_pool *pool, struct claim_pool_part *const *parts, size_t n);
/* Waits until every one of parts[0..n) is answered, at most the pool's wait_ms from since_ms
 * (monotonic: when the parts were handed over, so that the caller's own part, run meanwhile,
 * does not add to the bound), or until the process's stop flag is raised. A part not answered
 * by then is given up: done stays false and the caller retries its orders like those of a
 * failed call; a worker whose call is given up drops its session when the call returns (each
 * call is bounded by the session's own reply bound, common/db.h), answers the parts queued
 * behind it as failed, and connects anew; a given-up part still queued is never sent. */
void claim_pool_wait(struct claim_pool *pool, struct claim_pool_part *const *parts, size_t n,
                     int64_t since_ms);
/* Gives up at once every one of parts[0..n) not answered yet, as claim_pool_wait does past its
 * bound: for a caller about to free them (a batch in flight at exit). */
void claim_pool_give_up(struct claim_pool *pool, struct claim_pool_part *const *parts, size_t n);
/* Stops the workers, waiting for them until deadline_ms (monotonic), and frees the pool
 * (*pool = NULL; *pool may be NULL: true). False when one did not stop in time: the pool is
 * left as it is, still using cfg, and the caller must exit without freeing that. */
bool claim_pool_stop(struct claim_pool **pool, int64_t deadline_ms);

#endif
