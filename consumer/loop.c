/* The consume loop (consumer/loop.h): the group member, each message, pause/seek/resume, when to
 * flush, stalls during outages, the watchdog and the health file, and the shutdown sequence.
 *
 * Must not claim, produce or store offsets itself: the commit protocol (consumer/commit.h) does,
 * on the batch the loop fills. */
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/health.h"
#include "common/log.h"
#include "common/notify.h"
#include "common/signals.h"
#include "consumer/consumer.h"
#include "consumer/levels.h"
#include "consumer/loop.h"

#define LOOP_GAUGES_EVERY_MS 1000
#define LOOP_STATS_EVERY_MS  30000
/* Shutdown steps, in milliseconds from its start (loop_shutdown). The whole stays below
 * CONSUMER_STOP_MS, after which the guard ends the process whatever it is doing. */
#define LOOP_SHUTDOWN_BATCH_MS  3000   /* finishing the batch in hand */
#define LOOP_SHUTDOWN_COMMIT_MS 2000   /* the final commit, from its start */
#define LOOP_SHUTDOWN_CLOSE_MS  7000   /* the group membership closed */
#define LOOP_SHUTDOWN_RELAY_MS  7500   /* the outbox relay thread joined */
#define LOOP_SHUTDOWN_MS        8000   /* the producer flushed */
#define LOOP_STATS_INTERVAL     "5000" /* librdkafka statistics, for broker reachability */
/* The poll's longest wait while a batch is in flight (its offsets are stored the turn after its
 * parts answer): LOOP_FLIGHT_POLL_MS for LOOP_FLIGHT_FAST_MS after its parts were handed out
 * (a claim of a batch's part takes 10 to 100 ms), LOOP_FLIGHT_SLOW_POLL_MS after that. */
#define LOOP_FLIGHT_POLL_MS      1
#define LOOP_FLIGHT_FAST_MS      250
#define LOOP_FLIGHT_SLOW_POLL_MS 20
/* A late cancel's debug line (loop_log_in_hand): later than this, at most this many a second. */
#define LOOP_LATE_LOG_MS    50
#define LOOP_LATE_LOG_PER_S 100

/* What a subscribed topic carries. */
enum loop_topic { LOOP_TOPIC_DELAY, LOOP_TOPIC_PAYMENTS, LOOP_TOPIC_REFUNDS };

/* The stop guard: a thread that waits for the stop signal (or loop_guard_arm, when a fatal
 * error stops the loop) and ends the process CONSUMER_STOP_MS later if it is still there.
 * Each shutdown step has a bound of its own; the guard also covers what has none (a
 * database call in flight when the signal came, a thread that does not join). Ending the
 * process there is as safe as a crash: offsets are stored only after the database commit. */
static volatile sig_atomic_t loop_guard_armed;

/* The final commit's answer (rd_kafka_commit_queue's callback). */
struct loop_commit_wait {
    bool done;
    rd_kafka_resp_err_t err;
};

static void loop_resume_due(struct consumer *c, int64_t now_wall);
static void loop_release_due(struct consumer *c, int64_t now_wall);
static bool loop_take(void *arg, const char *topic, int32_t partition,
                      const struct window_entry *w);
static bool loop_window(struct consumer *c, const rd_kafka_message_t *m, const char *topic,
                        const struct codec_cancel *cancel, int64_t due, int64_t now);
static int loop_timeout(struct consumer *c, int64_t now, int64_t now_wall);
static void loop_message(struct consumer *c, const rd_kafka_message_t *m);
static int64_t loop_due(struct consumer *c, const char *topic, const rd_kafka_message_t *m,
                        const struct codec_cancel *cancel, int64_t now);
static struct metric *loop_topic_metric(struct consumer *c, const char *topic,
                                        enum loop_topic *kind);
static void loop_dead_letter(struct consumer *c, const rd_kafka_message_t *m, const char *topic,
                             enum loop_topic kind, const struct og_error *why);
static char *loop_copy(const void *data, size_t len, size_t max, size_t *out_len);
static void loop_flush(struct consumer *c, bool intake);
static void loop_log_in_hand(const struct batch_entry *e, int64_t fetched_ms, const char *via);
static bool loop_intake(void *arg);
static void loop_intake_message(struct consumer *c, rd_kafka_message_t *m);
static bool loop_intake_holds(const struct consumer *c, const char *topic, int32_t partition);
static void loop_intake_drain(struct consumer *c);
static void loop_intake_forget(struct consumer *c, const char *topic, int32_t partition);
static void loop_intake_clear(struct consumer *c);
static void loop_stall(struct consumer *c);
static void loop_unstall(struct consumer *c);
static void loop_pause_seek(struct consumer *c, const char *topic, int32_t partition,
                            int64_t offset);
static void loop_rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                              rd_kafka_topic_partition_list_t *parts, void *opaque);
static void loop_assign(struct consumer *c, rd_kafka_topic_partition_list_t *parts, bool coop);
static void loop_revoke(struct consumer *c, rd_kafka_topic_partition_list_t *parts, bool coop);
static void loop_error_cb(rd_kafka_t *rk, int code, const char *reason, void *opaque);
static void loop_kafka_fatal(struct consumer *c);
static void loop_rejoin(struct consumer *c);
static int loop_stats_cb(rd_kafka_t *rk, char *json, size_t len, void *opaque);
static void loop_commit_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                           rd_kafka_topic_partition_list_t *offsets, void *opaque);
static void loop_periodic(struct consumer *c, int64_t now);
static void loop_check_durability(struct consumer *c);
static void loop_db_hook(void *arg, bool begin);
static void loop_progress(void *arg);
static void loop_watchdog(struct consumer *c);
static void loop_health_write(struct consumer *c, int64_t now);
static int loop_subscribe(struct consumer *c);
static void loop_guard_start(void);
static void *loop_guard_main(void *arg);
static void loop_guard_arm(void);
static void loop_shutdown(struct consumer *c);
static void loop_commit_final(struct consumer *c, int64_t deadline);
static void loop_final_commit_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                                 rd_kafka_topic_partition_list_t *offsets, void *opaque);
static void loop_close(struct consumer *c, int64_t deadline);
static void loop_add_tp(void *arg, const char *topic, int32_t partition, int64_t offset);
static void loop_log_tps(enum log_level level, const char *event,
                         const rd_kafka_topic_partition_list_t *parts, const char *extra);

void loop_attach(struct consumer *c, rd_kafka_conf_t *conf)
{
    char interval[32], errstr[512];
    size_t size = sizeof(interval);

    db_set_call_hook(c->db, loop_db_hook, c);
    db_set_wait_hook(c->db, loop_intake, c, CONSUMER_INTAKE_EVERY_MS);
    c->commit.env.progress = loop_progress;
    c->commit.env.progress_arg = c;
    rd_kafka_conf_set_opaque(conf, c);
    rd_kafka_conf_set_rebalance_cb(conf, loop_rebalance_cb);
    rd_kafka_conf_set_error_cb(conf, loop_error_cb);
    rd_kafka_conf_set_offset_commit_cb(conf, loop_commit_cb);
    rd_kafka_conf_set_stats_cb(conf, loop_stats_cb);
    /* Unless kafka.properties chose an interval of its own. */
    if (rd_kafka_conf_get(conf, "statistics.interval.ms", interval, &size) == RD_KAFKA_CONF_OK &&
        strcmp(interval, "0") == 0)
        rd_kafka_conf_set(conf, "statistics.interval.ms", LOOP_STATS_INTERVAL, errstr,
                          sizeof(errstr));
}

int loop_run(struct consumer *c)
{
    struct og_error err = {0};
    uint64_t watchdog_us = notify_watchdog_interval_us();
    char q[600];

    /* systemd asks for a ping every half of WatchdogSec; we ping more often than that, at
     * most every CONSUMER_WATCHDOG_EVERY_MS, so the gaps are the blocking steps alone. */
    if (watchdog_us > 0) {
        c->watchdog_every_ms = (int64_t)(watchdog_us / 1000);
        if (c->watchdog_every_ms > CONSUMER_WATCHDOG_EVERY_MS)
            c->watchdog_every_ms = CONSUMER_WATCHDOG_EVERY_MS;
        if (c->watchdog_every_ms < 1)
            c->watchdog_every_ms = 1;
    }
    c->health_stale_ms =
        (c->cfg->consumer.health_db_call_ms > 0 ? (long)c->cfg->consumer.health_db_call_ms
                                                : CONSUMER_DB_CALL_MAX_S * 1000L) +
        CONSUMER_WATCHDOG_EVERY_MS + c->cfg->consumer.poll_ms + CONSUMER_HEALTH_SLACK_MS;
    loop_watchdog(c);
    if (db_connect(c->db, &err) == OG_OK) {
        c->db_ok = true;
        log_info("db_connected", NULL);
        loop_check_durability(c);
        if (c->fatal)
            return 1;
    } else {
        /* Not fatal: the database may come up later; batches wait for it. */
        log_warn("db_unavailable", "error=%s", log_quote(q, sizeof(q), err.msg));
    }
    if (relay_thread_start(c->cfg, &c->m, &c->relay, &err) != OG_OK) {
        log_error("outbox_relay_failed_to_start", "error=%s", log_quote(q, sizeof(q), err.msg));
        return 1;
    }
    if (loop_subscribe(c) != 0)
        return 1;
    loop_guard_start();
    notify_send("READY=1");
    while (!signals_stop && !c->fatal) {
        int64_t now = clock_mono_ms();
        int64_t now_wall = clock_wall_ms();
        rd_kafka_message_t *m;

        if (c->fence.pending) {
            loop_rejoin(c);
            continue;
        }
        loop_intake_drain(c);
        if (!c->stalled) {
            loop_resume_due(c, now_wall);
            commit_take_retries(&c->commit, now_wall);
            loop_release_due(c, now_wall);
            /* A claim may have run: the poll's timeout counts from now, not from before it. */
            now = clock_mono_ms();
            now_wall = clock_wall_ms();
        }
        m = rd_kafka_consumer_poll(c->rk, loop_timeout(c, now, now_wall));
        loop_watchdog(c);
        if (m != NULL) {
            loop_message(c, m);
            rd_kafka_message_destroy(m);
        }
        if (c->fence.pending)
            continue; /* no claim by a fenced member */
        /* Delivery reports of re-schedules and dead letters, producer errors. */
        rd_kafka_poll(c->producer, 0);
        now = clock_mono_ms();
        if (c->stalled) {
            if (now >= c->retry_at_ms)
                loop_flush(c, true);
        } else if (c->commit.batch.n > 0 &&
                   (batch_full(&c->commit.batch) ||
                    now >= c->commit.batch.first_ms + c->cfg->consumer.linger_ms)) {
            loop_flush(c, true);
        } else if (commit_flight_answered(&c->commit)) {
            /* The batch in flight answered: finished now (the batch in hand goes along). */
            loop_flush(c, true);
        }
        loop_periodic(c, now);
    }
    if (c->fatal && !c->fenced)
        log_error("consumer_fatal", "note=\"stopping; offsets of unfinished work are not stored\"");
    loop_shutdown(c);
    return c->fenced ? 2 : c->fatal ? 1 : 0;
}

/* ------------------------------------------------------------------------------------------ */
/* One turn: due partitions resumed, a poll, the message into the batch, a flush when the batch
 * is full or has lingered enough. */

static void loop_resume_due(struct consumer *c, int64_t now_wall)
{
    rd_kafka_topic_partition_list_t *list;

    if (sched_next_resume(c->sched) > now_wall)
        return; /* the common case, checked without allocating */
    list = rd_kafka_topic_partition_list_new(8);
    if (sched_take_resumable(c->sched, now_wall, loop_add_tp, list) > 0) {
        rd_kafka_topic_partition_list_t *wake = rd_kafka_topic_partition_list_new(list->cnt);
        rd_kafka_error_t *error;

        rd_kafka_resume_partitions(c->rk, list);
        for (int i = 0; i < list->cnt; i++) {
            if (list->elems[i].err != RD_KAFKA_RESP_ERR_NO_ERROR)
                log_warn("resume_failed", "topic=%s partition=%" PRId32 " error=%s",
                         list->elems[i].topic, list->elems[i].partition,
                         rd_kafka_err2name(list->elems[i].err));
            else if (list->elems[i].offset >= 0)
                rd_kafka_topic_partition_list_add(wake, list->elems[i].topic,
                                                  list->elems[i].partition)
                    ->offset = list->elems[i].offset;
        }
        /* librdkafka 2.0.2 does not wake the broker thread on resume: with
         * every partition of a broker paused, that thread sleeps up to a
         * second before it fetches again, which would all be lateness. A
         * seek to the offset the partition resumes from anyway does wake
         * it (and changes nothing else). Asynchronous: nothing to wait for. */
        if (wake->cnt > 0) {
            error = rd_kafka_seek_partitions(c->rk, wake, 0);
            rd_kafka_error_destroy(error);
        }
        rd_kafka_topic_partition_list_destroy(wake);
        log_debug("partitions_resumed", "n=%d", list->cnt);
    }
    rd_kafka_topic_partition_list_destroy(list);
}

/* Cancels of the window whose due time has passed join the batch, which is committed at once:
 * they are due, and lingering for company would only make them late. A cancel is taken in the
 * millisecond after its due_ms (due_at is kept to the millisecond, expire_at to the microsecond),
 * so on the database's clock, the same as ours, expire_at <= now() holds: never early, and no
 * not_due round trip through a delay topic. */
static void loop_release_due(struct consumer *c, int64_t now_wall)
{
    while (!c->stalled && !c->fatal && window_next_due(c->window) < now_wall) {
        window_take_due(c->window, now_wall - 1, loop_take, c);
        if (c->fatal || c->commit.batch.n == 0)
            return;
        loop_flush(c, true);
        /* What the flush's intake queued goes behind the window's entries, and a partition
         * whose window ran full resumes: the next batch is in hand when this one commits. */
        loop_intake_drain(c);
        now_wall = clock_wall_ms();
        if (!c->stalled)
            loop_resume_due(c, now_wall);
    }
}

static bool loop_take(void *arg, const char *topic, int32_t partition, const struct window_entry *w)
{
    struct consumer *c = arg;
    struct batch_entry *e;

    if (batch_full(&c->commit.batch))
        return false;
    e = batch_add(&c->commit.batch, w->cancel.reminder_offset > 0 ? BATCH_REMINDER : BATCH_CANCEL,
                  topic, partition, w->offset);
    if (e == NULL) {
        log_error("out_of_memory", "where=batch_add");
        c->fatal = true;
        return false;
    }
    memcpy(e->order_no, w->cancel.order_no, sizeof(e->order_no));
    e->due_ms = w->due_ms;
    e->reminder_offset = w->cancel.reminder_offset;
    loop_log_in_hand(e, w->fetched_ms, "window");
    return true;
}

/* Where a cancel's lateness comes from, one debug line per cancel that joins the batch more than
 * LOOP_LATE_LOG_MS after its due time (at most LOOP_LATE_LOG_PER_S lines a second; the next line
 * says how many were left out): when its message was polled and when it joined, each against its
 * due time (negative: before it). A tail with fetched_vs_due_ms > 0 came late from the broker (a
 * refetch after a resume, the producer); one that joined much later than it was fetched waited for
 * the loop (the claim in flight before it). */
static void loop_log_in_hand(const struct batch_entry *e, int64_t fetched_ms, const char *via)
{
    static int64_t second;
    static long lines, left_out;
    int64_t now;

    if (!log_enabled(LOG_LVL_DEBUG))
        return;
    now = clock_wall_ms();
    if (now - e->due_ms <= LOOP_LATE_LOG_MS)
        return;
    if (now / 1000 != second) {
        second = now / 1000;
        lines = 0;
    }
    if (lines >= LOOP_LATE_LOG_PER_S) {
        left_out++;
        return;
    }
    lines++;
    log_debug("cancel_late",
              "order_no=%s via=%s due_ms=%" PRId64 " fetched_vs_due_ms=%" PRId64
              " joined_vs_due_ms=%" PRId64 " left_out=%ld",
              e->order_no, via, e->due_ms, fetched_ms - e->due_ms, now - e->due_ms, left_out);
    left_out = 0;
}

/* The window's part of a message's fate; true when it decided (the message waits in the window,
 * or its partition was paused and sought back to it). A cancel due within CONSUMER_WINDOW_LEAD_MS
 * waits in the window; so does any cancel behind one that waits there, due or not, since a
 * partition's messages reach the batch in order. What cannot wait there while its partition's
 * window holds something (a full window, an undecodable message, a cancel due beyond the lead)
 * goes back to Kafka by a pause and a seek. Not while stalled or paused: sched decides then. */
static bool loop_window(struct consumer *c, const rd_kafka_message_t *m, const char *topic,
                        const struct codec_cancel *cancel, int64_t due, int64_t now)
{
    bool behind, full = false, paused;
    bool holdable = cancel != NULL && due - now <= CONSUMER_WINDOW_LEAD_MS;

    if (c->stalled || sched_is_paused(c->sched, topic, m->partition))
        return false;
    behind = window_busy(c->window, topic, m->partition);
    if (holdable && (behind || due > now)) {
        switch (window_put(c->window, topic, m->partition, m->offset, due, now, cancel)) {
        case WINDOW_HELD:
            return true;
        case WINDOW_NOMEM:
            log_error("out_of_memory", "where=window_put");
            c->fatal = true;
            return true;
        case WINDOW_FULL:
            full = true;
            break;
        }
    } else if (!behind) {
        return false;
    }
    /* A full window has room again only when its head is taken, the millisecond after the head's
     * due time: resumed before that (at this message's due time, for one), the partition would
     * fetch again only to be paused again, every CONSUMER_MIN_PAUSE_MS, librdkafka fetching and
     * dropping its prefetched messages each time (in the lead before a burst, more CPU than the
     * burst's own messages). */
    paused = full ? sched_pause_at(c->sched, topic, m->partition, m->offset,
                                   window_head_due(c->window, topic, m->partition) + 1, now)
                  : sched_pause(c->sched, topic, m->partition, m->offset, due, now);
    if (!paused) {
        log_error("out_of_memory", "where=sched_pause");
        c->fatal = true;
        return true;
    }
    metric_inc(c->m.deferred, 1);
    loop_pause_seek(c, topic, m->partition, m->offset);
    return true;
}

static int loop_timeout(struct consumer *c, int64_t now, int64_t now_wall)
{
    int64_t t = c->cfg->consumer.poll_ms;
    int64_t next = sched_next_resume(c->sched);

    if (c->stalled) {
        if (c->retry_at_ms - now < t)
            t = c->retry_at_ms - now;
    } else if (c->commit.batch.n > 0) {
        if (c->commit.batch.first_ms + c->cfg->consumer.linger_ms - now < t)
            t = c->commit.batch.first_ms + c->cfg->consumer.linger_ms - now;
    }
    /* A batch in flight is finished the turn after its parts answer: the poll looks every
     * LOOP_FLIGHT_POLL_MS (nothing wakes it when a claim session answers), every
     * LOOP_FLIGHT_SLOW_POLL_MS once its parts are out longer than a claim takes (one held by a
     * lock: no spinning for as long as it lasts). */
    if (!c->stalled && commit_flight_handed_ms(&c->commit) > 0) {
        int64_t every = now - commit_flight_handed_ms(&c->commit) < LOOP_FLIGHT_FAST_MS
                            ? LOOP_FLIGHT_POLL_MS
                            : LOOP_FLIGHT_SLOW_POLL_MS;
        if (t > every)
            t = every;
    }
    if (next != SCHED_NEVER && next - now_wall < t)
        t = next - now_wall;
    next = c->stalled ? WINDOW_NEVER : window_next_due(c->window);
    if (next != WINDOW_NEVER && next + 1 - now_wall < t)
        t = next + 1 - now_wall;
    next = c->stalled ? SCHED_NEVER : retry_next_at(&c->commit.retry);
    if (next != SCHED_NEVER && next - now_wall < t)
        t = next - now_wall;
    return t > 0 ? (int)t : 0;
}

static void loop_message(struct consumer *c, const rd_kafka_message_t *m)
{
    const char *topic;
    struct codec_cancel cancel;
    struct codec_payment pay;
    struct codec_refund refund;
    struct og_error err = {0};
    enum og_status st;
    enum sched_verdict verdict;
    int64_t due = SCHED_ALWAYS_DUE;
    int64_t now = clock_wall_ms();
    enum loop_topic kind;
    struct batch_entry *e;

    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF)
            return;
        metric_inc(c->m.kafka_errors, 1);
        if (m->err == RD_KAFKA_RESP_ERR__FATAL)
            loop_kafka_fatal(c);
        if (c->fenced || c->fence.pending)
            return; /* said once, by loop_kafka_fatal */
        log_warn("consume_error", "topic=%s partition=%" PRId32 " error=%s reason=\"%.200s\"",
                 m->rkt ? rd_kafka_topic_name(m->rkt) : "-", m->partition,
                 rd_kafka_err2name(m->err), rd_kafka_message_errstr(m));
        return;
    }
    c->kafka_ok = true;
    topic = rd_kafka_topic_name(m->rkt);
    metric_inc(loop_topic_metric(c, topic, &kind), 1);
    if (kind == LOOP_TOPIC_PAYMENTS) {
        st = codec_decode_payment(m->key, m->key_len, m->payload, m->len, &pay, &err);
    } else if (kind == LOOP_TOPIC_REFUNDS) {
        st = codec_decode_refund(m->key, m->key_len, m->payload, m->len, &refund, &err);
    } else {
        st = codec_decode_cancel(m->key, m->key_len, m->payload, m->len, &cancel, &err);
        /* A reminder's due_at has microseconds kept to the millisecond: one more, so that it
         * is never claimed before its due time (not_due would send it round a delay topic). */
        if (st == OG_OK && cancel.reminder_offset > 0)
            cancel.due_ms += 1;
        if (st == OG_OK)
            due = loop_due(c, topic, m, &cancel, now);
    }
    if (loop_window(c, m, topic, kind == LOOP_TOPIC_DELAY && st == OG_OK ? &cancel : NULL, due,
                    now))
        return;
    verdict = sched_offer(c->sched, topic, m->partition, m->offset, due, now);
    if (verdict == SCHED_DUE && batch_full(&c->commit.batch)) {
        /* Never more than batch_size in hand: commit first. If that fails
         * we are stalled and the message waits in Kafka like the rest. No intake: this
         * message is in hand, and what comes after it must not overtake it. */
        loop_flush(c, false);
        if (c->stalled)
            verdict = sched_offer(c->sched, topic, m->partition, m->offset, due, now);
    }
    switch (verdict) {
    case SCHED_DROP:
        metric_inc(c->m.dropped, 1);
        return;
    case SCHED_NOMEM:
        log_error("out_of_memory", "where=sched_offer");
        c->fatal = true;
        return;
    case SCHED_PAUSE:
        metric_inc(c->m.deferred, 1);
        loop_pause_seek(c, topic, m->partition, m->offset);
        return;
    case SCHED_DUE:
        break;
    }
    if (st != OG_OK) {
        loop_dead_letter(c, m, topic, kind, &err);
    } else {
        e = batch_add(&c->commit.batch,
                      kind == LOOP_TOPIC_PAYMENTS  ? BATCH_PAYMENT
                      : kind == LOOP_TOPIC_REFUNDS ? BATCH_REFUND
                      : cancel.reminder_offset > 0 ? BATCH_REMINDER
                                                   : BATCH_CANCEL,
                      topic, m->partition, m->offset);
        if (e == NULL) {
            log_error("out_of_memory", "where=batch_add");
            c->fatal = true;
            return;
        }
        if (kind == LOOP_TOPIC_PAYMENTS) {
            e->pay = pay;
            memcpy(e->order_no, pay.order_no, sizeof(e->order_no));
        } else if (kind == LOOP_TOPIC_REFUNDS) {
            e->refund = refund;
        } else {
            memcpy(e->order_no, cancel.order_no, sizeof(e->order_no));
            e->due_ms = due;
            e->reminder_offset = cancel.reminder_offset;
            loop_log_in_hand(e, now, "direct");
        }
    }
    if (batch_full(&c->commit.batch))
        loop_flush(c, !c->intake_draining);
}

/* The due time a cancel message is scheduled by: its due_at, unless that lies beyond its
 * topic's delay level (levels_topic_ms: consumer.max_wait_ms when no topic has a level, so
 * every topic is checked) plus consumer.level_margin_ms. Such a message would pause its partition
 * and every later cancel in it until then (due_at may be as late as 9999-12-31): it is due now
 * instead, the claim asks the database, and a not_due answer re-schedules it by the order's
 * real expire_at onto the level that fits (consumer/levels.h). */
static int64_t loop_due(struct consumer *c, const char *topic, const rd_kafka_message_t *m,
                        const struct codec_cancel *cancel, int64_t now)
{
    int64_t level = levels_topic_ms(&c->levels, c->cfg, topic);
    char due[32];

    if (cancel->due_ms - now <= level + c->cfg->consumer.level_margin_ms)
        return cancel->due_ms;
    /* Counted and logged once per message: a paused partition hands it over again. */
    if (!sched_is_paused(c->sched, topic, m->partition)) {
        metric_inc(c->m.beyond_level, 1);
        log_info("due_beyond_level",
                 "order_no=%s topic=%s partition=%" PRId32 " offset=%" PRId64
                 " due_at=%s level_ms=%" PRId64 " msg=\"claimed now instead of pausing the "
                 "partition\"",
                 cancel->order_no, topic, m->partition, m->offset,
                 clock_format_iso(cancel->due_ms, due, sizeof(due)), level);
    }
    return now;
}

static struct metric *loop_topic_metric(struct consumer *c, const char *topic,
                                        enum loop_topic *kind)
{
    size_t refunds_at = c->has_refunds ? c->ntopics - 1 : SIZE_MAX;
    size_t payments_at = c->has_payments ? c->ntopics - 1 - c->has_refunds : SIZE_MAX;

    for (size_t i = 0; i < c->ntopics && i < CONSUMER_TOPICS_MAX; i++) {
        if (strcmp(c->topics[i], topic) == 0) {
            *kind = i == refunds_at    ? LOOP_TOPIC_REFUNDS
                    : i == payments_at ? LOOP_TOPIC_PAYMENTS
                                       : LOOP_TOPIC_DELAY;
            return c->m.consumed[i];
        }
    }
    *kind = LOOP_TOPIC_DELAY;
    return NULL;
}

/* Queues the dead letter of an undecodable message, acknowledged before the
 * batch stores its offset. A cancel message's is produced right away (the
 * scanner covers its order); a payment result's only after the flush has
 * recorded it in the database (BATCH_RECORD), since money may be behind it. */
static void loop_dead_letter(struct consumer *c, const rd_kafka_message_t *m, const char *topic,
                             enum loop_topic kind, const struct og_error *why)
{
    struct batch_entry *e = batch_add(&c->commit.batch, BATCH_DLQ, topic, m->partition, m->offset);
    char q[600];

    if (e == NULL) {
        log_error("out_of_memory", "where=batch_add");
        c->fatal = true;
        return;
    }
    log_warn("message_invalid", "topic=%s partition=%" PRId32 " offset=%" PRId64 " reason=%s",
             topic, m->partition, m->offset, log_quote(q, sizeof(q), why->msg));
    e->dlq_key = m->key ? loop_copy(m->key, m->key_len, BATCH_DLQ_KEY_MAX, &e->dlq_key_len) : NULL;
    e->dlq_value =
        m->payload ? loop_copy(m->payload, m->len, BATCH_DLQ_VALUE_MAX, &e->dlq_value_len) : NULL;
    e->dlq_orig_len = m->len;
    e->dlq_reason = strndup(why->msg, BATCH_DLQ_REASON_MAX - 1);
    c->commit.batch.dlq_bytes += e->dlq_key_len + e->dlq_value_len;
    if (kind == LOOP_TOPIC_PAYMENTS) {
        codec_salvage_payment(m->key, m->key_len, m->payload, m->len, &e->pay);
        e->state = BATCH_RECORD;
        return;
    }
    commit_produce(&c->commit, e);
}

static char *loop_copy(const void *data, size_t len, size_t max, size_t *out_len)
{
    size_t n = len < max ? len : max;
    char *copy = malloc(n > 0 ? n : 1);

    if (copy != NULL && n > 0)
        memcpy(copy, data, n);
    *out_len = copy != NULL ? n : 0;
    return copy;
}

/* ------------------------------------------------------------------------------------------ */
/* The intake: while a flush waits for the database (common/db.h's wait hook), the loop takes in
 * the next messages, so that the next batch is decoded and in the window when this one commits,
 * instead of the database idling while the loop polls and decodes between claims. Stores no
 * offset and touches neither the batch nor the retry set: what the intake took reaches the
 * batch only through the window or the intake queue after the flush, in each partition's order,
 * and so its offset is stored only after its own claim has committed. */

/* The claim's wait hook (common/db.h): true while it may take more in this wait, false once the
 * next batch's worth is in hand or the intake is off, so that the rest of the claim's round trip
 * sleeps instead of waking every CONSUMER_INTAKE_EVERY_MS to find nothing to do (in a burst, most
 * of a claim's wait). An empty queue asks to be called again: messages may come meanwhile. */
static bool loop_intake(void *arg)
{
    struct consumer *c = arg;
    size_t cap = (size_t)c->cfg->consumer.batch_size;

    /* One batch's worth per flush: the window holds it, the rest waits in librdkafka's queue. */
    while (c->intake_on && !c->fatal && !signals_stop && c->intake_rebalance == NULL &&
           c->intake_taken < cap && c->intake_n < CONSUMER_INTAKE_MAX) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(c->rk, 0);

        if (m == NULL)
            return true;
        c->intake_taken++;
        loop_intake_message(c, m);
    }
    return false;
}

/* A cancel due within the lead goes into the window (due or not: it is the next batch), unless
 * its partition is paused or already has a message in the intake queue; anything else waits in
 * the queue for loop_message, behind what its partition has in the window. */
static void loop_intake_message(struct consumer *c, rd_kafka_message_t *m)
{
    struct codec_cancel cancel;
    struct og_error err = {0};
    enum loop_topic kind;
    const char *topic;
    int64_t now = clock_wall_ms();

    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR && !c->stalled) {
        topic = rd_kafka_topic_name(m->rkt);
        struct metric *consumed = loop_topic_metric(c, topic, &kind);
        if (kind == LOOP_TOPIC_DELAY && !sched_is_paused(c->sched, topic, m->partition) &&
            !loop_intake_holds(c, topic, m->partition) &&
            codec_decode_cancel(m->key, m->key_len, m->payload, m->len, &cancel, &err) == OG_OK) {
            if (cancel.reminder_offset > 0)
                cancel.due_ms += 1; /* as loop_message: never before its due time */
            int64_t due = loop_due(c, topic, m, &cancel, now);
            if (due - now <= CONSUMER_WINDOW_LEAD_MS) {
                switch (window_put(c->window, topic, m->partition, m->offset, due, now, &cancel)) {
                case WINDOW_HELD:
                    c->kafka_ok = true;
                    metric_inc(consumed, 1);
                    rd_kafka_message_destroy(m);
                    return;
                case WINDOW_NOMEM:
                    log_error("out_of_memory", "where=window_put");
                    c->fatal = true;
                    rd_kafka_message_destroy(m);
                    return;
                case WINDOW_FULL:
                    break; /* loop_message pauses and seeks the partition to it */
                }
            }
        }
    }
    c->intake[(c->intake_head + c->intake_n) % CONSUMER_INTAKE_MAX] = m;
    c->intake_n++;
}

/* Whether the intake queue holds a message of the partition: then its later ones go there too. */
static bool loop_intake_holds(const struct consumer *c, const char *topic, int32_t partition)
{
    for (size_t i = 0; i < c->intake_n; i++) {
        const rd_kafka_message_t *q = c->intake[(c->intake_head + i) % CONSUMER_INTAKE_MAX];
        if (q != NULL && q->err == RD_KAFKA_RESP_ERR_NO_ERROR && q->partition == partition &&
            strcmp(rd_kafka_topic_name(q->rkt), topic) == 0)
            return true;
    }
    return false;
}

/* The intake queue, in order, through loop_message, as if each had been polled now. Its own
 * flushes (a full batch) take nothing in: the queue is handled first. */
static void loop_intake_drain(struct consumer *c)
{
    if (c->intake_draining)
        return;
    c->intake_draining = true;
    while (c->intake_n > 0 && !c->fatal) {
        rd_kafka_message_t *m = c->intake[c->intake_head];

        c->intake[c->intake_head] = NULL;
        c->intake_head = (c->intake_head + 1) % CONSUMER_INTAKE_MAX;
        c->intake_n--;
        if (m != NULL) {
            loop_message(c, m);
            rd_kafka_message_destroy(m);
        }
    }
    c->intake_draining = false;
}

/* A revoked partition's queued messages go back to Kafka with it (their offsets were never
 * stored: its next owner reads them again). */
static void loop_intake_forget(struct consumer *c, const char *topic, int32_t partition)
{
    for (size_t i = 0; i < c->intake_n; i++) {
        size_t at = (c->intake_head + i) % CONSUMER_INTAKE_MAX;
        rd_kafka_message_t *q = c->intake[at];
        if (q != NULL && q->partition == partition && q->rkt != NULL &&
            strcmp(rd_kafka_topic_name(q->rkt), topic) == 0) {
            rd_kafka_message_destroy(q);
            c->intake[at] = NULL;
        }
    }
}

/* Every queued message, before a fenced member's handle goes (fence_rejoin): they are that
 * handle's, and their offsets were never stored, so the new member reads them again. */
static void loop_intake_clear(struct consumer *c)
{
    while (c->intake_n > 0) {
        rd_kafka_message_t *m = c->intake[c->intake_head];

        c->intake[c->intake_head] = NULL;
        c->intake_head = (c->intake_head + 1) % CONSUMER_INTAKE_MAX;
        c->intake_n--;
        if (m != NULL)
            rd_kafka_message_destroy(m);
    }
}

/* intake: while the flush waits for the database, the next messages are taken in
 * (loop_intake); only where no message is in hand, so nothing overtakes one of its partition. */
static void loop_flush(struct consumer *c, bool intake)
{
    enum commit_result r;
    int64_t now;

    c->intake_on = intake;
    c->intake_taken = 0;
    r = commit_flush_overlap(&c->commit, COMMIT_DELIVERY_WAIT_MS);
    c->intake_on = false;
    now = clock_mono_ms();
    /* A rebalance served by the intake's poll, applied now that the batch is settled (its
     * revoke finishes or voids the batch as the callback would have). */
    if (c->intake_rebalance != NULL) {
        rd_kafka_topic_partition_list_t *parts = c->intake_rebalance;

        c->intake_rebalance = NULL;
        loop_rebalance_cb(c->rk, c->intake_rebalance_err, parts, c);
        rd_kafka_topic_partition_list_destroy(parts);
    }

    switch (r) {
    case COMMIT_DONE:
        loop_unstall(c);
        c->attempts = 0;
        break;
    case COMMIT_WAIT:
        loop_stall(c);
        c->retry_at_ms = now + 50;
        break;
    case COMMIT_RETRY: {
        long backoff = clock_backoff_ms(c->cfg->database.retry_base_ms,
                                        c->cfg->database.retry_cap_ms, c->attempts);
        c->attempts++;
        loop_stall(c);
        c->retry_at_ms = now + backoff;
        log_warn("batch_retry", "attempt=%d backoff_ms=%ld batch=%zu", c->attempts, backoff,
                 c->commit.batch.n);
        break;
    }
    }
}

/* The batch cannot commit: stop fetching everywhere, keep polling. */
static void loop_stall(struct consumer *c)
{
    rd_kafka_topic_partition_list_t *list;

    if (c->stalled)
        return;
    list = rd_kafka_topic_partition_list_new(8);
    sched_stall_begin(c->sched, loop_add_tp, list);
    if (list->cnt > 0)
        rd_kafka_pause_partitions(c->rk, list);
    c->stalled = true;
    metric_set(c->m.stalled, 1);
    log_warn("stall_begin", "batch=%zu paused=%d", c->commit.batch.n, list->cnt);
    rd_kafka_topic_partition_list_destroy(list);
}

static void loop_unstall(struct consumer *c)
{
    if (!c->stalled)
        return;
    sched_stall_end(c->sched);
    c->stalled = false;
    metric_set(c->m.stalled, 0);
    log_info("stall_end", "after_attempts=%d", c->attempts);
    c->attempts = 0;
    /* The stalled partitions resume on the next turn (loop_resume_due). */
}

/* Pauses a partition and seeks it back to offset (pausing, seeking and resuming happen in this
 * file only). */
static void loop_pause_seek(struct consumer *c, const char *topic, int32_t partition,
                            int64_t offset)
{
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(1);
    rd_kafka_error_t *error;

    rd_kafka_topic_partition_list_add(list, topic, partition)->offset = offset;
    /* Pause first, then seek: the pause drops what was prefetched, the seek
     * sets where fetching starts again on resume. */
    rd_kafka_pause_partitions(c->rk, list);
    if (list->elems[0].err != RD_KAFKA_RESP_ERR_NO_ERROR)
        log_warn("pause_failed", "topic=%s partition=%" PRId32 " error=%s", topic, partition,
                 rd_kafka_err2name(list->elems[0].err));
    list->elems[0].err = RD_KAFKA_RESP_ERR_NO_ERROR;
    list->elems[0].offset = offset;
    int64_t t0 = clock_mono_us();
    /* Asynchronous (timeout 0): the seek is queued behind the pause on the
     * partition's queue, so it takes effect in that order. A blocking seek
     * would not help either: librdkafka 2.0.2 reads the timeout of
     * rd_kafka_seek_partitions as microseconds and reports _TIMED_OUT while
     * the seek is still queued (fixed upstream in 2.1.0). */
    error = rd_kafka_seek_partitions(c->rk, list, 0);
    log_debug("partition_paused",
              "topic=%s partition=%" PRId32 " offset=%" PRId64 " seek_us=%" PRId64, topic,
              partition, offset, clock_mono_us() - t0);
    /* _IN_PROGRESS is the asynchronous seek's "queued", not a failure. */
    if (error != NULL || (list->elems[0].err != RD_KAFKA_RESP_ERR_NO_ERROR &&
                          list->elems[0].err != RD_KAFKA_RESP_ERR__IN_PROGRESS)) {
        /* Refused only when the partition is not (or no longer) assigned:
         * its offsets are not stored past this message, so its next owner
         * reads it again. */
        log_warn("seek_failed", "topic=%s partition=%" PRId32 " offset=%" PRId64 " error=%s", topic,
                 partition, offset,
                 error ? rd_kafka_error_name(error) : rd_kafka_err2name(list->elems[0].err));
        rd_kafka_error_destroy(error);
    }
    rd_kafka_topic_partition_list_destroy(list);
}

/* ------------------------------------------------------------------------------------------ */
/* Rebalancing: the batch is finished while the partitions are still ours. */

static void loop_rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                              rd_kafka_topic_partition_list_t *parts, void *opaque)
{
    struct consumer *c = opaque;
    bool coop = strcmp(rd_kafka_rebalance_protocol(rk), "COOPERATIVE") == 0;

    if (c->intake_on) {
        /* Served by the intake's poll while a claim is outstanding: the batch is mid-protocol,
         * so the (un)assignment waits for the flush's end (loop_flush), and the intake polls
         * nothing more meanwhile. librdkafka holds the rebalance until we assign. */
        c->intake_rebalance = rd_kafka_topic_partition_list_copy(parts);
        c->intake_rebalance_err = err;
        if (c->intake_rebalance == NULL) {
            log_error("out_of_memory", "where=rebalance_copy");
            c->fatal = true;
        }
        return;
    }
    metric_inc(c->m.rebalances, 1);
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        loop_assign(c, parts, coop);
    } else if (err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS) {
        loop_revoke(c, parts, coop);
    } else {
        log_error("rebalance_failed", "error=%s", rd_kafka_err2str(err));
        loop_revoke(c, parts, coop);
    }
}

static void loop_assign(struct consumer *c, rd_kafka_topic_partition_list_t *parts, bool coop)
{
    rd_kafka_topic_partition_list_t *pause = rd_kafka_topic_partition_list_new(parts->cnt);
    rd_kafka_error_t *error = NULL;
    rd_kafka_resp_err_t rerr = RD_KAFKA_RESP_ERR_NO_ERROR;

    loop_log_tps(LOG_LVL_INFO, "partitions_assigned", parts,
                 coop ? " protocol=cooperative" : " protocol=eager");
    for (int i = 0; i < parts->cnt; i++) {
        window_forget(c->window, parts->elems[i].topic, parts->elems[i].partition);
        if (sched_assign(c->sched, parts->elems[i].topic, parts->elems[i].partition))
            rd_kafka_topic_partition_list_add(pause, parts->elems[i].topic,
                                              parts->elems[i].partition);
    }
    if (coop)
        error = rd_kafka_incremental_assign(c->rk, parts);
    else
        rerr = rd_kafka_assign(c->rk, parts);
    if (error != NULL || rerr != RD_KAFKA_RESP_ERR_NO_ERROR) {
        log_error("assign_failed", "error=%s",
                  error ? rd_kafka_error_string(error) : rd_kafka_err2str(rerr));
        rd_kafka_error_destroy(error);
    }
    /* Stalled: new partitions wait with the others. */
    if (pause->cnt > 0)
        rd_kafka_pause_partitions(c->rk, pause);
    rd_kafka_topic_partition_list_destroy(pause);
    c->kafka_ok = true;
}

static void loop_revoke(struct consumer *c, rd_kafka_topic_partition_list_t *parts, bool coop)
{
    rd_kafka_topic_partition_list_t *resume = rd_kafka_topic_partition_list_new(parts->cnt);
    rd_kafka_error_t *error = NULL;
    rd_kafka_resp_err_t rerr = RD_KAFKA_RESP_ERR_NO_ERROR;
    bool lost = rd_kafka_assignment_lost(c->rk);
    bool ours = false;

    loop_log_tps(LOG_LVL_INFO, lost ? "partitions_lost" : "partitions_revoked", parts, NULL);
    for (int i = 0; i < parts->cnt && !ours; i++)
        ours = batch_has(&c->commit.batch, parts->elems[i].topic, parts->elems[i].partition) ||
               batch_has(&c->commit.flight, parts->elems[i].topic, parts->elems[i].partition);
    /* Finish the batch (and the one in flight before it, first) while the partitions are still
     * ours, so their offsets are stored and committed by the unassign. Not when they are
     * already lost, nor stalled (the database is down: don't block the group's rebalance on
     * it): then their entries are voided, and a part still out answers into a batch that stores
     * nothing for them. */
    if (ours && !lost && !c->stalled) {
        enum commit_result r = commit_flush(&c->commit, 5000);
        if (r == COMMIT_DONE)
            c->attempts = 0;
    }
    for (int i = 0; i < parts->cnt; i++) {
        size_t dropped;

        batch_void(&c->commit.batch, parts->elems[i].topic, parts->elems[i].partition);
        batch_void(&c->commit.flight, parts->elems[i].topic, parts->elems[i].partition);
        window_forget(c->window, parts->elems[i].topic, parts->elems[i].partition);
        loop_intake_forget(c, parts->elems[i].topic, parts->elems[i].partition);
        /* Their offsets were not stored past them: the next owner claims them again. */
        dropped = retry_revoke(&c->commit.retry, parts->elems[i].topic, parts->elems[i].partition);
        if (dropped > 0)
            log_info("retries_dropped", "topic=%s partition=%" PRId32 " orders=%zu",
                     parts->elems[i].topic, parts->elems[i].partition, dropped);
        /* librdkafka keeps our pause on the partition object; if it came
         * back to us later it would never fetch. Resume what we paused. */
        if (sched_revoke(c->sched, parts->elems[i].topic, parts->elems[i].partition))
            rd_kafka_topic_partition_list_add(resume, parts->elems[i].topic,
                                              parts->elems[i].partition);
    }
    if (resume->cnt > 0)
        rd_kafka_resume_partitions(c->rk, resume);
    rd_kafka_topic_partition_list_destroy(resume);
    if (coop)
        error = rd_kafka_incremental_unassign(c->rk, parts);
    else
        rerr = rd_kafka_assign(c->rk, NULL);
    if (error != NULL || rerr != RD_KAFKA_RESP_ERR_NO_ERROR) {
        log_error("unassign_failed", "error=%s",
                  error ? rd_kafka_error_string(error) : rd_kafka_err2str(rerr));
        rd_kafka_error_destroy(error);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* The group member's other callbacks: errors, broker reachability, commits. */

static void loop_error_cb(rd_kafka_t *rk, int code, const char *reason, void *opaque)
{
    struct consumer *c = opaque;

    metric_inc(c->m.kafka_errors, 1);
    if (code == RD_KAFKA_RESP_ERR__FATAL) {
        loop_kafka_fatal(c);
        if (c->fenced || c->fence.pending)
            return;
    }
    kafka_error_cb(rk, code, reason, NULL);
    if (code == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN)
        c->kafka_ok = false;
}

/* A fatal error of the group member. FENCED_INSTANCE_ID is a rejoin the first time
 * (consumer/fence.h); fenced again soon after it, another process joined with our
 * group.instance.id and the broker gave it our place: one line that says what to fix (exit 2,
 * since restarting would fence the other one in turn). librdkafka reports a fatal error on
 * several paths (error callback, a consume error, a failed commit): whichever comes first
 * decides, once per member. */
static void loop_kafka_fatal(struct consumer *c)
{
    char why[512];

    if (c->fenced || c->fence.pending)
        return;
    if (rd_kafka_fatal_error(c->rk, why, sizeof(why)) != RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID) {
        c->fatal = true;
        return;
    }
    if (fence_decide(&c->fence, clock_mono_ms()) == FENCE_REJOIN) {
        log_warn(
            "group_instance_rejoin",
            "group=%s instance_id=%s backoff_ms=%d note=\"the broker fenced this member's "
            "group.instance.id (a coordinator that stopped answering does this too); joining again "
            "under it; fenced again within %d s, it is another consumer's: exit 2\"",
            c->cfg->kafka.group, c->instance_id, FENCE_BACKOFF_MS, FENCE_QUIET_MS / 1000);
        return;
    }
    c->fatal = true;
    c->fenced = true;
    log_error("group_instance_fenced",
              "group=%s instance_id=%s note=\"another consumer joined this group with the same "
              "group.instance.id; give each instance its own (kafka.group_instance_id, "
              "--group-instance-id or ORDERGATE_INSTANCE); exiting\"",
              c->cfg->kafka.group, c->instance_id);
}

/* Fenced (loop_kafka_fatal chose a rejoin): no claim and no poll of the fenced member until
 * the backoff is over, then a new member under the same id, subscribed. The watchdog is fed
 * while waiting; a stop signal cuts the wait. */
static void loop_rejoin(struct consumer *c)
{
    struct og_error err = {0};
    int64_t now = clock_mono_ms();
    char q[600];

    if (now < c->fence.rejoin_at_ms) {
        int64_t left = c->fence.rejoin_at_ms - now;
        clock_sleep_until_flag(left < CONSUMER_WATCHDOG_EVERY_MS ? (long)left
                                                                 : CONSUMER_WATCHDOG_EVERY_MS,
                               &signals_stop, NULL);
        loop_watchdog(c);
        return;
    }
    loop_intake_clear(c);
    if (fence_rejoin(c, now, &err) != OG_OK) {
        log_error("group_rejoin_failed", "error=%s", log_quote(q, sizeof(q), err.msg));
        c->fatal = true;
        return;
    }
    c->kafka_ok = false; /* until the new member is assigned partitions */
    if (loop_subscribe(c) != 0)
        c->fatal = true;
}

/* Broker reachability for /readyz: the error callback says when every
 * broker is down, but nothing says when one is back. librdkafka's
 * statistics (every LOOP_STATS_INTERVAL) list each broker's state. */
static int loop_stats_cb(rd_kafka_t *rk, char *json, size_t len, void *opaque)
{
    struct consumer *c = opaque;
    json_t *root = json_loadb(json, len, 0, NULL);
    json_t *brokers = root ? json_object_get(root, "brokers") : NULL;
    const char *name;
    json_t *b;
    bool up = false;

    (void)rk;
    json_object_foreach(brokers, name, b)
    {
        const char *state = json_string_value(json_object_get(b, "state"));
        json_int_t nodeid = json_integer_value(json_object_get(b, "nodeid"));
        (void)name;
        /* Bootstrap entries (nodeid -1) only stand for the address list. */
        if (nodeid >= 0 && state != NULL && strcmp(state, "UP") == 0)
            up = true;
    }
    if (root != NULL)
        c->kafka_ok = up;
    json_decref(root);
    return 0; /* librdkafka frees json */
}

static void loop_commit_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                           rd_kafka_topic_partition_list_t *offsets, void *opaque)
{
    struct consumer *c = opaque;

    (void)rk;
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        c->kafka_ok = true;
        if (offsets != NULL)
            loop_log_tps(LOG_LVL_DEBUG, "offsets_committed", offsets, NULL);
    } else if (err == RD_KAFKA_RESP_ERR__FATAL) {
        loop_kafka_fatal(c);
        if (!c->fenced && !c->fence.pending)
            log_warn("commit_failed", "error=%s", rd_kafka_err2name(err));
    } else if (err != RD_KAFKA_RESP_ERR__NO_OFFSET) {
        /* The next auto-commit carries the same or newer offsets. */
        log_warn("commit_failed", "error=%s", rd_kafka_err2name(err));
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Liveness: gauges, durability, the watchdog and the health file. */

static void loop_periodic(struct consumer *c, int64_t now)
{
    char fatal[256];

    loop_watchdog(c);
    /* Not while stalled: the database may be away, and the stall's retries own the session. */
    if (!c->stalled && c->db_ok && durability_due(&c->durability, now))
        loop_check_durability(c);
    if (now < c->next_gauges_ms)
        return;
    c->next_gauges_ms = now + LOOP_GAUGES_EVERY_MS;
    metric_set(c->m.paused, (double)sched_paused_count(c->sched));
    metric_set(c->m.due_pending,
               (double)(batch_due_pending(&c->commit.batch) + batch_due_pending(&c->commit.flight) +
                        retry_count(&c->commit.retry, GATE_BUSY)));
    metric_set(c->m.retry_pending, (double)c->commit.retry.used);
    metrics_set_health(1, c->db_ok && c->kafka_ok);
    if (rd_kafka_fatal_error(c->producer, fatal, sizeof(fatal)) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        log_error("producer_fatal", "reason=\"%s\"", fatal);
        c->fatal = true;
    }
    if (now >= c->next_stats_ms) {
        c->next_stats_ms = now + LOOP_STATS_EVERY_MS;
        log_info("stats",
                 "cancelled=%.0f already_cancelled=%.0f already_paid=%.0f busy=%.0f not_due=%.0f "
                 "not_found=%.0f retry_pending=%zu dead_lettered=%.0f rescheduled=%.0f "
                 "deferred=%.0f dropped=%.0f paused=%zu assigned=%zu stalled=%d db_ok=%d "
                 "kafka_ok=%d",
                 metric_value(c->m.claims[GATE_CANCELLED]),
                 metric_value(c->m.claims[GATE_ALREADY_CANCELLED]),
                 metric_value(c->m.claims[GATE_ALREADY_PAID]), metric_value(c->m.claims[GATE_BUSY]),
                 metric_value(c->m.claims[GATE_NOT_DUE]), metric_value(c->m.claims[GATE_NOT_FOUND]),
                 c->commit.retry.used, metric_value(c->m.dead_lettered),
                 metric_value(c->m.rescheduled), metric_value(c->m.deferred),
                 metric_value(c->m.dropped), sched_paused_count(c->sched),
                 sched_assigned_count(c->sched), c->stalled, c->db_ok, c->kafka_ok);
    }
}

/* The server's commit durability (consumer/durability.h), acted on: a failed look that may
 * mean the database is away clears readiness until a batch step gets through; a server whose
 * commits are not durable stops the consumer unless consumer.allow_nondurable. */
static void loop_check_durability(struct consumer *c)
{
    switch (durability_check(&c->durability, c->db, c->cfg->consumer.allow_nondurable)) {
    case DURABILITY_KNOWN:
        break;
    case DURABILITY_UNKNOWN:
        c->db_ok = false;
        break;
    case DURABILITY_STOP:
        c->fatal = true;
        break;
    }
}

/* The consume loop's database calls feed the health endpoints (consumer.health_db_call_ms),
 * and each one that returns tells the watchdog the loop is alive: a flush may make several
 * calls in a row (a hook failure's bisection), each within CONSUMER_DB_CALL_MAX_S. */
static void loop_db_hook(void *arg, bool begin)
{
    if (begin) {
        metrics_call_begin();
    } else {
        metrics_call_end();
        loop_watchdog(arg);
    }
}

/* The commit protocol's progress callback: each answer of a commit step proves progress. */
static void loop_progress(void *arg)
{
    loop_watchdog(arg);
}

static void loop_watchdog(struct consumer *c)
{
    int64_t now = clock_mono_ms();

    loop_health_write(c, now);
    if (c->watchdog_every_ms <= 0 || now < c->next_watchdog_ms)
        return;
    notify_send("WATCHDOG=1");
    c->next_watchdog_ms = now + c->watchdog_every_ms;
}

/* The heartbeat of --check-health: written from the loop itself, so it stops when the loop
 * stops, whatever happens to the HTTP port. */
static void loop_health_write(struct consumer *c, int64_t now)
{
    struct og_error err = {0};
    char q[600];

    if (c->cfg->consumer.health_file == NULL || *c->cfg->consumer.health_file == '\0' ||
        now < c->next_health_ms)
        return;
    c->next_health_ms = now + CONSUMER_WATCHDOG_EVERY_MS;
    if (health_file_write(c->cfg->consumer.health_file, c->db_ok && c->kafka_ok, c->health_stale_ms,
                          &err) != OG_OK) {
        if (!c->health_failing)
            log_error("health_file_failed", "error=%s", log_quote(q, sizeof(q), err.msg));
        c->health_failing = true;
    } else if (c->health_failing) {
        log_info("health_file_written", "path=%s", c->cfg->consumer.health_file);
        c->health_failing = false;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Start and stop: the subscription, the stop guard, the bounded shutdown. */

static int loop_subscribe(struct consumer *c)
{
    rd_kafka_topic_partition_list_t *subs = rd_kafka_topic_partition_list_new((int)c->ntopics);
    rd_kafka_resp_err_t rerr;

    for (size_t i = 0; i < c->ntopics; i++)
        rd_kafka_topic_partition_list_add(subs, c->topics[i], RD_KAFKA_PARTITION_UA);
    rerr = rd_kafka_subscribe(c->rk, subs);
    rd_kafka_topic_partition_list_destroy(subs);
    if (rerr != RD_KAFKA_RESP_ERR_NO_ERROR) {
        log_error("subscribe_failed", "error=%s", rd_kafka_err2str(rerr));
        return -1;
    }
    log_info("subscribed", "topics=%s%s%s%s%s group=%s membership=%s instance_id=%s",
             c->cfg->kafka.topics, c->has_payments ? "," : "",
             c->has_payments ? c->cfg->kafka.payments_topic : "", c->has_refunds ? "," : "",
             c->has_refunds ? c->cfg->kafka.refund_results_topic : "", c->cfg->kafka.group,
             *c->instance_id ? "static" : "dynamic", *c->instance_id ? c->instance_id : "-");
    return 0;
}

static void loop_guard_start(void)
{
    pthread_t t;

    if (pthread_create(&t, NULL, loop_guard_main, NULL) != 0) {
        log_warn("stop_guard_failed", "note=\"shutdown runs without its overall bound\"");
        return;
    }
    pthread_detach(t);
}

static void *loop_guard_main(void *arg)
{
    (void)arg;
    while (clock_sleep_until_flag(60000, &signals_stop, &loop_guard_armed))
        ;
    clock_sleep_until_flag(CONSUMER_STOP_MS, NULL, NULL);
    log_error("shutdown_overdue",
              "bound_ms=%d note=\"exiting now; offsets of unfinished work "
              "are not stored: those messages are delivered again\"",
              CONSUMER_STOP_MS);
    _exit(1);
    return NULL;
}

static void loop_guard_arm(void)
{
    loop_guard_armed = 1;
}

/* SIGTERM: finish the batch, store, commit, close the membership, each step bounded so that
 * the whole fits LOOP_SHUTDOWN_MS (and the guard's CONSUMER_STOP_MS, counted from the
 * signal) whatever the group's state. */
static void loop_shutdown(struct consumer *c)
{
    int64_t t0 = clock_mono_ms();
    int64_t deadline = t0 + LOOP_SHUTDOWN_MS;
    rd_kafka_resp_err_t rerr;

    loop_guard_arm();
    notify_send("STOPPING=1");
    log_info("shutdown_begin", "batch=%zu", c->commit.batch.n + c->commit.flight.n);
    /* Messages taken in during the last flush, in order, as a turn would have. */
    loop_intake_drain(c);
    /* Only while the database answers: a call to a database that is away may block for a
     * whole connect_timeout, and the unfinished batch is delivered again anyway. Not by a
     * fenced member: its partitions may be another's already. */
    while ((c->commit.batch.n > 0 || c->commit.flight.n > 0) && c->db_ok && !c->fenced &&
           !c->fence.pending && clock_mono_ms() < t0 + LOOP_SHUTDOWN_BATCH_MS) {
        if (commit_flush(&c->commit, 1000) == COMMIT_DONE)
            break;
        /* Fetch nothing more; keep serving the group while we wait. */
        loop_stall(c);
        rd_kafka_message_t *m = rd_kafka_consumer_poll(c->rk, 100);
        if (m != NULL) {
            loop_message(c, m);
            rd_kafka_message_destroy(m);
        }
    }
    if (c->commit.retry.used > 0)
        log_info("shutdown_retries_unfinished",
                 "orders=%zu note=\"offsets not stored past them: delivered again\"",
                 c->commit.retry.used);
    if (c->commit.batch.n > 0 || c->commit.flight.n > 0)
        log_warn("shutdown_batch_unfinished",
                 "batch=%zu note=\"offsets not stored: these messages are delivered again\"",
                 c->commit.batch.n + c->commit.flight.n);
    loop_commit_final(c, clock_mono_ms() + LOOP_SHUTDOWN_COMMIT_MS);
    /* The revoke callback runs once more (nothing left to flush). A static member sends no
     * LeaveGroup: its partitions wait for it to come back, up to session.timeout.ms. */
    loop_close(c, t0 + LOOP_SHUTDOWN_CLOSE_MS);
    if (!relay_thread_stop(&c->relay, t0 + LOOP_SHUTDOWN_RELAY_MS))
        c->abandon = true;
    /* Destroying a handle whose close did not finish waits for the same round again
     * (librdkafka waits for the JoinGroup answer): the process's exit ends it instead. */
    if (!c->closed)
        c->abandon = true;
    {
        int64_t left = deadline - clock_mono_ms();
        rerr = rd_kafka_flush(c->producer, left > 0 ? (int)left : 0);
    }
    /* Unacknowledged re-schedules and dead letters: their source offsets were not stored,
     * so the messages come again. consumer_free purges them. */
    if (rerr != RD_KAFKA_RESP_ERR_NO_ERROR)
        log_warn("producer_flush_failed", "error=%s", rd_kafka_err2name(rerr));
    log_info("shutdown_done", "ms=%" PRId64 " closed=%d", clock_mono_ms() - t0, c->closed);
    /* What is left to do fits the guard: destroying handles that are closed and flushed. */
}

/* Commits the stored offsets, waiting for the coordinator until deadline. rd_kafka_commit
 * has no bound of its own: during a rebalance the answer can take as long as the round. */
static void loop_commit_final(struct consumer *c, int64_t deadline)
{
    /* Static: an answer that comes after we stopped waiting finds it still there. */
    static struct loop_commit_wait w;
    rd_kafka_queue_t *q = rd_kafka_queue_new(c->rk);
    rd_kafka_resp_err_t rerr;

    w = (struct loop_commit_wait){false, RD_KAFKA_RESP_ERR_NO_ERROR};
    rerr = rd_kafka_commit_queue(c->rk, NULL, q, loop_final_commit_cb, &w);
    while (rerr == RD_KAFKA_RESP_ERR_NO_ERROR && !w.done) {
        int64_t left = deadline - clock_mono_ms();
        if (left <= 0)
            break;
        rd_kafka_queue_poll_callback(q, left < 100 ? (int)left : 100);
    }
    if (rerr == RD_KAFKA_RESP_ERR_NO_ERROR && w.done)
        rerr = w.err;
    if (rerr == RD_KAFKA_RESP_ERR_NO_ERROR && !w.done)
        log_warn("final_commit_timeout",
                 "note=\"no answer in time; offsets committed earlier (auto-commit, revoke) "
                 "stand, the rest is delivered again\"");
    else if (rerr != RD_KAFKA_RESP_ERR_NO_ERROR && rerr != RD_KAFKA_RESP_ERR__NO_OFFSET &&
             !c->fenced)
        log_warn("final_commit_failed", "error=%s", rd_kafka_err2name(rerr));
    rd_kafka_queue_destroy(q);
}

static void loop_final_commit_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                                 rd_kafka_topic_partition_list_t *offsets, void *opaque)
{
    struct loop_commit_wait *w = opaque;

    (void)rk;
    (void)offsets;
    w->err = err;
    w->done = true;
}

/* Closes the group membership, serving its rebalance callbacks, until deadline. A dynamic
 * member's LeaveGroup waits behind a JoinGroup the coordinator holds for a rebalance round
 * (the broker answers one request per connection at a time), so the close can take as long
 * as the round; past the deadline the member is simply gone, and the group drops it after
 * session.timeout.ms, as after a crash. */
static void loop_close(struct consumer *c, int64_t deadline)
{
    rd_kafka_queue_t *q = rd_kafka_queue_new(c->rk);
    rd_kafka_error_t *error = rd_kafka_consumer_close_queue(c->rk, q);

    if (error != NULL) {
        if (!c->fenced)
            log_warn("consumer_close_failed", "error=%s", rd_kafka_error_name(error));
        rd_kafka_error_destroy(error);
    } else {
        while (!rd_kafka_consumer_closed(c->rk)) {
            int64_t left = deadline - clock_mono_ms();
            if (left <= 0)
                break;
            /* Served as a consumer queue, never through rd_kafka_queue_poll_callback: the close
             * forwards the whole group queue here, so besides the rebalance (our callback) it
             * may hold a fetched message or a consumer error (an unknown topic, just after the
             * broker came up), which have no callback; served as callbacks they abort librdkafka
             * (rd_kafka_q_serve asserts every op was handled). They come back as messages and
             * are dropped: their offsets were not stored, so they are delivered again. */
            rd_kafka_message_t *m = rd_kafka_consume_queue(q, left < 100 ? (int)left : 100);
            if (m != NULL)
                rd_kafka_message_destroy(m);
        }
    }
    c->closed = rd_kafka_consumer_closed(c->rk);
    if (!c->closed && error == NULL)
        log_warn("consumer_close_timeout",
                 "note=\"the group is rebalancing; it drops this member after "
                 "session.timeout.ms\"");
    rd_kafka_queue_destroy(q);
}

/* ------------------------------------------------------------------------------------------ */
/* Partition lists. */

static void loop_add_tp(void *arg, const char *topic, int32_t partition, int64_t offset)
{
    rd_kafka_topic_partition_list_add(arg, topic, partition)->offset = offset;
}

static void loop_log_tps(enum log_level level, const char *event,
                         const rd_kafka_topic_partition_list_t *parts, const char *extra)
{
    char list[1024];
    size_t used = 0;

    if (!log_enabled(level))
        return;
    list[0] = '\0';
    for (int i = 0; i < parts->cnt && used + 1 < sizeof(list); i++) {
        int n = snprintf(list + used, sizeof(list) - used, "%s%s/%" PRId32, i ? "," : "",
                         parts->elems[i].topic, parts->elems[i].partition);
        if (n < 0)
            break;
        used += (size_t)n;
    }
    log_emit(level, event, "n=%d partitions=%s%s", parts->cnt, list, extra ? extra : "");
}
