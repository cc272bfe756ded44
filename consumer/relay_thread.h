/* The consumer's outbox relay thread: common/outbox.h's relay (outbox_relay_step), stepped every
 * outbox.interval_ms (at once again while steps come back full) on a database connection and an
 * idempotent producer of its own, so a slow step never delays the consume loop. At least once:
 * see common/outbox.h.
 *
 * Owns the thread, its connection and its producer; shares nothing with the consume loop but the
 * configuration and the relay's metrics, which it only reads and updates. */
#ifndef OG_CONSUMER_RELAY_THREAD_H
#define OG_CONSUMER_RELAY_THREAD_H

#include <stdbool.h>
#include <stdint.h>

#include "common/cfg.h"
#include "common/error.h"
#include "consumer/consumer_metrics.h"

struct relay_thread;

/* Starts the thread when outbox.enabled (else *out is NULL and the answer OG_OK). cfg and m
 * must outlive the thread: until relay_thread_stop succeeded, or the process's exit. */
enum og_status relay_thread_start(const struct og_config *cfg, struct consumer_metrics *m,
                                  struct relay_thread **out, struct og_error *err);
/* Stops the thread (*rt may be NULL: true), waiting for it until deadline_ms (monotonic), and
 * frees it (*rt = NULL). False when it did not stop in time: *rt stays set, and the thread may
 * still use cfg and m, so the caller must exit without freeing them. */
bool relay_thread_stop(struct relay_thread **rt, int64_t deadline_ms);

#endif
