/* The commit protocol: how the batch (consumer/batch.h) is committed, in this order, and only in
 * this order, so that a crash at any point loses nothing:
 *   1. claim_payment for every payment result (first: a payment consumed with a cancel that fell
 *      due meanwhile was made before that cancel); a payment result that did not decode, or
 *      that the gate refused for good, is recorded with record_payment_refused (an exception for
 *      review) before its dead letter is produced in step 3; one whose order row is locked (a
 *      short lock wait of its own, COMMIT_PAYMENT_LOCK_MS) or whose hook fails is held back alone
 *      in the retry set (consumer/retry.h); refund results with record_refund;
 *   2. claim_cancel for every cancel in the batch, in one statement, but for the orders whose
 *      payment is held back (they wait behind it); busy answers go to the retry set, an order a
 *      hook fails alone too (then, past consumer.hook_retry_ms, a dead letter);
 *   3. for not_due orders, due_times() and, unless due within consumer.local_due_ms (then the
 *      retry set), one new delayed message each on the delay topic that fits the time left
 *      (consumer/levels.h), produced with the idempotent producer;
 *   4. every produced message (re-schedules, dead letters) acknowledged;
 *   5. offsets stored (offset + 1 of the last message per partition, but never past a message
 *      whose order waits in the retry set).
 * The stored offsets reach the group coordinator through librdkafka's auto-commit, on revoke and
 * on shutdown. A crash before 5 redelivers the batch; the gate answers already_cancelled or
 * duplicate for what was done.
 *
 * Two batches at most are out at once (commit_flush_overlap): while the claim sessions of the
 * pool (consumer/claim_pool.h) claim their parts of one batch, the loop builds the next, runs
 * its steps 1 and hands out its step 2 (its parts queued behind the first batch's on each
 * session); the first batch is then finished (its parts' answers read, steps 3 to 5) before the
 * second is. Offsets are stored batch after batch, each only after every part of its batch has
 * committed.
 *
 * Owns the batch, the batch in flight before it, the retry set and the claims' buffers (struct
 * commit). Works with the handles
 * and settings its owner gives it (struct commit_env) and tells the owner of progress only
 * through env.progress and the readiness flags: it must not reach the consume loop, pause or
 * seek a partition, or poll the group member (the loop does all of that between flushes). */
#ifndef OG_CONSUMER_COMMIT_H
#define OG_CONSUMER_COMMIT_H

#include <librdkafka/rdkafka.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/cfg.h"
#include "common/db.h"
#include "common/delay.h"
#include "common/error.h"
#include "common/gate.h"
#include "consumer/batch.h"
#include "consumer/claim_pool.h"
#include "consumer/consumer_metrics.h"
#include "consumer/retry.h"

/* When the database says not_due although the expire_at it reports has passed by our clock, our
 * clock runs ahead of the database's: look again this much later instead of spinning. */
#define COMMIT_SKEW_RETRY_MS 250
/* A payment's claim waits at most COMMIT_PAYMENT_LOCK_MS for a row lock (its order's, held by an
 * order service); the waits cut short in one flush add up to at most
 * COMMIT_PAYMENT_LOCK_BUDGET_MS, after which each claim of that flush waits
 * COMMIT_PAYMENT_LOCK_MIN_MS (lock_timeout 0 would mean no bound). A payment whose wait was cut
 * short is held in the retry set like a busy cancel (same backoff), for as long as the row stays
 * locked: a lock is not the payment's fault, so it is never dead-lettered for it. */
#define COMMIT_PAYMENT_LOCK_MS        100
#define COMMIT_PAYMENT_LOCK_BUDGET_MS 1000
#define COMMIT_PAYMENT_LOCK_MIN_MS    1
/* A payment held that long logs payment_locked again (warning), every that many tries. */
#define COMMIT_PAYMENT_LOCK_LOG_EVERY 30
/* An order a hook fails is claimed again after 1 s, doubling up to 30 s, until
 * consumer.hook_retry_ms. While a hook fails every order of the batch, the batch is bisected
 * (gate_claim_cancel_isolating) only every COMMIT_HOOK_BISECT_EVERY attempts. */
#define COMMIT_HOOK_BASE_MS      1000
#define COMMIT_HOOK_CAP_MS       30000
#define COMMIT_HOOK_BISECT_EVERY 8
/* Longest wait for delivery reports inside one flush of the consume loop; the loop keeps polling
 * (partitions stalled) when they take longer. */
#define COMMIT_DELIVERY_WAIT_MS 2000

/* What the protocol works with and does not own: set by the owner before the first flush (and
 * before commit_take_retries), freed by the owner after commit_free. */
struct commit_env {
    /* consumer.busy_retry_ms, hook_retry_ms, local_due_ms, level_margin_ms, max_wait_ms,
     * kafka.dead_letter_topic */
    const struct og_config *cfg;
    rd_kafka_t *rk;       /* the group member: step 5 stores offsets on it, nothing else */
    rd_kafka_t *producer; /* re-schedules and dead letters (idempotent) */
    struct db *db;        /* the consume loop's session */
    /* The other sessions a claim of cancels is split across (consumer/claim_pool.h); NULL:
     * every claim on db alone. */
    struct claim_pool *claim_pool;
    /* The subscribed topics: a retry slot keeps a pointer to one of these names. */
    char *const *topics;
    size_t ntopics;
    const struct delay_levels *levels; /* where re-schedules go (consumer/levels.h) */
    struct consumer_metrics *m;
    /* The owner's readiness: db_ok follows each database answer or failure, kafka_ok is set by
     * each acknowledged message. */
    bool *db_ok, *kafka_ok;
    /* Called after each database answer of a step (a proof of progress: the owner pings its
     * watchdog), never after a failure; NULL: nobody listens. */
    void (*progress)(void *arg);
    void *progress_arg;
};

/* One batch's claim of cancels (step 2), from its start to the reading of its answers: across
 * sessions, its parts are out on the pool's workers in between. */
struct commit_claim {
    struct gate_cancel_row *rows; /* claim results, cap of them (each part's from its start) */
    const char **nos;             /* the claim's order numbers grouped by part, cap of them */
    struct claim_pool_part parts[CLAIM_POOL_SESSIONS_MAX];
    bool pooled[CLAIM_POOL_SESSIONS_MAX]; /* part k is a worker's */
    int worker[CLAIM_POOL_SESSIONS_MAX];  /* part k's worker (k >= 1) */
    bool part_ok[CLAIM_POOL_SESSIONS_MAX];
    size_t n, nparts, nrows;
    bool started;    /* claimed or handed out: its answers are to be read (commit_claim_end) */
    bool done;       /* single session: the call committed (its rows are in rows) */
    int64_t t0_us;   /* the claim's start (monotonic) */
    int64_t handed;  /* when its parts were handed out (monotonic ms; claim_pool_wait's bound) */
    double claim_ms; /* from the start to its answers read */
    struct og_error hook_err; /* the last hook failure of a part bisected on the loop's session */
};

struct commit {
    struct commit_env env;
    /* The batch the loop fills and flushes. */
    struct batch batch;
    /* The batch flushed before it while its claim is out (commit_flush_overlap), or one whose
     * finish failed: finished before batch, whatever happens. n == 0: none. */
    struct batch flight;
    struct commit_claim *claim, *flight_claim; /* batch's and flight's; claims[] */
    struct commit_claim claims[2];
    struct batch *cur; /* the batch the steps work on: &batch, or &flight while finishing it */
    struct retry_set retry;
    const char **nos; /* claim arguments, cap of them */
    bool *row_seen;   /* per claim row: an entry was matched to it */
    int hook_stalls;  /* flushes in a row a hook failed for every order of the batch */
};

enum commit_result {
    COMMIT_DONE,  /* committed (or nothing to do); the batch is empty */
    COMMIT_RETRY, /* something failed: keep the batch, back off, try again */
    COMMIT_WAIT,  /* only delivery reports are outstanding: poll and look again */
};

/* A batch and a retry set of cap entries each, and the claim's buffers; env is left as it is
 * (zeroed by the caller, then set). OG_ERR_NOMEM otherwise; commit_free frees what was made. */
enum og_status commit_init(struct commit *cm, size_t cap, struct og_error *err);
/* Frees what commit_init made. After the producer is gone: a late delivery report writes into
 * the batch. */
void commit_free(struct commit *cm);
/* Puts the due slots of the retry set (at_ms <= now_wall) back into the batch while it has room;
 * returns how many. Only while the batch has not been claimed yet (the loop is not stalled). */
size_t commit_take_retries(struct commit *cm, int64_t now_wall);
/* Produces the message entry e owes, its dead letter or its re-schedule (BATCH_PRODUCE ->
 * BATCH_INFLIGHT; on an immediate failure, a full local queue, it stays BATCH_PRODUCE). */
void commit_produce(struct commit *cm, struct batch_entry *e);
/* Runs the steps above as far as they go, waiting up to wait_ms for delivery reports: the batch
 * in flight first (commit_flush_overlap), then the batch. COMMIT_DONE: both are finished, their
 * offsets stored, and both are empty. */
enum commit_result commit_flush(struct commit *cm, int wait_ms);
/* Like commit_flush, but a batch whose claim is split across sessions is not waited for: once
 * its steps 1 are done and its parts handed out (the loop's own part claimed), it becomes the
 * batch in flight and COMMIT_DONE is returned with the batch empty, ready for the next one. The
 * batch in flight before it is finished first, after this one's parts were handed out: when
 * that fails, this one's answers are read too and both stay (flight, then batch) for the retry.
 * A batch is kept in flight only when its split uses the same workers as the one before it
 * (else the one before is finished before this one's parts are handed out): one order's parts
 * then run on one session, in batch order. */
enum commit_result commit_flush_overlap(struct commit *cm, int wait_ms);
/* True when a batch is in flight and its parts have all answered (or it waits for a retry):
 * the next flush finishes it, even with the batch empty. Does not wait. */
bool commit_flight_answered(struct commit *cm);
/* When the batch in flight's parts were handed out (monotonic ms); 0 when none is out. */
int64_t commit_flight_handed_ms(const struct commit *cm);
/* Batches claimed and not finished: the batch in flight, and the batch while its claim is out
 * within a flush (0 to 2). */
size_t commit_in_flight(const struct commit *cm);

#endif
