#include "tools/bench/support/bench_kafka.h"

#include <stdbool.h>
#include <stdio.h>

#include "common/error.h"
#include "common/kafka.h"
#include "tools/bench/support/bench_run.h"

static void bench_kafka_set(rd_kafka_conf_t *conf, const char *name, const char *value)
{
    char errstr[256];

    if (rd_kafka_conf_set(conf, name, value, errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK)
        bench_die("kafka property %s=%s: %s", name, value, errstr);
}

rd_kafka_t *bench_kafka_client(const char *brokers, const char *client_id, rd_kafka_type_t type,
                               const char *const *props,
                               void (*dr_cb)(rd_kafka_t *, const rd_kafka_message_t *, void *))
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char errstr[512];
    rd_kafka_t *rk;

    bench_kafka_set(conf, "bootstrap.servers", brokers);
    bench_kafka_set(conf, "client.id", client_id);
    bench_kafka_set(conf, "log_level", "4"); /* no notices about the topics we delete */
    /* A metadata refresh for a topic deleted at the end of a phase must not create it again on
     * a broker that auto-creates topics (the local one does not; a shop's may). */
    bench_kafka_set(conf, "allow.auto.create.topics", "false");
    for (size_t i = 0; props != NULL && props[i] != NULL; i += 2)
        bench_kafka_set(conf, props[i], props[i + 1]);
    if (dr_cb != NULL)
        rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
    rk = rd_kafka_new(type, conf, errstr, sizeof(errstr));
    if (rk == NULL) {
        rd_kafka_conf_destroy(conf);
        bench_die("kafka client: %s", errstr);
    }
    return rk;
}

void bench_topic_create(struct bench_topics *t, rd_kafka_t *rk, const char *topic, int partitions)
{
    struct og_error err = {0};
    bool created = false;

    if (t->n == BENCH_TOPICS_MAX)
        bench_die("too many topics");
    if (kafka_topic_create(rk, topic, partitions, 1, &created, &err) != OG_OK)
        bench_die("CreateTopics %s: %s", topic, err.msg);
    if (!created)
        bench_die("CreateTopics %s: the topic already exists", topic);
    snprintf(t->names[t->n++], sizeof(t->names[0]), "%s", topic);
    if (!kafka_topic_wait_ready(rk, topic, partitions, 10000))
        bench_die("topic %s: partitions have no leader after 10 s", topic);
}

void bench_topics_delete(struct bench_topics *t, rd_kafka_t *rk)
{
    rd_kafka_DeleteTopic_t *dt[BENCH_TOPICS_MAX];
    rd_kafka_queue_t *q;
    rd_kafka_event_t *ev = NULL;

    if (rk == NULL || t->n == 0)
        return;
    for (int i = 0; i < t->n; i++)
        dt[i] = rd_kafka_DeleteTopic_new(t->names[i]);
    q = rd_kafka_queue_new(rk);
    rd_kafka_DeleteTopics(rk, dt, (size_t)t->n, NULL, q);
    for (int i = 0; i < 60 && ev == NULL; i++) {
        ev = rd_kafka_queue_poll(q, 1000);
        if (ev != NULL && rd_kafka_event_type(ev) != RD_KAFKA_EVENT_DELETETOPICS_RESULT) {
            rd_kafka_event_destroy(ev);
            ev = NULL;
        }
    }
    if (ev == NULL) {
        bench_warn("DeleteTopics: no answer; delete these topics by hand:");
        for (int i = 0; i < t->n; i++)
            fprintf(stderr, "  %s\n", t->names[i]);
    } else {
        size_t n;
        const rd_kafka_topic_result_t **res =
            rd_kafka_DeleteTopics_result_topics(rd_kafka_event_DeleteTopics_result(ev), &n);
        for (size_t i = 0; i < n; i++)
            if (rd_kafka_topic_result_error(res[i]) != RD_KAFKA_RESP_ERR_NO_ERROR)
                bench_warn("DeleteTopics %s: %s", rd_kafka_topic_result_name(res[i]),
                           rd_kafka_err2str(rd_kafka_topic_result_error(res[i])));
        rd_kafka_event_destroy(ev);
    }
    rd_kafka_queue_destroy(q);
    for (int i = 0; i < t->n; i++)
        rd_kafka_DeleteTopic_destroy(dt[i]);
    t->n = 0;
}
