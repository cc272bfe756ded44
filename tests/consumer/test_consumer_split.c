/* A claim split across database sessions (consumer.claim_sessions = 2): a batch's cancels are
 * claimed by two backends at once, each order by one of them, once; and no offset is stored
 * before every part of the batch has committed, also when one part's session is killed, or the
 * consumer gets SIGTERM, while the other part has committed already.
 *
 * The orders share their SKUs across the parts (the restock at the end of each part locks the
 * same inventory rows, in sku order: the parts serialize there and must not deadlock). In the
 * second case the part of the worker's session is held by a lock on an inventory row only its
 * orders use: the parts are told apart by the split's hash of the order number (FNV-1a, modulo
 * the number of parts), which this test computes the same way.
 *
 * The claims overlap across batches: with the worker's part of one batch held, the loop's session
 * claims its part of the next batch meanwhile, yet no offset of either moves until the held part
 * has committed. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ct.h"
#include "support/testutil.h"

#define ORDERS 300 /* one batch's worth, well above the split's threshold of 64 */

#define SQL_WORKER_WAITING                                                                         \
    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND "                \
    "application_name = 'ordergate-consumer-claim-1' AND wait_event_type = 'Lock'"

/* The part of a claim split in two that an order goes to (consumer/commit.c). */
static unsigned split_part(const char *order_no)
{
    uint32_t h = 2166136261u;

    for (const unsigned char *c = (const unsigned char *)order_no; *c != '\0'; c++)
        h = (h ^ *c) * 16777619u;
    return h % 2;
}

/* Places W-1 and B-1..B-n, all due a second ago, each with two lines: sku-1 and sku-2; with
 * sku_hot, the worker's part's orders (split_part 1) sku-3 and sku_hot instead, so that the two
 * parts share no SKU. A shared one would be locked by the worker's restock (in sku order) while
 * it waits for sku_hot, and the loop's part would then wait behind it on its own session too:
 * the held worker's part is meant to hold up nothing else. */
static void split_place(struct ct *t, int n, const char *sku_hot)
{
    char sql[512], order[32];

    ct_place(t, "W-1", -1000);
    for (int i = 1; i <= n; i++) {
        bool hot;

        snprintf(order, sizeof(order), "B-%d", i);
        hot = sku_hot != NULL && split_part(order) == 1;
        snprintf(sql, sizeof(sql),
                 "SELECT ordergate.place_order('%s', 1000, '[{\"sku\":\"%s\",\"qty\":1},"
                 "{\"sku\":\"%s\",\"qty\":1}]'::jsonb, NULL, now() - interval '1 second')",
                 order, hot ? "sku-3" : "sku-1", hot ? sku_hot : "sku-2");
        testdb_exec(t->conn, sql);
    }
}

/* Starts the consumer with two claim sessions and waits until the second one is connected: it
 * connects with the first flush (W-1's). */
static void split_spawn(struct ct *t, struct ct_proc *p, const char *lock_timeout)
{
    ct_spawn(t, p, "c1", t->topic, "--claim-sessions", "2", "--lock-timeout-ms", lock_timeout,
             NULL);
    ct_log_wait(p, "event=partitions_assigned", 30000);
    ct_produce_cancel(t, t->topic, 0, "W-1", ct_now_ms() - 1000);
    assert_int_equal(ct_wait_scalar(t,
                                    "SELECT count(*) FROM ordergate.orders WHERE order_no = 'W-1' "
                                    "AND status = 'cancelled'",
                                    1, 20000),
                     1);
    ct_log_wait(p, "event=claim_session_connected", 20000);
    assert_true(ct_metric_wait(p, "ordergate_consumer_claim_sessions_connected", 1, 10000) == 1);
}

/* Sends B-1..B-n, all due SPLIT_DUE_AHEAD_MS from now (their orders are due in the database
 * already): the consumer holds them in its window (within its lead) and claims them in one batch
 * when they fall due, so the claim is split. Sent as due at once, the first messages to arrive
 * could make a batch below the split's threshold, claimed whole on the loop's session (under a
 * sanitizer's slowness it did, and the held case waited for a worker that had no part). */
#define SPLIT_DUE_AHEAD_MS 2000

static void split_send(struct ct *t, int n)
{
    char order[32];
    int64_t due = ct_now_ms() + SPLIT_DUE_AHEAD_MS;

    for (int i = 1; i <= n; i++) {
        snprintf(order, sizeof(order), "B-%d", i);
        ct_send_cancel(t, t->topic, 0, order, due);
    }
    ct_flush(t);
}

/* Every order cancelled exactly once, the stock of both SKUs given back, the offset at the end. */
static void split_assert_done(struct ct *t, int n)
{
    assert_int_equal(ct_wait_scalar(t,
                                    "SELECT count(*) FROM ordergate.orders WHERE status = "
                                    "'cancelled'",
                                    n + 1, 30000),
                     n + 1);
    assert_int_equal(ct_scalar(t, "SELECT count(*) FROM ordergate.status_log"), n + 1);
    assert_int_equal(ct_scalar(t, "SELECT count(DISTINCT order_no) FROM ordergate.status_log"),
                     n + 1);
    assert_int_equal(ct_scalar(t, "SELECT count(*) FROM ordergate.inventory WHERE available <> "
                                  "total"),
                     0);
    assert_int_equal(ct_wait_committed(t, t->topic, 0, ct_end_offset(t->topic, 0), 20000),
                     ct_end_offset(t->topic, 0));
}

static void test_split_claims_on_two_sessions(void **state)
{
    static struct ct t; /* static: ct_cleanup may tear it down after a failure */
    struct ct_proc p;
    double parts;

    (void)state;
    ct_setup(&t, "csplit", 1, 0);
    ct_config(&t, "", CT_SHORT_SESSION ", \"auto.commit.interval.ms=200\"");
    testdb_exec(t.conn, "SELECT ordergate.add_stock('sku-2', 1000000)");
    split_place(&t, ORDERS, NULL);
    split_spawn(&t, &p, "5000");
    parts = ct_metric_now(&p, "ordergate_consumer_claim_parts_total");

    split_send(&t, ORDERS);
    split_assert_done(&t, ORDERS);
    /* Both backends won cancels of the burst: the loop's session and the claim session. */
    assert_int_equal(ct_scalar(&t, "SELECT count(DISTINCT actor) FROM ordergate.status_log "
                                   "WHERE order_no LIKE 'B-%' AND actor IN ('ordergate-consumer', "
                                   "'ordergate-consumer-claim-1')"),
                     2);
    /* Each order on the session its hash names, whichever way the burst was batched. */
    {
        char sql[256];
        int wrong = 0;
        PGresult *res = PQexec(t.conn, "SELECT order_no, actor FROM ordergate.status_log WHERE "
                                       "order_no LIKE 'B-%'");
        assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
        for (int i = 0; i < PQntuples(res); i++) {
            bool worker = strcmp(PQgetvalue(res, i, 1), "ordergate-consumer-claim-1") == 0;
            if (worker && split_part(PQgetvalue(res, i, 0)) != 1)
                wrong++;
        }
        PQclear(res);
        snprintf(sql, sizeof(sql), "orders claimed by the worker outside its part: %d", wrong);
        if (wrong != 0)
            fail_msg("%s", sql);
    }
    assert_true(ct_metric_now(&p, "ordergate_consumer_claim_parts_total") >= parts + 2);
    /* Every part's answer was taken: nothing claimed twice (already_cancelled), every cancel
     * counted by the loop (its metric follows the claim's return: polled). */
    assert_true(ct_metric_wait(&p, "ordergate_consumer_claims_total{outcome=\"cancelled\"}",
                               ORDERS + 1, 10000) == ORDERS + 1);
    assert_true(
        ct_metric_now(&p, "ordergate_consumer_claims_total{outcome=\"already_cancelled\"}") <= 0);
    /* The parts shared both SKUs: they waited for each other at the restock, never failed. */
    assert_false(ct_log_has(&p, "event=batch_db_retry"));
    assert_false(ct_log_has(&p, "event=batch_db_failed"));
    assert_int_equal(ct_stop(&p, SIGTERM, 30000), 0);
    ct_teardown(&t);
}

/* Sets up the held case: the orders of part 1 (the worker's) also take sku-held, whose stock row
 * an open transaction (the returned connection) locks; the consumer runs, W-1's offset is
 * committed, the burst is sent, and the worker's claim waits at the restock for that row. */
static PGconn *split_hold_worker(struct ct *t, struct ct_proc *p, const char *tag,
                                 const char *consumer_extra)
{
    PGconn *locker;

    ct_setup(t, tag, 1, 0);
    ct_config(t, consumer_extra, CT_SHORT_SESSION ", \"auto.commit.interval.ms=200\"");
    testdb_exec(t->conn, "SELECT ordergate.add_stock('sku-2', 1000000)");
    testdb_exec(t->conn, "SELECT ordergate.add_stock('sku-3', 1000000)");
    testdb_exec(t->conn, "SELECT ordergate.add_stock('sku-held', 1000000)");
    split_place(t, ORDERS, "sku-held");
    split_spawn(t, p, "120000");
    /* W-1's offset is committed: the test watches the offset move past it, or not. */
    assert_int_equal(ct_wait_committed(t, t->topic, 0, 1, 20000), 1);
    locker = testdb_connect(&t->db);
    testdb_exec(locker, "BEGIN");
    testdb_exec(locker, "SELECT 1 FROM ordergate.inventory WHERE sku = 'sku-held' FOR UPDATE");
    split_send(t, ORDERS);
    assert_int_equal(ct_wait_scalar(t, SQL_WORKER_WAITING, 1, 20000), 1);
    return locker;
}

/* While the worker's part is held: the offset stays after W-1, the worker has won nothing. */
static void split_assert_held(struct ct *t)
{
    assert_int_equal(ct_committed(t->group, t->topic, 0), 1);
    assert_int_equal(ct_scalar(t, "SELECT count(*) FROM ordergate.status_log WHERE actor = "
                                  "'ordergate-consumer-claim-1'"),
                     0);
}

static void test_split_stores_no_offset_before_every_part(void **state)
{
    static struct ct t;
    struct ct_proc p;
    PGconn *locker;
    long part0 = 0;
    char order[32];

    (void)state;
    for (int i = 1; i <= ORDERS; i++) {
        snprintf(order, sizeof(order), "B-%d", i);
        part0 += split_part(order) == 0;
    }
    /* Part 1's orders (the worker's) wait at the restock for sku-held; part 0's commit. */
    locker = split_hold_worker(&t, &p, "csplitoff", "");
    /* Part 0 committed (at least its share of the first batch), part 1 nothing. */
    assert_true(ct_wait_scalar(&t,
                               "SELECT count(*) FROM ordergate.status_log WHERE order_no LIKE "
                               "'B-%' AND actor = 'ordergate-consumer'",
                               part0, 10000) >= 64 / 2);
    testutil_sleep_ms(1500); /* several auto-commit intervals */
    split_assert_held(&t);

    /* The worker's backend is killed mid-claim: its part fails, the batch is retried (held on the
     * same lock again), and still no offset moves. */
    assert_int_equal(ct_scalar(&t, "SELECT count(pg_terminate_backend(pid)) FROM "
                                   "pg_stat_activity WHERE datname = current_database() AND "
                                   "application_name = 'ordergate-consumer-claim-1'"),
                     1);
    ct_log_wait(&p, "event=batch_db_retry", 20000);
    ct_log_wait(&p, "event=batch_retry", 20000);
    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM pg_stat_activity WHERE datname = "
                                    "current_database() AND application_name LIKE "
                                    "'ordergate-consumer%' AND wait_event_type = 'Lock'",
                                    1, 20000),
                     1);
    testutil_sleep_ms(1000);
    split_assert_held(&t);

    /* The lock goes: every order cancelled once, the offset at the end. */
    testdb_exec(locker, "ROLLBACK");
    PQfinish(locker);
    split_assert_done(&t, ORDERS);
    assert_int_equal(ct_stop(&p, SIGTERM, 30000), 0);
    ct_teardown(&t);
}

/* Two batches of ORDERS / 2 (consumer.batch_size): while the worker's part of the first is held,
 * the loop hands the second's part to the worker (queued behind) and claims the second's part 0
 * on its own session: every order of part 0 is cancelled, of both batches, while the worker has
 * won nothing. No offset moves, of either batch, until the held part commits; then every order
 * is cancelled once and the offset reaches the end. */
static void test_split_overlaps_batches(void **state)
{
    static struct ct t;
    struct ct_proc p;
    PGconn *locker;
    long part0 = 0, part0_first = 0;
    char order[32];

    (void)state;
    for (int i = 1; i <= ORDERS; i++) {
        snprintf(order, sizeof(order), "B-%d", i);
        part0 += split_part(order) == 0;
        part0_first += i <= ORDERS / 2 && split_part(order) == 0;
    }
    locker = split_hold_worker(&t, &p, "csplitover", "batch_size = 150;");
    /* Part 0 of both batches, on the loop's session: more than one batch's part 0 could hold. */
    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM ordergate.status_log WHERE order_no LIKE "
                                    "'B-%' AND actor = 'ordergate-consumer'",
                                    part0, 20000),
                     part0);
    assert_true(part0 > part0_first);
    assert_true(ct_metric_wait(&p, "ordergate_consumer_batches_in_flight", 2, 10000) == 2);
    assert_true(ct_metric_now(&p, "ordergate_consumer_batches_overlapped_total") >= 1);
    testutil_sleep_ms(1500); /* several auto-commit intervals */
    split_assert_held(&t);

    testdb_exec(locker, "ROLLBACK");
    PQfinish(locker);
    split_assert_done(&t, ORDERS);
    assert_true(ct_metric_wait(&p, "ordergate_consumer_batches_in_flight", 0, 10000) == 0);
    assert_false(ct_log_has(&p, "event=batch_db_retry"));
    assert_int_equal(ct_stop(&p, SIGTERM, 30000), 0);
    ct_teardown(&t);
}

/* SIGTERM while the worker's part is held (the loop's part committed): the loop gives the part up
 * and the consumer exits 0 at once, without waiting for the claim, and no offset moves; a new
 * consumer claims the rest once the lock goes, every order once. */
static void test_split_sigterm_mid_claim(void **state)
{
    static struct ct t;
    struct ct_proc p, q;
    PGconn *locker;
    int status;
    int64_t t0;
    long part0 = 0;
    char order[32];

    (void)state;
    for (int i = 1; i <= ORDERS; i++) {
        snprintf(order, sizeof(order), "B-%d", i);
        part0 += split_part(order) == 0;
    }
    locker = split_hold_worker(&t, &p, "csplitterm", "");
    /* The loop's part committed: only the worker's is out when the signal comes. */
    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM ordergate.status_log WHERE order_no LIKE "
                                    "'B-%' AND actor = 'ordergate-consumer'",
                                    part0, 20000),
                     part0);

    t0 = ct_now_ms();
    status = ct_stop(&p, SIGTERM, 15000);
    if (status != 0)
        fail_msg("exit status %d after SIGTERM, expected 0", status);
    assert_true(ct_now_ms() - t0 < 5000); /* the stop guard would end it at 9.5 s, status 1 */
    ct_log_wait(&p, "why=stopping", 1000);
    split_assert_held(&t);

    testdb_exec(locker, "ROLLBACK");
    PQfinish(locker);
    ct_spawn(&t, &q, "c2", t.topic, "--claim-sessions", "2", NULL);
    split_assert_done(&t, ORDERS);
    assert_int_equal(ct_stop(&q, SIGTERM, 30000), 0);
    ct_teardown(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_split_claims_on_two_sessions, ct_cleanup),
        cmocka_unit_test_teardown(test_split_stores_no_offset_before_every_part, ct_cleanup),
        cmocka_unit_test_teardown(test_split_sigterm_mid_claim, ct_cleanup),
        cmocka_unit_test_teardown(test_split_overlaps_batches, ct_cleanup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
