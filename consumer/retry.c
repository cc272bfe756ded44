/* The local retry set (consumer/retry.h): cancels the claim answered busy (the order's row
 * locked by another transaction) or not_due by a little (a due time rounded to the millisecond, a
 * producer's clock slightly ahead), and payments held back (a hook failed them, their order's row
 * was locked), and the offsets their partitions may store meanwhile.
 *
 * Owns the slots and the holds. Must not decide when an order goes here or for how long (the
 * commit protocol does), nor call the database, the broker or the batch. */
#include <stdlib.h>
#include <string.h>

#include "common/sched.h"
#include "consumer/retry.h"

enum og_status retry_init(struct retry_set *r, size_t cap, struct og_error *err)
{
    memset(r, 0, sizeof(*r));
    r->slots = calloc(cap, sizeof(*r->slots));
    if (r->slots == NULL)
        return og_error_set(err, OG_ERR_NOMEM, false, "out of memory for a retry set of %zu", cap);
    r->cap = cap;
    return OG_OK;
}

void retry_free(struct retry_set *r)
{
    if (r == NULL)
        return;
    for (size_t i = 0; i < r->nholds; i++)
        free(r->holds[i].topic);
    free(r->holds);
    free(r->slots);
    memset(r, 0, sizeof(*r));
}

int retry_add(struct retry_set *r, const struct batch_entry *e, const char *topic,
              int32_t partition, int64_t now_ms)
{
    for (size_t i = 0; i < r->cap; i++) {
        struct retry_slot *s = &r->slots[i];

        if (s->state != RETRY_FREE)
            continue;
        memset(s, 0, sizeof(*s));
        s->state = RETRY_IN_BATCH; /* the caller's entry still holds it; retry_wait() next */
        s->topic = topic;
        s->partition = partition;
        s->offset = e->offset;
        s->due_ms = e->due_ms;
        s->first_ms = now_ms;
        memcpy(s->order_no, e->order_no, sizeof(s->order_no));
        s->kind = e->kind == BATCH_PAYMENT ? BATCH_PAYMENT : BATCH_CANCEL;
        if (s->kind == BATCH_PAYMENT) {
            s->pay = e->pay;
            s->hook_first_ms = e->hook_first_ms;
        }
        r->used++;
        return (int)i;
    }
    return -1;
}

void retry_wait(struct retry_set *r, int slot, enum gate_outcome why, int64_t at_ms)
{
    struct retry_slot *s = &r->slots[slot];

    if (s->why != why)
        s->tries = 0; /* the bound counts answers of one kind */
    s->state = RETRY_WAITING;
    s->why = why;
    s->at_ms = at_ms;
    s->tries++;
}

void retry_release(struct retry_set *r, int slot)
{
    if (slot < 0 || (size_t)slot >= r->cap || r->slots[slot].state == RETRY_FREE)
        return;
    r->slots[slot].state = RETRY_FREE;
    r->used--;
}

int64_t retry_next_at(const struct retry_set *r)
{
    int64_t next = SCHED_NEVER;

    for (size_t i = 0; i < r->cap && r->used > 0; i++)
        if (r->slots[i].state == RETRY_WAITING && r->slots[i].at_ms < next)
            next = r->slots[i].at_ms;
    return next;
}

size_t retry_count(const struct retry_set *r, enum gate_outcome why)
{
    size_t n = 0;

    for (size_t i = 0; i < r->cap && r->used > 0; i++)
        n += r->slots[i].state == RETRY_WAITING && r->slots[i].kind == BATCH_CANCEL &&
             r->slots[i].why == why;
    return n;
}

bool retry_payment_held(const struct retry_set *r, const char *order_no, int64_t *at_ms)
{
    for (size_t i = 0; i < r->cap && r->used > 0; i++) {
        const struct retry_slot *s = &r->slots[i];
        if (s->state == RETRY_WAITING && s->kind == BATCH_PAYMENT &&
            strcmp(s->order_no, order_no) == 0) {
            if (at_ms != NULL)
                *at_ms = s->at_ms;
            return true;
        }
    }
    return false;
}

static bool retry_same_tp(const char *topic, int32_t partition, const char *t, int32_t p)
{
    return p == partition && strcmp(t, topic) == 0;
}

bool retry_floor(const struct retry_set *r, const char *topic, int32_t partition, int64_t *floor)
{
    bool found = false;

    for (size_t i = 0; i < r->cap && r->used > 0; i++) {
        const struct retry_slot *s = &r->slots[i];
        if (s->state == RETRY_FREE || !retry_same_tp(topic, partition, s->topic, s->partition))
            continue;
        if (!found || s->offset < *floor)
            *floor = s->offset;
        found = true;
    }
    return found;
}

int64_t retry_hold_take(struct retry_set *r, const char *topic, int32_t partition)
{
    for (size_t i = 0; i < r->nholds; i++) {
        struct retry_hold *h = &r->holds[i];
        if (retry_same_tp(topic, partition, h->topic, h->partition)) {
            int64_t upto = h->upto;
            free(h->topic);
            *h = r->holds[--r->nholds];
            return upto;
        }
    }
    return -1;
}

bool retry_hold_put(struct retry_set *r, const char *topic, int32_t partition, int64_t upto)
{
    struct retry_hold *h;

    if (r->nholds == r->holds_cap) {
        size_t cap = r->holds_cap ? r->holds_cap * 2 : 8;
        struct retry_hold *grown = realloc(r->holds, cap * sizeof(*grown));
        if (grown == NULL)
            return false;
        r->holds = grown;
        r->holds_cap = cap;
    }
    h = &r->holds[r->nholds];
    h->topic = strdup(topic);
    if (h->topic == NULL)
        return false;
    h->partition = partition;
    h->upto = upto;
    r->nholds++;
    return true;
}

size_t retry_revoke(struct retry_set *r, const char *topic, int32_t partition)
{
    size_t n = 0;

    for (size_t i = 0; i < r->cap && r->used > 0; i++) {
        struct retry_slot *s = &r->slots[i];
        if (s->state != RETRY_FREE && retry_same_tp(topic, partition, s->topic, s->partition)) {
            retry_release(r, (int)i);
            n++;
        }
    }
    retry_hold_take(r, topic, partition);
    return n;
}
