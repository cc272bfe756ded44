#include "common/kafka.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/kafka_outage.h"
#include "common/log.h"
#include "common/parse.h"

/* Producers' librdkafka statistics: how soon kafka_broker_up follows a broker's return. */
#define KAFKA_STATS_INTERVAL_MS "1000"

/* Properties kafka.properties may not set, and why (see kafka.h). */
static const struct {
    const char *name;
    const char *refused_value; /* NULL: any value is refused */
    const char *why;
} kafka_reserved[] = {
    {"bootstrap.servers", NULL, "use kafka.brokers (or --brokers)"},
    {"metadata.broker.list", NULL, "use kafka.brokers (or --brokers)"},
    {"group.id", NULL, "use kafka.group (or --group)"},
    {"group.instance.id", NULL, "use kafka.group_instance_id (or --group-instance-id)"},
    {"queued.max.messages.kbytes", NULL, "use kafka.queued_max_kbytes"},
    {"enable.auto.offset.store", NULL,
     "offsets are stored by ordergate only after the database commit"},
    {"enable.auto.commit", "false",
     "the offsets ordergate stores are committed by the background auto-commit"},
    {"enable.idempotence", "false", "ordergate's producers are always idempotent"},
};

/* kafka.properties go to every handle a process creates, consumers and
 * producers alike (one list is simpler to operate than two). librdkafka
 * accepts a property of the other role on any handle but logs a CONFWARN line
 * at every start ("is a consumer property and will be ignored by this
 * producer instance"), so each handle skips the properties that only the
 * other role reads: the C and P properties of librdkafka's CONFIGURATION.md
 * (2.0), global and topic level. A name not listed here is set everywhere. */
static const char *const kafka_consumer_only[] = {
    "auto.commit.enable",
    "auto.commit.interval.ms",
    "auto.offset.reset",
    "check.crcs",
    "consume.callback.max.messages",
    "coordinator.query.interval.ms",
    "enable.auto.commit",
    "enable.auto.offset.store",
    "enable.partition.eof",
    "fetch.error.backoff.ms",
    "fetch.max.bytes",
    "fetch.message.max.bytes",
    "fetch.min.bytes",
    "fetch.wait.max.ms",
    "group.id",
    "group.instance.id",
    "group.protocol.type",
    "heartbeat.interval.ms",
    "isolation.level",
    "max.partition.fetch.bytes",
    "max.poll.interval.ms",
    "offset.store.method",
    "offset.store.path",
    "offset.store.sync.interval.ms",
    "partition.assignment.strategy",
    "queued.max.messages.kbytes",
    "queued.min.messages",
    "session.timeout.ms",
};

static const char *const kafka_producer_only[] = {
    "acks",
    "batch.num.messages",
    "batch.size",
    "compression.codec",
    "compression.level",
    "compression.type",
    "delivery.report.only.error",
    "delivery.timeout.ms",
    "enable.gapless.guarantee",
    "enable.idempotence",
    "linger.ms",
    "message.send.max.retries",
    "message.timeout.ms",
    "partitioner",
    "produce.offset.report",
    "queue.buffering.backpressure.threshold",
    "queue.buffering.max.kbytes",
    "queue.buffering.max.messages",
    "queue.buffering.max.ms",
    "queuing.strategy",
    "request.required.acks",
    "request.timeout.ms",
    "retries",
    "retry.backoff.ms",
    "sticky.partitioning.linger.ms",
    "transaction.timeout.ms",
    "transactional.id",
};

static bool kafka_name_in(const char *name, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(name, list[i]) == 0)
            return true;
    return false;
}

bool kafka_prop_applies(enum kafka_role role, const char *name)
{
    if (role == KAFKA_ROLE_PRODUCER)
        return !kafka_name_in(name, kafka_consumer_only,
                              sizeof(kafka_consumer_only) / sizeof(kafka_consumer_only[0]));
    return !kafka_name_in(name, kafka_producer_only,
                          sizeof(kafka_producer_only) / sizeof(kafka_producer_only[0]));
}

static enum og_status kafka_set(rd_kafka_conf_t *conf, const char *name, const char *value,
                                struct og_error *err)
{
    char errstr[512];

    if (rd_kafka_conf_set(conf, name, value, errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK)
        return og_error_set(err, OG_ERR_CONFIG, false, "kafka property %s: %s", name, errstr);
    return OG_OK;
}

/* Splits "name=value" and checks it against the reserved list. */
static enum og_status kafka_prop_split(const char *prop, char *name, size_t name_size,
                                       const char **value, struct og_error *err)
{
    const char *eq = strchr(prop, '=');
    size_t len;

    if (eq == NULL || eq == prop)
        return og_error_set(err, OG_ERR_CONFIG, false,
                            "kafka.properties: '%.64s...' is not of the form name=value", prop);
    len = (size_t)(eq - prop);
    if (len >= name_size)
        return og_error_set(err, OG_ERR_CONFIG, false,
                            "kafka.properties: property name '%.64s...' is too long", prop);
    memcpy(name, prop, len);
    name[len] = '\0';
    *value = eq + 1;
    for (size_t i = 0; i < sizeof(kafka_reserved) / sizeof(kafka_reserved[0]); i++) {
        if (strcmp(name, kafka_reserved[i].name) != 0)
            continue;
        if (kafka_reserved[i].refused_value == NULL ||
            strcmp(*value, kafka_reserved[i].refused_value) == 0)
            return og_error_set(err, OG_ERR_CONFIG, false,
                                "kafka.properties: %s may not be set here: %s", name,
                                kafka_reserved[i].why);
    }
    return OG_OK;
}

static void kafka_dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    struct kafka_delivery *d = m->_private;

    (void)opaque;
    if (d != NULL) {
        d->err = m->err;
        d->done = true;
    } else if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        log_warn("kafka_delivery_failed", "client=%s topic=%s error=%s", rd_kafka_name(rk),
                 m->rkt ? rd_kafka_topic_name(m->rkt) : "?", rd_kafka_err2name(m->err));
    }
}

/* A TLS failure that a retry cannot mend: the broker's certificate does not verify against
 * ssl.ca.location (or has another name), or the two sides do not speak TLS to each other.
 * Others (a broker closing the connection mid-handshake while it restarts) pass. */
static bool kafka_ssl_refusal(const char *reason)
{
    static const char *const words[] = {"certificate", "verify", "wrong version number",
                                        "unknown protocol", "no protocols available"};

    for (size_t i = 0; reason != NULL && i < sizeof(words) / sizeof(words[0]); i++)
        if (strstr(reason, words[i]) != NULL)
            return true;
    return false;
}

rd_kafka_resp_err_t kafka_refusal(int code, const char *reason)
{
    if (code == RD_KAFKA_RESP_ERR__AUTHENTICATION)
        return RD_KAFKA_RESP_ERR__AUTHENTICATION;
    if (code == RD_KAFKA_RESP_ERR__SSL && kafka_ssl_refusal(reason))
        return RD_KAFKA_RESP_ERR__SSL;
    /* librdkafka reports an OpenSSL error met while reading a handshake record as a transport
     * error ("error:0A000086:SSL routines::certificate verify failed"), without the "SSL
     * handshake failed" it puts before the same refusal met while writing. */
    if (code == RD_KAFKA_RESP_ERR__TRANSPORT && reason != NULL &&
        strstr(reason, "SSL routines") != NULL && kafka_ssl_refusal(reason))
        return RD_KAFKA_RESP_ERR__SSL;
    return RD_KAFKA_RESP_ERR_NO_ERROR;
}

void kafka_log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    char q[1024];
    enum log_level lvl = level <= 3   ? LOG_LVL_ERROR
                         : level == 4 ? LOG_LVL_WARN
                         : level <= 6 ? LOG_LVL_INFO
                                      : LOG_LVL_DEBUG;

    /* FAIL lines are the broker connection failures that the error callback reports too
     * (kafka_error_cb, which says each outage once): at debug they do not say it twice. */
    if (fac != NULL && strcmp(fac, "FAIL") == 0)
        lvl = LOG_LVL_DEBUG;
    if (!log_enabled(lvl))
        return;
    log_emit(lvl, "kafka_log", "client=%s fac=%s msg=%s", rk ? rd_kafka_name(rk) : "?",
             fac ? fac : "?", log_quote(q, sizeof(q), buf));
}

/* "host:port" from a librdkafka connection error ("sasl_ssl://h:p/1: Disconnected ...",
 * "GroupCoordinator: h:p: ..."); false when the reason names none. */
static bool kafka_reason_broker(const char *reason, char *buf, size_t size)
{
    const char *p = reason != NULL ? strstr(reason, "://") : NULL;
    size_t n;

    if (p != NULL && (size_t)(p - reason) < 16) {
        p += 3;
        n = *p == '[' ? strcspn(p, "]") + (strchr(p, ']') != NULL) : strcspn(p, "/: ");
        if (p[n] == ':') /* the port */
            n += 1 + strcspn(p + n + 1, "/: ");
    } else if (reason != NULL && (p = strstr(reason, "Coordinator: ")) != NULL &&
               (size_t)(p - reason) < 8) {
        p += 13;
        n = strcspn(p, " ");
        while (n > 0 && p[n - 1] == ':')
            n--;
    } else {
        return false;
    }
    if (n == 0 || n >= size)
        return false;
    memcpy(buf, p, n);
    buf[n] = '\0';
    return true;
}

/* A client's statistics show broker UP since up_since_ms: ends its outage, if one runs
 * (common/kafka_outage.h says when an UP state counts). */
static void kafka_broker_seen_up(const rd_kafka_t *rk, const char *broker, int64_t up_since_ms)
{
    int64_t down_ms;
    long errors;

    if (kafka_outage_end(broker, up_since_ms, clock_mono_ms(), &down_ms, &errors))
        log_info("kafka_broker_up", "broker=%s client=%s down_ms=%" PRId64 " errors=%ld", broker,
                 rd_kafka_name(rk), down_ms, errors);
}

/* The statistics callback kafka_conf_new installs (the consumer's loop installs its own on
 * the group member): only reads which brokers are UP. */
static int kafka_stats_cb(rd_kafka_t *rk, char *json, size_t len, void *opaque)
{
    json_t *root, *b;
    const char *name;

    (void)opaque;
    if (!kafka_outage_active())
        return 0;
    root = json_loadb(json, len, 0, NULL);
    json_object_foreach(root != NULL ? json_object_get(root, "brokers") : NULL, name, b)
    {
        const char *state = json_string_value(json_object_get(b, "state"));
        const char *node = json_string_value(json_object_get(b, "nodename"));
        /* How long the broker has been in this state, in microseconds. */
        json_t *age = json_object_get(b, "stateage");
        (void)name;
        if (state != NULL && node != NULL && strcmp(state, "UP") == 0)
            kafka_broker_seen_up(
                rk, node,
                json_is_integer(age) ? clock_mono_ms() - json_integer_value(age) / 1000 : -1);
    }
    json_decref(root);
    return 0; /* librdkafka frees json */
}

void kafka_error_cb(rd_kafka_t *rk, int code, const char *reason, void *opaque)
{
    char q[600], fatal[512], broker[128];
    rd_kafka_resp_err_t refusal;

    (void)opaque;
    if (code == RD_KAFKA_RESP_ERR__FATAL) {
        rd_kafka_resp_err_t orig = rd_kafka_fatal_error(rk, fatal, sizeof(fatal));
        log_error("kafka_fatal", "client=%s code=%s reason=%s", rd_kafka_name(rk),
                  rd_kafka_err2name(orig), log_quote(q, sizeof(q), fatal));
        return;
    }
    refusal = kafka_refusal(code, reason);
    if (refusal == RD_KAFKA_RESP_ERR__AUTHENTICATION) {
        /* Refused at start ends the program (kafka_connect_check); refused later (credentials
         * changed on the brokers) is retried, since fixing it there needs no restart here. */
        log_error("kafka_error",
                  "client=%s code=%s reason=%s note=\"the broker refused the "
                  "SASL login; check sasl.username and the password\"",
                  rd_kafka_name(rk), rd_kafka_err2name((rd_kafka_resp_err_t)code),
                  log_quote(q, sizeof(q), reason));
        return;
    }
    if (refusal == RD_KAFKA_RESP_ERR__SSL) {
        /* The brokers' certificate changed to one ssl.ca.location does not vouch for. */
        log_error("kafka_error",
                  "client=%s code=%s reason=%s note=\"TLS with the broker failed; check "
                  "ssl.ca.location and the broker's certificate\"",
                  rd_kafka_name(rk), rd_kafka_err2name((rd_kafka_resp_err_t)code),
                  log_quote(q, sizeof(q), reason));
        return;
    }
    /* Broker connections come and go; librdkafka reconnects by itself. */
    if (code == RD_KAFKA_RESP_ERR__TRANSPORT || code == RD_KAFKA_RESP_ERR__RESOLVE ||
        code == RD_KAFKA_RESP_ERR__SSL) {
        if (kafka_reason_broker(reason, broker, sizeof(broker))) {
            if (kafka_outage_begin(broker, clock_mono_ms()))
                log_warn("kafka_error",
                         "client=%s code=%s broker=%s reason=%s note=\"connection lost; the "
                         "clients reconnect by themselves and log further connection errors "
                         "for this broker at debug until it is back (kafka_broker_up)\"",
                         rd_kafka_name(rk), rd_kafka_err2name((rd_kafka_resp_err_t)code), broker,
                         log_quote(q, sizeof(q), reason));
            else
                log_debug("kafka_error", "client=%s code=%s broker=%s reason=%s", rd_kafka_name(rk),
                          rd_kafka_err2name((rd_kafka_resp_err_t)code), broker,
                          log_quote(q, sizeof(q), reason));
            return;
        }
    } else if (code == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN && kafka_outage_active()) {
        /* Implied by the outage already reported. */
        log_debug("kafka_error", "client=%s code=%s reason=%s", rd_kafka_name(rk),
                  rd_kafka_err2name((rd_kafka_resp_err_t)code), log_quote(q, sizeof(q), reason));
        return;
    }
    log_warn("kafka_error", "client=%s code=%s reason=%s", rd_kafka_name(rk),
             rd_kafka_err2name((rd_kafka_resp_err_t)code), log_quote(q, sizeof(q), reason));
}

/* Sets sasl.password from kafka.sasl_password_file (nothing when that is ""). The file is
 * read by the database password's reader (db_password_read: one copy, wiped); its whole
 * content is the password, trailing newlines dropped. */
static enum og_status kafka_sasl_password(const struct og_config *cfg, rd_kafka_conf_t *conf,
                                          struct og_error *err)
{
    const char *path = cfg->kafka.sasl_password_file;
    char *password = NULL;
    enum og_status st = OG_OK;

    if (path == NULL || *path == '\0')
        return OG_OK;
    for (size_t i = 0; i < cfg->kafka.properties_n; i++) {
        if (strncmp(cfg->kafka.properties[i], "sasl.password=", 14) == 0) {
            st = og_error_set(err, OG_ERR_CONFIG, false,
                              "kafka.sasl_password_file: kafka.properties sets sasl.password "
                              "too; keep one of them");
            goto out;
        }
    }
    /* db_password_read's own message names database.password_file. */
    if (access(path, R_OK) != 0) {
        st = og_error_set(err, OG_ERR_CONFIG, false, "kafka.sasl_password_file %s: %s", path,
                          strerror(errno));
        goto out;
    }
    st = db_password_read(path, &password, err);
    if (st != OG_OK) {
        /* The reader's reason ("longer than ... bytes"), under this setting's name. */
        char why[128] = "cannot read it";
        const char *colon = err != NULL ? strstr(err->msg, path) : NULL;
        if (colon != NULL && strncmp(colon + strlen(path), ": ", 2) == 0)
            snprintf(why, sizeof(why), "%s", colon + strlen(path) + 2);
        st = og_error_set(err, OG_ERR_CONFIG, false, "kafka.sasl_password_file %s: %s", path, why);
        goto out;
    }
    if (*password == '\0') {
        st = og_error_set(err, OG_ERR_CONFIG, false, "kafka.sasl_password_file %s: is empty", path);
        goto out;
    }
    st = kafka_set(conf, "sasl.password", password, err);
out:
    db_password_free(password); /* librdkafka keeps its own copy */
    if (st != OG_OK)
        og_error_setting(err, "kafka.sasl_password_file");
    return st;
}

enum og_status kafka_conf_new(const struct og_config *cfg, enum kafka_role role,
                              const char *client_id, rd_kafka_conf_t **out, struct og_error *err)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    enum og_status st = OG_OK;
    char num[32];

    *out = NULL;
    if (conf == NULL)
        return og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
    if (cfg->kafka.brokers == NULL || *cfg->kafka.brokers == '\0') {
        st = og_error_set(err, OG_ERR_CONFIG, false, "kafka.brokers is empty");
        og_error_setting(err, "kafka.brokers");
        goto fail;
    }
    /* 1. defaults */
    st = kafka_set(conf, "bootstrap.servers", cfg->kafka.brokers, err);
    if (st != OG_OK) {
        og_error_setting(err, "kafka.brokers");
        goto fail;
    }
    if (st == OG_OK)
        st = kafka_set(conf, "client.id", client_id ? client_id : "ordergate", err);
    if (role == KAFKA_ROLE_CONSUMER) {
        snprintf(num, sizeof(num), "%d", cfg->kafka.queued_max_kbytes);
        if (st == OG_OK)
            st = kafka_set(conf, "partition.assignment.strategy", "cooperative-sticky", err);
        if (st == OG_OK)
            st = kafka_set(conf, "auto.offset.reset", "earliest", err);
        if (st == OG_OK)
            st = kafka_set(conf, "enable.auto.commit", "true", err);
        if (st == OG_OK)
            st = kafka_set(conf, "queued.max.messages.kbytes", num, err);
        /* The prefetch bound above "may be overshot by fetch.message.max.bytes"
         * per partition; our messages are ~150 bytes, so 64 KiB per fetch is
         * plenty and keeps the overshoot small. librdkafka grows it by itself
         * for a larger (garbage) message. */
        if (st == OG_OK)
            st = kafka_set(conf, "fetch.message.max.bytes", "65536", err);
        /* A fetch for idle partitions waits on the broker up to this long,
         * and a partition resumed meanwhile waits for that fetch to return:
         * the default 500 ms would show up as lateness. */
        if (st == OG_OK)
            st = kafka_set(conf, "fetch.wait.max.ms", "100", err);
        snprintf(num, sizeof(num), "%d", KAFKA_SESSION_TIMEOUT_MS);
        if (st == OG_OK)
            st = kafka_set(conf, "session.timeout.ms", num, err);
        snprintf(num, sizeof(num), "%d", KAFKA_HEARTBEAT_INTERVAL_MS);
        if (st == OG_OK)
            st = kafka_set(conf, "heartbeat.interval.ms", num, err);
    } else {
        rd_kafka_conf_set_dr_msg_cb(conf, kafka_dr_cb);
        /* Broker states for kafka_broker_up (kafka_error_cb), read while the producer is
         * polled. */
        st = kafka_set(conf, "statistics.interval.ms", KAFKA_STATS_INTERVAL_MS, err);
    }
    if (st != OG_OK)
        goto fail;
    /* 2. kafka.properties, verbatim */
    for (size_t i = 0; i < cfg->kafka.properties_n; i++) {
        char name[256];
        const char *value = NULL;
        st = kafka_prop_split(cfg->kafka.properties[i], name, sizeof(name), &value, err);
        if (st == OG_OK && kafka_prop_applies(role, name))
            st = kafka_set(conf, name, value, err);
        if (st != OG_OK) {
            og_error_setting(err, "kafka.properties");
            goto fail;
        }
    }
    /* 2b. sasl.password from kafka.sasl_password_file, when set */
    st = kafka_sasl_password(cfg, conf, err);
    if (st != OG_OK)
        goto fail;
    /* 3. what correctness rests on */
    if (role == KAFKA_ROLE_CONSUMER) {
        if (cfg->kafka.group == NULL || *cfg->kafka.group == '\0') {
            st = og_error_set(err, OG_ERR_CONFIG, false, "kafka.group is empty");
            og_error_setting(err, "kafka.group");
            goto fail;
        }
        st = kafka_set(conf, "group.id", cfg->kafka.group, err);
        if (st != OG_OK)
            og_error_setting(err, "kafka.group");
        if (st == OG_OK)
            st = kafka_set(conf, "enable.auto.offset.store", "false", err);
        if (st == OG_OK) {
            char id[KAFKA_INSTANCE_ID_MAX + 1];
            st = kafka_group_instance_id(cfg, id, sizeof(id), err);
            if (st == OG_OK && *id != '\0') {
                st = kafka_set(conf, "group.instance.id", id, err);
                if (st != OG_OK)
                    og_error_setting(err, "kafka.group_instance_id");
            }
        }
    } else {
        st = kafka_set(conf, "enable.idempotence", "true", err);
    }
    if (st != OG_OK)
        goto fail;
    rd_kafka_conf_set_log_cb(conf, kafka_log_cb);
    rd_kafka_conf_set_error_cb(conf, kafka_error_cb);
    rd_kafka_conf_set_stats_cb(conf, kafka_stats_cb);
    *out = conf;
    return OG_OK;
fail:
    rd_kafka_conf_destroy(conf);
    return st;
}

enum og_status kafka_producer_new(const struct og_config *cfg, const char *client_id,
                                  kafka_dr_fn dr_cb, rd_kafka_t **producer, struct og_error *err)
{
    char errstr[512];
    rd_kafka_conf_t *conf = NULL;
    enum og_status st;

    *producer = NULL;
    st = kafka_conf_new(cfg, KAFKA_ROLE_PRODUCER, client_id, &conf, err);
    if (st != OG_OK)
        return st;
    if (dr_cb != NULL)
        rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
    *producer = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    if (*producer == NULL) {
        /* On failure the conf is still ours. rd_kafka_new fails on
         * conflicting settings, so this is a configuration error. */
        rd_kafka_conf_destroy(conf);
        og_error_set(err, OG_ERR_CONFIG, false, "cannot create Kafka producer: %s", errstr);
        og_error_setting(err, "kafka.properties");
        return OG_ERR_CONFIG;
    }
    return OG_OK; /* conf now belongs to the handle */
}

/* What the connection check's handle heard. Its callbacks run in the thread that polls it
 * (error_cb) or in librdkafka's (log_cb, which only forwards). */
struct kafka_probe {
    rd_kafka_resp_err_t refused; /* _AUTHENTICATION or _SSL: retrying cannot help */
    bool all_down;
    char reason[512]; /* of refused, else of the last connection error */
};

static void kafka_probe_error_cb(rd_kafka_t *rk, int code, const char *reason, void *opaque)
{
    struct kafka_probe *p = opaque;

    (void)rk;
    if (p->refused != RD_KAFKA_RESP_ERR_NO_ERROR)
        return; /* the first refusal is the one to report */
    if (kafka_refusal(code, reason) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        p->refused = kafka_refusal(code, reason);
        snprintf(p->reason, sizeof(p->reason), "%s", reason ? reason : "");
    } else if (code == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN) {
        p->all_down = true;
    } else if (reason != NULL) {
        snprintf(p->reason, sizeof(p->reason), "%s", reason);
    }
}

/* The check reports what it found in one line of its own: librdkafka's lines about the same
 * failure go to the debug level. */
static void kafka_probe_log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    (void)level;
    kafka_log_cb(rk, 7, fac, buf);
}

enum og_status kafka_connect_check(const struct og_config *cfg, const char *client_id,
                                   int timeout_ms, struct og_error *err)
{
    struct kafka_probe probe = {RD_KAFKA_RESP_ERR_NO_ERROR, false, ""};
    rd_kafka_conf_t *conf = NULL;
    rd_kafka_t *rk = NULL;
    char errstr[512];
    int64_t deadline = clock_mono_ms() + timeout_ms;
    bool pw_file = cfg->kafka.sasl_password_file != NULL && *cfg->kafka.sasl_password_file != '\0';
    enum og_status st;

    st = kafka_conf_new(cfg, KAFKA_ROLE_PRODUCER, client_id, &conf, err);
    if (st != OG_OK)
        return st;
    /* A metadata request is all it sends: no producer id to ask for. */
    st = kafka_set(conf, "enable.idempotence", "false", err);
    if (st != OG_OK) {
        rd_kafka_conf_destroy(conf);
        return st;
    }
    rd_kafka_conf_set_opaque(conf, &probe);
    rd_kafka_conf_set_error_cb(conf, kafka_probe_error_cb);
    rd_kafka_conf_set_log_cb(conf, kafka_probe_log_cb);
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    if (rk == NULL) {
        rd_kafka_conf_destroy(conf);
        og_error_set(err, OG_ERR_CONFIG, false, "cannot create Kafka client: %s", errstr);
        og_error_setting(err, "kafka.properties");
        return OG_ERR_CONFIG;
    }
    for (;;) {
        const struct rd_kafka_metadata *md = NULL;
        int64_t left = deadline - clock_mono_ms();
        rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 0, NULL, &md,
                                                  left > 200 ? 200
                                                  : left > 1 ? (int)left
                                                             : 1);

        if (md != NULL)
            rd_kafka_metadata_destroy(md);
        rd_kafka_poll(rk, 0); /* serves the error callback */
        if (probe.refused == RD_KAFKA_RESP_ERR__AUTHENTICATION) {
            st = og_error_set(err, OG_ERR_CONFIG, false,
                              "kafka: the broker refused the SASL login (check sasl.username, "
                              "sasl.mechanisms and the password in %s): %s",
                              pw_file ? "kafka.sasl_password_file" : "sasl.password", probe.reason);
            og_error_setting(err, pw_file ? "kafka.sasl_password_file" : "kafka.properties");
            break;
        }
        if (probe.refused == RD_KAFKA_RESP_ERR__SSL) {
            st = og_error_set(err, OG_ERR_CONFIG, false,
                              "kafka: TLS with the broker failed (check ssl.ca.location, the "
                              "broker's certificate and name, security.protocol): %s",
                              probe.reason);
            og_error_setting(err, "kafka.properties");
            break;
        }
        if (e == RD_KAFKA_RESP_ERR_NO_ERROR) {
            st = OG_OK;
            break;
        }
        if (probe.all_down || clock_mono_ms() >= deadline) {
            st = og_error_set(err, OG_ERR_KAFKA, true, "kafka: no broker of %s answered%s%s",
                              cfg->kafka.brokers, *probe.reason != '\0' ? ": " : " in time",
                              probe.reason);
            break;
        }
    }
    rd_kafka_destroy(rk);
    return st;
}

size_t kafka_wait(rd_kafka_t *producer, struct kafka_delivery *const *d, size_t n, int timeout_ms)
{
    int64_t deadline = clock_mono_ms() + timeout_ms;
    size_t pending;

    for (;;) {
        pending = 0;
        for (size_t i = 0; i < n; i++)
            pending += d[i] != NULL && !d[i]->done;
        if (pending == 0)
            return 0;
        int64_t left = deadline - clock_mono_ms();
        if (left <= 0) {
            /* Serve whatever reports have arrived, then give the answer. */
            rd_kafka_poll(producer, 0);
            pending = 0;
            for (size_t i = 0; i < n; i++)
                pending += d[i] != NULL && !d[i]->done;
            return pending;
        }
        rd_kafka_poll(producer, left > 50 ? 50 : (int)left);
    }
}

/* Kafka's rule for names (topics, group instance ids): 1..249 of [A-Za-z0-9._-]. */
static bool kafka_name_valid(const char *name, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return false;
    }
    return len > 0 && len <= KAFKA_TOPIC_MAX;
}

enum og_status kafka_group_instance_id(const struct og_config *cfg, char *buf, size_t size,
                                       struct og_error *err)
{
    const char *set = cfg->kafka.group_instance_id != NULL ? cfg->kafka.group_instance_id : "";
    const char *inst = getenv("ORDERGATE_INSTANCE");
    char host[256];
    int n;

    buf[0] = '\0';
    if (*set != '\0') {
        if (!kafka_name_valid(set, strlen(set)) || strlen(set) >= size) {
            og_error_set(err, OG_ERR_CONFIG, false,
                         "kafka.group_instance_id: '%.64s' is not a valid group instance id "
                         "(1 to %d of A-Z a-z 0-9 . _ -)",
                         set, KAFKA_INSTANCE_ID_MAX);
            og_error_setting(err, "kafka.group_instance_id");
            return OG_ERR_CONFIG;
        }
        snprintf(buf, size, "%s", set);
        return OG_OK;
    }
    if (inst == NULL || *inst == '\0')
        return OG_OK; /* dynamic membership */
    if (gethostname(host, sizeof(host) - 1) != 0)
        return og_error_set(err, OG_ERR_CONFIG, false,
                            "ORDERGATE_INSTANCE is set but the host name cannot be read; set "
                            "kafka.group_instance_id");
    host[sizeof(host) - 1] = '\0';
    n = snprintf(buf, size, "%s-%s", host, inst);
    if (n < 0 || (size_t)n >= size || !kafka_name_valid(buf, (size_t)n)) {
        buf[0] = '\0';
        return og_error_set(err, OG_ERR_CONFIG, false,
                            "ORDERGATE_INSTANCE: group instance id '%.64s-%.64s' (host name, "
                            "instance) is not 1 to %d of A-Z a-z 0-9 . _ -; set "
                            "kafka.group_instance_id",
                            host, inst, KAFKA_INSTANCE_ID_MAX);
    }
    return OG_OK;
}

bool kafka_topic_valid(const char *name)
{
    size_t len = name ? strlen(name) : 0;

    if (strcmp(name ? name : "", ".") == 0 || strcmp(name ? name : "", "..") == 0)
        return false;
    return kafka_name_valid(name, len);
}

void kafka_topics_free(char **topics, size_t n)
{
    for (size_t i = 0; topics != NULL && i < n; i++)
        free(topics[i]);
    free(topics);
}

enum og_status kafka_topics_split(const char *csv, char ***topics, size_t *n, struct og_error *err)
{
    char **list = NULL;
    size_t count = 0;
    const char *p = csv ? csv : "";
    enum og_status st = OG_OK;

    *topics = NULL;
    *n = 0;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *s = p;
        char **grown;
        char *name;

        p = end ? end + 1 : p + len;
        while (len > 0 && (*s == ' ' || *s == '\t')) {
            s++;
            len--;
        }
        while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t'))
            len--;
        if (len == 0) {
            st = og_error_set(err, OG_ERR_CONFIG, false, "kafka.topics: empty topic name in '%s'",
                              csv);
            goto fail;
        }
        name = strndup(s, len);
        if (name == NULL) {
            st = og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
            goto fail;
        }
        if (!kafka_topic_valid(name)) {
            st = og_error_set(err, OG_ERR_CONFIG, false,
                              "kafka.topics: '%.64s' is not a valid topic name "
                              "(1 to %d of A-Z a-z 0-9 . _ -)",
                              name, KAFKA_TOPIC_MAX);
            free(name);
            goto fail;
        }
        for (size_t i = 0; i < count; i++) {
            if (strcmp(list[i], name) == 0) {
                st = og_error_set(err, OG_ERR_CONFIG, false, "kafka.topics: '%s' is listed twice",
                                  name);
                free(name);
                goto fail;
            }
        }
        grown = realloc(list, (count + 1) * sizeof(*list));
        if (grown == NULL) {
            free(name);
            st = og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
            goto fail;
        }
        list = grown;
        list[count++] = name;
    }
    if (count == 0) {
        st = og_error_set(err, OG_ERR_CONFIG, false, "kafka.topics: no topic given");
        goto fail;
    }
    *topics = list;
    *n = count;
    return OG_OK;
fail:
    kafka_topics_free(list, count);
    if (st == OG_ERR_CONFIG)
        og_error_setting(err, "kafka.topics");
    return st;
}

enum og_status kafka_check_config(const struct og_config *cfg, struct og_error *err)
{
    rd_kafka_conf_t *conf = NULL;
    char **topics = NULL;
    size_t n = 0;
    enum og_status st;

    st = kafka_topics_split(cfg->kafka.topics, &topics, &n, err);
    if (st != OG_OK)
        return st;
    if (!kafka_topic_valid(cfg->kafka.dead_letter_topic)) {
        st = og_error_set(err, OG_ERR_CONFIG, false,
                          "kafka.dead_letter_topic: '%.64s' is not a valid topic name",
                          cfg->kafka.dead_letter_topic);
        og_error_setting(err, "kafka.dead_letter_topic");
        goto out;
    }
    if (*cfg->kafka.payments_topic != '\0' && !kafka_topic_valid(cfg->kafka.payments_topic)) {
        st = og_error_set(err, OG_ERR_CONFIG, false,
                          "kafka.payments_topic: '%.64s' is not a valid topic name",
                          cfg->kafka.payments_topic);
        og_error_setting(err, "kafka.payments_topic");
        goto out;
    }
    if (*cfg->kafka.refund_results_topic != '\0' &&
        !kafka_topic_valid(cfg->kafka.refund_results_topic)) {
        st = og_error_set(err, OG_ERR_CONFIG, false,
                          "kafka.refund_results_topic: '%.64s' is not a valid topic name",
                          cfg->kafka.refund_results_topic);
        og_error_setting(err, "kafka.refund_results_topic");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        if (strcmp(topics[i], cfg->kafka.dead_letter_topic) == 0 ||
            strcmp(topics[i], cfg->kafka.payments_topic) == 0 ||
            strcmp(topics[i], cfg->kafka.refund_results_topic) == 0) {
            st = og_error_set(err, OG_ERR_CONFIG, false,
                              "kafka.topics: '%s' is also the dead-letter, payments or refund "
                              "results topic",
                              topics[i]);
            og_error_setting(err, "kafka.topics");
            goto out;
        }
    }
    if (strcmp(cfg->kafka.dead_letter_topic, cfg->kafka.payments_topic) == 0) {
        st = og_error_set(err, OG_ERR_CONFIG, false,
                          "kafka.payments_topic and kafka.dead_letter_topic are the same");
        og_error_setting(err, "kafka.payments_topic");
        goto out;
    }
    if (strcmp(cfg->kafka.dead_letter_topic, cfg->kafka.refund_results_topic) == 0 ||
        (*cfg->kafka.payments_topic != '\0' &&
         strcmp(cfg->kafka.payments_topic, cfg->kafka.refund_results_topic) == 0)) {
        st = og_error_set(err, OG_ERR_CONFIG, false,
                          "kafka.refund_results_topic is also the dead-letter or payments topic");
        og_error_setting(err, "kafka.refund_results_topic");
        goto out;
    }
    st = kafka_conf_new(cfg, KAFKA_ROLE_CONSUMER, "ordergate-check", &conf, err);
    if (st != OG_OK)
        goto out;
    rd_kafka_conf_destroy(conf);
    st = kafka_conf_new(cfg, KAFKA_ROLE_PRODUCER, "ordergate-check", &conf, err);
    if (st != OG_OK)
        goto out;
    rd_kafka_conf_destroy(conf);
out:
    kafka_topics_free(topics, n);
    return st;
}

/* One count; the error that stopped it, if any. */
static rd_kafka_resp_err_t kafka_topic_messages_once(rd_kafka_t *rk, const char *topic,
                                                     int timeout_ms, int64_t *total)
{
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    rd_kafka_resp_err_t e = RD_KAFKA_RESP_ERR_NO_ERROR;

    *total = 0;
    if (rkt == NULL) {
        e = RD_KAFKA_RESP_ERR__INVALID_ARG;
        goto out;
    }
    e = rd_kafka_metadata(rk, 0, rkt, &md, timeout_ms);
    if (e == RD_KAFKA_RESP_ERR_NO_ERROR && md->topic_cnt != 1)
        e = RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC;
    if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
        e = md->topics[0].err;
    for (int p = 0; e == RD_KAFKA_RESP_ERR_NO_ERROR && p < md->topics[0].partition_cnt; p++) {
        int64_t lo = 0, hi = 0;
        e = rd_kafka_query_watermark_offsets(rk, topic, md->topics[0].partitions[p].id, &lo, &hi,
                                             timeout_ms);
        *total += hi - lo;
    }
out:
    if (md != NULL)
        rd_kafka_metadata_destroy(md);
    if (rkt != NULL)
        rd_kafka_topic_destroy(rkt);
    return e;
}

int64_t kafka_topic_messages(rd_kafka_t *rk, const char *topic, int timeout_ms)
{
    int64_t deadline = clock_mono_ms() + timeout_ms, total = 0;

    for (;;) {
        int64_t left = deadline - clock_mono_ms();
        rd_kafka_resp_err_t e =
            kafka_topic_messages_once(rk, topic, left > 0 ? (int)left : 1, &total);
        if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
            return total;
        /* A topic just created (or a leader moving) answers these for a
         * moment; a topic that does not exist keeps answering the first. */
        if ((e != RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART &&
             e != RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION &&
             e != RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE) ||
            clock_mono_ms() + 100 >= deadline)
            return -1;
        nanosleep(&(struct timespec){0, 100 * 1000000L}, NULL);
    }
}

bool kafka_err_retriable(rd_kafka_resp_err_t code)
{
    switch (code) {
    case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
    case RD_KAFKA_RESP_ERR__INVALID_ARG:
    case RD_KAFKA_RESP_ERR__FATAL:
    case RD_KAFKA_RESP_ERR__NOT_IMPLEMENTED:
    case RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION:
    case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_SASL_AUTHENTICATION_FAILED:
    case RD_KAFKA_RESP_ERR__AUTHENTICATION:
        return false;
    default:
        return true;
    }
}

enum og_status kafka_error_set(struct og_error *err, rd_kafka_resp_err_t code, const char *what)
{
    return og_error_set(err, OG_ERR_KAFKA, kafka_err_retriable(code), "%s: %s (%s)",
                        what ? what : "kafka", rd_kafka_err2str(code), rd_kafka_err2name(code));
}

enum og_status kafka_topic_create(rd_kafka_t *rk, const char *topic, int partitions,
                                  int replication, bool *created, struct og_error *err)
{
    char errstr[256];
    rd_kafka_NewTopic_t *nt = NULL;
    rd_kafka_queue_t *q = NULL;
    rd_kafka_event_t *ev = NULL;
    rd_kafka_resp_err_t code;
    const rd_kafka_CreateTopics_result_t *res;
    const rd_kafka_topic_result_t **tr;
    size_t n = 0;
    enum og_status st = OG_OK;

    *created = false;
    nt = rd_kafka_NewTopic_new(topic, partitions, replication, errstr, sizeof(errstr));
    if (nt == NULL)
        return og_error_set(err, OG_ERR_ARG, false, "topic %s: %s", topic, errstr);
    q = rd_kafka_queue_new(rk);
    rd_kafka_CreateTopics(rk, &nt, 1, NULL, q);
    ev = rd_kafka_queue_poll(q, 30000);
    if (ev == NULL) {
        st = og_error_set(err, OG_ERR_KAFKA, true, "topic %s: no answer from the broker", topic);
        goto out;
    }
    res = rd_kafka_event_CreateTopics_result(ev);
    tr = res != NULL ? rd_kafka_CreateTopics_result_topics(res, &n) : NULL;
    code = n == 1 ? rd_kafka_topic_result_error(tr[0]) : rd_kafka_event_error(ev);
    if (code == RD_KAFKA_RESP_ERR_NO_ERROR)
        *created = true;
    else if (code != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
        st = kafka_error_set(err, code, topic);
out:
    if (ev != NULL)
        rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q);
    rd_kafka_NewTopic_destroy(nt);
    return st;
}

bool kafka_topic_wait_ready(rd_kafka_t *rk, const char *topic, int partitions, int timeout_ms)
{
    int64_t deadline = clock_mono_ms() + timeout_ms;

    for (;;) {
        const struct rd_kafka_metadata *md = NULL;
        rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
        bool ready = false;

        if (rkt != NULL && rd_kafka_metadata(rk, 0, rkt, &md, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR &&
            md->topic_cnt == 1 && md->topics[0].err == RD_KAFKA_RESP_ERR_NO_ERROR &&
            md->topics[0].partition_cnt == partitions) {
            ready = true;
            for (int p = 0; p < partitions; p++)
                ready = ready && md->topics[0].partitions[p].leader >= 0;
        }
        if (md != NULL)
            rd_kafka_metadata_destroy(md);
        if (rkt != NULL)
            rd_kafka_topic_destroy(rkt);
        if (ready)
            return true;
        if (clock_mono_ms() >= deadline)
            return false;
        nanosleep(&(struct timespec){0, 100 * 1000000L}, NULL);
    }
}

enum og_status kafka_group_reader_new(const struct og_config *cfg, const char *group,
                                      const char *client_id, rd_kafka_t **reader,
                                      struct og_error *err)
{
    struct og_config rc = *cfg; /* borrows every string: never freed */
    rd_kafka_conf_t *conf = NULL;
    char errstr[512];
    enum og_status st;

    *reader = NULL;
    rc.kafka.group = (char *)group;
    rc.kafka.group_instance_id = (char *)"";
    st = kafka_conf_new(&rc, KAFKA_ROLE_CONSUMER, client_id, &conf, err);
    if (st == OG_OK)
        st = kafka_set(conf, "enable.auto.commit", "false", err);
    if (st != OG_OK) {
        if (conf != NULL)
            rd_kafka_conf_destroy(conf);
        return st;
    }
    *reader = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
    if (*reader == NULL) {
        rd_kafka_conf_destroy(conf); /* still ours on failure */
        og_error_set(err, OG_ERR_CONFIG, false, "cannot create Kafka group reader: %s", errstr);
        og_error_setting(err, "kafka.properties");
        return OG_ERR_CONFIG;
    }
    return OG_OK;
}

int64_t kafka_group_lag(rd_kafka_t *reader, const char *topic, int timeout_ms)
{
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_topic_t *t = rd_kafka_topic_new(reader, topic, NULL);
    rd_kafka_topic_partition_list_t *parts = NULL;
    int64_t lag = -1;

    if (t == NULL ||
        rd_kafka_metadata(reader, 0, t, &md, timeout_ms) != RD_KAFKA_RESP_ERR_NO_ERROR ||
        md->topic_cnt != 1 || md->topics[0].err != RD_KAFKA_RESP_ERR_NO_ERROR)
        goto out;
    parts = rd_kafka_topic_partition_list_new(md->topics[0].partition_cnt);
    for (int p = 0; p < md->topics[0].partition_cnt; p++)
        rd_kafka_topic_partition_list_add(parts, topic, md->topics[0].partitions[p].id);
    if (rd_kafka_committed(reader, parts, timeout_ms) != RD_KAFKA_RESP_ERR_NO_ERROR)
        goto out;
    lag = 0;
    for (int i = 0; i < parts->cnt; i++) {
        int64_t lo = 0, hi = 0, at = parts->elems[i].offset;
        if (rd_kafka_query_watermark_offsets(reader, topic, parts->elems[i].partition, &lo, &hi,
                                             timeout_ms) != RD_KAFKA_RESP_ERR_NO_ERROR) {
            lag = -1;
            goto out;
        }
        if (at < lo) /* nothing committed yet (RD_KAFKA_OFFSET_INVALID) */
            at = lo;
        lag += hi > at ? hi - at : 0;
    }
out:
    if (parts != NULL)
        rd_kafka_topic_partition_list_destroy(parts);
    if (md != NULL)
        rd_kafka_metadata_destroy(md);
    if (t != NULL)
        rd_kafka_topic_destroy(t);
    return lag;
}
