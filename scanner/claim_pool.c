#include "scanner/claim_pool.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"

/* A slot is one claim thread with its own session and page buffer. All slot
 * fields are guarded by the pool mutex except the page buffers, which belong
 * to whoever holds the slot's state (the run's thread while IDLE or DONE,
 * the slot's thread while BUSY). */
enum claim_slot_state { SLOT_IDLE, SLOT_BUSY, SLOT_DONE };

struct claim_slot {
    struct claim_pool *pool;
    pthread_t thread;
    bool started;
    struct db *db;
    struct claim_page page;
    enum claim_slot_state state;
    int64_t seq;                   /* page number of the run */
    struct runlog_checkpoint from; /* the end of the page before this one */
    double page_s, claim_s;
    size_t nrows;
    enum og_status st;
    struct og_error err;
    struct og_error hook_err; /* gate_claim_cancel_isolating's, when a row is hook_failed */
};

struct claim_pool {
    pthread_mutex_t mu;
    pthread_cond_t work; /* a slot became BUSY, or quit */
    pthread_cond_t done; /* a slot became DONE */
    bool quit;
    int n;
    struct claim_slot *slots;
    int64_t next_seq;                /* next page to hand out */
    struct runlog_checkpoint cursor; /* end of the last page handed out */
    bool failed;                     /* a claim failed: the checkpoint stays where it is */
};

void claim_page_free(struct claim_page *page)
{
    if (page == NULL)
        return;
    free(page->order_no);
    free(page->expire_at);
    free(page->ptrs);
    free(page->rows);
    memset(page, 0, sizeof(*page));
}

enum og_status claim_page_alloc(struct claim_page *page, int size, struct og_error *err)
{
    memset(page, 0, sizeof(*page));
    page->order_no = calloc((size_t)size, sizeof(*page->order_no));
    page->expire_at = calloc((size_t)size, sizeof(*page->expire_at));
    page->ptrs = calloc((size_t)size, sizeof(*page->ptrs));
    page->rows = calloc((size_t)size, sizeof(*page->rows));
    if (page->order_no == NULL || page->expire_at == NULL || page->ptrs == NULL ||
        page->rows == NULL) {
        claim_page_free(page);
        return og_error_set(err, OG_ERR_NOMEM, false, "out of memory for a batch of %d", size);
    }
    return OG_OK;
}

/* Copies a fetched page into a slot's buffer (same capacity). */
static void claim_page_copy(struct claim_page *dst, const struct claim_page *src)
{
    memcpy(dst->order_no, src->order_no, (size_t)src->n * sizeof(*src->order_no));
    memcpy(dst->expire_at, src->expire_at, (size_t)src->n * sizeof(*src->expire_at));
    for (int i = 0; i < src->n; i++)
        dst->ptrs[i] = dst->order_no[i];
    dst->n = src->n;
}

static void *claim_slot_main(void *arg)
{
    struct claim_slot *slot = arg;
    struct claim_pool *pool = slot->pool;

    pthread_mutex_lock(&pool->mu);
    for (;;) {
        while (slot->state != SLOT_BUSY && !pool->quit)
            pthread_cond_wait(&pool->work, &pool->mu);
        if (slot->state != SLOT_BUSY)
            break;
        pthread_mutex_unlock(&pool->mu);

        int64_t t0 = clock_mono_us();
        struct og_error e = {0}, hook_e = {0};
        size_t nrows = 0;
        enum og_status st = gate_claim_cancel_isolating(
            slot->db, slot->page.ptrs, (size_t)slot->page.n, GATE_SRC_TIMEOUT_SCANNER,
            slot->page.rows, &nrows, &hook_e, &e);

        pthread_mutex_lock(&pool->mu);
        slot->claim_s = (double)(clock_mono_us() - t0) / 1e6;
        slot->nrows = nrows;
        slot->st = st;
        slot->err = e;
        slot->hook_err = hook_e;
        slot->state = SLOT_DONE;
        pthread_cond_signal(&pool->done);
    }
    pthread_mutex_unlock(&pool->mu);
    return NULL;
}

enum og_status claim_pool_start(struct claim_pool **out, struct db **dbs, int n, int batch_size,
                                struct og_error *err)
{
    struct claim_pool *pool = calloc(1, sizeof(*pool));
    enum og_status st = OG_OK;

    *out = NULL;
    if (pool == NULL)
        return og_error_set(err, OG_ERR_NOMEM, false, "out of memory for %d claim sessions", n);
    pthread_mutex_init(&pool->mu, NULL);
    pthread_cond_init(&pool->work, NULL);
    pthread_cond_init(&pool->done, NULL);
    pool->n = n;
    pool->slots = calloc((size_t)n, sizeof(*pool->slots));
    if (pool->slots == NULL)
        st = og_error_set(err, OG_ERR_NOMEM, false, "out of memory for %d claim sessions", n);
    for (int i = 0; st == OG_OK && i < n; i++) {
        struct claim_slot *slot = &pool->slots[i];
        slot->pool = pool;
        slot->db = dbs[i];
        st = claim_page_alloc(&slot->page, batch_size, err);
        if (st == OG_OK && pthread_create(&slot->thread, NULL, claim_slot_main, slot) != 0)
            st = og_error_set(err, OG_ERR_INTERNAL, false, "cannot start claim thread %d", i + 1);
        slot->started = st == OG_OK;
    }
    if (st != OG_OK) {
        claim_pool_free(pool);
        return st;
    }
    *out = pool;
    return OG_OK;
}

void claim_pool_free(struct claim_pool *pool)
{
    if (pool == NULL)
        return;
    pthread_mutex_lock(&pool->mu);
    pool->quit = true;
    pthread_cond_broadcast(&pool->work);
    pthread_mutex_unlock(&pool->mu);
    for (int i = 0; pool->slots != NULL && i < pool->n; i++) {
        if (pool->slots[i].started)
            pthread_join(pool->slots[i].thread, NULL);
        claim_page_free(&pool->slots[i].page);
    }
    free(pool->slots);
    pthread_cond_destroy(&pool->done);
    pthread_cond_destroy(&pool->work);
    pthread_mutex_destroy(&pool->mu);
    free(pool);
}

/* With the mutex held. */
static struct claim_slot *claim_pool_find(struct claim_pool *pool, enum claim_slot_state state)
{
    for (int i = 0; i < pool->n; i++)
        if (pool->slots[i].state == state)
            return &pool->slots[i];
    return NULL;
}

bool claim_pool_has_idle(struct claim_pool *pool)
{
    bool idle;

    pthread_mutex_lock(&pool->mu);
    idle = claim_pool_find(pool, SLOT_IDLE) != NULL;
    pthread_mutex_unlock(&pool->mu);
    return idle;
}

void claim_pool_submit(struct claim_pool *pool, const struct claim_page *page, double page_s)
{
    struct claim_slot *slot;

    pthread_mutex_lock(&pool->mu);
    slot = claim_pool_find(pool, SLOT_IDLE);
    if (slot != NULL) {
        /* IDLE: the buffer is ours until the state says BUSY. */
        claim_page_copy(&slot->page, page);
        slot->page_s = page_s;
        slot->seq = pool->next_seq++;
        slot->from = pool->cursor;
        snprintf(pool->cursor.expire_at, sizeof(pool->cursor.expire_at), "%s",
                 page->expire_at[page->n - 1]);
        snprintf(pool->cursor.order_no, sizeof(pool->cursor.order_no), "%s",
                 page->order_no[page->n - 1]);
        slot->state = SLOT_BUSY;
        pthread_cond_broadcast(&pool->work);
    }
    pthread_mutex_unlock(&pool->mu);
}

const struct runlog_checkpoint *claim_pool_cursor(const struct claim_pool *pool)
{
    /* Written only by claim_pool_submit, on the same thread as the caller. */
    return &pool->cursor;
}

int claim_pool_collect(struct claim_pool *pool, bool (*done)(const struct claim_done *, void *),
                       void *arg)
{
    int collected = 0;

    pthread_mutex_lock(&pool->mu);
    for (int i = 0; i < pool->n; i++) {
        struct claim_slot *slot = &pool->slots[i];
        struct claim_done d;

        if (slot->state != SLOT_DONE)
            continue;
        d = (struct claim_done){.page = &slot->page,
                                .nrows = slot->nrows,
                                .seq = slot->seq,
                                .session = i + 1,
                                .page_s = slot->page_s,
                                .claim_s = slot->claim_s,
                                .st = slot->st,
                                .err = &slot->err,
                                .hook_err = &slot->hook_err};
        if (!done(&d, arg))
            pool->failed = true;
        slot->state = SLOT_IDLE;
        collected++;
    }
    pthread_mutex_unlock(&pool->mu);
    return collected;
}

void claim_pool_wait(struct claim_pool *pool)
{
    pthread_mutex_lock(&pool->mu);
    while (claim_pool_find(pool, SLOT_DONE) == NULL && claim_pool_find(pool, SLOT_BUSY) != NULL)
        pthread_cond_wait(&pool->done, &pool->mu);
    pthread_mutex_unlock(&pool->mu);
}

bool claim_pool_busy(struct claim_pool *pool)
{
    bool busy;

    pthread_mutex_lock(&pool->mu);
    busy = claim_pool_find(pool, SLOT_BUSY) != NULL || claim_pool_find(pool, SLOT_DONE) != NULL;
    pthread_mutex_unlock(&pool->mu);
    return busy;
}

bool claim_pool_checkpoint(struct claim_pool *pool, struct runlog_checkpoint *cp)
{
    const struct claim_slot *oldest = NULL;
    bool ok;

    pthread_mutex_lock(&pool->mu);
    ok = !pool->failed;
    if (ok) {
        for (int i = 0; i < pool->n; i++)
            if (pool->slots[i].state != SLOT_IDLE &&
                (oldest == NULL || pool->slots[i].seq < oldest->seq))
                oldest = &pool->slots[i];
        *cp = oldest != NULL ? oldest->from : pool->cursor;
    }
    pthread_mutex_unlock(&pool->mu);
    return ok;
}
