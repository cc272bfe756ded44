/* The consumer's Prometheus metrics (consumer/consumer_metrics.h): names, help texts, buckets.
 *
 * Registers, never updates: the loop, the commit protocol and the relay thread write the values
 * they observe. */
#include <stdio.h>

#include "common/kafka.h"
#include "consumer/consumer_metrics.h"

static const double batch_buckets[] = {1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000};
/* Lateness = commit time - due time. The contract's target is a p99 of
 * 0.25 s; the tail buckets show a backlog being worked off. */
static const double lateness_buckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                          1,     2.5,  5,     10,   30,  60,   300};
static const double db_buckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                    0.05,   0.1,   0.25,   0.5,   1,    2.5};

static const enum gate_outcome cancel_outcomes[] = {
    GATE_CANCELLED, GATE_ALREADY_CANCELLED, GATE_ALREADY_PAID,     GATE_BUSY,   GATE_NOT_DUE,
    GATE_NOT_FOUND, GATE_HOOK_FAILED,       GATE_ALREADY_RELEASED, GATE_UNKNOWN};
static const enum gate_outcome payment_outcomes[] = {
    GATE_PAID,         GATE_PARTIAL,        GATE_OVERPAID,        GATE_DUPLICATE,
    GATE_LATE_PAYMENT, GATE_DOUBLE_PAYMENT, GATE_AMOUNT_MISMATCH, GATE_CURRENCY_MISMATCH,
    GATE_NOT_FOUND,    GATE_UNKNOWN};

static const enum gate_outcome reminder_outcomes[] = {
    GATE_SENT,         GATE_NOT_DUE,   GATE_IN_FLIGHT, GATE_NOT_PENDING,
    GATE_ALREADY_SENT, GATE_NOT_FOUND, GATE_UNKNOWN};

#define N(a) (sizeof(a) / sizeof((a)[0]))

struct metric *consumer_metrics_hook_failures(const char *hook)
{
    return metric_series("ordergate_consumer_hook_failures_total",
                         "Orders whose claim a registered hook failed, by hook (each attempt; "
                         "the claim was rolled back)",
                         METRIC_COUNTER, "hook", hook, CONSUMER_METRICS_HOOK_SERIES_MAX);
}

void consumer_metrics_register(struct consumer_metrics *m, char *const *topics, size_t ntopics)
{
    char labels[KAFKA_TOPIC_MAX + 16];

    /* Topic names are [A-Za-z0-9._-]: nothing to escape in a label value. */
    for (size_t i = 0; i < ntopics && i < CONSUMER_TOPICS_MAX; i++) {
        snprintf(labels, sizeof(labels), "topic=\"%s\"", topics[i]);
        m->consumed[i] = metric_register("ordergate_consumer_messages_consumed_total",
                                         "Messages received from Kafka, before any decision",
                                         METRIC_COUNTER, labels, NULL, 0);
    }
    m->deferred =
        metric_register("ordergate_consumer_messages_deferred_total",
                        "Messages not due yet: their partition was paused and sought back to them",
                        METRIC_COUNTER, NULL, NULL, 0);
    m->dropped = metric_register(
        "ordergate_consumer_messages_dropped_total",
        "Prefetched messages of a paused partition, dropped unprocessed (fetched again later)",
        METRIC_COUNTER, NULL, NULL, 0);
    m->dead_lettered = metric_register("ordergate_consumer_dead_lettered_total",
                                       "Undecodable or rejected messages acknowledged by the "
                                       "dead-letter topic",
                                       METRIC_COUNTER, NULL, NULL, 0);
    m->payments_refused = metric_register(
        "ordergate_consumer_payments_refused_total",
        "Payment results dead-lettered (undecodable, or refused by the gate for good), each "
        "recorded first as a refused_payment exception for review",
        METRIC_COUNTER, NULL, NULL, 0);
    m->rescheduled = metric_register("ordergate_consumer_rescheduled_total",
                                     "New delayed messages for orders whose expire_at moved "
                                     "(claim outcome not_due), acknowledged",
                                     METRIC_COUNTER, NULL, NULL, 0);
    for (size_t i = 0; i < N(cancel_outcomes); i++) {
        snprintf(labels, sizeof(labels), "outcome=\"%s\"", gate_outcome_str(cancel_outcomes[i]));
        m->claims[cancel_outcomes[i]] =
            metric_register("ordergate_consumer_claims_total",
                            "claim_cancel results by outcome (one per distinct order of a batch)",
                            METRIC_COUNTER, labels, NULL, 0);
    }
    for (size_t i = 0; i < N(payment_outcomes); i++) {
        snprintf(labels, sizeof(labels), "outcome=\"%s\"", gate_outcome_str(payment_outcomes[i]));
        m->payments[payment_outcomes[i]] =
            metric_register("ordergate_consumer_payments_total",
                            "Payment results applied with claim_payment, by outcome",
                            METRIC_COUNTER, labels, NULL, 0);
    }
    for (int i = 0; i < GATE_REFUND_RESULT_COUNT; i++) {
        snprintf(labels, sizeof(labels), "result=\"%s\"",
                 gate_refund_result_str((enum gate_refund_result)i));
        m->refunds[i] = metric_register("ordergate_consumer_refunds_total",
                                        "Refund results recorded with record_refund, by result",
                                        METRIC_COUNTER, labels, NULL, 0);
    }
    m->db_errors = metric_register("ordergate_consumer_db_errors_total",
                                   "Batch steps that failed in the database (retried)",
                                   METRIC_COUNTER, NULL, NULL, 0);
    m->kafka_errors =
        metric_register("ordergate_consumer_kafka_errors_total",
                        "Errors reported by the Kafka clients", METRIC_COUNTER, NULL, NULL, 0);
    m->rebalances =
        metric_register("ordergate_consumer_rebalances_total",
                        "Partition assignments and revocations", METRIC_COUNTER, NULL, NULL, 0);
    m->batches =
        metric_register("ordergate_consumer_batches_total", "Batches committed (offsets stored)",
                        METRIC_COUNTER, NULL, NULL, 0);
    m->offsets_stored = metric_register("ordergate_consumer_messages_committed_total",
                                        "Messages whose offsets were stored after the commit",
                                        METRIC_COUNTER, NULL, NULL, 0);
    m->batch_size = metric_register("ordergate_consumer_batch_size", "Messages per committed batch",
                                    METRIC_HISTOGRAM, NULL, batch_buckets, N(batch_buckets));
    m->lateness = metric_register("ordergate_consumer_lateness_seconds",
                                  "Commit time minus due time of each order this consumer "
                                  "cancelled",
                                  METRIC_HISTOGRAM, NULL, lateness_buckets, N(lateness_buckets));
    for (size_t i = 0; i < N(reminder_outcomes); i++) {
        snprintf(labels, sizeof(labels), "outcome=\"%s\"", gate_outcome_str(reminder_outcomes[i]));
        m->reminder_claims[reminder_outcomes[i]] =
            metric_register("ordergate_consumer_reminder_claims_total",
                            "claim_reminder results of reminder messages, by outcome",
                            METRIC_COUNTER, labels, NULL, 0);
    }
    m->reminders_sent = metric_register("ordergate_reminders_sent_total",
                                        "Payment reminders this process sent (claim_reminder sent)",
                                        METRIC_COUNTER, "source=\"consumer\"", NULL, 0);
    m->reminder_lateness = metric_register(
        "ordergate_reminder_lateness_seconds",
        "Send time minus due time (expire_at - offset) of each payment reminder "
        "this process sent",
        METRIC_HISTOGRAM, "source=\"consumer\"", lateness_buckets, N(lateness_buckets));
    m->db_seconds = metric_register("ordergate_consumer_db_latency_seconds",
                                    "Database round trip of claim_cancel, claim_payment and "
                                    "due_times",
                                    METRIC_HISTOGRAM, NULL, db_buckets, N(db_buckets));
    m->paused = metric_register("ordergate_consumer_paused_partitions",
                                "Partitions this consumer paused (waiting for a due time or "
                                "stalled)",
                                METRIC_GAUGE, NULL, NULL, 0);
    m->due_pending =
        metric_register("ordergate_consumer_due_not_fired",
                        "Due cancels received but not yet committed", METRIC_GAUGE, NULL, NULL, 0);
    m->stalled = metric_register("ordergate_consumer_stalled",
                                 "1 while the consumer is stalled: a batch cannot commit and every "
                                 "partition is paused",
                                 METRIC_GAUGE, NULL, NULL, 0);
    for (int i = 0; i < CONSUMER_METRICS_REASONS; i++) {
        static const char *const reasons[CONSUMER_METRICS_REASONS] = {
            [CONSUMER_METRICS_BUSY] = "reason=\"busy\"",
            [CONSUMER_METRICS_NOT_DUE] = "reason=\"not_due\"",
            [CONSUMER_METRICS_HOOK_FAILED] = "reason=\"hook_failed\""};
        m->retries[i] = metric_register("ordergate_consumer_retries_total",
                                        "Orders claimed again from the local retry set (busy: "
                                        "row locked elsewhere; not_due: due within "
                                        "consumer.local_due_ms; hook_failed: a hook failed "
                                        "its claim)",
                                        METRIC_COUNTER, reasons[i], NULL, 0);
        m->retry_given_up[i] = metric_register(
            "ordergate_consumer_retry_given_up_total",
            "Orders past the local retries' bound (or with the retry set full): re-scheduled "
            "through a delay topic, or dead-lettered when a hook kept failing",
            METRIC_COUNTER, reasons[i], NULL, 0);
    }
    m->retry_pending =
        metric_register("ordergate_consumer_retry_pending", "Orders waiting in the local retry set",
                        METRIC_GAUGE, NULL, NULL, 0);
    m->beyond_level = metric_register("ordergate_consumer_due_beyond_level_total",
                                      "Messages due beyond their topic's delay level plus "
                                      "consumer.level_margin_ms, claimed at once instead of "
                                      "pausing their partition",
                                      METRIC_COUNTER, NULL, NULL, 0);
    m->db_call_age = metric_register("ordergate_consumer_db_call_age_seconds",
                                     "Age of the consume loop's database call in progress (0 "
                                     "between calls); /healthz fails beyond "
                                     "consumer.health_db_call_ms",
                                     METRIC_GAUGE, NULL, NULL, 0);
    m->commit_durable = metric_register(
        "ordergate_consumer_commit_durable",
        "1 when the database's commits survive a crash (fsync on, synchronous_commit not off, nor "
        "local while synchronous standbys are named); 0 when a claim could be lost after its "
        "offset was committed; -1 before the first look",
        METRIC_GAUGE, NULL, NULL, 0);
    metric_set(m->commit_durable, -1);
    m->commit_replicated = metric_register(
        "ordergate_consumer_commit_replicated",
        "1 when commits also wait for a synchronous standby (a failover loses no claim); 0 when "
        "they do not; -1 before the first look",
        METRIC_GAUGE, NULL, NULL, 0);
    metric_set(m->commit_replicated, -1);
    m->outbox_backlog = metric_register("ordergate_relay_outbox_backlog",
                                        "Outbox rows not yet published (quarantined ones left out)",
                                        METRIC_GAUGE, NULL, NULL, 0);
    m->outbox_published = metric_register("ordergate_relay_published_total",
                                          "Outbox rows published and marked by this relay",
                                          METRIC_COUNTER, NULL, NULL, 0);
    m->outbox_errors =
        metric_register("ordergate_relay_errors_total", "Outbox relay steps that failed (retried)",
                        METRIC_COUNTER, NULL, NULL, 0);
    m->outbox_quarantined_total = metric_register(
        "ordergate_relay_quarantined_total",
        "Outbox events this relay set aside because they can never be published as they are",
        METRIC_COUNTER, NULL, NULL, 0);
    m->outbox_quarantined = metric_register(
        "ordergate_relay_outbox_quarantined",
        "Outbox events quarantined in the database, waiting for an operator (ordergatectl outbox "
        "quarantined)",
        METRIC_GAUGE, NULL, NULL, 0);
    m->claim_parts = metric_register(
        "ordergate_consumer_claim_parts_total",
        "Parts the consume loop's claims of cancels ran as, each one claim_cancel on its own "
        "database session at once (a claim not split counts one; consumer.claim_sessions)",
        METRIC_COUNTER, NULL, NULL, 0);
    m->claim_sessions_connected = metric_register(
        "ordergate_consumer_claim_sessions_connected",
        "Claim sessions connected beside the consume loop's own (consumer.claim_sessions - 1 when "
        "all are); a lower value means claims are split across fewer sessions while the others "
        "reconnect",
        METRIC_GAUGE, NULL, NULL, 0);
    m->batches_in_flight = metric_register(
        "ordergate_consumer_batches_in_flight",
        "Batches whose claim of cancels has started and whose offsets are not stored yet (at most "
        "2: one whose parts run on the claim sessions while the loop claims the next); stuck at "
        "2, a claim session is held (a lock) and the loop waits for it",
        METRIC_GAUGE, NULL, NULL, 0);
    m->batches_overlapped = metric_register(
        "ordergate_consumer_batches_overlapped_total",
        "Batches left in flight on the claim sessions while the loop built and claimed the next "
        "(claims split across sessions overlap across batches; 0 with consumer.claim_sessions = 1)",
        METRIC_COUNTER, NULL, NULL, 0);
}
