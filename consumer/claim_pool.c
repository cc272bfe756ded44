/* The claim pool (consumer/claim_pool.h): worker threads, one per extra database session, each
 * claiming the parts of batches it is handed, in the order it was handed them.
 *
 * Owns the workers, their sessions, their FIFOs and their copies of a part's order numbers and
 * rows. Must not touch the batch, the retry set, Kafka or the loop's session: what a worker reads
 * of the caller's part it copies under the pool's lock while the part is still wanted (the
 * caller keeps it put until it is answered or given up, which takes the lock), and it writes the
 * answer back only while the part is still wanted (not after the caller gave it up).
 * After claim_pool_new the workers read nothing of the configuration. */
#define _GNU_SOURCE /* pthread_timedjoin_np */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/db.h"
#include "common/log.h"
#include "consumer/claim_pool.h"

/* An idle worker looks at the stop flag at least this often: its wait for work is bounded. */
#define CLAIM_POOL_IDLE_MS 1000
/* The caller's wait for the parts looks at the process's stop flag at least this often: a SIGTERM
 * gives the parts still out up (their batch is not stored), so the shutdown does not wait for a
 * claim held by a lock until the stop guard ends the process. */
#define CLAIM_POOL_STOP_EVERY_MS 50
/* A worker that cannot connect logs it on the first failure and then every this many. */
#define CLAIM_POOL_LOG_EVERY 10

struct claim_pool_worker {
    struct claim_pool *pool;
    int index; /* 1..workers: its session's application_name suffix */
    pthread_t thread;
    bool running;      /* its thread was started and not joined yet */
    struct db *db;     /* the worker's alone; NULL until made (again) */
    char app_name[64]; /* "ordergate-consumer-claim-N" */
    const char **nos;  /* its copy of a part's order numbers: pointers into names */
    char (*names)[GATE_ORDER_NO_MAX + 1];
    struct gate_cancel_row *rows; /* its answer, copied into the part's rows when still wanted */
    /* Under pool->lock: */
    bool connected;
    /* The FIFO: q[(head + i) % CLAIM_POOL_QUEUE_MAX] for i < n, handed over and not answered
     * yet; the head is the one claimed (calling) or claimed next. */
    struct claim_pool_slot {
        struct claim_pool_part *part;
        bool abandoned; /* the caller stopped waiting for part: never written to again */
    } q[CLAIM_POOL_QUEUE_MAX];
    size_t head, n;
    bool calling; /* its claim of the head is in flight */
};

struct claim_pool {
    long retry_base_ms, retry_cap_ms; /* database.retry_base_ms, retry_cap_ms: connect backoff */
    struct metric *connected;
    volatile sig_atomic_t *stop_flag;
    int wait_ms;
    size_t cap; /* room for this many order numbers per part (consumer.batch_size) */
    pthread_mutex_t lock;
    pthread_cond_t work, done; /* CLOCK_MONOTONIC */
    volatile sig_atomic_t stop;
    bool started;
    size_t nworkers;
    struct claim_pool_worker w[CLAIM_POOL_SESSIONS_MAX];
};

/* ms from now on clock (the conditions' CLOCK_MONOTONIC; pthread_timedjoin_np's CLOCK_REALTIME). */
static void claim_pool_deadline(clockid_t clock, struct timespec *ts, int64_t ms)
{
    clock_gettime(clock, ts);
    ts->tv_sec += (time_t)(ms / 1000);
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

/* Connects w's session, on w's thread; logs a failure on its first attempt and every
 * CLAIM_POOL_LOG_EVERY. */
static bool claim_pool_connect(struct claim_pool_worker *w, int attempt)
{
    struct og_error err = {0};
    enum og_status st = db_connect(w->db, &err);
    char q[600];

    if (st == OG_OK) {
        log_info("claim_session_connected", "session=%d application_name=%s attempts=%d", w->index,
                 w->app_name, attempt + 1);
        return true;
    }
    if (attempt % CLAIM_POOL_LOG_EVERY == 0)
        log_warn("claim_session_connect_failed",
                 "session=%d attempt=%d error=%s msg=\"claims go on the sessions connected; "
                 "this one is connected again with backoff\"",
                 w->index, attempt + 1, log_quote(q, sizeof(q), err.msg));
    return false;
}

/* The FIFO's head leaves it. Under the lock. */
static void claim_pool_pop(struct claim_pool_worker *w)
{
    w->q[w->head].part = NULL;
    w->q[w->head].abandoned = false;
    w->head = (w->head + 1) % CLAIM_POOL_QUEUE_MAX;
    w->n--;
}

/* w's session is gone (lost, or dropped after a call given up): every part still queued is
 * answered as failed, nothing having been sent for it, so that its batch claims its orders
 * again instead of waiting for a reconnection. Under the lock; the caller broadcasts done. */
static void claim_pool_fail_queue(struct claim_pool_worker *w)
{
    while (w->n > 0) {
        struct claim_pool_slot *slot = &w->q[w->head];

        if (!slot->abandoned) {
            struct claim_pool_part *part = slot->part;
            part->nrows = 0;
            part->st = og_error_set(&part->err, OG_ERR_DB, true,
                                    "claim session %d lost before this part ran; its orders "
                                    "are claimed again",
                                    w->index);
            snprintf(part->err.sqlstate, sizeof(part->err.sqlstate), "08006");
            part->db_ms = 0;
            part->done = true;
        }
        claim_pool_pop(w);
    }
}

static void *claim_pool_main(void *arg)
{
    struct claim_pool_worker *w = arg;
    struct claim_pool *p = w->pool;
    int attempt = 0;

    pthread_mutex_lock(&p->lock);
    while (!p->stop) {
        struct claim_pool_slot *slot;
        struct claim_pool_part *part;
        struct og_error err = {0};
        enum og_status st;
        size_t nrows = 0, n;
        size_t want;
        bool fits;
        struct timespec until;

        if (!w->connected) {
            pthread_mutex_unlock(&p->lock);
            bool ok = claim_pool_connect(w, attempt);
            if (!ok) {
                clock_sleep_until_flag(clock_backoff_ms(p->retry_base_ms, p->retry_cap_ms, attempt),
                                       &p->stop, NULL);
                attempt++;
            }
            pthread_mutex_lock(&p->lock);
            if (ok) {
                attempt = 0;
                w->connected = true;
                metric_inc(p->connected, 1);
            }
            continue;
        }
        if (w->n == 0) {
            claim_pool_deadline(CLOCK_MONOTONIC, &until, CLAIM_POOL_IDLE_MS);
            pthread_cond_timedwait(&p->work, &p->lock, &until);
            continue;
        }
        slot = &w->q[w->head];
        if (slot->abandoned) { /* given up before it was picked up: nothing was sent */
            claim_pool_pop(w);
            continue;
        }
        /* The caller keeps the part put until it is answered or given up (which takes the
         * lock): its order numbers are read here, under the lock. */
        part = slot->part;
        want = part->n;
        fits = want <= p->cap;
        n = fits ? want : p->cap;
        for (size_t i = 0; i < n; i++) {
            snprintf(w->names[i], sizeof(w->names[i]), "%s", part->nos[i]);
            w->nos[i] = w->names[i];
        }
        w->calling = true;
        pthread_mutex_unlock(&p->lock);
        /* Nothing of part is read outside the lock: given up, it may be gone. */
        st = fits ? gate_claim_cancel(w->db, w->nos, n, GATE_SRC_TIMEOUT_CONSUMER, w->rows, &nrows,
                                      &err)
                  : og_error_set(&err, OG_ERR_ARG, false,
                                 "claim part of %zu orders "
                                 "exceeds the pool's %zu",
                                 want, p->cap);
        pthread_mutex_lock(&p->lock);
        w->calling = false;
        slot = &w->q[w->head]; /* the head stays the head while calling: only this thread pops */
        if (slot->abandoned) {
            /* The caller gave up on it and claims its orders again later (the gate answers
             * already_cancelled for what this call committed): this session answered too late
             * to be trusted with the next part, so it is dropped and made anew, and what was
             * queued behind goes back to its batch. */
            claim_pool_pop(w);
            claim_pool_fail_queue(w);
            w->connected = false;
            metric_inc(p->connected, -1);
            pthread_cond_broadcast(&p->done);
            pthread_mutex_unlock(&p->lock);
            log_warn("claim_session_dropped",
                     "session=%d status=%s msg=\"its claim answered after the loop stopped "
                     "waiting for it; connected anew\"",
                     w->index, og_status_str(st));
            db_close(w->db);
            pthread_mutex_lock(&p->lock);
            continue;
        }
        memcpy(part->rows, w->rows, nrows * sizeof(*w->rows));
        part->nrows = nrows;
        part->st = st;
        part->err = err;
        part->db_ms = db_last_ms(w->db);
        part->done = true;
        claim_pool_pop(w);
        if (st != OG_OK && (db_conn(w->db) == NULL || PQstatus(db_conn(w->db)) != CONNECTION_OK)) {
            /* Lost: connected again, with backoff, before it takes another part; the parts
             * queued behind go back to their batch. */
            claim_pool_fail_queue(w);
            w->connected = false;
            metric_inc(p->connected, -1);
        }
        pthread_cond_broadcast(&p->done);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

enum og_status claim_pool_new(const struct og_config *cfg, int workers, int wait_ms,
                              struct metric *connected, struct hook_timing *timing,
                              volatile sig_atomic_t *stop, struct claim_pool **out,
                              struct og_error *err)
{
    const struct cfg_db_open_opts opts = {.max_attempts = 1};
    struct claim_pool *p;
    pthread_condattr_t attr;
    enum og_status st;
    size_t cap = cfg->consumer.batch_size > 0 ? (size_t)cfg->consumer.batch_size : 1;

    *out = NULL;
    if (workers <= 0)
        return OG_OK;
    if (workers >= CLAIM_POOL_SESSIONS_MAX)
        return og_error_set(err, OG_ERR_CONFIG, false, "consumer.claim_sessions: at most %d",
                            CLAIM_POOL_SESSIONS_MAX);
    p = calloc(1, sizeof(*p));
    if (p == NULL)
        return og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
    p->retry_base_ms = cfg->database.retry_base_ms;
    p->retry_cap_ms = cfg->database.retry_cap_ms;
    p->connected = connected;
    p->stop_flag = stop;
    p->wait_ms = wait_ms;
    p->cap = cap;
    p->nworkers = (size_t)workers;
    pthread_mutex_init(&p->lock, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&p->work, &attr);
    pthread_cond_init(&p->done, &attr);
    pthread_condattr_destroy(&attr);
    for (size_t i = 0; i < p->nworkers; i++) {
        struct claim_pool_worker *w = &p->w[i];
        w->pool = p;
        w->index = (int)i + 1;
        snprintf(w->app_name, sizeof(w->app_name), "ordergate-consumer-claim-%d", w->index);
        w->nos = calloc(cap, sizeof(*w->nos));
        w->names = calloc(cap, sizeof(*w->names));
        w->rows = calloc(cap, sizeof(*w->rows));
        if (w->nos == NULL || w->names == NULL || w->rows == NULL) {
            claim_pool_stop(&p, 0);
            return og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
        }
        /* Made here, not on the worker's thread: after this the workers never read cfg, so a
         * worker that does not stop in time (claim_pool_stop) cannot outlive it in use. One
         * attempt per call, as on the loop's session: a part that fails is claimed again with
         * its batch by the loop, which backs off and keeps polling meanwhile. */
        st = cfg_db_open(cfg, w->app_name, &opts, stop, &w->db, err);
        if (st != OG_OK) {
            claim_pool_stop(&p, 0);
            return st;
        }
        if (timing != NULL)
            hook_timing_attach(w->db, timing); /* not connected yet: cannot fail */
    }
    *out = p;
    return OG_OK;
}

size_t claim_pool_ready(struct claim_pool *p, int *idx)
{
    size_t ready = 0;

    if (p == NULL)
        return 0;
    pthread_mutex_lock(&p->lock);
    if (!p->started) {
        p->started = true;
        for (size_t i = 0; i < p->nworkers; i++) {
            if (pthread_create(&p->w[i].thread, NULL, claim_pool_main, &p->w[i]) == 0)
                p->w[i].running = true;
            else
                log_error("claim_session_thread_failed",
                          "session=%d msg=\"claims go on the sessions there are\"", p->w[i].index);
        }
    }
    for (size_t i = 0; i < p->nworkers; i++)
        if (p->w[i].running && p->w[i].connected && p->w[i].n < CLAIM_POOL_QUEUE_MAX) {
            if (idx != NULL)
                idx[ready] = (int)i;
            ready++;
        }
    pthread_mutex_unlock(&p->lock);
    return ready;
}

bool claim_pool_submit(struct claim_pool *p, int worker, struct claim_pool_part *part)
{
    struct claim_pool_worker *w;
    bool handed = false;

    if (p == NULL || worker < 0 || (size_t)worker >= p->nworkers)
        return false;
    w = &p->w[worker];
    part->done = false;
    part->nrows = 0;
    pthread_mutex_lock(&p->lock);
    if (w->running && w->connected && w->n < CLAIM_POOL_QUEUE_MAX) {
        struct claim_pool_slot *slot = &w->q[(w->head + w->n) % CLAIM_POOL_QUEUE_MAX];
        slot->part = part;
        slot->abandoned = false;
        w->n++;
        handed = true;
        pthread_cond_broadcast(&p->work);
    }
    pthread_mutex_unlock(&p->lock);
    return handed;
}

bool claim_pool_answered(struct claim_pool *p, struct claim_pool_part *const *parts, size_t n)
{
    bool all = true;

    if (p == NULL)
        return true;
    pthread_mutex_lock(&p->lock);
    for (size_t i = 0; i < n && all; i++)
        all = parts[i]->done;
    pthread_mutex_unlock(&p->lock);
    return all;
}

/* The FIFO slot that holds part, NULL when none does (answered, or given up and dropped). Under
 * the lock. */
static struct claim_pool_slot *claim_pool_slot_of(struct claim_pool *p,
                                                  const struct claim_pool_part *part,
                                                  struct claim_pool_worker **worker)
{
    for (size_t i = 0; i < p->nworkers; i++) {
        struct claim_pool_worker *w = &p->w[i];
        for (size_t j = 0; j < w->n; j++) {
            struct claim_pool_slot *slot = &w->q[(w->head + j) % CLAIM_POOL_QUEUE_MAX];
            if (slot->part == part && !slot->abandoned) {
                *worker = w;
                return slot;
            }
        }
    }
    return NULL;
}

/* Gives up every one of parts[0..n) not answered yet: never written to again. Under the lock. */
static void claim_pool_abandon(struct claim_pool *p, struct claim_pool_part *const *parts, size_t n,
                               const char *why)
{
    for (size_t i = 0; i < n; i++) {
        struct claim_pool_worker *w = NULL;
        struct claim_pool_slot *slot;

        if (parts[i]->done || (slot = claim_pool_slot_of(p, parts[i], &w)) == NULL)
            continue;
        slot->abandoned = true;
        log_warn("claim_part_abandoned",
                 "session=%d orders=%zu wait_ms=%d why=%s msg=\"no answer; its orders "
                 "are claimed again with the batch (no offset was stored), the session "
                 "is dropped when its call returns\"",
                 w->index, parts[i]->n, p->wait_ms, why);
    }
}

void claim_pool_give_up(struct claim_pool *p, struct claim_pool_part *const *parts, size_t n)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->lock);
    claim_pool_abandon(p, parts, n, "freed");
    pthread_mutex_unlock(&p->lock);
}

void claim_pool_wait(struct claim_pool *p, struct claim_pool_part *const *parts, size_t n,
                     int64_t since_ms)
{
    int64_t deadline;

    if (p == NULL)
        return;
    deadline = since_ms + p->wait_ms;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        bool pending = false;
        int64_t left;
        struct timespec until;

        for (size_t i = 0; i < n && !pending; i++)
            pending = !parts[i]->done;
        if (!pending)
            break;
        left = deadline - clock_mono_ms();
        if (left <= 0 || (p->stop_flag != NULL && *p->stop_flag)) {
            claim_pool_abandon(p, parts, n, left <= 0 ? "bound" : "stopping");
            break;
        }
        claim_pool_deadline(CLOCK_MONOTONIC, &until,
                            left < CLAIM_POOL_STOP_EVERY_MS ? left : CLAIM_POOL_STOP_EVERY_MS);
        pthread_cond_timedwait(&p->done, &p->lock, &until);
    }
    pthread_mutex_unlock(&p->lock);
}

bool claim_pool_stop(struct claim_pool **pp, int64_t deadline_ms)
{
    struct claim_pool *p = *pp;

    if (p == NULL)
        return true;
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->lock);
    for (size_t i = 0; i < p->nworkers; i++) {
        struct claim_pool_worker *w = &p->w[i];
        struct timespec until;
        int64_t left = deadline_ms - clock_mono_ms();

        if (!w->running)
            continue;
        /* A claim in flight ends at its answer, bounded by the session's reply bound, not
         * necessarily by our deadline. */
        claim_pool_deadline(CLOCK_REALTIME, &until, left > 0 ? left : 0);
        if (pthread_timedjoin_np(w->thread, NULL, &until) != 0) {
            log_warn("claim_session_stop_timeout",
                     "session=%d note=\"a claim is still in flight; its batch's offsets were "
                     "not stored, so its messages come again\"",
                     w->index);
            return false;
        }
        w->running = false;
    }
    for (size_t i = 0; i < p->nworkers; i++) {
        db_free(p->w[i].db);
        free(p->w[i].nos);
        free(p->w[i].names);
        free(p->w[i].rows);
    }
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->lock);
    free(p);
    *pp = NULL;
    return true;
}
