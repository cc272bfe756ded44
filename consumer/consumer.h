/* ordergate-consumer's lifetime: the handles one consumer is made of, built from the
 * configuration by consumer_new and taken down by consumer_free, and the bounds operators
 * configure around it (the systemd watchdog, the health file, the stop).
 *
 * How the files of consumer/ fit, top down (each header says what its file owns):
 *   main.c            the command line, the configuration, the exit status;
 *   consumer.{c,h}    this: build and free a consumer;
 *   loop.{c,h}        the consume loop: the group member, each message, pause/seek/resume, when
 *                     to flush, stalls, the watchdog and the health file, the shutdown;
 *   commit.{c,h}      the commit protocol that finishes a batch (the order of its steps);
 *   batch.{c,h}       the batch container;   retry.{c,h}  the local retry set;
 *   levels.{c,h}      a topic's delay level, a re-schedule's topic;
 *   fence.{c,h}       a fenced group.instance.id: rejoin or exit 2, the member replaced;
 *   durability.{c,h}  the server's commit durability;
 *   relay_thread.{c,h} the outbox relay thread;   consumer_metrics.{c,h} the metrics;
 *   claim_pool.{c,h}  the claim sessions past the loop's own (a burst's claim split across them).
 * Lower files never call up: the commit protocol reports progress through a callback the loop
 * installs (loop_attach).
 *
 * This file must not run anything: no poll, no claim, no thread (consumer_new connects
 * nothing; loop_run does). */
#ifndef OG_CONSUMER_CONSUMER_H
#define OG_CONSUMER_CONSUMER_H

#include <librdkafka/rdkafka.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/cfg.h"
#include "common/db.h"
#include "common/delay.h"
#include "common/error.h"
#include "common/kafka.h"
#include "common/sched.h"
#include "consumer/claim_pool.h"
#include "consumer/commit.h"
#include "consumer/consumer_metrics.h"
#include "consumer/durability.h"
#include "consumer/fence.h"
#include "consumer/relay_thread.h"
#include "consumer/window.h"

/* A paused partition stays paused at least this long (see sched_new). */
#define CONSUMER_MIN_PAUSE_MS 50
/* A partition paused for a due time resumes this long before it, and the cancels it then fetches
 * wait in the window (consumer/window.h) until they fall due: the fetch round trip, the pause
 * floor and a loaded machine's scheduling delays happen before the deadline, not after it. The
 * refetch after a resume took up to 1.1 s on a loaded 2-core machine (librdkafka 2.0.2 sends the
 * resumed partition's fetch only with the broker's next fetch request); 3 s covers it. At 625
 * cancels/s per partition (5,000/s over 8) the window then holds 1,875 of its 2,048. */
#define CONSUMER_WINDOW_LEAD_MS 3000
/* While a flush of the consume loop waits for the database, the loop takes in its next messages
 * (loop.c, loop_intake): decoded cancels due within the lead go into the window, anything else
 * into the intake queue, handled in order right after the flush. At most this many messages
 * waiting in that queue, and the database's answer is looked at least every
 * CONSUMER_INTAKE_EVERY_MS while the intake runs. */
#define CONSUMER_INTAKE_MAX      1024
#define CONSUMER_INTAKE_EVERY_MS 1
/* Attempts inside one database call of the consume loop (consumer_new): one. The loop
 * retries a failed batch itself, with backoff, polling Kafka and pinging the watchdog in
 * between, so no call repeats a blocking attempt out of the loop's sight. */
#define CONSUMER_DB_ATTEMPTS 1

/* The systemd watchdog budget. The loop pings (WATCHDOG=1) at most every
 * CONSUMER_WATCHDOG_EVERY_MS from each turn and after every database answer (loop.c's
 * database call hook and the commit protocol's progress callback): both prove progress. The longest
 * gap between pings is then the longest blocking step, a poll (consumer.poll_ms, at most 10 s) and
 * one database call:
 *   - libpq's connect_timeout of common/db.c, 10 s, for a fresh connection (per address of
 *     the conninfo's hosts: list one host, or raise WatchdogSec by 10 s per extra address);
 *   - the prepare and the statement on it, each bounded by the session's statement_timeout
 *     and, on a link that drops packets, its TCP keepalives (common/db.c): at most
 *     CONSUMER_DB_STATEMENT_BOUND_S each, the bound those session settings must keep;
 * (database.statement_timeout_ms, 20 s by default) so 10 + 2 x 20 = 50 s per call, and
 * 1 + 10 + 50 = 61 s per gap with poll_ms at its maximum (51 s at the default 50 ms). systemd
 * kills at WatchdogSec and asks for a ping every half: WatchdogSec >= 2 x 61 = 122 s;
 * deploy/systemd says 130 s (65 s per half, 4 s to spare at poll_ms 10 s, 14 s at the
 * default). A statement_timeout above 20 s needs WatchdogSec raised by twice the difference.
 * The revoke callback's flush waits up to 5 s for delivery reports after a database answer,
 * never after a failed call: 5 s < 50 s. */
#define CONSUMER_WATCHDOG_EVERY_MS    1000
#define CONSUMER_DB_CONNECT_S         10
#define CONSUMER_DB_STATEMENT_BOUND_S 20
#define CONSUMER_POLL_MAX_S           10
#define CONSUMER_DB_CALL_MAX_S        (CONSUMER_DB_CONNECT_S + 2 * CONSUMER_DB_STATEMENT_BOUND_S)
#define CONSUMER_WATCHDOG_GAP_MAX_S                                                                \
    (CONSUMER_WATCHDOG_EVERY_MS / 1000 + CONSUMER_POLL_MAX_S + CONSUMER_DB_CALL_MAX_S)
#define CONSUMER_WATCHDOG_MIN_S (2 * CONSUMER_WATCHDOG_GAP_MAX_S)

/* The health file (consumer.health_file, common/health.h) is rewritten on the watchdog's
 * occasions, at most every CONSUMER_WATCHDOG_EVERY_MS, whether systemd watches or not. The
 * bound written into it, past which --check-health calls the loop stuck, is the watchdog's gap
 * with the database call cut at consumer.health_db_call_ms (what /healthz uses; when that is 0,
 * CONSUMER_DB_CALL_MAX_S), plus CONSUMER_HEALTH_SLACK_MS for the revoke callback's wait for
 * delivery reports after a database answer: 1 + 0.05 + 30 + 5 = 36.05 s by default. */
#define CONSUMER_HEALTH_SLACK_MS 5000

/* The consume loop's wait for the claim pool's parts of a split claim, from their hand-over
 * (consumer/claim_pool.h): each worker's call is bounded like the loop's own, by the session's
 * reply bound (statement_timeout + DB_REPLY_SLACK_MS, common/db.h), and the wait by that, at most
 * CONSUMER_DB_CALL_MAX_S (what a call of the loop may take in the watchdog budget above; with no
 * statement_timeout, that). The loop's own part runs meanwhile, so a split claim keeps the
 * budget of one call. A part past the bound is claimed again with the batch. */
#define CONSUMER_CLAIM_WAIT_MS(statement_timeout_ms)                                               \
    ((statement_timeout_ms) > 0 &&                                                                 \
             (statement_timeout_ms) + DB_REPLY_SLACK_MS < CONSUMER_DB_CALL_MAX_S * 1000            \
         ? (statement_timeout_ms) + DB_REPLY_SLACK_MS                                              \
         : CONSUMER_DB_CALL_MAX_S * 1000)

/* SIGTERM to exit, at most, whatever the group's or the database's state (loop.c's stop
 * guard ends the process then; the orderly shutdown's steps fit well inside). Below
 * TimeoutStopSec and terminationGracePeriodSeconds of deploy/, with room for a preStop. */
#define CONSUMER_STOP_MS 9500

struct consumer {
    const struct og_config *cfg;
    rd_kafka_t *rk;       /* the group member */
    rd_kafka_t *producer; /* re-schedules and dead letters (idempotent) */
    struct db *db;
    struct sched *sched;
    struct window *window; /* cancels fetched before their due time, claimed at it */
    char **topics;         /* subscribed: the delay topics, then the others */
    size_t ntopics;
    /* topics end with kafka.payments_topic, then kafka.refund_results_topic, when set */
    bool has_payments, has_refunds;
    struct delay_levels levels; /* the delay topics that have a level (common/delay.h) */
    struct commit commit;       /* the batch, the retry set, the protocol that commits them */
    struct consumer_metrics m;
    struct relay_thread *relay; /* NULL unless outbox.enabled (loop_run starts it) */
    /* The sessions past db a claim is split across (consumer.claim_sessions - 1 workers; NULL
     * at 1): made here, its threads started by the first flush (consumer/claim_pool.h). */
    struct claim_pool *claim_pool;
    char instance_id[KAFKA_INSTANCE_ID_MAX + 1]; /* "" = dynamic membership */
    /* Readiness, written by the loop and (through commit.env) the commit protocol. */
    bool db_ok, kafka_ok;
    /* The intake while a flush waits for the database (loop.c, loop_intake). */
    bool intake_on;              /* a flush of the loop's runs: the database's wait hook polls */
    bool intake_draining;        /* the queue is being handled (a nested flush leaves it) */
    size_t intake_taken;         /* messages taken in during the current flush */
    rd_kafka_message_t **intake; /* ring of CONSUMER_INTAKE_MAX messages, handled in order */
    size_t intake_head, intake_n;
    /* A rebalance served during the intake, applied right after the flush: NULL when none. */
    rd_kafka_topic_partition_list_t *intake_rebalance;
    rd_kafka_resp_err_t intake_rebalance_err;
    /* The loop's own state (loop.c). */
    bool stalled;        /* the batch could not commit: every partition is paused */
    int64_t retry_at_ms; /* monotonic; next flush attempt while stalled */
    int attempts;        /* consecutive failed flushes (backoff) */
    bool fatal;
    bool fenced;        /* the broker fenced our group.instance.id: another member has it */
    struct fence fence; /* fenced, maybe by ourselves: the rejoin (consumer/fence.h) */
    bool closed;        /* the group membership was closed (loop_shutdown) */
    bool abandon;       /* something did not stop in time (the membership, the relay): the
                         * process exits without taking the rest down (main.c) */
    struct durability durability;
    int64_t next_gauges_ms, next_stats_ms;
    int64_t watchdog_every_ms; /* 0: no systemd watchdog */
    int64_t next_watchdog_ms;
    int64_t next_health_ms; /* next write of the health file */
    long health_stale_ms;   /* the bound written into it (CONSUMER_HEALTH_SLACK_MS) */
    bool health_failing;    /* the last write failed (logged once per failing spell) */
};

/* Every check of the configuration consumer_new makes, without building anything or
 * connecting (what --check-config runs): the Kafka settings (kafka_check_config), the number
 * of topics, their delay levels, and the outbox topics when the relay runs. Errors are
 * OG_ERR_CONFIG naming the setting. */
enum og_status consumer_check_config(const struct og_config *cfg, struct og_error *err);
/* Builds a consumer from cfg (which must outlive it): topics, metrics, scheduler, the commit
 * protocol's batch and retry set, the database client (not connected), the producer and the
 * group member with the loop's callbacks (loop_attach). NULL on failure, err says why. */
struct consumer *consumer_new(const struct og_config *cfg, struct og_error *err);
/* Builds c's group member (c->rk, and the commit protocol's c->commit.env.rk): a consumer
 * handle with the loop's callbacks (loop_attach), not subscribed. consumer_new calls it, and
 * fence_rejoin for a new member under the same group.instance.id. Errors are OG_ERR_CONFIG,
 * with c->rk NULL. */
enum og_status consumer_member_new(struct consumer *c, struct og_error *err);
/* Takes c down in a safe order (c may be NULL). With c->abandon set it frees nothing: something
 * that did not stop in time may still use c, and the process exits right after (main.c). */
void consumer_free(struct consumer *c);

#endif
