#include "common/cfg.h"

#include <errno.h>
#include <libconfig.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/db.h"
#include "common/log.h"
#include "common/parse.h"

enum cfg_type { CFG_STR, CFG_INT, CFG_BOOL, CFG_STRLIST };

struct cfg_param {
    const char *name; /* dotted path in the file, also the flag's setting name */
    enum cfg_type type;
    size_t offset;
    const char *def; /* default, as a string */
    long min, max;   /* bounds for CFG_INT */
    int secret;      /* masked by cfg_dump */
    unsigned progs;  /* CFG_PROG_*: the programs that read it */
    const char *env; /* the environment variable used while it has its default, or NULL */
    const char *description;
};

#define S(field) offsetof(struct og_config, field)
#define CON      CFG_PROG_CONSUMER
#define SCN      CFG_PROG_SCANNER
#define CTL      CFG_PROG_CTL
#define CNS      CFG_PROG_CONSOLE

/* The one table of settings: name, type, field, default, bounds, whether it is a secret, which
 * programs read it, its environment fallback, and its description (what it does, its unit, when
 * to change it). The --help of the services, docs/settings.md and deploy/ordergate.conf are
 * generated from it (common/cfg_doc.h); change a meaning here and regenerate them. */
static const struct cfg_param cfg_params[] = {
    {"log_level", CFG_STR, S(log_level), "info", 0, 0, 0, CON | SCN | CTL | CNS, NULL,
     "Log threshold: debug, info, warn or error. Logs are logfmt lines on stderr (ts=... "
     "level=... prog=... event=...), librdkafka's own included; debug adds a line per batch."},
    {"database.conninfo", CFG_STR, S(database.conninfo), "", 0, 0, 1, CON | SCN | CTL | CNS,
     "ORDERGATE_DB",
     "libpq connection string or URI (\"host=db1 dbname=shop user=ordergate_app "
     "sslmode=verify-full\"); empty: libpq's environment (PGHOST, PGPORT, PGUSER, PGDATABASE, "
     "...) decides, as for psql. Keep the password out of it (database.password_file); "
     "keepalives_idle= or tcp_user_timeout= here replace the keepalives every connection asks "
     "for (a vanished host is noticed within about 25 s)."},
    {"database.password_file", CFG_STR, S(database.password_file), "", 0, 0, 0,
     CON | SCN | CTL | CNS, "ORDERGATE_DB_PASSWORD_FILE",
     "File whose whole content is the database password (trailing newlines dropped, at most "
     "1023 bytes: a longer one is refused, never cut), read at start and never logged; a systemd "
     "credential, a Kubernetes Secret key or a Docker secret. Empty: libpq's PGPASSWORD or "
     "~/.pgpass."},
    {"database.retry_max", CFG_INT, S(database.retry_max), "8", 1, 1000, 0, CON | SCN | CTL | CNS,
     NULL,
     "Attempts of a database call that fails transiently (serialization failure, deadlock, lock "
     "timeout, lost or refused connection, server shutting down) before it fails: the consumer "
     "then reads the batch again later, a scanner run ends failed. Repeating is safe: every gate "
     "call is idempotent."},
    {"database.retry_base_ms", CFG_INT, S(database.retry_base_ms), "50", 1, 60000, 0,
     CON | SCN | CTL | CNS, NULL,
     "Milliseconds of the first wait before a transient failure is retried; each further wait "
     "doubles, up to database.retry_cap_ms."},
    {"database.retry_cap_ms", CFG_INT, S(database.retry_cap_ms), "5000", 1, 600000, 0,
     CON | SCN | CTL | CNS, NULL,
     "Longest wait between two attempts of a call, in milliseconds; raise it (with "
     "database.retry_max) to ride out a longer database restart or failover."},
    {"database.lock_timeout_ms", CFG_INT, S(database.lock_timeout_ms), "5000", 0, 3600000, 0,
     CON | SCN | CNS, NULL,
     "Longest wait of a statement for a lock, in milliseconds (PostgreSQL's lock_timeout, set "
     "for each transaction, never on the session), so that an order service holding a row "
     "cannot hold the consumer or the scanner; a lock wait that times out (55P03) is retried "
     "like any transient failure. 0: the server's, the role's or the conninfo's value."},
    {"database.statement_timeout_ms", CFG_INT, S(database.statement_timeout_ms), "20000", 0,
     86400000, 0, CON | SCN | CNS, NULL,
     "Longest statement, in milliseconds (PostgreSQL's statement_timeout, set for each "
     "transaction); the scanner's --reconcile, one long read, is not bound by it. A call also "
     "waits for the server's reply at most this long plus 10 s, then drops the connection as lost "
     "and repeats the call (a server silent behind a proxy, which keepalives cannot see). 0: the "
     "server's, the role's or the conninfo's value, and no bound on the reply."},
    {"database.pool_mode", CFG_STR, S(database.pool_mode), "session", 0, 0, 0,
     CON | SCN | CTL | CNS, NULL,
     "How the programs talk to the server: session (a direct connection, or a pooler in session "
     "mode: named prepared statements), or transaction behind a transaction-pooling PgBouncer "
     "(statements go unnamed, nothing is kept in the session). Nothing detects it: left at "
     "session behind a transaction pooler, a call fails with an error naming this setting "
     "(docs/operations.md, \"Behind PgBouncer\"). A consumer holds up to 2 server connections "
     "(its loop and its relay), a scanner run 1, or 1 + scanner.workers when that is above 1."},
    {"kafka.brokers", CFG_STR, S(kafka.brokers), "localhost:9092", 0, 0, 0, CON | CTL,
     "ORDERGATE_BROKERS",
     "Bootstrap brokers, \"host:port,host:port\" (librdkafka's bootstrap.servers)."},
    {"kafka.topics", CFG_STR, S(kafka.topics), "ordergate.cancel.15m,ordergate.cancel.30m", 0, 0, 0,
     CON | CTL, NULL,
     "The delay topics the consumer reads, one per delay level so that due times within a "
     "partition are nearly in order: a comma-separated string or a list of strings. A message's "
     "key is the order number, its value {\"v\":1,\"order_no\":...,\"due_at\":...}."},
    {"kafka.topic_levels", CFG_STR, S(kafka.topic_levels), "", 0, 0, 0, CON | CTL, NULL,
     "The delay level of each topic of kafka.topics, in the same order (\"15m,30m\"): the "
     "longest wait its messages are produced with. Empty: the last dot-separated part of each "
     "name (ordergate.cancel.15m is 15m). The relay re-schedules onto the smallest level long "
     "enough (docs/consumer.md, \"Delay levels\")."},
    {"kafka.group", CFG_STR, S(kafka.group), "ordergate-consumer", 0, 0, 0, CON, NULL,
     "Consumer group id: the instances of one group share the topics' partitions "
     "(cooperative-sticky assignment)."},
    {"kafka.group_instance_id", CFG_STR, S(kafka.group_instance_id), "", 0, 0, 0, CON, NULL,
     "Static group membership (librdkafka's group.instance.id): a restarted instance gets its "
     "partitions back at once, without a rebalance. Empty: HOSTNAME-$ORDERGATE_INSTANCE when "
     "that variable is set (the systemd units set it), else dynamic membership. At most 249 "
     "letters, digits, dots, underscores and dashes, one id per running instance: a second "
     "instance with the same id fences the first, which exits 2 (docs/consumer.md, "
     "\"Takeover\")."},
    {"kafka.dead_letter_topic", CFG_STR, S(kafka.dead_letter_topic), "ordergate.cancel.dlq", 0, 0,
     0, CON | CTL, NULL,
     "Where a message that cannot be decoded, or that the gate cannot apply, is produced, the "
     "reason in its headers, before it is skipped; alert OrdergateDeadLetters."},
    {"kafka.payments_topic", CFG_STR, S(kafka.payments_topic), "", 0, 0, 0, CON | CTL, NULL,
     "Payment results to apply through the payment claim "
     "({\"v\":1,\"order_no\",\"txn_no\",\"amount_cents\",\"channel\"}). Empty: not consumed."},
    {"kafka.refund_results_topic", CFG_STR, S(kafka.refund_results_topic), "", 0, 0, 0, CON | CTL,
     NULL,
     "Refund results to record through record_refund ({\"v\":1,\"txn_no\",\"refund_ref\","
     "\"outcome\"}, key txn_no, outcome succeeded or failed): the payment side's answer to a "
     "refund_requested event; one the gate cannot apply is dead-lettered. Empty: not consumed."},
    {"kafka.properties", CFG_STRLIST, S(kafka.properties), "", 0, 0, 1, CON | CTL, NULL,
     "librdkafka properties, each \"name=value\", passed as they are (for TLS, SASL, client.id, "
     "timeouts; docs/operations.md, \"Kafka over TLS and SASL\"). Values are masked in every "
     "settings dump; what ordergate sets itself (bootstrap.servers, group.id, "
     "enable.auto.offset.store, ...) is refused, naming the setting to use instead."},
    {"kafka.sasl_password_file", CFG_STR, S(kafka.sasl_password_file), "", 0, 0, 0, CON | CTL,
     "ORDERGATE_KAFKA_SASL_PASSWORD_FILE",
     "File whose whole content is the SASL password (librdkafka's sasl.password), read at start "
     "and never logged; a missing or empty file stops the start, as a refused login does (exit "
     "2). Empty: none (kafka.properties may set sasl.password instead, not both)."},
    {"kafka.replication", CFG_INT, S(kafka.replication), "0", 0, 32, 0, CTL, NULL,
     "Replicas of each topic ordergatectl topics creates (3 on a production cluster, with the "
     "brokers' min.insync.replicas = 2); more than the cluster has brokers is refused. 0: the "
     "brokers' default.replication.factor. Topics that exist keep theirs."},
    {"kafka.queued_max_kbytes", CFG_INT, S(kafka.queued_max_kbytes), "1024", 16, 2097151, 0, CON,
     NULL,
     "Prefetch bound per partition in kilobytes (librdkafka's queued.max.messages.kbytes): a "
     "paused partition buffers at most this much, so memory stays flat whatever the backlog."},
    {"consumer.batch_size", CFG_INT, S(consumer.batch_size), "500", 1, 10000, 0, CON, NULL,
     "Most orders per claim statement (one round trip to ordergate.claim_cancel). Larger: fewer "
     "round trips, longer transactions."},
    {"consumer.linger_ms", CFG_INT, S(consumer.linger_ms), "20", 0, 60000, 0, CON, NULL,
     "Milliseconds to wait for more due messages before a partial batch is claimed: adds at most "
     "this much lateness (ordergate_consumer_lateness_seconds)."},
    {"consumer.poll_ms", CFG_INT, S(consumer.poll_ms), "50", 1, 10000, 0, CON, NULL,
     "Poll timeout in milliseconds: the loop turns at least this often, which bounds how late a "
     "due partition is resumed and a SIGTERM noticed."},
    {"consumer.metrics_listen", CFG_STR, S(consumer.metrics_listen), "127.0.0.1:9464", 0, 0, 0, CON,
     NULL,
     "ADDR:PORT ([ADDR]:PORT for IPv6) of the HTTP endpoint: /metrics, /healthz (the loop turns), "
     "/readyz (database and broker reachable). Empty: no endpoint; port 0: a free port, logged "
     "as metrics_listening. In a container 0.0.0.0:9464; several instances on one host need a "
     "port each."},
    {"consumer.metrics_per_ip_limit", CFG_INT, S(consumer.metrics_per_ip_limit), "4", 1, 1000, 0,
     CON, NULL,
     "HTTP connections one peer address may hold at once; its next one is closed at once. A "
     "scrape or a probe is one short request."},
    {"consumer.metrics_max_connections", CFG_INT, S(consumer.metrics_max_connections), "64", 2,
     10000, 0, CON, NULL,
     "HTTP connections of all peers at once; must lie above consumer.metrics_per_ip_limit. The "
     "bounds limit one peer, not many: expose the port to the scraper only."},
    {"consumer.metrics_timeout_s", CFG_INT, S(consumer.metrics_timeout_s), "2", 1, 60, 0, CON, NULL,
     "Seconds after which an HTTP connection that sends nothing is closed."},
    {"consumer.health_file", CFG_STR, S(consumer.health_file), "", 0, 0, 0, CON, NULL,
     "A file the consume loop rewrites every second with its readiness, for --check-health and "
     "--check-ready: a liveness probe with no socket, which no network peer can fail. One file "
     "per process, in a writable directory (a tmpfs); removed at start and at exit. Empty: none."},
    {"consumer.health_db_call_ms", CFG_INT, S(consumer.health_db_call_ms), "30000", 0, 3600000, 0,
     CON, NULL,
     "/healthz and /readyz answer 503 while one database call of the consume loop has run "
     "longer than this many milliseconds: the loop does not turn during a call, so this is its "
     "liveness (ordergate_consumer_db_call_age_seconds). Keep it above "
     "database.statement_timeout_ms. 0: never."},
    {"consumer.busy_retry_ms", CFG_INT, S(consumer.busy_retry_ms), "10000", 0, 3600000, 0, CON,
     NULL,
     "Milliseconds an order answered busy (its row locked by another transaction) is claimed "
     "again from the local retry set, without holding back the rest of its batch, before it is "
     "re-scheduled through a delay topic. 0: re-scheduled at once."},
    {"consumer.hook_retry_ms", CFG_INT, S(consumer.hook_retry_ms), "60000", 0, 86400000, 0, CON,
     NULL,
     "Milliseconds an order whose claim a registered hook fails is claimed again locally; then "
     "its message is dead-lettered with the hook's error and the order left pending for the "
     "scanner (a payment: recorded as refused). 0: at once (docs/consumer.md, \"When a hook "
     "fails\")."},
    {"consumer.allow_nondurable", CFG_BOOL, S(consumer.allow_nondurable), "false", 0, 1, 0, CON,
     NULL,
     "Run against a server whose commits may be lost after a crash (fsync off, "
     "synchronous_commit off or local with synchronous standbys named), where a claim could "
     "vanish after its offset was committed: false refuses to start (commit_not_durable, exit "
     "1); true runs, logs it and exports ordergate_consumer_commit_durable 0."},
    {"consumer.local_due_ms", CFG_INT, S(consumer.local_due_ms), "1000", 0, 60000, 0, CON, NULL,
     "An order answered not_due that is due within this many milliseconds (a due_at rounded "
     "down, a producer's clock slightly ahead) is claimed again locally at its expire_at instead "
     "of going round a delay topic. 0: never."},
    {"consumer.level_margin_ms", CFG_INT, S(consumer.level_margin_ms), "10000", 0, 86400000, 0, CON,
     NULL,
     "A message due more than its topic's delay level plus this many milliseconds from now would "
     "pause its partition beyond the level: it is claimed at once instead and, if not due, "
     "re-scheduled onto the delay topic that fits its order's expire_at."},
    {"consumer.max_wait_ms", CFG_INT, S(consumer.max_wait_ms), "1800000", 1000, 604800000, 0, CON,
     NULL,
     "The delay level assumed when no delay topic has one (neither kafka.topic_levels nor a "
     "level in the names), in milliseconds: a message due further away than this plus "
     "consumer.level_margin_ms is claimed at once, and a re-schedule is due at most this far "
     "ahead."},
    {"consumer.claim_sessions", CFG_INT, S(consumer.claim_sessions), "2", 1, 8, 0, CON, NULL,
     "Database sessions one batch's claim of cancels is split across at once, by a hash of the "
     "order number (an order's copies always in one part), when the batch has at least 64 "
     "cancels to claim: in a burst the claim's backend, not the consumer, is the limit. Each "
     "session past the first is one more connection (size a pooler's pool for it). 1: one "
     "session, no threads."},
    {"outbox.enabled", CFG_BOOL, S(outbox.enabled), "true", 0, 1, 0, CON, NULL,
     "Run the outbox relay in this consumer: it publishes the rows of ordergate.outbox (written "
     "with each winning transition) to Kafka, at least once, keyed by order number; several "
     "instances share the rows (SKIP LOCKED). false: leave them to another relay or reader."},
    {"outbox.topic", CFG_STR, S(outbox.topic), "ordergate.events", 0, 0, 0, CON | CTL, NULL,
     "Topic of the order_paid and order_cancelled events."},
    {"outbox.refund_topic", CFG_STR, S(outbox.refund_topic), "ordergate.refunds", 0, 0, 0,
     CON | CTL, NULL, "Topic of the refund_requested events (a late payment, auto_refund)."},
    {"outbox.alert_topic", CFG_STR, S(outbox.alert_topic), "ordergate.alerts", 0, 0, 0, CON | CTL,
     NULL, "Topic of the reconciliation_alert events (manual_review exceptions)."},
    {"outbox.batch", CFG_INT, S(outbox.batch), "500", 1, 10000, 0, CON, NULL,
     "Outbox rows per relay step. A growing backlog shows in ordergate_relay_outbox_backlog "
     "(alert OrdergateOutboxBacklog)."},
    {"outbox.interval_ms", CFG_INT, S(outbox.interval_ms), "200", 1, 600000, 0, CON, NULL,
     "Milliseconds of pause between relay steps while the outbox is empty."},
    {"scanner.grace_s", CFG_INT, S(scanner.grace_s), "60", 0, 86400, 0, SCN, NULL,
     "Seconds past expire_at before the scanner takes an order: the consumer gets the first "
     "chance, and what the scanner still cancels is counted as missed by the consumer (alert "
     "OrdergateScannerMissedOrders). Scanner alone, without Kafka: 0."},
    {"scanner.batch_size", CFG_INT, S(scanner.batch_size), "500", 1, 10000, 0, SCN, NULL,
     "Orders per claim statement of a sweep, read in keyset pages of the partial index "
     "orders_overdue_idx."},
    {"scanner.pause_ms", CFG_INT, S(scanner.pause_ms), "50", 0, 600000, 0, SCN, NULL,
     "Milliseconds of pause between two batches, so that a large sweep never hogs the database."},
    {"scanner.max_orders", CFG_INT, S(scanner.max_orders), "0", 0, INT_MAX, 0, SCN, NULL,
     "Most orders one run claims; what a capped run leaves is taken by the next. 0: no cap."},
    {"scanner.max_seconds", CFG_INT, S(scanner.max_seconds), "0", 0, 86400, 0, SCN, NULL,
     "Longest run in seconds; keep it below the schedule's interval. 0: no cap."},
    {"scanner.every_s", CFG_INT, S(scanner.every_s), "0", 0, 86400, 0, SCN, NULL,
     "0: one run per invocation (cron, a systemd timer, a Kubernetes CronJob). N: a run every N "
     "seconds, start to start, in one process until SIGTERM, for hosts without a scheduler."},
    {"scanner.workers", CFG_INT, S(scanner.workers), "1", 1, 16, 0, SCN, NULL,
     "Database sessions that claim pages in parallel. 1: the run's own session reads and claims; "
     "N > 1: it reads the pages and N more sessions claim them, for a large backlog after an "
     "outage. More sessions than the database has cores only queue on hot stock rows."},
    {"scanner.max_skip_s", CFG_INT, S(scanner.max_skip_s), "0", 0, 604800, 0, SCN, NULL,
     "A run skipped because the sweep lease or lock is held exits 4 (alert "
     "OrdergateScannerNotSweeping) once no run has swept for longer than this many seconds: "
     "whatever holds it does not sweep. 0: three intervals, 3 x scanner.every_s, or 180 when "
     "that is 0 (a one-minute schedule); set about three times your timer's interval."},
    {"scanner.busy_retry_ms", CFG_INT, S(scanner.busy_retry_ms), "5000", 0, 600000, 0, SCN, NULL,
     "Milliseconds for which orders answered busy (their row locked by another transaction) are "
     "claimed again, with backoff, at the end of a run; what is still locked then is left to the "
     "next run. 0: not retried."},
    {"scanner.lease_s", CFG_INT, S(scanner.lease_s), "60", 1, 3600, 0, SCN, NULL,
     "Seconds the sweep lease (a row, so it works behind a transaction pooler) lasts past a "
     "run's start and each batch, plus scanner.pause_ms: keep it above the longest batch. A run "
     "that died keeps later runs skipped this long; the next one reports it crashed."},
    {"scanner.textfile_path", CFG_STR, S(scanner.textfile_path), "", 0, 0, 0, SCN, NULL,
     "Prometheus textfile written after each run (temporary file, then rename) for "
     "node_exporter's textfile collector. Empty: none."},
    {"scanner.reconcile_window_s", CFG_INT, S(scanner.reconcile_window_s), "604800", 0, 315360000,
     0, SCN, NULL,
     "--reconcile without --since checks the orders, payments and exceptions created in the "
     "last this many seconds; the stock and coupon invariants are always checked whole. Keep it "
     "above refund_confirm_seconds and manual_review_max_age_seconds (database settings). 0: "
     "the whole database."},
    {"console.listen", CFG_STR, S(console.listen), "127.0.0.1:8470", 0, 0, 0, CNS, NULL,
     "ADDR:PORT ([ADDR]:PORT for IPv6) of ordergate-console, the operator's web console and its "
     "JSON API (and its own /metrics, /healthz). Loopback by default: put it behind a reverse "
     "proxy that terminates TLS, or give it console.tls_cert_file; an address other than "
     "loopback without TLS is refused unless console.allow_plain_http is true. Port 0: a free "
     "port, logged as console_listening."},
    {"console.tls_cert_file", CFG_STR, S(console.tls_cert_file), "", 0, 0, 0, CNS, NULL,
     "PEM certificate (chain) the console serves HTTPS with, read at start; with "
     "console.tls_key_file. Empty: plain HTTP (loopback, or behind a TLS proxy)."},
    {"console.tls_key_file", CFG_STR, S(console.tls_key_file), "", 0, 0, 0, CNS, NULL,
     "PEM private key of console.tls_cert_file, read at start and never logged."},
    {"console.allow_plain_http", CFG_BOOL, S(console.allow_plain_http), "false", 0, 1, 0, CNS, NULL,
     "Serve plain HTTP on an address other than loopback (a proxy on another host that "
     "terminates TLS, on a network you trust). false: such a start is refused (exit 2), so "
     "passwords and session cookies never cross a network in clear by mistake."},
    {"console.session_idle_s", CFG_INT, S(console.session_idle_s), "900", 30, 86400, 0, CNS, NULL,
     "Seconds after which a console session nobody used is closed, with its database "
     "connection; the person logs in again."},
    {"console.max_sessions", CFG_INT, S(console.max_sessions), "32", 1, 1000, 0, CNS, NULL,
     "Console sessions at once. Each holds one database connection of its person's login, so "
     "keep it within the server's max_connections; a login beyond it is answered 503."},
    {"console.login_failures", CFG_INT, S(console.login_failures), "5", 1, 1000, 0, CNS, NULL,
     "Failed logins one peer address may make per minute; further attempts are answered 429 "
     "without reaching the database until the minute has passed."},
    {"console.max_connections", CFG_INT, S(console.max_connections), "64", 2, 10000, 0, CNS, NULL,
     "HTTP connections of all peers at once (at most 8 from one address)."},
    {"console.timeout_s", CFG_INT, S(console.timeout_s), "30", 1, 600, 0, CNS, NULL,
     "Seconds after which an HTTP connection that sends nothing is closed."},
};

#undef S
#undef CON
#undef SCN
#undef CTL
#undef CNS

/* The groups of the table, in its order. */
static const struct cfg_section_info cfg_sections[] = {
    {"", "Settings of every program."},
    {"database", "PostgreSQL 15 with the ordergate schema (apply it first: ordergatectl migrate). "
                 "Every program connects with these settings."},
    {"kafka", "The delay topics the consumer reads, the topics it and its relay write, and the "
              "Kafka client. Unused by the scanner."},
    {"consumer", "ordergate-consumer's claim loop and its HTTP endpoint."},
    {"outbox", "The relay inside ordergate-consumer that publishes ordergate.outbox rows to "
               "Kafka."},
    {"scanner", "ordergate-scanner: the fallback sweep (the primary trigger when run without "
                "Kafka) and --reconcile."},
    {"console", "ordergate-console: the operator's web console and its JSON API "
                "(docs/console.md)."},
};

#define CFG_NPARAMS (sizeof(cfg_params) / sizeof(cfg_params[0]))

_Static_assert(CFG_NPARAMS <= CFG_MAX_SETTINGS, "raise CFG_MAX_SETTINGS in cfg.h");

static const char *const cfg_type_names[] = {"string", "int", "bool", "strlist"};

static const struct cfg_param *cfg_find(const char *name)
{
    for (size_t i = 0; i < CFG_NPARAMS; i++)
        if (strcmp(cfg_params[i].name, name) == 0)
            return &cfg_params[i];
    return NULL;
}

static void cfg_strlist_free(char ***list, size_t *n)
{
    for (size_t i = 0; *list != NULL && i < *n; i++)
        free((*list)[i]);
    free(*list);
    *list = NULL;
    *n = 0;
}

static enum og_status cfg_set_str(char **slot, const char *value, struct og_error *err)
{
    char *copy = strdup(value);

    if (copy == NULL)
        return og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
    free(*slot);
    *slot = copy;
    return OG_OK;
}

static enum og_status cfg_refuse(struct og_error *err, const struct cfg_param *p, const char *fmt,
                                 ...) __attribute__((format(printf, 3, 4)));

/* Records "<setting>: <problem>" as a configuration error about p. */
static enum og_status cfg_refuse(struct og_error *err, const struct cfg_param *p, const char *fmt,
                                 ...)
{
    char detail[400];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    og_error_set(err, OG_ERR_CONFIG, false, "%s: %s", p->name, detail);
    og_error_setting(err, p->name);
    return OG_ERR_CONFIG;
}

/* An HTTP listen address: "" (none), or ADDR:PORT, [IPV6]:PORT or :PORT with PORT 0..65535 (0:
 * any free port). Only the form is checked here; the address is resolved when the endpoint
 * starts. */
static enum og_status cfg_validate_listen(const struct cfg_param *p, const char *value,
                                          struct og_error *err)
{
    const char *port;
    int64_t n;

    if (*value == '\0')
        return OG_OK;
    if (value[0] == '[') {
        const char *close = strchr(value, ']');
        if (close == NULL || close[1] != ':')
            return cfg_refuse(err, p, "expected [ADDR]:PORT, got \"%.64s\"", value);
        port = close + 2;
    } else {
        const char *colon = strrchr(value, ':');
        if (colon == NULL)
            return cfg_refuse(err, p, "expected ADDR:PORT (e.g. 127.0.0.1:9464), got \"%.64s\"",
                              value);
        if (memchr(value, ':', (size_t)(colon - value)) != NULL)
            return cfg_refuse(err, p, "write an IPv6 address as [ADDR]:PORT, got \"%.64s\"", value);
        port = colon + 1;
    }
    if (parse_int64(NULL, port, 0, 65535, &n, NULL) != OG_OK)
        return cfg_refuse(err, p,
                          "port: expected an integer in 0..65535, got \"%.64s\" in \"%.64s\"", port,
                          value);
    return OG_OK;
}

static enum og_status cfg_validate_str(const struct cfg_param *p, const char *value,
                                       struct og_error *err)
{
    if (strcmp(p->name, "log_level") == 0 && log_level_parse(value) < 0)
        return cfg_refuse(err, p, "expected one of debug, info, warn, error, got \"%.64s\"", value);
    if (strcmp(p->name, "database.pool_mode") == 0 && strcmp(value, "session") != 0 &&
        strcmp(value, "transaction") != 0)
        return cfg_refuse(err, p, "expected session or transaction, got \"%.64s\"", value);
    if (strcmp(p->name, "kafka.properties") == 0 && strchr(value, '=') == NULL)
        return cfg_refuse(err, p, "expected name=value, got \"%.64s\"", value);
    if (strcmp(p->name, "consumer.metrics_listen") == 0 || strcmp(p->name, "console.listen") == 0)
        return cfg_validate_listen(p, value, err);
    return OG_OK;
}

/* Applies a string value to one parameter (defaults, flags and file strings
 * all pass through here, so they are validated alike). */
static enum og_status cfg_apply(struct og_config *cfg, const struct cfg_param *p, const char *value,
                                struct og_error *err)
{
    char *base = (char *)cfg;
    enum og_status st;
    int64_t v = 0;

    switch (p->type) {
    case CFG_STR:
        st = cfg_validate_str(p, value, err);
        if (st != OG_OK)
            return st;
        return cfg_set_str((char **)(base + p->offset), value, err);
    case CFG_INT:
        if (parse_int64(p->name, value, p->min, p->max, &v, err) != OG_OK) {
            /* The command line's refusal, word for word, as a configuration error. */
            if (err != NULL)
                err->status = OG_ERR_CONFIG;
            og_error_setting(err, p->name);
            return OG_ERR_CONFIG;
        }
        *(int *)(base + p->offset) = (int)v;
        return OG_OK;
    case CFG_BOOL:
        if (strcmp(value, "true") == 0 || strcmp(value, "1") == 0 || strcmp(value, "yes") == 0)
            *(int *)(base + p->offset) = 1;
        else if (strcmp(value, "false") == 0 || strcmp(value, "0") == 0 || strcmp(value, "no") == 0)
            *(int *)(base + p->offset) = 0;
        else
            return cfg_refuse(err, p, "expected true or false, got \"%.64s\"", value);
        return OG_OK;
    case CFG_STRLIST: {
        char ***list = (char ***)(base + p->offset);
        size_t *n = &cfg->kafka.properties_n;
        char **grown;

        if (*value == '\0')
            return OG_OK;
        st = cfg_validate_str(p, value, err);
        if (st != OG_OK)
            return st;
        grown = realloc(*list, (*n + 1) * sizeof(**list));
        if (grown == NULL)
            return og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
        *list = grown;
        grown[*n] = strdup(value);
        if (grown[*n] == NULL)
            return og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
        (*n)++;
        return OG_OK;
    }
    }
    return og_error_set(err, OG_ERR_INTERNAL, false, "%s: unknown setting type", p->name);
}

enum og_status cfg_init(struct og_config *cfg, struct og_error *err)
{
    enum og_status st = OG_OK;

    memset(cfg, 0, sizeof(*cfg));
    for (size_t i = 0; i < CFG_NPARAMS && st == OG_OK; i++)
        st = cfg_apply(cfg, &cfg_params[i], cfg_params[i].def, err);
    return st;
}

/* Applies value to the setting `name` and records where it came from (flag, or neither). */
static enum og_status cfg_set_from(struct og_config *cfg, const char *name, const char *value,
                                   const char *flag, struct og_error *err)
{
    const struct cfg_param *p = cfg_find(name);

    if (p == NULL)
        return og_error_set(err, OG_ERR_CONFIG, false, "unknown setting '%s'", name);
    if (value == NULL)
        return cfg_refuse(err, p, "missing value");
    /* Recorded first, so that a refusal of this value is located at the flag (the program
     * then stops; the refused value's origin is not needed after that). */
    cfg->source[p - cfg_params] = (struct cfg_source){0, flag};
    return cfg_apply(cfg, p, value, err);
}

enum og_status cfg_set(struct og_config *cfg, const char *name, const char *value,
                       struct og_error *err)
{
    return cfg_set_from(cfg, name, value, NULL, err);
}

enum og_status cfg_set_flag(struct og_config *cfg, const char *name, const char *value,
                            const char *flag, struct og_error *err)
{
    return cfg_set_from(cfg, name, value, flag, err);
}

const char *cfg_error_format(const struct og_config *cfg, const struct og_error *err, char *buf,
                             size_t size)
{
    const struct cfg_param *p = err->setting[0] != '\0' ? cfg_find(err->setting) : NULL;
    const struct cfg_source *src = cfg != NULL && p != NULL ? &cfg->source[p - cfg_params] : NULL;

    if (src != NULL && src->flag != NULL)
        snprintf(buf, size, "--%s: %s", src->flag, err->msg);
    else if (src != NULL && src->line > 0 && cfg->source_path != NULL)
        snprintf(buf, size, "%s:%d: %s", cfg->source_path, src->line, err->msg);
    else
        snprintf(buf, size, "%s", err->msg);
    return buf;
}

bool cfg_setting_info(size_t i, struct cfg_setting_info *info)
{
    const struct cfg_param *p;

    if (i >= CFG_NPARAMS)
        return false;
    p = &cfg_params[i];
    *info = (struct cfg_setting_info){.name = p->name,
                                      .type = cfg_type_names[p->type],
                                      .def = p->def,
                                      .min = p->min,
                                      .max = p->max,
                                      .secret = p->secret != 0,
                                      .progs = p->progs,
                                      .env = p->env,
                                      .description = p->description};
    return true;
}

bool cfg_section_info(size_t i, struct cfg_section_info *info)
{
    if (i >= sizeof(cfg_sections) / sizeof(cfg_sections[0]))
        return false;
    *info = cfg_sections[i];
    return true;
}

/* Every group and setting in the file must be known: a typo such as
 * "batchsize" would otherwise be silently ignored and the default used. */
static enum og_status cfg_check_unknown(config_setting_t *group, const char *prefix,
                                        const char *path, struct og_error *err)
{
    int n = config_setting_length(group);

    for (int i = 0; i < n; i++) {
        config_setting_t *s = config_setting_get_elem(group, (unsigned)i);
        char full[256];

        if ((size_t)snprintf(full, sizeof(full), "%s%s%s", prefix, *prefix ? "." : "",
                             config_setting_name(s)) >= sizeof(full))
            return og_error_set(err, OG_ERR_CONFIG, false, "%s:%d: unknown setting '%.64s...'",
                                path, config_setting_source_line(s), full);
        if (config_setting_is_group(s)) {
            enum og_status st = cfg_check_unknown(s, full, path, err);
            if (st != OG_OK)
                return st;
        } else if (cfg_find(full) == NULL) {
            return og_error_set(err, OG_ERR_CONFIG, false, "%s:%d: unknown setting '%s'", path,
                                config_setting_source_line(s), full);
        }
    }
    return OG_OK;
}

/* Reads one setting from the file into text form and applies it. The caller has recorded the
 * setting's line, so errors name only the setting. */
static enum og_status cfg_load_param(struct og_config *cfg, const struct cfg_param *p,
                                     config_setting_t *s, struct og_error *err)
{
    char num[32];
    int type = config_setting_type(s);
    enum og_status st = OG_OK;

    if (p->type == CFG_STRLIST || (p->type == CFG_STR && strcmp(p->name, "kafka.topics") == 0 &&
                                   (type == CONFIG_TYPE_ARRAY || type == CONFIG_TYPE_LIST))) {
        /* kafka.properties is a list of "name=value"; kafka.topics may be a
         * list too, stored joined with commas (as long as the list is: nothing is cut). */
        char *joined = NULL;
        size_t used = 0, need = 1;
        int n;

        if (type != CONFIG_TYPE_ARRAY && type != CONFIG_TYPE_LIST)
            return cfg_refuse(err, p, "expected a list of strings");
        if (p->type == CFG_STRLIST)
            cfg_strlist_free(&cfg->kafka.properties, &cfg->kafka.properties_n);
        n = config_setting_length(s);
        for (int i = 0; i < n; i++) {
            const char *v = config_setting_get_string_elem(s, i);
            if (v == NULL)
                return cfg_refuse(err, p, "expected a list of strings");
            need += strlen(v) + 1;
        }
        if (p->type == CFG_STR) {
            joined = malloc(need);
            if (joined == NULL)
                return og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
            joined[0] = '\0';
        }
        for (int i = 0; i < n && st == OG_OK; i++) {
            const char *v = config_setting_get_string_elem(s, i);
            if (p->type == CFG_STRLIST) {
                st = cfg_apply(cfg, p, v, err);
            } else {
                used += (size_t)snprintf(joined + used, need - used, "%s%s", i ? "," : "", v);
            }
        }
        if (st == OG_OK && p->type == CFG_STR)
            st = cfg_apply(cfg, p, joined, err);
        free(joined);
    } else if (p->type == CFG_STR) {
        if (type != CONFIG_TYPE_STRING)
            return cfg_refuse(err, p, "expected a string");
        st = cfg_apply(cfg, p, config_setting_get_string(s), err);
    } else if (p->type == CFG_INT) {
        if (type != CONFIG_TYPE_INT && type != CONFIG_TYPE_INT64)
            return cfg_refuse(err, p, "expected an integer in %ld..%ld", p->min, p->max);
        snprintf(num, sizeof(num), "%lld", config_setting_get_int64(s));
        st = cfg_apply(cfg, p, num, err);
    } else {
        if (type != CONFIG_TYPE_BOOL)
            return cfg_refuse(err, p, "expected true or false");
        st = cfg_apply(cfg, p, config_setting_get_bool(s) ? "true" : "false", err);
    }
    return st;
}

/* libconfig (1.5) stores an integer literal without the L suffix in an int, without a word:
 * "batch_size = 4294967796" reads as 500, "lease_s = 4294967297" as 1, 0x100000001 as 1. So
 * before any value is used, the file's text (and that of every file it includes) is read
 * here once more, and every such literal is taken in full: one that does not fit an int is
 * refused like any value out of bounds, naming its setting ("expected an integer in
 * 1..10000, got "4294967796""). Comments and strings are skipped as libconfig does. */
#define CFG_LEX_MAX_DEPTH 10          /* @include nesting, as libconfig's own bound */
#define CFG_LEX_MAX_BYTES (16u << 20) /* a configuration file is small; more is refused */

struct cfg_lex {
    struct og_config *cfg;
    const char *top;   /* the file cfg_load read: its lines are recorded per setting */
    char group[512];   /* the dotted path of the group (or list) the scan is in */
    size_t stack[32];  /* group's length before each open brace or bracket */
    int depth;         /* of stack */
    char pending[128]; /* the name of the setting whose value comes next */
    char last[128];    /* the last name read */
};

static enum og_status cfg_lex_file(struct cfg_lex *lx, const char *path, int nesting,
                                   struct og_error *err);

/* Whether the literal t[0..n) is an integer libconfig stores wrapped: decimal outside int, or
 * hexadecimal above INT_MAX, in both cases without the L suffix. */
static bool cfg_lex_wraps(const char *t, size_t n)
{
    bool hex = n > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X');
    size_t i = hex ? 2 : (t[0] == '-' || t[0] == '+');
    int64_t limit = t[0] == '-' ? (int64_t)INT_MAX + 1 : INT_MAX;
    int64_t v = 0;

    if (i >= n)
        return false;
    for (; i < n; i++) {
        int d;
        if (hex && t[i] >= 'a' && t[i] <= 'f')
            d = t[i] - 'a' + 10;
        else if (hex && t[i] >= 'A' && t[i] <= 'F')
            d = t[i] - 'A' + 10;
        else if (t[i] >= '0' && t[i] <= '9')
            d = t[i] - '0';
        else
            return false; /* a float, or with the L suffix: stored in full */
        v = v * (hex ? 16 : 10) + d;
        if (v > limit) {
            /* Too large already; a float or L suffix further on is stored in full, though. */
            for (i++; i < n; i++)
                if (!(t[i] >= '0' && t[i] <= '9') &&
                    !(hex && ((t[i] >= 'a' && t[i] <= 'f') || (t[i] >= 'A' && t[i] <= 'F'))))
                    return false;
            return true;
        }
    }
    return false;
}

/* A wrapped literal t[0..n) at path:line: the error, about its setting when it is one. */
static enum og_status cfg_lex_refuse(struct cfg_lex *lx, const char *path, int line, const char *t,
                                     size_t n, struct og_error *err)
{
    char name[sizeof(lx->group) + sizeof(lx->pending) + 1];
    const struct cfg_param *p;

    snprintf(name, sizeof(name), "%s%s%s", lx->group, *lx->group && *lx->pending ? "." : "",
             lx->pending);
    p = cfg_find(name);
    if (p != NULL && strcmp(path, lx->top) == 0) {
        lx->cfg->source[p - cfg_params] = (struct cfg_source){line, NULL};
        if (p->type == CFG_INT)
            return cfg_refuse(err, p, "expected an integer in %ld..%ld, got \"%.*s\"", p->min,
                              p->max, (int)(n < 64 ? n : 64), t);
        return cfg_refuse(err, p, "integer %.*s does not fit in 32 bits", (int)(n < 64 ? n : 64),
                          t);
    }
    return og_error_set(err, OG_ERR_CONFIG, false,
                        "%s:%d: %s%sinteger %.*s does not fit in 32 bits", path, line, name,
                        *name ? ": " : "", (int)(n < 64 ? n : 64), t);
}

static bool cfg_lex_name_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '*';
}

/* Scans text (NUL-terminated) of path. */
static enum og_status cfg_lex_text(struct cfg_lex *lx, const char *path, const char *text,
                                   int nesting, struct og_error *err)
{
    const char *c = text;
    int line = 1;

    while (*c != '\0') {
        if (*c == '\n') {
            line++;
            c++;
        } else if (*c == '#' || (c[0] == '/' && c[1] == '/')) {
            while (*c != '\0' && *c != '\n')
                c++;
        } else if (c[0] == '/' && c[1] == '*') {
            for (c += 2; *c != '\0' && !(c[0] == '*' && c[1] == '/'); c++)
                line += *c == '\n';
            c += *c != '\0' ? 2 : 0;
        } else if (*c == '"') {
            for (c++; *c != '\0' && *c != '"'; c++) {
                line += *c == '\n';
                if (*c == '\\' && c[1] != '\0')
                    c++;
            }
            c += *c != '\0';
        } else if (strncmp(c, "@include", 8) == 0) {
            char inc[4096];
            size_t len = 0;
            enum og_status st;

            for (c += 8; *c == ' ' || *c == '\t'; c++)
                ;
            if (*c != '"')
                continue; /* libconfig has refused it already */
            for (c++; *c != '\0' && *c != '"' && *c != '\n'; c++) {
                if (*c == '\\' && c[1] != '\0')
                    c++;
                if (len + 1 < sizeof(inc))
                    inc[len++] = *c;
            }
            inc[len] = '\0';
            c += *c == '"';
            st = cfg_lex_file(lx, inc, nesting + 1, err);
            if (st != OG_OK)
                return st;
        } else if ((*c >= '0' && *c <= '9') || ((*c == '-' || *c == '+' || *c == '.') &&
                                                ((c[1] >= '0' && c[1] <= '9') || c[1] == '.'))) {
            const char *t = c;
            for (c++;
                 (*c >= '0' && *c <= '9') || (*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') ||
                 *c == '.' || ((*c == '-' || *c == '+') && (c[-1] == 'e' || c[-1] == 'E'));
                 c++)
                ;
            if (cfg_lex_wraps(t, (size_t)(c - t)))
                return cfg_lex_refuse(lx, path, line, t, (size_t)(c - t), err);
        } else if (cfg_lex_name_char(*c)) {
            size_t len = 0;
            for (; cfg_lex_name_char(*c); c++)
                if (len + 1 < sizeof(lx->last))
                    lx->last[len++] = *c;
            lx->last[len] = '\0';
        } else if (*c == '=' || *c == ':') {
            snprintf(lx->pending, sizeof(lx->pending), "%s", lx->last);
            c++;
        } else if (*c == '{' || *c == '(' || *c == '[') {
            size_t len = strlen(lx->group);
            if (lx->depth < (int)(sizeof(lx->stack) / sizeof(lx->stack[0])))
                lx->stack[lx->depth] = len;
            lx->depth++;
            if (*lx->pending != '\0')
                snprintf(lx->group + len, sizeof(lx->group) - len, "%s%s", len ? "." : "",
                         lx->pending);
            lx->pending[0] = '\0';
            c++;
        } else if (*c == '}' || *c == ')' || *c == ']') {
            if (lx->depth > 0 && --lx->depth < (int)(sizeof(lx->stack) / sizeof(lx->stack[0])))
                lx->group[lx->stack[lx->depth]] = '\0';
            lx->pending[0] = '\0';
            c++;
        } else {
            c++;
        }
    }
    return OG_OK;
}

static enum og_status cfg_lex_file(struct cfg_lex *lx, const char *path, int nesting,
                                   struct og_error *err)
{
    FILE *f;
    char *text = NULL;
    size_t len = 0, cap = 0;
    enum og_status st = OG_OK;

    if (nesting > CFG_LEX_MAX_DEPTH)
        return og_error_set(err, OG_ERR_CONFIG, false, "%s: @include nested too deeply", path);
    f = fopen(path, "r");
    if (f == NULL)
        return og_error_set(err, OG_ERR_CONFIG, false, "%s: cannot open: %s", path,
                            strerror(errno));
    for (;;) {
        size_t got;
        if (cap - len < 4096) {
            char *grown;
            if (cap >= CFG_LEX_MAX_BYTES) {
                st = og_error_set(err, OG_ERR_CONFIG, false, "%s: larger than %u bytes", path,
                                  CFG_LEX_MAX_BYTES);
                goto out;
            }
            cap = cap ? cap * 2 : 16384;
            grown = realloc(text, cap + 1);
            if (grown == NULL) {
                st = og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
                goto out;
            }
            text = grown;
        }
        got = fread(text + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
    }
    if (ferror(f)) {
        st = og_error_set(err, OG_ERR_CONFIG, false, "%s: cannot read: %s", path, strerror(errno));
        goto out;
    }
    text[len] = '\0';
    st = cfg_lex_text(lx, path, text, nesting, err);
out:
    fclose(f);
    free(text);
    return st;
}

enum og_status cfg_load(struct og_config *cfg, const char *path, struct og_error *err)
{
    config_t lc;
    enum og_status st = OG_OK;
    FILE *f;

    config_init(&lc);
    free(cfg->source_path);
    cfg->source_path = strdup(path);
    if (cfg->source_path == NULL) {
        st = og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
        goto out;
    }
    f = fopen(path, "r");
    if (f == NULL) {
        st = og_error_set(err, OG_ERR_CONFIG, false, "%s: cannot open: %s", path, strerror(errno));
        goto out;
    }
    fclose(f);
    if (config_read_file(&lc, path) != CONFIG_TRUE) {
        st = og_error_set(err, OG_ERR_CONFIG, false, "%s:%d: %s",
                          config_error_file(&lc) ? config_error_file(&lc) : path,
                          config_error_line(&lc), config_error_text(&lc));
        goto out;
    }
    st = cfg_check_unknown(config_root_setting(&lc), "", path, err);
    if (st == OG_OK) {
        struct cfg_lex lx = {.cfg = cfg, .top = path};
        st = cfg_lex_file(&lx, path, 0, err);
    }
    for (size_t i = 0; i < CFG_NPARAMS && st == OG_OK; i++) {
        config_setting_t *s = config_lookup(&lc, cfg_params[i].name);
        if (s != NULL) {
            cfg->source[i] = (struct cfg_source){config_setting_source_line(s), NULL};
            st = cfg_load_param(cfg, &cfg_params[i], s, err);
        }
    }
out:
    config_destroy(&lc);
    return st;
}

enum og_status cfg_apply_env(struct og_config *cfg, struct og_error *err)
{
    enum og_status st = OG_OK;

    for (size_t i = 0; i < CFG_NPARAMS && st == OG_OK; i++) {
        const struct cfg_param *p = &cfg_params[i];
        const char *v = p->env != NULL ? getenv(p->env) : NULL;
        char **slot = (char **)((char *)cfg + p->offset);

        /* Only string settings have a fallback; the file or a flag that set the default itself
         * is not told apart from no setting at all. */
        if (v != NULL && *v != '\0' && p->type == CFG_STR && strcmp(*slot, p->def) == 0)
            st = cfg_set_str(slot, v, err);
    }
    return st;
}

struct db_session cfg_db_session(const struct og_config *cfg)
{
    return (struct db_session){cfg->database.lock_timeout_ms, cfg->database.statement_timeout_ms,
                               strcmp(cfg->database.pool_mode, "transaction") == 0};
}

enum og_status cfg_db_password(const struct og_config *cfg, char **password, struct og_error *err)
{
    enum og_status st = db_password_read(cfg->database.password_file, password, err);

    if (st != OG_OK)
        og_error_setting(err, "database.password_file");
    return st;
}

struct db_retry cfg_db_retry(const struct og_config *cfg)
{
    return (struct db_retry){cfg->database.retry_max, cfg->database.retry_base_ms,
                             cfg->database.retry_cap_ms};
}

enum og_status cfg_db_open(const struct og_config *cfg, const char *app_name,
                           const struct cfg_db_open_opts *opts, volatile sig_atomic_t *stop,
                           struct db **out, struct og_error *err)
{
    struct db_retry retry = cfg_db_retry(cfg);
    struct db_session session = cfg_db_session(cfg);
    enum og_status st;

    if (opts != NULL && opts->max_attempts > 0 && retry.max_attempts > opts->max_attempts)
        retry.max_attempts = opts->max_attempts;
    if (opts != NULL && opts->no_bounds)
        session.lock_timeout_ms = session.statement_timeout_ms = 0;
    st = db_new_passfile(cfg->database.conninfo, cfg->database.password_file, app_name, &retry,
                         stop, out, err);
    if (st == OG_OK)
        db_set_session(*out, &session, NULL); /* not connected yet: cannot fail */
    return st;
}

void cfg_dump(const struct og_config *cfg, FILE *out)
{
    const char *base = (const char *)cfg;

    for (size_t i = 0; i < CFG_NPARAMS; i++) {
        const struct cfg_param *p = &cfg_params[i];
        switch (p->type) {
        case CFG_STR: {
            const char *v = *(char *const *)(base + p->offset);
            fprintf(out, "%s = \"%s\"\n", p->name, p->secret && *v ? "********" : v);
            break;
        }
        case CFG_INT:
            fprintf(out, "%s = %d\n", p->name, *(const int *)(base + p->offset));
            break;
        case CFG_BOOL:
            fprintf(out, "%s = %s\n", p->name, *(const int *)(base + p->offset) ? "true" : "false");
            break;
        case CFG_STRLIST:
            /* Property values may carry SASL passwords: print names only. */
            fprintf(out, "%s = [", p->name);
            for (size_t j = 0; j < cfg->kafka.properties_n; j++) {
                const char *eq = strchr(cfg->kafka.properties[j], '=');
                fprintf(out, "%s\"%.*s=...\"", j ? ", " : "", (int)(eq - cfg->kafka.properties[j]),
                        cfg->kafka.properties[j]);
            }
            fprintf(out, "]\n");
            break;
        }
    }
}

void cfg_free(struct og_config *cfg)
{
    char *base = (char *)cfg;

    if (cfg == NULL)
        return;
    for (size_t i = 0; i < CFG_NPARAMS; i++) {
        if (cfg_params[i].type == CFG_STR) {
            char **slot = (char **)(base + cfg_params[i].offset);
            free(*slot);
            *slot = NULL;
        }
    }
    cfg_strlist_free(&cfg->kafka.properties, &cfg->kafka.properties_n);
    free(cfg->source_path);
    cfg->source_path = NULL;
}

const char *cfg_setting_value(const struct og_config *cfg, size_t i, size_t j, char *buf,
                              size_t size)
{
    const char *field = i < CFG_NPARAMS ? (const char *)cfg + cfg_params[i].offset : NULL;

    if (field == NULL || (j > 0 && cfg_params[i].type != CFG_STRLIST))
        return NULL;
    switch (cfg_params[i].type) {
    case CFG_STR:
        return *(char *const *)field;
    case CFG_INT:
        snprintf(buf, size, "%d", *(const int *)field);
        return buf;
    case CFG_BOOL:
        return *(const int *)field ? "true" : "false";
    case CFG_STRLIST:
        return j < cfg->kafka.properties_n ? cfg->kafka.properties[j] : NULL;
    }
    return NULL;
}
