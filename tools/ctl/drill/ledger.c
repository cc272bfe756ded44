/* The verdict: every answer the gate gave in the race against the final state of its order, its
 * money (captured, kept or refunded, in its currency) and the goods on the shelf (the drill's
 * ledger), the relays' work with --schedule-in-db, the garbage in the dead-letter
 * topic, and the database's own invariants (ordergate.reconcile). Owns d->ledger_violations,
 * d->violations and d->reconcile; a violation is said on stderr as it is found. It must not
 * change the database or the broker. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/kafka.h"
#include "tools/ctl/drill/drill.h"

/* Each order's final state, with its money: what its payments captured (every payment that took
 * money: parts, the winner, late and double payments), what its exceptions give back (captured
 * parts of a cancelled order, an excess, late and double payments), how many payments or
 * exceptions are in another currency than the order's, its cancelled_part and currency_mismatch
 * exceptions, and whether a timeout cancelled it while one of its charges was pending within its
 * bound. */
static const struct db_stmt drill_ledger_stmt_final = {
    "drill_final",
    "SELECT o.order_no, o.status, coalesce(s.source, ''), "
    "       (SELECT count(*) FROM ordergate.exceptions e WHERE e.order_no = o.order_no), "
    "       o.currency, o.amount_cents, "
    "       (SELECT coalesce(sum(p.amount_cents), 0) FROM ordergate.payments p "
    "         WHERE p.order_no = o.order_no "
    "           AND p.outcome IN ('partial', 'paid', 'overpaid', 'late_payment', "
    "                             'double_payment')), "
    "       (SELECT coalesce(sum(e.amount_cents), 0) FROM ordergate.exceptions e "
    "         WHERE e.order_no = o.order_no "
    "           AND e.kind IN ('cancelled_part', 'overpaid', 'late_payment', 'double_payment')), "
    "       (SELECT count(*) FROM ordergate.payments p WHERE p.order_no = o.order_no "
    "           AND p.outcome <> 'currency_mismatch' AND p.currency <> o.currency) "
    "     + (SELECT count(*) FROM ordergate.exceptions e WHERE e.order_no = o.order_no "
    "           AND e.kind <> 'currency_mismatch' AND e.currency IS DISTINCT FROM o.currency), "
    "       (SELECT count(*) FROM ordergate.exceptions e "
    "         WHERE e.order_no = o.order_no AND e.kind = 'cancelled_part'), "
    "       (SELECT count(*) FROM ordergate.exceptions e "
    "         WHERE e.order_no = o.order_no AND e.kind = 'currency_mismatch'), "
    "       EXISTS (SELECT 1 FROM ordergate.charges c "
    "                WHERE c.order_no = o.order_no AND starts_with(s.source, 'timeout') "
    "                  AND c.begun_at < s.created_at AND s.created_at < c.bound_at "
    "                  AND (c.ended_at IS NULL OR s.created_at < c.ended_at)) "
    "  FROM ordergate.orders o LEFT JOIN ordergate.status_log s "
    "    ON s.order_no = o.order_no AND s.from_status = 'pending_payment' "
    " WHERE starts_with(o.order_no, $1) ORDER BY o.order_no",
    1};

/* The drill's SKUs: what the shelf holds, against the orders that keep their goods. */
static const struct db_stmt drill_ledger_stmt_stock = {
    "drill_stock_final",
    "SELECT sku, available, total FROM ordergate.inventory "
    " WHERE starts_with(sku, $1) ORDER BY sku",
    1};

static enum og_status drill_ledger_stock(struct drill *d, struct db *db, struct og_error *err);

/* One order's row of drill_ledger_stmt_final, its money columns. */
struct drill_ledger_money {
    const char *currency;
    int64_t amount, captured, refunded;
    long foreign, cancelled_parts, mismatches;
    bool charge_overrun;
};

/* The first 20 are said; every one is counted. */
static void drill_ledger_fail(struct drill *d, const struct drill_order *o, const char *what)
{
    if (d->ledger_violations < 20)
        drill_report_finding("VIOLATION %s: %s", o->order_no, what);
    d->ledger_violations++;
}

/* One order's payments against its final state st; the exceptions its payments must have left
 * are added to *want_exceptions. */
static void drill_ledger_payments(struct drill *d, const struct drill_order *o,
                                  enum order_status st, struct drill_totals *t,
                                  long *want_exceptions)
{
    /* The first answer decides; the state must agree with it. */
    if (o->pay1 == GATE_PAID && st != ORDER_PAID)
        drill_ledger_fail(d, o, "payment answered paid but the order is not paid");
    if (o->pay1 == GATE_LATE_PAYMENT) {
        t->late_payments++;
        (*want_exceptions)++;
        if (st != ORDER_CANCELLED)
            drill_ledger_fail(d, o, "late_payment but the order is not cancelled");
    }
    if (o->pay1 != GATE_PAID && o->pay1 != GATE_LATE_PAYMENT)
        drill_ledger_fail(d, o, "first payment answer was neither paid nor late_payment");
    if (st == ORDER_PAID && o->pay1 != GATE_PAID)
        drill_ledger_fail(d, o, "order paid without a winning payment");
    if (o->retry_cb) {
        if (o->pay_retry != GATE_DUPLICATE || o->pay_retry_first != o->pay1)
            drill_ledger_fail(d, o, "retried payment did not return the first outcome");
        else
            t->dup_callbacks_absorbed++;
    }
    if (o->dup_cb) {
        if (o->pay_dup != GATE_DUPLICATE || o->pay_dup_first != o->pay1)
            drill_ledger_fail(d, o, "duplicate callback did not return the first outcome");
        else
            t->dup_callbacks_absorbed++;
    }
    if (o->second_txn) {
        enum gate_outcome want = st == ORDER_PAID ? GATE_DOUBLE_PAYMENT : GATE_LATE_PAYMENT;
        (*want_exceptions)++;
        if (o->pay2 != want)
            drill_ledger_fail(d, o, "second transaction got the wrong outcome");
        if (o->pay2 == GATE_DOUBLE_PAYMENT)
            t->double_payments++;
        else if (o->pay2 == GATE_LATE_PAYMENT)
            t->late_payments++;
    }
    if (o->hold && o->hold_out != GATE_HELD && o->hold_out != GATE_NOT_PENDING)
        drill_ledger_fail(d, o, "hold got an unexpected outcome");
}

/* The parts of an order that allows them: sent in order, each partial, paid (the last one) or
 * late; paid: the parts were kept; cancelled: each captured part has its cancelled_part
 * exception, each late one its late_payment exception. */
static void drill_ledger_parts(struct drill *d, const struct drill_order *o, enum order_status st,
                               const struct drill_ledger_money *m, struct drill_totals *t,
                               long *want_exceptions)
{
    int partial = 0, late = 0, paid = 0;

    t->parts_orders++;
    for (int k = 0; k < o->parts; k++) {
        enum gate_outcome a = o->part_out[k];
        if (a == GATE_PARTIAL && late == 0 && paid == 0)
            partial++;
        else if (a == GATE_PAID && k == o->parts - 1 && late == 0)
            paid++;
        else if (a == GATE_LATE_PAYMENT)
            late++;
        else if (o->errors == 0)
            drill_ledger_fail(d, o, "a part got an outcome out of its order");
    }
    t->late_payments += late;
    *want_exceptions += late;
    if (paid && st != ORDER_PAID)
        drill_ledger_fail(d, o, "the last part answered paid but the order is not paid");
    if (st == ORDER_PAID && !paid)
        drill_ledger_fail(d, o, "paid without the part that completes it");
    if (st == ORDER_PAID)
        t->parts_kept += partial + paid;
    if (st == ORDER_CANCELLED) {
        t->parts_refunded += partial;
        *want_exceptions += partial;
        if (m->cancelled_parts != partial)
            drill_ledger_fail(d, o, "a captured part of a cancelled order is not refunded once");
    } else if (m->cancelled_parts != 0) {
        drill_ledger_fail(d, o, "cancelled_part exception on an order not cancelled");
    }
}

/* A charge pending at the deadline: the begin recorded it (or the order was cancelled before
 * it); a recorded charge keeps the timeout cancel away until it ends: the capture pays, the
 * failure lets the cancel come. */
static void drill_ledger_charge(struct drill *d, const struct drill_order *o, enum order_status st,
                                struct drill_totals *t, long *want_exceptions)
{
    if (o->charge_begin == GATE_PENDING) {
        t->charges_begun++;
        if (o->charge_fail) {
            t->charges_failed += o->charge_end == GATE_FAILED;
            if (o->charge_end != GATE_FAILED)
                drill_ledger_fail(d, o, "charge_failed did not answer failed");
            if (st != ORDER_CANCELLED)
                drill_ledger_fail(d, o, "a failed charge's order is not cancelled");
            return;
        }
        t->charges_captured += o->charge_end == GATE_PAID || o->charge_end == GATE_LATE_PAYMENT;
    } else if (o->charge_begin != GATE_NOT_PENDING) {
        drill_ledger_fail(d, o, "begin_charge answered neither pending nor not_pending");
        return;
    } else if (o->charge_fail) {
        if (st != ORDER_CANCELLED)
            drill_ledger_fail(d, o, "begin_charge answered not_pending but the order is open");
        return;
    }
    if (o->charge_end == GATE_PAID) {
        if (st != ORDER_PAID)
            drill_ledger_fail(d, o, "the capture answered paid but the order is not paid");
    } else if (o->charge_end == GATE_LATE_PAYMENT) {
        t->late_payments++;
        (*want_exceptions)++;
        if (st != ORDER_CANCELLED)
            drill_ledger_fail(d, o, "the capture answered late_payment but the order is open");
    } else {
        drill_ledger_fail(d, o, "the capture answered neither paid nor late_payment");
    }
}

/* The money of one order, whatever paid it: every unit captured is on the paid order (its
 * amount) or on an exception that gives it back, in the order's currency; no timeout cancel
 * while a charge was pending within its bound. */
static void drill_ledger_money(struct drill *d, const struct drill_order *o, enum order_status st,
                               const struct drill_ledger_money *m, struct drill_totals *t)
{
    int64_t kept = st == ORDER_PAID ? m->amount : 0;

    for (int c = 0; c < d->o.ncurrencies; c++) {
        if (strcmp(d->o.currencies[c], m->currency) != 0)
            continue;
        t->cur_placed[c]++;
        t->cur_paid[c] += st == ORDER_PAID;
        t->cur_cancelled[c] += st == ORDER_CANCELLED;
    }
    if (strcmp(m->currency, o->currency) != 0)
        drill_ledger_fail(d, o, "the order is not in the currency it was placed in");
    if (m->captured != kept + m->refunded)
        drill_ledger_fail(d, o, "money captured is neither kept by the paid order nor refunded");
    if (m->foreign != 0)
        drill_ledger_fail(d, o, "a payment or refund counted in another currency than the order's");
    if (m->charge_overrun)
        drill_ledger_fail(d, o,
                          "cancelled by a timeout while a charge was pending within its bound");
    if (o->mismatch) {
        if (o->mismatch_out == GATE_CURRENCY_MISMATCH && m->mismatches == 1)
            t->currency_mismatches++;
        else
            drill_ledger_fail(d, o, "a payment in another currency was not a currency_mismatch");
    }
}

/* The staff acts on one order against its final state: a release that won leaves the order
 * released, or paid by a payment after it, never cancelled; one that lost found it paid or
 * cancelled; a released order was released by the drill. An amendment is amended (the stock
 * ledger counts the new quantity), out_of_stock or not_pending; a deadline change set or
 * not_pending. */
static void drill_ledger_staff(struct drill *d, const struct drill_order *o, enum order_status st,
                               struct drill_totals *t)
{
    if (o->release && o->errors == 0) {
        if (o->release_out == GATE_RELEASED) {
            t->releases++;
            if (st != ORDER_RELEASED && st != ORDER_PAID)
                drill_ledger_fail(d, o,
                                  "release answered released but the order is neither "
                                  "released nor paid");
        } else if (o->release_out == GATE_NOT_PENDING) {
            if (st != ORDER_PAID && st != ORDER_CANCELLED)
                drill_ledger_fail(d, o, "release answered not_pending but the order is open");
        } else {
            drill_ledger_fail(d, o, "release answered neither released nor not_pending");
        }
    }
    if (st == ORDER_RELEASED) {
        t->released++;
        if (!o->release || o->release_out != GATE_RELEASED)
            drill_ledger_fail(d, o, "released although no release won");
    }
    if (o->amend && o->errors == 0) {
        if (o->amend_out == GATE_AMENDED)
            t->amendments++;
        else if (o->amend_out != GATE_OUT_OF_STOCK && o->amend_out != GATE_NOT_PENDING)
            drill_ledger_fail(d, o,
                              "amendment answered neither amended, out_of_stock nor "
                              "not_pending");
    }
    if (o->deadline && o->errors == 0) {
        if (o->deadline_out == GATE_SET)
            t->deadlines_moved++;
        else if (o->deadline_out != GATE_NOT_PENDING)
            drill_ledger_fail(d, o, "deadline change answered neither set nor not_pending");
    }
    if (o->close && o->close_out == GATE_ALREADY_RELEASED &&
        (o->release_out != GATE_RELEASED || (st != ORDER_RELEASED && st != ORDER_PAID)))
        drill_ledger_fail(d, o, "close saw already_released but no release won");
}

/* One order's final state (st, cancelled by src) against its plan and its answers. */
static void drill_ledger_order(struct drill *d, struct drill_order *o, enum order_status st,
                               const char *src, long exceptions, const struct drill_ledger_money *m,
                               struct drill_totals *t)
{
    long want_exceptions = o->mismatch;

    o->final_status = st;
    t->placed++;
    t->errors += o->errors;
    t->repeated_calls += o->repeats;
    if (o->close && o->close_repeated && o->close_out == GATE_ALREADY_CANCELLED &&
        st == ORDER_CANCELLED && strcmp(src, "manual") == 0)
        o->close_out = GATE_CANCELLED;
    if (o->errors > 0)
        drill_ledger_fail(d, o, "the gate returned an error to a caller");
    if (st == ORDER_PAID)
        t->paid++;
    else if (st == ORDER_PENDING)
        t->pending++;
    else if (st == ORDER_RELEASED) {
        /* counted by drill_ledger_staff (its log's source is manual: not a manual cancel) */
    } else if (strcmp(src, "timeout_consumer") == 0)
        t->cancelled_consumer++;
    else if (strcmp(src, "timeout_scanner") == 0)
        t->cancelled_scanner++;
    else if (strcmp(src, "manual") == 0)
        t->cancelled_manual++;
    if (st == ORDER_PENDING)
        drill_ledger_fail(d, o, "still pending after its deadline and the scanner");
    /* With the database scheduling every message but the lost ones went
     * out through a relay the drill waited for: the consumers cancel
     * those, the scanner exactly the lost ones that nobody paid or closed. */
    if (d->o.schedule_in_db && st == ORDER_CANCELLED) {
        if (!o->lost && strcmp(src, "timeout_scanner") == 0)
            drill_ledger_fail(d, o, "the scanner cancelled an order whose message was sent");
        if (o->lost && strcmp(src, "timeout_consumer") == 0)
            drill_ledger_fail(d, o, "a consumer cancelled an order whose message was lost");
    }
    if (o->pay)
        drill_ledger_payments(d, o, st, t, &want_exceptions);
    else if (o->parts > 0)
        drill_ledger_parts(d, o, st, m, t, &want_exceptions);
    else if (o->charge)
        drill_ledger_charge(d, o, st, t, &want_exceptions);
    else if (st == ORDER_PAID)
        drill_ledger_fail(d, o, "paid although no payment was sent");
    drill_ledger_money(d, o, st, m, t);
    drill_ledger_staff(d, o, st, t);
    if (o->close) {
        if (o->close_out == GATE_CANCELLED && (st != ORDER_CANCELLED || strcmp(src, "manual")))
            drill_ledger_fail(d, o, "manual close won but the log disagrees");
        if (o->close_out == GATE_ALREADY_PAID && st != ORDER_PAID)
            drill_ledger_fail(d, o, "close saw already_paid but the order is not paid");
        if (o->close_out == GATE_ALREADY_CANCELLED &&
            (st != ORDER_CANCELLED || strcmp(src, "manual") == 0))
            drill_ledger_fail(d, o, "close saw already_cancelled but the log disagrees");
    }
    if (exceptions != want_exceptions)
        drill_ledger_fail(d, o, "exceptions do not match the payments that lost");
}

enum og_status drill_ledger_check(struct drill *d, struct db *db, struct drill_totals *t,
                                  struct og_error *err)
{
    PGresult *res = NULL;

    if (db_call(db, &drill_ledger_stmt_final, (const char *[]){d->prefix}, &res, err) != OG_OK)
        return err->status;
    if (PQntuples(res) != d->o.orders) {
        drill_report_finding("expected %ld orders, found %d", d->o.orders, PQntuples(res));
        d->ledger_violations++;
    }
    for (int i = 0; i < PQntuples(res) && i < d->o.orders; i++) {
        struct drill_order *o = &d->orders[i];

        if (strcmp(o->order_no, PQgetvalue(res, i, 0)) != 0)
            drill_ledger_fail(d, o, "order list differs from the plan");
        else {
            struct drill_ledger_money m = {
                .currency = PQgetvalue(res, i, 4),
                .amount = strtoll(PQgetvalue(res, i, 5), NULL, 10),
                .captured = strtoll(PQgetvalue(res, i, 6), NULL, 10),
                .refunded = strtoll(PQgetvalue(res, i, 7), NULL, 10),
                .foreign = atol(PQgetvalue(res, i, 8)),
                .cancelled_parts = atol(PQgetvalue(res, i, 9)),
                .mismatches = atol(PQgetvalue(res, i, 10)),
                .charge_overrun = PQgetvalue(res, i, 11)[0] == 't',
            };
            drill_ledger_order(d, o, order_status_parse(PQgetvalue(res, i, 1)),
                               PQgetvalue(res, i, 2), atol(PQgetvalue(res, i, 3)), &m, t);
        }
    }
    PQclear(res);
    return drill_ledger_stock(d, db, err);
}

/* The goods: each SKU's shelf holds its total less what the orders not cancelled keep, so a paid
 * order's goods stayed sold and a cancelled order's came back exactly once. */
static enum og_status drill_ledger_stock(struct drill *d, struct db *db, struct og_error *err)
{
    PGresult *res = NULL;
    int64_t held[100] = {0};

    if (db_call(db, &drill_ledger_stmt_stock, (const char *[]){d->prefix}, &res, err) != OG_OK)
        return err->status;
    for (long i = 0; i < d->o.orders; i++)
        if (d->orders[i].final_status != ORDER_CANCELLED)
            held[d->orders[i].sku] += d->orders[i].qty;
    if (PQntuples(res) != d->o.skus) {
        drill_report_finding("VIOLATION expected %d SKUs, found %d", d->o.skus, PQntuples(res));
        d->ledger_violations++;
    }
    for (int s = 0; s < PQntuples(res) && s < d->o.skus; s++) {
        int64_t available = strtoll(PQgetvalue(res, s, 1), NULL, 10);
        int64_t total = strtoll(PQgetvalue(res, s, 2), NULL, 10);
        if (available != total - held[s]) {
            drill_report_finding("VIOLATION %s: %" PRId64 " on the shelf, %" PRId64
                                 " expected (total %" PRId64 " less %" PRId64 " kept by orders)",
                                 PQgetvalue(res, s, 0), available, total - held[s], total, held[s]);
            d->ledger_violations++;
        }
    }
    PQclear(res);
    return OG_OK;
}

/* With the database scheduling: every event of the drill was published,
 * and the delay topics hold at least what the relays marked published
 * (more with re-schedules and the relays' at-least-once repeats). The
 * orders' side is drill_ledger_check's. */
enum og_status drill_ledger_schedule(struct drill *d, struct db *db, rd_kafka_t *producer,
                                     struct og_error *err)
{
    long published = 0;
    int64_t on_topics = 0;

    if (drill_sched_counts(d, db, &d->sched_events, &published, err) != OG_OK)
        return err->status;
    d->sched_unpublished = d->sched_events - published;
    d->messages = published - d->lost_messages; /* what the relays sent */
    for (int i = 0; i < d->ndelay; i++) {
        d->delay_messages[i] = kafka_topic_messages(producer, d->delay_topics[i], 10000);
        on_topics += d->delay_messages[i] > 0 ? d->delay_messages[i] : 0;
    }
    if (d->sched_unpublished > 0) {
        drill_report_finding("VIOLATION %ld of the drill's %ld cancel_scheduled events were "
                             "never published",
                             d->sched_unpublished, d->sched_events);
        d->ledger_violations++;
    }
    if (on_topics < d->messages) {
        drill_report_finding("VIOLATION the relays published %ld cancel messages, the delay "
                             "topics hold %" PRId64,
                             d->messages, on_topics);
        d->ledger_violations++;
    }
    return OG_OK;
}

void drill_ledger_dead_letters(struct drill *d, rd_kafka_t *producer)
{
    d->dlq_count = kafka_topic_messages(producer, d->dlq_topic, 10000);
    if (d->o.garbage > 0 && d->dlq_count < d->o.garbage) {
        drill_report_finding("VIOLATION %d garbage messages sent, %" PRId64 " dead-lettered",
                             d->o.garbage, d->dlq_count);
        d->ledger_violations++;
    }
}

static const struct db_stmt drill_ledger_stmt_reconcile = {
    "drill_reconcile",
    "SELECT invariant, name, violations, array_to_string(sample, ' ') "
    "  FROM ordergate.reconcile($1::timestamptz, '0 seconds', '1 minute') ORDER BY invariant",
    1};

enum og_status drill_ledger_reconcile(struct drill *d, struct db *db, struct og_error *err)
{
    PGresult *res = NULL;

    if (db_call(db, &drill_ledger_stmt_reconcile, (const char *[]){d->start_iso}, &res, err) !=
        OG_OK) {
        og_error_prefix(err, "reconcile");
        return err->status;
    }
    d->reconcile = json_array();
    for (int i = 0; i < PQntuples(res); i++) {
        long v = atol(PQgetvalue(res, i, 2));
        /* A shop check (add_check) that failed reports -1: one violation, never a credit. */
        d->violations += v < 0 ? 1 : v;
        if (v < 0)
            drill_report_finding("VIOLATION %s: the check failed: %s", PQgetvalue(res, i, 1),
                                 PQgetvalue(res, i, 3));
        json_array_append_new(
            d->reconcile, json_pack("{s:i,s:s,s:I,s:s}", "invariant", atoi(PQgetvalue(res, i, 0)),
                                    "name", PQgetvalue(res, i, 1), "violations", (json_int_t)v,
                                    "sample", PQgetvalue(res, i, 3)));
        if (v > 0)
            drill_report_finding("VIOLATION invariant %s (%s): %ld, e.g. %s", PQgetvalue(res, i, 0),
                                 PQgetvalue(res, i, 1), v, PQgetvalue(res, i, 3));
    }
    PQclear(res);
    return OG_OK;
}
