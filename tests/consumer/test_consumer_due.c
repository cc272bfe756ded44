/* No message stalls a partition, no order waits behind others. Against the real broker and
 * database:
 *  - an order the database calls not_due by a little (a message due 400 ms early; due_at
 *    rounded down to the millisecond) is claimed again locally at its expire_at: cancelled,
 *    never early, and nothing goes round the topic;
 *  - a re-schedule (a payment-page hold) goes to the delay topic whose level fits the time
 *    left, so the cancels behind it in its old partition are not held back;
 *  - a message due far beyond its topic's level (up to 9999-12-31) is claimed at once instead
 *    of pausing its partition: the database decides (cancelled, or re-scheduled by the real
 *    expire_at); on a topic without any level, consumer.max_wait_ms is the bound. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/clock.h"
#include "common/codec.h"
#include "ct.h"
#include "support/testutil.h"

/* Ample for an order due now; the code before these changes never gets there meanwhile. */
#define PROGRESS_MS 10000

static long status_is(struct ct *t, const char *order_no, const char *status, long timeout_ms)
{
    char sql[256];

    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM ordergate.orders WHERE order_no = '%s' AND status = '%s'",
             order_no, status);
    return ct_wait_scalar(t, sql, 1, timeout_ms);
}

/* Places an order due in ms and returns its expire_at rounded DOWN to the millisecond: the
 * due_at a producer that truncates writes. */
static int64_t place_floor(struct ct *t, const char *order_no, long ms)
{
    char sql[256];

    ct_place(t, order_no, ms);
    snprintf(sql, sizeof(sql),
             "SELECT floor(extract(epoch FROM expire_at) * 1000)::bigint FROM ordergate.orders "
             "WHERE order_no = '%s'",
             order_no);
    return ct_scalar(t, sql);
}

static void test_short_not_due_claimed_locally(void **state)
{
    static struct ct t;
    struct ct_proc p;
    char no[32];
    int64_t expire;

    (void)state;
    ct_setup(&t, "cdueloc", 1, 0);
    ct_spawn(&t, &p, "c1", t.topic, NULL);
    ct_log_wait(&p, "event=partitions_assigned", 30000);

    /* E-1: the message says due 400 ms before the database does. */
    expire = ct_place(&t, "E-1", 1500);
    ct_send_cancel(&t, t.topic, 0, "E-1", expire - 400);
    /* M-*: due_at is expire_at rounded down to the millisecond (expire_at has microseconds). */
    for (int i = 1; i <= 20; i++) {
        snprintf(no, sizeof(no), "M-%d", i);
        ct_send_cancel(&t, t.topic, 0, no, place_floor(&t, no, 1500 + 7 * i));
    }
    ct_flush(&t);

    assert_int_equal(status_is(&t, "E-1", "cancelled", PROGRESS_MS), 1);
    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM ordergate.orders WHERE order_no LIKE "
                                    "'M-%' AND status = 'cancelled'",
                                    20, PROGRESS_MS),
                     20);
    /* Never early, and no message went round the topic: its only messages are ours. */
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.orders o JOIN "
                                   "ordergate.status_log l USING (order_no) WHERE l.created_at < "
                                   "o.expire_at"),
                     0);
    assert_true(ct_metric_now(&p, "ordergate_consumer_rescheduled_total") == 0);
    assert_int_equal(ct_end_offset(t.topic, 0), 21);
    assert_false(ct_log_has(&p, "event=clock_skew_suspected"));
    assert_true(ct_metric_now(&p, "ordergate_consumer_claims_total{outcome=\"not_due\"}") >= 1);
    assert_true(ct_metric_now(&p, "ordergate_consumer_retries_total{reason=\"not_due\"}") >= 1);
    assert_int_equal(ct_stop(&p, SIGTERM, 30000), 0);
    assert_int_equal(ct_committed(t.group, t.topic, 0), 21);
    ct_teardown(&t);
}

/* Claimed at the deadline: cancels fetched before their due time wait in the consumer's window
 * and are claimed the moment they fall due, never before. The bounds hold on a loaded 2-core
 * machine; before the window, the 50 ms pause floor, the linger and a fetch round trip came on
 * top of every due time. */
static void test_claimed_at_the_deadline(void **state)
{
    static struct ct t;
    struct ct_proc p;
    char no[32];

    (void)state;
    ct_setup(&t, "cduepunct", 1, 0);
    ct_spawn(&t, &p, "c1", t.topic, NULL);
    ct_log_wait(&p, "event=partitions_assigned", 30000);
    /* 40 orders due 25 ms apart from 2 s on, each with a microsecond expire_at. */
    for (int i = 0; i < 40; i++) {
        snprintf(no, sizeof(no), "P-%d", i);
        ct_send_cancel(&t, t.topic, 0, no, place_floor(&t, no, 2000 + 25 * i));
    }
    ct_flush(&t);
    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM ordergate.orders WHERE order_no LIKE "
                                    "'P-%' AND status = 'cancelled'",
                                    40, PROGRESS_MS),
                     40);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.orders o JOIN "
                                   "ordergate.status_log l USING (order_no) WHERE l.created_at < "
                                   "o.expire_at"),
                     0);
    /* Lateness in ms: median within 250, worst within 1000. */
    assert_int_equal(ct_scalar(&t, "SELECT (percentile_cont(0.5) WITHIN GROUP (ORDER BY ms) <= 250 "
                                   "AND max(ms) <= 1000)::int FROM (SELECT extract(epoch FROM "
                                   "l.created_at - o.expire_at) * 1000 AS ms FROM ordergate.orders "
                                   "o JOIN ordergate.status_log l USING (order_no) WHERE "
                                   "o.order_no LIKE 'P-%') x"),
                     1);
    /* Fetched early and held, not refetched per message: no not_due claim, nothing re-scheduled. */
    assert_true(ct_metric_now(&p, "ordergate_consumer_claims_total{outcome=\"not_due\"}") == 0);
    assert_true(ct_metric_now(&p, "ordergate_consumer_rescheduled_total") == 0);
    assert_int_equal(ct_stop(&p, SIGTERM, 30000), 0);
    assert_int_equal(ct_committed(t.group, t.topic, 0), 40);
    ct_teardown(&t);
}

/* Two delay levels: og.<base>.cancel.2s (2 s) and og.<base>.cancel.1m (60 s). */
static void level_topics(struct ct *t, char *short_topic, char *long_topic, size_t size,
                         char *topics, size_t topics_size)
{
    snprintf(short_topic, size, "og.%s.cancel.2s", t->base);
    snprintf(long_topic, size, "og.%s.cancel.1m", t->base);
    ct_create_topic(short_topic, 1);
    ct_create_topic(long_topic, 1);
    snprintf(topics, topics_size, "%s,%s", short_topic, long_topic);
    ct_config(t, "level_margin_ms = 500;", CT_SHORT_SESSION);
}

/* The rescheduled-from header of the last message for order_no in a topic. */
struct found {
    const char *order_no;
    int n;
    char from[256];
};

static void find_msg(void *arg, const rd_kafka_message_t *m)
{
    struct found *f = arg;

    if (m->key_len == strlen(f->order_no) && memcmp(m->key, f->order_no, m->key_len) == 0) {
        f->n++;
        if (ct_header(m, "ordergate-rescheduled-from", f->from, sizeof(f->from)) == NULL)
            f->from[0] = '\0';
    }
}

static void test_hold_goes_to_the_level_that_fits(void **state)
{
    static struct ct t;
    struct ct_proc p;
    char st[160], lt[160], topics[400], want[200];
    struct found f = {.order_no = "H-1"};
    int64_t due;

    (void)state;
    ct_setup(&t, "cduelvl", 1, 0);
    level_topics(&t, st, lt, sizeof(st), topics, sizeof(topics));
    ct_spawn(&t, &p, "c1", topics, NULL);
    ct_log_wait(&p, "event=partitions_assigned", 30000);

    /* H-1 fell due, then the user opened the payment page: 8 s more. Its message (on the 2 s
     * level) is claimed, not_due, re-scheduled with 8 s left: onto the 1 m level. */
    due = ct_place(&t, "H-1", -1000);
    testdb_exec(t.conn, "SELECT * FROM ordergate.hold_for_payment('H-1', 8)");
    ct_produce_cancel(&t, st, 0, "H-1", due);
    snprintf(want, sizeof(want), "event=rescheduled order_no=H-1");
    ct_log_wait(&p, want, PROGRESS_MS);
    assert_int_equal(ct_consume_all(lt, 0, find_msg, &f, 10000), 1);
    assert_int_equal(f.n, 1);
    snprintf(want, sizeof(want), "%s/0/0", st);
    assert_string_equal(f.from, want);
    assert_int_equal(ct_end_offset(st, 0), 1);

    /* A cancel behind it on the 2 s level is not held back by the hold. */
    ct_produce_cancel(&t, st, 0, "X-1", ct_place(&t, "X-1", 300));
    assert_int_equal(status_is(&t, "X-1", "cancelled", PROGRESS_MS), 1);
    assert_int_equal(status_is(&t, "H-1", "pending_payment", 0), 1);
    /* And H-1 is cancelled at its new expire_at, from the 1 m level. */
    assert_int_equal(status_is(&t, "H-1", "cancelled", 20000), 1);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.orders o JOIN "
                                   "ordergate.status_log l USING (order_no) WHERE l.created_at < "
                                   "o.expire_at"),
                     0);
    assert_int_equal(ct_stop(&p, SIGTERM, 30000), 0);
    ct_teardown(&t);
}

static void test_due_far_beyond_level_claimed_at_once(void **state)
{
    static struct ct t;
    struct ct_proc p;
    char st[160], lt[160], topics[400];
    struct found f = {.order_no = "F-1"};
    int64_t end_of_time;

    (void)state;
    assert_int_equal(clock_parse_iso("9999-12-31T23:59:59.999Z", 24, &end_of_time), 0);
    ct_setup(&t, "cduefar", 1, 0);
    level_topics(&t, st, lt, sizeof(st), topics, sizeof(topics));
    ct_spawn(&t, &p, "c1", topics, NULL);
    ct_log_wait(&p, "event=partitions_assigned", 30000);

    /* F-1 is due in 6 s, F-2 is due already: both messages say 9999-12-31. G-1 behind them,
     * due now, would wait until then if F-1 paused the partition. */
    ct_place(&t, "F-1", 6000);
    ct_place(&t, "F-2", -1000);
    ct_send_cancel(&t, st, 0, "F-1", end_of_time);
    ct_send_cancel(&t, st, 0, "F-2", end_of_time);
    ct_send_cancel(&t, st, 0, "G-1", ct_place(&t, "G-1", -1000));
    ct_flush(&t);

    assert_int_equal(status_is(&t, "G-1", "cancelled", PROGRESS_MS), 1);
    assert_int_equal(status_is(&t, "F-2", "cancelled", PROGRESS_MS), 1);
    assert_int_equal(status_is(&t, "F-1", "pending_payment", 0), 1);
    assert_true(ct_metric_now(&p, "ordergate_consumer_due_beyond_level_total") >= 2);
    /* F-1 went to the level that fits its real expire_at, due then. */
    ct_log_wait(&p, "event=rescheduled order_no=F-1", PROGRESS_MS);
    assert_int_equal(ct_consume_all(lt, 0, find_msg, &f, 10000), 1);
    assert_int_equal(status_is(&t, "F-1", "cancelled", 20000), 1);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.orders o JOIN "
                                   "ordergate.status_log l USING (order_no) WHERE l.created_at < "
                                   "o.expire_at"),
                     0);
    assert_int_equal(ct_stop(&p, SIGTERM, 30000), 0);
    assert_int_equal(ct_committed(t.group, st, 0), 3);
    ct_teardown(&t);
}

/* The re-schedule of order_no in a topic: how many, and the due time of the last (Unix ms). */
struct resched {
    const char *order_no;
    int n;
    int64_t due_ms;
};

static void find_resched(void *arg, const rd_kafka_message_t *m)
{
    struct resched *r = arg;
    struct codec_cancel cancel;
    struct og_error err = {0};
    char from[256];

    if (ct_header(m, "ordergate-rescheduled-from", from, sizeof(from)) == NULL ||
        codec_decode_cancel(m->key, m->key_len, m->payload, m->len, &cancel, &err) != OG_OK ||
        strcmp(cancel.order_no, r->order_no) != 0)
        return;
    r->n++;
    r->due_ms = cancel.due_ms;
}

/* A topic whose name carries no level, and no kafka.topic_levels: consumer.max_wait_ms stands for
 * its level. A message due 9999-12-31 at the head of its partition is claimed at once (the order
 * is not due: re-scheduled into the same topic due within max_wait_ms, where it hops on), and the
 * 200 due cancels behind it are cancelled at once; before, nothing was checked for such a topic
 * and the partition paused until 9999. */
static void test_due_far_unlevelled_topic(void **state)
{
    static struct ct t;
    struct ct_proc p;
    struct resched r = {.order_no = "FAR-1"};
    char no[32];
    int64_t end_of_time, expire = 0, before;

    (void)state;
    assert_int_equal(clock_parse_iso("9999-12-31T23:59:59.999Z", 24, &end_of_time), 0);
    ct_setup(&t, "cdueunl", 1, 0);
    ct_config(&t, "max_wait_ms = 60000; level_margin_ms = 1000;", CT_SHORT_SESSION);
    ct_place(&t, "FAR-1", 3600 * 1000L);
    ct_send_cancel(&t, t.topic, 0, "FAR-1", end_of_time);
    for (int i = 1; i <= 200; i++) {
        snprintf(no, sizeof(no), "U-%d", i);
        expire = ct_place(&t, no, -1000);
    }
    for (int i = 1; i <= 200; i++) {
        snprintf(no, sizeof(no), "U-%d", i);
        ct_send_cancel(&t, t.topic, 0, no, expire);
    }
    ct_flush(&t);
    before = ct_now_ms();
    ct_spawn(&t, &p, "c1", t.topic, NULL);

    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM ordergate.orders WHERE order_no LIKE "
                                    "'U-%' AND status = 'cancelled'",
                                    200, 2 * PROGRESS_MS),
                     200);
    assert_int_equal(status_is(&t, "FAR-1", "pending_payment", 0), 1);
    ct_log_wait(&p, "event=due_beyond_level order_no=FAR-1", PROGRESS_MS);
    assert_true(ct_metric_now(&p, "ordergate_consumer_due_beyond_level_total") >= 1);
    /* Re-scheduled into its own topic (no other), due within max_wait_ms: it pauses the
     * partition no longer than that, and is not claimed at once again. */
    ct_log_wait(&p, "event=rescheduled order_no=FAR-1", PROGRESS_MS);
    assert_int_equal(ct_consume_all(t.topic, 0, find_resched, &r, 10000), 202);
    assert_int_equal(r.n, 1);
    assert_true(r.due_ms > before);
    assert_true(r.due_ms <= ct_now_ms() + 60000);
    assert_int_equal(ct_wait_committed(&t, t.topic, 0, 201, PROGRESS_MS), 201);
    assert_int_equal(ct_stop(&p, SIGTERM, 30000), 0);
    ct_teardown(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_short_not_due_claimed_locally, ct_cleanup),
        cmocka_unit_test_teardown(test_claimed_at_the_deadline, ct_cleanup),
        cmocka_unit_test_teardown(test_hold_goes_to_the_level_that_fits, ct_cleanup),
        cmocka_unit_test_teardown(test_due_far_beyond_level_claimed_at_once, ct_cleanup),
        cmocka_unit_test_teardown(test_due_far_unlevelled_topic, ct_cleanup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
