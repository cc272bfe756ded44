/* Orders placed the way a shop's checkout places them: through ordergate.place_order()
 * (gate_place(), one durable commit per order) from several sessions at once, each on its own
 * connection and thread. What each order holds (number, amount, lines, coupon) is the caller's;
 * every order must come back placed. */
#ifndef OG_TOOLS_BENCH_PLACE_H
#define OG_TOOLS_BENCH_PLACE_H

#include <stdint.h>

#include "common/gate.h"

#define BENCH_PLACE_SESSIONS_MAX 64
#define BENCH_PLACE_ITEMS_MAX    1024 /* the items JSON of one order, NUL included */

struct bench_place_order {
    char order_no[GATE_ORDER_NO_MAX + 1];
    int64_t amount_cents;
    char items[BENCH_PLACE_ITEMS_MAX]; /* [{"sku": "...", "qty": N}, ...] */
    char coupon[GATE_COUPON_MAX + 1];  /* "" for none; the coupon must exist, available */
};

/* Fills order i (0..n-1). Called from the placing threads at once: it must only read arg. */
typedef void (*bench_place_order_fn)(const void *arg, long i, struct bench_place_order *order);

struct bench_place_result {
    long placed;
    double seconds;  /* from the first call's start to the last session's end */
    double max_ms;   /* the slowest place_order call */
    char error[320]; /* the first failure; "" when every order was placed */
};

/* Places orders 0..n-1, all with expire_at (a timestamptz literal), from `sessions` (1..
 * BENCH_PLACE_SESSIONS_MAX) sessions on conninfo named app (application_name): session s
 * places s, s + sessions, s + 2 * sessions, ... back to back. Returns 0 when every order came
 * back placed; otherwise -1 and r->error (the other sessions stop at their next order; what
 * they placed stays). Stops, as a failure, once bench_stop is raised. */
int bench_place_orders(const char *conninfo, const char *app, int sessions, long n,
                       const char *expire_at, bench_place_order_fn fn, const void *arg,
                       struct bench_place_result *r);

#endif
