/* The batch: due work collected from every partition, committed in the order
 * described in consumer.h. Entries never move while the batch lives, because
 * a produced message's delivery report writes into its entry. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/pgarray.h"
#include "consumer/consumer.h"

/* Rounded up to the millisecond: a due time a fraction early would meet
 * not_due again. */
static const struct db_stmt batch_stmt_due_times = {
    "og_due_times",
    "SELECT order_no, ceil(extract(epoch FROM expire_at) * 1000)::bigint "
    "FROM ordergate.due_times($1::text[])",
    1};

enum og_status batch_init(struct batch *b, size_t cap, struct og_error *err)
{
    memset(b, 0, sizeof(*b));
    b->e = calloc(cap, sizeof(*b->e));
    if (b->e == NULL)
        return og_error_set(err, OG_ERR_NOMEM, false, "out of memory for a batch of %zu", cap);
    b->cap = cap;
    return OG_OK;
}

static void batch_clear(struct batch *b)
{
    for (size_t i = 0; i < b->n; i++) {
        free(b->e[i].dlq_key);
        free(b->e[i].dlq_value);
        free(b->e[i].dlq_reason);
    }
    memset(b->e, 0, b->n * sizeof(*b->e));
    for (size_t i = 0; i < b->ntps; i++)
        free(b->tps[i].topic);
    b->n = 0;
    b->ntps = 0;
    b->dlq_bytes = 0;
    b->first_ms = 0;
}

void batch_free(struct batch *b)
{
    if (b == NULL || b->e == NULL)
        return;
    batch_clear(b);
    free(b->e);
    free(b->tps);
    memset(b, 0, sizeof(*b));
}

bool batch_full(const struct batch *b)
{
    return b->n >= b->cap || b->dlq_bytes >= CONSUMER_DLQ_BUDGET;
}

static int batch_tp_find(const struct batch *b, const char *topic, int32_t partition)
{
    for (size_t i = b->ntps; i-- > 0;)
        if (!b->tps[i].voided && b->tps[i].partition == partition &&
            strcmp(b->tps[i].topic, topic) == 0)
            return (int)i;
    return -1;
}

struct batch_entry *batch_add(struct batch *b, enum batch_kind kind, const char *topic,
                              int32_t partition, int64_t offset)
{
    struct batch_entry *e;
    int tp;

    if (b->n >= b->cap)
        return NULL;
    tp = batch_tp_find(b, topic, partition);
    if (tp < 0) {
        if (b->ntps == b->tps_cap) {
            size_t cap = b->tps_cap ? b->tps_cap * 2 : 16;
            struct batch_tp *grown = realloc(b->tps, cap * sizeof(*grown));
            if (grown == NULL)
                return NULL;
            b->tps = grown;
            b->tps_cap = cap;
        }
        b->tps[b->ntps].topic = strdup(topic);
        if (b->tps[b->ntps].topic == NULL)
            return NULL;
        b->tps[b->ntps].partition = partition;
        b->tps[b->ntps].max_offset = offset;
        b->tps[b->ntps].voided = false;
        tp = (int)b->ntps++;
    }
    if (offset > b->tps[tp].max_offset)
        b->tps[tp].max_offset = offset;
    if (b->n == 0)
        b->first_ms = clock_mono_ms();
    e = &b->e[b->n++];
    memset(e, 0, sizeof(*e));
    e->kind = kind;
    e->state = BATCH_NEW;
    e->tp = tp;
    e->offset = offset;
    e->retry = -1;
    return e;
}

void batch_void(struct batch *b, const char *topic, int32_t partition)
{
    int tp = batch_tp_find(b, topic, partition);

    if (tp >= 0)
        b->tps[tp].voided = true;
}

bool batch_has(const struct batch *b, const char *topic, int32_t partition)
{
    return batch_tp_find(b, topic, partition) >= 0;
}

static bool batch_live(const struct batch *b, const struct batch_entry *e)
{
    return !b->tps[e->tp].voided;
}

size_t batch_due_pending(const struct batch *b)
{
    size_t n = 0;

    for (size_t i = 0; i < b->n; i++)
        n += b->e[i].kind == BATCH_CANCEL && b->e[i].state != BATCH_DONE && batch_live(b, &b->e[i]);
    return n;
}

/* ------------------------------------------------------------------------------------------ */

static int batch_row_cmp(const void *a, const void *b)
{
    return strcmp(((const struct gate_cancel_row *)a)->order_no,
                  ((const struct gate_cancel_row *)b)->order_no);
}

static struct gate_cancel_row *batch_row_find(struct gate_cancel_row *rows, size_t n,
                                              const char *order_no)
{
    struct gate_cancel_row key;

    snprintf(key.order_no, sizeof(key.order_no), "%s", order_no);
    return bsearch(&key, rows, n, sizeof(*rows), batch_row_cmp);
}

static void batch_db_failed(struct consumer *c, const char *step, const struct og_error *err)
{
    char q[600];

    c->db_ok = !err->retriable && err->status != OG_ERR_DB;
    metric_inc(c->m.db_errors, 1);
    /* Retriable failures are expected during outages and logged as such;
     * anything else means the schema or the code is wrong: loud. */
    if (err->retriable || err->status == OG_ERR_STOPPED)
        log_warn("batch_db_retry", "step=%s sqlstate=%s error=%s", step, err->sqlstate,
                 log_quote(q, sizeof(q), err->msg));
    else
        log_error("batch_db_failed", "step=%s status=%s sqlstate=%s error=%s", step,
                  og_status_str(err->status), err->sqlstate, log_quote(q, sizeof(q), err->msg));
}

/* The consumer's own copy of a topic name (stable for its lifetime), NULL when not one. */
static const char *batch_topic_name(const struct consumer *c, const char *topic)
{
    for (size_t i = 0; i < c->ntopics; i++)
        if (strcmp(c->topics[i], topic) == 0)
            return c->topics[i];
    return NULL;
}

/* A slot of the retry set for e: the one it came from, or a new one; -1 when full. */
static int batch_retry_slot(struct consumer *c, struct batch_entry *e, int64_t now)
{
    const struct batch_tp *tp = &c->batch.tps[e->tp];
    const char *topic;

    if (e->retry >= 0)
        return e->retry;
    topic = batch_topic_name(c, tp->topic);
    if (topic != NULL)
        e->retry = retry_add(&c->retry, e, topic, tp->partition, now);
    return e->retry;
}

/* Step 2b: a busy order (its row locked by another transaction) goes to the retry set, claimed
 * again after a backoff, for up to consumer.busy_retry_ms from its first busy answer; after
 * that (or with the set full) it is re-scheduled through a delay topic, due now. Either way the
 * rest of the batch goes on. Duplicates of the order in this batch are finished: the first
 * entry stands for them (a slot one of them brought is released when the batch is stored). */
static void batch_busy(struct consumer *c, struct batch_entry *e, int64_t now)
{
    const struct batch_tp *tp = &c->batch.tps[e->tp];
    int slot;

    if (!e->first)
        return;
    slot = c->cfg->busy_retry_ms > 0 ? batch_retry_slot(c, e, now) : -1;
    if (slot >= 0 && now - c->retry.slots[slot].first_ms < c->cfg->busy_retry_ms) {
        int tries = c->retry.slots[slot].why == GATE_BUSY ? c->retry.slots[slot].tries : 0;
        retry_wait(&c->retry, slot, GATE_BUSY,
                   now + clock_backoff_ms(CONSUMER_RETRY_BASE_MS, CONSUMER_RETRY_CAP_MS, tries));
        e->held = true;
        log_debug("busy_retry", "order_no=%s tries=%d", e->order_no, tries + 1);
        return;
    }
    metric_inc(c->m.retry_given_up[0], 1);
    e->new_due_ms = now;
    e->dest_topic = consumer_reschedule_topic(c, tp->topic, now, &e->new_due_ms);
    e->state = BATCH_PRODUCE;
    log_warn("busy_rescheduled",
             "order_no=%s topic=%s busy_ms=%" PRId64 " msg=\"locked by another transaction "
             "beyond consumer.busy_retry_ms; re-scheduled through the delay topic\"",
             e->order_no, e->dest_topic,
             slot >= 0 ? now - c->retry.slots[slot].first_ms : (int64_t)0);
}

/* Step 2a: a cancel of an order whose payment is held back in the retry set (a hook failed it, or
 * its row was locked: batch_payments) is not claimed: the payment reached us first and must
 * claim first, so the hold-back must not hand the order to the cancel. The cancel waits in the
 * retry set as a busy one, claimed again no earlier than the payment (which then has answered:
 * paid, and the cancel finds already_paid; or held again, and so is the cancel), for as long as
 * the payment is held: that hold is bounded by consumer.hook_retry_ms for a hook, by the holder's
 * transaction for a lock. With the set full it is re-scheduled through a delay topic, due now,
 * as a busy order past its bound is. Duplicates of the order in the batch are finished. */
static void batch_behind_payment(struct consumer *c, struct batch_entry *e, int64_t pay_at,
                                 int64_t now)
{
    const struct batch_tp *tp = &c->batch.tps[e->tp];
    int slot;

    e->outcome = GATE_BUSY;
    e->state = BATCH_DONE;
    if (!e->first)
        return;
    slot = batch_retry_slot(c, e, now);
    if (slot >= 0) {
        int64_t at = now + CONSUMER_RETRY_BASE_MS;
        retry_wait(&c->retry, slot, GATE_BUSY, pay_at > at ? pay_at : at);
        e->held = true;
        log_debug("cancel_behind_payment", "order_no=%s", e->order_no);
        return;
    }
    metric_inc(c->m.retry_given_up[0], 1);
    e->new_due_ms = now;
    e->dest_topic = consumer_reschedule_topic(c, tp->topic, now, &e->new_due_ms);
    e->state = BATCH_PRODUCE;
    log_warn("busy_rescheduled",
             "order_no=%s topic=%s busy_ms=0 msg=\"its payment is held back and the retry set "
             "is full; re-scheduled through the delay topic\"",
             e->order_no, e->dest_topic);
}

/* Turns a decoded entry into a dead letter in state `state`: key, the message as the contract
 * encodes it (value, len; NULL when it could not be encoded) and the reason, copied (a copy
 * that fails leaves the field empty: the dead letter goes out all the same). */
static void batch_to_dlq(struct consumer *c, struct batch_entry *e, enum batch_state state,
                         const char *key, const char *value, size_t len, const char *reason)
{
    e->kind = BATCH_DLQ;
    e->state = state;
    e->dlq_value = value != NULL ? strndup(value, len) : NULL;
    e->dlq_value_len = e->dlq_value ? len : 0;
    e->dlq_orig_len = e->dlq_value_len;
    e->dlq_key = strdup(key);
    e->dlq_key_len = e->dlq_key ? strlen(e->dlq_key) : 0;
    e->dlq_reason = strndup(reason, CONSUMER_DLQ_REASON_MAX - 1);
    c->batch.dlq_bytes += e->dlq_value_len + e->dlq_key_len;
}

/* A cancel whose claim a hook failed (the order alone: gate_claim_cancel_isolating) becomes a
 * dead letter: the contract's cancel message, with the hook's error as its reason. The order
 * stays pending; the scanner tries it again on every run, so once the hook is mended it is
 * cancelled. */
static void batch_cancel_to_dlq(struct consumer *c, struct batch_entry *e,
                                const struct og_error *hook_err)
{
    char value[256], reason[CONSUMER_DLQ_REASON_MAX];
    size_t len = 0;
    struct og_error ignored = {0};
    bool ok =
        codec_encode_cancel(e->order_no, e->due_ms, value, sizeof(value), &len, &ignored) == OG_OK;

    snprintf(reason, sizeof(reason), "hook_failed: sqlstate %s: %s", hook_err->sqlstate,
             hook_err->msg);
    batch_to_dlq(c, e, BATCH_PRODUCE, e->order_no, ok ? value : NULL, len, reason);
}

/* Step 2c: an order a hook failed alone. Claimed again from the retry set after a backoff
 * (CONSUMER_HOOK_BASE_MS doubling to CONSUMER_HOOK_CAP_MS) for up to consumer.hook_retry_ms
 * from its first failure (a deadlock or lock timeout in the shop's tables passes); after that,
 * or with the set full, dead-lettered with the hook's error (batch_cancel_to_dlq). The rest of
 * the batch goes on either way. */
static void batch_hook_failed(struct consumer *c, struct batch_entry *e, const char *hook,
                              const struct og_error *hook_err, int64_t now)
{
    char q[600];
    int slot;

    if (!e->first) {
        e->state = BATCH_DONE; /* its first entry stands for it */
        return;
    }
    metric_inc(consumer_metric_hook_failures(hook), 1);
    slot = c->cfg->hook_retry_ms > 0 ? batch_retry_slot(c, e, now) : -1;
    if (slot >= 0 && now - c->retry.slots[slot].first_ms < c->cfg->hook_retry_ms) {
        int tries = c->retry.slots[slot].why == GATE_HOOK_FAILED ? c->retry.slots[slot].tries : 0;
        retry_wait(&c->retry, slot, GATE_HOOK_FAILED,
                   now + clock_backoff_ms(CONSUMER_HOOK_BASE_MS, CONSUMER_HOOK_CAP_MS, tries));
        e->held = true;
        e->state = BATCH_DONE;
        log_warn("hook_failed",
                 "order_no=%s hook=%s sqlstate=%s tries=%d error=%s msg=\"claim rolled back; "
                 "retried locally\"",
                 e->order_no, hook, hook_err->sqlstate, tries + 1,
                 log_quote(q, sizeof(q), hook_err->msg));
        return;
    }
    metric_inc(c->m.retry_given_up[2], 1);
    log_error("hook_dead_lettered",
              "order_no=%s hook=%s sqlstate=%s failing_ms=%" PRId64 " error=%s msg=\"a hook "
              "failed this order's cancel beyond consumer.hook_retry_ms; dead-lettered, left "
              "pending for the scanner\"",
              e->order_no, hook, hook_err->sqlstate,
              slot >= 0 ? now - c->retry.slots[slot].first_ms : (int64_t)0,
              log_quote(q, sizeof(q), hook_err->msg));
    batch_cancel_to_dlq(c, e, hook_err);
}

/* The claim of the whole list failed in a hook with no order of it claimable
 * (gate_claim_cancel_isolating): the hook fails for everyone. Like a database outage: the
 * batch is retried with backoff, never skipped; the metric and the log name the hook. */
static void batch_hook_failed_all(struct consumer *c, size_t n, const struct og_error *err)
{
    char hook[GATE_HOOK_NAME_MAX], q[600];

    gate_hook_failed(err, hook, sizeof(hook));
    c->db_ok = true; /* the database answered */
    metric_inc(c->m.db_errors, 1);
    metric_inc(consumer_metric_hook_failures(hook), (double)n);
    log_error("hook_failed_batch",
              "hook=%s sqlstate=%s orders=%zu error=%s msg=\"the hook fails every order of the "
              "batch; retried with backoff\"",
              hook, err->sqlstate, n, log_quote(q, sizeof(q), err->msg));
}

/* Step 2: every live cancel of the batch not claimed yet (state BATCH_NEW) in one
 * claim_cancel (split by gate_claim_cancel_isolating when a hook fails). Claim state is per
 * entry: a flush that claimed and then failed a later step leaves its entries past BATCH_NEW,
 * so the next flush claims only cancels that joined the batch since, and claims them before
 * anything is stored. *claim_ms: the claim call's wall time (connection retries included), 0
 * when nothing was claimed. */
static enum flush_result batch_claim(struct consumer *c, double *claim_ms)
{
    struct batch *b = &c->batch;
    struct og_error err = {0}, hook_err = {0};
    char hook[GATE_HOOK_NAME_MAX] = "";
    size_t n = 0, nrows = 0;
    int64_t now = clock_wall_ms();

    /* Orders whose payment is held back are not claimed (batch_behind_payment). */
    for (size_t i = 0; i < b->n && c->retry.used > 0; i++) {
        struct batch_entry *e = &b->e[i];
        int64_t pay_at;

        if (e->kind != BATCH_CANCEL || e->state != BATCH_NEW || !batch_live(b, e) ||
            !retry_payment_held(&c->retry, e->order_no, &pay_at))
            continue;
        e->first = true;
        for (size_t j = 0; j < i && e->first; j++)
            if (b->e[j].kind == BATCH_CANCEL && b->e[j].outcome == GATE_BUSY &&
                batch_live(b, &b->e[j]) && strcmp(b->e[j].order_no, e->order_no) == 0)
                e->first = false;
        batch_behind_payment(c, e, pay_at, now);
    }
    for (size_t i = 0; i < b->n; i++)
        if (b->e[i].kind == BATCH_CANCEL && b->e[i].state == BATCH_NEW && batch_live(b, &b->e[i]))
            c->nos[n++] = b->e[i].order_no;
    if (n > 0) {
        /* While a hook fails every order, the batch is bisected again only every
         * CONSUMER_HOOK_BISECT_EVERY attempts: the others cost one claim. */
        bool bisect = c->hook_stalls % CONSUMER_HOOK_BISECT_EVERY == 0;
        int64_t t0 = clock_mono_us();
        enum og_status st =
            bisect ? gate_claim_cancel_isolating(c->db, c->nos, n, GATE_SRC_TIMEOUT_CONSUMER,
                                                 c->rows, &nrows, &hook_err, &err)
                   : gate_claim_cancel(c->db, c->nos, n, GATE_SRC_TIMEOUT_CONSUMER, c->rows, &nrows,
                                       &err);
        *claim_ms = (double)(clock_mono_us() - t0) / 1000.0;
        metric_observe(c->m.db_seconds, db_last_ms(c->db) / 1000.0);
        if (st != OG_OK) {
            if (gate_hook_failed(&err, NULL, 0)) {
                c->hook_stalls++;
                batch_hook_failed_all(c, n, &err);
            } else {
                batch_db_failed(c, "claim_cancel", &err);
            }
            return FLUSH_RETRY;
        }
        c->hook_stalls = 0;
        gate_hook_failed(&hook_err, hook, sizeof(hook));
        c->db_ok = true;
        consumer_watchdog(c);
        for (size_t i = 0; i < nrows; i++)
            metric_inc(c->m.claims[c->rows[i].outcome] ? c->m.claims[c->rows[i].outcome]
                                                       : c->m.claims[GATE_UNKNOWN],
                       1);
        qsort(c->rows, nrows, sizeof(*c->rows), batch_row_cmp);
        memset(c->row_seen, 0, nrows * sizeof(*c->row_seen));
    }
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
        row = batch_row_find(c->rows, nrows, e->order_no);
        if (row == NULL) {
            /* The gate promises a row per distinct order: a schema that
             * drifted. The scanner still covers the order. */
            log_error("claim_row_missing", "order_no=%s", e->order_no);
            e->outcome = GATE_UNKNOWN;
        } else {
            e->outcome = row->outcome;
            e->first = !c->row_seen[row - c->rows];
            c->row_seen[row - c->rows] = true;
        }
        e->state = e->outcome == GATE_NOT_DUE ? BATCH_RESCHEDULE : BATCH_DONE;
        if (e->outcome == GATE_BUSY)
            batch_busy(c, e, now);
        else if (e->outcome == GATE_HOOK_FAILED)
            batch_hook_failed(c, e, hook, &hook_err, now);
    }
    return FLUSH_DONE;
}

/* Turns a payment the gate refused for good into a dead letter, to be
 * recorded before it is produced. */
static void batch_payment_to_dlq(struct consumer *c, struct batch_entry *e,
                                 const struct og_error *err)
{
    char value[1024], reason[CONSUMER_DLQ_REASON_MAX];
    size_t len = 0;
    struct og_error ignored = {0};
    bool ok = codec_encode_payment(&e->pay, value, sizeof(value), &len, &ignored) == OG_OK;

    snprintf(reason, sizeof(reason), "payment_rejected: %s", err->msg);
    batch_to_dlq(c, e, BATCH_RECORD, e->order_no, ok ? value : NULL, len, reason);
}

/* The dead letter of a payment result leaves a trace in the database
 * before it is produced (BATCH_RECORD -> BATCH_PRODUCE): the channel may
 * have taken the money, and reconciliation must see it. Idempotent by key
 * (the transaction number, else the message's position), so a redelivered
 * message is recorded once. On failure the entry stays BATCH_RECORD and the
 * batch is retried: the message is never dropped unrecorded. */
static enum og_status batch_record_refused(struct consumer *c, struct batch_entry *e)
{
    const struct batch_tp *tp = &c->batch.tps[e->tp];
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
    st = gate_record_payment_refused(c->db, &r, &res, &err);
    metric_observe(c->m.db_seconds, db_last_ms(c->db) / 1000.0);
    if (st != OG_OK) {
        batch_db_failed(c, "record_payment_refused", &err);
        return st;
    }
    c->db_ok = true;
    if (res.recorded)
        metric_inc(c->m.payments_refused, 1);
    log_warn("payment_refused_recorded",
             "exception_id=%" PRId64 " key=%s new=%d source=%s order_no=%s reason=%s",
             res.exception_id, res.key, res.recorded, source,
             e->pay.order_no[0] ? e->pay.order_no : "-", log_quote(q, sizeof(q), r.reason));
    e->state = BATCH_PRODUCE;
    return OG_OK;
}

/* Step 1b: a refund result, one record_refund (idempotent by refund_ref). Recorded, or already
 * recorded the same way: done. One the gate cannot apply (no such payment, no refund requested,
 * the reference reported otherwise, the payment refunded under another reference) changes
 * nothing there and becomes a dead letter with that reason, for the payment side to look into;
 * a refund that failed raises its own reconciliation alert. Returns false when the database
 * failed (the batch is retried). */
static bool batch_refund(struct consumer *c, struct batch_entry *e)
{
    struct gate_refund_outcome res;
    struct og_error err = {0};
    enum og_status st;
    char value[512], q[600];
    size_t len = 0;

    st = gate_record_refund(c->db, e->refund.txn_no, e->refund.refund_ref, e->refund.succeeded,
                            &res, &err);
    metric_observe(c->m.db_seconds, db_last_ms(c->db) / 1000.0);
    if (st != OG_OK && !(st == OG_ERR_ARG && !err.retriable)) {
        batch_db_failed(c, "record_refund", &err);
        return false;
    }
    c->db_ok = true;
    if (st == OG_OK) {
        metric_inc(c->m.refunds[res.result], 1);
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
        batch_to_dlq(c, e, BATCH_PRODUCE, e->refund.txn_no, ok ? value : NULL, len, err.msg);
    }
    return true;
}

/* Step 1c: a payment whose claim waited for a row lock another transaction holds (an order
 * service's, around its order) and was cut short (gate_claim_payment_bounded): nothing changed.
 * The payment is held back in the retry set and claimed again after the busy backoff
 * (CONSUMER_RETRY_BASE_MS doubling to CONSUMER_RETRY_CAP_MS) for as long as the row stays
 * locked: a lock is not the payment's fault, so it is never dead-lettered for it; what bounds it
 * is the holder's transaction. Its partition's offset waits at its message; every other
 * payment and cancel of the batch goes on. False when the retry set is full. */
static bool batch_payment_locked(struct consumer *c, struct batch_entry *e, int64_t now)
{
    struct retry_slot *s;
    int slot = batch_retry_slot(c, e, now);
    int tries;

    if (slot < 0)
        return false;
    s = &c->retry.slots[slot];
    tries = s->why == GATE_BUSY ? s->tries : 0;
    retry_wait(&c->retry, slot, GATE_BUSY,
               now + clock_backoff_ms(CONSUMER_RETRY_BASE_MS, CONSUMER_RETRY_CAP_MS, tries));
    e->held = true;
    e->state = BATCH_DONE;
    if (tries % CONSUMER_PAYMENT_LOCK_LOG_EVERY == 0)
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
 * again after 1 s, doubling up to 30 s (CONSUMER_HOOK_BASE_MS, CONSUMER_HOOK_CAP_MS), for
 * consumer.hook_retry_ms from its first hook failure; then recorded as refused (an exception: the
 * money was taken) and dead-lettered. The rest of the batch goes on. Returns FLUSH_RETRY only
 * when the record failed, or when the retry set is full (then the batch is retried whole, as a
 * database outage is). */
static enum flush_result batch_payment_hook_failed(struct consumer *c, struct batch_entry *e,
                                                   struct og_error *err, int64_t now)
{
    char hook[GATE_HOOK_NAME_MAX], q[600];
    int slot;

    gate_hook_failed(err, hook, sizeof(hook));
    c->db_ok = true;
    metric_inc(consumer_metric_hook_failures(hook), 1);
    if (e->hook_first_ms == 0)
        e->hook_first_ms = now;
    if (now - e->hook_first_ms < c->cfg->hook_retry_ms) {
        slot = batch_retry_slot(c, e, now);
        if (slot >= 0) {
            struct retry_slot *s = &c->retry.slots[slot];
            int tries = s->why == GATE_HOOK_FAILED ? s->tries : 0;

            s->hook_first_ms = e->hook_first_ms;
            retry_wait(&c->retry, slot, GATE_HOOK_FAILED,
                       now + clock_backoff_ms(CONSUMER_HOOK_BASE_MS, CONSUMER_HOOK_CAP_MS, tries));
            e->held = true;
            e->state = BATCH_DONE;
            log_warn("hook_failed",
                     "order_no=%s txn_no=%s hook=%s sqlstate=%s tries=%d error=%s msg=\"payment "
                     "claim rolled back; held back and retried locally, the rest of the batch "
                     "goes on\"",
                     e->pay.order_no, e->pay.txn_no, hook, err->sqlstate, tries + 1,
                     log_quote(q, sizeof(q), err->msg));
            return FLUSH_DONE;
        }
        log_warn("hook_failed",
                 "order_no=%s txn_no=%s hook=%s sqlstate=%s error=%s msg=\"payment claim rolled "
                 "back; the retry set is full: the batch is retried\"",
                 e->pay.order_no, e->pay.txn_no, hook, err->sqlstate,
                 log_quote(q, sizeof(q), err->msg));
        return FLUSH_RETRY;
    }
    metric_inc(c->m.retry_given_up[2], 1);
    log_error("hook_dead_lettered",
              "order_no=%s txn_no=%s hook=%s sqlstate=%s error=%s msg=\"a hook failed "
              "this payment beyond consumer.hook_retry_ms; recorded as refused and "
              "dead-lettered\"",
              e->pay.order_no, e->pay.txn_no, hook, err->sqlstate,
              log_quote(q, sizeof(q), err->msg));
    og_error_prefix(err, "hook_failed: sqlstate %s", err->sqlstate);
    batch_payment_to_dlq(c, e, err);
    return batch_record_refused(c, e) == OG_OK ? FLUSH_DONE : FLUSH_RETRY;
}

/* Step 1: payment results, one claim_payment each (idempotent by txn_no), each waiting for a row
 * lock only briefly (CONSUMER_PAYMENT_LOCK_MS, within CONSUMER_PAYMENT_LOCK_BUDGET_MS per flush);
 * one whose row is locked or whose hook fails is held back alone (batch_payment_locked,
 * batch_payment_hook_failed); the refused ones recorded (batch_record_refused); refund results
 * (batch_refund). */
static enum flush_result batch_payments(struct consumer *c)
{
    struct batch *b = &c->batch;
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
            else if (batch_record_refused(c, e) != OG_OK)
                return FLUSH_RETRY;
            continue;
        }
        if (e->kind == BATCH_REFUND && e->state == BATCH_NEW) {
            if (!batch_live(b, e))
                e->state = BATCH_DONE;
            else if (!batch_refund(c, e))
                return FLUSH_RETRY;
            continue;
        }
        if (e->kind != BATCH_PAYMENT || e->state != BATCH_NEW)
            continue;
        if (!batch_live(b, e)) {
            e->state = BATCH_DONE;
            continue;
        }
        wait_ms = CONSUMER_PAYMENT_LOCK_BUDGET_MS - lock_spent_ms;
        if (wait_ms > CONSUMER_PAYMENT_LOCK_MS)
            wait_ms = CONSUMER_PAYMENT_LOCK_MS;
        if (wait_ms < CONSUMER_PAYMENT_LOCK_MIN_MS)
            wait_ms = CONSUMER_PAYMENT_LOCK_MIN_MS;
        st = gate_claim_payment_bounded(c->db, e->pay.order_no, e->pay.txn_no, e->pay.amount_cents,
                                        e->pay.channel, wait_ms, &res, &err);
        metric_observe(c->m.db_seconds, db_last_ms(c->db) / 1000.0);
        if (st == OG_OK) {
            c->db_ok = true;
            consumer_watchdog(c);
            e->outcome = res.outcome;
            e->state = BATCH_DONE;
            metric_inc(c->m.payments[res.outcome] ? c->m.payments[res.outcome]
                                                  : c->m.payments[GATE_UNKNOWN],
                       1);
            log_info("payment_applied", "order_no=%s txn_no=%s outcome=%s status=%s",
                     e->pay.order_no, e->pay.txn_no, gate_outcome_str(res.outcome),
                     order_status_str(res.status));
            continue;
        }
        if (gate_hook_failed(&err, NULL, 0)) {
            if (batch_payment_hook_failed(c, e, &err, clock_wall_ms()) != FLUSH_DONE)
                return FLUSH_RETRY;
            continue;
        }
        if (gate_payment_locked(&err)) {
            c->db_ok = true; /* the database answered */
            lock_spent_ms += wait_ms;
            if (batch_payment_locked(c, e, clock_wall_ms()))
                continue;
            log_warn("payment_locked",
                     "order_no=%s txn_no=%s msg=\"its order's row is locked; the retry set is "
                     "full: the batch is retried\"",
                     e->pay.order_no, e->pay.txn_no);
            return FLUSH_RETRY;
        }
        /* The same arguments will always be refused (invalid value, data
         * exception 22xxx, integrity violation 23xxx): dead-letter the
         * message rather than stall the partition behind it. */
        if (!err.retriable && (st == OG_ERR_ARG || strncmp(err.sqlstate, "22", 2) == 0 ||
                               strncmp(err.sqlstate, "23", 2) == 0)) {
            char q[600];
            log_warn("payment_rejected", "order_no=%s txn_no=%s error=%s", e->pay.order_no,
                     e->pay.txn_no, log_quote(q, sizeof(q), err.msg));
            batch_payment_to_dlq(c, e, &err);
            if (batch_record_refused(c, e) != OG_OK)
                return FLUSH_RETRY;
            continue;
        }
        batch_db_failed(c, "claim_payment", &err);
        return FLUSH_RETRY;
    }
    return FLUSH_DONE;
}

/* Step 3a': an order due within consumer.local_due_ms (new_due_ms, as due_times reported it)
 * is claimed again from the retry set at that time instead of going round a delay topic, where
 * it would wait behind every message produced after it; at most CONSUMER_NOT_DUE_TRIES times
 * (a database clock behind ours keeps answering not_due: then the topic, with the skew
 * logged). Returns true when the entry is finished that way. */
static bool batch_not_due_local(struct consumer *c, struct batch_entry *e, int64_t now)
{
    int slot, tries = 0;

    if (c->cfg->local_due_ms <= 0 || e->new_due_ms - now >= c->cfg->local_due_ms)
        return false;
    if (e->retry >= 0 && c->retry.slots[e->retry].why == GATE_NOT_DUE)
        tries = c->retry.slots[e->retry].tries;
    if (tries >= CONSUMER_NOT_DUE_TRIES) {
        metric_inc(c->m.retry_given_up[1], 1);
        return false;
    }
    slot = batch_retry_slot(c, e, now);
    if (slot < 0) {
        metric_inc(c->m.retry_given_up[1], 1);
        return false;
    }
    {
        int64_t at = tries > 0 ? now + clock_backoff_ms(CONSUMER_RETRY_BASE_MS,
                                                        CONSUMER_RETRY_CAP_MS, tries - 1)
                               : now;
        retry_wait(&c->retry, slot, GATE_NOT_DUE, at > e->new_due_ms ? at : e->new_due_ms);
    }
    e->held = true;
    e->state = BATCH_DONE;
    log_debug("not_due_retry", "order_no=%s db_expire_at_ms=%" PRId64 " local_now_ms=%" PRId64,
              e->order_no, e->new_due_ms, now);
    return true;
}

/* Step 3a: the database's due time for every not_due order. */
static enum flush_result batch_due_times(struct consumer *c)
{
    struct batch *b = &c->batch;
    struct og_error err = {0};
    PGresult *res = NULL;
    struct pgarray array;
    size_t n = 0;
    enum flush_result r = FLUSH_DONE;
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
        return FLUSH_DONE;
    pgarray_init(&array);
    for (size_t i = 0; i < b->n; i++)
        if (b->e[i].state == BATCH_RESCHEDULE)
            pgarray_append(&array, b->e[i].order_no);
    if (pgarray_str(&array) == NULL) {
        log_error("out_of_memory", "where=due_times");
        r = FLUSH_RETRY;
        goto out;
    }
    {
        const char *params[1] = {pgarray_str(&array)};
        if (db_call(c->db, &batch_stmt_due_times, params, &res, &err) != OG_OK) {
            metric_observe(c->m.db_seconds, db_last_ms(c->db) / 1000.0);
            batch_db_failed(c, "due_times", &err);
            r = FLUSH_RETRY;
            goto out;
        }
        metric_observe(c->m.db_seconds, db_last_ms(c->db) / 1000.0);
    }
    c->db_ok = true;
    consumer_watchdog(c);
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
        if (batch_not_due_local(c, e, now))
            continue;
        if (e->new_due_ms <= now) {
            /* The database has not reached the expire_at it reports while
             * our clock has: our clock runs ahead. Look again a bit later. */
            log_warn("clock_skew_suspected",
                     "order_no=%s db_expire_at_ms=%" PRId64 " local_now_ms=%" PRId64, e->order_no,
                     e->new_due_ms, now);
            e->new_due_ms = now + CONSUMER_SKEW_RETRY_MS;
        }
        e->dest_topic = consumer_reschedule_topic(c, b->tps[e->tp].topic, now, &e->new_due_ms);
        e->state = BATCH_PRODUCE;
    }
out:
    PQclear(res);
    pgarray_free(&array);
    return r;
}

/* Produces the message an entry owes: its dead letter, or its re-schedule.
 * On an immediate failure (local queue full) the entry stays PRODUCE. */
void batch_produce(struct consumer *c, struct batch_entry *e)
{
    const struct batch_tp *tp = &c->batch.tps[e->tp];
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
            c->producer, RD_KAFKA_V_TOPIC(c->cfg->dead_letter_topic),
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
        if (codec_encode_cancel(e->order_no, e->new_due_ms, value, sizeof(value), &len, &err) !=
            OG_OK) {
            /* Cannot happen for an order number that decoded: but never
             * loop on it. The scanner covers the order. */
            log_error("reschedule_encode_failed", "order_no=%s error=\"%s\"", e->order_no, err.msg);
            e->state = BATCH_DONE;
            return;
        }
        snprintf(from, sizeof(from), "%s/%s/%s", tp->topic, part, off);
        rerr = rd_kafka_producev(
            c->producer, RD_KAFKA_V_TOPIC(e->dest_topic != NULL ? e->dest_topic : tp->topic),
            RD_KAFKA_V_KEY(e->order_no, strlen(e->order_no)), RD_KAFKA_V_VALUE(value, len),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_OPAQUE(&e->dr),
            RD_KAFKA_V_HEADER("ordergate-rescheduled-from", from, -1), RD_KAFKA_V_END);
    }
    if (rerr != RD_KAFKA_RESP_ERR_NO_ERROR) {
        log_warn("produce_failed", "kind=%s topic=%s partition=%s offset=%s error=%s",
                 e->kind == BATCH_DLQ ? "dead_letter" : "reschedule", tp->topic, part, off,
                 rd_kafka_err2name(rerr));
        metric_inc(c->m.kafka_errors, 1);
        e->state = BATCH_PRODUCE;
        return;
    }
    e->state = BATCH_INFLIGHT;
}

/* Steps 3b and 4: produce what is owed, wait (bounded) for the reports. */
static enum flush_result batch_deliver(struct consumer *c, int wait_ms)
{
    struct batch *b = &c->batch;
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
            batch_produce(c, e);
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
        if (kafka_wait(c->producer, waiting, nw, left > 0 ? (int)left : 0) > 0 || left <= 0)
            break;
    }
    for (size_t i = 0; i < b->n; i++) {
        struct batch_entry *e = &b->e[i];
        if (e->state != BATCH_INFLIGHT || !e->dr.done)
            continue;
        if (e->dr.err == RD_KAFKA_RESP_ERR_NO_ERROR) {
            e->state = BATCH_DONE;
            c->kafka_ok = true;
            if (!batch_live(b, e))
                continue;
            if (e->kind == BATCH_DLQ) {
                metric_inc(c->m.dead_lettered, 1);
                log_info("dead_lettered",
                         "topic=%s partition=%" PRId32 " offset=%" PRId64 " reason=\"%.200s\"",
                         b->tps[e->tp].topic, b->tps[e->tp].partition, e->offset,
                         e->dlq_reason ? e->dlq_reason : "");
            } else {
                char due[32];
                metric_inc(c->m.rescheduled, 1);
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
                     e->kind == BATCH_DLQ ? c->cfg->dead_letter_topic : b->tps[e->tp].topic,
                     rd_kafka_err2name(e->dr.err));
            metric_inc(c->m.kafka_errors, 1);
            e->state = batch_live(b, e) ? BATCH_PRODUCE : BATCH_DONE;
            failed = true;
        }
    }
    bool inflight = false;
    for (size_t i = 0; i < b->n; i++) {
        failed |= b->e[i].state == BATCH_PRODUCE;
        inflight |= b->e[i].state == BATCH_INFLIGHT;
    }
    return failed ? FLUSH_RETRY : inflight ? FLUSH_WAIT : FLUSH_DONE;
}

/* Step 5: store offset + 1 of the last message of each live partition. claim_ms (this flush's
 * claim call; 0: none, and a batch retried after a later step failed counts its last flush
 * only) goes into the debug line, so that each batch's claim time can be read back: the
 * histogram only has buckets. */
static void batch_store(struct consumer *c, double claim_ms)
{
    struct batch *b = &c->batch;
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new((int)b->ntps);
    int64_t now = clock_wall_ms();
    size_t live = 0;
    rd_kafka_resp_err_t rerr;

    /* Slots whose order is finished for good go back to the set first: their messages'
     * offsets may be passed now. */
    for (size_t i = 0; i < b->n; i++)
        if (batch_live(b, &b->e[i]) && b->e[i].retry >= 0 && !b->e[i].held)
            retry_release(&c->retry, b->e[i].retry);
    for (size_t i = 0; i < b->ntps; i++) {
        const struct batch_tp *tp = &b->tps[i];
        int64_t upto = tp->max_offset + 1, behind, floor;

        if (tp->voided)
            continue;
        /* Never past a message whose order waits in the retry set: store its offset and
         * remember how far the partition is done behind it. */
        behind = retry_hold_take(&c->retry, tp->topic, tp->partition);
        if (behind > upto)
            upto = behind;
        if (retry_floor(&c->retry, tp->topic, tp->partition, &floor) && floor < upto) {
            if (!retry_hold_put(&c->retry, tp->topic, tp->partition, upto))
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
            metric_observe(c->m.lateness, (double)(now - e->due_ms) / 1000.0);
    }
    if (list->cnt > 0) {
        rerr = rd_kafka_offsets_store(c->rk, list);
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
        metric_inc(c->m.batches, 1);
        metric_inc(c->m.offsets_stored, (double)live);
        metric_observe(c->m.batch_size, (double)live);
        log_debug("batch_committed", "messages=%zu partitions=%zu claim_ms=%.3f", live, b->ntps,
                  claim_ms);
    }
}

enum flush_result batch_flush(struct consumer *c, int wait_ms)
{
    struct batch *b = &c->batch;
    enum flush_result r;
    double claim_ms = 0;

    if (b->n == 0)
        return FLUSH_DONE;
    /* Payments first: a payment consumed into the same batch as a cancel
     * that fell due meanwhile was made before that cancel reached the gate,
     * and the gate lets the first claim win. */
    r = batch_payments(c);
    if (r == FLUSH_DONE)
        r = batch_claim(c, &claim_ms);
    if (r == FLUSH_DONE)
        r = batch_due_times(c);
    /* Deliveries run even after a database failure: dead letters already
     * produced must be waited for in any case. */
    {
        enum flush_result d = batch_deliver(c, r == FLUSH_DONE ? wait_ms : 0);
        if (r == FLUSH_DONE)
            r = d;
    }
    if (r != FLUSH_DONE)
        return r;
    for (size_t i = 0; i < b->n; i++)
        if (b->e[i].state != BATCH_DONE)
            return FLUSH_RETRY; /* cannot happen; never store past unfinished work */
    batch_store(c, claim_ms);
    batch_clear(b);
    return FLUSH_DONE;
}

size_t batch_take_retries(struct consumer *c, int64_t now_wall)
{
    struct retry_set *r = &c->retry;
    size_t n = 0;

    if (r->used == 0)
        return 0;
    for (size_t i = 0; i < r->cap; i++) {
        struct retry_slot *s = &r->slots[i];
        struct batch_entry *e;

        if (s->state != RETRY_WAITING || s->at_ms > now_wall)
            continue;
        if (batch_full(&c->batch))
            break;
        e = batch_add(&c->batch, s->kind, s->topic, s->partition, s->offset);
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
        metric_inc(c->m.retries[s->why == GATE_BUSY ? 0 : s->why == GATE_NOT_DUE ? 1 : 2], 1);
        n++;
    }
    return n;
}
