/* Kafka topics a benchmark run creates for itself and deletes at its end:
 * every run names its topics afresh, so a topic that exists already is
 * someone else's and the run stops rather than write into it. */
#ifndef OG_TOOLS_BENCH_KAFKA_H
#define OG_TOOLS_BENCH_KAFKA_H

#include <librdkafka/rdkafka.h>

#define BENCH_TOPICS_MAX 8

struct bench_topics {
    char names[BENCH_TOPICS_MAX][160];
    int n;
};

/* Creates topic (replication 1) through rk and records it in t; dies when
 * it exists already, when t is full, or when its partitions have no leader
 * 10 s later. */
void bench_topic_create(struct bench_topics *t, rd_kafka_t *rk, const char *topic, int partitions);
/* Deletes every topic recorded in t (waits 60 s for the answer; names on
 * stderr what it could not delete) and empties t. rk NULL: nothing to do. */
void bench_topics_delete(struct bench_topics *t, rd_kafka_t *rk);

#endif
