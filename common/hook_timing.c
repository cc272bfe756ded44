#include "common/hook_timing.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/metrics.h"

static const char hook_timing_prefix[] = "ordergate_hook_timing ";

/* Upper bounds in seconds: a hook's budget is milliseconds (docs/integrate.md); the tail up to
 * the consumer's default statement_timeout (20 s) shows what eats into it. */
static const double hook_timing_buckets[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                             0.25,  0.5,    1,     2.5,  5,     10,   20};

/* The series seen so far, by hook name; the registry keeps the metrics themselves. */
static pthread_mutex_t hook_timing_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    const struct hook_timing *ht;
    char fn[HOOK_TIMING_FN_MAX];
    struct metric *m;
} hook_timing_series[HOOK_TIMING_SERIES_MAX + 1];
static size_t hook_timing_nseries;

/* Reads "<key>=" at *p; leaves *p after the '='. */
static bool hook_timing_key(const char **p, const char *key)
{
    size_t n = strlen(key);

    if (strncmp(*p, key, n) != 0 || (*p)[n] != '=')
        return false;
    *p += n + 1;
    return true;
}

bool hook_timing_parse(const char *msg, struct hook_timing_sample *s)
{
    const char *p = msg, *end;
    char *num_end;
    size_t n;

    if (msg == NULL || strncmp(p, hook_timing_prefix, sizeof(hook_timing_prefix) - 1) != 0)
        return false;
    p += sizeof(hook_timing_prefix) - 1;
    if (!hook_timing_key(&p, "id"))
        return false;
    errno = 0;
    s->id = strtoll(p, &num_end, 10);
    if (errno != 0 || num_end == p || *num_end != ' ' || s->id <= 0)
        return false;
    p = num_end + 1;
    if (!hook_timing_key(&p, "event") || (end = strchr(p, ' ')) == NULL ||
        (n = (size_t)(end - p)) == 0 || n >= sizeof(s->event))
        return false;
    memcpy(s->event, p, n);
    s->event[n] = '\0';
    p = end + 1;
    if (!hook_timing_key(&p, "ms"))
        return false;
    errno = 0;
    s->ms = strtod(p, &num_end);
    if (errno != 0 || num_end == p || *num_end != ' ' || !isfinite(s->ms) || s->ms < 0)
        return false;
    p = num_end + 1;
    if (!hook_timing_key(&p, "fn"))
        return false;
    n = strcspn(p, "\n");
    if (n == 0 || n >= sizeof(s->fn) || (p[n] == '\n' && p[n + 1] != '\0'))
        return false;
    memcpy(s->fn, p, n);
    s->fn[n] = '\0';
    return true;
}

/* hook="<fn>" with \ " and newline escaped as the exposition format wants. */
static void hook_timing_label(char *buf, size_t size, const char *fn)
{
    size_t len = (size_t)snprintf(buf, size, "hook=\"");

    for (const char *c = fn; *c != '\0' && len + 4 < size; c++) {
        if (*c == '\\' || *c == '"' || *c == '\n') {
            buf[len++] = '\\';
            buf[len++] = *c == '\n' ? 'n' : *c;
        } else {
            buf[len++] = *c;
        }
    }
    buf[len++] = '"';
    buf[len] = '\0';
}

void hook_timing_observe(const struct hook_timing *ht, const struct hook_timing_sample *s)
{
    struct metric *m = NULL;
    char labels[2 * HOOK_TIMING_FN_MAX + 16];
    const char *fn = s->fn;

    pthread_mutex_lock(&hook_timing_lock);
    for (size_t i = 0; i < hook_timing_nseries && m == NULL; i++)
        if (hook_timing_series[i].ht == ht && strcmp(hook_timing_series[i].fn, fn) == 0)
            m = hook_timing_series[i].m;
    if (m == NULL) {
        if (hook_timing_nseries >= HOOK_TIMING_SERIES_MAX)
            fn = "other";
        hook_timing_label(labels, sizeof(labels), fn);
        m = metric_register(ht->metric, ht->help, METRIC_HISTOGRAM, labels, hook_timing_buckets,
                            sizeof(hook_timing_buckets) / sizeof(hook_timing_buckets[0]));
        if (m != NULL && hook_timing_nseries < HOOK_TIMING_SERIES_MAX) {
            hook_timing_series[hook_timing_nseries].ht = ht;
            snprintf(hook_timing_series[hook_timing_nseries].fn, sizeof(hook_timing_series[0].fn),
                     "%s", s->fn);
            hook_timing_series[hook_timing_nseries].m = m;
            hook_timing_nseries++;
        }
    }
    pthread_mutex_unlock(&hook_timing_lock);
    metric_observe(m, s->ms / 1000.0);
}

static void hook_timing_receive(void *arg, const PGresult *res)
{
    const struct hook_timing *ht = arg;
    const char *primary = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
    struct hook_timing_sample s;

    if (hook_timing_parse(primary, &s)) {
        hook_timing_observe(ht, &s);
        return;
    }
    /* What libpq's default receiver does with every other notice. */
    fputs(PQresultErrorMessage(res), stderr);
}

enum og_status hook_timing_connect(void *arg, PGconn *conn, bool transaction_pool,
                                   struct og_error *err)
{
    (void)transaction_pool;
    (void)err;
    PQsetNoticeReceiver(conn, hook_timing_receive, arg);
    return OG_OK;
}

void hook_timing_attach(struct db *db, struct hook_timing *ht)
{
    db_set_connect_hook(db, hook_timing_connect, ht, NULL);
    db_set_local(db, "ordergate.hook_timing", "on");
}
