#include "tools/bench/support/bench_kafka.h"

#include <stdbool.h>
#include <stdio.h>

#include "common/error.h"
#include "common/kafka.h"
#include "tools/bench/support/bench_run.h"

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
