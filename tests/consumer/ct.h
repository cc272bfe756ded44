/* Support for the ordergate-consumer integration tests: a test database,
 * fresh topics, a producer for test messages, the built consumer binary run
 * as a child process, and checks against the database and the group's
 * committed offsets. Every helper fails the test (never skips) when the
 * real services cannot be reached. */
#ifndef OG_TESTS_CONSUMER_CT_H
#define OG_TESTS_CONSUMER_CT_H

#include <librdkafka/rdkafka.h>
#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "support/testdb.h"

struct ct {
    struct testdb db;
    PGconn *conn;
    char tag[32];
    char base[96];    /* unique part of the names of the topics and the group */
    char topic[128];  /* first delay topic */
    char topic2[128]; /* second delay topic */
    char dlq[128];    /* dead-letter topic */
    char payments[128];
    char refund_results[128];
    char group[128];
    char config[256]; /* config file written for the consumer */
    unsigned flags;   /* of ct_setup */
    rd_kafka_t *producer;
};

struct ct_proc {
    pid_t pid;
    char log[256]; /* the child's stderr */
    int status;    /* exit status once reaped, -1 before; 128+n when killed by signal n */
};

/* When set, every helper (and the spawned consumer) uses these brokers
 * instead of ORDERGATE_BROKERS: a librdkafka mock cluster. */
extern const char *ct_brokers_override;
/* When set, the spawned consumer's --db instead of the test database. */
extern const char *ct_db_override;

/* ct_setup flags */
#define CT_PAYMENTS 1u /* the consumer also reads the payments topic */
#define CT_REFUNDS  2u /* the consumer also reads the refund-results topic */

/* Creates the database, the topics (partitions each) and a producer, and
 * writes a consumer config file with short retry and poll settings. */
void ct_setup(struct ct *t, const char *tag, int partitions, unsigned flags);
void ct_teardown(struct ct *t);
/* The kafka.properties of a test consumer unless a test names its own: a killed member leaves
 * the group after 4 s, not 10. */
#define CT_SHORT_SESSION "\"session.timeout.ms=4000\", \"heartbeat.interval.ms=500\""
/* Writes the consumer's config file again, with extra settings inside its consumer group
 * ("busy_retry_ms = 500;") and kafka.properties (the inside of the libconfig list, e.g.
 * CT_SHORT_SESSION ", \"a=b\""; "" for none); consumers spawned afterwards read it. */
void ct_config(struct ct *t, const char *consumer_extra, const char *properties);
/* cmocka teardown for every test that spawns consumers: kills the ones
 * still running and tears down the ct of a test that failed half-way. */
int ct_cleanup(void **state);

/* Creates a topic with n partitions and waits until its metadata shows them. */
void ct_create_topic(const char *topic, int partitions);
/* Deletes a topic and waits (up to 20 s) until the metadata no longer lists it. */
void ct_delete_topic(const char *topic);

/* Places an order that expires expire_in_ms from the database's now(); returns
 * its expire_at in Unix ms (the database's clock). */
int64_t ct_place(struct ct *t, const char *order_no, long expire_in_ms);
/* Produces a cancel message (partition -1: by key) and waits for the ack. */
void ct_produce_cancel(struct ct *t, const char *topic, int partition, const char *order_no,
                       int64_t due_ms);
/* The same without waiting; ct_flush waits for everything sent. */
void ct_send_cancel(struct ct *t, const char *topic, int partition, const char *order_no,
                    int64_t due_ms);
void ct_flush(struct ct *t);
/* Produces raw bytes (key may be NULL) and waits for the ack. */
void ct_produce_raw(struct ct *t, const char *topic, int partition, const void *key, size_t key_len,
                    const void *value, size_t len);

/* Starts the consumer with --config, --db, --brokers, --topics, --group and
 * --metrics-listen 127.0.0.1:0, plus extra arguments (NULL-terminated). */
void ct_spawn(struct ct *t, struct ct_proc *p, const char *name, const char *topics, ...);
/* Sends sig and waits up to timeout_ms for the exit; returns the status. */
int ct_stop(struct ct_proc *p, int sig, long timeout_ms);
/* Waits for the child to exit by itself; returns the status or -1 on timeout. */
int ct_wait_exit(struct ct_proc *p, long timeout_ms);
/* True when the child's log contains needle; ct_log_wait polls for it. */
bool ct_log_has(const struct ct_proc *p, const char *needle);
void ct_log_wait(const struct ct_proc *p, const char *needle, long timeout_ms);
/* Counts lines of the log containing needle. */
int ct_log_count(const struct ct_proc *p, const char *needle);
/* The metrics port the child logged (waits for it). */
int ct_metrics_port(const struct ct_proc *p);
/* GET http://127.0.0.1:port/path into buf; returns the HTTP status. */
int ct_http_get(int port, const char *path, char *buf, size_t size);
/* The value of a Prometheus sample "name{labels}" or "name" in a /metrics text, -1 if absent. */
double ct_metric(const char *text, const char *sample);
/* The sample as the child's /metrics shows it now (asserts the scrape). */
double ct_metric_now(const struct ct_proc *p, const char *sample);
/* Polls the sample (gauges are refreshed every second) until it equals want or timeout_ms
 * passes; returns the last value. */
double ct_metric_wait(const struct ct_proc *p, const char *sample, double want, long timeout_ms);

/* Polls SQL returning one number until it equals want or timeout_ms passes;
 * returns the last value. */
long ct_wait_scalar(struct ct *t, const char *sql, long want, long timeout_ms);
long ct_scalar(struct ct *t, const char *sql);

/* The group's committed offset for topic/partition (-1001 when none). */
int64_t ct_committed(const char *group, const char *topic, int partition);
/* Polls the test group's committed offset until it equals want; returns the last one seen. */
int64_t ct_wait_committed(struct ct *t, const char *topic, int partition, int64_t want,
                          long timeout_ms);
/* The group's state as the coordinator describes it ("Stable", "PreparingRebalance",
 * "CompletingRebalance", "Empty", "Dead"). */
const char *ct_group_state(const char *group);
/* The end (high watermark) offset of topic/partition. */
int64_t ct_end_offset(const char *topic, int partition);

int64_t ct_now_ms(void);

/* Restarts the shared PostgreSQL of deploy/local/services.sh (pg_ctl restart
 * -m fast on $ORDERGATE_STATE_DIR/pg/data); false when there is no such
 * cluster (an existing PostgreSQL was given). Tests that call it run serially. */
bool ct_pg_restart(void);
/* Takes the test database away from the consumer (down: no new connections,
 * its sessions terminated) or gives it back. Other databases are unaffected. */
void ct_db_outage(struct ct *t, bool down);
/* Re-opens the test's own connection (after a restart). */
void ct_reconnect(struct ct *t);

/* Reads topic/partition from the beginning to its current end, calling fn
 * for each message (valid during the call only). Returns how many. */
typedef void (*ct_msg_fn)(void *arg, const rd_kafka_message_t *m);
int ct_consume_all(const char *topic, int partition, ct_msg_fn fn, void *arg, long timeout_ms);
/* The last value of header name as a string, or NULL. */
const char *ct_header(const rd_kafka_message_t *m, const char *name, char *buf, size_t size);

#endif
