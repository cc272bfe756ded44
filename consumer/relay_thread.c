/* The outbox relay thread: one outbox_relay_step() every outbox.interval_ms
 * (at once again while steps come back full), on a database connection and
 * an idempotent producer of its own, so a slow step never delays the
 * consume loop. At least once: see common/outbox.h. */
#define _GNU_SOURCE /* pthread_timedjoin_np */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/outbox.h"
#include "common/signals.h"
#include "consumer/consumer.h"

#define RELAY_BACKLOG_EVERY_MS 1000

struct relay {
    pthread_t thread;
    struct consumer *c;
    struct db *db;
    rd_kafka_t *producer;
    struct outbox_relay *relay;
    volatile sig_atomic_t stop; /* raised by relay_stop when the process is not stopping */
};

static void relay_sleep_ms(struct relay *r, long ms)
{
    clock_sleep_until_flag(ms, &signals_stop, &r->stop);
}

static void *relay_main(void *arg)
{
    struct relay *r = arg;
    const struct og_config *cfg = r->c->cfg;
    int64_t next_backlog = 0;
    struct outbox_failure_log flog = {0};
    size_t quarantined_seen = 0;

    log_info("outbox_relay_started", "batch=%d interval_ms=%d", cfg->outbox_batch,
             cfg->outbox_interval_ms);
    while (!signals_stop && !r->stop) {
        struct og_error err = {0};
        size_t published = 0, quarantined;
        enum og_status st = outbox_relay_step(r->relay, &published, &err);

        rd_kafka_poll(r->producer, 0);
        /* A step that failed may still have published and quarantined rows:
         * it commits what got through before it reports the rest. */
        metric_inc(r->c->m.outbox_published, (double)published);
        quarantined = outbox_relay_quarantined_total(r->relay);
        if (quarantined > quarantined_seen) {
            metric_inc(r->c->m.outbox_quarantined_total, (double)(quarantined - quarantined_seen));
            quarantined_seen = quarantined;
            next_backlog = 0; /* the gauge at once */
        }
        if (st == OG_OK) {
            if (flog.failures > 0)
                log_info("outbox_relay_recovered", "after_failures=%d", flog.failures);
            outbox_failure_log_clear(&flog);
        } else if (st != OG_ERR_STOPPED) {
            char q[600];
            metric_inc(r->c->m.outbox_errors, 1);
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
                metric_set(r->c->m.outbox_backlog, (double)backlog);
            if (outbox_quarantined(r->db, &held, &berr) == OG_OK)
                metric_set(r->c->m.outbox_quarantined, (double)held);
            next_backlog = clock_mono_ms() + RELAY_BACKLOG_EVERY_MS;
        }
        if (st == OG_OK && published >= (size_t)cfg->outbox_batch)
            continue; /* a full batch: more is waiting */
        if (flog.failures > 0) {
            /* Growth stops after eight doublings, as it always has. */
            relay_sleep_ms(r, clock_backoff_ms(cfg->db_retry_base_ms, cfg->db_retry_cap_ms,
                                               flog.failures < 8 ? flog.failures : 8));
        } else {
            relay_sleep_ms(r, cfg->outbox_interval_ms);
        }
    }
    log_info("outbox_relay_stopped", NULL);
    return NULL;
}

/* flush_ms bounds the wait for messages still unacknowledged: a step marks its rows
 * published only after every report, so what is dropped here is published again. */
static void relay_destroy(struct relay *r, int flush_ms)
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

enum og_status relay_start(struct consumer *c, struct og_error *err)
{
    const struct og_config *cfg = c->cfg;
    struct db_retry retry = {cfg->db_retry_max, cfg->db_retry_base_ms, cfg->db_retry_cap_ms};
    struct db_session session;
    struct relay *r;
    enum og_status st;

    if (!cfg->outbox_enabled)
        return OG_OK;
    r = calloc(1, sizeof(*r));
    if (r == NULL)
        return og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
    r->c = c;
    st = db_new_passfile(cfg->db_conninfo, cfg->db_password_file, "ordergate-consumer-outbox",
                         &retry, &signals_stop, &r->db, err);
    if (st != OG_OK)
        goto fail;
    /* The relay locks outbox rows with SKIP LOCKED (it never waits for another relay): the
     * bounds stop a statement stuck on anything else. */
    session = cfg_db_session(cfg);
    db_set_session(r->db, &session, NULL); /* not connected yet: cannot fail */
    st = kafka_producer_new(cfg, "ordergate-consumer-outbox", outbox_dr_cb, &r->producer, err);
    if (st != OG_OK)
        goto fail;
    r->relay = outbox_relay_new(r->db, r->producer, cfg);
    if (r->relay == NULL) {
        st = og_error_set(err, OG_ERR_CONFIG, false, "cannot set up the outbox relay (see log)");
        goto fail;
    }
    if (pthread_create(&r->thread, NULL, relay_main, r) != 0) {
        st = og_error_set(err, OG_ERR_INTERNAL, false, "cannot start the outbox relay thread");
        goto fail;
    }
    c->relay = r;
    return OG_OK;
fail:
    relay_destroy(r, 0);
    return st;
}

bool relay_stop(struct consumer *c, int64_t deadline_ms)
{
    struct timespec until;
    int64_t left;

    if (c->relay == NULL)
        return true;
    c->relay->stop = 1;
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
    if (pthread_timedjoin_np(c->relay->thread, NULL, &until) != 0) {
        log_warn(
            "outbox_relay_stop_timeout",
            "note=\"a step is still in flight; its rows stay unpublished and are sent again\"");
        return false;
    }
    left = deadline_ms - clock_mono_ms();
    relay_destroy(c->relay, left > 0 ? (int)left : 0);
    c->relay = NULL;
    return true;
}
