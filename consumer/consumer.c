/* The consumer's lifetime: consumer_new() builds everything the consume
 * loop (loop.c) needs from the configuration (topics, metrics, scheduler,
 * batch, database client, producer, group member), consumer_free() takes it
 * down again in a safe order. */
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/hook_timing.h"
#include "common/log.h"
#include "common/signals.h"
#include "consumer/consumer.h"

/* The consume loop's database calls feed the health endpoints (consumer.health_db_call_ms),
 * and each one that returns tells the watchdog the loop is alive: a flush may make several
 * calls in a row (a hook failure's bisection), each within CONSUMER_DB_CALL_MAX_S. */
static void consumer_db_hook(void *arg, bool begin)
{
    if (begin) {
        metrics_call_begin();
    } else {
        metrics_call_end();
        consumer_watchdog(arg);
    }
}

/* The histogram of each hook's wall time in this consumer's claims (common/hook_timing.h). */
static struct hook_timing consumer_hook_timing = {
    "ordergate_consumer_hook_seconds",
    "Wall time of each call of a registered hook in this consumer's claims (failed calls "
    "included), by hook"};

static const struct db_stmt consumer_stmt_durability = {
    "og_durability",
    "SELECT current_setting('fsync'), current_setting('synchronous_commit'), "
    "current_setting('synchronous_standby_names')",
    0};

void consumer_check_durability(struct consumer *c)
{
    PGresult *res = NULL;
    struct og_error err = {0};
    char q[600];

    c->next_durability_ms = clock_mono_ms() + CONSUMER_DURABILITY_EVERY_MS;
    if (db_call(c->db, &consumer_stmt_durability, NULL, &res, &err) != OG_OK) {
        log_warn("durability_unknown", "error=%s", log_quote(q, sizeof(q), err.msg));
        if (err.retriable)
            c->db_ok = false; /* readiness says so until a batch step gets through */
        PQclear(res);
        return;
    }
    if (PQntuples(res) == 1 && PQnfields(res) == 3) {
        const char *fsync = PQgetvalue(res, 0, 0), *sync = PQgetvalue(res, 0, 1);
        const char *standbys = PQgetvalue(res, 0, 2);
        bool named = *standbys != '\0';
        bool durable = strcmp(fsync, "on") == 0 && strcmp(sync, "off") != 0 &&
                       !(named && strcmp(sync, "local") == 0);
        bool replicated = durable && named && strcmp(sync, "local") != 0;

        metric_set(c->m.commit_durable, durable);
        metric_set(c->m.commit_replicated, replicated);
        if (!durable && !c->cfg->allow_nondurable) {
            log_error("commit_not_durable",
                      "fsync=%s synchronous_commit=%s synchronous_standby_names=%s msg=\"a claim "
                      "could be lost after its offset was committed; stopping (set "
                      "consumer.allow_nondurable to run anyway)\"",
                      fsync, sync, log_quote(q, sizeof(q), standbys));
            c->fatal = true;
        } else if ((int)durable != c->durable) {
            if (durable)
                log_info("commit_durable",
                         "fsync=%s synchronous_commit=%s synchronous_standby_names=%s "
                         "replicated=%d",
                         fsync, sync, log_quote(q, sizeof(q), standbys), replicated);
            else
                log_error("commit_not_durable",
                          "fsync=%s synchronous_commit=%s synchronous_standby_names=%s "
                          "msg=\"a claim could be lost after its offset was committed; running "
                          "because consumer.allow_nondurable is set\"",
                          fsync, sync, log_quote(q, sizeof(q), standbys));
        }
        c->durable = durable;
    }
    PQclear(res);
}

int64_t consumer_level_ms(const struct consumer *c, const char *topic)
{
    const struct delay_level *longest = delay_longest(&c->levels);
    int64_t own = delay_level_of(&c->levels, topic);

    return own >= 0 ? own : longest != NULL ? longest->level_ms : c->cfg->max_wait_ms;
}

const char *consumer_reschedule_topic(const struct consumer *c, const char *source, int64_t now_ms,
                                      int64_t *due_ms)
{
    int64_t wait_ms = *due_ms - now_ms - c->cfg->level_margin_ms;
    const struct delay_level *pick = delay_pick(&c->levels, wait_ms > 0 ? wait_ms : 0);

    /* No level anywhere: back to the source topic, due within consumer.max_wait_ms, which stands
     * for its level (consumer_level_ms): a longer wait hops on then, so a re-schedule never
     * pauses its partition longer than that, nor is claimed at once again (a loop). */
    if (pick == NULL) {
        if (wait_ms > c->cfg->max_wait_ms)
            *due_ms = now_ms + c->cfg->max_wait_ms;
        return source;
    }
    /* No level is that long: the longest, due when its level has passed (then hop on). */
    if (pick->level_ms < wait_ms)
        *due_ms = now_ms + pick->level_ms;
    return pick->topic;
}

/* The outbox topic settings the relay produces to, when it runs. */
static enum og_status consumer_check_outbox(const struct og_config *cfg, struct og_error *err)
{
    const struct {
        const char *name, *value;
        bool required;
    } topics[] = {{"outbox.topic", cfg->outbox_topic, true},
                  {"outbox.refund_topic", cfg->outbox_refund_topic, false},
                  {"outbox.alert_topic", cfg->outbox_alert_topic, false}};

    if (!cfg->outbox_enabled)
        return OG_OK;
    for (size_t i = 0; i < sizeof(topics) / sizeof(topics[0]); i++) {
        if (*topics[i].value == '\0' && !topics[i].required)
            continue;
        if (!kafka_topic_valid(topics[i].value)) {
            og_error_set(err, OG_ERR_CONFIG, false, "%s: '%.64s' is not a valid topic name%s",
                         topics[i].name, topics[i].value,
                         topics[i].required ? " (the outbox relay needs one while outbox.enabled)"
                                            : "");
            og_error_setting(err, topics[i].name);
            return OG_ERR_CONFIG;
        }
    }
    return OG_OK;
}

enum og_status consumer_check_config(const struct og_config *cfg, struct og_error *err)
{
    struct delay_levels levels;
    char **topics = NULL;
    size_t n = 0;
    enum og_status st;

    st = kafka_check_config(cfg, err);
    if (st == OG_OK)
        st = kafka_topics_split(cfg->topics, &topics, &n, err);
    if (st == OG_OK && n + 2 > CONSUMER_TOPICS_MAX) {
        st = og_error_set(err, OG_ERR_CONFIG, false, "kafka.topics: at most %d topics",
                          CONSUMER_TOPICS_MAX - 2);
        og_error_setting(err, "kafka.topics");
    }
    kafka_topics_free(topics, n);
    if (st == OG_OK) {
        st = delay_levels_parse(cfg, DELAY_NAMED_ONLY, &levels, err);
        if (st == OG_OK)
            delay_levels_free(&levels);
    }
    if (st == OG_OK)
        st = consumer_check_outbox(cfg, err);
    return st;
}

struct consumer *consumer_new(const struct og_config *cfg, struct og_error *err)
{
    struct consumer *c = calloc(1, sizeof(*c));
    /* The batch has a retry loop of its own that keeps polling Kafka
     * between attempts (stalled), so each database call of the loop makes
     * CONSUMER_DB_ATTEMPTS attempts (or database.retry_max if smaller): the
     * loop never blocks longer than one attempt (the watchdog budget in
     * consumer.h). */
    struct db_retry retry = {cfg->db_retry_max < CONSUMER_DB_ATTEMPTS ? cfg->db_retry_max
                                                                      : CONSUMER_DB_ATTEMPTS,
                             cfg->db_retry_base_ms, cfg->db_retry_cap_ms};
    struct db_session session;
    rd_kafka_conf_t *conf = NULL;
    char **delay = NULL;
    size_t ndelay = 0;
    char errstr[512];
    enum og_status st;

    if (c == NULL) {
        og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
        return NULL;
    }
    c->cfg = cfg;
    c->durable = -1;
    st = consumer_check_config(cfg, err);
    if (st != OG_OK)
        goto fail;
    st = kafka_topics_split(cfg->topics, &delay, &ndelay, err);
    if (st != OG_OK)
        goto fail;
    if (ndelay + 2 > CONSUMER_TOPICS_MAX) {
        st = og_error_set(err, OG_ERR_CONFIG, false, "kafka.topics: at most %d topics",
                          CONSUMER_TOPICS_MAX - 2);
        goto fail;
    }
    c->topics = calloc(ndelay + 2, sizeof(*c->topics));
    if (c->topics == NULL) {
        st = og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
        goto fail;
    }
    memcpy(c->topics, delay, ndelay * sizeof(*delay));
    c->ntopics = ndelay;
    free(delay); /* the names now belong to c->topics */
    delay = NULL;
    st = delay_levels_parse(cfg, DELAY_NAMED_ONLY, &c->levels, err);
    if (st != OG_OK)
        goto fail;
    if (*cfg->payments_topic != '\0') {
        c->topics[c->ntopics] = strdup(cfg->payments_topic);
        if (c->topics[c->ntopics] == NULL) {
            st = og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
            goto fail;
        }
        c->ntopics++;
        c->has_payments = true;
    }
    if (*cfg->refund_results_topic != '\0') {
        c->topics[c->ntopics] = strdup(cfg->refund_results_topic);
        if (c->topics[c->ntopics] == NULL) {
            st = og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
            goto fail;
        }
        c->ntopics++;
        c->has_refunds = true;
    }
    consumer_metrics_register(&c->m, c->topics, c->ntopics);

    c->sched = sched_new(CONSUMER_MIN_PAUSE_MS);
    c->rows = calloc((size_t)cfg->batch_size, sizeof(*c->rows));
    c->nos = calloc((size_t)cfg->batch_size, sizeof(*c->nos));
    c->row_seen = calloc((size_t)cfg->batch_size, sizeof(*c->row_seen));
    if (c->sched == NULL || c->rows == NULL || c->nos == NULL || c->row_seen == NULL) {
        st = og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
        goto fail;
    }
    st = batch_init(&c->batch, (size_t)cfg->batch_size, err);
    if (st == OG_OK)
        st = retry_init(&c->retry, (size_t)cfg->batch_size, err);
    if (st != OG_OK)
        goto fail;

    st = db_new_passfile(cfg->db_conninfo, cfg->db_password_file, "ordergate-consumer", &retry,
                         &signals_stop, &c->db, err);
    if (st != OG_OK)
        goto fail;
    session = cfg_db_session(cfg);
    db_set_session(c->db, &session, NULL); /* not connected yet: cannot fail */
    db_set_call_hook(c->db, consumer_db_hook, c);
    /* Each hook's wall time in the claims, from the gate's notices (not connected yet: cannot
     * fail). */
    hook_timing_attach(c->db, &consumer_hook_timing);
    metrics_call_watch(c->m.db_call_age, cfg->health_db_call_ms);

    st = kafka_producer_new(cfg, "ordergate-consumer-reschedule", NULL, &c->producer, err);
    if (st != OG_OK)
        goto fail;
    st = kafka_group_instance_id(cfg, c->instance_id, sizeof(c->instance_id), err);
    if (st != OG_OK)
        goto fail;
    st = kafka_conf_new(cfg, KAFKA_ROLE_CONSUMER, "ordergate-consumer", &conf, err);
    if (st != OG_OK)
        goto fail;
    consumer_loop_conf(c, conf);
    c->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
    if (c->rk == NULL) {
        rd_kafka_conf_destroy(conf);
        st = og_error_set(err, OG_ERR_CONFIG, false, "cannot create Kafka consumer: %s", errstr);
        goto fail;
    }
    conf = NULL; /* owned by the handle now */
    /* Rebalances, errors and commits are all served by consumer_poll. */
    rd_kafka_poll_set_consumer(c->rk);
    return c;
fail:
    kafka_topics_free(delay, ndelay);
    consumer_free(c);
    return NULL;
}

void consumer_free(struct consumer *c)
{
    if (c == NULL)
        return;
    /* Something that did not stop in time (see loop_shutdown) may still be in use: the
     * process's exit takes it all down (main.c exits right after). */
    if (c->abandon)
        return;
    relay_stop(c, clock_mono_ms() + 1000);
    if (c->relay != NULL)
        return;
    if (c->rk != NULL)
        rd_kafka_destroy(c->rk);
    if (c->producer != NULL) {
        /* loop_shutdown flushed what it could; unacknowledged re-schedules and dead letters
         * have no stored source offset, so their messages come again. */
        rd_kafka_purge(c->producer, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
        rd_kafka_flush(c->producer, 1000);
        rd_kafka_destroy(c->producer);
    }
    /* After the producer: a late delivery report writes into the batch. */
    batch_free(&c->batch);
    retry_free(&c->retry);
    delay_levels_free(&c->levels);
    db_free(c->db);
    sched_free(c->sched);
    free(c->rows);
    free(c->nos);
    free(c->row_seen);
    kafka_topics_free(c->topics, c->ntopics);
    free(c);
}
