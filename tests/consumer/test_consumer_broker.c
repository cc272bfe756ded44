/* The broker goes down and comes back. The shared test broker cannot be
 * stopped under the other tests, so this one runs the consumer against
 * librdkafka's mock cluster (a Kafka protocol implementation inside this test
 * process, reachable over TCP) and takes its broker down for a few seconds:
 * the consumer logs the outage, keeps running, reconnects by itself, and
 * cancels what fell due meanwhile; nothing is lost or done twice. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <librdkafka/rdkafka.h>
/* rdkafka_mock.h needs rdkafka.h first. */
#include <librdkafka/rdkafka_mock.h>

#include "ct.h"
#include "support/testutil.h"

static void conf_set(rd_kafka_conf_t *conf, const char *k, const char *v)
{
    char errstr[256];

    if (rd_kafka_conf_set(conf, k, v, errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK)
        fail_msg("%s=%s: %s", k, v, errstr);
}

static void test_broker_down_and_back(void **state)
{
    char errstr[256], base[96], order[32];
    rd_kafka_conf_t *conf;
    rd_kafka_t *host;
    rd_kafka_mock_cluster_t *mc;
    static struct ct t; /* static: ct_cleanup may tear it down after a failure */
    struct ct_proc p;
    FILE *f;
    int64_t due;

    (void)state;
    memset(&t, 0, sizeof(t));
    /* The mock cluster lives in a handle of its own. */
    conf = rd_kafka_conf_new();
    conf_set(conf, "log_level", "3");
    host = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    assert_non_null(host);
    mc = rd_kafka_mock_cluster_new(host, 1);
    assert_non_null(mc);
    ct_brokers_override = rd_kafka_mock_cluster_bootstraps(mc);

    snprintf(t.tag, sizeof(t.tag), "cbroker");
    testdb_create(&t.db, "cbroker");
    t.conn = testdb_connect(&t.db);
    testdb_exec(t.conn, "SELECT ordergate.add_stock('sku-1', 1000)");
    testutil_unique(base, sizeof(base), "cbroker");
    snprintf(t.topic, sizeof(t.topic), "og.%s.cancel", base);
    snprintf(t.dlq, sizeof(t.dlq), "og.%s.dlq", base);
    snprintf(t.group, sizeof(t.group), "og-%s", base);
    assert_int_equal(rd_kafka_mock_topic_create(mc, t.topic, 2, 1), RD_KAFKA_RESP_ERR_NO_ERROR);
    assert_int_equal(rd_kafka_mock_topic_create(mc, t.dlq, 1, 1), RD_KAFKA_RESP_ERR_NO_ERROR);
    snprintf(t.config, sizeof(t.config), "%s/tests/consumer/cbroker.%d.conf", OG_BINARY_DIR,
             (int)getpid());
    f = fopen(t.config, "w");
    assert_non_null(f);
    fprintf(f,
            "database = { retry_max = 3; retry_base_ms = 50; retry_cap_ms = 400; };\n"
            "outbox = { enabled = false; };\n"
            "kafka = { dead_letter_topic = \"%s\";\n"
            "  properties = [\"session.timeout.ms=6000\", \"heartbeat.interval.ms=500\",\n"
            "                \"reconnect.backoff.max.ms=1000\"]; };\n",
            t.dlq);
    fclose(f);
    conf = rd_kafka_conf_new();
    conf_set(conf, "bootstrap.servers", ct_brokers_override);
    conf_set(conf, "enable.idempotence", "true");
    t.producer = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    assert_non_null(t.producer);

    /* Before: ten due orders. */
    due = ct_now_ms() - 1000;
    for (int i = 1; i <= 10; i++) {
        snprintf(order, sizeof(order), "B-%d", i);
        ct_place(&t, order, -1000);
        ct_send_cancel(&t, t.topic, -1, order, due);
    }
    ct_flush(&t);
    ct_spawn(&t, &p, "c1", t.topic, NULL);
    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM ordergate.orders WHERE status = "
                                    "'cancelled'",
                                    10, 30000),
                     10);

    /* Ten more orders, due in 5 s: beyond the consumer's window lead
     * (CONSUMER_WINDOW_LEAD_MS, 3 s), so their messages wait in paused partitions in Kafka,
     * not in the consumer. The broker goes away before the partitions resume (2 s) and they
     * fall due while it is gone. */
    for (int i = 11; i <= 20; i++) {
        snprintf(order, sizeof(order), "B-%d", i);
        ct_place(&t, order, 5000);
        ct_send_cancel(&t, t.topic, -1, order, ct_now_ms() + 5000);
    }
    ct_flush(&t);
    ct_log_wait(&p, "event=stats", 1000);
    testutil_sleep_ms(300);
    rd_kafka_mock_broker_set_down(mc, 1);
    testutil_sleep_ms(4000);
    /* The consumer noticed, says it is not ready, and is still running. */
    assert_true(ct_log_has(&p, "event=kafka_error") || ct_log_has(&p, "event=kafka_log"));
    int port = ct_metrics_port(&p);
    char body[4096];
    assert_int_equal(ct_http_get(port, "/readyz", body, sizeof(body)), 503);
    assert_int_equal(ct_http_get(port, "/healthz", body, sizeof(body)), 200);
    assert_int_equal(ct_wait_exit(&p, 0), -1);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.orders WHERE status = "
                                   "'cancelled'"),
                     10);

    /* Back: the consumer reconnects and catches up. */
    rd_kafka_mock_broker_set_up(mc, 1);
    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM ordergate.orders WHERE status = "
                                    "'cancelled'",
                                    20, 40000),
                     20);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.status_log"), 20);
    int ready = 0;
    for (int i = 0; i < 50 && ready != 200; i++) {
        ready = ct_http_get(port, "/readyz", body, sizeof(body));
        testutil_sleep_ms(100);
    }
    assert_int_equal(ready, 200);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.orders WHERE closed_at < "
                                   "expire_at"),
                     0);
    assert_int_equal(ct_stop(&p, SIGTERM, 30000), 0);
    for (int part = 0; part < 2; part++)
        assert_int_equal(ct_committed(t.group, t.topic, part), ct_end_offset(t.topic, part));

    rd_kafka_flush(t.producer, 5000);
    rd_kafka_destroy(t.producer);
    t.producer = NULL;
    ct_brokers_override = NULL;
    rd_kafka_mock_cluster_destroy(mc);
    rd_kafka_destroy(host);
    PQfinish(t.conn);
    t.conn = NULL;
    unlink(t.config);
    testdb_drop(&t.db);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_broker_down_and_back, ct_cleanup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
