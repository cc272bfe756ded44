/* What the benchmark drivers read from a program's metrics: the endpoint's
 * text, single samples, sums over labels and histograms. */
#ifndef OG_TOOLS_BENCH_PROM_H
#define OG_TOOLS_BENCH_PROM_H

#include <stdbool.h>
#include <stddef.h>

#define BENCH_HIST_MAX 32

/* GET /metrics from 127.0.0.1:port into buf (waits at most 5 s); false
 * unless it answered 200. */
bool bench_metrics_get(int port, char *buf, size_t size);
/* The value of sample "name" or "name{labels}"; -1 when absent. */
double bench_prom(const char *text, const char *sample);
/* The sum of every sample of a family, name{...} and name alike. */
double bench_prom_sum(const char *text, const char *name);

struct bench_hist {
    int n;
    double le[BENCH_HIST_MAX]; /* upper bounds; the last is +Inf */
    double cum[BENCH_HIST_MAX];
    double sum, count;
};

/* The buckets, sum and count of histogram name. */
void bench_prom_hist(const char *text, const char *name, struct bench_hist *h);
/* The bucket (lo, hi] that holds quantile q, the way Prometheus's
 * histogram_quantile() finds it; hi is +Inf for the overflow bucket. Returns
 * false when the histogram is empty. */
bool bench_hist_bucket(const struct bench_hist *h, double q, double *lo, double *hi);
double bench_hist_mean(const struct bench_hist *h);
/* A quantile as its bucket: "(0.1, 0.25]" (scaled). Returns buf. */
const char *bench_hist_q(const struct bench_hist *h, double q, double scale, char *buf,
                         size_t size);
/* "label n=.. mean .., p50 in .., p99 in .." */
void bench_print_hist(const char *label, const struct bench_hist *h, double scale,
                      const char *unit);
/* One cumulative line per bucket, for a size distribution. */
void bench_print_buckets(const char *label, const struct bench_hist *h);

#endif
