#include "scanner/scanner_metrics.h"

#include <stddef.h>
#include <stdio.h>

#include "common/clock.h"
#include "common/metrics.h"

enum { SM_DONE, SM_FAILED, SM_SKIPPED, SM_NSTATUS };
enum {
    SM_CANCELLED,
    SM_ALREADY_CANCELLED,
    SM_ALREADY_PAID,
    SM_NOT_DUE,
    SM_NOT_FOUND,
    SM_BUSY,
    SM_HOOK_FAILED,
    SM_NOUTCOME
};

static const char *const sm_status_labels[SM_NSTATUS] = {"status=\"done\"", "status=\"failed\"",
                                                         "status=\"skipped\""};
static const char *const sm_outcome_labels[SM_NOUTCOME] = {
    "outcome=\"cancelled\"",  "outcome=\"already_cancelled\"", "outcome=\"already_paid\"",
    "outcome=\"not_due\"",    "outcome=\"not_found\"",         "outcome=\"busy\"",
    "outcome=\"hook_failed\""};

static struct {
    struct metric *missed;
    struct metric *missed_total;
    struct metric *last_ts;
    struct metric *last_success;
    struct metric *last_duration;
    struct metric *last_status[SM_NSTATUS];
    struct metric *last_orders[SM_NOUTCOME];
    struct metric *last_batches;
    struct metric *last_busy_left;
    struct metric *crashed_found;
    struct metric *runs_total[SM_NSTATUS];
    struct metric *page_seconds;
    struct metric *claim_seconds;
    struct metric *max_skip;
    struct metric *grace;
    struct metric *reminders_sent, *reminder_lateness, *last_reminders, *last_reminder_late;
} sm;

enum og_status scanner_metrics_init(int max_skip_s, int grace_s, struct og_error *err)
{
    static const double buckets[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                     0.25,  0.5,    1,     2.5,  5,     10};
    size_t nb = sizeof(buckets) / sizeof(buckets[0]);
    int ok = 1;

    sm.missed = metric_register("ordergate_scanner_missed_orders",
                                "Orders the last sweep had to cancel: the consumer missed them "
                                "(alert when > 0)",
                                METRIC_GAUGE, NULL, NULL, 0);
    sm.missed_total =
        metric_register("ordergate_scanner_missed_orders_total",
                        "Orders cancelled by sweeps of this process (missed by the consumer)",
                        METRIC_COUNTER, NULL, NULL, 0);
    sm.last_ts =
        metric_register("ordergate_scanner_last_run_timestamp_seconds",
                        "Unix time at which the last run ended", METRIC_GAUGE, NULL, NULL, 0);
    sm.last_success =
        metric_register("ordergate_scanner_last_run_success",
                        "1 when the last run ended done, or skipped within --max-skip of the last "
                        "sweep; 0 when it failed or was skipped past it",
                        METRIC_GAUGE, NULL, NULL, 0);
    sm.max_skip = metric_register("ordergate_scanner_max_skip_seconds",
                                  "--max-skip in force: a skipped run alarms (exit 4) once the "
                                  "last sweep is older",
                                  METRIC_GAUGE, NULL, NULL, 0);
    metric_set(sm.max_skip, max_skip_s);
    sm.grace = metric_register("ordergate_scanner_grace_seconds",
                               "scanner.grace_s in force; 0 tells the alert rules the scanner runs "
                               "alone, without consumers (tier 1)",
                               METRIC_GAUGE, NULL, NULL, 0);
    metric_set(sm.grace, grace_s);
    sm.last_duration = metric_register("ordergate_scanner_last_run_duration_seconds",
                                       "Duration of the last run", METRIC_GAUGE, NULL, NULL, 0);
    sm.last_batches =
        metric_register("ordergate_scanner_last_run_batches", "Batches claimed by the last run",
                        METRIC_GAUGE, NULL, NULL, 0);
    sm.last_busy_left = metric_register("ordergate_scanner_last_run_busy_left",
                                        "Due orders the last run left because another "
                                        "transaction held them locked through its retries",
                                        METRIC_GAUGE, NULL, NULL, 0);
    sm.crashed_found = metric_register(
        "ordergate_scanner_crashed_runs_found",
        "Runs left running by a dead process that the last run found and marked crashed",
        METRIC_GAUGE, NULL, NULL, 0);
    for (int i = 0; i < SM_NSTATUS; i++) {
        sm.last_status[i] = metric_register("ordergate_scanner_last_run_status",
                                            "1 for the status the last run ended with",
                                            METRIC_GAUGE, sm_status_labels[i], NULL, 0);
        sm.runs_total[i] =
            metric_register("ordergate_scanner_runs_total", "Runs of this process by final status",
                            METRIC_COUNTER, sm_status_labels[i], NULL, 0);
        ok = ok && sm.last_status[i] && sm.runs_total[i];
    }
    for (int i = 0; i < SM_NOUTCOME; i++) {
        sm.last_orders[i] = metric_register("ordergate_scanner_last_run_orders",
                                            "Claim outcomes of the orders the last run scanned",
                                            METRIC_GAUGE, sm_outcome_labels[i], NULL, 0);
        ok = ok && sm.last_orders[i];
    }
    sm.page_seconds = metric_register("ordergate_scanner_page_seconds",
                                      "Time of one keyset page query (scan_overdue)",
                                      METRIC_HISTOGRAM, NULL, buckets, nb);
    sm.claim_seconds =
        metric_register("ordergate_scanner_claim_seconds", "Time of one batch claim (claim_cancel)",
                        METRIC_HISTOGRAM, NULL, buckets, nb);
    {
        static const double late_buckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                              1,     2.5,  5,     10,   30,  60,   300};
        sm.reminders_sent = metric_register(
            "ordergate_reminders_sent_total",
            "Payment reminders this process sent (claim_reminder sent): the scanner's are the "
            "ones the consumer did not send within scanner.grace_s",
            METRIC_COUNTER, "source=\"scanner\"", NULL, 0);
        sm.reminder_lateness = metric_register(
            "ordergate_reminder_lateness_seconds",
            "Send time minus due time (expire_at - offset) of each payment reminder this process "
            "sent",
            METRIC_HISTOGRAM, "source=\"scanner\"", late_buckets,
            sizeof(late_buckets) / sizeof(late_buckets[0]));
        sm.last_reminders =
            metric_register("ordergate_scanner_last_run_reminders_sent",
                            "Payment reminders the last run sent as the fallback (the consumer "
                            "did not send them in time)",
                            METRIC_GAUGE, NULL, NULL, 0);
        sm.last_reminder_late = metric_register(
            "ordergate_scanner_last_run_reminder_lateness_seconds",
            "The latest reminder the last run sent: its send time minus its due time (0: none)",
            METRIC_GAUGE, NULL, NULL, 0);
        ok = ok && sm.reminders_sent && sm.reminder_lateness && sm.last_reminders &&
             sm.last_reminder_late;
    }
    ok = ok && sm.missed && sm.missed_total && sm.last_ts && sm.last_success && sm.last_duration &&
         sm.last_batches && sm.last_busy_left && sm.crashed_found && sm.page_seconds &&
         sm.claim_seconds && sm.max_skip && sm.grace;
    if (!ok)
        return og_error_set(err, OG_ERR_NOMEM, false, "cannot register the scanner's metrics");
    return OG_OK;
}

void scanner_metrics_hook_failed(const char *hook, double n)
{
    metric_inc(metric_series("ordergate_scanner_hook_failures_total",
                             "Orders whose claim a registered hook failed (rolled back, skipped "
                             "in the run), by hook",
                             METRIC_COUNTER, "hook", hook, SCANNER_HOOK_SERIES_MAX),
               n);
}

void scanner_metrics_record(const struct sweep_result *res, const struct runlog_sweep_status *sweep,
                            bool alarm)
{
    int s = res->status == SWEEP_DONE ? SM_DONE
                                      : (res->status == SWEEP_SKIPPED ? SM_SKIPPED : SM_FAILED);
    const int64_t by_outcome[SM_NOUTCOME] = {
        res->counts.cancelled,  res->counts.already_cancelled, res->counts.already_paid,
        res->counts.not_due,    res->counts.not_found,         res->counts.busy,
        res->counts.hook_failed};

    metric_set(sm.missed, (double)res->counts.cancelled);
    metric_inc(sm.missed_total, (double)res->counts.cancelled);
    metric_set(sm.last_ts, (double)clock_wall_ms() / 1000.0);
    metric_set(sm.last_success, s == SM_FAILED || alarm ? 0 : 1);
    metric_set(sm.last_duration, res->duration_s);
    metric_set(sm.last_batches, res->counts.batches);
    metric_set(sm.last_busy_left, (double)res->busy_left);
    metric_set(sm.crashed_found, res->crashed_found);
    for (int i = 0; i < SM_NSTATUS; i++)
        metric_set(sm.last_status[i], i == s ? 1 : 0);
    metric_inc(sm.runs_total[s], 1);
    for (int i = 0; i < SM_NOUTCOME; i++)
        metric_set(sm.last_orders[i], (double)by_outcome[i]);
    if (sweep == NULL)
        return;
    /* Registered only once known; a skipped run carries the run log's time
     * of the last sweep, so this one moves only when a sweep happens. */
    if (sweep->have_sweep)
        metric_set(metric_register("ordergate_scanner_last_sweep_timestamp_seconds",
                                   "Unix time orders were last swept (the end of the newest done "
                                   "run, or the progress of a sweep still running; database "
                                   "clock): skipped and failed runs do not move it",
                                   METRIC_GAUGE, NULL, NULL, 0),
                   sweep->last_sweep_at);
    metric_set(metric_register("ordergate_scanner_last_sweep_age_seconds",
                               "Seconds since orders were last swept, as the last run saw it "
                               "(since the first run when none ever swept)",
                               METRIC_GAUGE, NULL, NULL, 0),
               sweep->age_s);
}

void scanner_metrics_batch(double page_s, double claim_s, void *arg)
{
    (void)arg;
    metric_observe(sm.page_seconds, page_s);
    metric_observe(sm.claim_seconds, claim_s);
}

static struct {
    struct metric *ts;
    struct metric *success;
} smr;

enum og_status scanner_metrics_init_reconcile(struct og_error *err)
{
    smr.ts = metric_register("ordergate_reconcile_last_run_timestamp_seconds",
                             "Unix time at which the last reconciliation ended", METRIC_GAUGE, NULL,
                             NULL, 0);
    smr.success = metric_register("ordergate_reconcile_last_run_success",
                                  "1 when the last reconciliation ran (violations or not), 0 when "
                                  "it failed",
                                  METRIC_GAUGE, NULL, NULL, 0);
    if (smr.ts == NULL || smr.success == NULL)
        return og_error_set(err, OG_ERR_NOMEM, false, "cannot register the reconcile metrics");
    return OG_OK;
}

void scanner_metrics_record_reconcile(const struct reconcile_result *r)
{
    metric_set(smr.ts, (double)clock_wall_ms() / 1000.0);
    metric_set(smr.success, r != NULL ? 1 : 0);
    if (r == NULL)
        return;
    /* Registered only now, so a failed check exports no false zeros. */
    for (int i = 1; i <= RECONCILE_MAX_INVARIANT; i++) {
        char label[32];
        if (!r->checked[i])
            continue;
        snprintf(label, sizeof(label), "invariant=\"%d\"", i);
        metric_set(metric_register("ordergate_reconcile_violations",
                                   "Rows breaking each invariant in the last reconciliation, "
                                   "after its repairs",
                                   METRIC_GAUGE, label, NULL, 0),
                   (double)r->by_invariant[i]);
    }
    /* The shop's checks in the same family, labelled shop:<name> (names are [a-z0-9_]); -1 =
     * the check failed (OrdergateReconcileCheckFailed). */
    for (int i = 0; i < r->checks && i < RECONCILE_MAX_CHECKS; i++) {
        char label[120];
        snprintf(label, sizeof(label), "invariant=\"%s\"", r->check[i].name);
        metric_set(metric_register("ordergate_reconcile_violations",
                                   "Rows breaking invariant 1..8 in the last reconciliation, "
                                   "after its repairs",
                                   METRIC_GAUGE, label, NULL, 0),
                   (double)r->check[i].violations);
    }
    metric_set(metric_register("ordergate_reconcile_repaired",
                               "Missing late-payment exceptions the last reconciliation created",
                               METRIC_GAUGE, NULL, NULL, 0),
               (double)r->repaired);
    metric_set(metric_register("ordergate_exceptions_open",
                               "Payment exceptions in state open (manual review or refund "
                               "pending)",
                               METRIC_GAUGE, NULL, NULL, 0),
               (double)r->exceptions_open);
    metric_set(metric_register("ordergate_refunds_unconfirmed_overdue",
                               "Auto-refunds not confirmed by record_refund within "
                               "refund_confirm_seconds",
                               METRIC_GAUGE, NULL, NULL, 0),
               (double)r->refunds_unconfirmed);
    metric_set(metric_register("ordergate_reviews_overdue",
                               "Payment exceptions in manual review for longer than "
                               "manual_review_max_age_seconds",
                               METRIC_GAUGE, NULL, NULL, 0),
               (double)r->reviews_overdue);
}

enum og_status scanner_metrics_write(const char *path, struct og_error *err)
{
    if (path == NULL || *path == '\0')
        return OG_OK;
    return metrics_write_textfile(path, err);
}

void scanner_metrics_reminder_sent(double late_s)
{
    metric_inc(sm.reminders_sent, 1);
    metric_observe(sm.reminder_lateness, late_s);
}

void scanner_metrics_record_reminders(const struct reminders_result *r)
{
    metric_set(sm.last_reminders, (double)r->sent);
    metric_set(sm.last_reminder_late, r->max_late_s);
}
