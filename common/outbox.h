/* Outbox relay: publishes rows of ordergate.outbox to Kafka and marks them
 * published only after the broker acknowledged every message (at least once:
 * a crash between ack and mark publishes again; consumers of these topics
 * deduplicate by the event id header / payload id).
 *
 * One relay step: BEGIN; outbox_lock_batch(n) (FOR UPDATE SKIP LOCKED, so
 * several consumer instances share the work without waiting on each other);
 * produce each row keyed by order number to the topic chosen by event type;
 * flush and wait for delivery reports; outbox_mark_published(ids); COMMIT.
 * Any failure rolls back and leaves the rows for the next step. */
#ifndef OG_COMMON_OUTBOX_H
#define OG_COMMON_OUTBOX_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>

#include "common/cfg.h"
#include "common/db.h"
#include "common/error.h"

struct outbox_relay;

/* producer: an idempotent producer owned by the caller (not destroyed here).
 * db: a connection used only by the relay (it holds a transaction open). */
struct outbox_relay *outbox_relay_new(struct db *db, rd_kafka_t *producer,
                                      const struct og_config *cfg);
void outbox_relay_free(struct outbox_relay *relay);
/* Publishes at most one batch. *published receives how many rows were marked. */
enum og_status outbox_relay_step(struct outbox_relay *relay, size_t *published,
                                 struct og_error *err);
/* Rows not yet published (for the backlog gauge). */
enum og_status outbox_backlog(struct db *db, long long *backlog, struct og_error *err);

#endif
