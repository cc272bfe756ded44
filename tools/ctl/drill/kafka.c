/* The drill's side of the broker: its topics (the delay topics, the dead-letter topic, the
 * consumers' outbox topics), the cancel messages it sends itself (one per order not lost,
 * duplicates last, garbage), and the consumer group's lag. Its clients come from common/kafka,
 * built like the services' (TLS, SASL, kafka.sasl_password_file, kafka.properties). It must
 * not touch the database. */
#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/kafka.h"
#include "common/signals.h"
#include "tools/ctl/drill/drill.h"

enum og_status drill_kafka_producer(const struct drill *d, rd_kafka_t **rk, struct og_error *err)
{
    if (kafka_producer_new(d->cfg, "ordergatectl-drill", NULL, rk, err) != OG_OK) {
        og_error_prefix(err, "producer");
        return err->status;
    }
    return OG_OK;
}

/* Reads the committed offsets of the drill's group without joining it. */
enum og_status drill_kafka_reader(const struct drill *d, rd_kafka_t **rk, struct og_error *err)
{
    if (kafka_group_reader_new(d->cfg, d->group, "ordergatectl-drill-offsets", rk, err) != OG_OK) {
        og_error_prefix(err, "group offsets reader");
        return err->status;
    }
    return OG_OK;
}

static enum og_status drill_kafka_topic(rd_kafka_t *rk, const char *topic, int partitions,
                                        struct og_error *err)
{
    bool created;

    if (kafka_topic_create(rk, topic, partitions, -1, &created, err) != OG_OK) {
        og_error_prefix(err, "create topic");
        return err->status;
    }
    return OG_OK;
}

enum og_status drill_kafka_topics(const struct drill *d, rd_kafka_t *producer, struct og_error *err)
{
    static const char *const outbox_kinds[] = {"events", "refunds", "alerts"};
    int partitions = d->o.consumers > 2 ? 2 * d->o.consumers : 4;

    for (int i = 0; i < d->ndelay; i++)
        if (drill_kafka_topic(producer, d->delay_topics[i], partitions, err) != OG_OK)
            return err->status;
    if (drill_kafka_topic(producer, d->dlq_topic, 1, err) != OG_OK)
        return err->status;
    for (int k = 0; k < 3; k++) {
        char name[sizeof(d->topic) + 16];
        snprintf(name, sizeof(name), "%s.%s", d->topic, outbox_kinds[k]);
        if (drill_kafka_topic(producer, name, 1, err) != OG_OK)
            return err->status;
    }
    return OG_OK;
}

static enum og_status drill_kafka_send(rd_kafka_t *rk, const char *topic, const char *key,
                                       const char *value, struct og_error *err)
{
    rd_kafka_resp_err_t e;

    for (;;) {
        e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(key, strlen(key)),
                              RD_KAFKA_V_VALUE((void *)value, strlen(value)),
                              RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
        if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL)
            break;
        rd_kafka_poll(rk, 50);
    }
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
        return kafka_error_set(err, e, "producing cancel messages");
    return OG_OK;
}

/* One cancel message of order o, as the order service's scheduler would send it. */
static enum og_status drill_kafka_cancel(const struct drill *d, rd_kafka_t *rk,
                                         const struct drill_order *o, struct og_error *err)
{
    char value[160], due[32];

    snprintf(value, sizeof(value), "{\"v\":1,\"order_no\":\"%s\",\"due_at\":\"%s\"}", o->order_no,
             clock_format_iso(o->due_ms, due, sizeof(due)));
    return drill_kafka_send(rk, d->topic, o->order_no, value, err);
}

enum og_status drill_kafka_produce(struct drill *d, rd_kafka_t *rk, struct og_error *err)
{
    static const char *const garbage[] = {
        "not json", "{\"v\":2,\"order_no\":\"x\",\"due_at\":\"2026-11-30T16:00:00Z\"}",
        "{\"v\":1,\"order_no\":\"bad order\",\"due_at\":\"2026-11-30T16:00:00Z\"}",
        "{\"v\":1,\"order_no\":\"x1\",\"due_at\":\"yesterday\"}", "[]"};
    rd_kafka_resp_err_t e;

    for (long i = 0; i < d->o.orders && !signals_stop; i++) {
        struct drill_order *o = &d->orders[i];
        if (o->lost) {
            d->lost_messages++;
            continue;
        }
        if (drill_kafka_cancel(d, rk, o, err) != OG_OK)
            return err->status;
        d->messages++;
    }
    /* Duplicates go last, as a retried scheduler would send them. */
    for (long i = 0; i < d->o.orders; i++) {
        struct drill_order *o = &d->orders[i];
        if (o->lost || !o->dup_msg)
            continue;
        if (drill_kafka_cancel(d, rk, o, err) != OG_OK)
            return err->status;
        d->dup_messages++;
    }
    for (int g = 0; g < d->o.garbage; g++) {
        const char *v = garbage[g % (int)(sizeof(garbage) / sizeof(garbage[0]))];
        if (drill_kafka_send(rk, d->topic, "garbage", v, err) != OG_OK)
            return err->status;
    }
    e = rd_kafka_flush(rk, 60000);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
        return kafka_error_set(err, e, "producing cancel messages: flush");
    return OG_OK;
}

int64_t drill_kafka_lag(const struct drill *d, rd_kafka_t *reader)
{
    int64_t lag = 0;

    for (int i = 0; i < d->ndelay; i++) {
        int64_t l = kafka_group_lag(reader, d->delay_topics[i], 10000);
        if (l < 0)
            return -1;
        lag += l;
    }
    return lag;
}
