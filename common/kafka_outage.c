#include "common/kafka_outage.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define KAFKA_OUTAGES_MAX 16

static struct kafka_outage {
    char broker[128]; /* "host:port" as librdkafka names it */
    int64_t since_ms; /* first error of the outage; 0: slot unused */
    int64_t up_ms;    /* when it was seen UP again; 0 while down */
    long errors;      /* connection errors while down */
} kafka_outages[KAFKA_OUTAGES_MAX];
static pthread_mutex_t kafka_outage_mu = PTHREAD_MUTEX_INITIALIZER;

bool kafka_outage_begin(const char *broker, int64_t now_ms)
{
    struct kafka_outage *free_slot = NULL;
    bool begins = true;

    pthread_mutex_lock(&kafka_outage_mu);
    for (size_t i = 0; i < KAFKA_OUTAGES_MAX; i++) {
        struct kafka_outage *o = &kafka_outages[i];
        bool same = o->since_ms != 0 && strcmp(o->broker, broker) == 0;
        /* Unused, or another broker's outage that is over: free for this one. */
        if (o->since_ms == 0 ||
            (!same && o->up_ms != 0 && now_ms - o->up_ms >= KAFKA_OUTAGE_SETTLE_MS)) {
            if (free_slot == NULL)
                free_slot = o;
            continue;
        }
        if (!same)
            continue;
        if (o->up_ms == 0 || now_ms - o->up_ms < KAFKA_OUTAGE_SETTLE_MS) {
            o->errors += o->up_ms == 0;
            begins = false;
        } else {
            *o = (struct kafka_outage){.since_ms = now_ms, .errors = 1};
            snprintf(o->broker, sizeof(o->broker), "%s", broker);
        }
        goto out;
    }
    /* A full table only means more lines, never fewer. */
    if (free_slot != NULL) {
        *free_slot = (struct kafka_outage){.since_ms = now_ms, .errors = 1};
        snprintf(free_slot->broker, sizeof(free_slot->broker), "%s", broker);
    }
out:
    pthread_mutex_unlock(&kafka_outage_mu);
    return begins;
}

bool kafka_outage_active(void)
{
    bool any = false;

    pthread_mutex_lock(&kafka_outage_mu);
    for (size_t i = 0; i < KAFKA_OUTAGES_MAX; i++)
        any = any || (kafka_outages[i].since_ms != 0 && kafka_outages[i].up_ms == 0);
    pthread_mutex_unlock(&kafka_outage_mu);
    return any;
}

bool kafka_outage_end(const char *broker, int64_t up_since_ms, int64_t now_ms, int64_t *down_ms,
                      long *errors)
{
    bool ended = false;

    if (up_since_ms < 0)
        up_since_ms = now_ms;
    pthread_mutex_lock(&kafka_outage_mu);
    for (size_t i = 0; i < KAFKA_OUTAGES_MAX; i++) {
        struct kafka_outage *o = &kafka_outages[i];
        if (o->since_ms == 0 || o->up_ms != 0 || strcmp(o->broker, broker) != 0)
            continue;
        /* UP since before the first error, and the outage still young: a client whose
         * connection has not seen the loss yet. */
        if (up_since_ms < o->since_ms && now_ms - o->since_ms < KAFKA_OUTAGE_SETTLE_MS)
            continue;
        o->up_ms = now_ms;
        *down_ms = now_ms - o->since_ms;
        *errors = o->errors;
        ended = true;
    }
    pthread_mutex_unlock(&kafka_outage_mu);
    return ended;
}

void kafka_outage_reset(void)
{
    pthread_mutex_lock(&kafka_outage_mu);
    memset(kafka_outages, 0, sizeof(kafka_outages));
    pthread_mutex_unlock(&kafka_outage_mu);
}
