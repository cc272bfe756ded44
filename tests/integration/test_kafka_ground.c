/* Ground truth for the broker: produce to a fresh topic, consume it in a
 * consumer group with the cooperative-sticky assignor, commit, and read the
 * committed offset back from the group coordinator; count a topic's messages,
 * and what a group has not committed of them (kafka_group_lag). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <librdkafka/rdkafka.h>

#include "common/cfg.h"
#include "common/kafka.h"
#include "support/testutil.h"

#define NMSG 5

static void conf_set(rd_kafka_conf_t *conf, const char *k, const char *v)
{
    char errstr[256];

    if (rd_kafka_conf_set(conf, k, v, errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK)
        fail_msg("%s=%s: %s", k, v, errstr);
}

static void rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts, void *opaque)
{
    (void)opaque;
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS)
        rd_kafka_error_destroy(rd_kafka_incremental_assign(rk, parts));
    else
        rd_kafka_error_destroy(rd_kafka_incremental_unassign(rk, parts));
}

static rd_kafka_t *make_consumer(const char *group)
{
    char errstr[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_t *rk;

    conf_set(conf, "bootstrap.servers", testutil_brokers());
    conf_set(conf, "group.id", group);
    conf_set(conf, "auto.offset.reset", "earliest");
    conf_set(conf, "enable.auto.commit", "false");
    conf_set(conf, "partition.assignment.strategy", "cooperative-sticky");
    rd_kafka_conf_set_rebalance_cb(conf, rebalance_cb);
    rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
    if (rk == NULL)
        fail_msg("consumer: %s", errstr);
    rd_kafka_poll_set_consumer(rk);
    return rk;
}

static void test_produce_consume_commit(void **state)
{
    char topic[96], group[96], errstr[256];
    rd_kafka_conf_t *pconf = rd_kafka_conf_new();
    rd_kafka_t *producer, *consumer;
    rd_kafka_topic_partition_list_t *subs, *committed;
    int got = 0;
    int64_t last_offset = -1;

    (void)state;
    testutil_unique(topic, sizeof(topic), "og.ground");
    testutil_unique(group, sizeof(group), "og-ground");
    /* Explicitly: the local broker creates no topic on first use. */
    testutil_topic_create(testutil_brokers(), topic, 1);
    conf_set(pconf, "bootstrap.servers", testutil_brokers());
    conf_set(pconf, "enable.idempotence", "true");
    producer = rd_kafka_new(RD_KAFKA_PRODUCER, pconf, errstr, sizeof(errstr));
    assert_non_null(producer);
    for (int i = 0; i < NMSG; i++) {
        char value[32];
        snprintf(value, sizeof(value), "m%d", i);
        assert_int_equal(
            rd_kafka_producev(producer, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(0),
                              RD_KAFKA_V_KEY("k", 1), RD_KAFKA_V_VALUE(value, strlen(value)),
                              RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END),
            RD_KAFKA_RESP_ERR_NO_ERROR);
    }
    assert_int_equal(rd_kafka_flush(producer, 30000), RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_destroy(producer);

    consumer = make_consumer(group);
    subs = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(subs, topic, RD_KAFKA_PARTITION_UA);
    assert_int_equal(rd_kafka_subscribe(consumer, subs), RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_topic_partition_list_destroy(subs);
    for (int spins = 0; spins < 300 && got < NMSG; spins++) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(consumer, 100);
        if (m == NULL)
            continue;
        if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR && m->partition == 0) {
            assert_int_equal((int)m->offset, got);
            last_offset = m->offset;
            got++;
        }
        rd_kafka_message_destroy(m);
    }
    assert_int_equal(got, NMSG);
    assert_int_equal(rd_kafka_commit(consumer, NULL, 0), RD_KAFKA_RESP_ERR_NO_ERROR);
    assert_int_equal(rd_kafka_consumer_close(consumer), RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_destroy(consumer);

    /* A new member of the same group sees the committed position. */
    consumer = make_consumer(group);
    committed = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(committed, topic, 0);
    assert_int_equal(rd_kafka_committed(consumer, committed, 10000), RD_KAFKA_RESP_ERR_NO_ERROR);
    assert_int_equal((int)committed->elems[0].offset, (int)last_offset + 1);
    rd_kafka_topic_partition_list_destroy(committed);
    rd_kafka_consumer_close(consumer);
    rd_kafka_destroy(consumer);
}

/* kafka_topic_messages counts every partition's messages, and knows no
 * count for a topic that does not exist. */
static void test_topic_messages(void **state)
{
    char topic[96], missing[112], errstr[256];
    rd_kafka_conf_t *pconf = rd_kafka_conf_new();
    rd_kafka_t *producer;

    (void)state;
    testutil_unique(topic, sizeof(topic), "og.count");
    snprintf(missing, sizeof(missing), "%s.none", topic);
    testutil_topic_create(testutil_brokers(), topic, 3);
    conf_set(pconf, "bootstrap.servers", testutil_brokers());
    producer = rd_kafka_new(RD_KAFKA_PRODUCER, pconf, errstr, sizeof(errstr));
    assert_non_null(producer);
    assert_int_equal(kafka_topic_messages(producer, topic, 10000), 0);
    for (int i = 0; i < 7; i++)
        assert_int_equal(rd_kafka_producev(producer, RD_KAFKA_V_TOPIC(topic),
                                           RD_KAFKA_V_PARTITION(i % 3), RD_KAFKA_V_VALUE("v", 1),
                                           RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                           RD_KAFKA_V_END),
                         RD_KAFKA_RESP_ERR_NO_ERROR);
    assert_int_equal(rd_kafka_flush(producer, 30000), RD_KAFKA_RESP_ERR_NO_ERROR);
    assert_int_equal(kafka_topic_messages(producer, topic, 10000), 7);
    assert_int_equal(kafka_topic_messages(producer, missing, 1000), -1);
    rd_kafka_destroy(producer);
}

/* kafka_group_lag through kafka_group_reader_new: every message while the group has committed
 * nothing, then what lies past its commits; -1 for a topic that does not exist. The reader
 * commits only what it is told to. */
static void test_group_lag(void **state)
{
    char topic[96], group[96], missing[112], errstr[256];
    rd_kafka_conf_t *pconf = rd_kafka_conf_new();
    rd_kafka_t *producer, *reader = NULL;
    rd_kafka_topic_partition_list_t *commit;
    struct og_config cfg;
    struct og_error err = {0};

    (void)state;
    testutil_unique(topic, sizeof(topic), "og.lag");
    testutil_unique(group, sizeof(group), "og-lag");
    snprintf(missing, sizeof(missing), "%s.none", topic);
    testutil_topic_create(testutil_brokers(), topic, 3);
    conf_set(pconf, "bootstrap.servers", testutil_brokers());
    producer = rd_kafka_new(RD_KAFKA_PRODUCER, pconf, errstr, sizeof(errstr));
    assert_non_null(producer);
    for (int i = 0; i < 7; i++) /* 3, 2 and 2 messages on partitions 0, 1, 2 */
        assert_int_equal(rd_kafka_producev(producer, RD_KAFKA_V_TOPIC(topic),
                                           RD_KAFKA_V_PARTITION(i % 3), RD_KAFKA_V_VALUE("v", 1),
                                           RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                           RD_KAFKA_V_END),
                         RD_KAFKA_RESP_ERR_NO_ERROR);
    assert_int_equal(rd_kafka_flush(producer, 30000), RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_destroy(producer);

    assert_int_equal(cfg_init(&cfg, &err), OG_OK);
    assert_int_equal(cfg_set(&cfg, "kafka.brokers", testutil_brokers(), &err), OG_OK);
    assert_int_equal(kafka_group_reader_new(&cfg, group, "og-lag", &reader, &err), OG_OK);
    assert_int_equal(kafka_group_lag(reader, topic, 10000), 7);
    commit = rd_kafka_topic_partition_list_new(2);
    rd_kafka_topic_partition_list_add(commit, topic, 0)->offset = 2;
    rd_kafka_topic_partition_list_add(commit, topic, 1)->offset = 2;
    assert_int_equal(rd_kafka_commit(reader, commit, 0), RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_topic_partition_list_destroy(commit);
    assert_int_equal(kafka_group_lag(reader, topic, 10000), 1 + 0 + 2);
    assert_int_equal(kafka_group_lag(reader, missing, 2000), -1);
    rd_kafka_destroy(reader);
    cfg_free(&cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_produce_consume_commit),
        cmocka_unit_test(test_topic_messages),
        cmocka_unit_test(test_group_lag),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
