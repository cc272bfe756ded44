/* The consumer's outbox relay thread (consumer/relay_thread.h): one outbox_relay_step() every
 * outbox.interval_ms (at once again while steps come back full), on a database connection and an
 * idempotent producer of its own, so a slow step never delays the consume loop. At least once:
 * see common/outbox.h.
 *
 * Must not touch the consume loop's handles (its group member, producer, session, batch): it
 * reads the configuration and updates the relay's metrics, nothing else of the consumer's. */
#define _GNU_SOURCE /* pthread_timedjoin_np */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/db.h"
#include "common/kafka.h"
#include "common/log.h"
#include "common/outbox.h"
#include "common/signals.h"
#include "consumer/relay_thread.h"

#define RELAY_THREAD_BACKLOG_EVERY_MS 1000

struct relay_thread {
    pthread_t thread;
    const struct og_config *cfg;
    struct consumer_metrics *m;
    struct db *db;
    rd_kafka_t *producer;
    struct outbox_relay *relay;
    volatile sig_atomic_t stop; /* raised by relay_thread_stop when the process is not stopping */
};

static void relay_thread_sleep_ms(struct relay_thread *r, long ms)
{
    clock_sleep_until_flag(ms, &signals_stop, &r->stop);
}

static void *relay_thread_main(void *arg)
{
    struct relay_thread *r = arg;
    const struct og_config *cfg = r->cfg;
    int64_t next_backlog = 0;
    struct outbox_failure_log flog = {0};
    size_t quarantined_seen = 0;

    log_info("outbox_relay_started", "batch=%d interval_ms=%d", cfg->outbox.batch,
             cfg->outbox.interval_ms);
    while (!signals_stop && !r->stop) {
        struct og_error err = {0};
        size_t published = 0, quarantined;
        enum og_status st = outbox_relay_step(r->relay, &published, &err);

        rd_kafka_poll(r->producer, 0);
        /* A step that failed may still have published and quarantined rows:
         * it commits what got through before it reports the rest. */
        metric_inc(r->m->outbox_published, (double)published);
        quarantined = outbox_relay_quarantined_total(r->relay);
        if (quarantined > quarantined_seen) {
            metric_inc(r->m->outbox_quarantined_total, (double)(quarantined - quarantined_seen));
            quarantined_seen = quarantined;
            next_backlog = 0; /* the gauge at once */
        }
        if (st == OG_OK) {
            if (flog.failures > 0)
                log_info("outbox_relay_recovered", "after_failures=%d", flog.failures);
            outbox_failure_log_clear(&flog);
        } else if (st != OG_ERR_STOPPED) {
            char q[600];
            metric_inc(r->m->outbox_errors, 1);
            /* Each distinct reason when it first appears, the same one again every 50th
             * attempt (outbox_failure_log_note). */
            if (outbox_failure_log_note(&flog, st, err.msg))
                log_warn("outbox_relay_failed",
                         "status=%s retriable=%d failures=%d published=%zu error=%s",
                         og_status_str(st), err.retriable, flog.failures, published,
                         log_quote(q, sizeof(q), err.msg));
        }
        if (clock_mono_ms() >= next_backlog) {
            long long backlog = 0, held = 0;
            struct og_error berr = {0};
            if (outbox_backlog(r->db, &backlog, &berr) == OG_OK)
                metric_set(r->m->outbox_backlog, (double)backlog);
            if (outbox_quarantined(r->db, &held, &berr) == OG_OK)
                metric_set(r->m->outbox_quarantined, (double)held);
            next_backlog = clock_mono_ms() + RELAY_THREAD_BACKLOG_EVERY_MS;
        }
        if (st == OG_OK && published >= (size_t)cfg->outbox.batch)
            continue; /* a full batch: more is waiting */
        if (flog.failures > 0) {
            /* Growth stops after eight doublings, as it always has. */
            relay_thread_sleep_ms(r, clock_backoff_ms(cfg->database.retry_base_ms,
                                                      cfg->database.retry_cap_ms,
                                                      flog.failures < 8 ? flog.failures : 8));
        } else {
            relay_thread_sleep_ms(r, cfg->outbox.interval_ms);
        }
    }
    log_info("outbox_relay_stopped", NULL);
    return NULL;
}

/* flush_ms bounds the wait for messages still unacknowledged: a step marks its rows
 * published only after every report, so what is dropped here is published again. */
static void relay_thread_destroy(struct relay_thread *r, int flush_ms)
{
    if (r == NULL)
        return;
    /* The relay first: it waits for reports of a batch in flight, and a
     * report writes into the relay's memory. */
    outbox_relay_free(r->relay);
    if (r->producer != NULL) {
        rd_kafka_flush(r->producer, flush_ms);
        rd_kafka_purge(r->producer, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
        rd_kafka_destroy(r->producer);
    }
    db_free(r->db);
    free(r);
}

enum og_status relay_thread_start(const struct og_config *cfg, struct consumer_metrics *m,
                                  struct relay_thread **out, struct og_error *err)
{
    struct relay_thread *r;
    enum og_status st;

    *out = NULL;
    if (!cfg->outbox.enabled)
        return OG_OK;
    r = calloc(1, sizeof(*r));
    if (r == NULL)
        return og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
    r->cfg = cfg;
    r->m = m;
    /* The relay locks outbox rows with SKIP LOCKED (it never waits for another relay): the
     * session bounds stop a statement stuck on anything else. */
    st = cfg_db_open(cfg, "ordergate-consumer-outbox", NULL, &signals_stop, &r->db, err);
    if (st != OG_OK)
        goto fail;
    st = kafka_producer_new(cfg, "ordergate-consumer-outbox", outbox_dr_cb, &r->producer, err);
    if (st != OG_OK)
        goto fail;
    r->relay = outbox_relay_new(r->db, r->producer, cfg);
    if (r->relay == NULL) {
        st = og_error_set(err, OG_ERR_CONFIG, false, "cannot set up the outbox relay (see log)");
        goto fail;
    }
    if (pthread_create(&r->thread, NULL, relay_thread_main, r) != 0) {
        st = og_error_set(err, OG_ERR_INTERNAL, false, "cannot start the outbox relay thread");
        goto fail;
    }
    *out = r;
    return OG_OK;
fail:
    relay_thread_destroy(r, 0);
    return st;
}

bool relay_thread_stop(struct relay_thread **rt, int64_t deadline_ms)
{
    struct relay_thread *r = *rt;
    struct timespec until;
    int64_t left;

    if (r == NULL)
        return true;
    r->stop = 1;
    /* A step in flight ends at its next database answer or delivery report; each of them is
     * bounded, but not necessarily by our deadline. */
    clock_gettime(CLOCK_REALTIME, &until);
    left = deadline_ms - clock_mono_ms();
    left = left > 0 ? left : 0;
    until.tv_sec += (time_t)(left / 1000);
    until.tv_nsec += (long)(left % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    if (pthread_timedjoin_np(r->thread, NULL, &until) != 0) {
        log_warn(
            "outbox_relay_stop_timeout",
            "note=\"a step is still in flight; its rows stay unpublished and are sent again\"");
        return false;
    }
    left = deadline_ms - clock_mono_ms();
    relay_thread_destroy(r, left > 0 ? (int)left : 0);
    *rt = NULL;
    return true;
}
