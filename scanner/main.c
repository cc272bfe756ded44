/* ordergate-scanner: the fallback sweep, run by cron, a systemd timer or a
 * Kubernetes CronJob (one run per invocation), or by itself with --every;
 * also --dry-run and --reconcile. See docs/scanner.md.
 *
 * Exit status: 0 done (also: skipped because another run holds the lock,
 * stopped by SIGTERM, a clean reconciliation), 1 runtime failure, 2 bad usage
 * or configuration, 3 reconciliation found violations, 4 skipped while the
 * last sweep is older than --max-skip (the lock is held, nothing sweeps). */
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cfg.h"
#include "common/cfg_doc.h"
#include "common/clock.h"
#include "common/db.h"
#include "common/hook_timing.h"
#include "common/log.h"
#include "common/opt.h"
#include "common/parse.h"
#include "common/signals.h"
#include "common/version.h"
#include "scanner/reconcile.h"
#include "scanner/reminders.h"
#include "scanner/scanner_metrics.h"
#include "scanner/sweep.h"

#define SCANNER_PROG "ordergate-scanner"

enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2, EXIT_VIOLATIONS = 3, EXIT_NOT_SWEEPING = 4 };

/* --max-skip 0: three intervals of the schedule (--every, else a minute). */
#define SCANNER_MAX_SKIP_INTERVALS 3
#define SCANNER_CRON_INTERVAL_S    60

/* The histogram of each hook's wall time in this scanner's claims (common/hook_timing.h),
 * written with the run's other metrics. */
static struct hook_timing scanner_hook_timing = {
    "ordergate_scanner_hook_seconds",
    "Wall time of each call of a registered hook in this scanner's claims (failed calls "
    "included), by hook"};

struct scanner_args {
    struct opt_args opts;
    bool dry_run;
    bool reconcile;
    bool check_config;
    const char *since_arg;
    char since[40];      /* normalized RFC 3339, "" = every order */
    bool since_all;      /* --since all: the whole database, whatever the window */
    int scan_interval_s; /* 0 = not given */
};

/* The options come from opt_services with the settings' defaults and bounds (opt_help); this
 * says only what the program does and how it exits. */
static void scanner_usage(FILE *out)
{
    fprintf(out,
            "usage: " SCANNER_PROG " [options]\n"
            "\n"
            "Cancels pending orders whose payment window closed more than a grace period ago\n"
            "and that the consumer missed: one run per invocation (cron, systemd timer,\n"
            "Kubernetes CronJob), or repeated with --every. Every cancel goes through the gate\n"
            "(claim_cancel, source timeout_scanner); a run is logged in ordergate.scanner_runs.\n"
            "Instead of a sweep: --dry-run, --reconcile, --check-config. Flags override the\n"
            "configuration file; every setting and its meaning: docs/settings.md.\n"
            "\n"
            "options:\n");
    opt_help(out, opt_services, OPT_SCANNER);
    fprintf(out,
            "\n"
            "exit status: 0 done (or skipped: another run holds the lock), 1 runtime failure,\n"
            "2 bad usage or configuration, 3 reconciliation found violations, 4 skipped while\n"
            "the last sweep is older than --max-skip (something holds the lock and does not\n"
            "sweep)\n");
}

/* --since: RFC 3339, or an age (a duration: 90m, 24h, 7d) counted back from now. */
static enum og_status scanner_parse_since(const char *arg, char *out, size_t size,
                                          struct og_error *err)
{
    int64_t ms, age_s;

    if (clock_parse_iso(arg, strlen(arg), &ms) == 0) {
        clock_format_iso(ms, out, size);
        return OG_OK;
    }
    if (parse_duration("--since", arg, 0, INT64_C(100) * 365 * 86400, &age_s, NULL) != OG_OK)
        return og_error_set(err, OG_ERR_ARG, false,
                            "--since: expected an RFC 3339 time (e.g. 2026-11-30T00:00:00Z) or "
                            "an age such as 90m, 24h, 7d, got \"%.64s\"",
                            arg);
    clock_format_iso(clock_wall_ms() - age_s * 1000, out, size);
    return OG_OK;
}

/* Parses the command line into *a; on failure err says why (OG_ERR_ARG). */
static enum og_status scanner_parse_args(int argc, char **argv, struct scanner_args *a,
                                         struct og_error *err)
{
    const char *interval;
    int64_t v;

    memset(a, 0, sizeof(*a));
    if (opt_parse(&a->opts, opt_services, NULL, OPT_SCANNER, argc - 1, argv + 1, err) != OG_OK)
        return err->status;
    if (a->opts.npos > 0)
        return og_error_set(err, OG_ERR_ARG, false, "unexpected argument '%s'", a->opts.pos[0]);
    a->dry_run = opt_flag(&a->opts, "dry-run");
    a->reconcile = opt_flag(&a->opts, "reconcile");
    a->check_config = opt_flag(&a->opts, "check-config");
    a->since_arg = opt_arg(&a->opts, "since");
    a->since_all = a->since_arg != NULL && strcmp(a->since_arg, "all") == 0;
    if (a->since_arg != NULL && !a->since_all &&
        scanner_parse_since(a->since_arg, a->since, sizeof(a->since), err) != OG_OK)
        return err->status;
    interval = opt_arg(&a->opts, "scan-interval");
    if (interval != NULL) {
        if (parse_int64("--scan-interval", interval, 1, 7 * 86400, &v, err) != OG_OK)
            return err->status;
        a->scan_interval_s = (int)v;
    }
    if (a->dry_run && a->check_config)
        return og_error_set(err, OG_ERR_ARG, false,
                            "--check-config and --dry-run exclude each other");
    if (!a->reconcile && (a->since_arg != NULL || interval != NULL))
        return og_error_set(err, OG_ERR_ARG, false, "%s applies to --reconcile only",
                            a->since_arg != NULL ? "--since" : "--scan-interval");
    return OG_OK;
}

/* Loads the file, the environment defaults, then the flags. */
static enum og_status scanner_configure(const struct scanner_args *a, struct og_config *cfg,
                                        struct og_error *err)
{
    if (opt_configure(cfg, &a->opts, err) != OG_OK)
        return err->status;
    if (cfg->scanner.every_s > 0 && (a->reconcile || a->dry_run))
        return og_error_set(err, OG_ERR_ARG, false,
                            "--every (scanner.every_s) repeats sweeps; it cannot be combined with "
                            "%s",
                            a->reconcile ? "--reconcile" : "--dry-run");
    return OG_OK;
}

static void scanner_write_metrics(const struct og_config *cfg, int *exit_code)
{
    struct og_error err = {0};
    char q[600];

    if (scanner_metrics_write(cfg->scanner.textfile_path, &err) != OG_OK) {
        /* The alarm cannot reach monitoring: cron must hear about it. */
        log_error("scanner_textfile_failed", "path=%s error=%s", cfg->scanner.textfile_path,
                  log_quote(q, sizeof(q), err.msg));
        *exit_code = EXIT_RUNTIME;
    }
}

/* The --max-skip in force (scanner.max_skip_s; 0 derives it from the schedule). */
static int scanner_max_skip_s(const struct og_config *cfg)
{
    if (cfg->scanner.max_skip_s > 0)
        return cfg->scanner.max_skip_s;
    return SCANNER_MAX_SKIP_INTERVALS *
           (cfg->scanner.every_s > 0 ? cfg->scanner.every_s : SCANNER_CRON_INTERVAL_S);
}

/* After a run that did not fail: when orders were last swept. A skipped run
 * past --max-skip is the alarm (EXIT_NOT_SWEEPING): any session may hold the
 * lock, and nothing says it sweeps. Returns the exit status. *sweep is NULL
 * when the status could not be read: a done run still ends 0 (it swept); a
 * skipped one ends 1, since whether to alarm cannot be told. *alarm: the run
 * ends non-zero although it did not fail. */
static int scanner_check_sweeping(struct db *db, const struct og_config *cfg,
                                  const struct sweep_result *res, struct runlog_sweep_status *st,
                                  const struct runlog_sweep_status **sweep, bool *alarm)
{
    struct og_error err = {0};
    char q[600], r[160], a[160];
    int max_skip = scanner_max_skip_s(cfg);

    *sweep = NULL;
    *alarm = false;
    if (runlog_sweep_status(db, st, &err) != OG_OK) {
        log_emit(res->status == SWEEP_SKIPPED ? LOG_LVL_ERROR : LOG_LVL_WARN,
                 "scanner_sweep_status_failed", "run_id=%" PRId64 " error=%s", res->run_id,
                 log_quote(q, sizeof(q), err.msg));
        *alarm = res->status == SWEEP_SKIPPED;
        return *alarm ? EXIT_RUNTIME : EXIT_OK;
    }
    *sweep = st;
    if (res->status != SWEEP_SKIPPED || st->age_s <= max_skip)
        return EXIT_OK;
    *alarm = true;
    log_error("scanner_not_sweeping",
              "run_id=%" PRId64 " last_sweep_age_s=%.0f max_skip_s=%d holder_pid=%d "
              "holder_role=%s holder_application=%s msg=\"skipped, and no run has swept for "
              "longer than --max-skip: whatever holds the sweep lock does not sweep\"",
              res->run_id, st->age_s, max_skip, st->holder_pid,
              log_quote(r, sizeof(r), st->holder_role[0] ? st->holder_role : "unknown"),
              log_quote(a, sizeof(a), st->holder_application));
    return EXIT_NOT_SWEEPING;
}

static int scanner_sweep_once(struct db *db, struct db **claim_dbs, const struct og_config *cfg)
{
    struct sweep_params p = {
        .grace_s = cfg->scanner.grace_s,
        .batch_size = cfg->scanner.batch_size,
        .pause_ms = cfg->scanner.pause_ms,
        .max_orders = cfg->scanner.max_orders,
        .max_seconds = cfg->scanner.max_seconds,
        .busy_retry_ms = cfg->scanner.busy_retry_ms,
        .claim_dbs = claim_dbs,
        .nclaim = claim_dbs != NULL ? cfg->scanner.workers : 0,
        .lease_ms = 1000L * cfg->scanner.lease_s + cfg->scanner.pause_ms,
        .stop = &signals_stop,
        .on_batch = scanner_metrics_batch,
    };
    struct sweep_result res;
    struct runlog_sweep_status status;
    const struct runlog_sweep_status *sweep = NULL;
    struct og_error err = {0};
    bool alarm = false;
    int code;

    sweep_run(db, &p, &res, &err);
    /* The reminders' fallback, after a run that swept: a skipped run leaves them to the
     * scanner that holds the lease, a failed one to the next run. */
    if (res.status == SWEEP_DONE) {
        struct reminders_result rr;
        struct og_error rerr = {0};
        if (reminders_sweep(db, cfg->scanner.grace_s, &signals_stop, scanner_metrics_reminder_sent,
                            &rr, &rerr) != OG_OK) {
            char q[600];
            log_warn("reminders_sweep_failed", "error=%s", log_quote(q, sizeof(q), rerr.msg));
        } else {
            scanner_metrics_record_reminders(&rr);
        }
    }
    /* A failed run does not ask: the database may be gone. */
    code = res.status == SWEEP_FAILED
               ? EXIT_RUNTIME
               : scanner_check_sweeping(db, cfg, &res, &status, &sweep, &alarm);
    scanner_metrics_record(&res, sweep, alarm);
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

    log_info("scanner_every_started", "every_s=%d", cfg->scanner.every_s);
    while (!signals_stop) {
        int64_t now;

        scanner_sweep_once(db, claim_dbs, cfg);
        runs++;
        next += (int64_t)cfg->scanner.every_s * 1000;
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

    if (sweep_preview(db, cfg->scanner.grace_s, &pv, &err) != OG_OK) {
        log_error("scanner_dry_run_failed", "error=%s", log_quote(q, sizeof(q), err.msg));
        return EXIT_RUNTIME;
    }
    would = pv.overdue;
    if (cfg->scanner.max_orders > 0 && would > cfg->scanner.max_orders)
        would = cfg->scanner.max_orders;
    printf("dry run: %" PRId64 " pending order%s overdue by more than %d s (database clock)%s%s\n",
           pv.overdue, pv.overdue == 1 ? " is" : "s are", cfg->scanner.grace_s,
           pv.oldest_expire_at[0] ? "; oldest expire_at " : "", pv.oldest_expire_at);
    printf("a sweep now would claim %" PRId64 " of them%s; nothing was changed\n", would,
           would < pv.overdue ? " (capped by scanner.max_orders)" : "");
    for (int i = 0; i < pv.nsample; i++)
        printf("  %s  expire_at %s\n", pv.sample[i], pv.sample_expire_at[i]);
    if (pv.overdue > pv.nsample)
        printf("  ... and %" PRId64 " more\n", pv.overdue - pv.nsample);
    fflush(stdout);
    log_info("scanner_dry_run", "overdue=%" PRId64 " would_claim=%" PRId64 " grace_s=%d",
             pv.overdue, would, cfg->scanner.grace_s);
    return EXIT_OK;
}

static int scanner_reconcile(struct db *db, const struct og_config *cfg,
                             const struct scanner_args *a)
{
    char window_since[40] = "", started[40];
    enum og_status st;
    struct reconcile_params p = {
        .since = a->since[0] ? a->since : NULL,
        .grace_s = cfg->scanner.grace_s,
        .scan_interval_s = a->scan_interval_s > 0
                               ? a->scan_interval_s
                               : (cfg->scanner.every_s > 0 ? cfg->scanner.every_s : 300),
        .repair = !a->dry_run,
    };
    struct reconcile_result r;
    struct og_error err = {0};
    char q[600];
    int code;

    /* No --since: the recent window only (the order-scoped invariants over every order of a
     * large book take minutes); --since all or a window of 0: everything. */
    if (a->since_arg == NULL && cfg->scanner.reconcile_window_s > 0) {
        clock_format_iso(clock_wall_ms() - (int64_t)cfg->scanner.reconcile_window_s * 1000,
                         window_since, sizeof(window_since));
        p.since = window_since;
    }
    clock_format_iso(clock_wall_ms(), started, sizeof(started));
    if (reconcile_run(db, &p, stdout, &r, &err) != OG_OK) {
        char failure[sizeof(err.msg)];
        log_error("reconcile_failed", "error=%s", log_quote(q, sizeof(q), err.msg));
        scanner_metrics_record_reconcile(NULL);
        code = EXIT_RUNTIME;
        snprintf(failure, sizeof(failure), "%s", err.msg);
        st = reconcile_record(db, &p, started, NULL, failure, &err);
    } else {
        scanner_metrics_record_reconcile(&r);
        code = r.invariants_violated > 0 ? EXIT_VIOLATIONS : EXIT_OK;
        st = reconcile_record(db, &p, started, &r, NULL, &err);
    }
    /* The report, the log and the metrics already say how the run went: a run that could not
     * be recorded (the database gone, an older schema) is logged, its exit status unchanged. */
    if (st != OG_OK)
        log_warn("reconcile_record_failed", "error=%s", log_quote(q, sizeof(q), err.msg));
    scanner_write_metrics(cfg, &code);
    return code;
}

/* --workers N > 1: N more sessions that only claim (connected on first use,
 * reconnected by db_call like the run's own). */
static int scanner_claim_open(const struct og_config *cfg, struct db **claim_dbs)
{
    struct og_error err = {0};
    char q[600];

    if (cfg->scanner.workers <= 1)
        return EXIT_OK;
    for (int i = 0; i < cfg->scanner.workers && i < SCANNER_WORKERS_MAX; i++) {
        if (cfg_db_open(cfg, SCANNER_PROG, NULL, &signals_stop, &claim_dbs[i], &err) != OG_OK) {
            log_error("scanner_start_failed", "error=%s", log_quote(q, sizeof(q), err.msg));
            return EXIT_RUNTIME;
        }
        hook_timing_attach(claim_dbs[i], &scanner_hook_timing);
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
    int code = EXIT_OK;
    char q[600];

    log_init(SCANNER_PROG, LOG_LVL_INFO);
    memset(&cfg, 0, sizeof(cfg));
    if (scanner_parse_args(argc, argv, &args, &err) != OG_OK) {
        code = EXIT_USAGE;
        goto report;
    }
    if (opt_flag(&args.opts, "help")) {
        scanner_usage(stdout);
        goto out;
    }
    if (opt_flag(&args.opts, "version")) {
        printf(SCANNER_PROG " %s (libpq %d)\n", OG_VERSION, PQlibVersion());
        goto out;
    }
    if (opt_flag(&args.opts, "list-settings")) {
        if (cfg_doc_list(stdout, OPT_SCANNER, opt_arg(&args.opts, "list-settings"), &err) == OG_OK)
            goto out;
        code = EXIT_USAGE;
        goto report;
    }
    if (scanner_configure(&args, &cfg, &err) != OG_OK) {
        code = EXIT_USAGE;
        goto report;
    }
    log_set_level((enum log_level)log_level_parse(cfg.log_level));
    /* --check-config checks what a run would, short of connecting: the password file too
     * (read again, and kept no longer, by each cfg_db_open). */
    if (cfg_db_password(&cfg, &password, &err) != OG_OK) {
        code = EXIT_USAGE;
        goto report;
    }
    db_password_free(password);
    if (args.check_config) {
        cfg_dump(&cfg, stdout);
        printf("mode = %s\n",
               args.reconcile ? "reconcile" : (cfg.scanner.every_s > 0 ? "every" : "sweep"));
        goto out;
    }
    if ((args.reconcile ? scanner_metrics_init_reconcile(&err)
                        : scanner_metrics_init(scanner_max_skip_s(&cfg), cfg.scanner.grace_s,
                                               &err)) != OG_OK) {
        log_error("scanner_metrics_failed", "error=%s", log_quote(q, sizeof(q), err.msg));
        code = EXIT_RUNTIME;
        goto out;
    }
    signals_install();
    if (cfg_db_open(&cfg, SCANNER_PROG, NULL, &signals_stop, &db, &err) != OG_OK) {
        log_error("scanner_start_failed", "error=%s", log_quote(q, sizeof(q), err.msg));
        code = EXIT_RUNTIME;
        goto out;
    }
    /* --reconcile reads the whole book in one statement (seconds per million orders) and
     * nothing waits behind it: only its lock waits are bounded. */
    if (args.reconcile) {
        struct db_session session = cfg_db_session(&cfg);
        session.statement_timeout_ms = 0;
        db_set_session(db, &session, NULL); /* not connected yet: cannot fail */
    }
    hook_timing_attach(db, &scanner_hook_timing);
    if (args.reconcile)
        code = scanner_reconcile(db, &cfg, &args);
    else if (args.dry_run)
        code = scanner_dry_run(db, &cfg);
    else {
        struct db **claim = cfg.scanner.workers > 1 ? claim_dbs : NULL;

        code = scanner_claim_open(&cfg, claim_dbs);
        if (code == EXIT_OK)
            code = cfg.scanner.every_s > 0 ? scanner_sweep_every(db, claim, &cfg)
                                           : scanner_sweep_once(db, claim, &cfg);
    }
    goto out;
report:
    opt_error_print(SCANNER_PROG, &cfg, &err);
out:
    for (int i = 0; i < SCANNER_WORKERS_MAX; i++)
        db_free(claim_dbs[i]);
    db_free(db);
    cfg_free(&cfg);
    opt_args_free(&args.opts);
    return code;
}
