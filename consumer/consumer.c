/* The consumer's lifetime (consumer/consumer.h): consumer_new() builds everything the consume
 * loop (consumer/loop.h) needs from the configuration (topics, metrics, scheduler, the commit
 * protocol's batch and retry set, database client, producer, group member), consumer_free()
 * takes it down again in a safe order.
 *
 * Must not run anything: it connects nothing, polls nothing and starts no thread (loop_run
 * does), and it leaves every decision about messages to the loop and the commit protocol. */
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/hook_timing.h"
#include "common/log.h"
#include "common/signals.h"
#include "consumer/consumer.h"
#include "consumer/loop.h"

/* The histogram of each hook's wall time in this consumer's claims (common/hook_timing.h). */
static struct hook_timing consumer_hook_timing = {
    "ordergate_consumer_hook_seconds",
    "Wall time of each call of a registered hook in this consumer's claims (failed calls "
    "included), by hook"};

/* The outbox topic settings the relay produces to, when it runs. */
static enum og_status consumer_check_outbox(const struct og_config *cfg, struct og_error *err)
{
    const struct {
        const char *name, *value;
        bool required;
    } topics[] = {{"outbox.topic", cfg->outbox.topic, true},
                  {"outbox.refund_topic", cfg->outbox.refund_topic, false},
                  {"outbox.alert_topic", cfg->outbox.alert_topic, false}};

    if (!cfg->outbox.enabled)
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
        st = kafka_topics_split(cfg->kafka.topics, &topics, &n, err);
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
    /* The loop retries a failed batch itself and keeps polling Kafka between attempts
     * (stalled), so each database call of the loop makes CONSUMER_DB_ATTEMPTS attempts (or
     * database.retry_max if smaller): the loop never blocks longer than one attempt (the
     * watchdog budget in consumer/consumer.h). */
    const struct cfg_db_open_opts db_opts = {.max_attempts = CONSUMER_DB_ATTEMPTS};
    char **delay = NULL;
    size_t ndelay = 0;
    enum og_status st;

    if (c == NULL) {
        og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
        return NULL;
    }
    c->cfg = cfg;
    st = consumer_check_config(cfg, err);
    if (st != OG_OK)
        goto fail;
    st = kafka_topics_split(cfg->kafka.topics, &delay, &ndelay, err);
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
    if (*cfg->kafka.payments_topic != '\0') {
        c->topics[c->ntopics] = strdup(cfg->kafka.payments_topic);
        if (c->topics[c->ntopics] == NULL) {
            st = og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
            goto fail;
        }
        c->ntopics++;
        c->has_payments = true;
    }
    if (*cfg->kafka.refund_results_topic != '\0') {
        c->topics[c->ntopics] = strdup(cfg->kafka.refund_results_topic);
        if (c->topics[c->ntopics] == NULL) {
            st = og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
            goto fail;
        }
        c->ntopics++;
        c->has_refunds = true;
    }
    consumer_metrics_register(&c->m, c->topics, c->ntopics);
    durability_init(&c->durability, c->m.commit_durable, c->m.commit_replicated);

    c->sched = sched_new(CONSUMER_MIN_PAUSE_MS);
    c->window = window_new();
    c->intake = calloc(CONSUMER_INTAKE_MAX, sizeof(*c->intake));
    if (c->sched == NULL || c->window == NULL || c->intake == NULL) {
        st = og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
        goto fail;
    }
    sched_set_lead(c->sched, CONSUMER_WINDOW_LEAD_MS);
    st = commit_init(&c->commit, (size_t)cfg->consumer.batch_size, err);
    if (st != OG_OK)
        goto fail;

    st = cfg_db_open(cfg, "ordergate-consumer", &db_opts, &signals_stop, &c->db, err);
    if (st != OG_OK)
        goto fail;
    /* Each hook's wall time in the claims, from the gate's notices (not connected yet: cannot
     * fail). */
    hook_timing_attach(c->db, &consumer_hook_timing);
    metrics_call_watch(c->m.db_call_age, cfg->consumer.health_db_call_ms);

    /* The other claim sessions, made like c->db (threads and connections: the first flush). */
    st = claim_pool_new(cfg, cfg->consumer.claim_sessions - 1,
                        CONSUMER_CLAIM_WAIT_MS(cfg->database.statement_timeout_ms),
                        c->m.claim_sessions_connected, &consumer_hook_timing, &signals_stop,
                        &c->claim_pool, err);
    if (st != OG_OK)
        goto fail;

    st = kafka_producer_new(cfg, "ordergate-consumer-reschedule", NULL, &c->producer, err);
    if (st != OG_OK)
        goto fail;
    st = kafka_group_instance_id(cfg, c->instance_id, sizeof(c->instance_id), err);
    if (st != OG_OK)
        goto fail;
    st = consumer_member_new(c, err);
    if (st != OG_OK)
        goto fail;
    /* What the commit protocol works with (its progress callback is the loop's, and the group
     * member is set by consumer_member_new). */
    c->commit.env.cfg = cfg;
    c->commit.env.producer = c->producer;
    c->commit.env.db = c->db;
    c->commit.env.claim_pool = c->claim_pool;
    c->commit.env.topics = c->topics;
    c->commit.env.ntopics = c->ntopics;
    c->commit.env.levels = &c->levels;
    c->commit.env.m = &c->m;
    c->commit.env.db_ok = &c->db_ok;
    c->commit.env.kafka_ok = &c->kafka_ok;
    return c;
fail:
    kafka_topics_free(delay, ndelay);
    consumer_free(c);
    return NULL;
}

enum og_status consumer_member_new(struct consumer *c, struct og_error *err)
{
    rd_kafka_conf_t *conf = NULL;
    char errstr[512];
    enum og_status st;

    st = kafka_conf_new(c->cfg, KAFKA_ROLE_CONSUMER, "ordergate-consumer", &conf, err);
    if (st != OG_OK)
        return st;
    loop_attach(c, conf); /* also the database's call hook and the commit's progress */
    c->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
    if (c->rk == NULL) {
        rd_kafka_conf_destroy(conf);
        return og_error_set(err, OG_ERR_CONFIG, false, "cannot create Kafka consumer: %s", errstr);
    }
    /* Rebalances, errors and commits are all served by consumer_poll. */
    rd_kafka_poll_set_consumer(c->rk);
    c->commit.env.rk = c->rk;
    return OG_OK;
}

void consumer_free(struct consumer *c)
{
    if (c == NULL)
        return;
    /* Something that did not stop in time (see loop_shutdown) may still be in use: the
     * process's exit takes it all down (main.c exits right after). */
    if (c->abandon)
        return;
    if (!relay_thread_stop(&c->relay, clock_mono_ms() + 1000))
        return;
    /* Messages still in the intake queue (loop_shutdown hands them back first; a consumer
     * that never ran has none) belong to the group member: before it goes. */
    for (size_t i = 0; c->intake != NULL && i < c->intake_n; i++) {
        rd_kafka_message_t *m = c->intake[(c->intake_head + i) % CONSUMER_INTAKE_MAX];
        if (m != NULL)
            rd_kafka_message_destroy(m);
    }
    c->intake_n = 0;
    if (c->intake_rebalance != NULL)
        rd_kafka_topic_partition_list_destroy(c->intake_rebalance);
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
    commit_free(&c->commit);
    delay_levels_free(&c->levels);
    /* No flush runs any more: the workers are idle, connecting, or in a claim whose batch was
     * not stored. One that does not stop in time is left to the process's exit (it uses
     * nothing of c or the configuration). */
    (void)claim_pool_stop(&c->claim_pool, clock_mono_ms() + 1000);
    db_free(c->db);
    sched_free(c->sched);
    window_free(c->window);
    free(c->intake);
    kafka_topics_free(c->topics, c->ntopics);
    free(c);
}
