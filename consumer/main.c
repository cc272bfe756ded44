/* ordergate-consumer: command line, configuration, exit status. Builds the consumer
 * (consumer_new), runs its loop (loop_run) and frees it; reads nothing of the consumer but
 * c->abandon (everything but this file is the og_consumer library).
 *
 * Exit status: 0 stopped cleanly (SIGTERM/SIGINT, or --check-config/--help/
 * --version), 1 runtime failure, 2 bad usage or configuration (also: the
 * broker fenced our group.instance.id, which another instance uses too, or
 * refused the SASL login or TLS certificate at start). */
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cfg.h"
#include "common/cfg_doc.h"
#include "common/clock.h"
#include "common/db.h"
#include "common/health.h"
#include "common/kafka.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/opt.h"
#include "common/signals.h"
#include "common/version.h"
#include "consumer/consumer.h"
#include "consumer/loop.h"

#define PROG "ordergate-consumer"

/* The options come from opt_services with the settings' defaults and bounds (opt_help); this
 * says only what the program does, how it stops and how it exits. */
static void usage(FILE *out)
{
    fprintf(out,
            "Usage: " PROG " [OPTION]...\n"
            "Consume delayed cancel messages from Kafka and cancel due, unpaid orders through\n"
            "the database gate, in batches, at least once; relay the outbox; serve metrics.\n"
            "Every setting and its meaning: docs/settings.md.\n"
            "\n");
    opt_help(out, opt_services, OPT_CONSUMER);
    fprintf(out, "\n"
                 "Signals: SIGTERM or SIGINT finishes the batch in hand, stores and commits its\n"
                 "offsets, leaves the group and exits 0; a second signal exits at once.\n"
                 "Exit status: 0 clean stop, 1 runtime failure, 2 bad usage or configuration\n"
                 "(also when another instance runs with the same group instance id, or when the\n"
                 "broker refuses the SASL login or the TLS certificate at start).\n");
}

/* --check-health, --check-ready: the verdict on the health file, one line on stdout (a probe's
 * output is what Kubernetes and Docker show for a failure). */
static int main_check_health(const struct og_config *cfg, bool want_ready)
{
    char msg[512];

    if (*cfg->consumer.health_file == '\0') {
        fprintf(stderr, PROG ": --check-health needs consumer.health_file (the file a running "
                             "consumer rewrites)\n");
        return 2;
    }
    if (health_file_check(cfg->consumer.health_file, want_ready, (long long)clock_mono_ms(), msg,
                          sizeof(msg)) != HEALTH_OK) {
        printf("%s\n", msg);
        return 1;
    }
    printf("%s\n", msg);
    return 0;
}

int main(int argc, char **argv)
{
    struct opt_args args = {0};
    struct og_config cfg;
    struct og_error err = {0};
    struct consumer *c = NULL;
    struct metrics_http_limits limits = {0};
    bool health_owned = false;
    int status = 0;

    memset(&cfg, 0, sizeof(cfg));
    log_init(PROG, LOG_LVL_INFO);
    if (opt_parse(&args, opt_services, NULL, OPT_CONSUMER, argc - 1, argv + 1, &err) != OG_OK) {
        status = 2;
        goto report;
    }
    if (args.npos > 0) {
        og_error_set(&err, OG_ERR_ARG, false, "unexpected argument '%s'", args.pos[0]);
        status = 2;
        goto report;
    }
    if (opt_flag(&args, "help")) {
        usage(stdout);
        goto out;
    }
    if (opt_flag(&args, "version")) {
        printf(PROG " %s (librdkafka %s)\n", OG_VERSION, rd_kafka_version_str());
        goto out;
    }
    if (opt_flag(&args, "list-settings")) {
        if (cfg_doc_list(stdout, OPT_CONSUMER, opt_arg(&args, "list-settings"), &err) == OG_OK)
            goto out;
        status = 2;
        goto report;
    }
    /* Every check a start would make, short of connecting: the file, the environment, the
     * flags, then the Kafka and outbox settings (consumer_check_config, what consumer_new
     * checks), the metrics endpoint's settings and the password file. */
    if (opt_configure(&cfg, &args, &err) != OG_OK) {
        status = 2;
        goto report;
    }
    limits = (struct metrics_http_limits){(unsigned)cfg.consumer.metrics_per_ip_limit,
                                          (unsigned)cfg.consumer.metrics_max_connections,
                                          (unsigned)cfg.consumer.metrics_timeout_s};
    /* A probe: before anything that could fail for reasons of its own (Kafka's settings, the
     * password file), and it says nothing on stderr when all is well. */
    if (opt_flag(&args, "check-health") || opt_flag(&args, "check-ready")) {
        status = main_check_health(&cfg, opt_flag(&args, "check-ready"));
        goto out;
    }
    if (consumer_check_config(&cfg, &err) != OG_OK) {
        status = 2;
        goto report;
    }
    if (metrics_http_check("", &limits, &err) != OG_OK) {
        og_error_prefix(&err, "consumer.metrics_per_ip_limit, consumer.metrics_max_connections");
        status = 2;
        goto report;
    }
    if (metrics_http_check(cfg.consumer.metrics_listen, NULL, &err) != OG_OK) {
        og_error_prefix(&err, "consumer.metrics_listen %s", cfg.consumer.metrics_listen);
        status = 2;
        goto report;
    }
    log_set_level((enum log_level)log_level_parse(cfg.log_level));
    {
        char *password = NULL;
        if (cfg_db_password(&cfg, &password, &err) != OG_OK) {
            status = 2;
            goto report;
        }
        db_password_free(password);
    }
    if (opt_flag(&args, "check-config")) {
        printf(PROG ": configuration OK\n");
        cfg_dump(&cfg, stdout);
        goto out;
    }

    signals_install();
    /* A SASL login or TLS certificate the broker refuses would otherwise be retried by every
     * client for ever: one line and exit 2. Brokers that are merely down are waited for by
     * the clients, as always. */
    if (kafka_connect_check(&cfg, PROG "-check", KAFKA_CONNECT_CHECK_MS, &err) != OG_OK) {
        char q[600];
        if (err.status == OG_ERR_CONFIG) {
            status = 2;
            goto report;
        }
        log_warn("kafka_unreachable", "error=%s note=\"starting anyway; the clients keep trying\"",
                 log_quote(q, sizeof(q), err.msg));
        og_error_clear(&err);
    }
    /* A heartbeat left by an earlier run (a restarted container keeps its volume) must not
     * pass for this one: until the loop writes, --check-health says missing. */
    health_file_remove(cfg.consumer.health_file);
    health_owned = true;
    c = consumer_new(&cfg, &err);
    if (c == NULL) {
        status = err.status == OG_ERR_CONFIG ? 2 : 1;
        goto report;
    }
    if (metrics_http_start_bounded(cfg.consumer.metrics_listen, &limits, &err) != OG_OK) {
        og_error_prefix(&err, "consumer.metrics_listen %s", cfg.consumer.metrics_listen);
        status = err.status == OG_ERR_CONFIG ? 2 : 1;
        goto report;
    }
    if (*cfg.consumer.metrics_listen != '\0')
        log_info("metrics_listening", "listen=%s port=%d", cfg.consumer.metrics_listen,
                 metrics_http_port());
    log_info("starting", "version=%s librdkafka=%s batch_size=%d linger_ms=%d", OG_VERSION,
             rd_kafka_version_str(), cfg.consumer.batch_size, cfg.consumer.linger_ms);
    status = loop_run(c);
    log_info("stopped", "status=%d", status);
    if (c->abandon) {
        /* The group membership or the relay thread did not stop in time (loop_shutdown):
         * taking them down would wait again, and the relay may still use c and cfg. The
         * process's exit ends them; nothing is lost (offsets follow the database commit). */
        health_file_remove(cfg.consumer.health_file);
        fflush(NULL);
        _exit(status);
    }
    goto out;
report:
    opt_error_print(PROG, &cfg, &err);
out:
    /* Only a run removes its file: a --check-config beside a running consumer must not. */
    if (health_owned)
        health_file_remove(cfg.consumer.health_file);
    metrics_http_stop();
    consumer_free(c);
    cfg_free(&cfg);
    opt_args_free(&args);
    return status;
}
