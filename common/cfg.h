/* Configuration shared by every ordergate binary.
 *
 * One libconfig file (all settings optional, each has a default), then
 * command-line flags that override it. The table in cfg.c is the single
 * source of names, types, defaults, bounds and descriptions; the services' --help,
 * docs/settings.md and deploy/ordergate.conf are generated from it (common/cfg_doc.h). Strings are
 * owned by struct og_config and freed by cfg_free(). */
#ifndef OG_COMMON_CFG_H
#define OG_COMMON_CFG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "common/db.h"
#include "common/error.h"

/* Room for the settings table of cfg.c (checked there at compile time). */
#define CFG_MAX_SETTINGS 96

/* Where a setting's current value came from: a line of the file cfg_load read, a flag, or
 * neither (default, environment, cfg_set). */
struct cfg_source {
    int line;         /* > 0: this line of og_config.source_path */
    const char *flag; /* the option's name without dashes ("batch-size"), not owned, or NULL */
};

/* The configuration of a run: one nested struct per group of the file, each field named like its
 * setting (database.retry_max is cfg->database.retry_max). The table in cfg.c says each one's
 * type, default, bounds and meaning (docs/settings.md). */
struct og_config {
    char *log_level;

    struct cfg_database {
        char *conninfo;      /* "" = libpq's environment (PGHOST, PGPORT, ...) */
        char *password_file; /* read once; never logged */
        int retry_max;       /* attempts for a transient failure before giving up */
        int retry_base_ms;   /* first backoff; doubles up to retry_cap_ms */
        int retry_cap_ms;
        int lock_timeout_ms;      /* each transaction's lock_timeout; 0 = the server's */
        int statement_timeout_ms; /* each transaction's statement_timeout; 0 = the server's */
        char *pool_mode; /* "session" | "transaction" (a transaction-pooling PgBouncer in front) */
    } database;

    struct cfg_kafka {
        char *brokers;      /* bootstrap.servers */
        char *topics;       /* comma-separated delay topics */
        char *topic_levels; /* one delay level per topic ("15m,30m"); "" = from the names */
        char *group;
        char *group_instance_id; /* static membership; "" = derived (kafka_group_instance_id) */
        char *dead_letter_topic;
        char *payments_topic;       /* "" = not consumed */
        char *refund_results_topic; /* "" = not consumed */
        char **properties;          /* "name=value", passed verbatim to rd_kafka_conf_set */
        size_t properties_n;
        char *sasl_password_file; /* sasl.password from this file; "" = none; never logged */
        int queued_max_kbytes;    /* prefetch bound per partition: keeps memory flat */
        int replication; /* replicas of each topic ordergatectl topics creates; 0 = broker's */
    } kafka;

    struct cfg_consumer {
        int batch_size;
        int linger_ms;
        int poll_ms;
        char *metrics_listen;        /* "ADDR:PORT"; "" disables the HTTP endpoint */
        int metrics_per_ip_limit;    /* HTTP connections one peer address holds at once */
        int metrics_max_connections; /* HTTP connections of all peers; above the per-peer limit */
        int metrics_timeout_s;       /* an HTTP connection idle this long is closed */
        char *health_file;           /* heartbeat of the loop for --check-health; "" = none */
        int health_db_call_ms; /* /healthz and /readyz fail while a call runs longer; 0 = never */
        int busy_retry_ms; /* a locked order is re-claimed locally this long, then re-scheduled */
        int hook_retry_ms; /* an order a hook fails is re-claimed this long, then dead-lettered */
        int allow_nondurable; /* run (warning, metric) on a server whose commits may be lost */
        int local_due_ms;     /* an order not due for less than this is re-claimed locally */
        int level_margin_ms;  /* a due time this far beyond its topic's level is claimed at once */
        int max_wait_ms;      /* the level of delay topics when none has one */
        int claim_sessions;   /* database sessions one batch's claim is split across, 1..8 */
    } consumer;

    struct cfg_outbox {
        int enabled;
        char *topic;        /* order_paid / order_cancelled events */
        char *refund_topic; /* refund_requested */
        char *alert_topic;  /* reconciliation_alert */
        int batch;
        int interval_ms;
    } outbox;

    struct cfg_scanner {
        int grace_s;
        int batch_size;
        int pause_ms;
        int max_orders;         /* per run; 0 = no cap */
        int max_seconds;        /* per run; 0 = no cap */
        int every_s;            /* 0 = one run per invocation */
        int workers;            /* claiming sessions per run (1 = the run's own session) */
        int max_skip_s;         /* 0 = 3 x every_s, or 180 when every_s is 0 */
        int busy_retry_ms;      /* locked orders are claimed again for this long at a run's end */
        int lease_s;            /* the sweep lease lasts this + pause_ms past each batch */
        char *textfile_path;    /* Prometheus textfile for node_exporter; "" = none */
        int reconcile_window_s; /* --reconcile without --since: this many seconds; 0 = all */
    } scanner;

    struct cfg_console {
        char *listen;         /* "ADDR:PORT" of the web console */
        char *tls_cert_file;  /* PEM certificate chain; "" = plain HTTP */
        char *tls_key_file;   /* PEM private key of tls_cert_file; never logged */
        int allow_plain_http; /* plain HTTP on an address other than loopback */
        int session_idle_s;   /* a session unused this long is closed */
        int max_sessions;     /* sessions (each one database connection) at once */
        int login_failures;   /* failed logins one address may make per minute */
        int max_connections;  /* HTTP connections at once */
        int timeout_s;        /* an HTTP connection idle this long is closed */
    } console;

    /* Where each value came from, indexed like the table in cfg.c; cfg_error_format() reads
     * it to say "FILE:LINE" or "--flag" in front of an error about a setting. */
    char *source_path; /* the file cfg_load read, or NULL */
    struct cfg_source source[CFG_MAX_SETTINGS];
};

/* The programs that read a setting (struct cfg_setting_info.progs). */
enum { CFG_PROG_CONSUMER = 1, CFG_PROG_SCANNER = 2, CFG_PROG_CTL = 4, CFG_PROG_CONSOLE = 8 };

/* One row of the settings table, for listings (--list-settings) and the generated reference
 * (common/cfg_doc.h). Every string lives as long as the program. */
struct cfg_setting_info {
    const char *name;        /* dotted name, as in the file */
    const char *type;        /* "string", "int", "bool" or "strlist" */
    const char *def;         /* the default, as text */
    long min, max;           /* bounds of an "int" */
    bool secret;             /* masked by cfg_dump */
    unsigned progs;          /* CFG_PROG_*: the programs that read it */
    const char *env;         /* environment fallback used while it has its default, or NULL */
    const char *description; /* what it does, its unit, when to change it: sentences */
};

/* One group of settings ("database"; "" for the settings outside any group), in file order. */
struct cfg_section_info {
    const char *name;
    const char *description; /* one or two sentences */
};

/* Fills every field with its default. */
enum og_status cfg_init(struct og_config *cfg, struct og_error *err);
/* Reads a libconfig file over the current values and records the line of each setting it
 * sets. An error about one setting names it in err->setting (cfg_error_format() adds the
 * file:line); an unknown setting or a syntax error carries file:line in its message. */
enum og_status cfg_load(struct og_config *cfg, const char *path, struct og_error *err);
/* Applies the environment fallbacks of the table (struct cfg_setting_info.env: ORDERGATE_DB,
 * ORDERGATE_DB_PASSWORD_FILE, ORDERGATE_BROKERS, ORDERGATE_KAFKA_SASL_PASSWORD_FILE) to the
 * settings that still have their default; an empty variable is ignored. */
enum og_status cfg_apply_env(struct og_config *cfg, struct og_error *err);
/* Sets one setting by its dotted name (e.g. "consumer.batch_size") from a string, with the
 * same validation as the file. Errors are OG_ERR_CONFIG, "<name>: <problem>", with
 * err->setting = name. */
enum og_status cfg_set(struct og_config *cfg, const char *name, const char *value,
                       struct og_error *err);
/* cfg_set for a command-line option: records `flag` (the option's name without dashes, a
 * string that outlives cfg) as where the value came from. */
enum og_status cfg_set_flag(struct og_config *cfg, const char *name, const char *value,
                            const char *flag, struct og_error *err);
/* The error as an operator reads it: "FILE:LINE: " or "--flag: " in front of the message
 * when err->setting names a setting whose value came from the file or a flag, else the
 * message alone. Writes into buf and returns it. */
const char *cfg_error_format(const struct og_config *cfg, const struct og_error *err, char *buf,
                             size_t size);
/* Row i of the settings table (0-based), in table order; false past the last row. */
bool cfg_setting_info(size_t i, struct cfg_setting_info *info);
/* Group i (0-based), in the order of the table; false past the last one. A setting belongs to
 * the group its name starts with ("database.conninfo": "database"; "log_level": ""). */
bool cfg_section_info(size_t i, struct cfg_section_info *info);
/* Prints every setting as "name = value" (secrets masked). */
void cfg_dump(const struct og_config *cfg, FILE *out);
/* The session bounds of database.lock_timeout_ms and database.statement_timeout_ms, and
 * database.pool_mode. */
struct db_session cfg_db_session(const struct og_config *cfg);
/* Reads database.password_file when set: *password is NULL when no file is
 * configured (libpq then uses PGPASSWORD or ~/.pgpass). The caller releases
 * it with db_password_free, which wipes it. */
enum og_status cfg_db_password(const struct og_config *cfg, char **password, struct og_error *err);
/* The retry policy of database.retry_max, database.retry_base_ms and database.retry_cap_ms. */
struct db_retry cfg_db_retry(const struct og_config *cfg);

/* What a caller of cfg_db_open changes from the configuration; NULL changes nothing. */
struct cfg_db_open_opts {
    /* > 0: at most this many attempts per call, fewer than database.retry_max when that is
     * larger (a loop that must not block longer than a bound of its own) */
    int max_attempts;
    /* No lock_timeout or statement_timeout (an operator's tool: a migration may take long);
     * database.pool_mode still says how to talk to the server. */
    bool no_bounds;
};

/* The one way a program opens a database from its configuration: a handle on
 * database.conninfo with the password of database.password_file (read here and wiped once
 * copied), the retry policy of cfg_db_retry, the session of cfg_db_session, app_name (the actor
 * the gate records) and stop (aborts retries at shutdown; may be NULL). Does not connect
 * (db_connect, or the first db_call, does). *out is NULL unless OG_OK; an unreadable password
 * file is OG_ERR_CONFIG naming the file. */
enum og_status cfg_db_open(const struct og_config *cfg, const char *app_name,
                           const struct cfg_db_open_opts *opts, volatile sig_atomic_t *stop,
                           struct db **out, struct og_error *err);
void cfg_free(struct og_config *cfg);

/* Setting i's value in cfg as text, for a writer that walks the table (common/cfg_write.h): a
 * string as it is, an int in decimal (formatted into buf of size bytes), a bool as "true" or
 * "false", element j of a "strlist". NULL past the last row, past a list's last element, and
 * for j > 0 of a setting that is not a list. Secrets are not masked. */
const char *cfg_setting_value(const struct og_config *cfg, size_t i, size_t j, char *buf,
                              size_t size);

#endif
