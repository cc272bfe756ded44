/* Broker outages, process-wide: what kafka.c's error and statistics callbacks say about a
 * broker that went away, so that each outage is said once.
 *
 * Every Kafka client of a process (the consumer, its re-schedule producer, the outbox relay's
 * producer) loses its connections to a broker that restarts, and each retries every few hundred
 * milliseconds. The first connection error for a broker begins an outage (the caller logs one
 * warn line); further errors are counted until a client's statistics show the broker UP again,
 * which ends it (one info line, kafka_broker_up). Two rules keep that honest:
 *   - an UP state that began before the outage's first error is a client that has not noticed
 *     the loss yet, not the broker's return: it ends the outage only once the outage is older
 *     than KAFKA_OUTAGE_SETTLE_MS (by then a client that still holds an old connection holds a
 *     live one);
 *   - a broker back for less than KAFKA_OUTAGE_SETTLE_MS is not down again for the errors of
 *     clients still reconnecting.
 * Times are clock_mono_ms() milliseconds, passed in so the rules are testable. Thread-safe (one
 * mutex); no Kafka, no logging: the caller logs what the answers say. */
#ifndef OG_COMMON_KAFKA_OUTAGE_H
#define OG_COMMON_KAFKA_OUTAGE_H

#include <stdbool.h>
#include <stdint.h>

#define KAFKA_OUTAGE_SETTLE_MS 5000

/* Records a connection error for broker ("host:port") at now_ms; true when it begins an
 * outage (say it), false when one is running or the broker is only just back. */
bool kafka_outage_begin(const char *broker, int64_t now_ms);
/* Whether any broker's outage is running (not yet seen UP). */
bool kafka_outage_active(void);
/* A client's statistics show broker UP since up_since_ms (< 0: unknown, taken as now): true
 * when that ends a running outage, with how long it lasted and how many errors it counted. */
bool kafka_outage_end(const char *broker, int64_t up_since_ms, int64_t now_ms, int64_t *down_ms,
                      long *errors);
/* Forgets every outage (tests). */
void kafka_outage_reset(void);

#endif
