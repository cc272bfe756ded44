/* The scanner's Prometheus metrics, written as a node_exporter textfile
 * (scanner.textfile_path / --textfile) after every run: the scanner is a
 * short-lived process, so nothing would be there to scrape; node_exporter's
 * textfile collector (--collector.textfile.directory) exposes the file
 * instead. Gauges named last_run_* describe the most recent run; *_total
 * counters count since this process started (one run for cron, many with
 * --every). */
#ifndef OG_SCANNER_SCANNER_METRICS_H
#define OG_SCANNER_SCANNER_METRICS_H

#include <stdbool.h>

#include "common/error.h"
#include "scanner/reconcile.h"
#include "scanner/reminders.h"
#include "scanner/runlog.h"
#include "scanner/sweep.h"

/* Registers the sweep's metrics; call once at startup of a sweep process.
 * max_skip_s: the --max-skip in force, exported as ordergate_scanner_max_skip_seconds;
 * grace_s: scanner.grace_s, as ordergate_scanner_grace_seconds (0: the scanner runs alone). */
enum og_status scanner_metrics_init(int max_skip_s, int grace_s, struct og_error *err);
/* Sets the last-run gauges and adds to the counters. sweep: when orders were
 * last swept, or NULL when not known (a failed run does not ask): then
 * ordergate_scanner_last_sweep_* keep their values (absent until first
 * known: a missing figure is better than a false one). alarm: the run was
 * skipped and ends non-zero (the last sweep is older than --max-skip, or
 * that could not be told), which makes ordergate_scanner_last_run_success 0. */
void scanner_metrics_record(const struct sweep_result *res, const struct runlog_sweep_status *sweep,
                            bool alarm);
/* A sweep_params.on_batch hook: observes the batch durations. */
void scanner_metrics_batch(double page_s, double claim_s, void *arg);

/* Payment reminders the run's fallback sent (scanner/reminders.h): each one's lateness into
 * ordergate_reminder_lateness_seconds{source="scanner"} and ordergate_reminders_sent_total. */
void scanner_metrics_reminder_sent(double late_s);
/* The last run's fallback: ordergate_scanner_last_run_reminders_sent and
 * ordergate_scanner_last_run_reminder_lateness_seconds (the latest one's; 0 when none). */
void scanner_metrics_record_reminders(const struct reminders_result *r);

/* At most this many hook functions get a series of their own; the failures of any further hook
 * share the series hook="other" (metric_series). */
#define SCANNER_HOOK_SERIES_MAX 16

/* ordergate_scanner_hook_failures_total{hook="..."}: n more orders whose claim the hook failed. */
void scanner_metrics_hook_failed(const char *hook, double n);

/* --reconcile has metrics of its own (its textfile holds nothing else):
 * ordergate_reconcile_violations{invariant}, ordergate_exceptions_open,
 * ordergate_reconcile_repaired, ordergate_reconcile_last_run_success and
 * _timestamp_seconds. After a failed check only the last two are written:
 * a missing figure is better than a false zero. */
enum og_status scanner_metrics_init_reconcile(struct og_error *err);
/* r == NULL: the reconciliation failed. */
void scanner_metrics_record_reconcile(const struct reconcile_result *r);

/* Writes the textfile atomically; path "" writes nothing. */
enum og_status scanner_metrics_write(const char *path, struct og_error *err);

#endif
