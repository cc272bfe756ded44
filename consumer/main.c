/* ordergate-consumer: command line, configuration, exit status.
 *
 * Exit status: 0 stopped cleanly (SIGTERM/SIGINT, or --check-config/--help/
 * --version), 1 runtime failure, 2 bad usage or configuration. */
#include <getopt.h>
#include <libconfig.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cfg.h"
#include "common/db.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/signals.h"
#include "common/version.h"
#include "consumer/consumer.h"

#define PROG "ordergate-consumer"

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: " PROG " [OPTION]...\n"
            "Consume delayed cancel messages from Kafka and cancel due, unpaid orders through\n"
            "the database gate, in batches, at least once; relay the outbox; serve metrics.\n"
            "\n"
            "  --config FILE          libconfig file (every setting is optional; see\n"
            "                         deploy/ordergate.conf). Flags below override it.\n"
            "  --db CONNINFO          PostgreSQL connection string or URI (database.conninfo).\n"
            "                         Without one: ORDERGATE_DB, then libpq's environment\n"
            "                         (PGHOST, PGPORT, PGUSER, PGDATABASE, PGPASSWORD, ...).\n"
            "  --brokers HOST:PORT,...  Kafka bootstrap brokers (kafka.brokers; default from\n"
            "                         ORDERGATE_BROKERS, else localhost:9092).\n"
            "  --topics A,B           delay topics to consume (kafka.topics).\n"
            "  --group ID             consumer group id (kafka.group).\n"
            "  --batch-size N         most orders per claim statement, 1..10000\n"
            "                         (consumer.batch_size).\n"
            "  --metrics-listen ADDR:PORT  HTTP endpoint for /metrics, /healthz, /readyz\n"
            "                         (consumer.metrics_listen); \"\" disables it, port 0\n"
            "                         picks a free port (logged as metrics_listening).\n"
            "  --check-config         validate the configuration (file, flags, environment,\n"
            "                         kafka.properties) and exit: 0 valid, 2 invalid.\n"
            "  --help                 print this help and exit.\n"
            "  --version              print the version and exit.\n"
            "\n"
            "Signals: SIGTERM or SIGINT finishes the batch in hand, stores and commits its\n"
            "offsets, leaves the group and exits 0; a second signal exits at once.\n"
            "Exit status: 0 clean stop, 1 runtime failure, 2 bad usage or configuration.\n");
}

/* The line of a setting in the config file, or 0. */
static int config_line(const char *path, const char *setting)
{
    config_t lc;
    config_setting_t *s;
    int line = 0;

    if (path == NULL)
        return 0;
    config_init(&lc);
    if (config_read_file(&lc, path) == CONFIG_TRUE && (s = config_lookup(&lc, setting)) != NULL)
        line = config_setting_source_line(s);
    config_destroy(&lc);
    return line;
}

/* Prints a configuration error with file:line when the setting it names
 * came from the file (and not from a flag). */
static int config_error(const char *path, const bool *from_flag, const struct og_error *err)
{
    static const struct {
        const char *prefix, *setting;
        int flag; /* index into from_flag, -1: no flag sets it */
    } where[] = {
        {"kafka.topics", "kafka.topics", 2},
        {"kafka.dead_letter_topic", "kafka.dead_letter_topic", -1},
        {"kafka.payments_topic", "kafka.payments_topic", -1},
        {"kafka.properties", "kafka.properties", -1},
        {"kafka property", "kafka.properties", -1},
        {"kafka.group", "kafka.group", 3},
        {"kafka.brokers", "kafka.brokers", 1},
        {"cannot create Kafka", "kafka.properties", -1},
        {"database.password_file", "database.password_file", -1},
    };

    for (size_t i = 0; i < sizeof(where) / sizeof(where[0]); i++) {
        int line;
        if (strncmp(err->msg, where[i].prefix, strlen(where[i].prefix)) != 0)
            continue;
        if (where[i].flag >= 0 && from_flag[where[i].flag])
            break;
        line = config_line(path, where[i].setting);
        if (line > 0) {
            fprintf(stderr, PROG ": %s:%d: %s\n", path, line, err->msg);
            return 2;
        }
        break;
    }
    fprintf(stderr, PROG ": %s\n", err->msg);
    return 2;
}

int main(int argc, char **argv)
{
    enum {
        OPT_CONFIG = 256,
        OPT_DB,
        OPT_BROKERS,
        OPT_TOPICS,
        OPT_GROUP,
        OPT_BATCH,
        OPT_METRICS,
        OPT_CHECK
    };
    static const struct option options[] = {
        {"config", required_argument, NULL, OPT_CONFIG},
        {"db", required_argument, NULL, OPT_DB},
        {"brokers", required_argument, NULL, OPT_BROKERS},
        {"topics", required_argument, NULL, OPT_TOPICS},
        {"group", required_argument, NULL, OPT_GROUP},
        {"batch-size", required_argument, NULL, OPT_BATCH},
        {"metrics-listen", required_argument, NULL, OPT_METRICS},
        {"check-config", no_argument, NULL, OPT_CHECK},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    /* Flag values in the order they are applied; index = from_flag index. */
    static const char *const flag_settings[] = {"database.conninfo",   "kafka.brokers",
                                                "kafka.topics",        "kafka.group",
                                                "consumer.batch_size", "consumer.metrics_listen"};
    const char *flag_values[6] = {NULL};
    bool from_flag[6] = {false};
    const char *config_path = NULL;
    bool check = false;
    struct og_config cfg;
    struct og_error err = {0};
    struct consumer *c = NULL;
    int opt, status = 0;

    opterr = 0; /* our own one-line messages */
    while ((opt = getopt_long(argc, argv, ":hV", options, NULL)) != -1) {
        switch (opt) {
        case OPT_CONFIG:
            config_path = optarg;
            break;
        case OPT_DB:
        case OPT_BROKERS:
        case OPT_TOPICS:
        case OPT_GROUP:
        case OPT_BATCH:
        case OPT_METRICS:
            flag_values[opt - OPT_DB] = optarg;
            from_flag[opt - OPT_DB] = true;
            break;
        case OPT_CHECK:
            check = true;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            printf(PROG " %s (librdkafka %s)\n", OG_VERSION, rd_kafka_version_str());
            return 0;
        case ':':
            fprintf(stderr, PROG ": option '%s' needs a value (see --help)\n", argv[optind - 1]);
            return 2;
        default:
            fprintf(stderr, PROG ": unknown option '%s' (see --help)\n", argv[optind - 1]);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, PROG ": unexpected argument '%s' (see --help)\n", argv[optind]);
        return 2;
    }

    log_init(PROG, LOG_LVL_INFO);
    if (cfg_init(&cfg, &err) != OG_OK) {
        fprintf(stderr, PROG ": %s\n", err.msg);
        return 2;
    }
    if (config_path != NULL && cfg_load(&cfg, config_path, &err) != OG_OK) {
        fprintf(stderr, PROG ": %s\n", err.msg); /* cfg_load names file:line */
        status = 2;
        goto out;
    }
    if (cfg_apply_env(&cfg, &err) != OG_OK) {
        fprintf(stderr, PROG ": %s\n", err.msg);
        status = 2;
        goto out;
    }
    for (size_t i = 0; i < sizeof(flag_settings) / sizeof(flag_settings[0]); i++) {
        if (flag_values[i] != NULL &&
            cfg_set(&cfg, flag_settings[i], flag_values[i], &err) != OG_OK) {
            fprintf(stderr, PROG ": %s\n", err.msg);
            status = 2;
            goto out;
        }
    }
    log_set_level((enum log_level)log_level_parse(cfg.log_level));
    if (kafka_check_config(&cfg, &err) != OG_OK) {
        status = config_error(config_path, from_flag, &err);
        goto out;
    }
    {
        char *password = NULL;
        if (cfg_db_password(&cfg, &password, &err) != OG_OK) {
            status = config_error(config_path, from_flag, &err);
            goto out;
        }
        db_password_free(password);
    }
    if (check) {
        printf(PROG ": configuration OK\n");
        cfg_dump(&cfg, stdout);
        goto out;
    }

    signals_install();
    c = consumer_new(&cfg, &err);
    if (c == NULL) {
        if (err.status == OG_ERR_CONFIG) {
            status = config_error(config_path, from_flag, &err);
        } else {
            fprintf(stderr, PROG ": %s\n", err.msg);
            status = 1;
        }
        goto out;
    }
    if (metrics_http_start(cfg.metrics_listen, &err) != OG_OK) {
        fprintf(stderr, PROG ": consumer.metrics_listen %s: %s\n", cfg.metrics_listen, err.msg);
        status = err.status == OG_ERR_CONFIG ? 2 : 1;
        goto out;
    }
    if (*cfg.metrics_listen != '\0')
        log_info("metrics_listening", "listen=%s port=%d", cfg.metrics_listen, metrics_http_port());
    log_info("starting", "version=%s librdkafka=%s batch_size=%d linger_ms=%d", OG_VERSION,
             rd_kafka_version_str(), cfg.batch_size, cfg.linger_ms);
    status = consumer_run(c);
    log_info("stopped", "status=%d", status);
out:
    metrics_http_stop();
    consumer_free(c);
    cfg_free(&cfg);
    return status;
}
