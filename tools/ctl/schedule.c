/* ordergatectl schedule: produce one delayed cancel message (the message
 * contract: README.md, "The message contract (Kafka)") and wait for the broker's delivery report.
 *
 * Key: the order number. Value: {"v":1,"order_no":"...","due_at":"...Z"},
 * encoded by common/codec (the consumer's own decoder reads it back).
 *
 * The producer is the services' idempotent producer (common/kafka: same
 * kafka.properties rules, logs through common/log). The topic must exist: a
 * typo would otherwise create a topic no consumer reads, and the cancel
 * would only happen by the fallback scanner. */
#include <inttypes.h>
#include <librdkafka/rdkafka.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/codec.h"
#include "common/delay.h"
#include "common/gate.h"
#include "common/kafka.h"
#include "common/log.h"
#include "common/signals.h"
#include "tools/ctl/ctl.h"

#define SCHED_METADATA_MS 10000
#define SCHED_TIMEOUT_MS  "30000" /* message.timeout.ms unless kafka.properties says */

/* The delivery report with where the message landed. `base` first, so the
 * struct can be waited on with kafka_wait(). */
struct sched_delivery {
    struct kafka_delivery base;
    int32_t partition;
    int64_t offset;
};

/* Replaces common/kafka's report callback on this one producer: the
 * operator is told the partition and offset, which struct kafka_delivery
 * does not carry. */
static void sched_dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    struct sched_delivery *d = m->_private;

    (void)rk;
    (void)opaque;
    if (d == NULL)
        return;
    d->partition = m->partition;
    d->offset = m->offset;
    d->base.err = m->err;
    d->base.done = true;
}

static bool sched_props_set(const struct og_config *cfg, const char *name)
{
    size_t len = strlen(name);

    for (size_t i = 0; i < cfg->kafka.properties_n; i++)
        if (strncmp(cfg->kafka.properties[i], name, len) == 0 &&
            cfg->kafka.properties[i][len] == '=')
            return true;
    return false;
}

static enum og_status sched_producer(const struct og_config *cfg, rd_kafka_t **rk,
                                     struct og_error *err)
{
    rd_kafka_conf_t *conf = NULL;
    char errstr[512];
    enum og_status st;

    *rk = NULL;
    st = kafka_conf_new(cfg, KAFKA_ROLE_PRODUCER, CTL_PROG, &conf, err);
    if (st != OG_OK)
        return st;
    /* An operator waits at the terminal: fail in 30 s, not librdkafka's 5
     * minutes, unless the configuration asks for something else. */
    if (!sched_props_set(cfg, "message.timeout.ms") &&
        rd_kafka_conf_set(conf, "message.timeout.ms", SCHED_TIMEOUT_MS, errstr, sizeof(errstr)) !=
            RD_KAFKA_CONF_OK) {
        rd_kafka_conf_destroy(conf);
        return og_error_set(err, OG_ERR_CONFIG, false, "message.timeout.ms: %s", errstr);
    }
    if (rd_kafka_conf_set(conf, "allow.auto.create.topics", "false", errstr, sizeof(errstr)) !=
        RD_KAFKA_CONF_OK) {
        rd_kafka_conf_destroy(conf);
        return og_error_set(err, OG_ERR_CONFIG, false, "allow.auto.create.topics: %s", errstr);
    }
    rd_kafka_conf_set_dr_msg_cb(conf, sched_dr_cb);
    *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    if (*rk == NULL) {
        rd_kafka_conf_destroy(conf);
        return og_error_set(err, OG_ERR_CONFIG, false, "cannot create Kafka producer: %s", errstr);
    }
    /* conf belongs to the handle now. */
    return OG_OK;
}

/* Asks the cluster for its topic list (no topic handle: asking about one
 * topic could create it on a broker that auto-creates). */
static enum og_status sched_topic_exists(rd_kafka_t *rk, const char *topic, const char *brokers,
                                         struct og_error *err)
{
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t rc = rd_kafka_metadata(rk, 1, NULL, &md, SCHED_METADATA_MS);
    enum og_status st;
    char what[300];

    if (rc != RD_KAFKA_RESP_ERR_NO_ERROR) {
        snprintf(what, sizeof(what), "cannot read the topic list from Kafka at %s", brokers);
        return kafka_error_set(err, rc, what);
    }
    st = og_error_set(err, OG_ERR_KAFKA, false,
                      "topic %s does not exist on %s (create it, or check kafka.topics/--topic)",
                      topic, brokers);
    for (int i = 0; i < md->topic_cnt; i++)
        if (strcmp(md->topics[i].topic, topic) == 0 &&
            md->topics[i].err == RD_KAFKA_RESP_ERR_NO_ERROR) {
            og_error_clear(err);
            st = OG_OK;
            break;
        }
    rd_kafka_metadata_destroy(md);
    return st;
}

static enum og_status sched_produce(rd_kafka_t *rk, const char *topic, const char *key,
                                    const char *value, size_t value_len, struct sched_delivery *d,
                                    struct og_error *err)
{
    struct kafka_delivery *wait[1] = {&d->base};
    rd_kafka_resp_err_t rc;
    char what[300];
    int64_t deadline = clock_mono_ms() + 10 * 60 * 1000;

    memset(d, 0, sizeof(*d));
    rc = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(key, strlen(key)),
                           RD_KAFKA_V_VALUE((void *)value, value_len),
                           RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_OPAQUE(d),
                           RD_KAFKA_V_END);
    if (rc != RD_KAFKA_RESP_ERR_NO_ERROR) {
        snprintf(what, sizeof(what), "produce to %s", topic);
        return kafka_error_set(err, rc, what);
    }
    /* The report always comes: success, or failure at the latest after
     * message.timeout.ms. The deadline only guards against a configuration
     * that made that timeout infinite; slices keep Ctrl-C responsive. */
    while (kafka_wait(rk, wait, 1, 200) > 0 && !signals_stop && clock_mono_ms() < deadline)
        ;
    if (!d->base.done)
        return og_error_set(err, OG_ERR_KAFKA, false,
                            "%s before the delivery report: the message to %s may or may not "
                            "have been written",
                            signals_stop ? "interrupted" : "gave up", topic);
    if (d->base.err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        snprintf(what, sizeof(what), "delivery to %s failed", topic);
        return kafka_error_set(err, d->base.err, what);
    }
    return OG_OK;
}

static enum og_status schedule_run(struct ctl *ctl, const struct opt_args *a, json_t **result,
                                   struct og_error *err)
{
    const char *order_no = a->pos[0];
    const char *due_opt = opt_arg(a, "due-at"), *level_opt = opt_arg(a, "delay-level");
    const char *topic = opt_arg(a, "topic"), *due_source, *status = NULL;
    struct delay_levels levels = {0};
    const struct delay_level *picked = NULL;
    int64_t due_ms = 0, level_s = 0;
    char due_at[40], value[CODEC_VALUE_MAX];
    size_t value_len = 0;
    json_t *report = NULL, *out = NULL;
    rd_kafka_t *rk = NULL;
    struct sched_delivery d;
    enum og_status st;

    if (!gate_order_no_valid(order_no, strlen(order_no)))
        return og_error_set(err, OG_ERR_ARG, false,
                            "invalid order number '%s' (1 to %d characters of A-Z a-z 0-9 . _ : -)",
                            order_no, GATE_ORDER_NO_MAX);
    if (due_opt != NULL && level_opt != NULL)
        return og_error_set(err, OG_ERR_ARG, false, "give --due-at or --delay-level, not both");
    if (due_opt != NULL) {
        st = ctl_parse_time("--due-at", due_opt, &due_ms, err);
        if (st != OG_OK)
            return st;
    }
    if (level_opt != NULL) {
        st = parse_duration("--delay-level", level_opt, 1, CTL_DURATION_MAX, &level_s, err);
        if (st != OG_OK)
            return st;
    }
    if (topic != NULL && !kafka_topic_valid(topic))
        return og_error_set(err, OG_ERR_ARG, false,
                            "--topic '%s': 1 to %d characters of A-Z a-z 0-9 . _ -", topic,
                            KAFKA_TOPIC_MAX);
    st = delay_levels_parse(&ctl->cfg, DELAY_NAMED_ONLY, &levels, err);
    if (st != OG_OK)
        goto out;

    /* The due time. */
    if (due_opt != NULL) {
        due_source = "due_at";
    } else if (level_opt != NULL) {
        due_source = "delay_level";
        due_ms = clock_wall_ms() + level_s * 1000;
    } else {
        struct db *db = ctl_db(ctl, err);
        due_source = "order_expire_at";
        if (db == NULL) {
            st = err->status;
            goto out;
        }
        st = ctl_order_report(db, order_no, &report, err);
        if (st != OG_OK)
            goto out;
        if (report == NULL || !json_is_true(json_object_get(report, "found"))) {
            st = og_error_set(err, OG_ERR_DB, false,
                              "order %s not found; give --due-at to schedule it anyway", order_no);
            goto out;
        }
        status = ctl_json_str(report, "status");
        if (ctl_parse_time("expire_at", ctl_json_str(report, "expire_at"), &due_ms, err) != OG_OK) {
            st = og_error_set(err, OG_ERR_INTERNAL, false, "order %s: unreadable expire_at",
                              order_no);
            goto out;
        }
        if (status != NULL && strcmp(status, "pending_payment") != 0)
            log_warn("schedule_not_pending", "order_no=%s status=%s", order_no, status);
    }

    /* The topic. */
    if (topic == NULL && level_opt != NULL) {
        for (size_t i = 0; i < levels.n && picked == NULL; i++)
            if (levels.v[i].level_ms == level_s * 1000)
                picked = &levels.v[i];
        if (picked == NULL) {
            st = og_error_set(err, OG_ERR_ARG, false,
                              "no delay topic for level %s in kafka.topics (%s); give --topic",
                              level_opt, ctl->cfg.kafka.topics);
            goto out;
        }
        topic = picked->topic;
    } else if (topic == NULL) {
        int64_t wait_s = (due_ms - clock_wall_ms() + 999) / 1000;
        picked = delay_pick(&levels, wait_s * 1000);
        if (picked == NULL || picked->level_ms < wait_s * 1000) {
            st = og_error_set(err, OG_ERR_ARG, false,
                              "due in %" PRId64 " s: no delay level in kafka.topics (%s) is that "
                              "long; give --topic",
                              wait_s, ctl->cfg.kafka.topics);
            goto out;
        }
        topic = picked->topic;
    }

    st = codec_encode_cancel(order_no, due_ms, value, sizeof(value), &value_len, err);
    if (st != OG_OK)
        goto out;
    clock_format_iso(due_ms, due_at, sizeof(due_at));
    /* A refused SASL login or TLS certificate: one line now, not retries until a timeout. */
    st = kafka_connect_check(&ctl->cfg, CTL_PROG "-check", KAFKA_CONNECT_CHECK_MS, err);
    if (st != OG_OK)
        goto out;
    st = sched_producer(&ctl->cfg, &rk, err);
    if (st != OG_OK)
        goto out;
    st = sched_topic_exists(rk, topic, ctl->cfg.kafka.brokers, err);
    if (st != OG_OK)
        goto out;
    st = sched_produce(rk, topic, order_no, value, value_len, &d, err);
    if (st != OG_OK)
        goto out;
    log_debug("cancel_scheduled", "order_no=%s topic=%s partition=%d offset=%" PRId64 " due_at=%s",
              order_no, topic, (int)d.partition, d.offset, due_at);

    out = json_object();
    if (out == NULL) {
        st = og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
        goto out;
    }
    ctl_json_set(out, "command", json_string("schedule"));
    ctl_json_set(out, "ok", json_true());
    ctl_json_set(out, "order_no", json_string(order_no));
    ctl_json_set(out, "topic", json_string(topic));
    ctl_json_set(out, "partition", json_integer(d.partition));
    ctl_json_set(out, "offset", json_integer(d.offset));
    ctl_json_set(out, "due_at", json_string(due_at));
    ctl_json_set(out, "due_source", json_string(due_source));
    ctl_json_set(out, "order_status", ctl_json_str_or_null(status));
    ctl_json_set(out, "key", json_string(order_no));
    ctl_json_set(out, "value", json_stringn(value, value_len));
    *result = out;

out:
    if (rk != NULL) {
        rd_kafka_flush(rk, 1000);
        rd_kafka_destroy(rk);
    }
    delay_levels_free(&levels);
    json_decref(report);
    return st;
}

static void schedule_text(const json_t *r, FILE *out)
{
    static const char *const keys[] = {"order_no", "topic",      "partition", "offset",
                                       "due_at",   "due_source", "value",     NULL};

    ctl_print_fields(out, r, keys);
}

static const struct opt schedule_opts[] = {
    {"due-at", "TIMESTAMP", OPT_ARG,
     "when the cancel is due, RFC 3339 with zone (default: the order's expire_at)", NULL, 0, 0},
    {"delay-level", "LEVEL", OPT_ARG,
     "due LEVEL from now (15m, 30m, ...), on the delay topic of that level", NULL, 0, 0},
    {"topic", "T", OPT_ARG, "produce to T instead of the delay topic chosen from kafka.topics",
     NULL, 0, 0},
    {NULL, NULL, 0, NULL, NULL, 0, 0},
};

const struct ctl_command ctl_cmd_schedule = {
    .name = "schedule",
    .usage = "schedule ORDER [--due-at TIMESTAMP | --delay-level LEVEL] [--topic T]",
    .summary = "produce one delayed cancel message and wait for the broker's acknowledgement",
    .details =
        "Key: the order number; value: {\"v\":1,\"order_no\":\"...\",\"due_at\":\"...Z\"}.\n"
        "Without --due-at and --delay-level the due time is the order's expire_at, read from\n"
        "the database. Without --topic the topic is the delay topic of kafka.topics (names\n"
        "ending in .15m, .30m, ...) with the shortest level not shorter than the wait\n"
        "(common/kafka.h, kafka_level_pick).\n"
        "The topic must exist. A duplicate message is harmless: the gate answers\n"
        "already_cancelled or already_paid.\n",
    .opts = schedule_opts,
    .min_pos = 1,
    .pos_name = "ORDER",
    .max_pos = 1,
    .run = schedule_run,
    .text = schedule_text,
};
