/* Outbox relay against the real database and broker: events written by the
 * gate reach their topics with key, payload and headers intact, are marked
 * published once acknowledged, are shared by concurrent relays exactly once
 * (SKIP LOCKED), and stay unpublished when the broker cannot take them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/cfg.h"
#include "common/clock.h"
#include "common/gate.h"
#include "common/outbox.h"
#include "common/signals.h"
#include "support/testdb.h"
#include "support/testutil.h"

#define MAX_MSGS 1024

struct fixture {
    struct testdb t;
    PGconn *raw;
    struct db *db;
    struct og_config cfg;
};

struct consumed {
    char topic[160];
    char key[GATE_ORDER_NO_MAX + 1];
    char *value;
    char id[24];
    char type[48];
};

/* ---- helpers ------------------------------------------------------------ */

static int fixture_setup(struct fixture *f, const char *tag)
{
    struct og_error err = {0};
    char name[128];

    memset(f, 0, sizeof(*f));
    testdb_create(&f->t, tag);
    f->raw = testdb_connect(&f->t);
    f->db = testdb_open(&f->t, "test_outbox");
    assert_int_equal(cfg_init(&f->cfg, &err), OG_OK);
    /* Unique topics per test: nothing from another run can be consumed. */
    testutil_unique(name, sizeof(name), "og.test.events");
    assert_int_equal(cfg_set(&f->cfg, "outbox.topic", name, &err), OG_OK);
    testutil_topic_create(testutil_brokers(), name, 1);
    testutil_unique(name, sizeof(name), "og.test.refunds");
    assert_int_equal(cfg_set(&f->cfg, "outbox.refund_topic", name, &err), OG_OK);
    testutil_topic_create(testutil_brokers(), name, 1);
    testutil_unique(name, sizeof(name), "og.test.alerts");
    assert_int_equal(cfg_set(&f->cfg, "outbox.alert_topic", name, &err), OG_OK);
    testutil_topic_create(testutil_brokers(), name, 1);
    testdb_exec(f->raw,
                "INSERT INTO ordergate.inventory (sku, available) VALUES ('sku-a', 1000000)");
    return 0;
}

static void fixture_teardown(struct fixture *f)
{
    db_free(f->db);
    PQfinish(f->raw);
    testdb_drop(&f->t);
    cfg_free(&f->cfg);
}

typedef void (*dr_cb_fn)(rd_kafka_t *, const rd_kafka_message_t *, void *);

static rd_kafka_t *producer_new_cb(const char *brokers, int message_timeout_ms, dr_cb_fn cb)
{
    char errstr[512], timeout[16];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_t *rk;

    snprintf(timeout, sizeof(timeout), "%d", message_timeout_ms);
    if (rd_kafka_conf_set(conf, "bootstrap.servers", brokers, errstr, sizeof(errstr)) ||
        rd_kafka_conf_set(conf, "enable.idempotence", "true", errstr, sizeof(errstr)) ||
        rd_kafka_conf_set(conf, "message.timeout.ms", timeout, errstr, sizeof(errstr)) ||
        rd_kafka_conf_set(conf, "log_level", "3", errstr, sizeof(errstr)))
        fail_msg("producer conf: %s", errstr);
    if (cb != NULL)
        rd_kafka_conf_set_dr_msg_cb(conf, cb);
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    if (rk == NULL)
        fail_msg("producer: %s", errstr);
    return rk;
}

static rd_kafka_t *producer_new(const char *brokers, int message_timeout_ms, bool with_dr)
{
    return producer_new_cb(brokers, message_timeout_ms, with_dr ? outbox_dr_cb : NULL);
}

static void producer_free(rd_kafka_t *rk)
{
    rd_kafka_flush(rk, 10000);
    rd_kafka_destroy(rk);
}

static void place(struct fixture *f, const char *order_no, int64_t amount)
{
    struct og_error err = {0};
    enum gate_outcome outcome;

    char expire[40];

    /* A day ahead: inside the deadline horizon (max_deadline_seconds). */
    clock_format_iso(clock_wall_ms() + 86400000, expire, sizeof(expire));
    if (gate_place(f->db, order_no, amount, "[{\"sku\":\"sku-a\",\"qty\":1}]", NULL, expire,
                   &outcome, &err) != OG_OK)
        fail_msg("place %s: %s", order_no, err.msg);
    assert_int_equal(outcome, GATE_PLACED);
}

static void close_order(struct fixture *f, const char *order_no)
{
    struct og_error err = {0};
    enum gate_outcome outcome;
    enum order_status status;

    if (gate_close(f->db, order_no, "tester", "outbox test", &outcome, &status, &err) != OG_OK)
        fail_msg("close %s: %s", order_no, err.msg);
    assert_int_equal(outcome, GATE_CANCELLED);
}

static enum gate_outcome pay(struct fixture *f, const char *order_no, const char *txn,
                             int64_t amount)
{
    struct og_error err = {0};
    struct gate_payment_result r;

    if (gate_claim_payment(f->db, order_no, txn, amount, "card", &r, &err) != OG_OK)
        fail_msg("pay %s: %s", order_no, err.msg);
    return r.outcome;
}

/* n cancelled orders named <prefix>-<i>: n order_cancelled events. */
static void make_cancelled(struct fixture *f, const char *prefix, int n)
{
    char order_no[64];

    for (int i = 0; i < n; i++) {
        snprintf(order_no, sizeof(order_no), "%s-%d", prefix, i);
        place(f, order_no, 1000 + i);
        close_order(f, order_no);
    }
}

static long unpublished(struct fixture *f)
{
    return testdb_scalar(f->raw,
                         "SELECT count(*) FROM ordergate.outbox WHERE published_at IS NULL");
}

static long quarantined(struct fixture *f)
{
    return testdb_scalar(f->raw,
                         "SELECT count(*) FROM ordergate.outbox WHERE quarantined_at IS NOT NULL");
}

static const char *header(rd_kafka_message_t *m, const char *name, char *buf, size_t size)
{
    rd_kafka_headers_t *hdrs = NULL;
    const void *val = NULL;
    size_t len = 0;

    buf[0] = '\0';
    if (rd_kafka_message_headers(m, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR &&
        rd_kafka_header_get_last(hdrs, name, &val, &len) == RD_KAFKA_RESP_ERR_NO_ERROR &&
        val != NULL)
        snprintf(buf, size, "%.*s", (int)len, (const char *)val);
    return buf;
}

/* Reads the topics from the beginning with a fresh group until `expect`
 * messages arrived, then `settle_ms` longer to catch any extra copy. */
static size_t consume(const char *brokers, const char *const *topics, size_t ntopics,
                      struct consumed *out, size_t max, size_t expect, int settle_ms)
{
    char errstr[512], group[128];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_topic_partition_list_t *subs;
    rd_kafka_t *rk;
    size_t n = 0;
    int64_t deadline = clock_mono_ms() + 60000, settle_end = -1;

    testutil_unique(group, sizeof(group), "og.test.outbox.reader");
    if (rd_kafka_conf_set(conf, "bootstrap.servers", brokers, errstr, sizeof(errstr)) ||
        rd_kafka_conf_set(conf, "group.id", group, errstr, sizeof(errstr)) ||
        rd_kafka_conf_set(conf, "auto.offset.reset", "earliest", errstr, sizeof(errstr)) ||
        rd_kafka_conf_set(conf, "enable.auto.commit", "false", errstr, sizeof(errstr)))
        fail_msg("consumer conf: %s", errstr);
    rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
    if (rk == NULL)
        fail_msg("consumer: %s", errstr);
    rd_kafka_poll_set_consumer(rk);
    subs = rd_kafka_topic_partition_list_new((int)ntopics);
    for (size_t i = 0; i < ntopics; i++)
        rd_kafka_topic_partition_list_add(subs, topics[i], RD_KAFKA_PARTITION_UA);
    assert_int_equal(rd_kafka_subscribe(rk, subs), RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_topic_partition_list_destroy(subs);

    while (clock_mono_ms() < deadline && (settle_end < 0 || clock_mono_ms() < settle_end)) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 200);
        if (m == NULL)
            continue;
        if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR && n < max) {
            struct consumed *c = &out[n++];
            snprintf(c->topic, sizeof(c->topic), "%s", rd_kafka_topic_name(m->rkt));
            snprintf(c->key, sizeof(c->key), "%.*s", (int)m->key_len, (const char *)m->key);
            c->value = strndup((const char *)m->payload, m->len);
            header(m, "ordergate-event-id", c->id, sizeof(c->id));
            header(m, "ordergate-event-type", c->type, sizeof(c->type));
        } else if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
            n++; /* more than we can hold: counted, so the test sees it */
        }
        rd_kafka_message_destroy(m);
        if (n >= expect && settle_end < 0)
            settle_end = clock_mono_ms() + settle_ms;
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return n;
}

static void consumed_free(struct consumed *c, size_t n)
{
    for (size_t i = 0; i < n && i < MAX_MSGS; i++)
        free(c[i].value);
}

/* A TCP port on which nothing listens. */
static int closed_port(void)
{
    struct sockaddr_in sa;
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    close(fd);
    return ntohs(sa.sin_port);
}

/* ---- tests -------------------------------------------------------------- */

static void test_topic_mapping(void **state)
{
    struct og_config cfg;
    struct og_error err = {0};

    (void)state;
    assert_int_equal(cfg_init(&cfg, &err), OG_OK);
    cfg_set(&cfg, "outbox.topic", "ev", &err);
    cfg_set(&cfg, "outbox.refund_topic", "rf", &err);
    cfg_set(&cfg, "outbox.alert_topic", "al", &err);
    assert_string_equal(outbox_topic_for(&cfg, "order_paid"), "ev");
    assert_string_equal(outbox_topic_for(&cfg, "order_cancelled"), "ev");
    assert_string_equal(outbox_topic_for(&cfg, "refund_requested"), "rf");
    assert_string_equal(outbox_topic_for(&cfg, "reconciliation_alert"), "al");
    assert_string_equal(outbox_topic_for(&cfg, "something_new"), "ev");
    cfg_set(&cfg, "outbox.refund_topic", "", &err);
    assert_string_equal(outbox_topic_for(&cfg, "refund_requested"), "ev");
    cfg_free(&cfg);
}

static void test_relay_requires_dr_cb(void **state)
{
    struct fixture f;
    rd_kafka_t *bare, *good;
    struct outbox_relay *relay;

    (void)state;
    fixture_setup(&f, "outbox_drcb");
    bare = producer_new(testutil_brokers(), 5000, false);
    good = producer_new(testutil_brokers(), 5000, true);
    assert_null(outbox_relay_new(f.db, bare, &f.cfg));
    assert_null(outbox_relay_new(NULL, good, &f.cfg));
    relay = outbox_relay_new(f.db, good, &f.cfg);
    assert_non_null(relay);
    outbox_relay_free(relay);
    outbox_relay_free(NULL);
    producer_free(bare);
    producer_free(good);
    fixture_teardown(&f);
}

/* Every event type the gate writes, published to its topic and read back. */
static void test_publish_roundtrip(void **state)
{
    struct fixture f;
    struct og_error err = {0};
    struct outbox_relay *relay;
    rd_kafka_t *producer;
    struct consumed *got = calloc(MAX_MSGS, sizeof(*got));
    const char *topics[3];
    size_t published = 0, n;
    long long backlog = -1;
    PGresult *rows;
    int nrows;

    (void)state;
    assert_non_null(got);
    fixture_setup(&f, "outbox_roundtrip");
    place(&f, "rt-cancel-1", 1500);
    place(&f, "rt-cancel-2", 2500);
    place(&f, "rt-paid-1", 3000);
    place(&f, "rt-late-small", 1200);
    place(&f, "rt-late-large", 900000);
    close_order(&f, "rt-cancel-1");
    close_order(&f, "rt-cancel-2");
    assert_int_equal(pay(&f, "rt-paid-1", "txn-rt-1", 3000), GATE_PAID);
    close_order(&f, "rt-late-small");
    close_order(&f, "rt-late-large");
    assert_int_equal(pay(&f, "rt-late-small", "txn-rt-2", 1200), GATE_LATE_PAYMENT);
    assert_int_equal(pay(&f, "rt-late-large", "txn-rt-3", 900000), GATE_LATE_PAYMENT);
    /* 4 cancels, 1 paid, 1 refund, 1 alert. */
    assert_int_equal(unpublished(&f), 7);
    assert_int_equal(outbox_backlog(f.db, &backlog, &err), OG_OK);
    assert_int_equal(backlog, 7);

    producer = producer_new(testutil_brokers(), 30000, true);
    relay = outbox_relay_new(f.db, producer, &f.cfg);
    assert_non_null(relay);
    if (outbox_relay_step(relay, &published, &err) != OG_OK)
        fail_msg("relay step: %s", err.msg);
    assert_int_equal(published, 7);
    assert_int_equal(unpublished(&f), 0);
    assert_int_equal(outbox_backlog(f.db, &backlog, &err), OG_OK);
    assert_int_equal(backlog, 0);
    /* The transaction is over. */
    assert_int_equal(PQtransactionStatus(db_conn(f.db)), PQTRANS_IDLE);

    /* Nothing new: a second step publishes nothing. */
    assert_int_equal(outbox_relay_step(relay, &published, &err), OG_OK);
    assert_int_equal(published, 0);

    topics[0] = f.cfg.outbox.topic;
    topics[1] = f.cfg.outbox.refund_topic;
    topics[2] = f.cfg.outbox.alert_topic;
    n = consume(testutil_brokers(), topics, 3, got, MAX_MSGS, 7, 2000);
    assert_int_equal(n, 7);

    /* Each row matches exactly one message: key, payload, headers, topic. */
    rows = PQexec(f.raw, "SELECT id, event_type, order_no, payload::text FROM ordergate.outbox "
                         "ORDER BY id");
    assert_int_equal(PQresultStatus(rows), PGRES_TUPLES_OK);
    nrows = PQntuples(rows);
    assert_int_equal(nrows, 7);
    for (int i = 0; i < nrows; i++) {
        const char *id = PQgetvalue(rows, i, 0);
        const char *type = PQgetvalue(rows, i, 1);
        int matches = 0;
        for (size_t j = 0; j < n; j++) {
            if (strcmp(got[j].id, id) != 0)
                continue;
            matches++;
            assert_string_equal(got[j].type, type);
            assert_string_equal(got[j].key, PQgetvalue(rows, i, 2));
            assert_string_equal(got[j].value, PQgetvalue(rows, i, 3));
            assert_string_equal(got[j].topic, outbox_topic_for(&f.cfg, type));
        }
        if (matches != 1)
            fail_msg("outbox event %s (%s) was consumed %d times", id, type, matches);
    }
    /* The three topics were all used. */
    assert_int_equal(
        testdb_scalar(f.raw, "SELECT count(DISTINCT event_type) FROM ordergate.outbox"), 4);
    PQclear(rows);

    outbox_relay_free(relay);
    producer_free(producer);
    consumed_free(got, n);
    free(got);
    fixture_teardown(&f);
}

/* schedule_cancels = 1: place_order writes the cancel message, and the relay
 * publishes it to the delay topic whose level fits the time left (the
 * smallest level long enough, the longest when none is), byte for byte,
 * keyed by order number. Delay topics whose names carry no level make such a
 * step fail with a message that says so, and nothing is marked published. */
static void test_cancel_scheduled_routing(void **state)
{
    struct fixture f;
    struct og_error err = {0};
    struct outbox_relay *relay;
    rd_kafka_t *producer;
    struct consumed *got = calloc(MAX_MSGS, sizeof(*got));
    char t1[128], t15[128], t30[128], topics[400], bad[128];
    const char *subs[3];
    size_t published = 0, n;
    PGresult *rows;

    (void)state;
    assert_non_null(got);
    fixture_setup(&f, "outbox_sched");
    testutil_unique(t1, sizeof(t1), "og.test.cancel");
    snprintf(t15, sizeof(t15), "%s.15m", t1);
    snprintf(t30, sizeof(t30), "%s.30m", t1);
    strcat(t1, ".1m");
    snprintf(topics, sizeof(topics), "%s,%s,%s", t30, t1, t15);
    assert_int_equal(cfg_set(&f.cfg, "kafka.topics", topics, &err), OG_OK);
    testutil_topic_create(testutil_brokers(), t1, 1);
    testutil_topic_create(testutil_brokers(), t15, 1);
    testutil_topic_create(testutil_brokers(), t30, 1);
    testdb_exec(f.raw, "SELECT ordergate.set_setting('schedule_cancels', '1')");
    /* Due now, in 10 minutes, in 20 minutes, in two days; and one held. */
    testdb_exec(f.raw,
                "SET ROLE ordergate_service; "
                "SELECT ordergate.place_order('sc-now', 100, '[]', NULL, now()), "
                "ordergate.place_order('sc-10m', 100, '[]', NULL, now() + interval '10 min'), "
                "ordergate.place_order('sc-20m', 100, '[]', NULL, now() + interval '20 min'), "
                "ordergate.place_order('sc-2d', 100, '[]', NULL, now() + interval '2 days'), "
                "ordergate.place_order('sc-held', 100, '[]', NULL, now() + interval '5 s'); "
                "SELECT ordergate.hold_for_payment('sc-held', 600); RESET ROLE");
    /* The hold rewrote sc-held's message, not yet published: one per order. */
    assert_int_equal(testdb_scalar(f.raw, "SELECT count(*) FROM ordergate.outbox WHERE "
                                          "event_type = 'cancel_scheduled'"),
                     5);

    producer = producer_new(testutil_brokers(), 30000, true);
    relay = outbox_relay_new(f.db, producer, &f.cfg);
    assert_non_null(relay);
    if (outbox_relay_step(relay, &published, &err) != OG_OK)
        fail_msg("relay step: %s", err.msg);
    assert_int_equal(published, 5);

    subs[0] = t1;
    subs[1] = t15;
    subs[2] = t30;
    n = consume(testutil_brokers(), subs, 3, got, MAX_MSGS, 5, 2000);
    assert_int_equal(n, 5);
    rows = PQexec(f.raw, "SELECT id, order_no, payload::text, (payload->>'due_at')::timestamptz "
                         "- created_at FROM ordergate.outbox ORDER BY id");
    assert_int_equal(PQntuples(rows), 5);
    for (int i = 0; i < 5; i++) {
        const char *no = PQgetvalue(rows, i, 1);
        int matches = 0;
        for (size_t j = 0; j < n; j++) {
            if (strcmp(got[j].id, PQgetvalue(rows, i, 0)) != 0)
                continue;
            matches++;
            assert_string_equal(got[j].type, "cancel_scheduled");
            assert_string_equal(got[j].key, no);
            assert_string_equal(got[j].value, PQgetvalue(rows, i, 2));
            /* Due now or in 5 s: 1m; 10 min (and the hold to 10 min): 15m;
             * 20 min: 30m; two days fits no level: the longest, 30m. */
            if (strcmp(no, "sc-now") == 0 ||
                (strcmp(no, "sc-held") == 0 && strstr(PQgetvalue(rows, i, 3), "00:00:05")))
                assert_string_equal(got[j].topic, t1);
            else if (strcmp(no, "sc-10m") == 0 || strcmp(no, "sc-held") == 0)
                assert_string_equal(got[j].topic, t15);
            else
                assert_string_equal(got[j].topic, t30);
        }
        if (matches != 1)
            fail_msg("cancel_scheduled %s consumed %d times", no, matches);
    }
    PQclear(rows);
    outbox_relay_free(relay);

    /* Delay topics without a level in their name: refused, with the reason. */
    testutil_unique(bad, sizeof(bad), "og-test-nolevel");
    assert_int_equal(cfg_set(&f.cfg, "kafka.topics", bad, &err), OG_OK);
    relay = outbox_relay_new(f.db, producer, &f.cfg);
    assert_non_null(relay);
    testdb_exec(f.raw, "SET ROLE ordergate_service; SELECT ordergate.place_order('sc-bad', 100, "
                       "'[]', NULL, now()); RESET ROLE");
    assert_int_not_equal(outbox_relay_step(relay, &published, &err), OG_OK);
    if (strstr(err.msg, "no delay level in its name") == NULL)
        fail_msg("unexpected error: %s", err.msg);
    assert_int_equal(unpublished(&f), 1);
    outbox_relay_free(relay);

    producer_free(producer);
    consumed_free(got, n);
    free(got);
    fixture_teardown(&f);
}

/* Rows locked by another session are skipped, not waited for. */
static void test_skip_locked(void **state)
{
    struct fixture f;
    struct og_error err = {0};
    struct outbox_relay *relay;
    rd_kafka_t *producer;
    PGconn *other;
    size_t published = 0;
    int64_t t0;

    (void)state;
    fixture_setup(&f, "outbox_skip");
    make_cancelled(&f, "sk", 10);
    other = testdb_connect(&f.t);
    testdb_exec(other, "BEGIN");
    /* Another relay holds the four oldest events. */
    assert_int_equal(testdb_scalar(other, "SELECT count(*) FROM ordergate.outbox_lock_batch(4)"),
                     4);

    producer = producer_new(testutil_brokers(), 30000, true);
    relay = outbox_relay_new(f.db, producer, &f.cfg);
    assert_non_null(relay);
    t0 = clock_mono_ms();
    if (outbox_relay_step(relay, &published, &err) != OG_OK)
        fail_msg("relay step: %s", err.msg);
    assert_int_equal(published, 6);
    assert_true(clock_mono_ms() - t0 < 10000);
    assert_int_equal(unpublished(&f), 4);
    assert_int_equal(testdb_scalar(f.raw, "SELECT count(*) FROM ordergate.outbox "
                                          "WHERE published_at IS NULL AND id IN "
                                          "(SELECT id FROM ordergate.outbox ORDER BY id LIMIT 4)"),
                     4);
    /* Nothing else is free while they are held. */
    assert_int_equal(outbox_relay_step(relay, &published, &err), OG_OK);
    assert_int_equal(published, 0);

    testdb_exec(other, "ROLLBACK");
    assert_int_equal(outbox_relay_step(relay, &published, &err), OG_OK);
    assert_int_equal(published, 4);
    assert_int_equal(unpublished(&f), 0);

    PQfinish(other);
    outbox_relay_free(relay);
    producer_free(producer);
    fixture_teardown(&f);
}

struct relay_thread {
    struct outbox_relay *relay;
    size_t published;
    int steps;
    enum og_status st;
    char msg[512];
};

static void *relay_thread_run(void *arg)
{
    struct relay_thread *rt = arg;
    struct og_error err = {0};
    size_t n;

    /* Until a step finds nothing free: the other relay holds what is left,
     * or all is published. */
    for (;;) {
        rt->st = outbox_relay_step(rt->relay, &n, &err);
        if (rt->st != OG_OK) {
            snprintf(rt->msg, sizeof(rt->msg), "%s", err.msg);
            break;
        }
        rt->steps++;
        rt->published += n;
        if (n == 0)
            break;
    }
    return NULL;
}

/* Two relays, two connections, two producers, one table: every event lands
 * on the topic exactly once. */
static void test_two_relays_exactly_once(void **state)
{
    enum { N = 300 };
    struct fixture f;
    struct og_config cfg2;
    struct og_error err = {0};
    struct db *db2;
    rd_kafka_t *p1, *p2;
    struct relay_thread rt[2];
    pthread_t th[2];
    struct consumed *got = calloc(MAX_MSGS, sizeof(*got));
    const char *topics[1];
    int *seen;
    size_t n;
    long first_id;

    (void)state;
    assert_non_null(got);
    fixture_setup(&f, "outbox_two");
    make_cancelled(&f, "two", N);
    first_id = testdb_scalar(f.raw, "SELECT min(id) FROM ordergate.outbox");
    /* Small batches so the relays take turns. */
    assert_int_equal(cfg_set(&f.cfg, "outbox.batch", "15", &err), OG_OK);
    cfg2 = f.cfg;
    db2 = testdb_open(&f.t, "test_outbox_2");
    p1 = producer_new(testutil_brokers(), 30000, true);
    p2 = producer_new(testutil_brokers(), 30000, true);
    memset(rt, 0, sizeof(rt));
    rt[0].relay = outbox_relay_new(f.db, p1, &f.cfg);
    rt[1].relay = outbox_relay_new(db2, p2, &cfg2);
    assert_non_null(rt[0].relay);
    assert_non_null(rt[1].relay);
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, relay_thread_run, &rt[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 2; i++)
        if (rt[i].st != OG_OK)
            fail_msg("relay %d: %s", i + 1, rt[i].msg);
    print_message("relay 1 published %zu in %d steps, relay 2 published %zu in %d steps\n",
                  rt[0].published, rt[0].steps, rt[1].published, rt[1].steps);
    assert_int_equal(rt[0].published + rt[1].published, N);
    assert_int_equal(unpublished(&f), 0);

    topics[0] = f.cfg.outbox.topic;
    n = consume(testutil_brokers(), topics, 1, got, MAX_MSGS, N, 3000);
    assert_int_equal(n, N);
    seen = calloc(N, sizeof(*seen));
    assert_non_null(seen);
    for (size_t j = 0; j < n; j++) {
        long id = atol(got[j].id) - first_id;
        assert_true(id >= 0 && id < N);
        seen[id]++;
        assert_string_equal(got[j].type, "order_cancelled");
    }
    for (int i = 0; i < N; i++)
        if (seen[i] != 1)
            fail_msg("event %ld consumed %d times", first_id + i, seen[i]);

    free(seen);
    outbox_relay_free(rt[0].relay);
    outbox_relay_free(rt[1].relay);
    producer_free(p1);
    producer_free(p2);
    db_free(db2);
    consumed_free(got, n);
    free(got);
    fixture_teardown(&f);
}

/* The broker cannot be reached: every message fails, the batch is rolled
 * back, nothing is marked, and a working relay later publishes it all. */
static void test_broker_unreachable(void **state)
{
    struct fixture f;
    struct og_error err = {0};
    struct outbox_relay *relay, *good_relay;
    rd_kafka_t *dead, *good;
    char brokers[64];
    size_t published = 99;
    enum og_status st;

    (void)state;
    fixture_setup(&f, "outbox_down");
    make_cancelled(&f, "down", 5);
    snprintf(brokers, sizeof(brokers), "127.0.0.1:%d", closed_port());
    dead = producer_new(brokers, 1500, true);
    relay = outbox_relay_new(f.db, dead, &f.cfg);
    assert_non_null(relay);

    st = outbox_relay_step(relay, &published, &err);
    assert_int_equal(st, OG_ERR_KAFKA);
    assert_true(err.retriable);
    assert_int_equal(published, 0);
    if (strstr(err.msg, "delivery failed") == NULL && strstr(err.msg, "no delivery report") == NULL)
        fail_msg("unexpected error: %s", err.msg);
    assert_int_equal(unpublished(&f), 5);
    /* A broker that cannot be reached is transient: nothing is quarantined. */
    assert_int_equal(quarantined(&f), 0);
    assert_int_equal(outbox_relay_quarantined_total(relay), 0);
    /* Rolled back, not just unmarked: the rows are free for anyone. */
    assert_int_equal(PQtransactionStatus(db_conn(f.db)), PQTRANS_IDLE);
    assert_int_equal(testdb_scalar(f.raw, "SELECT count(*) FROM ordergate.outbox_lock_batch(100)"),
                     5);

    /* Again: same answer, nothing lost. */
    og_error_clear(&err);
    assert_int_equal(outbox_relay_step(relay, &published, &err), OG_ERR_KAFKA);
    assert_true(err.retriable);
    assert_int_equal(unpublished(&f), 5);
    assert_int_equal(quarantined(&f), 0);
    outbox_relay_free(relay);
    producer_free(dead);

    good = producer_new(testutil_brokers(), 30000, true);
    good_relay = outbox_relay_new(f.db, good, &f.cfg);
    assert_non_null(good_relay);
    if (outbox_relay_step(good_relay, &published, &err) != OG_OK)
        fail_msg("relay step: %s", err.msg);
    assert_int_equal(published, 5);
    assert_int_equal(unpublished(&f), 0);
    outbox_relay_free(good_relay);
    producer_free(good);
    fixture_teardown(&f);
}

/* No report within the relay's timeout: rolled back, and no new batch while
 * the old messages may still be delivered. */
static void test_delivery_timeout(void **state)
{
    struct fixture f;
    struct og_error err = {0};
    struct outbox_relay *relay;
    rd_kafka_t *dead;
    char brokers[64];
    size_t published = 99;

    (void)state;
    fixture_setup(&f, "outbox_timeout");
    make_cancelled(&f, "slow", 3);
    snprintf(brokers, sizeof(brokers), "127.0.0.1:%d", closed_port());
    /* Reports fail 2 s after each produce, four times the relay's timeout: the steps below see
     * no report at all, and each flush waits out the 2 s. */
    dead = producer_new(brokers, 2000, true);
    relay = outbox_relay_new(f.db, dead, &f.cfg);
    assert_non_null(relay);
    outbox_relay_set_timeout(relay, 500);

    assert_int_equal(outbox_relay_step(relay, &published, &err), OG_ERR_KAFKA);
    assert_true(err.retriable);
    assert_non_null(strstr(err.msg, "no delivery report"));
    assert_int_equal(published, 0);
    assert_int_equal(unpublished(&f), 3);
    assert_int_equal(PQtransactionStatus(db_conn(f.db)), PQTRANS_IDLE);

    og_error_clear(&err);
    assert_int_equal(outbox_relay_step(relay, &published, &err), OG_ERR_KAFKA);
    assert_true(err.retriable);
    assert_non_null(strstr(err.msg, "earlier batch"));
    /* No second copy was queued (3 messages plus, at most, a few events). */
    assert_true(rd_kafka_outq_len(dead) >= 3 && rd_kafka_outq_len(dead) < 6);

    /* Once the late reports are in (failures), the relay is free again. */
    rd_kafka_flush(dead, 10000);
    og_error_clear(&err);
    assert_int_equal(outbox_relay_step(relay, &published, &err), OG_ERR_KAFKA);
    assert_non_null(strstr(err.msg, "no delivery report"));
    rd_kafka_flush(dead, 10000);
    outbox_relay_free(relay);
    producer_free(dead);
    assert_int_equal(unpublished(&f), 3);
    fixture_teardown(&f);
}

/* A program's own delivery callback that passes every message on to
 * outbox_dr_cb, as the header allows; on the first report it terminates the
 * relay's database session (and waits until it is gone), so the broker has
 * acknowledged but the rows cannot be marked. */
static PGconn *kill_conn;
static int kill_pid;

static void kill_backend(PGconn *raw, int pid)
{
    char sql[96];
    PGresult *res;

    /* With a timeout, pg_terminate_backend waits until the session is gone. */
    snprintf(sql, sizeof(sql), "SELECT pg_terminate_backend(%d, 5000)", pid);
    res = PQexec(raw, sql);
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    assert_string_equal(PQgetvalue(res, 0, 0), "t");
    PQclear(res);
}

static void killing_dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque)
{
    if (kill_pid > 0) {
        kill_backend(kill_conn, kill_pid);
        kill_pid = 0;
    }
    outbox_dr_cb(rk, msg, opaque);
}

/* The database session dies after the broker acknowledged: nothing is
 * marked, the next step publishes again (a duplicate, never a loss). A
 * session that died between steps costs one retriable failure. */
static void test_db_session_lost(void **state)
{
    struct fixture f;
    struct og_error err = {0};
    struct outbox_relay *relay;
    rd_kafka_t *producer;
    struct consumed *got = calloc(MAX_MSGS, sizeof(*got));
    const char *topics[1];
    int seen[7] = {0};
    size_t published = 99, n;
    long first_id;

    (void)state;
    assert_non_null(got);
    fixture_setup(&f, "outbox_lost");
    make_cancelled(&f, "lost", 6);
    first_id = testdb_scalar(f.raw, "SELECT min(id) FROM ordergate.outbox");
    producer = producer_new_cb(testutil_brokers(), 30000, killing_dr_cb);
    relay = outbox_relay_new(f.db, producer, &f.cfg);
    assert_non_null(relay);

    kill_conn = f.raw;
    kill_pid = PQbackendPID(db_conn(f.db));
    assert_int_equal(outbox_relay_step(relay, &published, &err), OG_ERR_DB);
    assert_true(err.retriable);
    assert_int_equal(kill_pid, 0); /* the callback did run */
    assert_int_equal(published, 0);
    assert_int_equal(unpublished(&f), 6);

    /* The next step reconnects and publishes the same six again. */
    og_error_clear(&err);
    if (outbox_relay_step(relay, &published, &err) != OG_OK)
        fail_msg("relay step after reconnect: %s", err.msg);
    assert_int_equal(published, 6);
    assert_int_equal(unpublished(&f), 0);

    /* Killed while idle: BEGIN fails retriable, then all is well again. */
    make_cancelled(&f, "lost-idle", 1);
    kill_backend(f.raw, PQbackendPID(db_conn(f.db)));
    og_error_clear(&err);
    assert_int_equal(outbox_relay_step(relay, &published, &err), OG_ERR_DB);
    assert_true(err.retriable);
    assert_int_equal(unpublished(&f), 1);
    if (outbox_relay_step(relay, &published, &err) != OG_OK)
        fail_msg("relay step after reconnect: %s", err.msg);
    assert_int_equal(published, 1);

    topics[0] = f.cfg.outbox.topic;
    n = consume(testutil_brokers(), topics, 1, got, MAX_MSGS, 13, 2000);
    assert_int_equal(n, 13);
    for (size_t j = 0; j < n; j++) {
        long id = atol(got[j].id) - first_id;
        assert_true(id >= 0 && id < 7);
        seen[id]++;
    }
    for (int i = 0; i < 6; i++)
        assert_int_equal(seen[i], 2); /* acknowledged, unmarked, published again */
    assert_int_equal(seen[6], 1);

    outbox_relay_free(relay);
    producer_free(producer);
    consumed_free(got, n);
    free(got);
    fixture_teardown(&f);
}

/* The relay needs nothing beyond ordergate_relay's grants (it calls the
 * outbox functions only; it never touches the table). */
static void test_service_role(void **state)
{
    struct fixture f;
    struct og_error err = {0};
    struct db_retry retry = {.max_attempts = 3, .base_ms = 10, .cap_ms = 100};
    struct outbox_relay *relay;
    struct db *svc;
    rd_kafka_t *producer;
    char role[64], sql[160], conninfo[256];
    size_t published = 0;
    long long backlog = -1;
    PGresult *res;
    PGconn *admin;

    (void)state;
    fixture_setup(&f, "outbox_role");
    make_cancelled(&f, "role", 3);
    snprintf(role, sizeof(role), "og_outbox_svc_%d", (int)getpid());
    snprintf(sql, sizeof(sql), "DROP ROLE IF EXISTS %s", role);
    testdb_exec(f.raw, sql);
    snprintf(sql, sizeof(sql), "CREATE ROLE %s LOGIN IN ROLE ordergate_relay", role);
    testdb_exec(f.raw, sql);
    snprintf(conninfo, sizeof(conninfo), "%s user=%s", f.t.conninfo, role);
    svc = db_new(conninfo, NULL, "test_outbox_svc", &retry, NULL);
    assert_non_null(svc);

    producer = producer_new(testutil_brokers(), 30000, true);
    relay = outbox_relay_new(svc, producer, &f.cfg);
    assert_non_null(relay);
    if (outbox_relay_step(relay, &published, &err) != OG_OK)
        fail_msg("relay step as %s: %s", role, err.msg);
    assert_int_equal(published, 3);
    assert_int_equal(outbox_backlog(svc, &backlog, &err), OG_OK);
    assert_int_equal(backlog, 0);
    /* And the role really is limited: the table itself is read-only to it. */
    res = PQexec(db_conn(svc), "UPDATE ordergate.outbox SET published_at = NULL");
    assert_int_equal(PQresultStatus(res), PGRES_FATAL_ERROR);
    assert_string_equal(PQresultErrorField(res, PG_DIAG_SQLSTATE), "42501");
    PQclear(res);

    outbox_relay_free(relay);
    producer_free(producer);
    db_free(svc);
    fixture_teardown(&f);
    admin = PQconnectdb("dbname=postgres");
    assert_int_equal(PQstatus(admin), CONNECTION_OK);
    snprintf(sql, sizeof(sql), "DROP ROLE %s", role);
    testdb_exec(admin, sql);
    PQfinish(admin);
}

static void test_stop_requested(void **state)
{
    struct fixture f;
    struct og_error err = {0};
    struct outbox_relay *relay;
    rd_kafka_t *producer;
    size_t published = 99;

    (void)state;
    fixture_setup(&f, "outbox_stop");
    make_cancelled(&f, "stop", 2);
    producer = producer_new(testutil_brokers(), 30000, true);
    relay = outbox_relay_new(f.db, producer, &f.cfg);
    assert_non_null(relay);
    signals_stop = 1;
    assert_int_equal(outbox_relay_step(relay, &published, &err), OG_ERR_STOPPED);
    signals_stop = 0;
    assert_int_equal(published, 0);
    assert_int_equal(unpublished(&f), 2);
    assert_int_equal(rd_kafka_outq_len(producer), 0);
    outbox_relay_free(relay);
    producer_free(producer);
    fixture_teardown(&f);
}

/* n orders named <prefix>-<i>, each paid: n order_paid events. */
static void make_paid(struct fixture *f, const char *prefix, int n)
{
    char order_no[64], txn[80];

    for (int i = 0; i < n; i++) {
        snprintf(order_no, sizeof(order_no), "%s-%d", prefix, i);
        snprintf(txn, sizeof(txn), "t-%s", order_no);
        place(f, order_no, 1000 + i);
        assert_int_equal(pay(f, order_no, txn, 1000 + i), GATE_PAID);
    }
}

/* Every outbox event of the table reached the topics exactly once, and a
 * quarantined one never. */
static void expect_each_once(struct fixture *f, const struct consumed *got, size_t n)
{
    PGresult *rows = PQexec(f->raw, "SELECT id, quarantined_at IS NOT NULL FROM ordergate.outbox "
                                    "ORDER BY id");

    assert_int_equal(PQresultStatus(rows), PGRES_TUPLES_OK);
    for (int i = 0; i < PQntuples(rows); i++) {
        int matches = 0, want = strcmp(PQgetvalue(rows, i, 1), "t") == 0 ? 0 : 1;
        for (size_t j = 0; j < n; j++)
            if (strcmp(got[j].id, PQgetvalue(rows, i, 0)) == 0)
                matches++;
        if (matches != want)
            fail_msg("event %s consumed %d times, want %d", PQgetvalue(rows, i, 0), matches, want);
    }
    PQclear(rows);
}

/* A cancel_scheduled the consumer cannot decode (an order placed, before the
 * deadline horizon existed, with a time in epoch milliseconds read as seconds:
 * due in year 58882) sits between three order_paid events and three
 * order_cancelled ones. The relay used to fail every step on it: nothing
 * behind it left, and the acknowledged events before it were rolled back and
 * published again on every retry. Now it is quarantined with its reason, the
 * six others reach their topic exactly once however many steps run, and later
 * steps are clean. */
static void test_poison_cancel_scheduled(void **state)
{
    struct fixture f;
    struct og_error err = {0};
    struct outbox_relay *relay;
    rd_kafka_t *producer;
    struct consumed *got = calloc(MAX_MSGS, sizeof(*got));
    char delay[128], reason[600];
    const char *subs[2];
    size_t published = 0, total = 0, n;
    int failed = 0;
    PGresult *res;

    (void)state;
    assert_non_null(got);
    fixture_setup(&f, "outbox_poison");
    testutil_unique(delay, sizeof(delay), "og.test.poison");
    strcat(delay, ".1m");
    assert_int_equal(cfg_set(&f.cfg, "kafka.topics", delay, &err), OG_OK);
    testutil_topic_create(testutil_brokers(), delay, 1);
    make_paid(&f, "pp", 3);
    place(&f, "poison", 100);
    /* As place_order wrote it before the horizon: the gate's own cancel message. */
    testdb_exec(f.raw, "INSERT INTO ordergate.outbox (event_type, order_no, payload) "
                       "VALUES ('cancel_scheduled', 'poison', ordergate._cancel_message('poison', "
                       "to_timestamp(1796000000000)))");
    make_cancelled(&f, "pc", 3);
    assert_int_equal(unpublished(&f), 7);

    producer = producer_new(testutil_brokers(), 30000, true);
    relay = outbox_relay_new(f.db, producer, &f.cfg);
    assert_non_null(relay);
    /* Ten steps, as the relay retries; then what reached the topics: each of
     * the six once (the three before it were sent on every step, the three
     * behind it never), the poison never. */
    for (int i = 0; i < 10; i++) {
        og_error_clear(&err);
        if (outbox_relay_step(relay, &published, &err) != OG_OK) {
            failed++;
            print_message("relay step %d: %s\n", i + 1, err.msg);
        }
        total += published;
    }
    subs[0] = f.cfg.outbox.topic;
    subs[1] = delay;
    n = consume(testutil_brokers(), subs, 2, got, MAX_MSGS, 6, 3000);
    expect_each_once(&f, got, n);
    assert_int_equal(n, 6);
    assert_int_equal(failed, 0);
    assert_int_equal(total, 6);
    assert_int_equal(unpublished(&f), 1);
    assert_int_equal(quarantined(&f), 1);
    assert_int_equal(outbox_relay_quarantined_total(relay), 1);
    res = PQexec(f.raw, "SELECT event_type, order_no, reason, due_at "
                        "FROM ordergate.outbox_quarantine_list()");
    assert_int_equal(PQntuples(res), 1);
    assert_string_equal(PQgetvalue(res, 0, 0), "cancel_scheduled");
    assert_string_equal(PQgetvalue(res, 0, 1), "poison");
    snprintf(reason, sizeof(reason), "%s", PQgetvalue(res, 0, 2));
    if (strstr(reason, "due_at") == NULL)
        fail_msg("the reason does not say why: %s", reason);
    /* A five-digit year: the value that could not be carried, shown as written. */
    assert_int_equal(strcspn(PQgetvalue(res, 0, 3), "-"), 5);
    PQclear(res);
    /* Reported by reconciliation; the backlog no longer counts it. */
    assert_int_equal(testdb_scalar(f.raw, "SELECT violations FROM ordergate.reconcile() "
                                          "WHERE invariant = 9"),
                     1);
    assert_int_equal(testdb_scalar(f.raw, "SELECT ordergate.outbox_backlog()"), 0);

    outbox_relay_free(relay);
    producer_free(producer);
    consumed_free(got, n);
    free(got);
    fixture_teardown(&f);
}

/* A message the producer refuses for its size (an order whose shop data
 * outgrew message.max.bytes) is quarantined, the events around it go out
 * once; after the fix (a producer that takes larger messages) an operator
 * releases it and the next step publishes it. */
static void test_too_large_quarantined_then_released(void **state)
{
    struct fixture f;
    struct og_error err = {0};
    struct outbox_relay *relay;
    rd_kafka_t *small, *producer;
    rd_kafka_conf_t *conf;
    struct consumed *got = calloc(MAX_MSGS, sizeof(*got));
    char errstr[512];
    const char *subs[1];
    size_t published = 0, n;
    long big_id;

    (void)state;
    assert_non_null(got);
    fixture_setup(&f, "outbox_large");
    make_cancelled(&f, "lg-a", 2);
    testdb_exec(f.raw, "SET ROLE ordergate_service; SELECT ordergate.place_order('lg-big', 100, "
                       "'[]', NULL, now() + interval '1 hour', jsonb_build_object('note', "
                       "repeat('x', 8000))); RESET ROLE");
    close_order(&f, "lg-big");
    big_id = testdb_scalar(f.raw, "SELECT id FROM ordergate.outbox WHERE order_no = 'lg-big'");
    make_cancelled(&f, "lg-b", 2);

    conf = rd_kafka_conf_new();
    if (rd_kafka_conf_set(conf, "bootstrap.servers", testutil_brokers(), errstr, sizeof(errstr)) ||
        rd_kafka_conf_set(conf, "enable.idempotence", "true", errstr, sizeof(errstr)) ||
        rd_kafka_conf_set(conf, "message.max.bytes", "4000", errstr, sizeof(errstr)))
        fail_msg("producer conf: %s", errstr);
    rd_kafka_conf_set_dr_msg_cb(conf, outbox_dr_cb);
    small = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    assert_non_null(small);
    relay = outbox_relay_new(f.db, small, &f.cfg);
    assert_non_null(relay);
    if (outbox_relay_step(relay, &published, &err) != OG_OK)
        fail_msg("relay step: %s", err.msg);
    assert_int_equal(published, 4);
    assert_int_equal(quarantined(&f), 1);
    assert_int_equal(testdb_scalar(f.raw, "SELECT id FROM ordergate.outbox "
                                          "WHERE quarantined_at IS NOT NULL"),
                     big_id);
    outbox_relay_free(relay);
    producer_free(small);

    /* The fix, then the release (admin). */
    assert_int_equal(testdb_scalar(f.raw, "SELECT count(*) FROM ordergate.outbox_quarantine_list() "
                                          "WHERE reason ILIKE '%too large%'"),
                     1);
    testdb_exec(f.raw, "SET ROLE ordergate_admin");
    {
        char sql[128];
        PGresult *res;
        snprintf(sql, sizeof(sql), "SELECT ordergate.outbox_release(%ld)", big_id);
        res = PQexec(f.raw, sql);
        assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
        assert_string_equal(PQgetvalue(res, 0, 0), "released");
        PQclear(res);
    }
    testdb_exec(f.raw, "RESET ROLE");
    producer = producer_new(testutil_brokers(), 30000, true);
    relay = outbox_relay_new(f.db, producer, &f.cfg);
    assert_non_null(relay);
    if (outbox_relay_step(relay, &published, &err) != OG_OK)
        fail_msg("relay step: %s", err.msg);
    assert_int_equal(published, 1);
    assert_int_equal(unpublished(&f), 0);
    assert_int_equal(quarantined(&f), 0);

    subs[0] = f.cfg.outbox.topic;
    n = consume(testutil_brokers(), subs, 1, got, MAX_MSGS, 5, 3000);
    assert_int_equal(n, 5);
    expect_each_once(&f, got, n);

    outbox_relay_free(relay);
    producer_free(producer);
    consumed_free(got, n);
    free(got);
    fixture_teardown(&f);
}

/* A transient failure of some rows (their topic does not exist yet) is not a
 * quarantine: those rows stay unpublished, the step says why and the caller
 * backs off, while the rows that went through are marked at once and never
 * sent again. Once the topic exists the next steps publish the rest. */
static void test_partial_batch_transient(void **state)
{
    struct fixture f;
    struct og_error err = {0};
    struct outbox_relay *relay;
    rd_kafka_t *producer;
    struct consumed *got = calloc(MAX_MSGS, sizeof(*got));
    char alerts[128];
    const char *subs[2];
    size_t published = 0, total = 0, n;
    enum og_status st;
    int64_t until;

    (void)state;
    assert_non_null(got);
    fixture_setup(&f, "outbox_partial");
    /* Alerts go to a topic nobody created (the broker creates none itself). */
    testutil_unique(alerts, sizeof(alerts), "og.test.late-alerts");
    assert_int_equal(cfg_set(&f.cfg, "outbox.alert_topic", alerts, &err), OG_OK);
    make_cancelled(&f, "pa", 2);
    assert_int_equal(pay(&f, "pa-unknown", "t-unknown", 100), GATE_NOT_FOUND);
    make_cancelled(&f, "pb", 2);
    assert_int_equal(unpublished(&f), 5);

    producer = producer_new(testutil_brokers(), 3000, true);
    relay = outbox_relay_new(f.db, producer, &f.cfg);
    assert_non_null(relay);
    st = outbox_relay_step(relay, &published, &err);
    assert_int_equal(st, OG_ERR_KAFKA);
    assert_true(err.retriable);
    print_message("step 1: %s\n", err.msg);
    assert_int_equal(published, 4);
    assert_int_equal(unpublished(&f), 1);
    assert_int_equal(quarantined(&f), 0);
    assert_int_equal(testdb_scalar(f.raw, "SELECT count(*) FROM ordergate.outbox WHERE "
                                          "published_at IS NULL AND "
                                          "event_type = 'reconciliation_alert'"),
                     1);
    /* Nothing is locked: the transaction committed. */
    assert_int_equal(PQtransactionStatus(db_conn(f.db)), PQTRANS_IDLE);

    testutil_topic_create(testutil_brokers(), alerts, 1);
    until = clock_mono_ms() + 60000;
    while (unpublished(&f) > 0 && clock_mono_ms() < until) {
        og_error_clear(&err);
        published = 0;
        st = outbox_relay_step(relay, &published, &err);
        total += published;
        if (st != OG_OK)
            usleep(500 * 1000);
    }
    assert_int_equal(total, 1);
    assert_int_equal(unpublished(&f), 0);
    assert_int_equal(quarantined(&f), 0);

    subs[0] = f.cfg.outbox.topic;
    subs[1] = alerts;
    n = consume(testutil_brokers(), subs, 2, got, MAX_MSGS, 5, 3000);
    expect_each_once(&f, got, n);
    assert_int_equal(n, 5);

    outbox_relay_free(relay);
    producer_free(producer);
    consumed_free(got, n);
    free(got);
    fixture_teardown(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_topic_mapping),
        cmocka_unit_test(test_relay_requires_dr_cb),
        cmocka_unit_test(test_publish_roundtrip),
        cmocka_unit_test(test_cancel_scheduled_routing),
        cmocka_unit_test(test_skip_locked),
        cmocka_unit_test(test_two_relays_exactly_once),
        cmocka_unit_test(test_broker_unreachable),
        cmocka_unit_test(test_delivery_timeout),
        cmocka_unit_test(test_db_session_lost),
        cmocka_unit_test(test_service_role),
        cmocka_unit_test(test_stop_requested),
        cmocka_unit_test(test_poison_cancel_scheduled),
        cmocka_unit_test(test_too_large_quarantined_then_released),
        cmocka_unit_test(test_partial_batch_transient),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
