#include "common/sched.h"

#include <stdlib.h>
#include <string.h>

struct sched_part {
    char *topic;
    int32_t partition;
    bool paused;         /* paused by us */
    int64_t resume_at;   /* wall ms; 0 = as soon as no stall is active */
    int64_t seek_offset; /* where we sought the partition to, -1 when we did not seek */
};

struct sched {
    struct sched_part *parts;
    size_t n, cap;
    size_t last; /* index of the last hit: messages arrive in runs per partition */
    bool stalled;
    int64_t min_pause_ms;
    int64_t lead_ms;
};

struct sched *sched_new(int64_t min_pause_ms)
{
    struct sched *s = calloc(1, sizeof(struct sched));

    if (s != NULL)
        s->min_pause_ms = min_pause_ms > 0 ? min_pause_ms : 0;
    return s;
}

void sched_free(struct sched *s)
{
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->n; i++)
        free(s->parts[i].topic);
    free(s->parts);
    free(s);
}

static struct sched_part *sched_find(struct sched *s, const char *topic, int32_t partition)
{
    if (s->last < s->n && s->parts[s->last].partition == partition &&
        strcmp(s->parts[s->last].topic, topic) == 0)
        return &s->parts[s->last];
    for (size_t i = 0; i < s->n; i++) {
        if (s->parts[i].partition == partition && strcmp(s->parts[i].topic, topic) == 0) {
            s->last = i;
            return &s->parts[i];
        }
    }
    return NULL;
}

/* Paused until lead_ms before due_ms, and at least min_pause_ms. */
static void sched_pause_until(struct sched *s, struct sched_part *p, int64_t offset, int64_t due_ms,
                              int64_t now_ms)
{
    int64_t at = due_ms == SCHED_ALWAYS_DUE ? now_ms : due_ms - s->lead_ms;

    p->paused = true;
    p->resume_at = at - now_ms < s->min_pause_ms ? now_ms + s->min_pause_ms : at;
    p->seek_offset = offset;
}

static void sched_reset(struct sched *s, struct sched_part *p)
{
    p->paused = s->stalled;
    p->resume_at = 0;
    p->seek_offset = -1;
}

/* Finds or adds a partition; NULL only when out of memory. */
static struct sched_part *sched_get(struct sched *s, const char *topic, int32_t partition)
{
    struct sched_part *p = sched_find(s, topic, partition);

    if (p != NULL)
        return p;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        struct sched_part *grown = realloc(s->parts, cap * sizeof(*grown));
        if (grown == NULL)
            return NULL;
        s->parts = grown;
        s->cap = cap;
    }
    p = &s->parts[s->n];
    p->topic = strdup(topic);
    if (p->topic == NULL)
        return NULL;
    p->partition = partition;
    p->paused = false;
    p->resume_at = 0;
    p->seek_offset = -1;
    s->last = s->n++;
    return p;
}

bool sched_assign(struct sched *s, const char *topic, int32_t partition)
{
    struct sched_part *p = sched_get(s, topic, partition);

    if (p == NULL)
        return false;
    sched_reset(s, p);
    return p->paused;
}

bool sched_revoke(struct sched *s, const char *topic, int32_t partition)
{
    struct sched_part *p = sched_find(s, topic, partition);
    bool paused;

    if (p == NULL)
        return false;
    paused = p->paused;
    free(p->topic);
    /* Order does not matter: move the last entry into the hole. */
    *p = s->parts[--s->n];
    s->last = 0;
    return paused;
}

enum sched_verdict sched_offer(struct sched *s, const char *topic, int32_t partition,
                               int64_t offset, int64_t due_ms, int64_t now_ms)
{
    struct sched_part *p = sched_get(s, topic, partition);

    if (p == NULL)
        return SCHED_NOMEM;
    if (p->paused) {
        /* We are waiting on this partition already. A message at or after
         * the offset we sought to is a prefetched copy: it comes back after
         * the resume. One before it (or when we did not seek: a stall pause)
         * would be skipped by the resume, so seek back to it. */
        if (p->seek_offset >= 0 && offset >= p->seek_offset)
            return SCHED_DROP;
        p->seek_offset = offset;
        if (!s->stalled && p->resume_at != 0 && due_ms < p->resume_at)
            p->resume_at = due_ms < now_ms ? now_ms : due_ms;
        return SCHED_PAUSE;
    }
    if (s->stalled) {
        p->paused = true;
        p->resume_at = 0;
        p->seek_offset = offset;
        return SCHED_PAUSE;
    }
    if (due_ms <= now_ms)
        return SCHED_DUE;
    sched_pause_until(s, p, offset, due_ms, now_ms);
    return SCHED_PAUSE;
}

bool sched_pause(struct sched *s, const char *topic, int32_t partition, int64_t offset,
                 int64_t due_ms, int64_t now_ms)
{
    struct sched_part *p = sched_get(s, topic, partition);

    if (p == NULL)
        return false;
    sched_pause_until(s, p, offset, due_ms, now_ms);
    return true;
}

bool sched_pause_at(struct sched *s, const char *topic, int32_t partition, int64_t offset,
                    int64_t at_ms, int64_t now_ms)
{
    struct sched_part *p = sched_get(s, topic, partition);

    if (p == NULL)
        return false;
    p->paused = true;
    p->resume_at = at_ms - now_ms < s->min_pause_ms ? now_ms + s->min_pause_ms : at_ms;
    p->seek_offset = offset;
    return true;
}

void sched_set_lead(struct sched *s, int64_t lead_ms)
{
    s->lead_ms = lead_ms > 0 ? lead_ms : 0;
}

size_t sched_take_resumable(struct sched *s, int64_t now_ms, sched_visit_fn fn, void *arg)
{
    size_t n = 0;

    if (s->stalled)
        return 0;
    for (size_t i = 0; i < s->n; i++) {
        struct sched_part *p = &s->parts[i];
        if (p->paused && p->resume_at <= now_ms) {
            int64_t offset = p->seek_offset;
            p->paused = false;
            p->resume_at = 0;
            p->seek_offset = -1;
            n++;
            if (fn != NULL)
                fn(arg, p->topic, p->partition, offset);
        }
    }
    return n;
}

size_t sched_stall_begin(struct sched *s, sched_visit_fn fn, void *arg)
{
    size_t n = 0;

    s->stalled = true;
    for (size_t i = 0; i < s->n; i++) {
        struct sched_part *p = &s->parts[i];
        if (!p->paused) {
            p->paused = true;
            p->resume_at = 0;
            p->seek_offset = -1;
            n++;
            if (fn != NULL)
                fn(arg, p->topic, p->partition, -1);
        }
    }
    return n;
}

void sched_stall_end(struct sched *s)
{
    s->stalled = false;
}

bool sched_stalled(const struct sched *s)
{
    return s->stalled;
}

int64_t sched_next_resume(const struct sched *s)
{
    int64_t next = SCHED_NEVER;

    if (s->stalled)
        return SCHED_NEVER;
    for (size_t i = 0; i < s->n; i++)
        if (s->parts[i].paused && s->parts[i].resume_at < next)
            next = s->parts[i].resume_at;
    return next;
}

size_t sched_paused_count(const struct sched *s)
{
    size_t n = 0;

    for (size_t i = 0; i < s->n; i++)
        n += s->parts[i].paused;
    return n;
}

size_t sched_assigned_count(const struct sched *s)
{
    return s->n;
}

bool sched_is_paused(const struct sched *s, const char *topic, int32_t partition)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->parts[i].partition == partition && strcmp(s->parts[i].topic, topic) == 0)
            return s->parts[i].paused;
    return false;
}
