/* Outbox relay: publishes rows of ordergate.outbox to Kafka and marks them
 * published only after the broker acknowledged them (at least once: a crash
 * between ack and mark publishes again; consumers of these topics deduplicate
 * by the event id header / payload id).
 *
 * One relay step: BEGIN; outbox_lock_batch(n) (FOR UPDATE SKIP LOCKED, so
 * several consumer instances share the work without waiting on each other;
 * quarantined rows are never returned); produce each row keyed by order
 * number to the topic chosen by event type; flush and wait for delivery
 * reports; outbox_mark_published(the acknowledged ids); outbox_quarantine(id,
 * reason) for each event that can never be published; COMMIT. One row never
 * holds back the others: each row's outcome is its own. */
#ifndef OG_COMMON_OUTBOX_H
#define OG_COMMON_OUTBOX_H

#include <librdkafka/rdkafka.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/cfg.h"
#include "common/db.h"
#include "common/error.h"

struct outbox_relay;

/* Delivery reports. The relay learns each message's fate from the producer's
 * delivery report callback, so the producer handed to outbox_relay_new MUST
 * have been configured with
 *
 *     rd_kafka_conf_set_dr_msg_cb(conf, outbox_dr_cb);
 *
 * before rd_kafka_new(). Each outbox message carries a per-message opaque
 * pointing at the relay's record of it; outbox_dr_cb ignores messages whose
 * opaque is NULL, so other code may produce on the same handle as long as it
 * passes no per-message opaque (RD_KAFKA_V_OPAQUE). A program that needs its
 * own dr_msg_cb must call outbox_dr_cb from it for every message it does not
 * own. Reports are served by rd_kafka_poll() from the relay's thread during a
 * step (another thread polling the same producer is fine too).
 * outbox_relay_new() refuses (NULL, logged) a producer without any dr_msg_cb;
 * a step whose reports never reach outbox_dr_cb fails with OG_ERR_INTERNAL.
 * Set the producer's message.timeout.ms below the relay's delivery timeout
 * (outbox_relay_set_timeout), so that a dead broker shows as failed reports
 * within the step rather than as a timed-out batch. */
void outbox_dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque);

/* The topic for an event type: refund_requested -> outbox.refund_topic,
 * reconciliation_alert -> outbox.alert_topic, everything else (order_paid,
 * order_cancelled, future types) -> outbox.topic. An empty refund or alert
 * topic falls back to outbox.topic. */
const char *outbox_topic_for(const struct og_config *cfg, const char *event_type);

/* producer: an idempotent producer owned by the caller (not destroyed here).
 * db: a connection used only by the relay (it holds a transaction open).
 * The topics and batch size are copied from cfg (outbox.topic, refund_topic,
 * alert_topic, outbox.batch). Returns NULL when out of memory or when an
 * argument is missing or the producer lacks a dr_msg_cb (logged). Free the
 * relay before destroying the producer: outbox_relay_free waits (bounded)
 * for reports of a timed-out batch. */
struct outbox_relay *outbox_relay_new(struct db *db, rd_kafka_t *producer,
                                      const struct og_config *cfg);
void outbox_relay_free(struct outbox_relay *relay);
/* Publishes at most one batch. *published receives how many rows were marked.
 * The transaction is BEGIN ... COMMIT on the relay's own connection, never
 * retried inside (a transient database error returns retriable and the next
 * step starts over on a reconnected session). Each locked row ends the step
 * in one of three ways:
 *   - acknowledged by the broker: marked published and committed, even when
 *     other rows of the batch failed, so it is never sent again by a retry;
 *   - quarantined: the event can never be published as it is (a
 *     cancel_scheduled the consumer could not decode, such as a due time
 *     beyond year 9999; a message the producer or the broker refuses for its
 *     size or as an invalid record). Set aside with its reason
 *     (outbox_quarantine), logged once as outbox_event_quarantined, counted
 *     in outbox_relay_quarantined_total; an operator releases it
 *     (outbox_release) after a fix;
 *   - left unpublished for a later step: any other failure (broker down, no
 *     report within the delivery timeout (default 10 s), leader moves, not
 *     authorized, no delay topic configured). The step then commits what got
 *     through and returns the first such failure (OG_ERR_KAFKA, or
 *     OG_ERR_CONFIG for a missing delay topic; retriable unless the same
 *     failure meets the message whatever happens), with *published set: the
 *     caller backs off. A transient failure never quarantines.
 * Published messages of a step whose database work failed (mark, quarantine,
 * commit) are published again later: duplicates, never loss. After a timeout
 * the relay starts no new batch until the late reports of the old one arrived
 * (it fails retriable meanwhile); the old batch's rows that were not
 * acknowledged in time are sent again then (one extra copy at most). With
 * signals_stop raised, a step hands nothing new to the producer and returns
 * OG_ERR_STOPPED. Per order, an event left for a later step may reach its
 * topic after a later event of the same order that went through. */
enum og_status outbox_relay_step(struct outbox_relay *relay, size_t *published,
                                 struct og_error *err);
/* Delivery timeout per step in milliseconds (default 10000). */
void outbox_relay_set_timeout(struct outbox_relay *relay, int timeout_ms);
/* Which failed steps a relay logs: the first of a run of failures, every one whose reason
 * differs from the previous failure's (the reason with its numbers, such as event ids and
 * counts, left out), and every 50th repeat of the same reason, so an outage of minutes does not
 * flood the log and a second problem is never hidden behind the first. Zero-initialise. */
struct outbox_failure_log {
    int failures; /* failed steps since the last success */
    char last[256];
};
/* Counts a failed step; true when it is to be logged. */
bool outbox_failure_log_note(struct outbox_failure_log *l, enum og_status st, const char *msg);
/* A step succeeded: the run of failures ends. */
void outbox_failure_log_clear(struct outbox_failure_log *l);

/* Events this relay quarantined since outbox_relay_new (for a counter). */
size_t outbox_relay_quarantined_total(const struct outbox_relay *relay);
/* Rows not yet published, quarantined ones left out (for the backlog gauge). */
enum og_status outbox_backlog(struct db *db, long long *backlog, struct og_error *err);
/* Quarantined events in the table, whoever set them aside (for a gauge). */
enum og_status outbox_quarantined(struct db *db, long long *count, struct og_error *err);

#endif
