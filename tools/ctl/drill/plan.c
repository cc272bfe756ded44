/* The plan of a drill: for every order what it buys and in which currency, whether its cancel
 * message is lost or duplicated, whether it is paid (twice, retried, held, in parts, by a charge
 * pending at the deadline, once in another currency) or closed, and when, all drawn from
 * --seed; then, once T is fixed, the list of actions in time order. Owns the generator. It
 * must not touch the database, the broker or the children: a plan is pure data, the same for
 * the same seed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/ctl/drill/drill.h"

static uint64_t drill_plan_rng_next(uint64_t *s)
{
    /* xorshift64*: plenty for sampling, reproducible from --seed. */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * UINT64_C(2685821657736338717);
}

static double drill_plan_rng_unit(uint64_t *s)
{
    return (double)(drill_plan_rng_next(s) >> 11) / 9007199254740992.0;
}

long drill_plan_rng_range(uint64_t *s, long lo, long hi)
{
    return hi <= lo ? lo : lo + (long)(drill_plan_rng_next(s) % (uint64_t)(hi - lo + 1));
}

/* The money of one order: its currency (the list in turn); whether it allows parts (then its
 * payments are two or three parts summing to its amount, the first within T +- jitter, each next
 * up to jitter/2 later, so that the cancel lands before, between or after them) or is paid by a
 * charge (begun 0.8 to 1.5 s before its deadline, captured or failed 0.3 to 1.5 s after it, well
 * within its bound of DRILL_CHARGE_SECONDS: the cancel must wait for it); such an order gets no
 * other payment, hold or, with a charge, close. A share of the other paying orders first gets a
 * payment in another currency. */
static void drill_plan_money(const struct drill *d, struct drill_order *o, uint64_t *rng)
{
    long i = o - d->orders;
    double u = drill_plan_rng_unit(rng);
    int jitter = d->o.jitter_ms;

    snprintf(o->currency, sizeof(o->currency), "%s", d->o.currencies[i % d->o.ncurrencies]);
    if (u < d->o.parts_ratio) {
        int64_t left = o->amount;
        o->parts = drill_plan_rng_unit(rng) < 0.5 ? 2 : 3;
        o->pay = o->hold = 0;
        o->part_at_ms[0] = drill_plan_rng_range(rng, -jitter, jitter);
        for (int k = 0; k < o->parts; k++) {
            int rest = o->parts - k - 1; /* parts after this one, each at least 1 */
            o->part_amount[k] = rest == 0 ? left : drill_plan_rng_range(rng, 1, left - rest);
            left -= o->part_amount[k];
            if (k > 0)
                o->part_at_ms[k] = o->part_at_ms[k - 1] + drill_plan_rng_range(rng, 0, jitter / 2);
        }
    } else if (u < d->o.parts_ratio + d->o.charge_ratio) {
        o->charge = 1;
        o->charge_fail = drill_plan_rng_unit(rng) < 0.5;
        o->pay = o->hold = o->close = 0;
        o->charge_at_ms = -drill_plan_rng_range(rng, 800, 1500);
        o->charge_end_ms = drill_plan_rng_range(rng, 300, 1500);
    }
    o->mismatch = o->pay && drill_plan_rng_unit(rng) < d->o.mismatch_ratio;
}

/* Staff acts around the deadline (T +- jitter), each racing the cancels and the payments: a
 * release (not of an order paid in parts or by a charge: their ledgers stay as they are), an
 * amendment of the order's one line to another quantity of the same SKU (the amount stays, so
 * the payments keep theirs), a deadline moved 1 to 3 s past both the planned one and the act
 * (later, never earlier: a cancel message once sent stays early enough). With the database
 * scheduling, a deadline change may write the order's message anew: such an order does not lose
 * it (drill_plan_make). */
static void drill_plan_staff(const struct drill *d, struct drill_order *o, uint64_t *rng)
{
    int jitter = d->o.jitter_ms;

    o->release = o->parts == 0 && !o->charge && drill_plan_rng_unit(rng) < d->o.release_ratio;
    o->release_at_ms = drill_plan_rng_range(rng, -jitter, jitter);
    o->amend = drill_plan_rng_unit(rng) < d->o.amend_ratio;
    o->amend_qty = o->qty == 1 ? 2 : o->qty - 1;
    o->amend_at_ms = drill_plan_rng_range(rng, -jitter, jitter);
    o->deadline = !o->charge && drill_plan_rng_unit(rng) < d->o.deadline_ratio;
    o->deadline_at_ms = drill_plan_rng_range(rng, -jitter, jitter);
    o->deadline_to_ms = drill_plan_rng_range(rng, 1000, 3000);
}

enum og_status drill_plan_make(struct drill *d, struct og_error *err)
{
    uint64_t rng = d->o.seed;
    long n = d->o.orders;
    /* at most DRILL_MAX_PARTS parts, a close, a release, an amendment and a deadline change per
     * order */
    long cap = n * 7 + 16;

    d->orders = calloc((size_t)n, sizeof(*d->orders));
    d->actions = calloc((size_t)cap, sizeof(*d->actions));
    if (d->orders == NULL || d->actions == NULL)
        return og_error_set(err, OG_ERR_NOMEM, false, "planning %ld orders: out of memory", n);
    for (long i = 0; i < n; i++) {
        struct drill_order *o = &d->orders[i];
        snprintf(o->order_no, sizeof(o->order_no), "%s%06ld", d->prefix, i);
        o->amount = drill_plan_rng_range(&rng, 500, 20000); /* some above the auto-refund limit */
        o->qty = (int)drill_plan_rng_range(&rng, 1, 3);
        o->sku = (int)(i % d->o.skus);
        if (drill_plan_rng_unit(&rng) < d->o.coupon_ratio)
            snprintf(o->coupon, sizeof(o->coupon), "%sc%06ld", d->prefix, i);
        /* Spread due times rise with the order number, as they do for orders
         * placed over time with one payment window: a delay topic's
         * partitions then hold nearly monotonic due times, which is what
         * the consumer's pause-at-the-head waiting is built for. */
        o->due_ms = d->o.spread_ms > 0 ? (int64_t)d->o.spread_ms * i / n : 0;
        o->lost = drill_plan_rng_unit(&rng) < d->o.loss_ratio;
        o->dup_msg = drill_plan_rng_unit(&rng) < d->o.dup_ratio;
        o->pay = drill_plan_rng_unit(&rng) < d->o.pay_ratio;
        o->pay_at_ms = drill_plan_rng_range(&rng, -d->o.jitter_ms, d->o.jitter_ms);
        if (o->pay) {
            o->dup_cb = drill_plan_rng_unit(&rng) < d->o.dup_ratio;
            o->retry_cb = drill_plan_rng_unit(&rng) < d->o.dup_ratio;
            o->second_txn = drill_plan_rng_unit(&rng) < d->o.double_pay_ratio;
            o->hold = drill_plan_rng_unit(&rng) < d->o.hold_ratio;
        }
        o->close = drill_plan_rng_unit(&rng) < d->o.close_ratio;
        o->close_at_ms = drill_plan_rng_range(&rng, -d->o.jitter_ms, d->o.jitter_ms);
        drill_plan_money(d, o, &rng);
        drill_plan_staff(d, o, &rng);
        /* With the database scheduling, a hold writes the order's message
         * anew (for the new deadline), and so does a charge that ends after
         * the deadline without paying (its order is cancelled now): such an
         * order cannot lose it. */
        if (d->o.schedule_in_db && (o->hold || o->charge || o->deadline))
            o->lost = 0;
    }
    return OG_OK;
}

static int drill_plan_action_cmp(const void *a, const void *b)
{
    const struct drill_action *x = a, *y = b;
    /* Ties keep an order's parts in their order (qsort is not stable). */
    if (x->at_ms != y->at_ms)
        return (x->at_ms > y->at_ms) - (x->at_ms < y->at_ms);
    if (x->order != y->order)
        return (x->order > y->order) - (x->order < y->order);
    if (x->kind != y->kind)
        return (x->kind > y->kind) - (x->kind < y->kind);
    return (x->part > y->part) - (x->part < y->part);
}

/* Actions are planned relative to each order's due time, made absolute once
 * T is known (after placement). */
void drill_plan_schedule(struct drill *d)
{
    d->nactions = 0;
    for (long i = 0; i < d->o.orders; i++) {
        struct drill_order *o = &d->orders[i];
        o->due_ms += d->t_ms;
        if (o->hold) {
            /* The customer opens the payment page just before the deadline and
             * pays after it: the hold must keep the cancel away. */
            d->actions[d->nactions++] =
                (struct drill_action){o->due_ms - 1500, i, DRILL_ACT_HOLD, 0};
            o->pay_at_ms = o->due_ms + 1000;
        } else {
            o->pay_at_ms += o->due_ms;
        }
        if (o->pay)
            d->actions[d->nactions++] = (struct drill_action){o->pay_at_ms, i, DRILL_ACT_PAY, 0};
        for (int k = 0; k < o->parts; k++) {
            o->part_at_ms[k] += o->due_ms;
            d->actions[d->nactions++] =
                (struct drill_action){o->part_at_ms[k], i, DRILL_ACT_PART, k};
        }
        if (o->charge) {
            o->charge_at_ms += o->due_ms;
            o->charge_end_ms += o->due_ms;
            d->actions[d->nactions++] =
                (struct drill_action){o->charge_at_ms, i, DRILL_ACT_CHARGE_BEGIN, 0};
            d->actions[d->nactions++] =
                (struct drill_action){o->charge_end_ms, i, DRILL_ACT_CHARGE_END, 0};
        }
        if (o->close) {
            o->close_at_ms += o->due_ms;
            d->actions[d->nactions++] =
                (struct drill_action){o->close_at_ms, i, DRILL_ACT_CLOSE, 0};
        }
        if (o->release) {
            o->release_at_ms += o->due_ms;
            d->actions[d->nactions++] =
                (struct drill_action){o->release_at_ms, i, DRILL_ACT_RELEASE, 0};
        }
        if (o->amend) {
            o->amend_at_ms += o->due_ms;
            d->actions[d->nactions++] =
                (struct drill_action){o->amend_at_ms, i, DRILL_ACT_AMEND, 0};
        }
        if (o->deadline) {
            o->deadline_at_ms += o->due_ms;
            o->deadline_to_ms += o->deadline_at_ms > o->due_ms ? o->deadline_at_ms : o->due_ms;
            d->actions[d->nactions++] =
                (struct drill_action){o->deadline_at_ms, i, DRILL_ACT_DEADLINE, 0};
        }
    }
    qsort(d->actions, (size_t)d->nactions, sizeof(*d->actions), drill_plan_action_cmp);
}

static int drill_plan_order_cmp(const void *a, const void *b)
{
    return strcmp(((const struct drill_order *)a)->order_no,
                  ((const struct drill_order *)b)->order_no);
}

struct drill_order *drill_plan_find(const struct drill *d, const char *order_no)
{
    struct drill_order key;

    snprintf(key.order_no, sizeof(key.order_no), "%s", order_no);
    /* Orders are generated in sorted order, so bsearch applies. */
    return bsearch(&key, d->orders, (size_t)d->o.orders, sizeof(key), drill_plan_order_cmp);
}
