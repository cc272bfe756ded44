/* The consumer's Prometheus metrics (the consume loop's, the commit protocol's and the outbox
 * relay thread's), registered once at startup: the registry is fixed before the HTTP endpoint
 * serves it.
 *
 * Owns the metric names, their help texts and buckets. Must not update a value itself: each
 * counter and gauge is written by the file that observes what it counts. */
#ifndef OG_CONSUMER_CONSUMER_METRICS_H
#define OG_CONSUMER_CONSUMER_METRICS_H

#include <stddef.h>

#include "common/gate.h"
#include "common/metrics.h"

/* Delay topics plus the payments and refund results topics a consumer may subscribe to
 * (consumer_check_config enforces it); one consumed-messages series each. */
#define CONSUMER_TOPICS_MAX 64
/* At most this many hooks get a series of their own in ordergate_consumer_hook_failures_total
 * (then hook="other"). */
#define CONSUMER_METRICS_HOOK_SERIES_MAX 16

/* The reason label of ordergate_consumer_retries_total and _retry_given_up_total: the index into
 * retries[] and retry_given_up[]. */
enum consumer_metrics_reason {
    CONSUMER_METRICS_BUSY,        /* reason="busy" */
    CONSUMER_METRICS_NOT_DUE,     /* reason="not_due" */
    CONSUMER_METRICS_HOOK_FAILED, /* reason="hook_failed" */
    CONSUMER_METRICS_REASONS
};

struct consumer_metrics {
    struct metric *consumed[CONSUMER_TOPICS_MAX]; /* per subscribed topic, in subscription order */
    struct metric *deferred, *dropped, *dead_lettered, *rescheduled, *payments_refused;
    struct metric *claims[GATE_OUTCOME_COUNT];
    struct metric *payments[GATE_OUTCOME_COUNT];
    struct metric *refunds[GATE_REFUND_RESULT_COUNT];
    struct metric *db_errors, *kafka_errors, *rebalances, *batches, *offsets_stored;
    struct metric *batch_size, *lateness, *db_seconds;
    /* payment reminders (claim_reminder): by outcome, sent, send time minus due time */
    struct metric *reminder_claims[GATE_OUTCOME_COUNT], *reminders_sent, *reminder_lateness;
    struct metric *paused, *due_pending, *stalled;
    struct metric *retries[CONSUMER_METRICS_REASONS], *retry_given_up[CONSUMER_METRICS_REASONS];
    struct metric *retry_pending, *beyond_level, *db_call_age;
    struct metric *commit_durable, *commit_replicated;
    struct metric *outbox_backlog, *outbox_published, *outbox_errors;
    struct metric *outbox_quarantined_total, *outbox_quarantined;
    /* claims of cancels split across sessions (consumer/claim_pool.h) */
    struct metric *claim_parts, *claim_sessions_connected;
    /* batches claimed and not finished yet (consumer/commit.h: at most 2), and those the loop
     * left in flight to build the next one */
    struct metric *batches_in_flight, *batches_overlapped;
};

/* Registers every metric of m, one consumed-messages series per topic (at most
 * CONSUMER_TOPICS_MAX). Called once, before the HTTP endpoint starts. */
void consumer_metrics_register(struct consumer_metrics *m, char *const *topics, size_t ntopics);
/* ordergate_consumer_hook_failures_total{hook="..."}, at most CONSUMER_METRICS_HOOK_SERIES_MAX
 * hooks (then hook="other"). */
struct metric *consumer_metrics_hook_failures(const char *hook);

#endif
