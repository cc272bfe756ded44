#include "consumer/window.h"

#include <stdlib.h>
#include <string.h>

struct window_part {
    char *topic;
    int32_t partition;
    struct window_entry *ring; /* WINDOW_PART_MAX entries, allocated on first use */
    size_t head, n;
};

struct window {
    struct window_part *parts;
    size_t nparts, cap;
    size_t total;
};

struct window *window_new(void)
{
    return calloc(1, sizeof(struct window));
}

void window_free(struct window *w)
{
    if (w == NULL)
        return;
    for (size_t i = 0; i < w->nparts; i++) {
        free(w->parts[i].topic);
        free(w->parts[i].ring);
    }
    free(w->parts);
    free(w);
}

static struct window_part *window_find(const struct window *w, const char *topic, int32_t partition)
{
    for (size_t i = 0; i < w->nparts; i++)
        if (w->parts[i].partition == partition && strcmp(w->parts[i].topic, topic) == 0)
            return &w->parts[i];
    return NULL;
}

bool window_busy(const struct window *w, const char *topic, int32_t partition)
{
    const struct window_part *p = window_find(w, topic, partition);

    return p != NULL && p->n > 0;
}

enum window_put_result window_put(struct window *w, const char *topic, int32_t partition,
                                  int64_t offset, int64_t due_ms, int64_t fetched_ms,
                                  const struct codec_cancel *c)
{
    struct window_part *p = window_find(w, topic, partition);
    struct window_entry *e;

    if (p == NULL) {
        if (w->nparts == w->cap) {
            size_t cap = w->cap ? w->cap * 2 : 16;
            struct window_part *grown = realloc(w->parts, cap * sizeof(*grown));
            if (grown == NULL)
                return WINDOW_NOMEM;
            w->parts = grown;
            w->cap = cap;
        }
        p = &w->parts[w->nparts];
        memset(p, 0, sizeof(*p));
        p->topic = strdup(topic);
        if (p->topic == NULL)
            return WINDOW_NOMEM;
        p->partition = partition;
        w->nparts++;
    }
    if (p->n == WINDOW_PART_MAX)
        return WINDOW_FULL;
    if (p->ring == NULL) {
        p->ring = malloc(WINDOW_PART_MAX * sizeof(*p->ring));
        if (p->ring == NULL)
            return WINDOW_NOMEM;
        p->head = 0;
    }
    e = &p->ring[(p->head + p->n) % WINDOW_PART_MAX];
    e->offset = offset;
    e->due_ms = due_ms;
    e->fetched_ms = fetched_ms;
    e->cancel = *c;
    p->n++;
    w->total++;
    return WINDOW_HELD;
}

size_t window_take_due(struct window *w, int64_t now_ms, window_take_fn fn, void *arg)
{
    size_t taken = 0;

    for (size_t i = 0; i < w->nparts; i++) {
        struct window_part *p = &w->parts[i];
        while (p->n > 0 && p->ring[p->head].due_ms <= now_ms) {
            if (!fn(arg, p->topic, p->partition, &p->ring[p->head]))
                return taken;
            p->head = (p->head + 1) % WINDOW_PART_MAX;
            p->n--;
            w->total--;
            taken++;
        }
    }
    return taken;
}

int64_t window_head_due(const struct window *w, const char *topic, int32_t partition)
{
    const struct window_part *p = window_find(w, topic, partition);

    return p != NULL && p->n > 0 ? p->ring[p->head].due_ms : WINDOW_NEVER;
}

int64_t window_next_due(const struct window *w)
{
    int64_t next = WINDOW_NEVER;

    for (size_t i = 0; i < w->nparts; i++)
        if (w->parts[i].n > 0 && w->parts[i].ring[w->parts[i].head].due_ms < next)
            next = w->parts[i].ring[w->parts[i].head].due_ms;
    return next;
}

void window_forget(struct window *w, const char *topic, int32_t partition)
{
    struct window_part *p = window_find(w, topic, partition);

    if (p == NULL)
        return;
    w->total -= p->n;
    free(p->topic);
    free(p->ring);
    *p = w->parts[--w->nparts];
}

size_t window_count(const struct window *w)
{
    return w->total;
}
