/* ordergate-scanner: the fallback sweep, run by cron, a systemd timer or a
 * Kubernetes CronJob (one run per invocation), or by itself with --every;
 * also --dry-run and --reconcile. See docs/scanner.md.
 *
 * Exit status: 0 done (also: skipped because another run holds the lock,
 * stopped by SIGTERM, a clean reconciliation), 1 runtime failure, 2 bad usage
 * or configuration, 3 reconciliation found violations. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cfg.h"
#include "common/clock.h"
#include "common/db.h"
#include "common/log.h"
#include "common/signals.h"
#include "common/version.h"
#include "scanner/reconcile.h"
#include "scanner/scanner_metrics.h"
#include "scanner/sweep.h"

#define SCANNER_PROG "ordergate-scanner"

enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2, EXIT_VIOLATIONS = 3 };

/* A flag that sets a configuration setting, applied after the file. */
struct scanner_flag_setting {
    const char *flag;    /* as the user typed it, for messages */
    const char *setting; /* dotted name in common/cfg.c */
    const char *value;
};

#define SCANNER_MAX_FLAGS 32

struct scanner_args {
    const char *config_path;
    struct scanner_flag_setting settings[SCANNER_MAX_FLAGS];
    int nsettings;
    bool dry_run;
    bool reconcile;
    bool check_config;
    const char *since_arg;
    char since[40];      /* normalized RFC 3339, "" = every order */
    int scan_interval_s; /* 0 = not given */
};

enum {
    OPT_CONFIG = 256,
    OPT_DB,
    OPT_BROKERS,
    OPT_TOPICS,
    OPT_GROUP,
    OPT_GRACE,
    OPT_BATCH,
    OPT_PAUSE,
    OPT_MAX_ORDERS,
    OPT_MAX_SECONDS,
    OPT_EVERY,
    OPT_WORKERS,
    OPT_TEXTFILE,
    OPT_LOG_LEVEL,
    OPT_DRY_RUN,
    OPT_RECONCILE,
    OPT_SINCE,
    OPT_SCAN_INTERVAL,
    OPT_CHECK_CONFIG,
};

static const struct option scanner_options[] = {
    {"config", required_argument, NULL, OPT_CONFIG},
    {"db", required_argument, NULL, OPT_DB},
    {"brokers", required_argument, NULL, OPT_BROKERS},
    {"topics", required_argument, NULL, OPT_TOPICS},
    {"group", required_argument, NULL, OPT_GROUP},
    {"grace", required_argument, NULL, OPT_GRACE},
    {"batch-size", required_argument, NULL, OPT_BATCH},
    {"pause-ms", required_argument, NULL, OPT_PAUSE},
    {"max-orders", required_argument, NULL, OPT_MAX_ORDERS},
    {"max-seconds", required_argument, NULL, OPT_MAX_SECONDS},
    {"every", required_argument, NULL, OPT_EVERY},
    {"workers", required_argument, NULL, OPT_WORKERS},
    {"textfile", required_argument, NULL, OPT_TEXTFILE},
    {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
    {"dry-run", no_argument, NULL, OPT_DRY_RUN},
    {"reconcile", no_argument, NULL, OPT_RECONCILE},
    {"since", required_argument, NULL, OPT_SINCE},
    {"scan-interval", required_argument, NULL, OPT_SCAN_INTERVAL},
    {"check-config", no_argument, NULL, OPT_CHECK_CONFIG},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

static void scanner_usage(FILE *out)
{
    fprintf(
        out,
        "usage: " SCANNER_PROG " [options]\n"
        "\n"
        "Cancels pending orders whose payment window closed more than a grace period ago\n"
        "and that the consumer missed: one run per invocation (cron, systemd timer,\n"
        "Kubernetes CronJob), or repeated with --every. Every cancel goes through the gate\n"
        "(claim_cancel, source timeout_scanner); a run is logged in ordergate.scanner_runs.\n"
        "\n"
        "modes:\n"
        "  (default)              one sweep run\n"
        "  --dry-run              report what a sweep would cancel now; change nothing\n"
        "  --reconcile            check the seven invariants, repair missing late-payment\n"
        "                         exceptions (not with --dry-run), print a report\n"
        "  --every SECONDS        repeat sweep runs every SECONDS until SIGTERM/SIGINT\n"
        "  --check-config         validate the configuration and flags, print them, exit\n"
        "\n"
        "options (override the configuration file):\n"
        "  --config FILE          libconfig file (every setting optional)\n"
        "  --db CONNINFO          libpq conninfo or URI; default: libpq's environment\n"
        "                         (PGHOST, PGPORT, PGUSER, PGDATABASE, PGPASSWORD, ...)\n"
        "  --grace SECONDS        only orders overdue by more than this (scanner.grace_s)\n"
        "  --batch-size N         orders per claim, 1..10000 (scanner.batch_size)\n"
        "  --pause-ms MS          pause between batches (scanner.pause_ms)\n"
        "  --max-orders N         cap per run, 0 = none (scanner.max_orders)\n"
        "  --max-seconds S        time cap per run, 0 = none (scanner.max_seconds)\n"
        "  --workers N            database sessions that claim pages in parallel, 1..16;\n"
        "                         the run's own session reads the pages (scanner.workers)\n"
        "  --textfile PATH        Prometheus textfile for node_exporter (scanner.textfile_path)\n"
        "  --since TIME           --reconcile: only orders created since TIME (RFC 3339,\n"
        "                         e.g. 2026-11-30T00:00:00Z, or an age such as 90m, 24h, 7d)\n"
        "  --scan-interval S      --reconcile: how often sweeps run (invariant 6); default\n"
        "                         scanner.every_s when set, else 300\n"
        "  --log-level LEVEL      debug, info, warn or error\n"
        "  --brokers, --topics, --group   accepted for a command line shared with the\n"
        "                         consumer; the scanner does not use Kafka\n"
        "  -h, --help             this text\n"
        "  -V, --version          print the version\n"
        "\n"
        "exit status: 0 done (or skipped: another run holds the lock), 1 runtime failure,\n"
        "2 bad usage or configuration, 3 reconciliation found violations\n");
}

static int scanner_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Prints "ordergate-scanner: <message>" and a hint; returns exit status 2. */
static int scanner_usage_error(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, SCANNER_PROG ": ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry '" SCANNER_PROG " --help'.\n");
    return EXIT_USAGE;
}

static void scanner_add_setting(struct scanner_args *a, const char *flag, const char *setting,
                                const char *value)
{
    if (a->nsettings < SCANNER_MAX_FLAGS)
        a->settings[a->nsettings++] = (struct scanner_flag_setting){flag, setting, value};
}

/* --since: RFC 3339, or an age N with unit s, m, h or d counted back from now. */
static int scanner_parse_since(const char *arg, char *out, size_t size)
{
    int64_t ms;
    char *end = NULL;
    long long n;

    if (clock_parse_iso(arg, strlen(arg), &ms) == 0) {
        clock_format_iso(ms, out, size);
        return 0;
    }
    errno = 0;
    n = strtoll(arg, &end, 10);
    if (errno != 0 || end == arg || n < 0 || n > 100LL * 365 * 86400 || end[0] == '\0' ||
        end[1] != '\0')
        return -1;
    switch (end[0]) {
    case 's':
        break;
    case 'm':
        n *= 60;
        break;
    case 'h':
        n *= 3600;
        break;
    case 'd':
        n *= 86400;
        break;
    default:
        return -1;
    }
    clock_format_iso(clock_wall_ms() - (int64_t)n * 1000, out, size);
    return 0;
}

/* Returns -1 to go on, or the exit status. */
static int scanner_parse_args(int argc, char **argv, struct scanner_args *a)
{
    int c;

    memset(a, 0, sizeof(*a));
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":hV", scanner_options, NULL)) != -1) {
        switch (c) {
        case OPT_CONFIG:
            a->config_path = optarg;
            break;
        case OPT_DB:
            scanner_add_setting(a, "--db", "database.conninfo", optarg);
            break;
        case OPT_BROKERS:
            scanner_add_setting(a, "--brokers", "kafka.brokers", optarg);
            break;
        case OPT_TOPICS:
            scanner_add_setting(a, "--topics", "kafka.topics", optarg);
            break;
        case OPT_GROUP:
            scanner_add_setting(a, "--group", "kafka.group", optarg);
            break;
        case OPT_GRACE:
            scanner_add_setting(a, "--grace", "scanner.grace_s", optarg);
            break;
        case OPT_BATCH:
            scanner_add_setting(a, "--batch-size", "scanner.batch_size", optarg);
            break;
        case OPT_PAUSE:
            scanner_add_setting(a, "--pause-ms", "scanner.pause_ms", optarg);
            break;
        case OPT_MAX_ORDERS:
            scanner_add_setting(a, "--max-orders", "scanner.max_orders", optarg);
            break;
        case OPT_MAX_SECONDS:
            scanner_add_setting(a, "--max-seconds", "scanner.max_seconds", optarg);
            break;
        case OPT_EVERY:
            scanner_add_setting(a, "--every", "scanner.every_s", optarg);
            break;
        case OPT_WORKERS:
            scanner_add_setting(a, "--workers", "scanner.workers", optarg);
            break;
        case OPT_TEXTFILE:
            scanner_add_setting(a, "--textfile", "scanner.textfile_path", optarg);
            break;
        case OPT_LOG_LEVEL:
            scanner_add_setting(a, "--log-level", "log_level", optarg);
            break;
        case OPT_DRY_RUN:
            a->dry_run = true;
            break;
        case OPT_RECONCILE:
            a->reconcile = true;
            break;
        case OPT_SINCE:
            a->since_arg = optarg;
            if (scanner_parse_since(optarg, a->since, sizeof(a->since)) != 0)
                return scanner_usage_error("--since: '%s' is neither an RFC 3339 time (e.g. "
                                           "2026-11-30T00:00:00Z) nor an age such as 90m, 24h, "
                                           "7d",
                                           optarg);
            break;
        case OPT_SCAN_INTERVAL: {
            char *end = NULL;
            long v;
            errno = 0;
            v = strtol(optarg, &end, 10);
            if (errno != 0 || end == optarg || *end != '\0' || v < 1 || v > 7L * 86400)
                return scanner_usage_error("--scan-interval: '%s' is not a number of seconds "
                                           "in [1, 604800]",
                                           optarg);
            a->scan_interval_s = (int)v;
            break;
        }
        case OPT_CHECK_CONFIG:
            a->check_config = true;
            break;
        case 'h':
            scanner_usage(stdout);
            return EXIT_OK;
        case 'V':
            printf(SCANNER_PROG " %s (libpq %d)\n", OG_VERSION, PQlibVersion());
            return EXIT_OK;
        case ':':
            return scanner_usage_error("%s: missing value", argv[optind - 1]);
        default:
            return scanner_usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (a->nsettings == SCANNER_MAX_FLAGS)
        return scanner_usage_error("too many options");
    if (optind < argc)
        return scanner_usage_error("unexpected argument '%s'", argv[optind]);
    if (a->dry_run && a->check_config)
        return scanner_usage_error("--check-config and --dry-run exclude each other");
    if (!a->reconcile && (a->since_arg != NULL || a->scan_interval_s > 0))
        return scanner_usage_error("%s applies to --reconcile only",
                                   a->since_arg != NULL ? "--since" : "--scan-interval");
    return -1;
}

/* Loads the file, the environment defaults, then the flags. */
static int scanner_configure(const struct scanner_args *a, struct og_config *cfg)
{
    struct og_error err = {0};

    if (cfg_init(cfg, &err) != OG_OK)
        return scanner_usage_error("%s", err.msg);
    if (a->config_path != NULL && cfg_load(cfg, a->config_path, &err) != OG_OK)
        return scanner_usage_error("--config: %s", err.msg);
    if (cfg_apply_env(cfg, &err) != OG_OK)
        return scanner_usage_error("%s", err.msg);
    for (int i = 0; i < a->nsettings; i++) {
        const struct scanner_flag_setting *s = &a->settings[i];
        if (cfg_set(cfg, s->setting, s->value, &err) != OG_OK)
            return scanner_usage_error("%s: %s", s->flag, err.msg);
    }
    if (cfg->scan_every_s > 0 && (a->reconcile || a->dry_run))
        return scanner_usage_error("--every (scanner.every_s) repeats sweeps; it cannot be "
                                   "combined with %s",
                                   a->reconcile ? "--reconcile" : "--dry-run");
    return -1;
}

static void scanner_write_metrics(const struct og_config *cfg, int *exit_code)
{
    struct og_error err = {0};
    char q[600];

    if (scanner_metrics_write(cfg->textfile_path, &err) != OG_OK) {
        /* The alarm cannot reach monitoring: cron must hear about it. */
        log_error("scanner_textfile_failed", "path=%s error=%s", cfg->textfile_path,
                  log_quote(q, sizeof(q), err.msg));
        *exit_code = EXIT_RUNTIME;
    }
}

static int scanner_sweep_once(struct db *db, struct db **claim_dbs, const struct og_config *cfg)
{
    struct sweep_params p = {
        .grace_s = cfg->grace_s,
        .batch_size = cfg->scan_batch_size,
        .pause_ms = cfg->scan_pause_ms,
        .max_orders = cfg->scan_max_orders,
        .max_seconds = cfg->scan_max_seconds,
        .claim_dbs = claim_dbs,
        .nclaim = claim_dbs != NULL ? cfg->scan_workers : 0,
        .idle_timeout_ms = 60000L + cfg->scan_pause_ms + 1000L * cfg->scan_every_s,
        .stop = &signals_stop,
        .on_batch = scanner_metrics_batch,
    };
    struct sweep_result res;
    struct og_error err = {0};
    int code;

    sweep_run(db, &p, &res, &err);
    scanner_metrics_record(&res);
    code = res.status == SWEEP_FAILED ? EXIT_RUNTIME : EXIT_OK;
    scanner_write_metrics(cfg, &code);
    return code;
}

/* --every: a run every `every_s` seconds, start to start (a run longer than
 * the interval is followed at once by the next, without catching up on the
 * missed ones). A failed run is logged and recorded; the loop goes on, as a
 * cron schedule would. Ends with 0 on SIGTERM/SIGINT. */
static int scanner_sweep_every(struct db *db, struct db **claim_dbs, const struct og_config *cfg)
{
    int64_t next = clock_mono_ms();
    int64_t runs = 0;

    log_info("scanner_every_started", "every_s=%d", cfg->scan_every_s);
    while (!signals_stop) {
        int64_t now;

        scanner_sweep_once(db, claim_dbs, cfg);
        runs++;
        next += (int64_t)cfg->scan_every_s * 1000;
        now = clock_mono_ms();
        if (next < now)
            next = now;
        clock_sleep_until_flag((long)(next - now), &signals_stop, NULL);
    }
    log_info("scanner_every_stopped", "runs=%" PRId64, runs);
    return EXIT_OK;
}

static int scanner_dry_run(struct db *db, const struct og_config *cfg)
{
    struct sweep_preview pv;
    struct og_error err = {0};
    char q[600];
    int64_t would;

    if (sweep_preview(db, cfg->grace_s, &pv, &err) != OG_OK) {
        log_error("scanner_dry_run_failed", "error=%s", log_quote(q, sizeof(q), err.msg));
        return EXIT_RUNTIME;
    }
    would = pv.overdue;
    if (cfg->scan_max_orders > 0 && would > cfg->scan_max_orders)
        would = cfg->scan_max_orders;
    printf("dry run: %" PRId64 " pending order%s overdue by more than %d s (database clock)%s%s\n",
           pv.overdue, pv.overdue == 1 ? " is" : "s are", cfg->grace_s,
           pv.oldest_expire_at[0] ? "; oldest expire_at " : "", pv.oldest_expire_at);
    printf("a sweep now would claim %" PRId64 " of them%s; nothing was changed\n", would,
           would < pv.overdue ? " (capped by scanner.max_orders)" : "");
    for (int i = 0; i < pv.nsample; i++)
        printf("  %s  expire_at %s\n", pv.sample[i], pv.sample_expire_at[i]);
    if (pv.overdue > pv.nsample)
        printf("  ... and %" PRId64 " more\n", pv.overdue - pv.nsample);
    fflush(stdout);
    log_info("scanner_dry_run", "overdue=%" PRId64 " would_claim=%" PRId64 " grace_s=%d",
             pv.overdue, would, cfg->grace_s);
    return EXIT_OK;
}

static int scanner_reconcile(struct db *db, const struct og_config *cfg,
                             const struct scanner_args *a)
{
    struct reconcile_params p = {
        .since = a->since[0] ? a->since : NULL,
        .grace_s = cfg->grace_s,
        .scan_interval_s = a->scan_interval_s > 0
                               ? a->scan_interval_s
                               : (cfg->scan_every_s > 0 ? cfg->scan_every_s : 300),
        .repair = !a->dry_run,
    };
    struct reconcile_result r;
    struct og_error err = {0};
    char q[600];
    int code;

    if (reconcile_run(db, &p, stdout, &r, &err) != OG_OK) {
        log_error("reconcile_failed", "error=%s", log_quote(q, sizeof(q), err.msg));
        scanner_metrics_record_reconcile(NULL);
        code = EXIT_RUNTIME;
    } else {
        scanner_metrics_record_reconcile(&r);
        code = r.invariants_violated > 0 ? EXIT_VIOLATIONS : EXIT_OK;
    }
    scanner_write_metrics(cfg, &code);
    return code;
}

/* --workers N > 1: N more sessions that only claim (connected on first use,
 * reconnected by db_call like the run's own). */
static int scanner_claim_open(const struct og_config *cfg, const char *password,
                              struct db **claim_dbs)
{
    if (cfg->scan_workers <= 1)
        return EXIT_OK;
    for (int i = 0; i < cfg->scan_workers && i < SCANNER_WORKERS_MAX; i++) {
        claim_dbs[i] = db_new(
            cfg->db_conninfo, password, SCANNER_PROG,
            &(struct db_retry){cfg->db_retry_max, cfg->db_retry_base_ms, cfg->db_retry_cap_ms},
            &signals_stop);
        if (claim_dbs[i] == NULL) {
            log_error("scanner_start_failed", "error=\"out of memory\"");
            return EXIT_RUNTIME;
        }
    }
    return EXIT_OK;
}

int main(int argc, char **argv)
{
    struct scanner_args args;
    struct og_config cfg;
    struct og_error err = {0};
    struct db *db = NULL;
    struct db *claim_dbs[SCANNER_WORKERS_MAX] = {NULL};
    char *password = NULL;
    int code;
    char q[600];

    log_init(SCANNER_PROG, LOG_LVL_INFO);
    memset(&cfg, 0, sizeof(cfg));
    code = scanner_parse_args(argc, argv, &args);
    if (code >= 0)
        goto out;
    code = scanner_configure(&args, &cfg);
    if (code >= 0)
        goto out;
    code = EXIT_OK;
    log_set_level((enum log_level)log_level_parse(cfg.log_level));
    if (args.check_config) {
        cfg_dump(&cfg, stdout);
        printf("mode = %s\n",
               args.reconcile ? "reconcile" : (cfg.scan_every_s > 0 ? "every" : "sweep"));
        goto out;
    }
    if (cfg_db_password(&cfg, &password, &err) != OG_OK) {
        code = scanner_usage_error("%s", err.msg);
        goto out;
    }
    if ((args.reconcile ? scanner_metrics_init_reconcile(&err) : scanner_metrics_init(&err)) !=
        OG_OK) {
        log_error("scanner_metrics_failed", "error=%s", log_quote(q, sizeof(q), err.msg));
        code = EXIT_RUNTIME;
        goto out;
    }
    signals_install();
    db = db_new(cfg.db_conninfo, password, SCANNER_PROG,
                &(struct db_retry){cfg.db_retry_max, cfg.db_retry_base_ms, cfg.db_retry_cap_ms},
                &signals_stop);
    if (db == NULL) {
        log_error("scanner_start_failed", "error=\"out of memory\"");
        code = EXIT_RUNTIME;
        goto out;
    }
    if (args.reconcile)
        code = scanner_reconcile(db, &cfg, &args);
    else if (args.dry_run)
        code = scanner_dry_run(db, &cfg);
    else {
        struct db **claim = cfg.scan_workers > 1 ? claim_dbs : NULL;

        code = scanner_claim_open(&cfg, password, claim_dbs);
        if (code == EXIT_OK)
            code = cfg.scan_every_s > 0 ? scanner_sweep_every(db, claim, &cfg)
                                        : scanner_sweep_once(db, claim, &cfg);
    }
out:
    for (int i = 0; i < SCANNER_WORKERS_MAX; i++)
        db_free(claim_dbs[i]);
    db_free(db);
    db_password_free(password);
    cfg_free(&cfg);
    return code;
}
