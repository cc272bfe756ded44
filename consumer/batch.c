/* The batch container (consumer/batch.h): entries and the partitions they came from.
 *
 * Owns only memory: it never calls the database, the broker or the retry set, and it does not
 * decide what an entry's state means (consumer/commit.c does). */
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "consumer/batch.h"

enum og_status batch_init(struct batch *b, size_t cap, struct og_error *err)
{
    memset(b, 0, sizeof(*b));
    b->e = calloc(cap, sizeof(*b->e));
    if (b->e == NULL)
        return og_error_set(err, OG_ERR_NOMEM, false, "out of memory for a batch of %zu", cap);
    b->cap = cap;
    return OG_OK;
}

void batch_clear(struct batch *b)
{
    for (size_t i = 0; i < b->n; i++) {
        free(b->e[i].dlq_key);
        free(b->e[i].dlq_value);
        free(b->e[i].dlq_reason);
    }
    /* No memset of the entries (about a kilobyte each, the payment's fields included): batch_add
     * zeroes each one it hands out, and nothing reads past n. */
    for (size_t i = 0; i < b->ntps; i++)
        free(b->tps[i].topic);
    b->n = 0;
    b->ntps = 0;
    b->dlq_bytes = 0;
    b->first_ms = 0;
}

void batch_free(struct batch *b)
{
    if (b == NULL || b->e == NULL)
        return;
    batch_clear(b);
    free(b->e);
    free(b->tps);
    memset(b, 0, sizeof(*b));
}

bool batch_full(const struct batch *b)
{
    return b->n >= b->cap || b->dlq_bytes >= BATCH_DLQ_BUDGET;
}

static int batch_tp_find(const struct batch *b, const char *topic, int32_t partition)
{
    for (size_t i = b->ntps; i-- > 0;)
        if (!b->tps[i].voided && b->tps[i].partition == partition &&
            strcmp(b->tps[i].topic, topic) == 0)
            return (int)i;
    return -1;
}

struct batch_entry *batch_add(struct batch *b, enum batch_kind kind, const char *topic,
                              int32_t partition, int64_t offset)
{
    struct batch_entry *e;
    int tp;

    if (b->n >= b->cap)
        return NULL;
    tp = batch_tp_find(b, topic, partition);
    if (tp < 0) {
        if (b->ntps == b->tps_cap) {
            size_t cap = b->tps_cap ? b->tps_cap * 2 : 16;
            struct batch_tp *grown = realloc(b->tps, cap * sizeof(*grown));
            if (grown == NULL)
                return NULL;
            b->tps = grown;
            b->tps_cap = cap;
        }
        b->tps[b->ntps].topic = strdup(topic);
        if (b->tps[b->ntps].topic == NULL)
            return NULL;
        b->tps[b->ntps].partition = partition;
        b->tps[b->ntps].max_offset = offset;
        b->tps[b->ntps].voided = false;
        tp = (int)b->ntps++;
    }
    if (offset > b->tps[tp].max_offset)
        b->tps[tp].max_offset = offset;
    if (b->n == 0)
        b->first_ms = clock_mono_ms();
    e = &b->e[b->n++];
    memset(e, 0, sizeof(*e));
    e->kind = kind;
    e->state = BATCH_NEW;
    e->tp = tp;
    e->offset = offset;
    e->retry = -1;
    return e;
}

void batch_void(struct batch *b, const char *topic, int32_t partition)
{
    int tp = batch_tp_find(b, topic, partition);

    if (tp >= 0)
        b->tps[tp].voided = true;
}

bool batch_has(const struct batch *b, const char *topic, int32_t partition)
{
    return batch_tp_find(b, topic, partition) >= 0;
}

bool batch_live(const struct batch *b, const struct batch_entry *e)
{
    return !b->tps[e->tp].voided;
}

size_t batch_due_pending(const struct batch *b)
{
    size_t n = 0;

    for (size_t i = 0; i < b->n; i++)
        n += b->e[i].kind == BATCH_CANCEL && b->e[i].state != BATCH_DONE && batch_live(b, &b->e[i]);
    return n;
}
