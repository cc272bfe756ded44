#include "common/outbox.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/codec.h"
#include "common/delay.h"
#include "common/log.h"
#include "common/pgarray.h"
#include "common/signals.h"

#define OUTBOX_SLOT_MAGIC          0x6f67626fu /* "ogbo" */
#define OUTBOX_DEFAULT_TIMEOUT_MS  10000
#define OUTBOX_POLL_MS             50
#define OUTBOX_MISSING_DR_GRACE_MS 1000

enum outbox_slot_state { OUTBOX_PENDING = 0, OUTBOX_DELIVERED, OUTBOX_FAILED };

struct outbox_batch;

/* One produced message; its address is the message's opaque. */
struct outbox_slot {
    uint32_t magic;
    struct outbox_batch *batch;
    atomic_int state;
    atomic_int err; /* rd_kafka_resp_err_t of the delivery report */
};

/* The messages of one step. `outstanding` counts messages handed to the
 * producer whose report has not arrived; the batch may be freed only when it
 * is zero, because each report writes into its slot. */
struct outbox_batch {
    atomic_size_t outstanding;
    size_t n;
    struct outbox_slot slots[];
};

struct outbox_relay {
    struct db *db;
    rd_kafka_t *producer;
    char *topics[3]; /* by enum outbox_route, resolved once from the config */
    /* cancel_scheduled events go to the delay topic that fits their due time.
     * levels_err: why the levels could not be read from the config (then
     * such an event fails the step, with this message). */
    struct delay_levels levels;
    char levels_err[512];
    int batch_size;
    int timeout_ms;
    /* A batch whose wait timed out: reports may still arrive for it, so it
     * lives on until they all did. While it lives no new batch starts, which
     * bounds the duplicates a broker outage can cause to one extra copy. */
    struct outbox_batch *inflight;
    size_t quarantined_total; /* events this relay set aside (outbox_quarantine) */
};

static const struct db_stmt outbox_stmt_lock = {
    "og_outbox_lock",
    "SELECT id, event_type, order_no, payload FROM ordergate.outbox_lock_batch($1::int)", 1};
static const struct db_stmt outbox_stmt_mark = {
    "og_outbox_mark", "SELECT ordergate.outbox_mark_published($1::bigint[])", 1};
static const struct db_stmt outbox_stmt_backlog = {"og_outbox_backlog",
                                                   "SELECT ordergate.outbox_backlog()", 0};
static const struct db_stmt outbox_stmt_quarantine = {
    "og_outbox_quarantine", "SELECT ordergate.outbox_quarantine($1::bigint, $2::text)", 2};
static const struct db_stmt outbox_stmt_quarantined = {
    "og_outbox_quarantined", "SELECT ordergate.outbox_quarantine_count()", 0};

void outbox_dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque)
{
    struct outbox_slot *slot = msg->_private;

    (void)rk;
    (void)opaque;
    if (slot == NULL || slot->magic != OUTBOX_SLOT_MAGIC)
        return; /* not an outbox message */
    atomic_store(&slot->err, (int)msg->err);
    atomic_store(&slot->state, msg->err ? OUTBOX_FAILED : OUTBOX_DELIVERED);
    /* Last touch: once this reaches zero the relay may free the slot. */
    atomic_fetch_sub(&slot->batch->outstanding, 1);
}

enum outbox_route {
    OUTBOX_ROUTE_EVENTS,
    OUTBOX_ROUTE_REFUNDS,
    OUTBOX_ROUTE_ALERTS,
    OUTBOX_ROUTE_DELAY
};

/* order_paid, order_cancelled, payment_reminder and any event type added later go to the
 * events topic; cancel_scheduled is a cancel message for a delay topic, reminder_scheduled a
 * reminder's message (the same message with kind reminder) for the same delay topics. */
static enum outbox_route outbox_route_of(const char *event_type)
{
    if (event_type != NULL && (strcmp(event_type, "cancel_scheduled") == 0 ||
                               strcmp(event_type, "reminder_scheduled") == 0))
        return OUTBOX_ROUTE_DELAY;
    if (event_type != NULL && strcmp(event_type, "refund_requested") == 0)
        return OUTBOX_ROUTE_REFUNDS;
    if (event_type != NULL && strcmp(event_type, "reconciliation_alert") == 0)
        return OUTBOX_ROUTE_ALERTS;
    return OUTBOX_ROUTE_EVENTS;
}

const char *outbox_topic_for(const struct og_config *cfg, const char *event_type)
{
    const char *topic = NULL;

    switch (outbox_route_of(event_type)) {
    case OUTBOX_ROUTE_REFUNDS:
        topic = cfg->outbox.refund_topic;
        break;
    case OUTBOX_ROUTE_ALERTS:
        topic = cfg->outbox.alert_topic;
        break;
    case OUTBOX_ROUTE_EVENTS:
    case OUTBOX_ROUTE_DELAY: /* per message: outbox_relay_step */
        break;
    }
    if (topic == NULL || *topic == '\0')
        topic = cfg->outbox.topic;
    return topic;
}

/* True when the producer has a delivery report callback. The conf getter
 * prints pointer settings as an address, empty when unset. */
static bool outbox_producer_has_dr_cb(rd_kafka_t *producer)
{
    char val[64] = "";
    size_t size = sizeof(val);

    if (rd_kafka_conf_get(rd_kafka_conf(producer), "dr_msg_cb", val, &size) != RD_KAFKA_CONF_OK)
        return false;
    return val[0] != '\0' && strcmp(val, "0") != 0 && strcmp(val, "(nil)") != 0;
}

struct outbox_relay *outbox_relay_new(struct db *db, rd_kafka_t *producer,
                                      const struct og_config *cfg)
{
    struct outbox_relay *relay;

    if (db == NULL || producer == NULL || cfg == NULL || cfg->outbox.topic == NULL ||
        *cfg->outbox.topic == '\0') {
        log_error("outbox_relay_invalid", "reason=\"database, producer and outbox.topic are "
                                          "required\"");
        return NULL;
    }
    if (!outbox_producer_has_dr_cb(producer)) {
        log_error("outbox_relay_invalid",
                  "reason=\"the producer has no delivery report callback: install outbox_dr_cb "
                  "with rd_kafka_conf_set_dr_msg_cb\"");
        return NULL;
    }
    relay = calloc(1, sizeof(*relay));
    if (relay == NULL)
        return NULL;
    relay->db = db;
    relay->producer = producer;
    relay->topics[OUTBOX_ROUTE_EVENTS] = strdup(outbox_topic_for(cfg, "order_paid"));
    relay->topics[OUTBOX_ROUTE_REFUNDS] = strdup(outbox_topic_for(cfg, "refund_requested"));
    relay->topics[OUTBOX_ROUTE_ALERTS] = strdup(outbox_topic_for(cfg, "reconciliation_alert"));
    {
        /* Only cancel_scheduled events need the levels, and only when the database schedules
         * cancels (schema setting schedule_cancels): delay topics without levels are fine
         * until such an event comes; then the step fails with this reason
         * (outbox_delay_topic). */
        struct og_error lerr = {0};
        if (delay_levels_parse(cfg, DELAY_ALL_TOPICS, &relay->levels, &lerr) != OG_OK)
            snprintf(relay->levels_err, sizeof(relay->levels_err), "%s", lerr.msg);
    }
    relay->batch_size = cfg->outbox.batch > 0 ? cfg->outbox.batch : 500;
    relay->timeout_ms = OUTBOX_DEFAULT_TIMEOUT_MS;
    for (int i = 0; i < 3; i++) {
        if (relay->topics[i] == NULL) {
            outbox_relay_free(relay);
            return NULL;
        }
    }
    return relay;
}

void outbox_relay_set_timeout(struct outbox_relay *relay, int timeout_ms)
{
    if (relay != NULL && timeout_ms > 0)
        relay->timeout_ms = timeout_ms;
}

/* Serves delivery reports until the batch has none outstanding or the
 * deadline passes. Returns true when every report arrived. */
static bool outbox_wait(struct outbox_relay *relay, struct outbox_batch *batch, int64_t deadline_ms)
{
    int64_t idle_since = -1;

    while (atomic_load(&batch->outstanding) > 0) {
        int64_t now = clock_mono_ms();
        if (now >= deadline_ms)
            return false;
        rd_kafka_poll(relay->producer, OUTBOX_POLL_MS);
        /* Nothing queued or in flight, yet reports missing: the callback
         * does not reach outbox_dr_cb. Waiting longer cannot help. */
        if (rd_kafka_outq_len(relay->producer) == 0 && atomic_load(&batch->outstanding) > 0) {
            if (idle_since < 0)
                idle_since = now;
            else if (now - idle_since >= OUTBOX_MISSING_DR_GRACE_MS)
                return false;
        } else {
            idle_since = -1;
        }
    }
    return true;
}

/* Frees the batch of an earlier timed-out step once its reports are in. */
static enum og_status outbox_reap(struct outbox_relay *relay, struct og_error *err)
{
    if (relay->inflight == NULL)
        return OG_OK;
    rd_kafka_poll(relay->producer, 0);
    if (atomic_load(&relay->inflight->outstanding) > 0 && rd_kafka_outq_len(relay->producer) == 0)
        return og_error_set(err, OG_ERR_INTERNAL, false,
                            "outbox delivery reports never arrive: the producer's dr_msg_cb "
                            "must be outbox_dr_cb or pass outbox messages on to it");
    if (atomic_load(&relay->inflight->outstanding) > 0)
        return og_error_set(err, OG_ERR_KAFKA, true,
                            "%zu outbox messages of an earlier batch still await their delivery "
                            "report; no new batch until they do",
                            atomic_load(&relay->inflight->outstanding));
    free(relay->inflight);
    relay->inflight = NULL;
    return OG_OK;
}

void outbox_relay_free(struct outbox_relay *relay)
{
    if (relay == NULL)
        return;
    if (relay->inflight != NULL) {
        outbox_wait(relay, relay->inflight, clock_mono_ms() + relay->timeout_ms);
        if (atomic_load(&relay->inflight->outstanding) == 0)
            free(relay->inflight);
        else
            /* A late report would write into freed memory: keep it. */
            log_warn("outbox_relay_leak", "outstanding=%zu",
                     atomic_load(&relay->inflight->outstanding));
    }
    for (int i = 0; i < 3; i++)
        free(relay->topics[i]);
    delay_levels_free(&relay->levels);
    free(relay);
}

/* Delivery errors that the same message will meet again however often it is
 * retried; everything else (timeouts, broker down, leader moves) may pass. */
static bool outbox_kafka_retriable(rd_kafka_resp_err_t e)
{
    switch (e) {
    case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
    case RD_KAFKA_RESP_ERR_INVALID_RECORD:
    case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION:
    case RD_KAFKA_RESP_ERR__INVALID_ARG:
    case RD_KAFKA_RESP_ERR__FATAL:
        return false;
    default:
        return true;
    }
}

/* Errors that belong to the message itself, not to the broker, the topic or
 * our rights: the same bytes are refused however often and wherever they go.
 * Such an event is quarantined; any other failure leaves it for a later step. */
static bool outbox_kafka_poison(rd_kafka_resp_err_t e)
{
    return e == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE || e == RD_KAFKA_RESP_ERR_INVALID_RECORD;
}

static void outbox_rollback(struct db *db)
{
    PGconn *conn = db_conn(db);
    struct og_error ignored = {0};

    /* A lost connection took its transaction with it; ROLLBACK on a fresh
     * one would only draw a warning. */
    if (conn == NULL || PQstatus(conn) != CONNECTION_OK ||
        PQtransactionStatus(conn) == PQTRANS_IDLE)
        return;
    if (db_exec(db, "ROLLBACK", &ignored) != OG_OK)
        log_warn("outbox_rollback_failed", "error=\"%s\"", ignored.msg);
}

/* Hands one row to the producer, waiting out a full local queue until the
 * deadline. */
static rd_kafka_resp_err_t outbox_produce(struct outbox_relay *relay, struct outbox_slot *slot,
                                          const char *topic, PGresult *rows, int i,
                                          int64_t deadline_ms)
{
    const char *id = PQgetvalue(rows, i, 0);
    const char *type = PQgetvalue(rows, i, 1);
    const char *order_no = PQgetvalue(rows, i, 2);
    const char *payload = PQgetisnull(rows, i, 3) ? NULL : PQgetvalue(rows, i, 3);
    size_t payload_len = payload != NULL ? (size_t)PQgetlength(rows, i, 3) : 0;
    rd_kafka_resp_err_t e;

    for (;;) {
        e = rd_kafka_producev(relay->producer, RD_KAFKA_V_TOPIC(topic),
                              RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                              RD_KAFKA_V_KEY(order_no, (size_t)PQgetlength(rows, i, 2)),
                              RD_KAFKA_V_VALUE((void *)payload, payload_len),
                              RD_KAFKA_V_HEADER("ordergate-event-id", id, -1),
                              RD_KAFKA_V_HEADER("ordergate-event-type", type, -1),
                              RD_KAFKA_V_OPAQUE(slot), RD_KAFKA_V_END);
        if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL || clock_mono_ms() >= deadline_ms)
            return e;
        rd_kafka_poll(relay->producer, OUTBOX_POLL_MS);
    }
}

/* The delay topic for a cancel_scheduled or reminder_scheduled row: its payload is the consumer's
 * cancel message (a reminder's has kind reminder), decoded as the consumer will decode it (a
 * payload it would refuse is never published), due in due_at - now. A payload that does not decode
 * (a due time beyond year 9999) can never be sent: *poison is set and err says why. No delay topic
 * known is the relay's configuration, not the event's: *poison stays false. */
static enum og_status outbox_delay_topic(struct outbox_relay *relay, PGresult *rows, int i,
                                         const char **topic, bool *poison, struct og_error *err)
{
    struct codec_cancel msg;
    struct og_error derr = {0};

    *poison = false;
    if (relay->levels.n == 0)
        return og_error_set(
            err, OG_ERR_CONFIG, false,
            "outbox event %s is a delay-topic message but no delay topic is known: %s",
            PQgetvalue(rows, i, 0),
            relay->levels_err[0] ? relay->levels_err : "kafka.topics is empty");
    if (codec_decode_cancel(PQgetvalue(rows, i, 2), (size_t)PQgetlength(rows, i, 2),
                            PQgetvalue(rows, i, 3), (size_t)PQgetlength(rows, i, 3), &msg,
                            &derr) != OG_OK) {
        *poison = true;
        return og_error_set(err, OG_ERR_INTERNAL, false,
                            "%s is not a message the consumer can read: %s", PQgetvalue(rows, i, 1),
                            derr.msg);
    }
    *topic = delay_topic_for(&relay->levels, msg.due_ms - clock_wall_ms());
    return OG_OK;
}

/* What a step does with each locked row. */
enum outbox_fate {
    OUTBOX_LEFT = 0,    /* not handed over (a failure before it): unpublished, for a later step */
    OUTBOX_PRODUCED,    /* handed to the producer: its slot tells the outcome */
    OUTBOX_QUARANTINED, /* can never be published as it is: set aside with reason[i] */
};

struct outbox_rows {
    enum outbox_fate *fate;
    char **reason;
};

/* Keeps the first failure that does not quarantine its event: the step
 * reports it after committing what did get through. */
static void outbox_note_failure(struct og_error *first, const struct og_error *e)
{
    if (first->status == OG_OK)
        *first = *e;
}

static enum og_status outbox_set_aside(struct outbox_rows *r, int i, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static enum og_status outbox_set_aside(struct outbox_rows *r, int i, const char *fmt, ...)
{
    va_list ap;
    char buf[1000];

    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    r->reason[i] = strdup(buf);
    if (r->reason[i] == NULL)
        return OG_ERR_NOMEM;
    r->fate[i] = OUTBOX_QUARANTINED;
    return OG_OK;
}

enum og_status outbox_relay_step(struct outbox_relay *relay, size_t *published,
                                 struct og_error *err)
{
    struct outbox_batch *batch = NULL, *view = NULL;
    PGresult *rows = NULL, *res = NULL;
    struct pgarray ids;
    struct outbox_rows r = {NULL, NULL};
    struct og_error first = {0};
    char limit[16];
    const char *params[2];
    bool in_tx = false, timed_out = false;
    enum og_status st;
    size_t n = 0, handed = 0, delivered = 0, quarantined = 0, left = 0;
    int64_t deadline;

    pgarray_init(&ids);
    if (published != NULL)
        *published = 0;
    if (relay == NULL)
        return og_error_set(err, OG_ERR_ARG, false, "no outbox relay");
    if (signals_stop)
        return og_error_set(err, OG_ERR_STOPPED, true, "shutdown requested");
    st = outbox_reap(relay, err);
    if (st != OG_OK)
        return st;
    /* The connection is the relay's alone: a transaction left open on it is
     * somebody else's, and folding it into ours would commit their work. */
    if (db_conn(relay->db) != NULL && PQstatus(db_conn(relay->db)) == CONNECTION_OK &&
        PQtransactionStatus(db_conn(relay->db)) != PQTRANS_IDLE)
        return og_error_set(err, OG_ERR_INTERNAL, false,
                            "the relay's database connection is inside a transaction");

    st = db_exec(relay->db, "BEGIN", err);
    if (st != OG_OK)
        goto out;
    in_tx = true;
    snprintf(limit, sizeof(limit), "%d", relay->batch_size);
    params[0] = limit;
    st = db_run(relay->db, &outbox_stmt_lock, params, &rows, err);
    if (st != OG_OK)
        goto out;
    if (PQnfields(rows) != 4) {
        st = og_error_set(err, OG_ERR_INTERNAL, false,
                          "outbox_lock_batch returned %d columns, expected 4", PQnfields(rows));
        goto out;
    }
    n = (size_t)PQntuples(rows);
    if (n == 0) {
        st = db_exec(relay->db, "COMMIT", err);
        in_tx = false;
        goto out;
    }

    batch = calloc(1, sizeof(*batch) + n * sizeof(batch->slots[0]));
    r.fate = calloc(n, sizeof(*r.fate));
    r.reason = calloc(n, sizeof(*r.reason));
    if (batch == NULL || r.fate == NULL || r.reason == NULL) {
        st = og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
        goto out;
    }
    batch->n = n;
    view = batch;
    deadline = clock_mono_ms() + relay->timeout_ms;
    /* One row's failure stops only that row: a row that can never be sent is
     * set aside, one that may pass later is left, and the rest go on. Only a
     * failure of the producer itself (its queue full until the deadline)
     * stops handing over the rows after it. */
    for (size_t i = 0; i < n; i++) {
        struct outbox_slot *slot = &batch->slots[i];
        enum outbox_route route = outbox_route_of(PQgetvalue(rows, (int)i, 1));
        const char *topic = route == OUTBOX_ROUTE_DELAY ? NULL : relay->topics[route];
        struct og_error rerr = {0};
        rd_kafka_resp_err_t e;

        if (signals_stop) {
            og_error_set(&rerr, OG_ERR_STOPPED, true,
                         "shutdown requested while publishing the outbox");
            outbox_note_failure(&first, &rerr);
            break;
        }
        if (route == OUTBOX_ROUTE_DELAY) {
            bool poison = false;
            if (outbox_delay_topic(relay, rows, (int)i, &topic, &poison, &rerr) != OG_OK) {
                if (!poison) {
                    outbox_note_failure(&first, &rerr);
                    continue;
                }
                if (outbox_set_aside(&r, (int)i, "%s", rerr.msg) != OG_OK) {
                    st = og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
                    goto wait;
                }
                continue;
            }
        }

        slot->magic = OUTBOX_SLOT_MAGIC;
        slot->batch = batch;
        /* Counted before the hand-off: the report may arrive at once. */
        atomic_fetch_add(&batch->outstanding, 1);
        e = outbox_produce(relay, slot, topic, rows, (int)i, deadline);
        if (e == RD_KAFKA_RESP_ERR_NO_ERROR) {
            r.fate[i] = OUTBOX_PRODUCED;
            handed++;
            continue;
        }
        atomic_fetch_sub(&batch->outstanding, 1);
        if (outbox_kafka_poison(e)) {
            if (outbox_set_aside(&r, (int)i, "the producer refused it for %s: %s", topic,
                                 rd_kafka_err2str(e)) != OG_OK) {
                st = og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
                goto wait;
            }
            continue;
        }
        og_error_set(&rerr, OG_ERR_KAFKA, outbox_kafka_retriable(e),
                     "cannot produce outbox event %s to %s: %s", PQgetvalue(rows, (int)i, 0), topic,
                     rd_kafka_err2str(e));
        outbox_note_failure(&first, &rerr);
        if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL || e == RD_KAFKA_RESP_ERR__FATAL)
            break; /* the producer, not this row: the rows after it would meet it too */
    }

wait:
    /* Even when producing stopped half-way, what was handed over must report
     * before the slots may go. */
    if (!outbox_wait(relay, batch, deadline)) {
        /* Reports may still arrive: the batch lives on in the relay, and this
         * step reads only the slots already reported. */
        timed_out = true;
        relay->inflight = batch;
        batch = NULL;
    }
    if (st != OG_OK)
        goto out;
    for (size_t i = 0; i < n; i++) {
        int state, e;
        if (r.fate[i] != OUTBOX_PRODUCED)
            continue;
        state = atomic_load(&view->slots[i].state);
        e = atomic_load(&view->slots[i].err);
        if (state == OUTBOX_DELIVERED) {
            pgarray_append_len(&ids, PQgetvalue(rows, (int)i, 0),
                               (size_t)PQgetlength(rows, (int)i, 0));
            delivered++;
        } else if (state == OUTBOX_FAILED && outbox_kafka_poison((rd_kafka_resp_err_t)e)) {
            if (outbox_set_aside(&r, (int)i, "the broker refused it: %s",
                                 rd_kafka_err2str((rd_kafka_resp_err_t)e)) != OG_OK) {
                st = og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
                goto out;
            }
        } else if (state == OUTBOX_FAILED) {
            struct og_error rerr = {0};
            og_error_set(&rerr, OG_ERR_KAFKA, outbox_kafka_retriable((rd_kafka_resp_err_t)e),
                         "delivery failed for outbox event %s: %s", PQgetvalue(rows, (int)i, 0),
                         rd_kafka_err2str((rd_kafka_resp_err_t)e));
            outbox_note_failure(&first, &rerr);
            left++;
        } else {
            left++; /* no report yet (timed_out) */
        }
    }
    if (timed_out) {
        struct og_error rerr = {0};
        og_error_set(&rerr, OG_ERR_KAFKA, true,
                     "%zu of %zu outbox events got no delivery report within %d ms (broker "
                     "down, or the producer lacks outbox_dr_cb); left unpublished",
                     (size_t)atomic_load(&view->outstanding), handed, relay->timeout_ms);
        /* The timeout is the news: it says why no new batch starts. */
        first = rerr;
    }

    /* What the broker acknowledged is marked, whatever happened to the rest:
     * a later step sends again only what did not get through. */
    if (delivered > 0) {
        params[0] = pgarray_str(&ids);
        if (params[0] == NULL) {
            st = og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
            goto out;
        }
        st = db_run(relay->db, &outbox_stmt_mark, params, &res, err);
        if (st != OG_OK)
            goto out;
        if (PQntuples(res) != 1 || PQnfields(res) != 1) {
            st = og_error_set(err, OG_ERR_INTERNAL, false,
                              "outbox_mark_published returned an unexpected shape");
            goto out;
        }
    }
    for (size_t i = 0; i < n; i++) {
        PGresult *q = NULL;
        if (r.fate[i] != OUTBOX_QUARANTINED)
            continue;
        params[0] = PQgetvalue(rows, (int)i, 0);
        params[1] = r.reason[i];
        st = db_run(relay->db, &outbox_stmt_quarantine, params, &q, err);
        PQclear(q);
        if (st != OG_OK)
            goto out;
        quarantined++;
    }
    st = db_exec(relay->db, "COMMIT", err);
    in_tx = false;
    if (st != OG_OK)
        goto out;
    /* Logged once committed, one line per event: each is its own failure. */
    for (size_t i = 0; i < n; i++) {
        char qr[1100];
        if (r.fate[i] != OUTBOX_QUARANTINED)
            continue;
        log_error("outbox_event_quarantined", "id=%s event_type=%s order_no=%s reason=%s",
                  PQgetvalue(rows, (int)i, 0), PQgetvalue(rows, (int)i, 1),
                  PQgetvalue(rows, (int)i, 2), log_quote(qr, sizeof(qr), r.reason[i]));
    }
    relay->quarantined_total += quarantined;
    if (published != NULL && delivered > 0)
        *published = (size_t)strtoull(PQgetvalue(res, 0, 0), NULL, 10);
    log_debug("outbox_published", "n=%zu quarantined=%zu left=%zu", delivered, quarantined, left);
    if (first.status != OG_OK) {
        /* Committed what got through; the failure is still the step's answer,
         * so the caller backs off and logs it. */
        *err = first;
        st = first.status;
    }
out:
    if (in_tx)
        outbox_rollback(relay->db);
    PQclear(rows);
    PQclear(res);
    pgarray_free(&ids);
    if (r.reason != NULL)
        for (size_t i = 0; i < n; i++)
            free(r.reason[i]);
    free(r.reason);
    free(r.fate);
    free(batch);
    return st;
}

#define OUTBOX_LOG_EVERY 50

bool outbox_failure_log_note(struct outbox_failure_log *l, enum og_status st, const char *msg)
{
    char key[sizeof(l->last)];
    size_t k;
    int n = snprintf(key, sizeof(key), "%s:", og_status_str(st));
    bool log;

    k = n > 0 && (size_t)n < sizeof(key) ? (size_t)n : 0;
    for (const char *p = msg != NULL ? msg : ""; *p != '\0' && k + 1 < sizeof(key); p++) {
        if (*p >= '0' && *p <= '9') {
            if (k > 0 && key[k - 1] == '#')
                continue;
            key[k++] = '#';
        } else {
            key[k++] = *p;
        }
    }
    key[k] = '\0';
    log = l->failures % OUTBOX_LOG_EVERY == 0 || strcmp(key, l->last) != 0;
    snprintf(l->last, sizeof(l->last), "%s", key);
    l->failures++;
    return log;
}

void outbox_failure_log_clear(struct outbox_failure_log *l)
{
    l->failures = 0;
    l->last[0] = '\0';
}

size_t outbox_relay_quarantined_total(const struct outbox_relay *relay)
{
    return relay != NULL ? relay->quarantined_total : 0;
}

enum og_status outbox_backlog(struct db *db, long long *backlog, struct og_error *err)
{
    PGresult *res = NULL;
    enum og_status st;

    *backlog = 0;
    st = db_call(db, &outbox_stmt_backlog, NULL, &res, err);
    if (st == OG_OK && (PQntuples(res) != 1 || PQnfields(res) != 1))
        st = og_error_set(err, OG_ERR_INTERNAL, false,
                          "outbox_backlog returned an unexpected shape");
    if (st == OG_OK)
        *backlog = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    return st;
}

enum og_status outbox_quarantined(struct db *db, long long *count, struct og_error *err)
{
    PGresult *res = NULL;
    enum og_status st;

    *count = 0;
    st = db_call(db, &outbox_stmt_quarantined, NULL, &res, err);
    if (st == OG_OK && (PQntuples(res) != 1 || PQnfields(res) != 1))
        st = og_error_set(err, OG_ERR_INTERNAL, false,
                          "outbox_quarantine_count returned an unexpected shape");
    if (st == OG_OK)
        *count = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    return st;
}
