/* The race: --payers workers send the planned payment callbacks (duplicated, retried with the
 * same transaction number, a second transaction, one in another currency, parts), charges begun
 * before the deadline and captured or failed after it, holds, manual closes and staff acts
 * (releases, amendments, deadline changes) at their time around T, while the triggers cancel; then
 * the wait until the triggers have drained, with a consumer SIGKILLed and restarted now and then.
 * Owns the gate's answers in each order's record (each order belongs to one worker). It must not
 * judge the answers (ledger.c). */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/signals.h"
#include "tools/ctl/drill/drill.h"

/* One payer: the actions of the orders i with i % payers == index. */
struct drill_race_worker {
    struct drill *d;
    int index;
};

/* Counts a repeated call; returns the answer a payment's first sending stands for: when the
 * call was repeated (the connection was lost, perhaps after the commit) a "duplicate" is the
 * repeat meeting the attempt that had committed, whose outcome it carries. */
static enum gate_outcome drill_race_answer(struct drill_order *o, struct db *db,
                                           const struct gate_payment_result *r, bool first_sending)
{
    if (db_last_attempts(db) <= 1)
        return r->outcome;
    o->repeats++;
    return first_sending && r->outcome == GATE_DUPLICATE ? r->first_outcome : r->outcome;
}

/* A gate call that failed: counted on the order (a ledger violation), said on stderr. */
static void drill_race_error(struct drill_order *o, struct og_error *err)
{
    o->errors++;
    if (err->msg[0] != '\0')
        drill_report_finding("%s: %s", o->order_no, err->msg);
    og_error_clear(err);
}

/* Another currency than the order's, for a payment that must not claim it. */
static const char *drill_race_other_currency(const struct drill_order *o)
{
    return strcmp(o->currency, "EUR") == 0 ? "USD" : "EUR";
}

static void drill_race_pay(struct db *db, struct drill_order *o, uint64_t *rng)
{
    char txn[64], txn2[64];
    struct gate_payment_result r = {0};
    struct og_error err = {0};

    if (o->mismatch) {
        /* The customer's bank answers in another currency: never a claim. */
        snprintf(txn, sizeof(txn), "%s-tx", o->order_no);
        if (gate_payment_claim(db,
                               &(struct gate_payment){.order_no = o->order_no,
                                                      .txn_no = txn,
                                                      .amount_cents = o->amount,
                                                      .channel = "drill",
                                                      .currency = drill_race_other_currency(o)},
                               &r, &err) != OG_OK)
            drill_race_error(o, &err);
        else
            o->mismatch_out = drill_race_answer(o, db, &r, true);
    }
    snprintf(txn, sizeof(txn), "%s-t1", o->order_no);
    if (gate_claim_payment(db, o->order_no, txn, o->amount, "drill", &r, &err) != OG_OK) {
        drill_race_error(o, &err);
        return;
    }
    o->pay1 = drill_race_answer(o, db, &r, true);
    if (o->retry_cb) {
        /* The first answer was lost on the way back (client timeout); the
         * channel retries with the same transaction number a moment later,
         * while cancels keep running. */
        usleep((useconds_t)drill_plan_rng_range(rng, 0, 300) * 1000);
        if (gate_claim_payment(db, o->order_no, txn, o->amount, "drill", &r, &err) != OG_OK)
            drill_race_error(o, &err);
        o->pay_retry = drill_race_answer(o, db, &r, false);
        o->pay_retry_first = r.first_outcome;
    }
    if (o->dup_cb) {
        if (gate_claim_payment(db, o->order_no, txn, o->amount, "drill", &r, &err) != OG_OK)
            drill_race_error(o, &err);
        o->pay_dup = drill_race_answer(o, db, &r, false);
        o->pay_dup_first = r.first_outcome;
    }
    if (o->second_txn) {
        snprintf(txn2, sizeof(txn2), "%s-t2", o->order_no);
        if (gate_claim_payment(db, o->order_no, txn2, o->amount, "drill", &r, &err) != OG_OK)
            drill_race_error(o, &err);
        o->pay2 = drill_race_answer(o, db, &r, true);
    }
}

/* Part k of an order that allows parts, in the order's currency. */
static void drill_race_part(struct db *db, struct drill_order *o, int k)
{
    char txn[64];
    struct gate_payment_result r = {0};
    struct og_error err = {0};

    snprintf(txn, sizeof(txn), "%s-p%d", o->order_no, k + 1);
    if (gate_payment_claim(db,
                           &(struct gate_payment){.order_no = o->order_no,
                                                  .txn_no = txn,
                                                  .amount_cents = o->part_amount[k],
                                                  .channel = "drill"},
                           &r, &err) != OG_OK)
        drill_race_error(o, &err);
    else
        o->part_out[k] = drill_race_answer(o, db, &r, true);
}

/* The charge's begin (before the deadline) or its end (after it): the provider's capture, a
 * payment naming the charge, or its failure. A charge the begin did not record (the order was
 * cancelled first) is not named: the capture comes as a plain payment (late), a failure is not
 * sent. */
static void drill_race_charge(struct db *db, struct drill_order *o, bool begin)
{
    char ref[64], txn[64];
    struct gate_payment_result r = {0};
    struct og_error err = {0};
    enum gate_outcome out = GATE_UNKNOWN;
    bool recorded = o->charge_begin == GATE_PENDING;

    snprintf(ref, sizeof(ref), "%s-c", o->order_no);
    if (begin) {
        if (gate_begin_charge(db, o->order_no, ref, DRILL_CHARGE_SECONDS, &out, NULL, 0, &err) !=
            OG_OK) {
            drill_race_error(o, &err);
            return;
        }
        /* A repeat after a begin that had committed finds it begun. */
        if (db_last_attempts(db) > 1) {
            o->repeats++;
            if (out == GATE_DUPLICATE)
                out = GATE_PENDING;
        }
        o->charge_begin = out;
        return;
    }
    if (o->charge_fail) {
        if (!recorded)
            return;
        if (gate_charge_failed(db, o->order_no, ref, &out, &err) != OG_OK) {
            drill_race_error(o, &err);
            return;
        }
        if (db_last_attempts(db) > 1) {
            o->repeats++;
            if (out == GATE_DUPLICATE)
                out = GATE_FAILED;
        }
        o->charge_end = out;
        return;
    }
    snprintf(txn, sizeof(txn), "%s-t1", o->order_no);
    if (gate_payment_claim(db,
                           &(struct gate_payment){.order_no = o->order_no,
                                                  .txn_no = txn,
                                                  .amount_cents = o->amount,
                                                  .channel = "drill",
                                                  .charge_ref = recorded ? ref : NULL},
                           &r, &err) != OG_OK)
        drill_race_error(o, &err);
    else
        o->charge_end = drill_race_answer(o, db, &r, true);
}

/* A staff act on the order. A call repeated after a lost connection may meet its own committed
 * first attempt: a release then answers not_pending with the order released (taken as
 * released), an amendment amended again (the same lines), a deadline set again. */
static void drill_race_staff(const struct drill *d, struct db *db, struct drill_order *o,
                             enum drill_action_kind kind)
{
    struct og_error err = {0};
    enum order_status st = ORDER_STATUS_NONE;
    enum og_status rc;
    char items[160], when[40];

    if (kind == DRILL_ACT_RELEASE) {
        rc = gate_order_release(db, o->order_no, "drill-staff", "cash on delivery", &o->release_out,
                                &st, &err);
        if (rc == OG_OK && db_last_attempts(db) > 1 && o->release_out == GATE_NOT_PENDING &&
            st == ORDER_RELEASED)
            o->release_out = GATE_RELEASED;
    } else if (kind == DRILL_ACT_AMEND) {
        snprintf(items, sizeof(items), "[{\"sku\": \"%ssku%02d\", \"qty\": %d}]", d->prefix, o->sku,
                 o->amend_qty);
        rc = gate_order_amend(db, o->order_no, o->amount, items, "{\"amended\": true}",
                              "drill-staff", &o->amend_out, &st, &err);
        if (rc == OG_OK && o->amend_out == GATE_AMENDED)
            o->qty = o->amend_qty;
    } else {
        clock_format_iso(o->deadline_to_ms, when, sizeof(when));
        rc = gate_order_set_deadline(db, o->order_no, when, "drill-staff", &o->deadline_out, NULL,
                                     0, &err);
    }
    o->repeats += db_last_attempts(db) > 1;
    if (rc != OG_OK)
        drill_race_error(o, &err);
}

static void *drill_race_worker(void *arg)
{
    struct drill_race_worker *w = arg;
    struct drill *d = w->d;
    struct db *db = NULL;
    uint64_t rng = d->o.seed ^ (uint64_t)(w->index + 1) * UINT64_C(0x9E3779B97F4A7C15);
    struct og_error err = {0};

    /* Without a session the worker's orders get no answer: the ledger reports each. */
    if (drill_setup_db(d, "ordergatectl-drill", &db, &err) != OG_OK) {
        drill_report_finding("payer %d: %s", w->index, err.msg);
        return NULL;
    }
    /* A payer is an order service: its calls have the services' bounds, so that a database
     * that stops answering (--faults) fails a call, which db_call repeats, instead of holding
     * the payer for ever. */
    {
        struct db_session bounded = cfg_db_session(d->cfg);
        db_set_session(db, &bounded, NULL);
    }
    for (long a = 0; a < d->nactions && !signals_stop; a++) {
        const struct drill_action *act = &d->actions[a];
        struct drill_order *o = &d->orders[act->order];
        enum order_status st;

        /* Each order belongs to one worker, so its actions keep their order. */
        if (act->order % d->o.payers != w->index)
            continue;
        clock_sleep_until_flag((long)(act->at_ms - clock_wall_ms()), &signals_stop, NULL);
        switch (act->kind) {
        case DRILL_ACT_HOLD:
            if (gate_hold(db, o->order_no, 4, &o->hold_out, NULL, 0, &err) != OG_OK)
                drill_race_error(o, &err);
            o->repeats += db_last_attempts(db) > 1;
            break;
        case DRILL_ACT_PAY:
            drill_race_pay(db, o, &rng);
            break;
        case DRILL_ACT_PART:
            drill_race_part(db, o, act->part);
            break;
        case DRILL_ACT_CHARGE_BEGIN:
        case DRILL_ACT_CHARGE_END:
            drill_race_charge(db, o, act->kind == DRILL_ACT_CHARGE_BEGIN);
            break;
        case DRILL_ACT_RELEASE:
        case DRILL_ACT_AMEND:
        case DRILL_ACT_DEADLINE:
            drill_race_staff(d, db, o, act->kind);
            break;
        case DRILL_ACT_CLOSE:
            if (gate_close(db, o->order_no, "drill", "customer asked to cancel", &o->close_out, &st,
                           &err) != OG_OK)
                drill_race_error(o, &err);
            /* A repeat after a close that had committed finds it cancelled (by this close). */
            if (db_last_attempts(db) > 1) {
                o->repeats++;
                o->close_repeated = 1;
            }
            break;
        }
    }
    db_free(db);
    return NULL;
}

static const struct db_stmt drill_race_stmt_pending_due = {
    "drill_pending_due",
    "SELECT order_no FROM ordergate.orders "
    " WHERE status = 'pending_payment' AND expire_at <= now() AND starts_with(order_no, $1)",
    1};

/* Counts due, still pending orders (*pending_due) and those of them whose message was not
 * lost (*left): the consumers' remaining work. */
static enum og_status drill_race_backlog(struct drill *d, struct db *db, long *pending_due,
                                         long *left, struct og_error *err)
{
    PGresult *res = NULL;

    if (db_call(db, &drill_race_stmt_pending_due, (const char *[]){d->prefix}, &res, err) != OG_OK)
        return err->status;
    *pending_due = PQntuples(res);
    *left = 0;
    for (int i = 0; i < PQntuples(res); i++) {
        struct drill_order *o = drill_plan_find(d, PQgetvalue(res, i, 0));
        if (o == NULL || !o->lost)
            (*left)++;
    }
    PQclear(res);
    return OG_OK;
}

/* Waits for the race workers, killing a consumer now and then, then for the
 * consumers to drain: every due order that had a message is settled, and the
 * group has committed every message of the cancel topics (duplicates and
 * garbage come last in their partitions and change no order, so the orders
 * alone cannot tell that the consumers got to them). With the database
 * scheduling, the relays must also have published every event of the drill
 * (a hold's, for one, may be written after its order's first one was
 * consumed). */
static void drill_race_wait(struct drill *d, struct db *db)
{
    uint64_t rng = d->o.seed * 31 + 7;
    int64_t last_action = d->nactions > 0 ? d->actions[d->nactions - 1].at_ms : d->t_ms;
    int64_t next_kill = d->o.kill_every_s > 0 ? clock_wall_ms() + d->o.kill_every_s * 1000 : 0;
    int64_t deadline;
    int64_t last_report = 0;
    int64_t lag = -1;
    long pending_due = 0, left = -1, unpublished = 0;
    rd_kafka_t *group = NULL;
    struct og_error err = {0};

    /* Without the reader the wait ends on the orders alone, as without Kafka. */
    if (!d->o.no_kafka && drill_kafka_reader(d, &group, &err) != OG_OK)
        drill_report_finding("%s", err.msg);
    for (long i = 0; i < d->o.orders; i++) {
        if (d->orders[i].due_ms > last_action)
            last_action = d->orders[i].due_ms;
        if (d->orders[i].deadline && d->orders[i].deadline_to_ms > last_action)
            last_action = d->orders[i].deadline_to_ms;
    }
    /* A plan's faults run to their end and the 30 s after it, whose lateness the report gives. */
    if (d->nfaults > 0 && drill_faults_last_end_ms(d) + 30000 > last_action)
        last_action = drill_faults_last_end_ms(d) + 30000;
    deadline = last_action + (int64_t)d->o.settle_s * 1000;
    while (!signals_stop && clock_wall_ms() < deadline) {
        int64_t now = clock_wall_ms();
        if (next_kill && now >= next_kill && !d->o.no_kafka) {
            int k = (int)drill_plan_rng_range(&rng, 0, d->o.consumers - 1);
            if (drill_children_restart(d, k, &err) != OG_OK)
                drill_report_finding("%s", err.msg);
            d->restarts++;
            drill_report_progress(d, "SIGKILL consumer %d, restarted", k);
            next_kill = now + d->o.kill_every_s * 1000;
        }
        if (now > last_action + 500) {
            /* A failed look is said and looked again: the wait goes on. */
            if (drill_race_backlog(d, db, &pending_due, &left, &err) != OG_OK) {
                drill_report_finding("%s", err.msg);
                left = -1;
            }
            if (left == 0 && d->o.schedule_in_db &&
                drill_sched_unpublished(d, db, &unpublished, &err) != OG_OK) {
                drill_report_finding("%s", err.msg);
                unpublished = -1;
            }
            if (left == 0 && unpublished == 0 && group != NULL)
                lag = drill_kafka_lag(d, group);
            if (left == 0 && unpublished == 0 && (group == NULL || lag == 0) && d->faults_done)
                break;
        }
        if (now - last_report >= 2000) {
            if (left < 0)
                drill_report_progress(d, "race running: callbacks in flight");
            else if (left > 0)
                drill_report_progress(
                    d, "race running: %ld due orders still pending (%ld with a message)",
                    pending_due, left);
            else if (unpublished != 0)
                drill_report_progress(
                    d, "orders settled; %ld cancel_scheduled events not yet published",
                    unpublished);
            else
                drill_report_progress(d, "orders settled; %" PRId64 " messages not yet committed",
                                      lag);
            last_report = now;
        }
        usleep(200 * 1000);
    }
    if (group != NULL)
        rd_kafka_destroy(group);
    drill_report_progress(d,
                          "triggers drained: %ld due orders pending, %ld of them had a message; "
                          "messages not committed: %" PRId64,
                          pending_due, left < 0 ? 0 : left, group != NULL ? lag : 0);
}

enum og_status drill_race_run(struct drill *d, struct db *db, struct og_error *err)
{
    pthread_t tids[DRILL_MAX_PAYERS];
    struct drill_race_worker w[DRILL_MAX_PAYERS];
    int started = 0;
    enum og_status st = OG_OK;

    for (int t = 0; t < d->o.payers; t++) {
        w[t] = (struct drill_race_worker){.d = d, .index = t};
        if (pthread_create(&tids[t], NULL, drill_race_worker, &w[t]) != 0) {
            st = og_error_set(err, OG_ERR_INTERNAL, false, "cannot start payer %d", t);
            signals_stop = 1; /* the payers started stop at once */
            break;
        }
        started++;
    }
    if (st == OG_OK)
        st = drill_faults_start(d, err);
    if (st == OG_OK) {
        /* The race's own looks are bounded as the services' calls are (a fault may silence the
         * database); the reads after it are the drill's own again. */
        struct db_session bounded = cfg_db_session(d->cfg), unbounded = bounded;
        unbounded.lock_timeout_ms = unbounded.statement_timeout_ms = 0;
        db_set_session(db, &bounded, NULL);
        drill_race_wait(d, db);
        db_set_session(db, &unbounded, NULL);
    } else {
        signals_stop = 1;
    }
    for (int t = 0; t < started; t++)
        pthread_join(tids[t], NULL);
    drill_faults_stop(d);
    return st;
}
