/* The commit protocol (consumer/commit.h): the five steps that finish a batch, in the order they
 * run, each followed by what it decides for one entry, then what the steps share.
 *
 * Owns the batch's entries from the flush on (and the batch in flight's until it is stored), the
 * retry set's slots and the claims' buffers (a claim's parts are the pool's workers' to answer
 * while they are out, consumer/claim_pool.h).
 * Must not touch the consume loop (its pauses, its polls, its stall, its watchdog): progress goes
 * out through env.progress and env.db_ok/kafka_ok, and the loop acts on the answer of
 * commit_flush. The SQL it sends is the gate's (common/gate.h) and one statement of its own. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/pgarray.h"
#include "consumer/claim_pool.h"
#include "consumer/commit.h"
#include "consumer/levels.h"

/* Rounded up to the millisecond: a due time a fraction early would meet
 * not_due again. */
static const struct db_stmt commit_stmt_due_times = {
    "og_due_times",
    "SELECT order_no, ceil(extract(epoch FROM expire_at) * 1000)::bigint "
    "FROM ordergate.due_times($1::text[])",
    1};

static enum commit_result commit_payments(struct commit *cm);
static bool commit_payment_locked(struct commit *cm, struct batch_entry *e, int64_t now);
static enum commit_result commit_payment_hook_failed(struct commit *cm, struct batch_entry *e,
                                                     struct og_error *err, int64_t now);
static void commit_payment_to_dlq(struct commit *cm, struct batch_entry *e,
                                  const struct og_error *err);
static enum og_status commit_record_refused(struct commit *cm, struct batch_entry *e);
static bool commit_refund(struct commit *cm, struct batch_entry *e);
static enum commit_result commit_run(struct commit *cm, int wait_ms, bool overlap);
static enum commit_result commit_flight_finish(struct commit *cm, int wait_ms);
static enum commit_result commit_finish(struct commit *cm, struct commit_claim *cl,
                                        enum commit_result r, int wait_ms);
static enum commit_result commit_claim_start(struct commit *cm, struct commit_claim *cl,
                                             int wait_ms, enum commit_result *flight);
static enum commit_result commit_claim_end(struct commit *cm, struct commit_claim *cl);
static bool commit_claim_out(const struct commit_claim *cl);
static void commit_gauge(struct commit *cm);
static size_t commit_claim_parts(struct commit *cm, size_t n, int *worker);
static size_t commit_claim_part_of(const char *order_no, size_t nparts);
static void commit_claim_hand_out(struct commit *cm, struct commit_claim *cl);
static bool commit_claim_read(struct commit *cm, struct commit_claim *cl);
static enum commit_result commit_reminders(struct commit *cm);
static void commit_behind_payment(struct commit *cm, struct batch_entry *e, int64_t pay_at,
                                  int64_t now);
static void commit_busy(struct commit *cm, struct batch_entry *e, int64_t now);
static void commit_busy_give_up(struct commit *cm, struct batch_entry *e, int64_t now);
static void commit_hook_failed(struct commit *cm, struct batch_entry *e, const char *hook,
                               const struct og_error *hook_err, int64_t now);
static void commit_cancel_to_dlq(struct commit *cm, struct batch_entry *e,
                                 const struct og_error *hook_err);
static void commit_hook_failed_all(struct commit *cm, size_t n, const struct og_error *err);
static enum commit_result commit_due_times(struct commit *cm);
static bool commit_not_due_local(struct commit *cm, struct batch_entry *e, int64_t now);
static enum commit_result commit_deliver(struct commit *cm, int wait_ms);
static void commit_store(struct commit *cm, double claim_ms);
static void commit_progress(struct commit *cm);
static void commit_db_failed(struct commit *cm, const char *step, const struct og_error *err);
static const char *commit_topic_name(const struct commit *cm, const char *topic);
static int commit_retry_slot(struct commit *cm, struct batch_entry *e, int64_t now);
static void commit_to_dlq(struct commit *cm, struct batch_entry *e, enum batch_state state,
                          const char *key, const char *value, size_t len, const char *reason);
static int commit_row_cmp(const void *a, const void *b);
static struct gate_cancel_row *commit_row_find(struct gate_cancel_row *rows, size_t n,
                                               const char *order_no);

enum og_status commit_init(struct commit *cm, size_t cap, struct og_error *err)
{
    enum og_status st;

    cm->cur = &cm->batch;
    cm->claim = &cm->claims[0];
    cm->flight_claim = &cm->claims[1];
    for (size_t i = 0; i < 2; i++) {
        cm->claims[i].rows = calloc(cap, sizeof(*cm->claims[i].rows));
        cm->claims[i].nos = calloc(cap, sizeof(*cm->claims[i].nos));
        if (cm->claims[i].rows == NULL || cm->claims[i].nos == NULL)
            return og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
    }
    cm->nos = calloc(cap, sizeof(*cm->nos));
    cm->row_seen = calloc(cap, sizeof(*cm->row_seen));
    if (cm->nos == NULL || cm->row_seen == NULL)
        return og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
    st = batch_init(&cm->batch, cap, err);
    if (st == OG_OK)
        st = batch_init(&cm->flight, cap, err);
    if (st == OG_OK)
        st = retry_init(&cm->retry, cap, err);
    return st;
}

void commit_free(struct commit *cm)
{
    /* A batch in flight at exit (its offsets not stored): its parts out are given up first, so
     * that no worker writes into what is freed here. */
    for (size_t i = 0; i < 2; i++) {
        struct commit_claim *cl = &cm->claims[i];
        struct claim_pool_part *out[CLAIM_POOL_SESSIONS_MAX];
        size_t n = 0;

        for (size_t k = 0; cl->started && k < cl->nparts; k++)
            if (cl->pooled[k])
                out[n++] = &cl->parts[k];
        if (n > 0)
            claim_pool_give_up(cm->env.claim_pool, out, n);
        cl->started = false;
    }
    batch_free(&cm->batch);
    batch_free(&cm->flight);
    retry_free(&cm->retry);
    for (size_t i = 0; i < 2; i++) {
        free(cm->claims[i].rows);
        free(cm->claims[i].nos);
        cm->claims[i].rows = NULL;
        cm->claims[i].nos = NULL;
    }
    free(cm->nos);
    free(cm->row_seen);
    cm->nos = NULL;
    cm->row_seen = NULL;
}

enum commit_result commit_flush(struct commit *cm, int wait_ms)
{
    enum commit_result r = commit_run(cm, wait_ms, false);

    /* Both: a batch may be left in flight only by commit_flush_overlap. */
    if (r == COMMIT_DONE && cm->flight.n > 0)
        r = commit_flight_finish(cm, wait_ms);
    return r;
}

enum commit_result commit_flush_overlap(struct commit *cm, int wait_ms)
{
    return commit_run(cm, wait_ms, true);
}

bool commit_flight_answered(struct commit *cm)
{
    struct commit_claim *cl = cm->flight_claim;
    struct claim_pool_part *out[CLAIM_POOL_SESSIONS_MAX];
    size_t n = 0;

    if (cm->flight.n == 0 || !cl->started)
        return cm->flight.n > 0; /* one whose finish failed: the next flush retries it */
    for (size_t k = 0; k < cl->nparts; k++)
        if (cl->pooled[k])
            out[n++] = &cl->parts[k];
    return claim_pool_answered(cm->env.claim_pool, out, n);
}

int64_t commit_flight_handed_ms(const struct commit *cm)
{
    return cm->flight.n > 0 && cm->flight_claim->started ? cm->flight_claim->handed : 0;
}

size_t commit_in_flight(const struct commit *cm)
{
    return (cm->flight.n > 0) + (cm->claim->started && cm->batch.n > 0);
}

/* The flush: the batch in flight first when its finish failed before (alone, from step 1: every
 * step goes by entry state, so what was done is not done again), then the batch's steps 1, its
 * claim started (its parts handed out behind the flight's), the flight finished, and then the
 * batch either finished too or, overlap and its parts out, kept in flight. */
static enum commit_result commit_run(struct commit *cm, int wait_ms, bool overlap)
{
    struct commit_claim *cl = cm->claim;
    enum commit_result r, f = COMMIT_DONE;

    if (cm->flight.n > 0 && !cm->flight_claim->started) {
        f = commit_flight_finish(cm, wait_ms);
        if (f != COMMIT_DONE)
            return f;
    }
    if (cm->batch.n == 0)
        return commit_flight_finish(cm, wait_ms);
    cm->cur = &cm->batch;
    cl->started = false;
    /* Payments first: a payment consumed into the same batch as a cancel
     * that fell due meanwhile was made before that cancel reached the gate,
     * and the gate lets the first claim win. A cancel of the batch in flight
     * holds its order's row while its part runs: the payment waits for it
     * (bounded, step 1c) and the gate decides. */
    r = commit_payments(cm);
    if (r == COMMIT_DONE)
        r = commit_reminders(cm);
    if (r == COMMIT_DONE)
        r = commit_claim_start(cm, cl, wait_ms, &f);
    /* The batch before it, finished before it: offsets in batch order. */
    if (f == COMMIT_DONE && cm->flight.n > 0)
        f = commit_flight_finish(cm, wait_ms);
    cm->cur = &cm->batch;
    if (f != COMMIT_DONE) {
        /* The batch before failed (kept for the retry): this one waits behind it, its claim's
         * answers read so that no part of it is out while the loop backs off. */
        (void)commit_finish(cm, cl, COMMIT_RETRY, 0);
        commit_gauge(cm);
        return f;
    }
    if (r == COMMIT_DONE && overlap && commit_claim_out(cl)) {
        /* In flight: the loop builds the next batch meanwhile. The flight was finished and
         * cleared above, so the swap hands the loop an empty batch. */
        struct batch t = cm->flight;
        struct commit_claim *tc = cm->flight_claim;

        cm->flight = cm->batch;
        cm->batch = t;
        cm->flight_claim = cl;
        cm->claim = tc;
        cm->claim->started = false;
        metric_inc(cm->env.m->batches_overlapped, 1);
        commit_gauge(cm);
        return COMMIT_DONE;
    }
    r = commit_finish(cm, cl, r, wait_ms);
    commit_gauge(cm);
    return r;
}

/* The batch in flight finished: its answers read (waiting for its parts, bounded), steps 3 to 5.
 * A batch whose finish failed before goes through every step again (by entry state), its claim
 * then on the sessions there are now, waited for. */
static enum commit_result commit_flight_finish(struct commit *cm, int wait_ms)
{
    enum commit_result r = COMMIT_DONE;

    if (cm->flight.n == 0)
        return COMMIT_DONE;
    cm->cur = &cm->flight;
    if (!cm->flight_claim->started) {
        r = commit_payments(cm);
        if (r == COMMIT_DONE)
            r = commit_reminders(cm);
        if (r == COMMIT_DONE)
            r = commit_claim_start(cm, cm->flight_claim, wait_ms, NULL);
    }
    r = commit_finish(cm, cm->flight_claim, r, wait_ms);
    cm->cur = &cm->batch;
    commit_gauge(cm);
    return r;
}

/* Steps 2 (its answers read), 3 to 5 of cm->cur, whose steps 1 gave r. */
static enum commit_result commit_finish(struct commit *cm, struct commit_claim *cl,
                                        enum commit_result r, int wait_ms)
{
    struct batch *b = cm->cur;

    if (cl->started) {
        enum commit_result c = commit_claim_end(cm, cl);
        if (r == COMMIT_DONE)
            r = c;
    }
    if (r == COMMIT_DONE)
        r = commit_due_times(cm);
    /* Deliveries run even after a database failure: dead letters already
     * produced must be waited for in any case. */
    {
        enum commit_result d = commit_deliver(cm, r == COMMIT_DONE ? wait_ms : 0);
        if (r == COMMIT_DONE)
            r = d;
    }
    if (r != COMMIT_DONE)
        return r;
    for (size_t i = 0; i < b->n; i++)
        if (b->e[i].state != BATCH_DONE)
            return COMMIT_RETRY; /* cannot happen; never store past unfinished work */
    commit_store(cm, cl->claim_ms);
    batch_clear(b);
    cl->claim_ms = 0;
    return COMMIT_DONE;
}

/* The batches out, for whoever watches the pipeline. */
static void commit_gauge(struct commit *cm)
{
    if (cm->env.m != NULL && cm->env.m->batches_in_flight != NULL)
        metric_set(cm->env.m->batches_in_flight, (double)commit_in_flight(cm));
}

/* ------------------------------------------------------------------------------------------ */
/* Step 1d: payment reminders, all of the batch's in one claim_reminder statement
 * (gate_claim_reminders: one round trip, whatever their number), after the batch's payments (a
 * payment consumed with a reminder is recorded first, and the reminder then finds the order
 * paid). The claim is idempotent: a batch retried after a later step failed claims them again
 * and gets already_sent. not_due (the deadline moved out) and in_flight (a hold or a charge: try
 * again at its end) re-schedule the message through the delay topic that fits, like a cancel's
 * not_due; in_flight without a time (given up), not_pending, already_sent and not_found finish
 * it. A locked order row is not waited for (in_flight, one second on). */
static enum commit_result commit_reminders(struct commit *cm)
{
    struct batch *b = cm->cur;
    size_t n = 0, k = 0;
    const char **nos;
    int *offs;
    enum gate_outcome *outs;
    int64_t *dues, now;
    struct og_error err = {0};
    enum og_status st;

    for (size_t i = 0; i < b->n; i++) {
        struct batch_entry *e = &b->e[i];
        if (e->kind != BATCH_REMINDER || e->state != BATCH_NEW)
            continue;
        if (!batch_live(b, e))
            e->state = BATCH_DONE;
        else
            n++;
    }
    if (n == 0)
        return COMMIT_DONE;
    nos = calloc(n, sizeof(*nos));
    offs = calloc(n, sizeof(*offs));
    outs = calloc(n, sizeof(*outs));
    dues = calloc(n, sizeof(*dues));
    if (nos == NULL || offs == NULL || outs == NULL || dues == NULL) {
        og_error_set(&err, OG_ERR_NOMEM, false, "reminder claims: out of memory");
        commit_db_failed(cm, "claim_reminder", &err);
        free(nos), free(offs), free(outs), free(dues);
        return COMMIT_RETRY;
    }
    for (size_t i = 0; i < b->n; i++) {
        struct batch_entry *e = &b->e[i];
        if (e->kind == BATCH_REMINDER && e->state == BATCH_NEW) {
            nos[k] = e->order_no;
            offs[k++] = e->reminder_offset;
        }
    }
    st = gate_claim_reminders(cm->env.db, n, nos, offs, outs, dues, &err);
    metric_observe(cm->env.m->db_seconds, db_last_ms(cm->env.db) / 1000.0);
    if (st != OG_OK) {
        commit_db_failed(cm, "claim_reminder", &err);
        free(nos), free(offs), free(outs), free(dues);
        return COMMIT_RETRY;
    }
    *cm->env.db_ok = true;
    now = clock_wall_ms();
    k = 0;
    for (size_t i = 0; i < b->n; i++) {
        struct batch_entry *e = &b->e[i];
        if (e->kind != BATCH_REMINDER || e->state != BATCH_NEW)
            continue;
        e->outcome = outs[k];
        int64_t due_ms = dues[k++];
        if (cm->env.m->reminder_claims[e->outcome] != NULL)
            metric_inc(cm->env.m->reminder_claims[e->outcome], 1);
        if (e->outcome == GATE_SENT) {
            double late = (double)(now - due_ms) / 1000.0;
            metric_inc(cm->env.m->reminders_sent, 1);
            metric_observe(cm->env.m->reminder_lateness, late > 0 ? late : 0);
            log_info("reminder_sent", "order_no=%s offset_seconds=%" PRId32 " lateness_ms=%" PRId64,
                     e->order_no, e->reminder_offset, now - due_ms);
        }
        if ((e->outcome == GATE_NOT_DUE || e->outcome == GATE_IN_FLIGHT) && due_ms > 0) {
            e->new_due_ms = due_ms > now ? due_ms : now + COMMIT_SKEW_RETRY_MS;
            e->dest_topic = levels_reschedule_topic(cm->env.levels, cm->env.cfg,
                                                    b->tps[e->tp].topic, now, &e->new_due_ms);
            e->state = BATCH_PRODUCE;
            continue;
        }
        e->state = BATCH_DONE;
    }
    free(nos), free(offs), free(outs), free(dues);
    return COMMIT_DONE;
}

/* ------------------------------------------------------------------------------------------ */
/* Step 1: payment results, one claim_payment each (idempotent by txn_no), each waiting for a row
 * lock only briefly (COMMIT_PAYMENT_LOCK_MS, within COMMIT_PAYMENT_LOCK_BUDGET_MS per flush);
 * one whose row is locked or whose hook fails is held back alone (commit_payment_locked,
 * commit_payment_hook_failed); the refused ones recorded (commit_record_refused); refund results
 * (commit_refund). */
static enum commit_result commit_payments(struct commit *cm)
{
    struct batch *b = cm->cur;
    int lock_spent_ms = 0;

    for (size_t i = 0; i < b->n; i++) {
        struct batch_entry *e = &b->e[i];
        struct gate_payment_result res;
        struct og_error err = {0};
        enum og_status st;
        int wait_ms;

        if (e->state == BATCH_RECORD) {
            if (!batch_live(b, e))
                e->state = BATCH_DONE; /* the partition's next owner records it */
            else if (commit_record_refused(cm, e) != OG_OK)
                return COMMIT_RETRY;
            continue;
        }
        if (e->kind == BATCH_REFUND && e->state == BATCH_NEW) {
            if (!batch_live(b, e))
                e->state = BATCH_DONE;
            else if (!commit_refund(cm, e))
                return COMMIT_RETRY;
            continue;
        }
        if (e->kind != BATCH_PAYMENT || e->state != BATCH_NEW)
            continue;
        if (!batch_live(b, e)) {
            e->state = BATCH_DONE;
            continue;
        }
        wait_ms = COMMIT_PAYMENT_LOCK_BUDGET_MS - lock_spent_ms;
        if (wait_ms > COMMIT_PAYMENT_LOCK_MS)
            wait_ms = COMMIT_PAYMENT_LOCK_MS;
        if (wait_ms < COMMIT_PAYMENT_LOCK_MIN_MS)
            wait_ms = COMMIT_PAYMENT_LOCK_MIN_MS;
        /* The message's currency and charge reference when it names them (codec: "" when
         * absent): the order's currency then, and no charge. */
        struct gate_payment pay = {
            .order_no = e->pay.order_no,
            .txn_no = e->pay.txn_no,
            .amount_cents = e->pay.amount_cents,
            .channel = e->pay.channel,
            .currency = e->pay.currency[0] != '\0' ? e->pay.currency : NULL,
            .charge_ref = e->pay.charge_ref[0] != '\0' ? e->pay.charge_ref : NULL,
            .lock_wait_ms = wait_ms,
        };
        st = gate_payment_claim(cm->env.db, &pay, &res, &err);
        metric_observe(cm->env.m->db_seconds, db_last_ms(cm->env.db) / 1000.0);
        if (st == OG_OK) {
            *cm->env.db_ok = true;
            commit_progress(cm);
            e->outcome = res.outcome;
            e->state = BATCH_DONE;
            metric_inc(cm->env.m->payments[res.outcome] ? cm->env.m->payments[res.outcome]
                                                        : cm->env.m->payments[GATE_UNKNOWN],
                       1);
            log_info("payment_applied", "order_no=%s txn_no=%s outcome=%s status=%s",
                     e->pay.order_no, e->pay.txn_no, gate_outcome_str(res.outcome),
                     order_status_str(res.status));
            continue;
        }
        if (gate_hook_failed(&err, NULL, 0)) {
            if (commit_payment_hook_failed(cm, e, &err, clock_wall_ms()) != COMMIT_DONE)
                return COMMIT_RETRY;
            continue;
        }
        if (gate_payment_locked(&err)) {
            *cm->env.db_ok = true; /* the database answered */
            lock_spent_ms += wait_ms;
            if (commit_payment_locked(cm, e, clock_wall_ms()))
                continue;
            log_warn("payment_locked",
                     "order_no=%s txn_no=%s msg=\"its order's row is locked; the retry set is "
                     "full: the batch is retried\"",
                     e->pay.order_no, e->pay.txn_no);
            return COMMIT_RETRY;
        }
        /* The same arguments will always be refused (invalid value, data
         * exception 22xxx, integrity violation 23xxx): dead-letter the
         * message rather than stall the partition behind it. */
        if (!err.retriable && (st == OG_ERR_ARG || strncmp(err.sqlstate, "22", 2) == 0 ||
                               strncmp(err.sqlstate, "23", 2) == 0)) {
            char q[600];
            log_warn("payment_rejected", "order_no=%s txn_no=%s error=%s", e->pay.order_no,
                     e->pay.txn_no, log_quote(q, sizeof(q), err.msg));
            commit_payment_to_dlq(cm, e, &err);
            if (commit_record_refused(cm, e) != OG_OK)
                return COMMIT_RETRY;
            continue;
        }
        commit_db_failed(cm, "claim_payment", &err);
        return COMMIT_RETRY;
    }
    return COMMIT_DONE;
}

/* Step 1b: a refund result, one record_refund (idempotent by refund_ref). Recorded, or already
 * recorded the same way: done. One the gate cannot apply (no such payment, no refund requested,
 * the reference reported otherwise, the payment refunded under another reference) changes
 * nothing there and becomes a dead letter with that reason, for the payment side to look into;
 * a refund that failed raises its own reconciliation alert. Returns false when the database
 * failed (the batch is retried). */
static bool commit_refund(struct commit *cm, struct batch_entry *e)
{
    struct gate_refund_outcome res;
    struct og_error err = {0};
    enum og_status st;
    char value[512], q[600];
    size_t len = 0;

    st = gate_record_refund(cm->env.db, e->refund.txn_no, e->refund.refund_ref, e->refund.succeeded,
                            &res, &err);
    metric_observe(cm->env.m->db_seconds, db_last_ms(cm->env.db) / 1000.0);
    if (st != OG_OK && !(st == OG_ERR_ARG && !err.retriable)) {
        commit_db_failed(cm, "record_refund", &err);
        return false;
    }
    *cm->env.db_ok = true;
    if (st == OG_OK) {
        metric_inc(cm->env.m->refunds[res.result], 1);
        switch (res.result) {
        case GATE_REFUND_REFUNDED:
        case GATE_REFUND_MANUAL_REVIEW:
        case GATE_REFUND_DUPLICATE:
            log_info("refund_recorded",
                     "txn_no=%s refund_ref=%s outcome=%s result=%s exception_id=%" PRId64
                     " state=%s resolution=%s",
                     e->refund.txn_no, e->refund.refund_ref,
                     e->refund.succeeded ? "succeeded" : "failed",
                     gate_refund_result_str(res.result), res.exception_id, res.state,
                     res.resolution);
            e->state = BATCH_DONE;
            return true;
        default:
            break;
        }
        snprintf(err.msg, sizeof(err.msg), "refund_rejected: %s",
                 gate_refund_result_str(res.result));
    } else {
        og_error_prefix(&err, "refund_rejected");
    }
    log_warn("refund_rejected", "txn_no=%s refund_ref=%s outcome=%s reason=%s", e->refund.txn_no,
             e->refund.refund_ref, e->refund.succeeded ? "succeeded" : "failed",
             log_quote(q, sizeof(q), err.msg));
    {
        struct og_error ignored = {0};
        bool ok = codec_encode_refund(&e->refund, value, sizeof(value), &len, &ignored) == OG_OK;
        commit_to_dlq(cm, e, BATCH_PRODUCE, e->refund.txn_no, ok ? value : NULL, len, err.msg);
    }
    return true;
}

/* Step 1c: a payment whose claim waited for a row lock another transaction holds (an order
 * service's, around its order) and was cut short (gate_claim_payment_bounded): nothing changed.
 * The payment is held back in the retry set and claimed again after the busy backoff
 * (RETRY_BASE_MS doubling to RETRY_CAP_MS) for as long as the row stays
 * locked: a lock is not the payment's fault, so it is never dead-lettered for it; what bounds it
 * is the holder's transaction. Its partition's offset waits at its message; every other
 * payment and cancel of the batch goes on. False when the retry set is full. */
static bool commit_payment_locked(struct commit *cm, struct batch_entry *e, int64_t now)
{
    struct retry_slot *s;
    int slot = commit_retry_slot(cm, e, now);
    int tries;

    if (slot < 0)
        return false;
    s = &cm->retry.slots[slot];
    tries = s->why == GATE_BUSY ? s->tries : 0;
    retry_wait(&cm->retry, slot, GATE_BUSY,
               now + clock_backoff_ms(RETRY_BASE_MS, RETRY_CAP_MS, tries));
    e->held = true;
    e->state = BATCH_DONE;
    if (tries % COMMIT_PAYMENT_LOCK_LOG_EVERY == 0)
        log_warn("payment_locked",
                 "order_no=%s txn_no=%s tries=%d locked_ms=%" PRId64 " msg=\"its order's row is "
                 "locked by another transaction; held back and retried locally, the rest of the "
                 "batch goes on\"",
                 e->pay.order_no, e->pay.txn_no, tries + 1, now - s->first_ms);
    else
        log_debug("payment_locked", "order_no=%s txn_no=%s tries=%d", e->pay.order_no,
                  e->pay.txn_no, tries + 1);
    return true;
}

/* Step 1d: a payment a hook failed (its claim rolled back). Held back in the retry set and claimed
 * again after 1 s, doubling up to 30 s (COMMIT_HOOK_BASE_MS, COMMIT_HOOK_CAP_MS), for
 * consumer.hook_retry_ms from its first hook failure; then recorded as refused (an exception: the
 * money was taken) and dead-lettered. The rest of the batch goes on. Returns COMMIT_RETRY only
 * when the record failed, or when the retry set is full (then the batch is retried whole, as a
 * database outage is). */
static enum commit_result commit_payment_hook_failed(struct commit *cm, struct batch_entry *e,
                                                     struct og_error *err, int64_t now)
{
    char hook[GATE_HOOK_NAME_MAX], q[600];
    int slot;

    gate_hook_failed(err, hook, sizeof(hook));
    *cm->env.db_ok = true;
    metric_inc(consumer_metrics_hook_failures(hook), 1);
    if (e->hook_first_ms == 0)
        e->hook_first_ms = now;
    if (now - e->hook_first_ms < cm->env.cfg->consumer.hook_retry_ms) {
        slot = commit_retry_slot(cm, e, now);
        if (slot >= 0) {
            struct retry_slot *s = &cm->retry.slots[slot];
            int tries = s->why == GATE_HOOK_FAILED ? s->tries : 0;

            s->hook_first_ms = e->hook_first_ms;
            retry_wait(&cm->retry, slot, GATE_HOOK_FAILED,
                       now + clock_backoff_ms(COMMIT_HOOK_BASE_MS, COMMIT_HOOK_CAP_MS, tries));
            e->held = true;
            e->state = BATCH_DONE;
            log_warn("hook_failed",
                     "order_no=%s txn_no=%s hook=%s sqlstate=%s tries=%d error=%s msg=\"payment "
                     "claim rolled back; held back and retried locally, the rest of the batch "
                     "goes on\"",
                     e->pay.order_no, e->pay.txn_no, hook, err->sqlstate, tries + 1,
                     log_quote(q, sizeof(q), err->msg));
            return COMMIT_DONE;
        }
        log_warn("hook_failed",
                 "order_no=%s txn_no=%s hook=%s sqlstate=%s error=%s msg=\"payment claim rolled "
                 "back; the retry set is full: the batch is retried\"",
                 e->pay.order_no, e->pay.txn_no, hook, err->sqlstate,
                 log_quote(q, sizeof(q), err->msg));
        return COMMIT_RETRY;
    }
    metric_inc(cm->env.m->retry_given_up[CONSUMER_METRICS_HOOK_FAILED], 1);
    log_error("hook_dead_lettered",
              "order_no=%s txn_no=%s hook=%s sqlstate=%s error=%s msg=\"a hook failed "
              "this payment beyond consumer.hook_retry_ms; recorded as refused and "
              "dead-lettered\"",
              e->pay.order_no, e->pay.txn_no, hook, err->sqlstate,
              log_quote(q, sizeof(q), err->msg));
    og_error_prefix(err, "hook_failed: sqlstate %s", err->sqlstate);
    commit_payment_to_dlq(cm, e, err);
    return commit_record_refused(cm, e) == OG_OK ? COMMIT_DONE : COMMIT_RETRY;
}

/* Turns a payment the gate refused for good into a dead letter, to be
 * recorded before it is produced. */
static void commit_payment_to_dlq(struct commit *cm, struct batch_entry *e,
                                  const struct og_error *err)
{
    char value[1024], reason[BATCH_DLQ_REASON_MAX];
    size_t len = 0;
    struct og_error ignored = {0};
    bool ok = codec_encode_payment(&e->pay, value, sizeof(value), &len, &ignored) == OG_OK;

    snprintf(reason, sizeof(reason), "payment_rejected: %s", err->msg);
    commit_to_dlq(cm, e, BATCH_RECORD, e->order_no, ok ? value : NULL, len, reason);
}

/* The dead letter of a payment result leaves a trace in the database
 * before it is produced (BATCH_RECORD -> BATCH_PRODUCE): the channel may
 * have taken the money, and reconciliation must see it. Idempotent by key
 * (the transaction number, else the message's position), so a redelivered
 * message is recorded once. On failure the entry stays BATCH_RECORD and the
 * batch is retried: the message is never dropped unrecorded. */
static enum og_status commit_record_refused(struct commit *cm, struct batch_entry *e)
{
    const struct batch_tp *tp = &cm->cur->tps[e->tp];
    char source[GATE_REFUSAL_SOURCE_MAX + 1], q[600];
    struct gate_refusal_result res;
    struct og_error err = {0};
    enum og_status st;

    snprintf(source, sizeof(source), "%s/%" PRId32 "/%" PRId64, tp->topic, tp->partition,
             e->offset);
    struct gate_refusal r = {
        .source = source,
        .order_no = e->pay.order_no[0] ? e->pay.order_no : NULL,
        .txn_no = e->pay.txn_no[0] ? e->pay.txn_no : NULL,
        .amount_cents = e->pay.amount_cents,
        .reason = e->dlq_reason != NULL && e->dlq_reason[0] ? e->dlq_reason : "unknown",
        .message = e->dlq_value,
        .message_len = e->dlq_value != NULL ? e->dlq_value_len : 0,
    };
    st = gate_record_payment_refused(cm->env.db, &r, &res, &err);
    metric_observe(cm->env.m->db_seconds, db_last_ms(cm->env.db) / 1000.0);
    if (st != OG_OK) {
        commit_db_failed(cm, "record_payment_refused", &err);
        return st;
    }
    *cm->env.db_ok = true;
    if (res.recorded)
        metric_inc(cm->env.m->payments_refused, 1);
    log_warn("payment_refused_recorded",
             "exception_id=%" PRId64 " key=%s new=%d source=%s order_no=%s reason=%s",
             res.exception_id, res.key, res.recorded, source,
             e->pay.order_no[0] ? e->pay.order_no : "-", log_quote(q, sizeof(q), r.reason));
    e->state = BATCH_PRODUCE;
    return OG_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Step 2 across sessions (consumer.claim_sessions, consumer/claim_pool.h). A claim of at least
 * COMMIT_SPLIT_MIN cancels is split into parts of at least COMMIT_SPLIT_PART_MIN, one per
 * session connected with room in its FIFO: the loop's own claims part 0 (its intake wait hook
 * runs meanwhile, as for a claim on one session), the pool's workers the others, all at once.
 * Below that a split costs more than it saves: a part's fixed costs (the hand-over to a worker
 * thread and its wake-up, the statement's own start and commit) are paid per part, while what a
 * second backend saves grows with the orders it takes (20 to 34 us of backend CPU each on a
 * quiet machine, docs/capacity.md). */
#define COMMIT_SPLIT_MIN      64
#define COMMIT_SPLIT_PART_MIN 32

/* How many parts a claim of n cancels is split into now, part k >= 1 going to worker[k]: 1 unless
 * the split pays, no hook is failing (the hook-failure path, gate_claim_cancel_isolating, stays
 * on one session) and the pool has sessions connected with room. */
static size_t commit_claim_parts(struct commit *cm, size_t n, int *worker)
{
    int idx[CLAIM_POOL_SESSIONS_MAX];
    /* Every flush asks, so that the workers start (and connect) with the first one, not with
     * the first burst. */
    size_t parts = 1 + claim_pool_ready(cm->env.claim_pool, idx);

    if (n < COMMIT_SPLIT_MIN || cm->hook_stalls > 0)
        return 1;
    if (parts > n / COMMIT_SPLIT_PART_MIN)
        parts = n / COMMIT_SPLIT_PART_MIN;
    if (parts > CLAIM_POOL_SESSIONS_MAX)
        parts = CLAIM_POOL_SESSIONS_MAX;
    for (size_t k = 1; k < parts; k++)
        worker[k] = idx[k - 1];
    return parts > 1 ? parts : 1;
}

/* The part of a claim split nparts ways an order belongs to: a hash of its number (FNV-1a), so
 * that every copy of one order lands in the same part and two sessions never claim the same
 * order at once; with the same nparts and workers, batch after batch too. */
static size_t commit_claim_part_of(const char *order_no, size_t nparts)
{
    uint32_t h = 2166136261u;

    for (const unsigned char *c = (const unsigned char *)order_no; *c != '\0'; c++)
        h = (h ^ *c) * 16777619u;
    return h % nparts;
}

/* A claim whose parts are on the pool's workers, not read yet. */
static bool commit_claim_out(const struct commit_claim *cl)
{
    if (!cl->started || cl->nparts < 2)
        return false;
    for (size_t k = 1; k < cl->nparts; k++)
        if (cl->pooled[k])
            return true;
    return false;
}

/* Step 2, first half: every live cancel of the batch not claimed yet (state BATCH_NEW) in one
 * claim_cancel (split by gate_claim_cancel_isolating when a hook fails), or, from
 * COMMIT_SPLIT_MIN cancels on, in parts across the claim sessions (commit_claim_hand_out), the
 * workers' parts left out. Claim state is per entry: a flush that claimed and then failed a later
 * step leaves its entries past BATCH_NEW, so the next flush claims only cancels that joined the
 * batch since, and claims them before anything is stored. flight (the flush of the loop's batch;
 * NULL for the batch in flight itself): a batch in flight whose parts are on other workers than
 * this claim's would be is finished first (its result there), so that one order is never claimed
 * on two sessions at once; this claim then does not start unless it is done. */
static enum commit_result commit_claim_start(struct commit *cm, struct commit_claim *cl,
                                             int wait_ms, enum commit_result *flight)
{
    struct batch *b = cm->cur;
    struct og_error err = {0};
    size_t n = 0, nrows = 0;
    int64_t now = clock_wall_ms();

    cl->started = false;
    cl->done = false;
    cl->n = 0;
    cl->nparts = 1;
    cl->nrows = 0;
    cl->claim_ms = 0;
    memset(&cl->hook_err, 0, sizeof(cl->hook_err));
    memset(cl->pooled, 0, sizeof(cl->pooled));
    /* Orders whose payment is held back are not claimed (commit_behind_payment). */
    for (size_t i = 0; i < b->n && cm->retry.used > 0; i++) {
        struct batch_entry *e = &b->e[i];
        int64_t pay_at;

        if (e->kind != BATCH_CANCEL || e->state != BATCH_NEW || !batch_live(b, e) ||
            !retry_payment_held(&cm->retry, e->order_no, &pay_at))
            continue;
        e->first = true;
        for (size_t j = 0; j < i && e->first; j++)
            if (b->e[j].kind == BATCH_CANCEL && b->e[j].outcome == GATE_BUSY &&
                batch_live(b, &b->e[j]) && strcmp(b->e[j].order_no, e->order_no) == 0)
                e->first = false;
        commit_behind_payment(cm, e, pay_at, now);
    }
    /* A cancel of a partition given up (voided by a revoke) is finished here, claimed or not: the
     * partition's next owner claims it. Here and not only in commit_claim_end, which runs only
     * after a claim: a batch with no live cancel left would otherwise keep it new, and step 5
     * would refuse to store past it on every retry. */
    for (size_t i = 0; i < b->n; i++) {
        struct batch_entry *e = &b->e[i];

        if (e->kind != BATCH_CANCEL || e->state != BATCH_NEW)
            continue;
        if (!batch_live(b, e))
            e->state = BATCH_DONE;
        else
            cm->nos[n++] = e->order_no;
    }
    if (n == 0)
        return COMMIT_DONE;
    cl->n = n;
    cl->nparts = commit_claim_parts(cm, n, cl->worker);
    if (flight != NULL && cm->flight.n > 0) {
        const struct commit_claim *fl = cm->flight_claim;
        bool same = fl->started && fl->nparts == cl->nparts;

        for (size_t k = 1; k < cl->nparts && same; k++)
            same = fl->worker[k] == cl->worker[k];
        if (!same) {
            *flight = commit_flight_finish(cm, wait_ms);
            cm->cur = b;
            if (*flight != COMMIT_DONE)
                return COMMIT_RETRY;
            /* Its workers' FIFOs emptied: ask again. */
            cl->nparts = commit_claim_parts(cm, n, cl->worker);
        }
    }
    cl->t0_us = clock_mono_us();
    if (cl->nparts > 1) {
        commit_claim_hand_out(cm, cl);
        cl->started = true;
        commit_gauge(cm);
        return COMMIT_DONE;
    }
    {
        /* While a hook fails every order, the batch is bisected again only every
         * COMMIT_HOOK_BISECT_EVERY attempts: the others cost one claim. */
        bool bisect = cm->hook_stalls % COMMIT_HOOK_BISECT_EVERY == 0;
        enum og_status st =
            bisect ? gate_claim_cancel_isolating(cm->env.db, cm->nos, n, GATE_SRC_TIMEOUT_CONSUMER,
                                                 cl->rows, &nrows, &cl->hook_err, &err)
                   : gate_claim_cancel(cm->env.db, cm->nos, n, GATE_SRC_TIMEOUT_CONSUMER, cl->rows,
                                       &nrows, &err);
        cl->claim_ms = (double)(clock_mono_us() - cl->t0_us) / 1000.0;
        metric_observe(cm->env.m->db_seconds, db_last_ms(cm->env.db) / 1000.0);
        metric_inc(cm->env.m->claim_parts, 1);
        if (st != OG_OK) {
            if (gate_hook_failed(&err, NULL, 0)) {
                cm->hook_stalls++;
                commit_hook_failed_all(cm, n, &err);
            } else {
                commit_db_failed(cm, "claim_cancel", &err);
            }
            return COMMIT_RETRY;
        }
        cm->hook_stalls = 0;
        *cm->env.db_ok = true;
        commit_progress(cm);
    }
    cl->nrows = nrows;
    cl->done = true;
    cl->started = true;
    return COMMIT_DONE;
}

/* Groups cm->nos[0..cl->n) by part (commit_claim_part_of) into cl->nos, part k's rows to be
 * written to cl->rows from the sum of the earlier parts' sizes; hands the workers their parts
 * (queued behind what they hold), then claims part 0 on the loop's session, and any part its
 * worker did not take (one lost its session meanwhile). */
static void commit_claim_hand_out(struct commit *cm, struct commit_claim *cl)
{
    size_t at[CLAIM_POOL_SESSIONS_MAX] = {0}, count[CLAIM_POOL_SESSIONS_MAX] = {0};
    size_t fill[CLAIM_POOL_SESSIONS_MAX];

    for (size_t i = 0; i < cl->n; i++)
        count[commit_claim_part_of(cm->nos[i], cl->nparts)]++;
    for (size_t k = 1; k < cl->nparts; k++)
        at[k] = at[k - 1] + count[k - 1];
    memcpy(fill, at, sizeof(fill));
    for (size_t i = 0; i < cl->n; i++)
        cl->nos[fill[commit_claim_part_of(cm->nos[i], cl->nparts)]++] = cm->nos[i];
    memset(cl->parts, 0, sizeof(cl->parts));
    for (size_t k = 0; k < cl->nparts; k++) {
        cl->parts[k].nos = cl->nos + at[k];
        cl->parts[k].n = count[k];
        cl->parts[k].rows = cl->rows + at[k];
    }
    /* The workers' parts first, so that they run while the loop's own claims part 0. */
    cl->handed = clock_mono_ms();
    for (size_t k = 1; k < cl->nparts; k++)
        cl->pooled[k] = cl->parts[k].n > 0 &&
                        claim_pool_submit(cm->env.claim_pool, cl->worker[k], &cl->parts[k]);
    for (size_t k = 0; k < cl->nparts; k++) {
        struct claim_pool_part *p = &cl->parts[k];

        if (cl->pooled[k])
            continue; /* the worker's now: done is its to set (claim_pool_submit cleared it) */
        if (p->n == 0) {
            p->done = true;
            continue;
        }
        /* Part 0, and any part no worker took. A worker refuses a part when it has lost its
         * session, which answered every part it held (claim_pool.h), or when its FIFO is full,
         * which two batches out at most never fill; an order still held by the worker's call
         * would answer busy here and be retried. */
        p->st = gate_claim_cancel(cm->env.db, p->nos, p->n, GATE_SRC_TIMEOUT_CONSUMER, p->rows,
                                  &p->nrows, &p->err);
        p->db_ms = db_last_ms(cm->env.db);
        p->done = true;
    }
}

/* Reads the answers of a claim handed out (waiting for the workers' parts, bounded); a part a
 * hook failed is claimed again on the loop's session with gate_claim_cancel_isolating (the
 * bisection stays on one session), cl->hook_err its last hook failure then. The answered parts'
 * rows are moved to the front of cl->rows (cl->nrows of them), cl->part_ok tells which parts
 * committed; each failed part is counted and logged as a failed claim is. True when every part
 * committed. */
static bool commit_claim_read(struct commit *cm, struct commit_claim *cl)
{
    struct claim_pool_part *out[CLAIM_POOL_SESSIONS_MAX];
    size_t nout = 0, moved = 0;
    bool all = true, any = false;

    for (size_t k = 0; k < cl->nparts; k++)
        if (cl->pooled[k])
            out[nout++] = &cl->parts[k];
    claim_pool_wait(cm->env.claim_pool, out, nout, cl->handed);
    for (size_t k = 0; k < cl->nparts; k++) {
        struct claim_pool_part *p = &cl->parts[k];

        if (!p->done) {
            og_error_set(&p->err, OG_ERR_DB, true,
                         "a claim session did not answer within the bound; its part is claimed "
                         "again");
            snprintf(p->err.sqlstate, sizeof(p->err.sqlstate), "08006");
            p->st = OG_ERR_DB;
            p->done = true;
        } else if (p->n > 0) {
            metric_observe(cm->env.m->db_seconds, p->db_ms / 1000.0);
        }
        if (p->st != OG_OK && gate_hook_failed(&p->err, NULL, 0)) {
            /* A hook failed this part: bisect it on the loop's session. */
            struct og_error err = {0};
            p->st = gate_claim_cancel_isolating(cm->env.db, p->nos, p->n, GATE_SRC_TIMEOUT_CONSUMER,
                                                p->rows, &p->nrows, &cl->hook_err, &err);
            metric_observe(cm->env.m->db_seconds, db_last_ms(cm->env.db) / 1000.0);
            if (p->st != OG_OK)
                p->err = err;
        }
        cl->part_ok[k] = p->st == OG_OK;
        if (cl->part_ok[k]) {
            any = true;
            memmove(cl->rows + moved, p->rows, p->nrows * sizeof(*cl->rows));
            moved += p->nrows;
            continue;
        }
        all = false;
        if (gate_hook_failed(&p->err, NULL, 0))
            commit_hook_failed_all(cm, p->n, &p->err);
        else
            commit_db_failed(cm, "claim_cancel", &p->err);
    }
    cl->claim_ms = (double)(clock_mono_us() - cl->t0_us) / 1000.0;
    cl->nrows = moved;
    metric_inc(cm->env.m->claim_parts, (double)cl->nparts);
    if (any) {
        commit_progress(cm);
        if (all)
            *cm->env.db_ok = true;
    }
    /* Like a claim on one session: a hook failing every order of a part counts as a stall. */
    for (size_t k = 0; k < cl->nparts; k++)
        if (!cl->part_ok[k] && gate_hook_failed(&cl->parts[k].err, NULL, 0)) {
            cm->hook_stalls++;
            break;
        }
    if (all)
        cm->hook_stalls = 0;
    log_debug("claim_split", "orders=%zu parts=%zu committed=%s claim_ms=%.3f", cl->n, cl->nparts,
              all   ? "all"
              : any ? "some"
                    : "none",
              cl->claim_ms);
    return all;
}

/* Step 2, second half: the claim's answers read (commit_claim_read when split), each cancel of
 * cm->cur given its outcome. The entries of a part that failed stay BATCH_NEW: the batch is
 * retried and claims them again. */
static enum commit_result commit_claim_end(struct commit *cm, struct commit_claim *cl)
{
    struct batch *b = cm->cur;
    char hook[GATE_HOOK_NAME_MAX] = "";
    bool split_done = true;
    int64_t now;

    cl->started = false;
    if (cl->nparts > 1)
        split_done = commit_claim_read(cm, cl);
    else if (!cl->done)
        return COMMIT_RETRY;
    gate_hook_failed(&cl->hook_err, hook, sizeof(hook));
    for (size_t i = 0; i < cl->nrows; i++)
        metric_inc(cm->env.m->claims[cl->rows[i].outcome] ? cm->env.m->claims[cl->rows[i].outcome]
                                                          : cm->env.m->claims[GATE_UNKNOWN],
                   1);
    qsort(cl->rows, cl->nrows, sizeof(*cl->rows), commit_row_cmp);
    memset(cm->row_seen, 0, cl->nrows * sizeof(*cm->row_seen));
    now = clock_wall_ms();
    for (size_t i = 0; i < b->n; i++) {
        struct batch_entry *e = &b->e[i];
        struct gate_cancel_row *row;

        if (e->kind != BATCH_CANCEL || e->state != BATCH_NEW)
            continue;
        if (!batch_live(b, e)) {
            e->state = BATCH_DONE;
            continue;
        }
        if (cl->nparts > 1 && !cl->part_ok[commit_claim_part_of(e->order_no, cl->nparts)])
            continue; /* its part failed: claimed again with the batch's retry */
        row = commit_row_find(cl->rows, cl->nrows, e->order_no);
        if (row == NULL) {
            /* The gate promises a row per distinct order: a schema that
             * drifted. The scanner still covers the order. */
            log_error("claim_row_missing", "order_no=%s", e->order_no);
            e->outcome = GATE_UNKNOWN;
        } else {
            e->outcome = row->outcome;
            e->first = !cm->row_seen[row - cl->rows];
            cm->row_seen[row - cl->rows] = true;
        }
        e->state = e->outcome == GATE_NOT_DUE ? BATCH_RESCHEDULE : BATCH_DONE;
        if (e->outcome == GATE_BUSY)
            commit_busy(cm, e, now);
        else if (e->outcome == GATE_HOOK_FAILED)
            commit_hook_failed(cm, e, hook, &cl->hook_err, now);
    }
    return split_done ? COMMIT_DONE : COMMIT_RETRY;
}

/* Step 2a: a cancel of an order whose payment is held back in the retry set (a hook failed it, or
 * its row was locked: commit_payments) is not claimed: the payment reached us first and must
 * claim first, so the hold-back must not hand the order to the cancel. The cancel waits in the
 * retry set as a busy one, claimed again no earlier than the payment (which then has answered:
 * paid, and the cancel finds already_paid; or held again, and so is the cancel), for as long as
 * the payment is held: that hold is bounded by consumer.hook_retry_ms for a hook, by the holder's
 * transaction for a lock. With the set full it is re-scheduled through a delay topic, due now,
 * as a busy order past its bound is. Duplicates of the order in the batch are finished. */
static void commit_behind_payment(struct commit *cm, struct batch_entry *e, int64_t pay_at,
                                  int64_t now)
{
    int slot;

    e->outcome = GATE_BUSY;
    e->state = BATCH_DONE;
    if (!e->first)
        return;
    slot = commit_retry_slot(cm, e, now);
    if (slot >= 0) {
        int64_t at = now + RETRY_BASE_MS;
        retry_wait(&cm->retry, slot, GATE_BUSY, pay_at > at ? pay_at : at);
        e->held = true;
        log_debug("cancel_behind_payment", "order_no=%s", e->order_no);
        return;
    }
    commit_busy_give_up(cm, e, now);
    log_warn("busy_rescheduled",
             "order_no=%s topic=%s busy_ms=0 msg=\"its payment is held back and the retry set "
             "is full; re-scheduled through the delay topic\"",
             e->order_no, e->dest_topic);
}

/* Step 2b: a busy order (its row locked by another transaction) goes to the retry set, claimed
 * again after a backoff, for up to consumer.busy_retry_ms from its first busy answer; after
 * that (or with the set full) it is re-scheduled through a delay topic, due now. Either way the
 * rest of the batch goes on. Duplicates of the order in this batch are finished: the first
 * entry stands for them (a slot one of them brought is released when the batch is stored). */
static void commit_busy(struct commit *cm, struct batch_entry *e, int64_t now)
{
    int slot;

    if (!e->first)
        return;
    slot = cm->env.cfg->consumer.busy_retry_ms > 0 ? commit_retry_slot(cm, e, now) : -1;
    if (slot >= 0 && now - cm->retry.slots[slot].first_ms < cm->env.cfg->consumer.busy_retry_ms) {
        int tries = cm->retry.slots[slot].why == GATE_BUSY ? cm->retry.slots[slot].tries : 0;
        retry_wait(&cm->retry, slot, GATE_BUSY,
                   now + clock_backoff_ms(RETRY_BASE_MS, RETRY_CAP_MS, tries));
        e->held = true;
        log_debug("busy_retry", "order_no=%s tries=%d", e->order_no, tries + 1);
        return;
    }
    commit_busy_give_up(cm, e, now);
    log_warn("busy_rescheduled",
             "order_no=%s topic=%s busy_ms=%" PRId64 " msg=\"locked by another transaction "
             "beyond consumer.busy_retry_ms; re-scheduled through the delay topic\"",
             e->order_no, e->dest_topic,
             slot >= 0 ? now - cm->retry.slots[slot].first_ms : (int64_t)0);
}

/* A busy order past its local bound, or with the retry set full: counted as given up and
 * re-scheduled through a delay topic, due now. */
static void commit_busy_give_up(struct commit *cm, struct batch_entry *e, int64_t now)
{
    metric_inc(cm->env.m->retry_given_up[CONSUMER_METRICS_BUSY], 1);
    e->new_due_ms = now;
    e->dest_topic = levels_reschedule_topic(cm->env.levels, cm->env.cfg, cm->cur->tps[e->tp].topic,
                                            now, &e->new_due_ms);
    e->state = BATCH_PRODUCE;
}

/* Step 2c: an order a hook failed alone. Claimed again from the retry set after a backoff
 * (COMMIT_HOOK_BASE_MS doubling to COMMIT_HOOK_CAP_MS) for up to consumer.hook_retry_ms
 * from its first failure (a deadlock or lock timeout in the shop's tables passes); after that,
 * or with the set full, dead-lettered with the hook's error (commit_cancel_to_dlq). The rest of
 * the batch goes on either way. */
static void commit_hook_failed(struct commit *cm, struct batch_entry *e, const char *hook,
                               const struct og_error *hook_err, int64_t now)
{
    char q[600];
    int slot;

    if (!e->first) {
        e->state = BATCH_DONE; /* its first entry stands for it */
        return;
    }
    metric_inc(consumer_metrics_hook_failures(hook), 1);
    slot = cm->env.cfg->consumer.hook_retry_ms > 0 ? commit_retry_slot(cm, e, now) : -1;
    if (slot >= 0 && now - cm->retry.slots[slot].first_ms < cm->env.cfg->consumer.hook_retry_ms) {
        int tries = cm->retry.slots[slot].why == GATE_HOOK_FAILED ? cm->retry.slots[slot].tries : 0;
        retry_wait(&cm->retry, slot, GATE_HOOK_FAILED,
                   now + clock_backoff_ms(COMMIT_HOOK_BASE_MS, COMMIT_HOOK_CAP_MS, tries));
        e->held = true;
        e->state = BATCH_DONE;
        log_warn("hook_failed",
                 "order_no=%s hook=%s sqlstate=%s tries=%d error=%s msg=\"claim rolled back; "
                 "retried locally\"",
                 e->order_no, hook, hook_err->sqlstate, tries + 1,
                 log_quote(q, sizeof(q), hook_err->msg));
        return;
    }
    metric_inc(cm->env.m->retry_given_up[CONSUMER_METRICS_HOOK_FAILED], 1);
    log_error("hook_dead_lettered",
              "order_no=%s hook=%s sqlstate=%s failing_ms=%" PRId64 " error=%s msg=\"a hook "
              "failed this order's cancel beyond consumer.hook_retry_ms; dead-lettered, left "
              "pending for the scanner\"",
              e->order_no, hook, hook_err->sqlstate,
              slot >= 0 ? now - cm->retry.slots[slot].first_ms : (int64_t)0,
              log_quote(q, sizeof(q), hook_err->msg));
    commit_cancel_to_dlq(cm, e, hook_err);
}

/* A cancel whose claim a hook failed (the order alone: gate_claim_cancel_isolating) becomes a
 * dead letter: the contract's cancel message, with the hook's error as its reason. The order
 * stays pending; the scanner tries it again on every run, so once the hook is mended it is
 * cancelled. */
static void commit_cancel_to_dlq(struct commit *cm, struct batch_entry *e,
                                 const struct og_error *hook_err)
{
    char value[256], reason[BATCH_DLQ_REASON_MAX];
    size_t len = 0;
    struct og_error ignored = {0};
    bool ok =
        codec_encode_cancel(e->order_no, e->due_ms, value, sizeof(value), &len, &ignored) == OG_OK;

    snprintf(reason, sizeof(reason), "hook_failed: sqlstate %s: %s", hook_err->sqlstate,
             hook_err->msg);
    commit_to_dlq(cm, e, BATCH_PRODUCE, e->order_no, ok ? value : NULL, len, reason);
}

/* The claim of the whole list failed in a hook with no order of it claimable
 * (gate_claim_cancel_isolating): the hook fails for everyone. Like a database outage: the
 * batch is retried with backoff, never skipped; the metric and the log name the hook. */
static void commit_hook_failed_all(struct commit *cm, size_t n, const struct og_error *err)
{
    char hook[GATE_HOOK_NAME_MAX], q[600];

    gate_hook_failed(err, hook, sizeof(hook));
    *cm->env.db_ok = true; /* the database answered */
    metric_inc(cm->env.m->db_errors, 1);
    metric_inc(consumer_metrics_hook_failures(hook), (double)n);
    log_error("hook_failed_batch",
              "hook=%s sqlstate=%s orders=%zu error=%s msg=\"the hook fails every order of the "
              "batch; retried with backoff\"",
              hook, err->sqlstate, n, log_quote(q, sizeof(q), err->msg));
}

/* ------------------------------------------------------------------------------------------ */
/* Step 3a: the database's due time for every not_due order. */
static enum commit_result commit_due_times(struct commit *cm)
{
    struct batch *b = cm->cur;
    struct og_error err = {0};
    PGresult *res = NULL;
    struct pgarray array;
    size_t n = 0;
    enum commit_result r = COMMIT_DONE;
    int64_t now = clock_wall_ms();

    for (size_t i = 0; i < b->n; i++) {
        struct batch_entry *e = &b->e[i];
        if (e->state != BATCH_RESCHEDULE)
            continue;
        if (!batch_live(b, e))
            e->state = BATCH_DONE;
        else
            n++;
    }
    if (n == 0)
        return COMMIT_DONE;
    pgarray_init(&array);
    for (size_t i = 0; i < b->n; i++)
        if (b->e[i].state == BATCH_RESCHEDULE)
            pgarray_append(&array, b->e[i].order_no);
    if (pgarray_str(&array) == NULL) {
        log_error("out_of_memory", "where=due_times");
        r = COMMIT_RETRY;
        goto out;
    }
    {
        const char *params[1] = {pgarray_str(&array)};
        if (db_call(cm->env.db, &commit_stmt_due_times, params, &res, &err) != OG_OK) {
            metric_observe(cm->env.m->db_seconds, db_last_ms(cm->env.db) / 1000.0);
            commit_db_failed(cm, "due_times", &err);
            r = COMMIT_RETRY;
            goto out;
        }
        metric_observe(cm->env.m->db_seconds, db_last_ms(cm->env.db) / 1000.0);
    }
    *cm->env.db_ok = true;
    commit_progress(cm);
    for (size_t i = 0; i < b->n; i++) {
        struct batch_entry *e = &b->e[i];
        int found = -1;
        if (e->state != BATCH_RESCHEDULE)
            continue;
        for (int row = 0; row < PQntuples(res) && found < 0; row++)
            if (strcmp(PQgetvalue(res, row, 0), e->order_no) == 0)
                found = row;
        if (found < 0) {
            /* Paid, cancelled or gone since the claim: nothing to wait for. */
            e->state = BATCH_DONE;
            continue;
        }
        /* One new message per order, even when the batch held duplicates. */
        bool first = true;
        for (size_t j = 0; j < i && first; j++)
            if (b->e[j].kind == BATCH_CANCEL && b->e[j].outcome == GATE_NOT_DUE &&
                (b->e[j].state != BATCH_DONE || b->e[j].held) && batch_live(b, &b->e[j]) &&
                strcmp(b->e[j].order_no, e->order_no) == 0)
                first = false;
        if (!first) {
            e->state = BATCH_DONE;
            continue;
        }
        e->new_due_ms = strtoll(PQgetvalue(res, found, 1), NULL, 10);
        if (commit_not_due_local(cm, e, now))
            continue;
        if (e->new_due_ms <= now) {
            /* The database has not reached the expire_at it reports while
             * our clock has: our clock runs ahead. Look again a bit later. */
            log_warn("clock_skew_suspected",
                     "order_no=%s db_expire_at_ms=%" PRId64 " local_now_ms=%" PRId64, e->order_no,
                     e->new_due_ms, now);
            e->new_due_ms = now + COMMIT_SKEW_RETRY_MS;
        }
        e->dest_topic = levels_reschedule_topic(cm->env.levels, cm->env.cfg, b->tps[e->tp].topic,
                                                now, &e->new_due_ms);
        e->state = BATCH_PRODUCE;
    }
out:
    PQclear(res);
    pgarray_free(&array);
    return r;
}

/* Step 3a': an order due within consumer.local_due_ms (new_due_ms, as due_times reported it)
 * is claimed again from the retry set at that time instead of going round a delay topic, where
 * it would wait behind every message produced after it; at most RETRY_NOT_DUE_TRIES times
 * (a database clock behind ours keeps answering not_due: then the topic, with the skew
 * logged). Returns true when the entry is finished that way. */
static bool commit_not_due_local(struct commit *cm, struct batch_entry *e, int64_t now)
{
    int slot, tries = 0;

    if (cm->env.cfg->consumer.local_due_ms <= 0 ||
        e->new_due_ms - now >= cm->env.cfg->consumer.local_due_ms)
        return false;
    if (e->retry >= 0 && cm->retry.slots[e->retry].why == GATE_NOT_DUE)
        tries = cm->retry.slots[e->retry].tries;
    if (tries >= RETRY_NOT_DUE_TRIES) {
        metric_inc(cm->env.m->retry_given_up[CONSUMER_METRICS_NOT_DUE], 1);
        return false;
    }
    slot = commit_retry_slot(cm, e, now);
    if (slot < 0) {
        metric_inc(cm->env.m->retry_given_up[CONSUMER_METRICS_NOT_DUE], 1);
        return false;
    }
    {
        int64_t at =
            tries > 0 ? now + clock_backoff_ms(RETRY_BASE_MS, RETRY_CAP_MS, tries - 1) : now;
        retry_wait(&cm->retry, slot, GATE_NOT_DUE, at > e->new_due_ms ? at : e->new_due_ms);
    }
    e->held = true;
    e->state = BATCH_DONE;
    log_debug("not_due_retry", "order_no=%s db_expire_at_ms=%" PRId64 " local_now_ms=%" PRId64,
              e->order_no, e->new_due_ms, now);
    return true;
}

/* ------------------------------------------------------------------------------------------ */
/* Steps 3b and 4: produce what is owed, wait (bounded) for the reports. */
static enum commit_result commit_deliver(struct commit *cm, int wait_ms)
{
    struct batch *b = cm->cur;
    struct kafka_delivery *waiting[64];
    bool failed = false;
    size_t nw = 0;

    for (size_t i = 0; i < b->n; i++) {
        struct batch_entry *e = &b->e[i];
        if (e->state != BATCH_PRODUCE)
            continue;
        if (!batch_live(b, e))
            e->state = BATCH_DONE; /* the partition's next owner redoes it */
        else
            commit_produce(cm, e);
    }
    /* Wait on up to 64 reports at a time; kafka_wait polls the producer,
     * which serves every report, so the rest complete alongside. */
    int64_t deadline = clock_mono_ms() + wait_ms;
    for (;;) {
        nw = 0;
        for (size_t i = 0; i < b->n && nw < 64; i++)
            if (b->e[i].state == BATCH_INFLIGHT && !b->e[i].dr.done)
                waiting[nw++] = &b->e[i].dr;
        if (nw == 0)
            break;
        int64_t left = deadline - clock_mono_ms();
        if (kafka_wait(cm->env.producer, waiting, nw, left > 0 ? (int)left : 0) > 0 || left <= 0)
            break;
    }
    for (size_t i = 0; i < b->n; i++) {
        struct batch_entry *e = &b->e[i];
        if (e->state != BATCH_INFLIGHT || !e->dr.done)
            continue;
        if (e->dr.err == RD_KAFKA_RESP_ERR_NO_ERROR) {
            e->state = BATCH_DONE;
            *cm->env.kafka_ok = true;
            if (!batch_live(b, e))
                continue;
            if (e->kind == BATCH_DLQ) {
                metric_inc(cm->env.m->dead_lettered, 1);
                log_info("dead_lettered",
                         "topic=%s partition=%" PRId32 " offset=%" PRId64 " reason=\"%.200s\"",
                         b->tps[e->tp].topic, b->tps[e->tp].partition, e->offset,
                         e->dlq_reason ? e->dlq_reason : "");
            } else {
                char due[32];
                metric_inc(cm->env.m->rescheduled, 1);
                log_info("rescheduled", "order_no=%s due_at=%s topic=%s reason=%s", e->order_no,
                         clock_format_iso(e->new_due_ms, due, sizeof(due)),
                         e->dest_topic != NULL ? e->dest_topic : b->tps[e->tp].topic,
                         gate_outcome_str(e->outcome));
            }
        } else {
            /* Kept, produced again on the next attempt: a duplicate at
             * worst, never a loss. */
            log_warn("delivery_failed", "kind=%s topic=%s error=%s",
                     e->kind == BATCH_DLQ ? "dead_letter" : "reschedule",
                     e->kind == BATCH_DLQ ? cm->env.cfg->kafka.dead_letter_topic
                                          : b->tps[e->tp].topic,
                     rd_kafka_err2name(e->dr.err));
            metric_inc(cm->env.m->kafka_errors, 1);
            e->state = batch_live(b, e) ? BATCH_PRODUCE : BATCH_DONE;
            failed = true;
        }
    }
    bool inflight = false;
    for (size_t i = 0; i < b->n; i++) {
        failed |= b->e[i].state == BATCH_PRODUCE;
        inflight |= b->e[i].state == BATCH_INFLIGHT;
    }
    return failed ? COMMIT_RETRY : inflight ? COMMIT_WAIT : COMMIT_DONE;
}

/* Produces the message an entry owes: its dead letter, or its re-schedule.
 * On an immediate failure (local queue full) the entry stays BATCH_PRODUCE. */
void commit_produce(struct commit *cm, struct batch_entry *e)
{
    const struct batch_tp *tp = &cm->cur->tps[e->tp];
    rd_kafka_resp_err_t rerr;
    char part[16], off[24];

    snprintf(part, sizeof(part), "%" PRId32, tp->partition);
    snprintf(off, sizeof(off), "%" PRId64, e->offset);
    e->dr.done = false;
    e->dr.err = RD_KAFKA_RESP_ERR_NO_ERROR;
    if (e->kind == BATCH_DLQ) {
        char orig[24];
        snprintf(orig, sizeof(orig), "%zu", e->dlq_orig_len);
        const char *reason = e->dlq_reason ? e->dlq_reason : "unknown";
        rerr = rd_kafka_producev(
            cm->env.producer, RD_KAFKA_V_TOPIC(cm->env.cfg->kafka.dead_letter_topic),
            RD_KAFKA_V_KEY(e->dlq_key, e->dlq_key_len),
            RD_KAFKA_V_VALUE(e->dlq_value, e->dlq_value_len),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_OPAQUE(&e->dr),
            RD_KAFKA_V_HEADER("ordergate-reason", reason, -1),
            RD_KAFKA_V_HEADER("ordergate-source-topic", tp->topic, -1),
            RD_KAFKA_V_HEADER("ordergate-source-partition", part, -1),
            RD_KAFKA_V_HEADER("ordergate-source-offset", off, -1),
            RD_KAFKA_V_HEADER("ordergate-original-size", orig, -1), RD_KAFKA_V_END);
    } else {
        char value[256], from[320];
        size_t len = 0;
        struct og_error err = {0};
        if ((e->kind == BATCH_REMINDER
                 ? codec_encode_reminder(e->order_no, e->reminder_offset, e->new_due_ms, value,
                                         sizeof(value), &len, &err)
                 : codec_encode_cancel(e->order_no, e->new_due_ms, value, sizeof(value), &len,
                                       &err)) != OG_OK) {
            /* Cannot happen for an order number that decoded: but never
             * loop on it. The scanner covers the order. */
            log_error("reschedule_encode_failed", "order_no=%s error=\"%s\"", e->order_no, err.msg);
            e->state = BATCH_DONE;
            return;
        }
        snprintf(from, sizeof(from), "%s/%s/%s", tp->topic, part, off);
        rerr = rd_kafka_producev(
            cm->env.producer, RD_KAFKA_V_TOPIC(e->dest_topic != NULL ? e->dest_topic : tp->topic),
            RD_KAFKA_V_KEY(e->order_no, strlen(e->order_no)), RD_KAFKA_V_VALUE(value, len),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_OPAQUE(&e->dr),
            RD_KAFKA_V_HEADER("ordergate-rescheduled-from", from, -1), RD_KAFKA_V_END);
    }
    if (rerr != RD_KAFKA_RESP_ERR_NO_ERROR) {
        log_warn("produce_failed", "kind=%s topic=%s partition=%s offset=%s error=%s",
                 e->kind == BATCH_DLQ ? "dead_letter" : "reschedule", tp->topic, part, off,
                 rd_kafka_err2name(rerr));
        metric_inc(cm->env.m->kafka_errors, 1);
        e->state = BATCH_PRODUCE;
        return;
    }
    e->state = BATCH_INFLIGHT;
}

/* ------------------------------------------------------------------------------------------ */
/* Step 5: store offset + 1 of the last message of each live partition. claim_ms (this flush's
 * claim call; 0: none, and a batch retried after a later step failed counts its last flush
 * only) goes into the debug line, so that each batch's claim time can be read back: the
 * histogram only has buckets. */
static void commit_store(struct commit *cm, double claim_ms)
{
    struct batch *b = cm->cur;
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new((int)b->ntps);
    int64_t now = clock_wall_ms();
    size_t live = 0;
    rd_kafka_resp_err_t rerr;

    /* Slots whose order is finished for good go back to the set first: their messages'
     * offsets may be passed now. */
    for (size_t i = 0; i < b->n; i++)
        if (batch_live(b, &b->e[i]) && b->e[i].retry >= 0 && !b->e[i].held)
            retry_release(&cm->retry, b->e[i].retry);
    for (size_t i = 0; i < b->ntps; i++) {
        const struct batch_tp *tp = &b->tps[i];
        int64_t upto = tp->max_offset + 1, behind, floor;

        if (tp->voided)
            continue;
        /* Never past a message whose order waits in the retry set: store its offset and
         * remember how far the partition is done behind it. */
        behind = retry_hold_take(&cm->retry, tp->topic, tp->partition);
        if (behind > upto)
            upto = behind;
        if (retry_floor(&cm->retry, tp->topic, tp->partition, &floor) && floor < upto) {
            if (!retry_hold_put(&cm->retry, tp->topic, tp->partition, upto))
                log_warn("out_of_memory", "where=retry_hold_put");
            upto = floor;
        }
        rd_kafka_topic_partition_list_add(list, tp->topic, tp->partition)->offset = upto;
    }
    for (size_t i = 0; i < b->n; i++) {
        const struct batch_entry *e = &b->e[i];
        if (!batch_live(b, e) || e->held)
            continue;
        live++;
        if (e->kind == BATCH_CANCEL && e->outcome == GATE_CANCELLED && e->first)
            metric_observe(cm->env.m->lateness, (double)(now - e->due_ms) / 1000.0);
    }
    if (list->cnt > 0) {
        rerr = rd_kafka_offsets_store(cm->env.rk, list);
        for (int i = 0; i < list->cnt; i++) {
            /* Only a partition revoked under us fails here; its next owner
             * starts from the last commit and the gate absorbs the repeat. */
            if (list->elems[i].err != RD_KAFKA_RESP_ERR_NO_ERROR)
                log_warn("offset_store_failed",
                         "topic=%s partition=%" PRId32 " offset=%" PRId64 " error=%s",
                         list->elems[i].topic, list->elems[i].partition, list->elems[i].offset,
                         rd_kafka_err2name(list->elems[i].err));
        }
        if (rerr != RD_KAFKA_RESP_ERR_NO_ERROR && rerr != RD_KAFKA_RESP_ERR__STATE)
            log_warn("offsets_store_failed", "error=%s", rd_kafka_err2name(rerr));
    }
    rd_kafka_topic_partition_list_destroy(list);
    if (live > 0) {
        metric_inc(cm->env.m->batches, 1);
        metric_inc(cm->env.m->offsets_stored, (double)live);
        metric_observe(cm->env.m->batch_size, (double)live);
        log_debug("batch_committed", "messages=%zu partitions=%zu claim_ms=%.3f", live, b->ntps,
                  claim_ms);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* The retry set's due slots, back into the next batch. */

size_t commit_take_retries(struct commit *cm, int64_t now_wall)
{
    struct retry_set *r = &cm->retry;
    size_t n = 0;

    if (r->used == 0)
        return 0;
    for (size_t i = 0; i < r->cap; i++) {
        struct retry_slot *s = &r->slots[i];
        struct batch_entry *e;

        if (s->state != RETRY_WAITING || s->at_ms > now_wall)
            continue;
        if (batch_full(&cm->batch))
            break;
        e = batch_add(&cm->batch, s->kind, s->topic, s->partition, s->offset);
        if (e == NULL)
            break;
        memcpy(e->order_no, s->order_no, sizeof(e->order_no));
        e->due_ms = s->due_ms;
        if (s->kind == BATCH_PAYMENT) {
            e->pay = s->pay;
            e->hook_first_ms = s->hook_first_ms;
        }
        e->retry = (int)i;
        s->state = RETRY_IN_BATCH;
        metric_inc(cm->env.m->retries[s->why == GATE_BUSY      ? CONSUMER_METRICS_BUSY
                                      : s->why == GATE_NOT_DUE ? CONSUMER_METRICS_NOT_DUE
                                                               : CONSUMER_METRICS_HOOK_FAILED],
                   1);
        n++;
    }
    return n;
}

/* ------------------------------------------------------------------------------------------ */
/* What the steps share. */

/* A database answer: tell the owner the consumer makes progress (its watchdog). */
static void commit_progress(struct commit *cm)
{
    if (cm->env.progress != NULL)
        cm->env.progress(cm->env.progress_arg);
}

static void commit_db_failed(struct commit *cm, const char *step, const struct og_error *err)
{
    char q[600];

    *cm->env.db_ok = !err->retriable && err->status != OG_ERR_DB;
    metric_inc(cm->env.m->db_errors, 1);
    /* Retriable failures are expected during outages and logged as such;
     * anything else means the schema or the code is wrong: loud. */
    if (err->retriable || err->status == OG_ERR_STOPPED)
        log_warn("batch_db_retry", "step=%s sqlstate=%s error=%s", step, err->sqlstate,
                 log_quote(q, sizeof(q), err->msg));
    else
        log_error("batch_db_failed", "step=%s status=%s sqlstate=%s error=%s", step,
                  og_status_str(err->status), err->sqlstate, log_quote(q, sizeof(q), err->msg));
}

/* The owner's copy of a topic name (env.topics, stable while the owner lives), NULL when not one.
 */
static const char *commit_topic_name(const struct commit *cm, const char *topic)
{
    for (size_t i = 0; i < cm->env.ntopics; i++)
        if (strcmp(cm->env.topics[i], topic) == 0)
            return cm->env.topics[i];
    return NULL;
}

/* A slot of the retry set for e: the one it came from, or a new one; -1 when full. */
static int commit_retry_slot(struct commit *cm, struct batch_entry *e, int64_t now)
{
    const struct batch_tp *tp = &cm->cur->tps[e->tp];
    const char *topic;

    if (e->retry >= 0)
        return e->retry;
    topic = commit_topic_name(cm, tp->topic);
    if (topic != NULL)
        e->retry = retry_add(&cm->retry, e, topic, tp->partition, now);
    return e->retry;
}

/* Turns a decoded entry into a dead letter in state `state`: key, the message as the contract
 * encodes it (value, len; NULL when it could not be encoded) and the reason, copied (a copy
 * that fails leaves the field empty: the dead letter goes out all the same). */
static void commit_to_dlq(struct commit *cm, struct batch_entry *e, enum batch_state state,
                          const char *key, const char *value, size_t len, const char *reason)
{
    e->kind = BATCH_DLQ;
    e->state = state;
    e->dlq_value = value != NULL ? strndup(value, len) : NULL;
    e->dlq_value_len = e->dlq_value ? len : 0;
    e->dlq_orig_len = e->dlq_value_len;
    e->dlq_key = strdup(key);
    e->dlq_key_len = e->dlq_key ? strlen(e->dlq_key) : 0;
    e->dlq_reason = strndup(reason, BATCH_DLQ_REASON_MAX - 1);
    cm->cur->dlq_bytes += e->dlq_value_len + e->dlq_key_len;
}

static int commit_row_cmp(const void *a, const void *b)
{
    return strcmp(((const struct gate_cancel_row *)a)->order_no,
                  ((const struct gate_cancel_row *)b)->order_no);
}

static struct gate_cancel_row *commit_row_find(struct gate_cancel_row *rows, size_t n,
                                               const char *order_no)
{
    struct gate_cancel_row key;

    snprintf(key.order_no, sizeof(key.order_no), "%s", order_no);
    return bsearch(&key, rows, n, sizeof(*rows), commit_row_cmp);
}
