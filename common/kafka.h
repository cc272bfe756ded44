/* Kafka client plumbing shared by the binaries: configurations built from
 * struct og_config, librdkafka's logs routed into common/log, idempotent
 * producers with per-message delivery tracking, topic-name checks.
 *
 * Configuration order (later wins):
 *   1. ordergate's defaults for the role (see kafka_conf_new);
 *   2. kafka.properties from the config file, verbatim, on every handle
 *      (security.protocol, sasl.*, ssl.*, tuning such as fetch.*), which is
 *      how any librdkafka property reaches the clients;
 *   3. the settings correctness rests on. kafka.properties may not name
 *      them (refused with a clear error rather than silently overridden):
 *      bootstrap.servers/metadata.broker.list (use kafka.brokers or
 *      --brokers), group.id (kafka.group, --group), group.instance.id
 *      (kafka.group_instance_id, --group-instance-id),
 *      queued.max.messages.kbytes (kafka.queued_max_kbytes),
 *      enable.auto.offset.store (offsets are stored after the database
 *      commit, never automatically), enable.auto.commit=false (the stored
 *      offsets are committed by the background auto-commit), and
 *      enable.idempotence=false (every producer is idempotent).
 * kafka.sasl_password_file, when set, is read at every kafka_conf_new and becomes
 * sasl.password (kafka.properties may then not set sasl.password too).
 * Property values may hold secrets: they are never logged. */
#ifndef OG_COMMON_KAFKA_H
#define OG_COMMON_KAFKA_H

#include <librdkafka/rdkafka.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/cfg.h"
#include "common/error.h"

#define KAFKA_TOPIC_MAX 249 /* Kafka's own limit on topic names */

enum kafka_role { KAFKA_ROLE_CONSUMER, KAFKA_ROLE_PRODUCER };

/* Group session defaults of the consumer (kafka.properties may change them). A member that
 * stops heartbeating (killed, its host gone) is declared dead after the session timeout; with
 * static membership that is also how long the partitions of a member that stopped cleanly,
 * and does not come back, wait for a new owner (a static member sends no LeaveGroup). 10 s
 * bounds that takeover; the heartbeats run on librdkafka's own thread, so a slow database
 * call in the consume loop never expires a session. The brokers' group.min.session.timeout.ms
 * (6 s by default) must allow it. */
#define KAFKA_SESSION_TIMEOUT_MS    10000
#define KAFKA_HEARTBEAT_INTERVAL_MS 1000

/* Longest group.instance.id: Kafka applies its topic-name rule to it. */
#define KAFKA_INSTANCE_ID_MAX 249

/* The consumer's group.instance.id (static membership), in buf:
 *   - kafka.group_instance_id when set;
 *   - else "<host name>-<ORDERGATE_INSTANCE>" when that environment variable is set (the
 *     systemd units set it: the template to its instance name %i, the single unit to
 *     "main"), stable across restarts of that instance;
 *   - else "" (dynamic membership: ad-hoc runs, several consumers started by hand on one
 *     host).
 * A value that is not 1..249 of [A-Za-z0-9._-] is OG_ERR_CONFIG naming the setting or the
 * variable. Two running members with one id fence each other: the broker fences the older
 * (FENCED_INSTANCE_ID). */
enum og_status kafka_group_instance_id(const struct og_config *cfg, char *buf, size_t size,
                                       struct og_error *err);

/* Whether a kafka.properties entry is set on a handle of this role: false
 * for the properties only the other role reads (which librdkafka would
 * ignore with a warning). */
bool kafka_prop_applies(enum kafka_role role, const char *name);

/* Builds a configuration for a handle of `role`, with client.id client_id
 * and the log callback installed. Consumer defaults: the cooperative-sticky
 * assignor, enable.auto.offset.store=false, enable.auto.commit=true,
 * auto.offset.reset=earliest (a new group must not skip cancels already
 * waiting), queued.max.messages.kbytes from kafka.queued_max_kbytes and
 * fetch.message.max.bytes=65536 (bounded prefetch: flat memory),
 * fetch.wait.max.ms=100 (a resumed partition waits at most this long for
 * the fetch in flight), session.timeout.ms and heartbeat.interval.ms from
 * the constants above, and group.instance.id from kafka_group_instance_id.
 * Producer defaults: enable.idempotence=true (acks=all, no duplicates or
 * reordering from internal retries) and the delivery report callback that
 * fills struct kafka_delivery. On success the caller owns *conf (hand it to
 * rd_kafka_new, or rd_kafka_conf_destroy it). Errors are OG_ERR_CONFIG. */
enum og_status kafka_conf_new(const struct og_config *cfg, enum kafka_role role,
                              const char *client_id, rd_kafka_conf_t **conf, struct og_error *err);

/* Validates everything Kafka-related in cfg without connecting: topics,
 * dead-letter and payments topic names, and kafka.properties against
 * librdkafka (unknown names, bad values) and the rules above. */
enum og_status kafka_check_config(const struct og_config *cfg, struct og_error *err);

/* How long a program waits at start for kafka_connect_check. */
#define KAFKA_CONNECT_CHECK_MS 10000

/* Connects to the brokers of cfg once with a short-lived client of its own (the settings of
 * kafka_conf_new, client.id client_id) and asks for metadata, for at most timeout_ms:
 *   - OG_OK: a broker answered (TLS and the SASL login, if configured, passed);
 *   - OG_ERR_CONFIG, not retriable: the broker refused the SASL login (wrong user or
 *     password), or TLS failed in a way retrying cannot mend (the broker's certificate does
 *     not verify against ssl.ca.location, a name mismatch, TLS against a plaintext port);
 *     err says which, with librdkafka's reason, in one line, and names the setting;
 *   - OG_ERR_KAFKA, retriable: no broker answered (all down, or nothing within timeout_ms).
 * librdkafka retries a refused login forever, logging each attempt: a program calls this
 * before it builds its own handles, so that a wrong password or CA ends it at once with one
 * line instead. The check's own librdkafka log lines go to the debug level. */
enum og_status kafka_connect_check(const struct og_config *cfg, const char *client_id,
                                   int timeout_ms, struct og_error *err);

/* Delivery report callback type (rd_kafka_conf_set_dr_msg_cb's). */
typedef void (*kafka_dr_fn)(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque);

/* Creates an idempotent producer (kafka_conf_new with KAFKA_ROLE_PRODUCER).
 * dr_cb NULL installs the callback that fills struct kafka_delivery (produce
 * with one as the message opaque to learn each message's outcome); a module
 * with its own per-message records passes its own callback (the outbox
 * relay's outbox_dr_cb). Errors are OG_ERR_CONFIG. */
enum og_status kafka_producer_new(const struct og_config *cfg, const char *client_id,
                                  kafka_dr_fn dr_cb, rd_kafka_t **producer, struct og_error *err);

/* Outcome of one produced message. Pass its address as the message opaque
 * (RD_KAFKA_V_OPAQUE); the producer's delivery report callback sets `done`
 * and `err` while the producer is polled (rd_kafka_poll, rd_kafka_flush).
 * The struct must stay where it is until done; it is written from the thread
 * that polls the producer, so poll a producer from one thread only, the one
 * that owns the deliveries. A message produced without an opaque is only
 * logged when it fails. */
struct kafka_delivery {
    bool done;
    rd_kafka_resp_err_t err; /* valid once done */
};

/* Polls the producer until every delivery in d[0..n) is done or timeout_ms
 * has passed (0: serve what has arrived, never block). Returns how many are
 * still pending. NULL entries are skipped. */
size_t kafka_wait(rd_kafka_t *producer, struct kafka_delivery *const *d, size_t n, int timeout_ms);

/* Splits a comma-separated topic list ("a, b,c"), validating each name;
 * refuses an empty list and duplicates. Caller frees with kafka_topics_free. */
enum og_status kafka_topics_split(const char *csv, char ***topics, size_t *n, struct og_error *err);
void kafka_topics_free(char **topics, size_t n);
/* True when name is a legal Kafka topic name: 1..249 of [A-Za-z0-9._-],
 * and neither "." nor "..". */
bool kafka_topic_valid(const char *name);

/* Fills err from a librdkafka error code; retriable unless the code says
 * retrying cannot help (bad configuration, message too large, not allowed). */
enum og_status kafka_error_set(struct og_error *err, rd_kafka_resp_err_t code, const char *what);

/* Creates one topic through the admin API of rk (replication -1: the
 * broker's default); an existing topic is no error (*created stays false). */
enum og_status kafka_topic_create(rd_kafka_t *rk, const char *topic, int partitions,
                                  int replication, bool *created, struct og_error *err);
/* Waits up to timeout_ms until metadata lists the topic with `partitions`
 * partitions, each with a leader (a topic just created may not have them
 * yet, and producing to it would fail); false on timeout. */
bool kafka_topic_wait_ready(rd_kafka_t *rk, const char *topic, int partitions, int timeout_ms);
/* Messages the topic holds: over its partitions, high watermark minus low
 * watermark (what a reader from the beginning would get, nothing deleted
 * by retention meanwhile). Answers that pass (a topic just created, a
 * leader moving) are asked again until timeout_ms is over; -1 when no count
 * came by then, at once for other errors. An unknown topic takes the whole
 * timeout_ms. */
int64_t kafka_topic_messages(rd_kafka_t *rk, const char *topic, int timeout_ms);
bool kafka_err_retriable(rd_kafka_resp_err_t code);

/* The log callback kafka_conf_new installs: librdkafka's syslog levels
 * mapped onto common/log (0-3 error, 4 warn, 5-6 info, 7 debug), event
 * "kafka_log". Exposed for handles built by hand (tests). */
void kafka_log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf);
/* What an error callback's (code, reason) says the brokers refused for good, where a retry
 * cannot help: RD_KAFKA_RESP_ERR__AUTHENTICATION (the SASL login), RD_KAFKA_RESP_ERR__SSL
 * (the certificate or the protocol, whichever code librdkafka reported it with), else
 * RD_KAFKA_RESP_ERR_NO_ERROR (a connection that may come back). */
rd_kafka_resp_err_t kafka_refusal(int code, const char *reason);
/* The default error callback: logs event "kafka_error" (or "kafka_fatal"
 * with the original cause of a fatal error). */
void kafka_error_cb(rd_kafka_t *rk, int code, const char *reason, void *opaque);

/* Creates a consumer handle that only reads the committed offsets of consumer group `group`
 * and topics' watermarks (rd_kafka_committed, rd_kafka_query_watermark_offsets): the settings
 * of kafka_conf_new for cfg (kafka.properties, kafka.sasl_password_file, TLS) with group.id
 * `group`, kafka.group_instance_id taken as empty, and enable.auto.commit=false, so that it
 * commits nothing. It must never subscribe: it would join the group. Errors are
 * OG_ERR_CONFIG. */
enum og_status kafka_group_reader_new(const struct og_config *cfg, const char *group,
                                      const char *client_id, rd_kafka_t **reader,
                                      struct og_error *err);
/* Messages of topic that the reader's group has not committed yet: over the topic's partitions,
 * the high watermark minus the committed offset (minus the low watermark where the group has
 * committed nothing). Each request to the brokers waits at most timeout_ms; -1 when one got no
 * answer or the topic does not exist. */
int64_t kafka_group_lag(rd_kafka_t *reader, const char *topic, int timeout_ms);

#endif
