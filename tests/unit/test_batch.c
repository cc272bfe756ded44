/* consumer/batch.c without a database or a broker: the build links this test with
 * --wrap=gate_claim_cancel and --wrap=db_call, so the gate's answers and the failures of
 * single commit steps are chosen here. The Kafka handle only receives the stored offsets
 * (it has no brokers and never connects). */
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
#include "consumer/consumer.h"

#define TOPIC "og.unit.cancel"

enum og_status __wrap_gate_claim_cancel(struct db *db, const char *const *order_nos, size_t n,
                                        enum gate_source source, struct gate_cancel_row *rows,
                                        size_t *nrows, struct og_error *err);
enum og_status __wrap_db_call(struct db *db, const struct db_stmt *stmt, const char *const *params,
                              PGresult **res, struct og_error *err);

/* loop.c's, wrapped: counts the pings after database answers. */
static int watchdog_calls;

void __wrap_consumer_watchdog(struct consumer *c);
void __wrap_consumer_watchdog(struct consumer *c)
{
    (void)c;
    watchdog_calls++;
}

/* What the wrapped calls saw and answer. */
static struct {
    int claims;           /* gate_claim_cancel calls */
    char claimed[8][256]; /* the order numbers of each call, comma-separated */
    int due_times;        /* due_times statements */
    int due_times_fail;   /* this many of them fail first (retriable) */
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
    for (size_t i = 0; i < n; i++) {
        size_t used = strlen(list);
        snprintf(list + used, sizeof(fake.claimed[0]) - used, "%s%s", i ? "," : "", order_nos[i]);
        snprintf(rows[i].order_no, sizeof(rows[i].order_no), "%s", order_nos[i]);
        rows[i].outcome = order_nos[i][0] == 'N' ? GATE_NOT_DUE : GATE_CANCELLED;
        rows[i].status = order_nos[i][0] == 'N' ? ORDER_PENDING : ORDER_CANCELLED;
    }
    *nrows = n;
    fake.claims++;
    return OG_OK;
}

/* Only batch.c's own statement (due_times) reaches here: the first due_times_fail calls
 * fail as a lost connection does, the later ones find no pending order (paid meanwhile). */
enum og_status __wrap_db_call(struct db *db, const struct db_stmt *stmt, const char *const *params,
                              PGresult **res, struct og_error *err)
{
    (void)db;
    (void)params;
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
    struct consumer c;
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
    f.cfg.batch_size = 8;
    f.c.cfg = &f.cfg;
    assert_int_equal(rd_kafka_conf_set(conf, "group.id", "og-unit-batch", errstr, sizeof(errstr)),
                     RD_KAFKA_CONF_OK);
    f.c.rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
    assert_non_null(f.c.rk);
    /* Never connects: every call of it is wrapped above. */
    f.c.db = db_new("", NULL, "unit_batch", NULL, NULL);
    assert_non_null(f.c.db);
    f.c.rows = calloc(8, sizeof(*f.c.rows));
    f.c.nos = calloc(8, sizeof(*f.c.nos));
    f.c.row_seen = calloc(8, sizeof(*f.c.row_seen));
    assert_non_null(f.c.rows);
    assert_non_null(f.c.nos);
    assert_non_null(f.c.row_seen);
    assert_int_equal(batch_init(&f.c.batch, 8, &err), OG_OK);
    *state = &f;
    return 0;
}

static int fixture_teardown(void **state)
{
    struct fixture *f = *state;

    batch_free(&f->c.batch);
    free(f->c.rows);
    free(f->c.nos);
    free(f->c.row_seen);
    db_free(f->c.db);
    rd_kafka_destroy(f->c.rk);
    cfg_free(&f->cfg);
    return 0;
}

static void add_cancel(struct consumer *c, int32_t partition, int64_t offset, const char *order_no)
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
    struct consumer *c = &f->c;

    fake.due_times_fail = 1;
    add_cancel(c, 0, 10, "N-1");
    assert_int_equal(batch_flush(c, 0), FLUSH_RETRY);
    assert_int_equal(fake.claims, 1);
    assert_string_equal(fake.claimed[0], "N-1");
    assert_int_equal(fake.due_times, 1);

    batch_void(&c->batch, TOPIC, 0);
    add_cancel(c, 1, 20, "A-2");
    assert_int_equal(batch_due_pending(&c->batch), 1);

    /* Retried a few times, as the loop does: never a wedge. */
    enum flush_result r = FLUSH_RETRY;
    for (int i = 0; i < 3 && r != FLUSH_DONE; i++)
        r = batch_flush(c, 0);
    assert_int_equal(r, FLUSH_DONE);
    assert_int_equal(fake.claims, 2);
    assert_string_equal(fake.claimed[1], "A-2");
    assert_int_equal(c->batch.n, 0);
    assert_int_equal(batch_due_pending(&c->batch), 0);
}

/* Without a revoke: a cancel that joins a batch whose claim went through while a later step
 * failed is claimed on the next flush, and the earlier one is not claimed twice. */
static void test_claim_covers_only_new_entries(void **state)
{
    struct fixture *f = *state;
    struct consumer *c = &f->c;

    fake.due_times_fail = 1;
    add_cancel(c, 0, 10, "N-3");
    assert_int_equal(batch_flush(c, 0), FLUSH_RETRY);
    add_cancel(c, 0, 11, "A-4");
    assert_int_equal(batch_flush(c, 0), FLUSH_DONE);
    assert_int_equal(fake.claims, 2);
    assert_string_equal(fake.claimed[0], "N-3");
    assert_string_equal(fake.claimed[1], "A-4");
    assert_int_equal(fake.due_times, 2);
    assert_int_equal(c->batch.n, 0);
    /* Every database answer proved progress to the watchdog, the failure did not. */
    assert_int_equal(watchdog_calls, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cancel_after_failed_step_is_claimed, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_claim_covers_only_new_entries, fixture_setup,
                                        fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
