/* Prometheus metrics: a fixed registry of counters, gauges and histograms,
 * rendered in the text exposition format, served over HTTP (/metrics,
 * /healthz, /readyz) by libmicrohttpd, or written to a node_exporter textfile.
 *
 * Updates are lock-free (atomics) so the hot path never blocks on a scrape. */
#ifndef OG_COMMON_METRICS_H
#define OG_COMMON_METRICS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/error.h"

enum metric_kind { METRIC_COUNTER, METRIC_GAUGE, METRIC_HISTOGRAM };

#define METRIC_MAX_BUCKETS 16

struct metric;

/* Registers a metric. `labels` is a fixed label set in Prometheus syntax
 * without braces (e.g. "outcome=\"cancelled\""), or NULL. Metrics with the
 * same name and different labels share HELP/TYPE lines. Histogram buckets
 * are upper bounds in ascending order (seconds or plain numbers). Returns
 * NULL when out of memory. Register at startup, before serving. */
struct metric *metric_register(const char *name, const char *help, enum metric_kind kind,
                               const char *labels, const double *buckets, size_t nbuckets);
void metric_inc(struct metric *m, double v);
void metric_set(struct metric *m, double v);
void metric_observe(struct metric *m, double v);
double metric_value(const struct metric *m);

/* Renders every registered metric. Returns the bytes written (<size) or the
 * size needed when buf is too small, like snprintf. */
size_t metrics_render(char *buf, size_t size);
/* Writes the registry to a textfile atomically (write temp, rename). */
enum og_status metrics_write_textfile(const char *path, struct og_error *err);

/* Health as reported by /healthz (process alive and loop turning) and
 * /readyz (connected to the database and the broker). */
void metrics_set_health(int live, int ready);

/* Serves /metrics, /healthz, /readyz on "ADDR:PORT" in a background thread. */
enum og_status metrics_http_start(const char *listen, struct og_error *err);
void metrics_http_stop(void);
/* Drops every registered metric (tests). */
void metrics_reset(void);

#endif
