/* The commit protocol (consumer/commit.c) on its batch and retry set, without a database or a
 * broker. The test links the og_consumer library like the binary; the build adds
 * --wrap=gate_claim_cancel and --wrap=db_call, the two calls into common/ that would reach the
 * database, so the gate's answers and the failures of single commit steps are chosen here. The
 * watchdog is the protocol's progress callback, counted here. The Kafka handle only receives the
 * stored offsets (it has no brokers and never connects). */
#include <librdkafka/rdkafka.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/cfg.h"
#include "common/log.h"
#include "consumer/commit.h"

#define TOPIC    "og.unit.cancel"
#define PAYMENTS "og.unit.payments"

enum og_status __wrap_gate_claim_cancel(struct db *db, const char *const *order_nos, size_t n,
                                        enum gate_source source, struct gate_cancel_row *rows,
                                        size_t *nrows, struct og_error *err);
enum og_status __wrap_db_call(struct db *db, const struct db_stmt *stmt, const char *const *params,
                              PGresult **res, struct og_error *err);

/* The commit's progress callback (the loop pings its watchdog there): counts the pings after
 * database answers. */
static int watchdog_calls;

static void count_watchdog(void *arg)
{
    (void)arg;
    watchdog_calls++;
}

/* What the wrapped calls saw and answer. */
static struct {
    int claims;           /* gate_claim_cancel calls */
    char claimed[8][256]; /* the order numbers of each call, comma-separated */
    int due_times;        /* due_times statements */
    int due_times_fail;   /* this many of them fail first (retriable) */
    char paid[512];       /* the claim_payment calls' order numbers, in order, comma-separated */
    char hook_fails[64];  /* claim_payment fails in the paid hook for this order */
    char locked[64];      /* claim_payment finds this order's row locked (lock_timeout) */
    char lock_wait[64];   /* the lock bound of the last claim_payment */
    int steps;            /* every claim_cancel and claim_payment, in order */
    int first_cancel_step, first_payment_step; /* step of the first call to claim P-... */
} fake;

/* The gate: orders named "N-..." are not due yet, every other order is cancelled. */
enum og_status __wrap_gate_claim_cancel(struct db *db, const char *const *order_nos, size_t n,
                                        enum gate_source source, struct gate_cancel_row *rows,
                                        size_t *nrows, struct og_error *err)
{
    char *list = fake.claimed[fake.claims < 8 ? fake.claims : 7];

    (void)db;
    (void)err;
    assert_int_equal(source, GATE_SRC_TIMEOUT_CONSUMER);
    list[0] = '\0';
    fake.steps++;
    for (size_t i = 0; i < n; i++) {
        size_t used = strlen(list);
        if (order_nos[i][0] == 'P' && fake.first_cancel_step == 0)
            fake.first_cancel_step = fake.steps;
        snprintf(list + used, sizeof(fake.claimed[0]) - used, "%s%s", i ? "," : "", order_nos[i]);
        snprintf(rows[i].order_no, sizeof(rows[i].order_no), "%s", order_nos[i]);
        rows[i].outcome = order_nos[i][0] == 'N' ? GATE_NOT_DUE : GATE_CANCELLED;
        rows[i].status = order_nos[i][0] == 'N' ? ORDER_PENDING : ORDER_CANCELLED;
    }
    *nrows = n;
    fake.claims++;
    return OG_OK;
}

/* claim_payment (gate_claim_payment_bounded): the order fake.hook_fails names fails in its paid
 * hook (the error _hooks_run raises), the one fake.locked names waits for its row past the
 * statement's lock_timeout (55P03); every other is paid. */
static enum og_status fake_claim_payment(const char *const *params, bool bounded, PGresult **res,
                                         struct og_error *err)
{
    static PGresAttDesc cols[3] = {
        {.name = "outcome"}, {.name = "status"}, {.name = "first_outcome"}};
    size_t used = strlen(fake.paid);

    fake.steps++;
    if (params[0][0] == 'P' && fake.first_payment_step == 0)
        fake.first_payment_step = fake.steps;
    snprintf(fake.paid + used, sizeof(fake.paid) - used, "%s%s", used ? "," : "", params[0]);
    snprintf(fake.lock_wait, sizeof(fake.lock_wait), "%s", bounded ? params[4] : "session");
    if (strcmp(params[0], fake.hook_fails) == 0) {
        og_error_set(err, OG_ERR_DB, false, "hook shop.on_paid(text[],text): no stock row for %s",
                     params[0]);
        snprintf(err->sqlstate, sizeof(err->sqlstate), "P0001");
        snprintf(err->object, sizeof(err->object), "ordergate.hooks");
        return OG_ERR_DB;
    }
    if (strcmp(params[0], fake.locked) == 0) {
        og_error_set(err, OG_ERR_DB, true, "canceling statement due to lock timeout");
        snprintf(err->sqlstate, sizeof(err->sqlstate), "55P03");
        return OG_ERR_DB;
    }
    *res = PQmakeEmptyPGresult(NULL, PGRES_TUPLES_OK);
    assert_non_null(*res);
    for (int i = 0; i < 3; i++) {
        cols[i].columnid = i + 1;
        cols[i].typid = 25; /* text */
        cols[i].typlen = -1;
        cols[i].atttypmod = -1;
    }
    assert_true(PQsetResultAttrs(*res, 3, cols));
    for (int i = 0; i < 3; i++)
        assert_true(PQsetvalue(*res, 0, i, "paid", 4));
    return OG_OK;
}

/* commit.c's own statement (due_times) and claim_payment reach here: the first due_times_fail
 * due_times calls fail as a lost connection does, the later ones find no pending order (paid
 * meanwhile). */
enum og_status __wrap_db_call(struct db *db, const struct db_stmt *stmt, const char *const *params,
                              PGresult **res, struct og_error *err)
{
    (void)db;
    if (strcmp(stmt->name, "og_claim_payment_bounded") == 0 ||
        strcmp(stmt->name, "og_claim_payment") == 0)
        return fake_claim_payment(params, strcmp(stmt->name, "og_claim_payment") != 0, res, err);
    assert_string_equal(stmt->name, "og_due_times");
    if (fake.due_times++ < fake.due_times_fail) {
        og_error_set(err, OG_ERR_DB, true, "server closed the connection unexpectedly");
        snprintf(err->sqlstate, sizeof(err->sqlstate), "08006");
        return OG_ERR_DB;
    }
    *res = PQmakeEmptyPGresult(NULL, PGRES_TUPLES_OK);
    return *res != NULL ? OG_OK : OG_ERR_NOMEM;
}

struct fixture {
    struct og_config cfg;
    struct commit c;
    struct consumer_metrics m;
    struct delay_levels levels;
    bool db_ok, kafka_ok;
    char *topics[2];
};

static int fixture_setup(void **state)
{
    static struct fixture f;
    struct og_error err = {0};
    char errstr[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();

    memset(&f, 0, sizeof(f));
    memset(&fake, 0, sizeof(fake));
    watchdog_calls = 0;
    log_init("unit_batch", LOG_LVL_WARN);
    assert_int_equal(cfg_init(&f.cfg, &err), OG_OK);
    f.cfg.consumer.batch_size = 8;
    f.c.env.cfg = &f.cfg;
    assert_int_equal(rd_kafka_conf_set(conf, "group.id", "og-unit-batch", errstr, sizeof(errstr)),
                     RD_KAFKA_CONF_OK);
    f.c.env.rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
    assert_non_null(f.c.env.rk);
    /* Never connects: every call of it is wrapped above. */
    f.c.env.db = db_new("", NULL, "unit_batch", NULL, NULL);
    assert_non_null(f.c.env.db);
    assert_int_equal(commit_init(&f.c, 8, &err), OG_OK);
    /* The retry set keeps the consumer's own copies of the topic names. */
    f.topics[0] = TOPIC;
    f.topics[1] = PAYMENTS;
    f.c.env.topics = f.topics;
    f.c.env.ntopics = 2;
    f.c.env.levels = &f.levels;
    f.c.env.m = &f.m;
    f.c.env.db_ok = &f.db_ok;
    f.c.env.kafka_ok = &f.kafka_ok;
    f.c.env.progress = count_watchdog;
    *state = &f;
    return 0;
}

static int fixture_teardown(void **state)
{
    struct fixture *f = *state;

    commit_free(&f->c);
    db_free(f->c.env.db);
    rd_kafka_destroy(f->c.env.rk);
    cfg_free(&f->cfg);
    return 0;
}

static void add_cancel(struct commit *c, int32_t partition, int64_t offset, const char *order_no)
{
    struct batch_entry *e = batch_add(&c->batch, BATCH_CANCEL, TOPIC, partition, offset);

    assert_non_null(e);
    snprintf(e->order_no, sizeof(e->order_no), "%s", order_no);
    e->due_ms = 1;
}

/* The revoke callback flushes the batch: the claim goes through, the order is not due, and
 * due_times then fails. The partition is given up (its entries voided), and a cancel of a
 * partition we keep arrives. The next flush must claim that cancel and commit. */
static void test_cancel_after_failed_step_is_claimed(void **state)
{
    struct fixture *f = *state;
    struct commit *c = &f->c;

    fake.due_times_fail = 1;
    add_cancel(c, 0, 10, "N-1");
    assert_int_equal(commit_flush(c, 0), COMMIT_RETRY);
    assert_int_equal(fake.claims, 1);
    assert_string_equal(fake.claimed[0], "N-1");
    assert_int_equal(fake.due_times, 1);

    batch_void(&c->batch, TOPIC, 0);
    add_cancel(c, 1, 20, "A-2");
    assert_int_equal(batch_due_pending(&c->batch), 1);

    /* Retried a few times, as the loop does: never a wedge. */
    enum commit_result r = COMMIT_RETRY;
    for (int i = 0; i < 3 && r != COMMIT_DONE; i++)
        r = commit_flush(c, 0);
    assert_int_equal(r, COMMIT_DONE);
    assert_int_equal(fake.claims, 2);
    assert_string_equal(fake.claimed[1], "A-2");
    assert_int_equal(c->batch.n, 0);
    assert_int_equal(batch_due_pending(&c->batch), 0);
}

/* A revoke while the database is away voids the partition of a cancel not claimed yet, and no
 * live cancel is left to claim: the next flush finishes the voided entry and commits (it stored
 * nothing for it; the partition's next owner claims it). A flush that claimed nothing used to
 * leave the entry new, and every retry then refused to store past it, for good. */
static void test_voided_cancel_alone_is_finished(void **state)
{
    struct fixture *f = *state;
    struct commit *c = &f->c;

    add_cancel(c, 0, 10, "A-5");
    batch_void(&c->batch, TOPIC, 0);
    assert_int_equal(commit_flush(c, 0), COMMIT_DONE);
    assert_int_equal(fake.claims, 0);
    assert_int_equal(c->batch.n, 0);
}

/* Without a revoke: a cancel that joins a batch whose claim went through while a later step
 * failed is claimed on the next flush, and the earlier one is not claimed twice. */
static void test_claim_covers_only_new_entries(void **state)
{
    struct fixture *f = *state;
    struct commit *c = &f->c;

    fake.due_times_fail = 1;
    add_cancel(c, 0, 10, "N-3");
    assert_int_equal(commit_flush(c, 0), COMMIT_RETRY);
    add_cancel(c, 0, 11, "A-4");
    assert_int_equal(commit_flush(c, 0), COMMIT_DONE);
    assert_int_equal(fake.claims, 2);
    assert_string_equal(fake.claimed[0], "N-3");
    assert_string_equal(fake.claimed[1], "A-4");
    assert_int_equal(fake.due_times, 2);
    assert_int_equal(c->batch.n, 0);
    /* Every database answer proved progress to the watchdog, the failure did not. */
    assert_int_equal(watchdog_calls, 3);
}

static void add_payment(struct commit *c, int64_t offset, const char *order_no)
{
    struct batch_entry *e = batch_add(&c->batch, BATCH_PAYMENT, PAYMENTS, 0, offset);

    assert_non_null(e);
    snprintf(e->order_no, sizeof(e->order_no), "%s", order_no);
    snprintf(e->pay.order_no, sizeof(e->pay.order_no), "%s", order_no);
    snprintf(e->pay.txn_no, sizeof(e->pay.txn_no), "T-%s", order_no);
    snprintf(e->pay.channel, sizeof(e->pay.channel), "card");
    e->pay.amount_cents = 1000;
}

/* A payment held back: the batch commits without it, every other payment and cancel is done,
 * the cancel of its own order is not claimed (it waits behind the payment), and both wait in the
 * retry set. Then the payment goes through: it is claimed before that cancel. */
static void payment_held_back(struct commit *c)
{
    int64_t at = 0;

    /* Payments P-1 (held), P-2; cancels A-1, P-1 (its order's), A-2. */
    add_payment(c, 5, "P-1");
    add_payment(c, 6, "P-2");
    add_cancel(c, 0, 10, "A-1");
    add_cancel(c, 0, 11, "P-1");
    add_cancel(c, 0, 12, "A-2");
    assert_int_equal(commit_flush(c, 0), COMMIT_DONE);
    assert_string_equal(fake.paid, "P-1,P-2");
    /* The lock wait is the consumer's own short bound, whatever the session's. */
    assert_string_equal(fake.lock_wait, "100ms");
    assert_int_equal(fake.claims, 1);
    assert_string_equal(fake.claimed[0], "A-1,A-2");
    assert_int_equal(c->batch.n, 0);
    assert_true(retry_payment_held(&c->retry, "P-1", &at));
    assert_false(retry_payment_held(&c->retry, "P-2", NULL));
    assert_int_equal(c->retry.used, 2); /* the payment and the cancel behind it */
    /* Never past them: each partition's stored offset waits at its held message. */
    {
        int64_t floor = -1;
        assert_true(retry_floor(&c->retry, PAYMENTS, 0, &floor));
        assert_int_equal(floor, 5);
        assert_true(retry_floor(&c->retry, TOPIC, 0, &floor));
        assert_int_equal(floor, 11);
    }

    /* Another cancel of P-1 comes in meanwhile: it waits too. */
    add_cancel(c, 0, 13, "P-1");
    add_cancel(c, 0, 14, "A-3");
    assert_int_equal(commit_flush(c, 0), COMMIT_DONE);
    assert_int_equal(fake.claims, 2);
    assert_string_equal(fake.claimed[1], "A-3");

    /* Mended: the retries come round; the payment claims first and wins, the cancel follows. */
    fake.hook_fails[0] = '\0';
    fake.locked[0] = '\0';
    fake.first_cancel_step = fake.first_payment_step = 0;
    assert_int_equal(commit_take_retries(c, at + 60000), 3); /* a slot per batch it waited in */
    assert_int_equal(commit_flush(c, 0), COMMIT_DONE);
    assert_string_equal(fake.paid, "P-1,P-2,P-1");
    assert_int_equal(fake.claims, 3);
    assert_string_equal(fake.claimed[2], "P-1,P-1");
    assert_true(fake.first_payment_step > 0);
    assert_true(fake.first_cancel_step > fake.first_payment_step);
    assert_int_equal(c->retry.used, 0);
    assert_false(retry_payment_held(&c->retry, "P-1", NULL));
}

/* A paid hook that fails one payment holds back that order alone (it held every cancel of the
 * consumer for consumer.hook_retry_ms per such payment). */
static void test_payment_hook_failure_holds_its_order_only(void **state)
{
    struct fixture *f = *state;

    snprintf(fake.hook_fails, sizeof(fake.hook_fails), "P-1");
    payment_held_back(&f->c);
}

/* A payment whose order row another transaction holds locked: the same, for as long as it is
 * locked (it held every cancel as long as the lock). */
static void test_payment_locked_holds_its_order_only(void **state)
{
    struct fixture *f = *state;

    snprintf(fake.locked, sizeof(fake.locked), "P-1");
    payment_held_back(&f->c);
}

/* A payment whose row stays locked is never given up for it (only a hook failure has the
 * consumer.hook_retry_ms bound, consumer_hooks): a lock is not the payment's fault. */
static void test_payment_locked_never_given_up(void **state)
{
    struct fixture *f = *state;
    struct commit *c = &f->c;
    int slot = -1;

    f->cfg.consumer.hook_retry_ms = 60000;
    snprintf(fake.locked, sizeof(fake.locked), "P-9");
    add_payment(c, 7, "P-9");
    assert_int_equal(commit_flush(c, 0), COMMIT_DONE);
    for (size_t i = 0; i < c->retry.cap; i++)
        if (c->retry.slots[i].state == RETRY_WAITING)
            slot = (int)i;
    assert_true(slot >= 0);
    /* Locked for a day: still held back, retried at the busy backoff's cap. */
    c->retry.slots[slot].first_ms -= 86400000;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(commit_take_retries(c, c->retry.slots[slot].at_ms), 1);
        assert_int_equal(commit_flush(c, 0), COMMIT_DONE);
        assert_true(retry_payment_held(&c->retry, "P-9", NULL));
        assert_int_equal(c->retry.slots[slot].why, GATE_BUSY);
    }
    assert_true(c->retry.slots[slot].at_ms - c->retry.slots[slot].first_ms > 86400000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_voided_cancel_alone_is_finished, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_cancel_after_failed_step_is_claimed, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_claim_covers_only_new_entries, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_payment_hook_failure_holds_its_order_only,
                                        fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_payment_locked_holds_its_order_only, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_payment_locked_never_given_up, fixture_setup,
                                        fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
