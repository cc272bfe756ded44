/* What the drill puts in the database before the race: stock for the hot SKUs, the coupons,
 * every order placed through the gate in its currency, allowing parts or not (several sessions
 * at once), then the deadlines moved to
 * the planned due times. Also opens the drill's database sessions, for every file that needs
 * one, and puts back a setting a file changed for the drill's time. It must not touch the broker,
 * the children or the gate's answers of the race. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/pgarray.h"
#include "common/signals.h"
#include "tools/ctl/drill/drill.h"

enum og_status drill_setup_db(const struct drill *d, const char *app, struct db **db,
                              struct og_error *err)
{
    /* The drill's own sessions set up and read back; the bounds are the services'. */
    const struct cfg_db_open_opts opts = {.no_bounds = true};

    *db = NULL;
    if (cfg_db_open(d->cfg, app, &opts, &signals_stop, db, err) != OG_OK)
        return err->status;
    if (db_connect(*db, err) != OG_OK) {
        db_free(*db);
        *db = NULL;
        return err->status;
    }
    return OG_OK;
}

enum og_status drill_setup_restore_setting(struct db *db, const struct db_stmt *stmt,
                                           const char *name, const char *drill_value,
                                           const char *before, struct og_error *err)
{
    if (db == NULL)
        og_error_set(err, OG_ERR_DB, false, "no database connection");
    else if (db_call(db, stmt, (const char *[]){before}, NULL, err) == OG_OK)
        return OG_OK;
    og_error_prefix(err, "%s is still '%s', it was '%s' before the drill", name, drill_value,
                    before);
    snprintf(err->msg + strlen(err->msg), sizeof(err->msg) - strlen(err->msg),
             " (SELECT ordergate.set_setting('%s', '%s'))", name, before);
    return err->status;
}

static const struct db_stmt drill_setup_stmt_stock = {
    "drill_stock", "SELECT ordergate.add_stock($1, $2::bigint)", 2};
static const struct db_stmt drill_setup_stmt_coupon = {"drill_coupon",
                                                       "SELECT ordergate.add_coupon($1)", 1};

/* One placing thread: the orders i with i % payers == index. */
struct drill_setup_worker {
    struct drill *d;
    int index;
    long done;
    struct og_error err; /* the first failure; status OG_OK when none */
};

static void *drill_setup_place_worker(void *arg)
{
    struct drill_setup_worker *w = arg;
    struct drill *d = w->d;
    struct db *db = NULL;
    char expire[32], items[160];

    if (drill_setup_db(d, "ordergatectl-drill-place", &db, &w->err) != OG_OK)
        return NULL;
    /* Nothing is set on these sessions (no synchronous_commit = off to place faster): a
     * transaction pooler may be in front whatever database.pool_mode says, and a session
     * setting would stay on a server connection that others get next. */
    for (long i = w->index; i < d->o.orders && !signals_stop; i += d->o.payers) {
        struct drill_order *o = &d->orders[i];
        enum gate_outcome out = GATE_UNKNOWN;

        if (o->coupon[0] != '\0' && db_call(db, &drill_setup_stmt_coupon,
                                            (const char *[]){o->coupon}, NULL, &w->err) != OG_OK) {
            og_error_prefix(&w->err, "coupon %s", o->coupon);
            break;
        }
        snprintf(items, sizeof(items), "[{\"sku\":\"%ssku%02d\",\"qty\":%d}]", d->prefix, o->sku,
                 o->qty);
        /* Placement happens before T is fixed: give a far deadline now, then
         * move every order to its planned due time in one statement. With
         * the database scheduling, the deadline place_order is given is the
         * one its cancel message carries: T is fixed before placement. */
        clock_format_iso(d->o.schedule_in_db ? o->due_ms : clock_wall_ms() + 3600 * 1000, expire,
                         sizeof(expire));
        if (gate_order_place(db,
                             &(struct gate_order){.order_no = o->order_no,
                                                  .amount_cents = o->amount,
                                                  .items_json = items,
                                                  .coupon_id = o->coupon[0] ? o->coupon : NULL,
                                                  .expire_at = expire,
                                                  .currency = o->currency,
                                                  .allow_partial = o->parts > 0},
                             &out, &w->err) != OG_OK) {
            og_error_prefix(&w->err, "place %s", o->order_no);
            break;
        }
        if (out != GATE_PLACED) {
            og_error_set(&w->err, OG_ERR_DB, false, "place %s: %s", o->order_no,
                         gate_outcome_str(out));
            break;
        }
        w->done++;
    }
    db_free(db);
    return NULL;
}

enum og_status drill_setup_place(struct drill *d, struct db *db, struct og_error *err)
{
    pthread_t tids[DRILL_MAX_PAYERS];
    struct drill_setup_worker w[DRILL_MAX_PAYERS];
    int nthreads = d->o.payers, started = 0;
    long placed = 0;
    int64_t t0 = clock_mono_ms();
    enum og_status st = OG_OK;

    for (int s = 0; s < d->o.skus; s++) {
        char sku[48], qty[24];
        snprintf(sku, sizeof(sku), "%ssku%02d", d->prefix, s);
        snprintf(qty, sizeof(qty), "%ld", d->o.orders * 3 + 10);
        if (db_call(db, &drill_setup_stmt_stock, (const char *[]){sku, qty}, NULL, err) != OG_OK) {
            og_error_prefix(err, "add_stock");
            return err->status;
        }
    }
    for (int t = 0; t < nthreads; t++) {
        w[t] = (struct drill_setup_worker){.d = d, .index = t};
        if (pthread_create(&tids[t], NULL, drill_setup_place_worker, &w[t]) != 0) {
            st = og_error_set(err, OG_ERR_INTERNAL, false, "cannot start a placing thread");
            break;
        }
        started++;
    }
    for (int t = 0; t < started; t++) {
        pthread_join(tids[t], NULL);
        placed += w[t].done;
        if (st == OG_OK && w[t].err.status != OG_OK) {
            *err = w[t].err;
            st = err->status;
        }
    }
    if (st == OG_OK && placed != d->o.orders)
        st = og_error_set(err, signals_stop ? OG_ERR_STOPPED : OG_ERR_INTERNAL, false,
                          "placed %ld of %ld orders", placed, d->o.orders);
    if (st != OG_OK)
        return st;
    drill_report_progress(d, "placed %ld orders on %d SKUs in %.1fs", placed, d->o.skus,
                          (double)(clock_mono_ms() - t0) / 1000.0);
    return OG_OK;
}

/* Sets every drill order's expire_at to T + its offset, once placement is
 * over, so that no order falls due while others are still being placed.
 * original_expire_at stays at placement time + 1 h (it only bounds holds).
 * Direct writes to orders are the owner's privilege: the drill runs as an
 * operator, never as the service role. */
static const struct db_stmt drill_setup_stmt_due = {
    "drill_due",
    "UPDATE ordergate.orders o SET expire_at = to_timestamp(d.ms / 1000.0) "
    "  FROM unnest($1::text[], $2::bigint[]) AS d(order_no, ms) "
    " WHERE o.order_no = d.order_no AND o.status = 'pending_payment'",
    2};

enum og_status drill_setup_due(const struct drill *d, struct db *db, struct og_error *err)
{
    struct pgarray names, times;
    enum og_status st = OG_OK;

    pgarray_init(&names);
    pgarray_init(&times);
    for (long i = 0; i < d->o.orders; i++) {
        pgarray_append(&names, d->orders[i].order_no);
        pgarray_append_int(&times, d->orders[i].due_ms);
    }
    if (pgarray_str(&names) == NULL || pgarray_str(&times) == NULL)
        st = og_error_set(err, OG_ERR_NOMEM, false, "setting due times: out of memory");
    else if (db_call(db, &drill_setup_stmt_due,
                     (const char *[]){pgarray_str(&names), pgarray_str(&times)}, NULL,
                     err) != OG_OK) {
        og_error_prefix(err, "setting due times");
        st = err->status;
    }
    pgarray_free(&names);
    pgarray_free(&times);
    return st;
}
