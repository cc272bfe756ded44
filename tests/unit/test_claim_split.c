/* A claim split across sessions (consumer/commit.c's step 2 with consumer/claim_pool.c), without a
 * database: the build wraps gate_claim_cancel (the gate, answered here from whichever thread
 * calls it), db_connect (a worker's session "connects" at once) and claim_pool_submit (which
 * here returns only once the worker has answered the part, the order a loaded machine may give:
 * the worker first, the loop's own part after). Checks that every part's answer is taken, each
 * order claimed by one part once, and that a part that fails leaves exactly its own entries
 * unclaimed while the others keep their outcomes, and no offset is stored until it commits; and
 * that claims overlap across batches: a batch left in flight is finished, before the next one,
 * by the next flush, and one whose part failed is kept with the next one behind it. */
#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/cfg.h"
#include "common/clock.h"
#include "common/log.h"
#include "consumer/claim_pool.h"
#include "consumer/commit.h"

#define TOPIC  "og.unit.cancel"
#define ORDERS 100

enum og_status __wrap_gate_claim_cancel(struct db *db, const char *const *order_nos, size_t n,
                                        enum gate_source source, struct gate_cancel_row *rows,
                                        size_t *nrows, struct og_error *err);
enum og_status __wrap_db_connect(struct db *db, struct og_error *err);
bool __wrap_claim_pool_submit(struct claim_pool *pool, int worker, struct claim_pool_part *part);
bool __real_claim_pool_submit(struct claim_pool *pool, int worker, struct claim_pool_part *part);

/* What the wrapped gate saw, from every thread. */
static struct {
    pthread_mutex_t lock;
    pthread_t loop; /* the test's own thread: the consume loop's */
    int claims, worker_claims;
    int times_claimed[2 * ORDERS + 1]; /* per order A-i */
    bool worker_fails; /* a worker's claim fails as a deadlock with the other part would */
} fake = {.lock = PTHREAD_MUTEX_INITIALIZER};

enum og_status __wrap_gate_claim_cancel(struct db *db, const char *const *order_nos, size_t n,
                                        enum gate_source source, struct gate_cancel_row *rows,
                                        size_t *nrows, struct og_error *err)
{
    bool worker = !pthread_equal(pthread_self(), fake.loop);

    (void)db;
    (void)source;
    pthread_mutex_lock(&fake.lock);
    fake.claims++;
    fake.worker_claims += worker;
    if (worker && fake.worker_fails) {
        pthread_mutex_unlock(&fake.lock);
        og_error_set(err, OG_ERR_DB, true, "deadlock detected");
        snprintf(err->sqlstate, sizeof(err->sqlstate), "40P01");
        *nrows = 0;
        return OG_ERR_DB;
    }
    for (size_t i = 0; i < n; i++) {
        fake.times_claimed[atoi(order_nos[i] + 2)]++;
        snprintf(rows[i].order_no, sizeof(rows[i].order_no), "%s", order_nos[i]);
        rows[i].outcome = GATE_CANCELLED;
        rows[i].status = ORDER_CANCELLED;
    }
    pthread_mutex_unlock(&fake.lock);
    *nrows = n;
    return OG_OK;
}

enum og_status __wrap_db_connect(struct db *db, struct og_error *err)
{
    (void)db;
    (void)err;
    return OG_OK;
}

bool __wrap_claim_pool_submit(struct claim_pool *pool, int worker, struct claim_pool_part *part)
{
    bool handed = __real_claim_pool_submit(pool, worker, part);
    int64_t until = clock_mono_ms() + 5000;

    while (handed && !__atomic_load_n(&part->done, __ATOMIC_ACQUIRE) && clock_mono_ms() < until)
        clock_sleep_until_flag(1, NULL, NULL);
    return handed;
}

struct fixture {
    struct og_config cfg;
    struct commit c;
    struct consumer_metrics m;
    struct delay_levels levels;
    struct claim_pool *pool;
    bool db_ok, kafka_ok;
    char *topics[1];
};

static int fixture_setup(void **state)
{
    static struct fixture f;
    struct og_error err = {0};
    char errstr[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();

    memset(&f, 0, sizeof(f));
    pthread_mutex_lock(&fake.lock);
    fake.claims = fake.worker_claims = 0;
    memset(fake.times_claimed, 0, sizeof(fake.times_claimed));
    fake.worker_fails = false;
    fake.loop = pthread_self();
    pthread_mutex_unlock(&fake.lock);
    log_init("unit_claim_split", LOG_LVL_ERROR);
    assert_int_equal(cfg_init(&f.cfg, &err), OG_OK);
    f.cfg.consumer.batch_size = 2 * ORDERS;
    f.c.env.cfg = &f.cfg;
    assert_int_equal(rd_kafka_conf_set(conf, "group.id", "og-unit-split", errstr, sizeof(errstr)),
                     RD_KAFKA_CONF_OK);
    f.c.env.rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
    assert_non_null(f.c.env.rk);
    f.c.env.db = db_new("", NULL, "unit_claim_split", NULL, NULL);
    assert_non_null(f.c.env.db);
    assert_int_equal(commit_init(&f.c, 2 * ORDERS, &err), OG_OK);
    f.topics[0] = TOPIC;
    f.c.env.topics = f.topics;
    f.c.env.ntopics = 1;
    f.c.env.levels = &f.levels;
    f.c.env.m = &f.m;
    f.c.env.db_ok = &f.db_ok;
    f.c.env.kafka_ok = &f.kafka_ok;
    assert_int_equal(claim_pool_new(&f.cfg, 1, 5000, NULL, NULL, NULL, &f.pool, &err), OG_OK);
    f.c.env.claim_pool = f.pool;
    /* The worker starts with the first look and connects on its thread. */
    for (int i = 0; i < 500 && claim_pool_ready(f.pool, NULL) == 0; i++)
        clock_sleep_until_flag(10, NULL, NULL);
    assert_int_equal(claim_pool_ready(f.pool, NULL), 1);
    *state = &f;
    return 0;
}

static int fixture_teardown(void **state)
{
    struct fixture *f = *state;

    assert_true(claim_pool_stop(&f->pool, clock_mono_ms() + 5000));
    commit_free(&f->c);
    db_free(f->c.env.db);
    rd_kafka_destroy(f->c.env.rk);
    cfg_free(&f->cfg);
    return 0;
}

static void add_cancels_from(struct commit *c, int first)
{
    for (int i = first; i < first + ORDERS; i++) {
        struct batch_entry *e = batch_add(&c->batch, BATCH_CANCEL, TOPIC, i % 2, 1000 + i);
        assert_non_null(e);
        snprintf(e->order_no, sizeof(e->order_no), "A-%d", i);
        e->due_ms = 1;
    }
}

static void add_cancels(struct commit *c)
{
    add_cancels_from(c, 1);
}

/* The worker's claims succeed again, and its session is back. */
static void worker_mended(struct fixture *f)
{
    pthread_mutex_lock(&fake.lock);
    fake.worker_fails = false;
    pthread_mutex_unlock(&fake.lock);
    for (int i = 0; i < 500 && claim_pool_ready(f->pool, NULL) == 0; i++)
        clock_sleep_until_flag(10, NULL, NULL);
}

/* Two parts, the worker's answered first: both answers are taken, each order claimed once. */
static void test_split_takes_every_part(void **state)
{
    struct fixture *f = *state;

    add_cancels(&f->c);
    assert_int_equal(commit_flush(&f->c, 0), COMMIT_DONE);
    assert_int_equal(fake.claims, 2);
    assert_int_equal(fake.worker_claims, 1);
    for (int i = 1; i <= ORDERS; i++)
        assert_int_equal(fake.times_claimed[i], 1);
    assert_int_equal(f->c.batch.n, 0); /* stored and cleared */
    assert_true(f->db_ok);
}

/* The worker's part fails (40P01, retriable: a deadlock, which the parts' restock in sku order
 * should never cause, but a shop's hook or trigger could): its entries stay unclaimed, the loop's
 * part keeps its outcomes, the batch is not stored; the retry claims the failed part's orders
 * only. (A lost connection, the other retriable failure, is consumer_split's.) */
static void test_split_failed_part_is_retried_alone(void **state)
{
    struct fixture *f = *state;
    int unclaimed = 0, loop_part = 0;

    fake.worker_fails = true;
    add_cancels(&f->c);
    assert_int_equal(commit_flush(&f->c, 0), COMMIT_RETRY);
    assert_int_equal(f->c.batch.n, ORDERS); /* nothing stored */
    for (size_t i = 0; i < f->c.batch.n; i++) {
        const struct batch_entry *e = &f->c.batch.e[i];
        int k = atoi(e->order_no + 2);
        if (e->state == BATCH_NEW) {
            unclaimed++;
            assert_int_equal(fake.times_claimed[k], 0);
        } else {
            loop_part++;
            assert_int_equal(e->state, BATCH_DONE);
            assert_int_equal(e->outcome, GATE_CANCELLED);
            assert_int_equal(fake.times_claimed[k], 1);
        }
    }
    assert_true(unclaimed > 0 && loop_part > 0);
    assert_int_equal(unclaimed + loop_part, ORDERS);
    assert_false(f->db_ok);

    /* The worker's session is back; the retry claims what is left, once. */
    worker_mended(f);
    assert_int_equal(commit_flush(&f->c, 0), COMMIT_DONE);
    for (int i = 1; i <= ORDERS; i++)
        assert_int_equal(fake.times_claimed[i], 1);
    assert_int_equal(f->c.batch.n, 0);
}

/* Two batches through commit_flush_overlap: the first is left in flight (its worker's part out,
 * nothing stored), the second's flush finishes the first and leaves the second in flight, and a
 * last commit_flush finishes it: every order claimed once, on the part its hash names. */
static void test_overlap_finishes_in_order(void **state)
{
    struct fixture *f = *state;

    add_cancels_from(&f->c, 1);
    assert_int_equal(commit_flush_overlap(&f->c, 0), COMMIT_DONE);
    assert_int_equal(f->c.flight.n, ORDERS); /* in flight: not stored */
    assert_int_equal(f->c.batch.n, 0);
    assert_int_equal(commit_in_flight(&f->c), 1);
    assert_int_equal(fake.claims, 2);
    add_cancels_from(&f->c, ORDERS + 1);
    assert_int_equal(commit_flush_overlap(&f->c, 0), COMMIT_DONE);
    assert_int_equal(fake.claims, 4);
    assert_int_equal(fake.worker_claims, 2);
    assert_int_equal(f->c.flight.n, ORDERS); /* the second; the first stored and cleared */
    assert_int_equal(f->c.flight.e[0].offset, 1000 + ORDERS + 1);
    assert_true(commit_flight_answered(&f->c));
    assert_int_equal(commit_flush(&f->c, 0), COMMIT_DONE);
    assert_int_equal(f->c.flight.n, 0);
    assert_int_equal(commit_in_flight(&f->c), 0);
    for (int i = 1; i <= 2 * ORDERS; i++)
        assert_int_equal(fake.times_claimed[i], 1);
}

/* The worker's part of the batch in flight fails: the next flush keeps both batches (the one in
 * flight first, nothing stored, the second's answers read), and the retry claims what is left of
 * the first, then of the second, each order once. */
static void test_overlap_failed_flight_keeps_both(void **state)
{
    struct fixture *f = *state;

    fake.worker_fails = true;
    add_cancels_from(&f->c, 1);
    assert_int_equal(commit_flush_overlap(&f->c, 0), COMMIT_DONE);
    assert_int_equal(f->c.flight.n, ORDERS);
    add_cancels_from(&f->c, ORDERS + 1);
    assert_int_equal(commit_flush_overlap(&f->c, 0), COMMIT_RETRY);
    assert_int_equal(f->c.flight.n, ORDERS);
    assert_int_equal(f->c.batch.n, ORDERS);
    assert_int_equal(f->c.flight.e[0].offset, 1000 + 1);
    /* The second batch's answers were read: none of its parts is out while the loop backs off. */
    assert_int_equal(commit_in_flight(&f->c), 1);
    assert_false(f->c.claim->started);

    worker_mended(f);
    assert_int_equal(commit_flush(&f->c, 0), COMMIT_DONE);
    assert_int_equal(f->c.flight.n, 0);
    assert_int_equal(f->c.batch.n, 0);
    for (int i = 1; i <= 2 * ORDERS; i++)
        assert_int_equal(fake.times_claimed[i], 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_split_takes_every_part, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_split_failed_part_is_retried_alone, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_overlap_finishes_in_order, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_overlap_failed_flight_keeps_both, fixture_setup,
                                        fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
