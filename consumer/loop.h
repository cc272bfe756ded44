/* The consume loop: the group member (subscribe, rebalance callbacks, errors, statistics), each
 * message (decode, due or not, into the batch), pause/seek/resume, when to flush the batch
 * (consumer/commit.h) and what to do when it cannot commit (stall every partition, back off,
 * keep polling), the gauges, the systemd watchdog and the health file, and the bounded
 * shutdown.
 *
 * The only place that polls, pauses, seeks or resumes the group member. Must not claim or store
 * anything itself: the commit protocol does, and reports progress back only through the
 * callback loop_attach installs. */
#ifndef OG_CONSUMER_LOOP_H
#define OG_CONSUMER_LOOP_H

#include <librdkafka/rdkafka.h>

struct consumer;

/* Installs the loop's callbacks, before the group member is created from conf: on conf (as its
 * opaque, c) the rebalance, error, offset commit and statistics callbacks (statistics for broker
 * reachability); on c->db the call hook (the health endpoints' call age, a watchdog ping after
 * each answer); on c->commit the progress callback (a watchdog ping after each answer of a
 * commit step). */
void loop_attach(struct consumer *c, rd_kafka_conf_t *conf);
/* Connects, starts the outbox relay thread, subscribes and runs until signals_stop or a fatal
 * error; then shuts down within CONSUMER_STOP_MS. Returns 0 on a clean stop, 1 after a fatal
 * (runtime) error, 2 when the broker fenced this member's group.instance.id (two instances
 * configured with one id: a configuration error, and a restart would only fence the other). */
int loop_run(struct consumer *c);

#endif
