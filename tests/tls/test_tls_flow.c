/* The product over SASL_SSL with SCRAM-SHA-512, against the broker's SASL_SSL listener
 * (deploy/local/services.sh with ORDERGATE_KAFKA_TLS=1), the password from
 * kafka.sasl_password_file and the CA from kafka.properties:
 *   - ordergatectl topics creates the delay topic the configuration names (and leaves the
 *     existing ones);
 *   - ordergatectl schedule produces the cancel messages;
 *   - the consumer consumes them and cancels the due orders, re-schedules an early one through
 *     its own producer, and on SIGTERM has committed every offset;
 *   - the outbox relay inside it publishes one order_cancelled event per cancel.
 * What the test checks itself it reads on the PLAINTEXT listener of the same broker. */
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

#define ORDERS 6
#define PARTS  4 /* ordergatectl topics' default */

struct events {
    int n;
    bool seen[ORDERS];
    int other; /* not one of ours, or not order_cancelled */
};

static void event_seen(void *arg, const rd_kafka_message_t *m)
{
    struct events *ev = arg;
    char type[64];
    int i;

    ev->n++;
    if (m->key_len == 5 && memcmp(m->key, "TLS-", 4) == 0 &&
        ct_header(m, "ordergate-event-type", type, sizeof(type)) != NULL &&
        strcmp(type, "order_cancelled") == 0 && (i = ((const char *)m->key)[4] - '1') >= 0 &&
        i < ORDERS)
        ev->seen[i] = true;
    else
        ev->other++;
}

static void test_flow(void **state)
{
    static struct ct t; /* static: ct_cleanup may tear it down after a failure */
    struct ct_proc p;
    struct tls_run r;
    char topic[200], events[200], order[16];
    struct events ev = {0};
    int64_t hold_expire;

    (void)state;
    ct_setup(&t, "tlsflow", 1, 0);
    snprintf(topic, sizeof(topic), "og.%s.tls.15m", t.base);
    snprintf(events, sizeof(events), "og.%s.events", t.base);
    tls_config(&t, topic, NULL, NULL);

    /* ordergatectl topics over SASL_SSL: the new delay topic is created, the others exist. */
    assert_false(tls_topic_exists(topic));
    tls_run(&r, "tools/ordergatectl", (const char *const[]){"--config", t.config, "topics", NULL},
            60000);
    assert_int_equal(r.status, 0);
    {
        char line[300];
        snprintf(line, sizeof(line), "%-40s created", topic);
        assert_non_null(strstr(r.out, line));
        snprintf(line, sizeof(line), "%-40s exists", events);
        assert_non_null(strstr(r.out, line));
    }
    assert_true(tls_topic_exists(topic));
    for (int part = 0; part < PARTS; part++)
        assert_int_equal(ct_end_offset(topic, part), 0);

    /* The consumer (and its relay) over SASL_SSL. */
    tls_spawn(&t, &p, "c1", topic);
    ct_log_wait(&p, "event=partitions_assigned", 30000);

    /* TLS-1..6, due already; ordergatectl schedule sends their messages over SASL_SSL, due at
     * each order's expire_at (read from the database). */
    for (int i = 0; i < ORDERS; i++) {
        snprintf(order, sizeof(order), "TLS-%d", i + 1);
        ct_place(&t, order, -1000);
        tls_run(&r, "tools/ordergatectl",
                (const char *const[]){"--config", t.config, "schedule", order, "--db",
                                      t.db.conninfo, "--topic", topic, NULL},
                60000);
        assert_int_equal(r.status, 0);
        assert_non_null(strstr(r.out, "due_source"));
    }
    {
        int64_t total = 0;
        for (int part = 0; part < PARTS; part++)
            total += ct_end_offset(topic, part);
        assert_int_equal(total, ORDERS);
    }
    /* HOLD-1: its message says due now, the database holds it 3 s more: the consumer
     * re-schedules it through its own producer, then cancels it on time. */
    hold_expire = ct_place(&t, "HOLD-1", 3000);
    tls_run(&r, "tools/ordergatectl",
            (const char *const[]){"--config", t.config, "schedule", "HOLD-1", "--due-at",
                                  "2020-01-01T00:00:00Z", "--topic", topic, NULL},
            60000);
    assert_int_equal(r.status, 0);

    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM ordergate.orders WHERE order_no LIKE "
                                    "'TLS-%' AND status = 'cancelled'",
                                    ORDERS, 30000),
                     ORDERS);
    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM ordergate.orders WHERE order_no = "
                                    "'HOLD-1' AND status = 'cancelled'",
                                    1, 30000),
                     1);
    assert_true(ct_now_ms() >= hold_expire);
    ct_log_wait(&p, "event=rescheduled order_no=HOLD-1", 1000);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.status_log WHERE source = "
                                   "'timeout_consumer'"),
                     ORDERS + 1);

    /* The relay published every event over SASL_SSL: the rows say so, the topic has them. */
    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM ordergate.outbox WHERE event_type = "
                                    "'order_cancelled' AND published_at IS NOT NULL",
                                    ORDERS + 1, 30000),
                     ORDERS + 1);
    ct_consume_all(events, 0, event_seen, &ev, 30000);
    for (int i = 0; i < ORDERS; i++)
        if (!ev.seen[i])
            fail_msg("no order_cancelled event for TLS-%d on %s", i + 1, events);
    assert_int_equal(ev.n, ORDERS + 1); /* HOLD-1's is the other one */
    assert_int_equal(ev.other, 1);

    /* SIGTERM: exit 0, the offsets committed to the end of every partition (the re-scheduled
     * message included). */
    assert_int_equal(ct_stop(&p, SIGTERM, 30000), 0);
    for (int part = 0; part < PARTS; part++) {
        int64_t end = ct_end_offset(topic, part);
        int64_t committed = ct_committed(t.group, topic, part);
        if (end > 0 && committed != end)
            fail_msg("%s/%d: committed %lld, end %lld", topic, part, (long long)committed,
                     (long long)end);
    }
    /* Nothing went wrong on the way: no refusal, no unreachable broker, no error line. */
    assert_false(ct_log_has(&p, "event=kafka_unreachable"));
    assert_int_equal(ct_log_count(&p, "level=error"), 0);
    ct_teardown(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_flow, ct_cleanup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
