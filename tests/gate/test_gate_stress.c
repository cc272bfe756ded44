/* Stress: cancels and payments on the same orders at once, around their
 * expiry instant, each thread on its own connection through the C client.
 *
 *   4 cancel threads  claim overlapping, shuffled batches (with repeats) of
 *                     orders sharing a few hot SKUs, as consumer and scanner;
 *   4 payment threads pay 3 orders in 4 with the same txn_no from every
 *                     thread (duplicate callbacks), a second txn_no for 1 in 5,
 *                     and hold 1 in 7 for a second first (payment page).
 *
 * Orders expire about 1.5 s after the threads start, while payments flow.
 * Afterwards: the invariants of schema/README.md through reconcile() (18 rows, no
 * violation), plus checks of what the callers were told against the
 * database: every order left pending_payment exactly once and exactly one
 * caller was told it won; every txn_no had exactly one non-duplicate answer
 * and every duplicate repeated it; stock per SKU; coupons; exceptions and
 * outbox events; and no error (deadlock or other) ever reached a caller.
 *
 * The second case runs the same race with a shop's hooks registered
 * (docs/integrate.md): SECURITY DEFINER functions that record each call and
 * write the shop's stock rows of the hot SKUs, in the documented lock order
 * (orders by number, then stock by sku). Every winner must call its hook
 * exactly once, and the hooks must add no deadlock and no error. */
#include <pthread.h>
#include <stdbool.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/clock.h"
#include "gate/gate_fixture.h"
#include "support/testutil.h"

#define N_ORDERS      600
#define N_CANCELLERS  4
#define N_PAYERS      4
#define RUN_MS        4000 /* cancel threads stop after this */
#define PAY_SPREAD_MS 2500 /* payment threads spread their calls over this */

struct order_track {
    char no[16];
    int64_t amount;
    atomic_int cancel_wins;   /* callers told "cancelled" */
    atomic_int pay_wins;      /* callers told "paid" */
    atomic_int first[2];      /* the non-duplicate answer per txn (T, U) */
    atomic_int nondup[2];     /* how many callers got a non-duplicate answer */
    atomic_uint dup_first[2]; /* bitmask of first_outcome values duplicates reported */
    atomic_int late, doubles; /* late_payment / double_payment answers */
};

struct stress {
    struct gfx *g;
    struct order_track orders[N_ORDERS];
    int64_t t0_ms;
    atomic_int errors;
    atomic_int bad_answers;
    atomic_int payers_done;
    atomic_long calls;
    char first_error[512];
    pthread_mutex_t lock;
};

struct worker {
    struct stress *s;
    int id;
    unsigned seed;
    pthread_t thread;
};

static void record_error(struct stress *s, const char *what, const struct og_error *err)
{
    if (atomic_fetch_add(&s->errors, 1) == 0) {
        pthread_mutex_lock(&s->lock);
        snprintf(s->first_error, sizeof(s->first_error), "%s: %s (sqlstate %s)", what, err->msg,
                 err->sqlstate);
        pthread_mutex_unlock(&s->lock);
    }
}

static void bad_answer(struct stress *s, const char *what)
{
    if (atomic_fetch_add(&s->bad_answers, 1) == 0) {
        pthread_mutex_lock(&s->lock);
        snprintf(s->first_error, sizeof(s->first_error), "inconsistent answer: %s", what);
        pthread_mutex_unlock(&s->lock);
    }
}

static struct db *worker_db(struct stress *s, const char *role, int id)
{
    char app[32];
    struct db_retry retry = {.max_attempts = 10, .base_ms = 5, .cap_ms = 200};
    struct db *db;

    snprintf(app, sizeof(app), "stress-%s-%d", role, id);
    db = db_new(s->g->t.conninfo, NULL, app, &retry, NULL);
    return db;
}

static void shuffle(int *a, int n, unsigned *seed)
{
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(rand_r(seed) % (unsigned)(i + 1)), t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

static int find_order(const char *no)
{
    int i = atoi(no + 1);
    return (no[0] == 'S' && i >= 0 && i < N_ORDERS) ? i : -1;
}

/* A claim_cancel answer must agree with the status it reports. */
static int cancel_row_consistent(const struct gate_cancel_row *r)
{
    switch (r->outcome) {
    case GATE_CANCELLED:
    case GATE_ALREADY_CANCELLED:
        return r->status == ORDER_CANCELLED;
    case GATE_ALREADY_PAID:
        return r->status == ORDER_PAID;
    case GATE_NOT_DUE:
    case GATE_BUSY: /* a payment or another batch held the row: still pending when answered */
        return r->status == ORDER_PENDING;
    default:
        return 0;
    }
}

static void *canceller_main(void *arg)
{
    struct worker *w = arg;
    struct stress *s = w->s;
    struct db *db = worker_db(s, "cancel", w->id);
    enum gate_source source = w->id % 2 ? GATE_SRC_TIMEOUT_SCANNER : GATE_SRC_TIMEOUT_CONSUMER;
    int idx[N_ORDERS + 32];
    const char *nos[N_ORDERS + 32];
    struct gate_cancel_row rows[N_ORDERS + 32];

    if (db == NULL) {
        atomic_fetch_add(&s->errors, 1);
        return NULL;
    }
    while (clock_wall_ms() - s->t0_ms < RUN_MS || atomic_load(&s->payers_done) < N_PAYERS) {
        /* An overlapping window of 50..200 orders, shuffled, with repeats. */
        int len = 50 + (int)(rand_r(&w->seed) % 151);
        int start = (int)(rand_r(&w->seed) % N_ORDERS), n = 0;
        size_t nrows = 0;
        struct og_error err = {0};

        for (int k = 0; k < len; k++)
            idx[n++] = (start + k) % N_ORDERS;
        for (int k = 0; k < 8; k++)
            idx[n++] = idx[rand_r(&w->seed) % (unsigned)len];
        shuffle(idx, n, &w->seed);
        for (int k = 0; k < n; k++)
            nos[k] = s->orders[idx[k]].no;
        atomic_fetch_add(&s->calls, 1);
        if (gate_claim_cancel(db, nos, (size_t)n, source, rows, &nrows, &err) != OG_OK) {
            record_error(s, "claim_cancel", &err);
            continue;
        }
        if (nrows != (size_t)len)
            bad_answer(s, "claim_cancel row count is not the number of distinct orders");
        for (size_t k = 0; k < nrows; k++) {
            int i = find_order(rows[k].order_no);
            if (i < 0 || !cancel_row_consistent(&rows[k])) {
                bad_answer(s, "claim_cancel row");
                continue;
            }
            if (rows[k].outcome == GATE_CANCELLED)
                atomic_fetch_add(&s->orders[i].cancel_wins, 1);
        }
        testutil_sleep_ms(5 + (long)(rand_r(&w->seed) % 20));
    }
    db_free(db);
    return NULL;
}

static void record_payment(struct stress *s, int i, int k, const struct gate_payment_result *r)
{
    struct order_track *o = &s->orders[i];

    if (r->outcome == GATE_DUPLICATE) {
        atomic_fetch_or(&o->dup_first[k], 1u << r->first_outcome);
        return;
    }
    atomic_fetch_add(&o->nondup[k], 1);
    atomic_store(&o->first[k], (int)r->outcome);
    switch (r->outcome) {
    case GATE_PAID:
        atomic_fetch_add(&o->pay_wins, 1);
        if (r->status != ORDER_PAID)
            bad_answer(s, "paid but status not paid");
        break;
    case GATE_LATE_PAYMENT:
        atomic_fetch_add(&o->late, 1);
        if (r->status != ORDER_CANCELLED)
            bad_answer(s, "late_payment but status not cancelled");
        break;
    case GATE_DOUBLE_PAYMENT:
        atomic_fetch_add(&o->doubles, 1);
        if (r->status != ORDER_PAID)
            bad_answer(s, "double_payment but status not paid");
        break;
    default:
        bad_answer(s, "unexpected payment outcome");
    }
}

static void *payer_main(void *arg)
{
    struct worker *w = arg;
    struct stress *s = w->s;
    struct db *db = worker_db(s, "pay", w->id);
    int idx[N_ORDERS], n = 0;
    long pause_us;

    if (db == NULL) {
        atomic_fetch_add(&s->errors, 1);
        atomic_fetch_add(&s->payers_done, 1);
        return NULL;
    }
    for (int i = 0; i < N_ORDERS; i++)
        if (i % 4 != 3)
            idx[n++] = i;
    shuffle(idx, n, &w->seed);
    pause_us = PAY_SPREAD_MS * 1000L / n;
    for (int k = 0; k < n; k++) {
        struct order_track *o = &s->orders[idx[k]];
        struct gate_payment_result r;
        struct og_error err = {0};
        char txn[24];

        if (idx[k] % 7 == 0) {
            enum gate_outcome held;
            atomic_fetch_add(&s->calls, 1);
            if (gate_hold(db, o->no, 1, &held, NULL, 0, &err) != OG_OK)
                record_error(s, "hold", &err);
            else if (held != GATE_HELD && held != GATE_NOT_PENDING)
                bad_answer(s, "hold outcome");
        }
        /* The same callback, delivered by every payer thread. */
        snprintf(txn, sizeof(txn), "T-%s", o->no);
        atomic_fetch_add(&s->calls, 1);
        if (gate_claim_payment(db, o->no, txn, o->amount, "card", &r, &err) != OG_OK)
            record_error(s, "claim_payment", &err);
        else
            record_payment(s, idx[k], 0, &r);
        /* A second transaction for some orders, from half the threads. */
        if (idx[k] % 5 == 0 && w->id % 2 == 0) {
            snprintf(txn, sizeof(txn), "U-%s", o->no);
            atomic_fetch_add(&s->calls, 1);
            if (gate_claim_payment(db, o->no, txn, o->amount, "wallet", &r, &err) != OG_OK)
                record_error(s, "claim_payment", &err);
            else
                record_payment(s, idx[k], 1, &r);
        }
        testutil_sleep_ms(pause_us / 1000);
    }
    db_free(db);
    atomic_fetch_add(&s->payers_done, 1);
    return NULL;
}

/* Cancels whatever is still pending once everything is due (held orders
 * included), as the scanner would; returns how many it cancelled. */
static int final_sweep(struct stress *s)
{
    const char *nos[N_ORDERS];
    struct gate_cancel_row rows[N_ORDERS];
    int swept = 0;

    for (int i = 0; i < N_ORDERS; i++)
        nos[i] = s->orders[i].no;
    for (int round = 0; round < 100; round++) {
        size_t nrows = 0;
        struct og_error err = {0};
        int pending = 0;

        if (gate_claim_cancel(s->g->db, nos, N_ORDERS, GATE_SRC_TIMEOUT_SCANNER, rows, &nrows,
                              &err) != OG_OK)
            fail_msg("final sweep: %s", err.msg);
        for (size_t k = 0; k < nrows; k++) {
            int i = find_order(rows[k].order_no);
            assert_true(i >= 0 && cancel_row_consistent(&rows[k]));
            if (rows[k].outcome == GATE_CANCELLED) {
                atomic_fetch_add(&s->orders[i].cancel_wins, 1);
                swept++;
            }
            pending += rows[k].outcome == GATE_NOT_DUE || rows[k].outcome == GATE_BUSY;
        }
        if (pending == 0)
            return swept;
        testutil_sleep_ms(100);
    }
    fail_msg("orders still not due after the sweep rounds");
    return swept;
}

static void place_orders(struct stress *s)
{
    struct gfx *g = s->g;
    char n[16];

    gfx_exec(g->sql,
             "INSERT INTO ordergate.inventory (sku, available) "
             "SELECT 'H' || i, 100000 FROM generate_series(0, 3) i "
             "UNION ALL SELECT 'C' || i, 100000 FROM generate_series(0, 19) i",
             NULL);
    snprintf(n, sizeof(n), "%d", N_ORDERS);
    gfx_exec(g->sql,
             "INSERT INTO ordergate.coupons (coupon_id) "
             "SELECT 'cp-' || i FROM generate_series(0, $1::int - 1) i WHERE i % 3 = 0",
             n, NULL);
    /* One transaction through the gate's own place_order. Hot SKUs H0..H3 are
     * in every order; amounts 1000..9000 straddle the auto-refund limit. */
    assert_int_equal(
        gfx_long(g->sql,
                 "SELECT count(*) FILTER (WHERE r = 'placed') FROM ("
                 " SELECT ordergate.place_order('S' || lpad(i::text, 4, '0'),"
                 "   (1000 + (i % 9) * 1000)::bigint,"
                 "   jsonb_build_array(jsonb_build_object('sku', 'H' || (i % 4), 'qty', 1 + i % 3),"
                 "                     jsonb_build_object('sku', 'H' || ((i + 1) % 4), 'qty', 1),"
                 "                     jsonb_build_object('sku', 'C' || (i % 20), 'qty', 2)),"
                 "   CASE WHEN i % 3 = 0 THEN 'cp-' || i END,"
                 "   now() + interval '1 hour') AS r"
                 " FROM generate_series(0, $1::int - 1) i) x",
                 n, NULL),
        N_ORDERS);
    for (int i = 0; i < N_ORDERS; i++) {
        snprintf(s->orders[i].no, sizeof(s->orders[i].no), "S%04d", i);
        s->orders[i].amount = 1000 + (i % 9) * 1000;
    }
}

/* The expiry instant, set right before the threads start so that it falls
 * while payments flow however long the placing took on a busy machine: 1.5 s
 * from now, spread over 270 ms. A pending order's expiry may move (that is
 * what hold does); its original expiry, which bounds holds, stays. */
static void arm_expiry(struct stress *s)
{
    gfx_exec(s->g->sql,
             "UPDATE ordergate.orders SET expire_at = now() + interval '1500 ms' "
             "+ (substr(order_no, 2)::int % 10) * interval '30 ms' "
             "WHERE status = 'pending_payment'",
             NULL);
}

/* A shop beside ordergate: its hooks record every call (a second call for
 * one order and event would violate the key and fail the claim) and move the
 * shop's own stock rows, locked in sku order after the orders. */
static const char stress_hooks_sql[] =
    "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'og_stress_shop') THEN "
    "  CREATE ROLE og_stress_shop NOLOGIN; END IF; END $$;"
    "GRANT ordergate_service TO og_stress_shop;"
    "CREATE SCHEMA shop AUTHORIZATION og_stress_shop;"
    "GRANT USAGE ON SCHEMA shop TO ordergate_owner;"
    "SET ROLE og_stress_shop;"
    "CREATE TABLE shop.calls (event text, order_no text, source text);"
    /* A transition happens once per order; a late payment once per payment. */
    "CREATE UNIQUE INDEX ON shop.calls (event, order_no) WHERE event <> 'late_payment';"
    "CREATE TABLE shop.stock (sku text PRIMARY KEY, moved bigint NOT NULL DEFAULT 0);"
    "INSERT INTO shop.stock (sku) SELECT sku FROM ordergate.inventory;"
    "CREATE FUNCTION shop.record(p_event text, p_nos text[], p_source text) RETURNS void "
    "LANGUAGE sql SECURITY DEFINER SET search_path = shop, pg_temp AS $f$"
    "  INSERT INTO shop.calls SELECT p_event, x, p_source FROM unnest(p_nos) x ORDER BY x;"
    "  SELECT 1 FROM shop.stock s WHERE s.sku IN (SELECT it.sku FROM ordergate.order_items it"
    "    WHERE it.order_no = ANY (p_nos)) AND p_event <> 'late_payment' ORDER BY s.sku FOR UPDATE;"
    "  UPDATE shop.stock s SET moved = s.moved + q.n FROM (SELECT it.sku, sum(it.qty) AS n"
    "    FROM ordergate.order_items it WHERE it.order_no = ANY (p_nos) GROUP BY it.sku) q"
    "   WHERE s.sku = q.sku AND p_event <> 'late_payment';"
    "$f$;"
    "CREATE FUNCTION shop.on_cancelled(order_nos text[], source text) RETURNS void LANGUAGE sql "
    "SECURITY DEFINER SET search_path = shop, pg_temp AS $f$ SELECT shop.record('cancelled', "
    "order_nos, source) $f$;"
    "CREATE FUNCTION shop.on_paid(order_nos text[], source text) RETURNS void LANGUAGE sql "
    "SECURITY DEFINER SET search_path = shop, pg_temp AS $f$ SELECT shop.record('paid', "
    "order_nos, source) $f$;"
    "CREATE FUNCTION shop.on_late(order_nos text[], source text) RETURNS void LANGUAGE sql "
    "SECURITY DEFINER SET search_path = shop, pg_temp AS $f$ SELECT shop.record('late_payment', "
    "order_nos, source) $f$;"
    "REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA shop FROM PUBLIC;"
    "GRANT EXECUTE ON FUNCTION shop.on_cancelled(text[],text), shop.on_paid(text[],text), "
    "shop.on_late(text[],text) TO ordergate_owner;"
    "RESET ROLE;"
    "SELECT ordergate.add_hook('cancelled', 'shop.on_cancelled(text[],text)'),"
    "       ordergate.add_hook('paid', 'shop.on_paid(text[],text)'),"
    "       ordergate.add_hook('late_payment', 'shop.on_late(text[],text)');";

static void stress_run(bool hooks)
{
    static struct stress s; /* large: keep it off the stack */
    struct worker cancellers[N_CANCELLERS], payers[N_PAYERS];
    int swept, paid = 0, cancelled = 0, late = 0, doubles = 0, retries;
    PGresult *res;
    int64_t t_end;

    memset(&s, 0, sizeof(s));
    pthread_mutex_init(&s.lock, NULL);
    s.g = gfx_new(hooks ? "gstressh" : "gstress");
    place_orders(&s);
    if (hooks) {
        /* Several statements: the simple protocol (no parameters). */
        res = PQexec(s.g->sql, stress_hooks_sql);
        if (PQresultStatus(res) != PGRES_TUPLES_OK)
            fail_msg("installing the shop's hooks failed: %s", PQerrorMessage(s.g->sql));
        PQclear(res);
    }
    arm_expiry(&s);
    s.t0_ms = clock_wall_ms();
    for (int i = 0; i < N_CANCELLERS; i++) {
        cancellers[i] = (struct worker){.s = &s, .id = i, .seed = 1000u + (unsigned)i};
        assert_int_equal(
            pthread_create(&cancellers[i].thread, NULL, canceller_main, &cancellers[i]), 0);
    }
    for (int i = 0; i < N_PAYERS; i++) {
        payers[i] = (struct worker){.s = &s, .id = i, .seed = 2000u + (unsigned)i};
        assert_int_equal(pthread_create(&payers[i].thread, NULL, payer_main, &payers[i]), 0);
    }
    for (int i = 0; i < N_PAYERS; i++)
        pthread_join(payers[i].thread, NULL);
    for (int i = 0; i < N_CANCELLERS; i++)
        pthread_join(cancellers[i].thread, NULL);
    t_end = clock_wall_ms();

    /* Nothing failed and nothing contradicted itself at the callers. */
    if (atomic_load(&s.errors) != 0 || atomic_load(&s.bad_answers) != 0)
        fail_msg("%d errors, %d inconsistent answers; first: %s", atomic_load(&s.errors),
                 atomic_load(&s.bad_answers), s.first_error);
    swept = final_sweep(&s);

    /* Every order left pending_payment exactly once, and exactly one caller
     * was told it won: the one the status log names. */
    res = PQexec(s.g->sql,
                 "SELECT o.order_no, o.status, count(l.id), min(l.source) "
                 "FROM ordergate.orders o LEFT JOIN ordergate.status_log l USING (order_no) "
                 "GROUP BY o.order_no, o.status ORDER BY o.order_no");
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    assert_int_equal(PQntuples(res), N_ORDERS);
    for (int r = 0; r < N_ORDERS; r++) {
        int i = find_order(PQgetvalue(res, r, 0));
        const char *status = PQgetvalue(res, r, 1);
        struct order_track *o;

        assert_true(i >= 0);
        o = &s.orders[i];
        if (atoi(PQgetvalue(res, r, 2)) != 1)
            fail_msg("%s: %s status_log rows", o->no, PQgetvalue(res, r, 2));
        if (strcmp(status, "paid") == 0) {
            paid++;
            if (atomic_load(&o->pay_wins) != 1 || atomic_load(&o->cancel_wins) != 0)
                fail_msg("%s paid: told paid %d times, cancelled %d times", o->no,
                         atomic_load(&o->pay_wins), atomic_load(&o->cancel_wins));
            assert_string_equal(PQgetvalue(res, r, 3), "payment_callback");
        } else if (strcmp(status, "cancelled") == 0) {
            cancelled++;
            if (atomic_load(&o->cancel_wins) != 1 || atomic_load(&o->pay_wins) != 0)
                fail_msg("%s cancelled: told cancelled %d times, paid %d times", o->no,
                         atomic_load(&o->cancel_wins), atomic_load(&o->pay_wins));
        } else {
            fail_msg("%s is still %s", o->no, status);
        }
        /* Each txn_no: one non-duplicate answer; duplicates repeated it. */
        for (int k = 0; k < 2; k++) {
            int expect_txn = i % 4 != 3 && (k == 0 || i % 5 == 0);
            int nd = atomic_load(&o->nondup[k]);
            unsigned dup = atomic_load(&o->dup_first[k]);
            if (nd != expect_txn)
                fail_msg("%s txn %d: %d non-duplicate answers", o->no, k, nd);
            if (nd == 1 && (dup & ~(1u << atomic_load(&o->first[k]))) != 0)
                fail_msg("%s txn %d: a duplicate reported another first outcome", o->no, k);
        }
        late += atomic_load(&o->late);
        doubles += atomic_load(&o->doubles);
    }
    PQclear(res);
    assert_int_equal(paid + cancelled, N_ORDERS);

    /* Payments in the database say what the callers were told. */
    assert_int_equal(
        gfx_long(s.g->sql, "SELECT count(*) FROM ordergate.payments WHERE outcome = 'paid'", NULL),
        paid);
    assert_int_equal(gfx_long(s.g->sql,
                              "SELECT count(*) FROM ordergate.exceptions WHERE kind = "
                              "'late_payment'",
                              NULL),
                     late);
    assert_int_equal(gfx_long(s.g->sql,
                              "SELECT count(*) FROM ordergate.exceptions WHERE kind = "
                              "'double_payment'",
                              NULL),
                     doubles);
    assert_int_equal(gfx_long(s.g->sql, "SELECT count(*) FROM ordergate.exceptions", NULL),
                     late + doubles);
    assert_int_equal(gfx_long(s.g->sql,
                              "SELECT count(*) FROM ordergate.exceptions WHERE resolution = "
                              "CASE WHEN amount_cents <= 5000 THEN 'auto_refund' "
                              "ELSE 'manual_review' END",
                              NULL),
                     late + doubles);
    /* Stock: each SKU is down by exactly the quantities of the paid orders. */
    assert_int_equal(gfx_long(s.g->sql,
                              "SELECT count(*) FROM ordergate.inventory i "
                              "WHERE i.available <> 100000 - coalesce((SELECT sum(it.qty) "
                              "  FROM ordergate.order_items it JOIN ordergate.orders o "
                              "  USING (order_no) WHERE o.status = 'paid' AND it.sku = i.sku), 0)",
                              NULL),
                     0);
    assert_int_equal(gfx_long(s.g->sql, "SELECT sum(available) FROM ordergate.inventory", NULL),
                     gfx_long(s.g->sql,
                              "SELECT 24 * 100000 - coalesce(sum(it.qty), 0) FROM "
                              "ordergate.order_items it JOIN ordergate.orders o USING (order_no) "
                              "WHERE o.status = 'paid'",
                              NULL));
    /* Coupons: used by paid orders, back for cancelled ones, none locked. */
    assert_int_equal(gfx_long(s.g->sql,
                              "SELECT count(*) FROM ordergate.coupons c JOIN ordergate.orders o "
                              "USING (coupon_id) WHERE c.state <> CASE o.status WHEN 'paid' THEN "
                              "'used' ELSE 'available' END",
                              NULL),
                     0);
    /* Outbox: one event per transition, one per exception. */
    assert_int_equal(gfx_long(s.g->sql,
                              "SELECT count(*) FROM ordergate.outbox WHERE event_type = "
                              "'order_paid'",
                              NULL),
                     paid);
    assert_int_equal(gfx_long(s.g->sql,
                              "SELECT count(*) FROM ordergate.outbox WHERE event_type = "
                              "'order_cancelled'",
                              NULL),
                     cancelled);
    assert_int_equal(gfx_long(s.g->sql, "SELECT count(*) FROM ordergate.outbox", NULL),
                     N_ORDERS + late + doubles);
    gfx_reconcile_clean(s.g->sql);
    if (hooks) {
        /* Each winner called its hook once with its source, each late
         * payment once per payment; the shop's stock moved by exactly the
         * winners' lines (cancelled and paid alike), nothing else was called. */
        assert_int_equal(
            gfx_long(s.g->sql,
                     "SELECT count(*) FROM ((SELECT CASE l.to_status WHEN 'paid' THEN "
                     "'paid' ELSE 'cancelled' END, l.order_no, l.source FROM "
                     "ordergate.status_log l UNION ALL SELECT "
                     "'late_payment', e.order_no, 'payment_callback' FROM "
                     "ordergate.exceptions e WHERE e.kind = 'late_payment') EXCEPT ALL "
                     "SELECT * FROM shop.calls) d",
                     NULL),
            0);
        assert_int_equal(gfx_long(s.g->sql, "SELECT count(*) FROM shop.calls", NULL),
                         N_ORDERS + late);
        assert_int_equal(gfx_long(s.g->sql,
                                  "SELECT count(*) FROM shop.stock s WHERE s.moved <> "
                                  "coalesce((SELECT sum(it.qty) FROM ordergate.order_items it "
                                  "JOIN shop.calls c ON c.order_no = it.order_no WHERE it.sku = "
                                  "s.sku AND c.event <> 'late_payment'), 0)",
                                  NULL),
                         0);
    }

    retries = gfx_log_count(s.g, "event=db_retry ", NULL);
    print_message("stress%s: %ld gate calls in %.1f s; paid %d, cancelled %d (%d by the final "
                  "sweep), late payments %d, double payments %d, retries inside db_call %d "
                  "(deadlocks %d), errors to callers 0\n",
                  hooks ? " with hooks" : "", atomic_load(&s.calls),
                  (double)(t_end - s.t0_ms) / 1000.0, paid, cancelled, swept, late, doubles,
                  retries, gfx_log_count(s.g, "event=db_retry ", "sqlstate=40P01", NULL));
    /* The run raced for real: both sides won some, and payments lost some. */
    assert_true(paid > 0);
    assert_true(cancelled - swept > 0);
    gfx_free(s.g);
    pthread_mutex_destroy(&s.lock);
}

static void test_stress_cancel_vs_pay(void **state)
{
    (void)state;
    stress_run(false);
}

static void test_stress_with_hooks(void **state)
{
    (void)state;
    stress_run(true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_stress_cancel_vs_pay, gfx_teardown),
        cmocka_unit_test_teardown(test_stress_with_hooks, gfx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
