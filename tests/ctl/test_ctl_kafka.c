/* ordergatectl schedule against the real broker: the delayed cancel message
 * arrives on a fresh topic with the contract's key and value, read back with
 * a plain librdkafka consumer. ordergatectl topics: the replication that
 * kafka.replication names, and a refusal of more than the cluster's brokers
 * (against one broker or the three-node cluster of services.sh alike). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <librdkafka/rdkafka.h>

#include "common/clock.h"
#include "ctl/ctl_run.h"
#include "support/testdb.h"
#include "support/testutil.h"

static void conf_set(rd_kafka_conf_t *conf, const char *k, const char *v)
{
    char errstr[256];

    if (rd_kafka_conf_set(conf, k, v, errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK)
        fail_msg("%s=%s: %s", k, v, errstr);
}

static bool topic_listed(rd_kafka_t *rk, const char *topic)
{
    const struct rd_kafka_metadata *md = NULL;
    bool found = false;

    if (rd_kafka_metadata(rk, 1, NULL, &md, 5000) != RD_KAFKA_RESP_ERR_NO_ERROR)
        return false;
    for (int i = 0; i < md->topic_cnt; i++)
        if (strcmp(md->topics[i].topic, topic) == 0 &&
            md->topics[i].err == RD_KAFKA_RESP_ERR_NO_ERROR && md->topics[i].partition_cnt > 0)
            found = true;
    rd_kafka_metadata_destroy(md);
    return found;
}

/* Creates a one-partition topic and waits until the cluster lists it. */
static void topic_create(const char *topic)
{
    char errstr[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_t *rk;
    rd_kafka_NewTopic_t *nt;
    rd_kafka_queue_t *q;
    rd_kafka_event_t *ev;
    const rd_kafka_CreateTopics_result_t *res;
    const rd_kafka_topic_result_t **results;
    size_t n;

    conf_set(conf, "bootstrap.servers", testutil_brokers());
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    if (rk == NULL)
        fail_msg("admin client: %s", errstr);
    nt = rd_kafka_NewTopic_new(topic, 1, 1, errstr, sizeof(errstr));
    assert_non_null(nt);
    q = rd_kafka_queue_new(rk);
    rd_kafka_CreateTopics(rk, &nt, 1, NULL, q);
    ev = rd_kafka_queue_poll(q, 30000);
    assert_non_null(ev);
    res = rd_kafka_event_CreateTopics_result(ev);
    assert_non_null(res);
    results = rd_kafka_CreateTopics_result_topics(res, &n);
    assert_int_equal(n, 1);
    if (rd_kafka_topic_result_error(results[0]) != RD_KAFKA_RESP_ERR_NO_ERROR)
        fail_msg("create topic %s: %s", topic, rd_kafka_topic_result_error_string(results[0]));
    rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q);
    rd_kafka_NewTopic_destroy(nt);
    for (int i = 0; i < 100 && !topic_listed(rk, topic); i++)
        testutil_sleep_ms(100);
    assert_true(topic_listed(rk, topic));
    rd_kafka_destroy(rk);
}

struct got {
    char key[128];
    char value[512];
};

/* Reads `want` messages of partition 0 from the beginning. */
static int consume(const char *topic, struct got *got, int want)
{
    char errstr[256], group[128];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_topic_partition_list_t *parts;
    rd_kafka_t *rk;
    int n = 0;
    int64_t deadline = clock_mono_ms() + 30000;

    testutil_unique(group, sizeof(group), "ctl.test.reader");
    conf_set(conf, "bootstrap.servers", testutil_brokers());
    conf_set(conf, "group.id", group);
    conf_set(conf, "enable.auto.commit", "false");
    rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
    if (rk == NULL)
        fail_msg("consumer: %s", errstr);
    rd_kafka_poll_set_consumer(rk);
    parts = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(parts, topic, 0)->offset = RD_KAFKA_OFFSET_BEGINNING;
    assert_int_equal(rd_kafka_assign(rk, parts), RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_topic_partition_list_destroy(parts);
    while (n < want && clock_mono_ms() < deadline) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 200);
        if (m == NULL)
            continue;
        if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
            snprintf(got[n].key, sizeof(got[n].key), "%.*s", (int)m->key_len,
                     m->key ? (const char *)m->key : "");
            snprintf(got[n].value, sizeof(got[n].value), "%.*s", (int)m->len,
                     m->payload ? (const char *)m->payload : "");
            n++;
        }
        rd_kafka_message_destroy(m);
    }
    /* And nothing more arrives. */
    for (int i = 0; i < 5; i++) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (m != NULL && m->err == RD_KAFKA_RESP_ERR_NO_ERROR)
            n++;
        if (m != NULL)
            rd_kafka_message_destroy(m);
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return n;
}

static void test_schedule_delivers_contract_message(void **state)
{
    char base[96], topic[128], topics[300], missing[128], expect[256];
    struct testdb t;
    struct ctl_result r;
    struct got got[4];
    PGconn *conn;
    int64_t due_ms, now_ms;
    const char *brokers = testutil_brokers();

    (void)state;
    testutil_unique(base, sizeof(base), "ctl.sched");
    snprintf(topic, sizeof(topic), "%s.15m", base);
    snprintf(topics, sizeof(topics), "%s.15m,%s.30m", base, base);
    snprintf(missing, sizeof(missing), "%s.nosuch", base);
    topic_create(topic);

    testdb_create(&t, "ctl_sched");
    conn = testdb_connect(&t);
    testdb_exec(conn, "SELECT ordergate.add_stock('S1', 10)");
    ctl_run(&r, "place", "K1", "--db", t.conninfo, "--amount", "100", "--item", "S1:1",
            "--expire-in", "300", "--json", NULL);
    assert_int_equal(r.status, 0);
    ctl_result_free(&r);

    /* 1. Due time from the order's expire_at; topic chosen by level (wait
     *    of 5 minutes: the 15m topic, the shortest level not shorter). */
    ctl_run(&r, "schedule", "K1", "--db", t.conninfo, "--brokers", brokers, "--topics", topics,
            "--json", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(ctl_json_s(r.json, "topic"), topic);
    assert_string_equal(ctl_json_s(r.json, "due_source"), "order_expire_at");
    assert_string_equal(ctl_json_s(r.json, "order_status"), "pending_payment");
    assert_int_equal(ctl_json_i(r.json, "partition"), 0);
    assert_int_equal(ctl_json_i(r.json, "offset"), 0);
    {
        PGresult *res = PQexec(conn, "SELECT to_char(expire_at AT TIME ZONE 'UTC', "
                                     "'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') FROM ordergate.orders "
                                     "WHERE order_no = 'K1'");
        assert_int_equal(PQntuples(res), 1);
        assert_string_equal(ctl_json_s(r.json, "due_at"), PQgetvalue(res, 0, 0));
        snprintf(expect, sizeof(expect), "{\"v\":1,\"order_no\":\"K1\",\"due_at\":\"%s\"}",
                 PQgetvalue(res, 0, 0));
        PQclear(res);
    }
    ctl_result_free(&r);

    /* 2. An explicit due time with an offset, normalised to UTC; the database
     *    is not needed (a database that does not exist proves it). */
    ctl_run(&r, "schedule", "K2", "--db", "dbname=og_ctl_no_such_db", "--brokers", brokers,
            "--topic", topic, "--due-at", "2026-11-30T17:00:00.250+01:00", NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "due_at      2026-11-30T16:00:00.250Z\n"));
    assert_non_null(strstr(r.out, "offset      1\n"));
    ctl_result_free(&r);

    /* 3. A delay level: due 15 minutes from now, on that level's topic. */
    now_ms = clock_wall_ms();
    ctl_run(&r, "schedule", "K3", "--brokers", brokers, "--topics", topics, "--delay-level", "15m",
            "--json", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(ctl_json_s(r.json, "topic"), topic);
    assert_int_equal(clock_parse_iso(ctl_json_s(r.json, "due_at"),
                                     strlen(ctl_json_s(r.json, "due_at")), &due_ms),
                     0);
    assert_true(due_ms >= now_ms + 15 * 60 * 1000 - 1000);
    assert_true(due_ms <= clock_wall_ms() + 15 * 60 * 1000 + 1000);
    ctl_result_free(&r);

    /* 4. A topic that does not exist: refused, and not created by asking. */
    ctl_run(&r, "schedule", "K4", "--brokers", brokers, "--topic", missing, "--due-at",
            "2026-11-30T16:00:00Z", NULL);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "does not exist"));
    ctl_result_free(&r);

    /* 5. Bad input: exit 2 before anything is produced. */
    ctl_run(&r, "schedule", "K5", "--brokers", brokers, "--topic", topic, "--due-at", "tomorrow",
            NULL);
    assert_int_equal(r.status, 2);
    ctl_result_free(&r);
    ctl_run(&r, "schedule", "K5", "--brokers", brokers, "--topics", topics, "--delay-level", "5m",
            NULL);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "no delay topic for level 5m"));
    ctl_result_free(&r);

    /* The topic holds exactly the three messages, in order, keyed by order. */
    assert_int_equal(consume(topic, got, 3), 3);
    assert_string_equal(got[0].key, "K1");
    assert_string_equal(got[0].value, expect);
    assert_string_equal(got[1].key, "K2");
    assert_string_equal(got[1].value,
                        "{\"v\":1,\"order_no\":\"K2\",\"due_at\":\"2026-11-30T16:00:00.250Z\"}");
    assert_string_equal(got[2].key, "K3");
    assert_non_null(strstr(got[2].value, "{\"v\":1,\"order_no\":\"K3\",\"due_at\":\""));
    {
        /* The missing topic still does not exist. */
        char errstr[256];
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        rd_kafka_t *rk;
        conf_set(conf, "bootstrap.servers", brokers);
        rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
        assert_non_null(rk);
        assert_false(topic_listed(rk, missing));
        rd_kafka_destroy(rk);
    }

    PQfinish(conn);
    testdb_drop(&t);
}

/* Brokers the cluster lists, and replicas of each partition of topic: -1
 * when it is not listed, 0 when its partitions disagree. */
static int cluster_brokers(rd_kafka_t *rk)
{
    const struct rd_kafka_metadata *md = NULL;
    int n;

    assert_int_equal(rd_kafka_metadata(rk, 0, NULL, &md, 5000), RD_KAFKA_RESP_ERR_NO_ERROR);
    n = md->broker_cnt;
    rd_kafka_metadata_destroy(md);
    return n;
}

static int topic_replicas(rd_kafka_t *rk, const char *topic)
{
    const struct rd_kafka_metadata *md = NULL;
    int replicas = -1;

    if (rd_kafka_metadata(rk, 1, NULL, &md, 5000) != RD_KAFKA_RESP_ERR_NO_ERROR)
        return -1;
    for (int i = 0; i < md->topic_cnt; i++) {
        const struct rd_kafka_metadata_topic *t = &md->topics[i];

        if (strcmp(t->topic, topic) != 0 || t->err != RD_KAFKA_RESP_ERR_NO_ERROR)
            continue;
        replicas = t->partition_cnt > 0 ? t->partitions[0].replica_cnt : -1;
        for (int p = 1; p < t->partition_cnt; p++)
            if (t->partitions[p].replica_cnt != replicas)
                replicas = 0;
    }
    rd_kafka_metadata_destroy(md);
    return replicas;
}

/* A configuration file naming every topic ordergatectl topics creates after
 * base, with kafka.replication = replication. */
static void topics_conf(char *path, size_t size, const char *base, int replication)
{
    FILE *f;
    int fd;

    snprintf(path, size, "%s/og_ctl_topics_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    fd = mkstemp(path);
    assert_true(fd >= 0);
    f = fdopen(fd, "w");
    assert_non_null(f);
    fprintf(f,
            "kafka = { topics = \"%s.15m\"; dead_letter_topic = \"%s.dlq\"; replication = %d; };\n"
            "outbox = { topic = \"%s.events\"; refund_topic = \"%s.refunds\";\n"
            "           alert_topic = \"%s.alerts\"; };\n",
            base, base, replication, base, base, base);
    assert_int_equal(fclose(f), 0);
}

static void test_topics_replication(void **state)
{
    char base[96], conf[256], topic[160], rflag[16];
    const char *suffix[] = {"15m", "dlq", "events", "refunds", "alerts"};
    char errstr[256];
    rd_kafka_conf_t *kc = rd_kafka_conf_new();
    rd_kafka_t *rk;
    struct ctl_result r;
    int brokers;

    (void)state;
    conf_set(kc, "bootstrap.servers", testutil_brokers());
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, kc, errstr, sizeof(errstr));
    assert_non_null(rk);
    brokers = cluster_brokers(rk);
    assert_true(brokers >= 1);
    testutil_unique(base, sizeof(base), "ctl.topics");
    snprintf(topic, sizeof(topic), "%s.15m", base);

    /* 1. One replica more than the cluster has brokers: refused before any
     * topic is made, by the configuration and by the flag alike. */
    topics_conf(conf, sizeof(conf), base, brokers + 1);
    ctl_run(&r, "topics", "--config", conf, "--brokers", testutil_brokers(), NULL);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "the cluster has"));
    ctl_result_free(&r);
    unlink(conf);
    topics_conf(conf, sizeof(conf), base, 1);
    snprintf(rflag, sizeof(rflag), "%d", brokers + 1);
    ctl_run(&r, "topics", "--config", conf, "--brokers", testutil_brokers(), "--replication", rflag,
            NULL);
    assert_int_equal(r.status, 2);
    ctl_result_free(&r);
    assert_int_equal(topic_replicas(rk, topic), -1);
    unlink(conf);

    /* 2. As many replicas as brokers: every topic is made with that many, on
     * every partition. */
    topics_conf(conf, sizeof(conf), base, brokers);
    ctl_run(&r, "topics", "--config", conf, "--brokers", testutil_brokers(), "--json", NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(r.json);
    assert_int_equal(ctl_json_i(r.json, "replication"), brokers);
    assert_int_equal(ctl_json_i(r.json, "brokers"), brokers);
    ctl_result_free(&r);
    unlink(conf);
    for (size_t i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
        snprintf(topic, sizeof(topic), "%s.%s", base, suffix[i]);
        for (int k = 0; k < 50 && topic_replicas(rk, topic) != brokers; k++)
            testutil_sleep_ms(100);
        assert_int_equal(topic_replicas(rk, topic), brokers);
    }
    rd_kafka_destroy(rk);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_schedule_delivers_contract_message),
        cmocka_unit_test(test_topics_replication),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
