/* ordergate-consumer internals, shared by the files of consumer/.
 *
 * consumer.c builds and frees a consumer. One thread runs the consume loop
 * (loop.c): it polls the consumer group, decodes each message (common/codec),
 * asks common/sched whether it is due, and collects due work in a batch
 * (batch.c). A batch is committed in this
 * order, and only in this order, so that a crash at any point loses nothing:
 *   1. claim_payment for every payment result (first: a payment consumed
 *      with a cancel that fell due meanwhile was made before that cancel);
 *      a payment result that did not decode, or that the gate refused for
 *      good, is recorded with record_payment_refused (an exception for
 *      review) before its dead letter is produced in step 3; one whose
 *      order row is locked (a short lock wait of its own) or whose hook
 *      fails is held back alone in the retry set (below);
 *   2. claim_cancel for every cancel in the batch, in one statement, but
 *      for the orders whose payment is held back (they wait behind it);
 *   3. for not_due orders, due_times() and, unless due within
 *      consumer.local_due_ms, one new delayed message each on the delay
 *      topic that fits the time left, produced with the idempotent producer;
 *   4. every produced message (re-schedules, dead letters) acknowledged;
 *   5. offsets stored (offset + 1 of the last message per partition, but
 *      never past a message whose order waits in the local retry set).
 * The stored offsets reach the group coordinator through librdkafka's
 * auto-commit, on revoke and on shutdown. A crash before 5 redelivers the
 * batch; the gate answers already_cancelled/duplicate for what was done.
 *
 * The local retry set (retry.c). An order the claim answers busy (its row
 * locked by another transaction) or not_due by less than
 * consumer.local_due_ms does not hold back the batch and does not go round
 * Kafka: its batch entry is finished, and a slot of the retry set claims
 * the order again in a later batch, busy ones after a backoff
 * (CONSUMER_RETRY_BASE_MS doubling to CONSUMER_RETRY_CAP_MS) for up to
 * consumer.busy_retry_ms, short not_due ones at the expire_at due_times()
 * reported (CONSUMER_NOT_DUE_TRIES times at most). Past the bound, or when
 * the set is full, the order is re-scheduled through a delay topic as a
 * not_due one is. While a slot holds a message, its partition's stored
 * offset stays at that message (the highest offset done behind it is
 * remembered and stored once the slot is released): a crash re-reads it,
 * which is harmless. A revoked partition's slots are dropped (its next
 * owner reads them again). Slots are claimed only while nothing is stalled,
 * so they only ever join a batch that has not been claimed yet.
 *
 * Payments held back wait in the same set: one whose claim found its order
 * row locked (CONSUMER_PAYMENT_LOCK_MS) with the busy backoff for as long as
 * the row stays locked, one a hook failed with the hook backoff until
 * consumer.hook_retry_ms (then recorded refused and dead-lettered). While one
 * waits, a cancel of its order is not claimed but waits as a busy one, no
 * earlier than the payment's next try: the payment came first, so it claims
 * first. With the set full, a payment cannot be held: the batch is retried.
 *
 * Delay levels. A delay topic's level comes from kafka.topic_levels or its
 * name (common/delay.h): a message due more than its topic's level plus
 * consumer.level_margin_ms from now would pause its partition far beyond
 * the level, so it is claimed at once instead (the database decides; a
 * not_due answer re-schedules it by the real expire_at). Re-schedules go to
 * the shortest level not shorter than the time left minus the margin; when
 * no level is that long, to the longest level with the due time cut to
 * that level (the order is claimed then and hops on). Every message the
 * consumer produces is thus due within its topic's level. Without levels
 * in the topic names, consumer.max_wait_ms stands for every topic's level:
 * re-schedules go back to their source topic, due within it; so no topic,
 * named any way, has a message pause its partition beyond a bound.
 *
 * A second thread (relay.c) runs the outbox relay on its own database
 * connection and producer when outbox.enabled is set. */
#ifndef OG_CONSUMER_CONSUMER_H
#define OG_CONSUMER_CONSUMER_H

#include <librdkafka/rdkafka.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/cfg.h"
#include "common/codec.h"
#include "common/db.h"
#include "common/delay.h"
#include "common/gate.h"
#include "common/kafka.h"
#include "common/metrics.h"
#include "common/sched.h"

/* A paused partition stays paused at least this long (see sched_new). */
#define CONSUMER_MIN_PAUSE_MS 50
/* When the database says not_due although the expire_at it reports has
 * passed by our clock, our clock runs ahead of the database's: look again
 * this much later instead of spinning. */
#define CONSUMER_SKEW_RETRY_MS 250
/* Attempts inside one database call of the consume loop (see consumer_new): one. The loop
 * retries a failed batch itself, with backoff, polling Kafka and pinging the watchdog in
 * between, so no call repeats a blocking attempt out of the loop's sight. */
#define CONSUMER_DB_ATTEMPTS 1

/* The systemd watchdog budget. The loop pings (WATCHDOG=1) at most every
 * CONSUMER_WATCHDOG_EVERY_MS from each turn and after every database answer
 * (consumer_watchdog): both prove progress. The longest gap between pings is then the longest
 * blocking step, a poll (consumer.poll_ms, at most 10 s) and one database call:
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

/* The local retry set (see above). */
#define CONSUMER_RETRY_BASE_MS 25
#define CONSUMER_RETRY_CAP_MS  1000
#define CONSUMER_NOT_DUE_TRIES 5
/* A payment's claim waits at most CONSUMER_PAYMENT_LOCK_MS for a row lock (its order's, held by
 * an order service); the waits cut short in one flush add up to at most
 * CONSUMER_PAYMENT_LOCK_BUDGET_MS, after which each claim of that flush waits
 * CONSUMER_PAYMENT_LOCK_MIN_MS (lock_timeout 0 would mean no bound). A payment whose wait was
 * cut short is held in the retry set like a busy cancel (same backoff), for as long as the row
 * stays locked: a lock is not the payment's fault, so it is never dead-lettered for it. */
#define CONSUMER_PAYMENT_LOCK_MS        100
#define CONSUMER_PAYMENT_LOCK_BUDGET_MS 1000
#define CONSUMER_PAYMENT_LOCK_MIN_MS    1
/* A payment held that long logs payment_locked again (warning), every that many tries. */
#define CONSUMER_PAYMENT_LOCK_LOG_EVERY 30
/* An order a hook fails is claimed again after 1 s, doubling up to 30 s, until
 * consumer.hook_retry_ms; at most this many hooks get a series of their own in
 * ordergate_consumer_hook_failures_total. */
#define CONSUMER_HOOK_BASE_MS      1000
#define CONSUMER_HOOK_CAP_MS       30000
#define CONSUMER_HOOK_SERIES_MAX   16
#define CONSUMER_HOOK_BISECT_EVERY 8
/* Longest wait for delivery reports inside one flush; the loop keeps
 * polling (partitions stalled) when they take longer. */
#define CONSUMER_DELIVERY_WAIT_MS 2000
/* SIGTERM to exit, at most, whatever the group's or the database's state (loop.c's stop
 * guard ends the process then; the orderly shutdown's steps fit well inside). Below
 * TimeoutStopSec and terminationGracePeriodSeconds of deploy/, with room for a preStop. */
#define CONSUMER_STOP_MS 9500
/* Dead letters keep a copy of the bad message until acknowledged: values
 * and keys are cut to these sizes in the dead-letter topic (the original
 * size travels in a header), and a batch is flushed early when its copies
 * exceed the budget, so memory stays bounded whatever arrives. */
#define CONSUMER_DLQ_VALUE_MAX  16384
#define CONSUMER_DLQ_KEY_MAX    1024
#define CONSUMER_DLQ_BUDGET     (4 * 1024 * 1024)
#define CONSUMER_DLQ_REASON_MAX 512

enum batch_kind { BATCH_CANCEL, BATCH_PAYMENT, BATCH_REFUND, BATCH_DLQ };

/* What a subscribed topic carries. */
enum consumer_topic { CONSUMER_TOPIC_DELAY, CONSUMER_TOPIC_PAYMENTS, CONSUMER_TOPIC_REFUNDS };

enum batch_state {
    BATCH_NEW,    /* cancel not claimed / payment not applied / dead letter not produced */
    BATCH_RECORD, /* dead letter of a payment result: record_payment_refused must commit first */
    BATCH_RESCHEDULE, /* claim said not_due: needs the database's due time */
    BATCH_PRODUCE,    /* a message (re-schedule or dead letter) must be produced */
    BATCH_INFLIGHT,   /* produced; waiting for its delivery report */
    BATCH_DONE,
};

struct batch_entry {
    enum batch_kind kind;
    enum batch_state state;
    int tp;         /* index into batch.tps */
    int64_t offset; /* of the source message */
    int64_t due_ms;
    int64_t new_due_ms;
    enum gate_outcome outcome;
    bool first; /* the first entry of its order in this batch (duplicates share a claim row) */
    int retry;  /* its slot in the retry set (taken from it, or given one here); -1: none */
    bool held;  /* finished here, but its order goes on in the retry set: no offset past it */
    int64_t hook_first_ms;  /* BATCH_PAYMENT: wall time of the first hook failure, else 0 */
    const char *dest_topic; /* BATCH_PRODUCE re-schedule: where to (NULL: the source topic) */
    char order_no[GATE_ORDER_NO_MAX + 1];
    struct kafka_delivery dr; /* written by the delivery report while INFLIGHT */
    /* BATCH_PAYMENT; for the dead letter of a payment result, what could be read of it */
    struct codec_payment pay;
    struct codec_refund refund; /* BATCH_REFUND */
    /* BATCH_DLQ: copies, freed when the batch is cleared */
    char *dlq_key;
    size_t dlq_key_len;
    char *dlq_value;
    size_t dlq_value_len;
    size_t dlq_orig_len;
    char *dlq_reason;
};

struct batch_tp {
    char *topic;
    int32_t partition;
    int64_t max_offset;
    bool voided; /* revoked before the batch committed: nothing is stored for it */
};

struct batch {
    struct batch_entry *e;
    size_t n, cap;
    struct batch_tp *tps;
    size_t ntps, tps_cap;
    int64_t first_ms; /* monotonic time the first entry arrived (linger) */
    size_t dlq_bytes;
};

enum flush_result {
    FLUSH_DONE,  /* committed (or nothing to do); the batch is empty */
    FLUSH_RETRY, /* something failed: keep the batch, back off, try again */
    FLUSH_WAIT,  /* only delivery reports are outstanding: poll and look again */
};

/* Delay topics plus the payments topic a consumer may subscribe to. */
#define CONSUMER_TOPICS_MAX 64

struct consumer_metrics {
    struct metric *consumed[CONSUMER_TOPICS_MAX]; /* per subscribed topic, as in consumer.topics */
    struct metric *deferred, *dropped, *dead_lettered, *rescheduled, *payments_refused;
    struct metric *claims[GATE_OUTCOME_COUNT];
    struct metric *payments[GATE_OUTCOME_COUNT];
    struct metric *refunds[GATE_REFUND_RESULT_COUNT];
    struct metric *db_errors, *kafka_errors, *rebalances, *batches, *offsets_stored;
    struct metric *batch_size, *lateness, *db_seconds;
    struct metric *paused, *due_pending, *stalled;
    /* [0] busy, [1] not_due, [2] hook_failed (CONSUMER_RETRY_WHY) */
    struct metric *retries[3], *retry_given_up[3];
    struct metric *retry_pending, *beyond_level, *db_call_age;
    struct metric *commit_durable, *commit_replicated;
    struct metric *outbox_backlog, *outbox_published, *outbox_errors;
    struct metric *outbox_quarantined_total, *outbox_quarantined;
};

struct relay;

enum retry_state {
    RETRY_FREE,
    RETRY_WAITING,  /* to be claimed again at at_ms */
    RETRY_IN_BATCH, /* an entry of the current batch claims it */
};

struct retry_slot {
    enum retry_state state;
    enum batch_kind kind;  /* BATCH_CANCEL, or BATCH_PAYMENT (then pay is the payment) */
    enum gate_outcome why; /* the last answer: GATE_BUSY, GATE_NOT_DUE or GATE_HOOK_FAILED */
    const char *topic;     /* one of consumer.topics */
    int32_t partition;
    int64_t offset;        /* of its message */
    int64_t due_ms;        /* the message's due time (lateness is measured from it) */
    int64_t first_ms;      /* wall: the first busy or not_due answer */
    int64_t at_ms;         /* wall: claim again from then on */
    int tries;             /* busy or not_due answers so far */
    int64_t hook_first_ms; /* BATCH_PAYMENT: wall time of its first hook failure, else 0 */
    char order_no[GATE_ORDER_NO_MAX + 1];
    struct codec_payment pay; /* BATCH_PAYMENT */
};

/* A partition whose stored offset waits behind a slot: the offset (+ 1) done behind it. */
struct retry_hold {
    char *topic;
    int32_t partition;
    int64_t upto;
};

struct retry_set {
    struct retry_slot *slots; /* cap of them, indexes stable (batch entries refer to them) */
    size_t cap, used;
    struct retry_hold *holds;
    size_t nholds, holds_cap;
};

struct consumer {
    const struct og_config *cfg;
    rd_kafka_t *rk;       /* the group member */
    rd_kafka_t *producer; /* re-schedules and dead letters (idempotent) */
    struct db *db;
    struct sched *sched;
    struct batch batch;
    struct gate_cancel_row *rows; /* claim results, batch_size of them */
    const char **nos;             /* claim arguments, batch_size of them */
    bool *row_seen;               /* per claim row: an entry was matched to it */
    char **topics;                /* subscribed: the delay topics, then the others */
    size_t ntopics;
    /* topics end with kafka.payments_topic, then kafka.refund_results_topic, when set */
    bool has_payments, has_refunds;
    struct delay_levels levels; /* the delay topics that have a level (common/delay.h) */
    struct retry_set retry;
    bool stalled;               /* the batch could not commit: every partition is paused */
    int64_t retry_at_ms;        /* monotonic; next flush attempt while stalled */
    int hook_stalls;            /* flushes in a row a hook failed for every order of the batch */
    int64_t next_durability_ms; /* monotonic; next look at the server's commit settings */
    int durable;                /* the last verdict: -1 not looked yet, 0 no, 1 yes */
    int attempts;               /* consecutive failed flushes (backoff) */
    bool db_ok, kafka_ok, fatal;
    bool fenced;  /* the broker fenced our group.instance.id: another member has it */
    bool closed;  /* the group membership was closed (loop_shutdown) */
    bool abandon; /* something did not stop in time (the membership, the relay): the
                   * process exits without taking the rest down (main.c) */
    char instance_id[KAFKA_INSTANCE_ID_MAX + 1]; /* "" = dynamic membership */
    int64_t next_gauges_ms, next_stats_ms;
    int64_t watchdog_every_ms; /* 0: no systemd watchdog */
    int64_t next_watchdog_ms;
    int64_t next_health_ms; /* next write of the health file */
    long health_stale_ms;   /* the bound written into it (CONSUMER_HEALTH_SLACK_MS) */
    bool health_failing;    /* the last write failed (logged once per failing spell) */
    struct consumer_metrics m;
    struct relay *relay;
};

/* consumer.c */
/* Every check of the configuration consumer_new makes, without building anything or
 * connecting (what --check-config runs): the Kafka settings (kafka_check_config), the number
 * of topics, their delay levels, and the outbox topics when the relay runs. Errors are
 * OG_ERR_CONFIG naming the setting. */
enum og_status consumer_check_config(const struct og_config *cfg, struct og_error *err);
struct consumer *consumer_new(const struct og_config *cfg, struct og_error *err);
void consumer_free(struct consumer *c);

/* loop.c */
/* Runs until signals_stop or a fatal error; then shuts down cleanly. Returns
 * 0 on a clean stop, 1 after a fatal (runtime) error, 2 when the broker fenced
 * this member's group.instance.id (two instances configured with one id: a
 * configuration error, and a restart would only fence the other). */
int consumer_run(struct consumer *c);
/* Sets c as the opaque of the group member's configuration and the loop's
 * callbacks (rebalance, error, offset commit, statistics for broker
 * reachability). */
void consumer_loop_conf(struct consumer *c, rd_kafka_conf_t *conf);
/* Pings the systemd watchdog, and rewrites the health file, when CONSUMER_WATCHDOG_EVERY_MS
 * have passed since the last time. Called where the consumer has made progress: each loop
 * turn, each database answer. */
void consumer_watchdog(struct consumer *c);
/* Pauses a partition and seeks it back to offset. */
void consumer_pause_seek(struct consumer *c, const char *topic, int32_t partition, int64_t offset);

/* batch.c */
enum og_status batch_init(struct batch *b, size_t cap, struct og_error *err);
void batch_free(struct batch *b);
bool batch_full(const struct batch *b);
/* Adds an entry for a message of topic/partition at offset; NULL when the
 * batch is full or out of memory. The caller fills kind-specific fields. */
struct batch_entry *batch_add(struct batch *b, enum batch_kind kind, const char *topic,
                              int32_t partition, int64_t offset);
/* Marks a revoked partition: its entries are dropped from the batch (their
 * messages go to the partition's next owner) once nothing is in flight. */
void batch_void(struct batch *b, const char *topic, int32_t partition);
/* True when the batch holds live entries of topic/partition. */
bool batch_has(const struct batch *b, const char *topic, int32_t partition);
/* Cancels waiting in the batch (the due-but-not-fired gauge). */
size_t batch_due_pending(const struct batch *b);
/* Produces the dead letter of entry e (state BATCH_PRODUCE -> INFLIGHT). */
void batch_produce(struct consumer *c, struct batch_entry *e);
/* Runs the commit steps (see above) as far as they go. */
enum flush_result batch_flush(struct consumer *c, int wait_ms);

/* Claims due slots of the retry set again in the batch (while it has room); returns how
 * many. Only while not stalled (the batch is not claimed yet). */
size_t batch_take_retries(struct consumer *c, int64_t now_wall);

/* retry.c: the local retry set (see above). Slot numbers stay valid until released. */
enum og_status retry_init(struct retry_set *r, size_t cap, struct og_error *err);
void retry_free(struct retry_set *r);
/* A slot for the order of e (its message at topic/partition), state RETRY_IN_BATCH, first
 * answer at now_ms; -1 when the set is full. */
int retry_add(struct retry_set *r, const struct batch_entry *e, const char *topic,
              int32_t partition, int64_t now_ms);
/* The slot waits until at_ms after another `why` answer (tries + 1; an answer of the other
 * kind starts tries again). */
void retry_wait(struct retry_set *r, int slot, enum gate_outcome why, int64_t at_ms);
void retry_release(struct retry_set *r, int slot);
/* The earliest at_ms of a waiting slot, SCHED_NEVER when none waits. */
int64_t retry_next_at(const struct retry_set *r);
/* Waiting cancel slots whose last answer was why. */
size_t retry_count(const struct retry_set *r, enum gate_outcome why);
/* True when a payment of order_no waits in the set (held back: a hook failed it or its row was
 * locked); *at_ms (may be NULL) receives when it is claimed again. */
bool retry_payment_held(const struct retry_set *r, const char *order_no, int64_t *at_ms);
/* The lowest offset a slot holds on topic/partition; false when none. */
bool retry_floor(const struct retry_set *r, const char *topic, int32_t partition, int64_t *floor);
/* The offset remembered behind a floor (and forgets it), -1 when none; put remembers one
 * (false when out of memory: the next store may then be lower, which re-reads, never skips). */
int64_t retry_hold_take(struct retry_set *r, const char *topic, int32_t partition);
bool retry_hold_put(struct retry_set *r, const char *topic, int32_t partition, int64_t upto);
/* Drops the slots and the hold of a revoked partition; returns how many slots. */
size_t retry_revoke(struct retry_set *r, const char *topic, int32_t partition);

/* consumer.c: the server's commit durability. Reads fsync, synchronous_commit and
 * synchronous_standby_names on the consume loop's session (at start and every
 * CONSUMER_DURABILITY_EVERY_MS, so a failover to a server set up otherwise is seen): a claim is
 * durable when fsync is on and synchronous_commit is not off, nor local while synchronous
 * standbys are configured; it is replicated when, besides, synchronous standbys are named and
 * synchronous_commit waits for them. A claim that is not durable could be lost after its
 * offset was committed: the consumer then stops (fatal) unless consumer.allow_nondurable, in
 * which case it logs an error once and exports ordergate_consumer_commit_durable 0. A failed
 * look changes nothing (the next one tries again). */
#define CONSUMER_DURABILITY_EVERY_MS 60000
void consumer_check_durability(struct consumer *c);

/* consumer.c: delay levels (see above) */
/* The level of a delay topic in ms for the due-time check: its own, else the longest of
 * kafka.topics, else (no topic has a level) consumer.max_wait_ms. Never negative: every topic
 * is checked, whatever its name. */
int64_t consumer_level_ms(const struct consumer *c, const char *topic);
/* Where a re-schedule due at *due_ms (wall) goes; may cut *due_ms to the longest level (to
 * consumer.max_wait_ms when no topic has a level). */
const char *consumer_reschedule_topic(const struct consumer *c, const char *source, int64_t now_ms,
                                      int64_t *due_ms);

/* relay.c: the outbox relay thread (a no-op when outbox.enabled is false) */
enum og_status relay_start(struct consumer *c, struct og_error *err);
/* Stops the relay thread, waiting for it until deadline_ms (monotonic). False when it did
 * not stop in time: c->relay stays set, and the thread may still use c and its
 * configuration, so the caller must exit without freeing them (c->abandon). */
bool relay_stop(struct consumer *c, int64_t deadline_ms);

/* instruments.c */
void consumer_metrics_register(struct consumer_metrics *m, char *const *topics, size_t ntopics);
/* ordergate_consumer_hook_failures_total{hook="..."}, at most CONSUMER_HOOK_SERIES_MAX hooks
 * (then hook="other"). */
struct metric *consumer_metric_hook_failures(const char *hook);

#endif
