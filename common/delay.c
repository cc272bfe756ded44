/* Delay levels: see delay.h. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/delay.h"
#include "common/parse.h"

/* Levels run from one second to a year: a longer "level" is a typo. */
#define DELAY_LEVEL_MAX_S (366LL * 86400)

static int delay_level_cmp(const void *a, const void *b)
{
    const struct delay_level *x = a, *y = b;

    return (x->level_ms > y->level_ms) - (x->level_ms < y->level_ms);
}

/* The next comma-separated item of *s, blanks trimmed, into buf; false at the end. */
static bool delay_next_item(const char **s, char *buf, size_t size)
{
    const char *p = *s, *end;
    size_t len;

    while (*p == ' ' || *p == '\t')
        p++;
    if (*p == '\0')
        return false;
    end = strchr(p, ',');
    if (end == NULL)
        end = p + strlen(p);
    len = (size_t)(end - p);
    while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
        len--;
    if (len >= size)
        len = size - 1;
    memcpy(buf, p, len);
    buf[len] = '\0';
    *s = *end == ',' ? end + 1 : end;
    return true;
}

void delay_levels_free(struct delay_levels *d)
{
    if (d == NULL)
        return;
    for (size_t i = 0; i < d->n; i++)
        free(d->v[i].topic);
    free(d->v);
    d->v = NULL;
    d->n = 0;
}

enum og_status delay_levels_parse(const struct og_config *cfg, unsigned flags,
                                  struct delay_levels *out, struct og_error *err)
{
    const char *tp = cfg->kafka.topics != NULL ? cfg->kafka.topics : "";
    const char *lp = cfg->kafka.topic_levels != NULL ? cfg->kafka.topic_levels : "";
    bool explicit_levels = *lp != '\0';
    char topic[256], level[64];
    size_t cap = 0;
    enum og_status st = OG_OK;

    memset(out, 0, sizeof(*out));
    while (delay_next_item(&tp, topic, sizeof(topic))) {
        int64_t seconds = 0;
        const char *what;
        struct og_error perr = {0};

        if (explicit_levels) {
            if (!delay_next_item(&lp, level, sizeof(level))) {
                st = og_error_set(err, OG_ERR_CONFIG, false,
                                  "kafka.topic_levels: one duration per topic of kafka.topics, "
                                  "none for %s",
                                  topic);
                og_error_setting(err, "kafka.topic_levels");
                goto out;
            }
            what = level;
        } else {
            const char *dot = strrchr(topic, '.');
            what = dot != NULL ? dot + 1 : topic;
        }
        /* A name's level carries its unit ("15m"): a bare number at the end of a name is
         * more likely a counter than a level of seconds. */
        if ((!explicit_levels &&
             (*what == '\0' || strchr("smhd", what[strlen(what) - 1]) == NULL)) ||
            parse_duration("delay level", what, 1, DELAY_LEVEL_MAX_S, &seconds, &perr) != OG_OK) {
            if (explicit_levels) {
                st = og_error_set(err, OG_ERR_CONFIG, false,
                                  "kafka.topic_levels: \"%s\" for topic %s is not a delay level "
                                  "(1s..366d, e.g. 15m)",
                                  what, topic);
                og_error_setting(err, "kafka.topic_levels");
            } else if (flags & DELAY_NAMED_ONLY) {
                continue;
            } else {
                st = og_error_set(err, OG_ERR_CONFIG, false,
                                  "topic %s: no delay level in its name (e.g. "
                                  "ordergate.cancel.15m); name one in kafka.topic_levels",
                                  topic);
                og_error_setting(err, "kafka.topics");
            }
            goto out;
        }
        if (out->n == cap) {
            size_t ncap = cap ? cap * 2 : 4;
            struct delay_level *v = realloc(out->v, ncap * sizeof(*v));
            if (v == NULL) {
                st = og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
                goto out;
            }
            out->v = v;
            cap = ncap;
        }
        out->v[out->n].topic = strdup(topic);
        if (out->v[out->n].topic == NULL) {
            st = og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
            goto out;
        }
        out->v[out->n].level_ms = seconds * 1000;
        out->n++;
    }
    if (explicit_levels && delay_next_item(&lp, level, sizeof(level))) {
        st = og_error_set(err, OG_ERR_CONFIG, false,
                          "kafka.topic_levels: more durations than kafka.topics has topics");
        og_error_setting(err, "kafka.topic_levels");
        goto out;
    }
    if (out->n > 1)
        qsort(out->v, out->n, sizeof(*out->v), delay_level_cmp);
out:
    if (st != OG_OK)
        delay_levels_free(out);
    return st;
}

const struct delay_level *delay_pick(const struct delay_levels *d, int64_t remaining_ms)
{
    if (d == NULL || d->n == 0)
        return NULL;
    for (size_t i = 0; i < d->n; i++)
        if (d->v[i].level_ms >= remaining_ms)
            return &d->v[i];
    return &d->v[d->n - 1];
}

const char *delay_topic_for(const struct delay_levels *d, int64_t remaining_ms)
{
    const struct delay_level *l = delay_pick(d, remaining_ms);

    return l != NULL ? l->topic : NULL;
}

int64_t delay_level_of(const struct delay_levels *d, const char *topic)
{
    for (size_t i = 0; d != NULL && i < d->n; i++)
        if (strcmp(d->v[i].topic, topic) == 0)
            return d->v[i].level_ms;
    return -1;
}

const struct delay_level *delay_longest(const struct delay_levels *d)
{
    return d != NULL && d->n > 0 ? &d->v[d->n - 1] : NULL;
}
