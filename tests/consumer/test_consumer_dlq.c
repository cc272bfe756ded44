/* Bad input never crashes or stalls the consumer: every undecodable or
 * invalid message goes to the dead-letter topic with the reason and its
 * source in headers, its offset advances, and the valid messages around it
 * are processed. Payment results on the payments topic are applied with the
 * payment claim, idempotent by transaction number. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ct.h"
#include "support/testutil.h"

struct garbage {
    const char *key;
    const char *value; /* NULL: see the test */
    const char *reason;
};

static const char binary[] = {'{', 0, '\x01', '\xff', '"', 'v', '"', 0, '}'};
static const struct garbage bad[] = {
    {"G-9", "not json at all", "bad_json"},
    {"G-9", "{\"v\":2,\"order_no\":\"G-9\",\"due_at\":\"2026-11-30T16:00:00Z\"}",
     "unknown_version"},
    {"X", "{\"v\":1,\"order_no\":\"G-9\",\"due_at\":\"2026-11-30T16:00:00Z\"}", "key_mismatch"},
    {NULL, NULL, "bad_json"},   /* binary with NUL bytes */
    {"G-9", NULL, "too_large"}, /* 20000 bytes */
    {"G-9", NULL, "empty"},     /* a tombstone: no value */
    {"G-9", "{\"v\":1,\"order_no\":\"G-9\",\"due_at\":\"soon\"}", "bad_due_at"},
};
#define NBAD ((int)(sizeof(bad) / sizeof(bad[0])))

struct seen {
    const char *topic, *payments;
    int from_topic, from_payments;
};

/* Checks one dead letter: reason and source headers, key and value. */
static void check_dead_letter(void *arg, const rd_kafka_message_t *m)
{
    struct seen *s = arg;
    char src[160], off[32], part[16], reason[600], buf[64];
    int k;

    assert_non_null(ct_header(m, "ordergate-reason", reason, sizeof(reason)));
    assert_non_null(ct_header(m, "ordergate-source-topic", src, sizeof(src)));
    assert_non_null(ct_header(m, "ordergate-source-partition", part, sizeof(part)));
    assert_non_null(ct_header(m, "ordergate-source-offset", off, sizeof(off)));
    assert_string_equal(part, "0");
    if (strcmp(src, s->payments) == 0) {
        s->from_payments++;
        assert_string_equal(off, "2");
        assert_true(strncmp(reason, "bad_amount:", 11) == 0);
        return;
    }
    assert_string_equal(src, s->topic);
    k = atoi(off) - 1; /* offset 0 is G-1 */
    assert_true(k >= 0 && k < NBAD);
    s->from_topic++;
    if (strncmp(reason, bad[k].reason, strlen(bad[k].reason)) != 0)
        fail_msg("offset %s: reason '%s', expected %s", off, reason, bad[k].reason);
    if (k == 3) {
        assert_int_equal(m->len, sizeof(binary));
        assert_memory_equal(m->payload, binary, sizeof(binary));
        assert_null(m->key);
    } else if (k == 4) {
        /* Cut to 16 KiB in the dead letter; the original size is kept. */
        assert_int_equal(m->len, 16384);
        assert_string_equal(ct_header(m, "ordergate-original-size", buf, sizeof(buf)), "20000");
    } else if (k == 5) {
        assert_int_equal(m->len, 0);
    } else {
        assert_int_equal(m->len, strlen(bad[k].value));
        assert_memory_equal(m->payload, bad[k].value, m->len);
        assert_int_equal(m->key_len, strlen(bad[k].key));
    }
}

static void test_dead_letters_and_payments(void **state)
{
    const int nbad = NBAD;
    static struct ct t; /* static: ct_cleanup may tear it down after a failure */
    struct ct_proc p;
    char topics[300], body[65536];
    char *big = malloc(20000);
    int64_t due;
    int n;

    (void)state;
    assert_non_null(big);
    memset(big, 'x', 20000);
    big[0] = '{';
    ct_setup(&t, "cdlq", 1, CT_PAYMENTS);
    due = ct_place(&t, "G-1", -1000);
    ct_place(&t, "G-2", -1000);
    ct_place(&t, "Q-1", 600000);

    /* Partition 0 of the delay topic: valid, 7 bad ones, valid. */
    ct_produce_cancel(&t, t.topic, 0, "G-1", due);
    for (int i = 0; i < nbad; i++) {
        const char *v = bad[i].value;
        size_t len = v ? strlen(v) : 0;
        if (i == 3) {
            v = binary;
            len = sizeof(binary);
        } else if (i == 4) {
            v = big;
            len = 20000;
        }
        ct_produce_raw(&t, t.topic, 0, bad[i].key, bad[i].key ? strlen(bad[i].key) : 0, v, len);
    }
    ct_produce_cancel(&t, t.topic, 0, "G-2", due);
    /* Payments: one, the same again (a callback retried), one invalid. */
    const char *pay = "{\"v\":1,\"order_no\":\"Q-1\",\"txn_no\":\"TXN-Q-1\",\"amount_cents\":1000,"
                      "\"channel\":\"card\"}";
    ct_produce_raw(&t, t.payments, 0, "Q-1", 3, pay, strlen(pay));
    ct_produce_raw(&t, t.payments, 0, "Q-1", 3, pay, strlen(pay));
    const char *bad_pay = "{\"v\":1,\"order_no\":\"Q-1\",\"txn_no\":\"TXN-Q-2\",\"amount_cents\":0,"
                          "\"channel\":\"card\"}";
    ct_produce_raw(&t, t.payments, 0, "Q-1", 3, bad_pay, strlen(bad_pay));

    snprintf(topics, sizeof(topics), "%s", t.topic);
    ct_spawn(&t, &p, "c1", topics, NULL);

    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM ordergate.orders WHERE order_no IN "
                                    "('G-1', 'G-2') AND status = 'cancelled'",
                                    2, 30000),
                     2);
    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM ordergate.orders WHERE order_no = 'Q-1' "
                                    "AND status = 'paid'",
                                    1, 30000),
                     1);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.payments"), 1);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.status_log WHERE order_no = "
                                   "'Q-1'"),
                     1);

    /* Every bad message is in the dead-letter topic, with its reason and source. */
    ct_log_wait(&p, "event=dead_lettered topic=", 20000);
    for (int tries = 0; tries < 100 && ct_end_offset(t.dlq, 0) < nbad + 1; tries++)
        testutil_sleep_ms(100);
    struct seen seen = {t.topic, t.payments, 0, 0};
    n = ct_consume_all(t.dlq, 0, check_dead_letter, &seen, 30000);
    assert_int_equal(n, nbad + 1);
    assert_int_equal(seen.from_topic, nbad);
    assert_int_equal(seen.from_payments, 1);

    int port = ct_metrics_port(&p);
    assert_int_equal(ct_http_get(port, "/metrics", body, sizeof(body)), 200);
    assert_true(ct_metric(body, "ordergate_consumer_dead_lettered_total") == nbad + 1);
    assert_true(ct_metric(body, "ordergate_consumer_payments_total{outcome=\"paid\"}") == 1);
    assert_true(ct_metric(body, "ordergate_consumer_payments_total{outcome=\"duplicate\"}") == 1);

    /* The consumer is alive and well; offsets cover every message. */
    assert_int_equal(ct_stop(&p, SIGTERM, 30000), 0);
    assert_int_equal(ct_committed(t.group, t.topic, 0), ct_end_offset(t.topic, 0));
    assert_int_equal(ct_committed(t.group, t.payments, 0), ct_end_offset(t.payments, 0));
    free(big);
    ct_teardown(&t);
}

/* A payment and a cancel of the same order consumed into one batch: the
 * payment is applied first. The order is due (its payment came in after
 * expire_at but before any cancel), so the contract says the payment wins;
 * a flush that claimed the cancels first turned it into a late payment. */
static void test_payment_before_cancel_in_one_batch(void **state)
{
    static struct ct t; /* static: ct_cleanup may tear it down after a failure */
    struct ct_proc p;
    char topics[300];
    int64_t due;
    FILE *f;
    char conf[4096];
    size_t len;
    char *at;

    (void)state;
    ct_setup(&t, "cpayfirst", 1, CT_PAYMENTS);
    /* A long linger: both messages are in Kafka before the consumer starts,
     * so they land in the same batch. */
    f = fopen(t.config, "r");
    assert_non_null(f);
    len = fread(conf, 1, sizeof(conf) - 1, f);
    fclose(f);
    conf[len] = '\0';
    at = strstr(conf, "linger_ms = 20;");
    assert_non_null(at);
    memcpy(at, "linger_ms=2000;", 15);
    f = fopen(t.config, "w");
    assert_non_null(f);
    fputs(conf, f);
    fclose(f);

    due = ct_place(&t, "R-1", -500);
    ct_produce_cancel(&t, t.topic, 0, "R-1", due);
    const char *pay = "{\"v\":1,\"order_no\":\"R-1\",\"txn_no\":\"TXN-R-1\",\"amount_cents\":1000,"
                      "\"channel\":\"card\"}";
    ct_produce_raw(&t, t.payments, 0, "R-1", 3, pay, strlen(pay));

    snprintf(topics, sizeof(topics), "%s", t.topic);
    ct_spawn(&t, &p, "c1", topics, NULL);
    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM ordergate.orders WHERE order_no = 'R-1' "
                                    "AND status <> 'pending_payment'",
                                    1, 30000),
                     1);
    ct_log_wait(&p, "event=payment_applied order_no=R-1", 10000);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.orders WHERE order_no = 'R-1' "
                                   "AND status = 'paid'"),
                     1);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.exceptions"), 0);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.payments WHERE txn_no = "
                                   "'TXN-R-1' AND outcome = 'paid'"),
                     1);
    assert_true(ct_log_has(&p, "outcome=paid"));
    assert_int_equal(ct_stop(&p, SIGTERM, 30000), 0);
    assert_int_equal(ct_committed(t.group, t.topic, 0), ct_end_offset(t.topic, 0));
    assert_int_equal(ct_committed(t.group, t.payments, 0), ct_end_offset(t.payments, 0));
    ct_teardown(&t);
}

/* A payment result the consumer must dead-letter (one does not decode, one
 * carries amount 0, one the gate refuses: a constraint planted for its
 * transaction) leaves an exception for review before its dead letter is
 * produced and before its offset moves. While the record cannot be
 * written (the function is renamed away) nothing reaches the dead-letter
 * topic and no offset moves; once it can, each message ends as one
 * refused_payment exception, and a redelivery (a second group reading the
 * topic from the start) records nothing twice. */
static void test_refused_payment_recorded_before_dead_letter(void **state)
{
    static struct ct t; /* static: ct_cleanup may tear it down after a failure */
    struct ct_proc p, again;
    char topics[300], sql[512], body[65536];
    int port;

    (void)state;
    ct_setup(&t, "crefused", 1, CT_PAYMENTS);
    ct_place(&t, "B-1", 600000);
    testdb_exec(t.conn, "ALTER FUNCTION ordergate.record_payment_refused(text, text, text, "
                        "bigint, text, text) RENAME TO record_payment_refused_away");
    testdb_exec(t.conn, "ALTER TABLE ordergate.payments ADD CONSTRAINT test_refuse_b3 CHECK "
                        "(txn_no <> 'TXN-B-3')");

    const char *zero = "{\"v\":1,\"order_no\":\"B-1\",\"txn_no\":\"TXN-B-1\",\"amount_cents\":0,"
                       "\"channel\":\"card\"}";
    const char *junk = "{\"v\":1,\"order_no\":\"B-1\",\x01 not json";
    ct_produce_raw(&t, t.payments, 0, "B-1", 3, zero, strlen(zero));
    ct_produce_raw(&t, t.payments, 0, "B-1", 3, junk, strlen(junk));
    const char *refused = "{\"v\":1,\"order_no\":\"B-1\",\"txn_no\":\"TXN-B-3\",\"amount_cents\":"
                          "1000,\"channel\":\"card\"}";
    ct_produce_raw(&t, t.payments, 0, "B-1", 3, refused, strlen(refused));

    snprintf(topics, sizeof(topics), "%s", t.topic);
    ct_spawn(&t, &p, "c1", topics, NULL);

    /* The record fails and is retried: no dead letter, no offset, no row. */
    ct_log_wait(&p, "step=record_payment_refused", 30000);
    ct_log_wait(&p, "event=batch_retry attempt=2 ", 30000);
    assert_int_equal(ct_end_offset(t.dlq, 0), 0);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.exceptions"), 0);
    assert_true(ct_committed(t.group, t.payments, 0) < 0);

    /* Back: each is recorded, then dead-lettered, then committed. */
    testdb_exec(t.conn, "ALTER FUNCTION ordergate.record_payment_refused_away(text, text, text, "
                        "bigint, text, text) RENAME TO record_payment_refused");
    assert_int_equal(ct_wait_scalar(&t, "SELECT count(*) FROM ordergate.exceptions", 3, 30000), 3);
    for (int tries = 0; tries < 100 && ct_end_offset(t.dlq, 0) < 3; tries++)
        testutil_sleep_ms(100);
    assert_int_equal(ct_end_offset(t.dlq, 0), 3);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.exceptions WHERE kind = "
                                   "'refused_payment' AND resolution = 'manual_review' AND "
                                   "state = 'open' AND order_no = 'B-1' AND txn_no IS NULL"),
                     3);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.exceptions WHERE refused_key "
                                   "= 'txn:TXN-B-1' AND amount_cents IS NULL AND note LIKE "
                                   "'%bad_amount%' AND note LIKE '%\"amount_cents\":0%'"),
                     1);
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM ordergate.exceptions WHERE refused_key LIKE 'msg:%s/0/1#%%' AND "
             "note LIKE '%%bad_json%%' AND note LIKE '%%\\\\x01 not json%%'",
             t.payments);
    assert_int_equal(ct_scalar(&t, sql), 1);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.exceptions WHERE refused_key "
                                   "= 'txn:TXN-B-3' AND amount_cents = 1000 AND note LIKE "
                                   "'payment result refused by the consumer (payment_rejected: %'"),
                     1);
    /* Nothing was applied as a payment; the order is untouched; reconciliation
     * counts each as money to review. */
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.payments"), 0);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.orders WHERE order_no = 'B-1' "
                                   "AND status = 'pending_payment'"),
                     1);
    assert_int_equal(ct_scalar(&t, "SELECT violations FROM ordergate.reconcile() WHERE "
                                   "invariant = 5"),
                     3);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.outbox WHERE event_type = "
                                   "'reconciliation_alert' AND payload::jsonb->>'kind' = "
                                   "'refused_payment'"),
                     3);
    port = ct_metrics_port(&p);
    assert_int_equal(ct_http_get(port, "/metrics", body, sizeof(body)), 200);
    assert_true(ct_metric(body, "ordergate_consumer_payments_refused_total") == 3);
    assert_true(ct_metric(body, "ordergate_consumer_dead_lettered_total") == 3);
    assert_int_equal(ct_stop(&p, SIGTERM, 30000), 0);
    assert_int_equal(ct_committed(t.group, t.payments, 0), ct_end_offset(t.payments, 0));

    /* Redelivered: the same three messages again, recorded once. */
    snprintf(t.group + strlen(t.group), sizeof(t.group) - strlen(t.group), "-again");
    ct_spawn(&t, &again, "c2", topics, NULL);
    for (int tries = 0; tries < 300 && ct_end_offset(t.dlq, 0) < 6; tries++)
        testutil_sleep_ms(100);
    assert_int_equal(ct_end_offset(t.dlq, 0), 6);
    assert_int_equal(ct_log_count(&again, "event=payment_refused_recorded"), 3);
    assert_int_equal(ct_log_count(&again, "new=0 "), 3);
    assert_int_equal(ct_stop(&again, SIGTERM, 30000), 0);
    assert_int_equal(ct_committed(t.group, t.payments, 0), ct_end_offset(t.payments, 0));
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.exceptions"), 3);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.payments"), 0);
    ct_teardown(&t);
}

/* Offsets repeat once the payments topic is re-created (or a cluster migrated): an undecodable
 * payment result at a position recorded before, with other content, gets its own exception,
 * while the same message read again at its position (another group reading it) is recorded
 * once. Before, the position alone was the key: the second message was answered duplicate and
 * left no trace of the money. */
static void test_refused_key_has_content(void **state)
{
    static struct ct t;
    struct ct_proc p;
    char group[128], sql[400];
    static const char first[] = "\x01 not json: first";
    static const char second[] = "\x01 not json: second";

    (void)state;
    ct_setup(&t, "cdlqkey", 1, CT_PAYMENTS);
    snprintf(group, sizeof(group), "%s", t.group);
    ct_produce_raw(&t, t.payments, 0, NULL, 0, first, strlen(first));
    ct_spawn(&t, &p, "c1", t.topic, NULL);
    assert_int_equal(ct_wait_scalar(&t, "SELECT count(*) FROM ordergate.exceptions", 1, 30000), 1);
    assert_int_equal(ct_wait_committed(&t, t.payments, 0, 1, 15000), 1);
    assert_int_equal(ct_stop(&p, SIGTERM, 30000), 0);

    /* The same message at its position again (another group): nothing new. */
    snprintf(t.group, sizeof(t.group), "%s-again", group);
    ct_spawn(&t, &p, "c2", t.topic, NULL);
    ct_log_wait(&p, "event=payment_refused_recorded", 30000);
    assert_true(ct_log_has(&p, " new=0 "));
    assert_int_equal(ct_wait_committed(&t, t.payments, 0, 1, 15000), 1);
    assert_int_equal(ct_stop(&p, SIGTERM, 30000), 0);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.exceptions"), 1);

    /* The topic re-created: another message at the same position is recorded too. */
    ct_delete_topic(t.payments);
    ct_create_topic(t.payments, 2);
    ct_produce_raw(&t, t.payments, 0, NULL, 0, second, strlen(second));
    snprintf(t.group, sizeof(t.group), "%s-new", group);
    ct_spawn(&t, &p, "c3", t.topic, NULL);
    assert_int_equal(ct_wait_scalar(&t, "SELECT count(*) FROM ordergate.exceptions", 2, 30000), 2);
    snprintf(sql, sizeof(sql),
             "SELECT count(DISTINCT refused_key) FROM ordergate.exceptions WHERE refused_key "
             "LIKE 'msg:%s/0/0#%%' AND kind = 'refused_payment'",
             t.payments);
    assert_int_equal(ct_scalar(&t, sql), 2);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.exceptions WHERE note LIKE "
                                   "'%not json: second%'"),
                     1);
    assert_int_equal(ct_wait_committed(&t, t.payments, 0, 1, 15000), 1);
    assert_int_equal(ct_stop(&p, SIGTERM, 30000), 0);
    ct_teardown(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_dead_letters_and_payments, ct_cleanup),
        cmocka_unit_test_teardown(test_payment_before_cancel_in_one_batch, ct_cleanup),
        cmocka_unit_test_teardown(test_refused_payment_recorded_before_dead_letter, ct_cleanup),
        cmocka_unit_test_teardown(test_refused_key_has_content, ct_cleanup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
