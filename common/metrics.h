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
 * are upper bounds in ascending order (seconds or plain numbers). Fixed label
 * sets are registered at startup; metric_series adds run-time ones. Registering the same name and
 * labels twice returns the first metric; the same name with another kind, an invalid name, label
 * set or bucket list returns NULL, and so does running out of memory. */
struct metric *metric_register(const char *name, const char *help, enum metric_kind kind,
                               const char *labels, const double *buckets, size_t nbuckets);

/* The series name{label="value"} (value escaped as the exposition format wants), registered
 * on first use: for label values known only at run time, such as a hook's name. Once a name
 * has max_series series, further values share the series value "other", so a stream of new
 * values cannot grow the registry without bound. NULL like metric_register. Safe at any time
 * (registration locks the list; rendering takes the same lock). */
struct metric *metric_series(const char *name, const char *help, enum metric_kind kind,
                             const char *label, const char *value, size_t max_series);

/* Update contract: every update is lock-free and safe from any thread; a NULL
 * metric is ignored (so a failed registration never crashes the hot path).
 * metric_inc adds to a counter or gauge (a counter ignores negative steps);
 * metric_set sets a counter or gauge (counters only for values mirrored from
 * elsewhere); metric_observe feeds a histogram (upper bounds inclusive). NaN
 * is ignored everywhere but metric_set. */
void metric_inc(struct metric *m, double v);
void metric_set(struct metric *m, double v);
void metric_observe(struct metric *m, double v);
/* The current value of a counter or gauge, or the observation count of a
 * histogram. */
double metric_value(const struct metric *m);
/* Sum of the observations of a histogram (0 for other kinds). */
double metric_sum(const struct metric *m);

/* Renders every registered metric, like snprintf: returns the full text
 * length without the NUL; when it is >= size the text was cut, and a buffer
 * of return + 1 bytes holds it. buf may be NULL with size 0 to measure. */
size_t metrics_render(char *buf, size_t size);
/* Writes the registry to a textfile atomically (write temp, rename). */
enum og_status metrics_write_textfile(const char *path, struct og_error *err);

/* Health as reported by /healthz (process alive and loop turning) and
 * /readyz (connected to the database and the broker). Starts live and not
 * ready. /healthz answers 200 "ok\n" or 503; /readyz 200 "ready\n" or 503.
 * A watched call running too long fails both (metrics_call_watch). */
void metrics_set_health(int live, int ready);

/* The call the health endpoints watch: one blocking call site of the process (the consume
 * loop's database calls), bracketed by metrics_call_begin()/metrics_call_end() from one thread
 * (lock-free). With metrics_call_watch(gauge, limit_ms), limit_ms > 0, /healthz and /readyz
 * answer 503 while a call has run longer than limit_ms ("database call running for N ms"), and
 * every rendering sets gauge (may be NULL) to the current call's age in seconds (0 between
 * calls). Register the gauge first; metrics_reset() ends the watch. */
void metrics_call_begin(void);
void metrics_call_end(void);
void metrics_call_watch(struct metric *age_gauge, long limit_ms);
/* The current call's age in milliseconds, 0 between calls. */
long metrics_call_age_ms(void);

/* Serves /metrics, /healthz, /readyz on "ADDR:PORT" in a background thread.
 * ADDR is an IPv4 literal, a host name, "[IPv6]", or empty or "*" for every
 * IPv4 interface; PORT 0 picks a free port (tests). An empty listen string
 * starts nothing and returns OG_OK (endpoint disabled). GET and HEAD only
 * (405 otherwise), 404 for other paths; /metrics is served with Content-Type
 * "text/plain; version=0.0.4". Only one server per process.
 *
 * The server is bounded so that one client cannot starve the others (struct
 * metrics_http_limits; NULL or metrics_http_start: the defaults below). These bound the port,
 * they do not make it a liveness signal: a flood from many addresses can still fill it, which
 * is why liveness has its own channel that needs no socket (common/health.h). */
struct metrics_http_limits {
    unsigned per_ip;          /* connections one peer address holds at once, >= 1 */
    unsigned max_connections; /* connections of all peers, > per_ip */
    unsigned timeout_s;       /* a connection that sends nothing this long is closed, >= 1 */
};
#define METRICS_HTTP_PER_IP_DEFAULT          4
#define METRICS_HTTP_MAX_CONNECTIONS_DEFAULT 64
#define METRICS_HTTP_TIMEOUT_S_DEFAULT       2
enum og_status metrics_http_start(const char *listen, struct og_error *err);
enum og_status metrics_http_start_bounded(const char *listen,
                                          const struct metrics_http_limits *limits,
                                          struct og_error *err);
/* What metrics_http_start_bounded would refuse (OG_ERR_CONFIG), without listening: the listen
 * string (empty is fine) and the limits (NULL: not checked). For --check-config. */
enum og_status metrics_http_check(const char *listen, const struct metrics_http_limits *limits,
                                  struct og_error *err);
void metrics_http_stop(void);
/* The TCP port the server is bound to, or 0 when it is not running. */
int metrics_http_port(void);
/* Drops every registered metric (tests): pointers from metric_register become
 * invalid; health returns to live, not ready. */
void metrics_reset(void);

#endif
