/* The refund-results topic (kafka.refund_results_topic): the payment side's answers to
 * refund_requested, recorded through record_refund like payment results through the payment
 * claim. A success closes the exception as refunded, a failure moves it to manual review, a
 * repeat is a duplicate that changes nothing; a result the gate cannot apply (no such payment,
 * the reference reported with another outcome, no refund requested) changes nothing and is
 * dead-lettered with that reason, like a message that does not decode; the offsets move past
 * all of them after the database commit. */
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

struct dlq_seen {
    int n;
    char reasons[8][200];
};

static void dlq_record(void *arg, const rd_kafka_message_t *m)
{
    struct dlq_seen *s = arg;
    char buf[600];

    if (s->n < 8)
        snprintf(s->reasons[s->n], sizeof(s->reasons[0]), "%s",
                 ct_header(m, "ordergate-reason", buf, sizeof(buf)) ? buf : "");
    s->n++;
}

static bool dlq_has(const struct dlq_seen *s, const char *needle)
{
    for (int i = 0; i < s->n && i < 8; i++)
        if (strstr(s->reasons[i], needle) != NULL)
            return true;
    return false;
}

static void send_result(struct ct *t, const char *key, const char *value)
{
    ct_produce_raw(t, t->refund_results, 0, key, key ? strlen(key) : 0, value, strlen(value));
}

/* An order cancelled, then paid: a late payment with an auto-refund requested. */
static void late_payment(struct ct *t, const char *order_no, const char *txn_no)
{
    char sql[400];

    ct_place(t, order_no, -1000);
    snprintf(sql, sizeof(sql),
             "SELECT ordergate.claim_cancel(ARRAY['%s'], 'timeout_scanner'); "
             "SELECT ordergate.claim_payment('%s', '%s', 1000, 'card')",
             order_no, order_no, txn_no);
    testdb_exec(t->conn, sql);
}

static void test_refund_results_are_recorded(void **state)
{
    static struct ct t;
    struct ct_proc p;
    struct dlq_seen dlq = {0};
    static char body[65536];

    (void)state;
    ct_setup(&t, "crefund", 1, CT_REFUNDS);
    late_payment(&t, "L-1", "T-1");
    late_payment(&t, "L-2", "T-2");
    /* Paid in time: no refund was requested for T-3. */
    ct_place(&t, "P-3", 3600 * 1000L);
    testdb_exec(t.conn, "SELECT ordergate.claim_payment('P-3', 'T-3', 1000, 'card')");
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.exceptions WHERE resolution = "
                                   "'auto_refund' AND state = 'open'"),
                     2);

    send_result(&t, "T-1",
                "{\"v\":1,\"txn_no\":\"T-1\",\"refund_ref\":\"R-1\",\"outcome\":\"succeeded\"}");
    send_result(&t, "T-1",
                "{\"v\":1,\"txn_no\":\"T-1\",\"refund_ref\":\"R-1\",\"outcome\":\"succeeded\"}");
    send_result(&t, "T-2",
                "{\"v\":1,\"txn_no\":\"T-2\",\"refund_ref\":\"R-2\",\"outcome\":\"failed\"}");
    send_result(&t, "T-9",
                "{\"v\":1,\"txn_no\":\"T-9\",\"refund_ref\":\"R-9\",\"outcome\":\"succeeded\"}");
    send_result(&t, "T-1",
                "{\"v\":1,\"txn_no\":\"T-1\",\"refund_ref\":\"R-1\",\"outcome\":\"failed\"}");
    send_result(&t, "T-3",
                "{\"v\":1,\"txn_no\":\"T-3\",\"refund_ref\":\"R-3\",\"outcome\":\"succeeded\"}");
    send_result(&t, "T-1",
                "{\"v\":1,\"txn_no\":\"T-1\",\"refund_ref\":\"R-4\",\"outcome\":\"done\"}");
    send_result(&t, "T-X",
                "{\"v\":1,\"txn_no\":\"T-1\",\"refund_ref\":\"R-5\",\"outcome\":\"failed\"}");
    ct_spawn(&t, &p, "c1", t.topic, NULL);

    assert_int_equal(ct_wait_scalar(&t,
                                    "SELECT count(*) FROM ordergate.refunds WHERE refund_ref IN "
                                    "('R-1', 'R-2')",
                                    2, 20000),
                     2);
    ct_log_wait(&p,
                "event=refund_recorded txn_no=T-2 refund_ref=R-2 outcome=failed "
                "result=manual_review",
                10000);
    for (int i = 0; i < 100 && ct_committed(t.group, t.refund_results, 0) < 8; i++)
        testutil_sleep_ms(200);
    assert_int_equal(ct_committed(t.group, t.refund_results, 0), 8);

    /* T-1 refunded and closed; T-2 open for a manual review; nothing else changed. */
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.exceptions WHERE txn_no = "
                                   "'T-1' AND state = 'refunded'"),
                     1);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.exceptions WHERE txn_no = "
                                   "'T-2' AND state = 'open' AND resolution = 'manual_review'"),
                     1);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.refunds"), 2);
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.outbox WHERE event_type = "
                                   "'reconciliation_alert' AND payload->>'kind' = "
                                   "'refund_failed'"),
                     1);

    /* Five dead letters, each with its reason. */
    assert_int_equal(ct_consume_all(t.dlq, 0, dlq_record, &dlq, 10000), 5);
    assert_true(dlq_has(&dlq, "refund_rejected: not_found"));
    assert_true(dlq_has(&dlq, "refund_rejected: conflict"));
    assert_true(dlq_has(&dlq, "refund_rejected: not_requested"));
    assert_true(dlq_has(&dlq, "bad_outcome: 'done'"));
    assert_true(dlq_has(&dlq, "key_mismatch"));

    assert_int_equal(ct_http_get(ct_metrics_port(&p), "/metrics", body, sizeof(body)), 200);
    assert_true(ct_metric(body, "ordergate_consumer_refunds_total{result=\"refunded\"}") == 1);
    assert_true(ct_metric(body, "ordergate_consumer_refunds_total{result=\"duplicate\"}") == 1);
    assert_true(ct_metric(body, "ordergate_consumer_refunds_total{result=\"manual_review\"}") == 1);
    assert_true(ct_metric(body, "ordergate_consumer_refunds_total{result=\"not_found\"}") == 1);
    assert_true(ct_metric(body, "ordergate_consumer_refunds_total{result=\"conflict\"}") == 1);
    assert_true(ct_metric(body, "ordergate_consumer_refunds_total{result=\"not_requested\"}") == 1);
    assert_true(ct_metric(body, "ordergate_consumer_dead_lettered_total") == 5);
    assert_int_equal(ct_stop(&p, SIGTERM, 30000), 0);
    assert_int_equal(ct_scalar(&t, "SELECT sum(violations) FROM ordergate.reconcile()"), 0);
    ct_teardown(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_refund_results_are_recorded, ct_cleanup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
