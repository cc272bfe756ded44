/* A broker restart under a consumer connected over SASL_SSL: the broker of
 * deploy/local/services.sh is stopped and started again (services.sh restart-kafka: same ports,
 * data, users and certificates) while cancel messages wait in the consumer's partitions and
 * their orders fall due. The consumer reconnects with TLS and SCRAM by itself and loses nothing:
 * every order is cancelled exactly once, the outbox relay publishes every event, the group
 * commits every offset, and the log says what happened to the connection in one line for the
 * outage and one for the recovery. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/testutil.h"
#include "tls.h"

#define PARTS 2
#define BATCH 10 /* orders per phase: before, across and after the restart */

struct events {
    int n;
    bool seen[3 * BATCH];
};

static void event_seen(void *arg, const rd_kafka_message_t *m)
{
    struct events *ev = arg;
    char key[32];
    int i;

    ev->n++;
    snprintf(key, sizeof(key), "%.*s", (int)m->key_len, (const char *)m->key);
    if (sscanf(key, "RS-%d", &i) == 1 && i >= 1 && i <= 3 * BATCH)
        ev->seen[i - 1] = true;
}

static void restart_broker(void)
{
    const char *state = getenv("ORDERGATE_STATE_DIR");
    char script[512];

    if (state == NULL || *state == '\0')
        fail_msg("ORDERGATE_STATE_DIR is not set: the broker to restart is the one "
                 "deploy/local/services.sh started there");
    snprintf(script, sizeof(script), "%s/deploy/local/services.sh", OG_SOURCE_DIR);
    if (testutil_child_wait(
            testutil_child_start((const char *const[]){script, "restart-kafka", NULL},
                                 &(struct child_opts){0}),
            120000, "services.sh restart-kafka") != 0)
        fail_msg("services.sh restart-kafka failed");
}

static void send_batch(struct ct *t, int first, long expire_in_ms)
{
    char order[16];

    for (int i = first; i < first + BATCH; i++) {
        snprintf(order, sizeof(order), "RS-%d", i);
        ct_send_cancel(t, t->topic, -1, order, ct_place(t, order, expire_in_ms));
    }
    ct_flush(t);
}

static void test_restart(void **state)
{
    static struct ct t; /* static: ct_cleanup may tear it down after a failure */
    struct ct_proc p;
    struct events ev = {0};
    struct tls_env env;
    char events[200], needle[200];

    (void)state;
    ct_setup(&t, "tlsrestart", PARTS, 0);
    snprintf(events, sizeof(events), "og.%s.events", t.base);
    tls_config(&t, t.topic, NULL, NULL);
    tls_spawn(&t, &p, "c1", t.topic);
    ct_log_wait(&p, "event=partitions_assigned", 30000);

    /* Before: due at once, cancelled. */
    send_batch(&t, 1, -1000);
    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM ordergate.orders WHERE status = "
                                    "'cancelled'",
                                    BATCH, 30000),
                     BATCH);
    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM ordergate.outbox WHERE published_at IS "
                                    "NOT NULL",
                                    BATCH, 30000),
                     BATCH);

    /* Across: due in 3 s, waiting in the consumer when the broker goes away. */
    send_batch(&t, BATCH + 1, 3000);
    restart_broker();
    /* After: sent once the broker is back. */
    send_batch(&t, 2 * BATCH + 1, -1000);

    /* Every order cancelled once, every event published. */
    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM ordergate.orders WHERE status = "
                                    "'cancelled'",
                                    3 * BATCH, 60000),
                     3 * BATCH);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.status_log"), 3 * BATCH);
    assert_int_equal(ct_scalar(&t, "SELECT count(DISTINCT order_no) FROM ordergate.status_log "
                                   "WHERE source = 'timeout_consumer'"),
                     3 * BATCH);
    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM ordergate.outbox WHERE published_at IS "
                                    "NOT NULL",
                                    3 * BATCH, 60000),
                     3 * BATCH);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.outbox"), 3 * BATCH);
    ct_consume_all(events, 0, event_seen, &ev, 30000);
    for (int i = 0; i < 3 * BATCH; i++)
        if (!ev.seen[i])
            fail_msg("no event for RS-%d on %s", i + 1, events);
    /* At least once: an event whose acknowledgement the restart swallowed comes twice. */
    assert_true(ev.n >= 3 * BATCH);

    /* What happened to the connection, said once: one warn line when it was lost, naming
     * the broker, and one when a client saw the broker UP again. librdkafka's own failure
     * lines and the other clients' retries are at debug. */
    tls_env(&env);
    snprintf(needle, sizeof(needle), "broker=%s reason=", env.brokers);
    assert_int_equal(ct_log_count(&p, "event=kafka_error "), 1);
    assert_int_equal(ct_log_count(&p, needle), 1);
    assert_true(ct_log_has(&p, "note=\"connection lost;"));
    snprintf(needle, sizeof(needle), "event=kafka_broker_up broker=%s ", env.brokers);
    ct_log_wait(&p, needle, 10000);
    assert_int_equal(ct_log_count(&p, "event=kafka_broker_up "), 1);
    assert_int_equal(ct_log_count(&p, "fac=FAIL"), 0);
    assert_int_equal(ct_log_count(&p, "level=error"), 0);

    /* SIGTERM: exit 0, every offset committed. */
    assert_int_equal(ct_stop(&p, SIGTERM, 30000), 0);
    for (int part = 0; part < PARTS; part++) {
        int64_t end = ct_end_offset(t.topic, part);
        int64_t committed = ct_committed(t.group, t.topic, part);
        if (end > 0 && committed != end)
            fail_msg("%s/%d: committed %lld, end %lld", t.topic, part, (long long)committed,
                     (long long)end);
    }
    ct_teardown(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_restart, ct_cleanup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
