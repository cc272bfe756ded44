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

/* A client of type on brokers for a driver's own use (the admin client that creates topics,
 * the producers of backlogs): client.id client_id, librdkafka's notices off (about the topics a
 * run deletes), no topic created by a metadata request, then props (name, value pairs,
 * NULL-terminated; may be NULL); dr_cb, when not NULL, as the delivery report callback. Dies
 * on a property librdkafka refuses. The programs under benchmark build theirs from their
 * configuration (common/kafka.h). */
rd_kafka_t *bench_kafka_client(const char *brokers, const char *client_id, rd_kafka_type_t type,
                               const char *const *props,
                               void (*dr_cb)(rd_kafka_t *, const rd_kafka_message_t *, void *));
/* Creates topic (replication 1) through rk and records it in t; dies when
 * it exists already, when t is full, or when its partitions have no leader
 * 10 s later. */
void bench_topic_create(struct bench_topics *t, rd_kafka_t *rk, const char *topic, int partitions);
/* Deletes every topic recorded in t (waits 60 s for the answer; names on
 * stderr what it could not delete) and empties t. rk NULL: nothing to do. */
void bench_topics_delete(struct bench_topics *t, rd_kafka_t *rk);

#endif
