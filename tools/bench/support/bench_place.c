#include "tools/bench/support/bench_place.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/db.h"
#include "tools/bench/support/bench_run.h"

struct bench_place_run {
    const char *conninfo, *app, *expire_at;
    long n;
    int sessions;
    bench_place_order_fn fn;
    const void *arg;
    atomic_bool failed;   /* the others stop at their next order */
    pthread_mutex_t lock; /* guards error */
    char error[320];
};

struct bench_place_session {
    struct bench_place_run *run;
    int first;
    long placed;
    double max_ms;
};

/* Keeps the first failure only: the others are mostly its consequences. */
static void bench_place_fail(struct bench_place_run *run, const char *msg)
{
    pthread_mutex_lock(&run->lock);
    if (run->error[0] == '\0')
        snprintf(run->error, sizeof(run->error), "%s", msg);
    pthread_mutex_unlock(&run->lock);
    atomic_store(&run->failed, true);
}

static void *bench_place_thread(void *arg)
{
    struct bench_place_session *s = arg;
    struct bench_place_run *run = s->run;
    struct bench_place_order *order = malloc(sizeof(*order));
    struct og_error err = {0};
    struct db *db = db_new(run->conninfo, NULL, run->app, NULL, NULL);
    char msg[400];

    if (order == NULL || db == NULL) {
        bench_place_fail(run, "placing session: out of memory");
        goto out;
    }
    if (db_connect(db, &err) != OG_OK) {
        snprintf(msg, sizeof(msg), "placing session: %s", err.msg);
        bench_place_fail(run, msg);
        goto out;
    }
    for (long i = s->first; i < run->n && !atomic_load(&run->failed); i += run->sessions) {
        enum gate_outcome outcome = GATE_UNKNOWN;
        int64_t t0;
        double ms;

        if (bench_stop) {
            bench_place_fail(run, "placing orders: interrupted");
            break;
        }
        memset(order, 0, sizeof(*order));
        run->fn(run->arg, i, order);
        t0 = clock_mono_us();
        if (gate_place(db, order->order_no, order->amount_cents, order->items,
                       order->coupon[0] != '\0' ? order->coupon : NULL, run->expire_at, &outcome,
                       &err) != OG_OK) {
            snprintf(msg, sizeof(msg), "place_order %s: %s", order->order_no, err.msg);
            bench_place_fail(run, msg);
            break;
        }
        if (outcome != GATE_PLACED) {
            snprintf(msg, sizeof(msg), "place_order %s: %s, expected placed", order->order_no,
                     gate_outcome_str(outcome));
            bench_place_fail(run, msg);
            break;
        }
        ms = (double)(clock_mono_us() - t0) / 1000.0;
        if (ms > s->max_ms)
            s->max_ms = ms;
        s->placed++;
    }
out:
    db_free(db);
    free(order);
    return NULL;
}

int bench_place_orders(const char *conninfo, const char *app, int sessions, long n,
                       const char *expire_at, bench_place_order_fn fn, const void *arg,
                       struct bench_place_result *r)
{
    struct bench_place_run run = {.conninfo = conninfo,
                                  .app = app,
                                  .expire_at = expire_at,
                                  .n = n,
                                  .sessions = sessions,
                                  .fn = fn,
                                  .arg = arg};
    struct bench_place_session s[BENCH_PLACE_SESSIONS_MAX];
    pthread_t t[BENCH_PLACE_SESSIONS_MAX];
    int started = 0, rc = -1;
    double t0;

    memset(r, 0, sizeof(*r));
    if (sessions < 1 || sessions > BENCH_PLACE_SESSIONS_MAX) {
        snprintf(r->error, sizeof(r->error), "placing orders: %d sessions (1..%d)", sessions,
                 BENCH_PLACE_SESSIONS_MAX);
        return -1;
    }
    atomic_init(&run.failed, false);
    pthread_mutex_init(&run.lock, NULL);
    t0 = bench_mono_s();
    for (; started < sessions; started++) {
        s[started] = (struct bench_place_session){.run = &run, .first = started};
        if (pthread_create(&t[started], NULL, bench_place_thread, &s[started]) != 0) {
            bench_place_fail(&run, "placing orders: pthread_create failed");
            break;
        }
    }
    for (int i = 0; i < started; i++) {
        pthread_join(t[i], NULL);
        r->placed += s[i].placed;
        if (s[i].max_ms > r->max_ms)
            r->max_ms = s[i].max_ms;
    }
    r->seconds = bench_mono_s() - t0;
    snprintf(r->error, sizeof(r->error), "%s", run.error);
    if (r->error[0] == '\0' && r->placed != n)
        snprintf(r->error, sizeof(r->error), "placing orders: %ld of %ld placed", r->placed, n);
    rc = r->error[0] == '\0' ? 0 : -1;
    pthread_mutex_destroy(&run.lock);
    return rc;
}
