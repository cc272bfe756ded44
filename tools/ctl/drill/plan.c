/* The plan of a drill: for every order what it buys, whether its cancel message is lost or
 * duplicated, whether it is paid (twice, retried, held) or closed, and when, all drawn from
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

enum og_status drill_plan_make(struct drill *d, struct og_error *err)
{
    uint64_t rng = d->o.seed;
    long n = d->o.orders;
    long cap = n * 2 + 16;

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
        /* With the database scheduling, a hold writes the order's message
         * anew (for the new deadline): an order that holds cannot lose it. */
        if (d->o.schedule_in_db && o->hold)
            o->lost = 0;
    }
    return OG_OK;
}

static int drill_plan_action_cmp(const void *a, const void *b)
{
    const struct drill_action *x = a, *y = b;
    return (x->at_ms > y->at_ms) - (x->at_ms < y->at_ms);
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
            d->actions[d->nactions++] = (struct drill_action){o->due_ms - 1500, i, DRILL_ACT_HOLD};
            o->pay_at_ms = o->due_ms + 1000;
        } else {
            o->pay_at_ms += o->due_ms;
        }
        if (o->pay)
            d->actions[d->nactions++] = (struct drill_action){o->pay_at_ms, i, DRILL_ACT_PAY};
        if (o->close) {
            o->close_at_ms += o->due_ms;
            d->actions[d->nactions++] = (struct drill_action){o->close_at_ms, i, DRILL_ACT_CLOSE};
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
