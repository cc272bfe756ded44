#include "tools/bench/support/bench_prom.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/scrape.h"

bool bench_metrics_get(int port, char *buf, size_t size)
{
    return scrape_http(port, "GET", "/metrics", buf, size, 5000) == 200;
}

double bench_prom(const char *text, const char *sample)
{
    double v;

    return scrape_sample(text, sample, &v) ? v : -1;
}

double bench_prom_sum(const char *text, const char *name)
{
    size_t n = strlen(name);
    double sum = 0;

    for (const char *s = text; s != NULL && *s; s = strchr(s, '\n'), s = s ? s + 1 : NULL) {
        if (strncmp(s, name, n) == 0 && (s[n] == '{' || s[n] == ' ')) {
            const char *v = strchr(s, ' ');
            if (v != NULL)
                sum += strtod(v + 1, NULL);
        }
    }
    return sum;
}

void bench_prom_hist(const char *text, const char *name, struct bench_hist *h)
{
    char prefix[160], key[160];
    size_t n;

    memset(h, 0, sizeof(*h));
    snprintf(prefix, sizeof(prefix), "%s_bucket{le=\"", name);
    n = strlen(prefix);
    for (const char *s = text; s != NULL && *s; s = strchr(s, '\n'), s = s ? s + 1 : NULL) {
        if (strncmp(s, prefix, n) == 0 && h->n < BENCH_HIST_MAX) {
            const char *v = strstr(s, "} ");
            h->le[h->n] = strtod(s + n, NULL);
            h->cum[h->n] = v ? strtod(v + 2, NULL) : 0;
            h->n++;
        }
    }
    snprintf(key, sizeof(key), "%s_sum", name);
    h->sum = bench_prom(text, key);
    snprintf(key, sizeof(key), "%s_count", name);
    h->count = bench_prom(text, key);
}

bool bench_hist_bucket(const struct bench_hist *h, double q, double *lo, double *hi)
{
    double total = h->n > 0 ? h->cum[h->n - 1] : 0, rank = q * total;

    if (total <= 0)
        return false;
    for (int i = 0; i < h->n; i++) {
        if (h->cum[i] >= rank) {
            *lo = i > 0 ? h->le[i - 1] : 0;
            *hi = h->le[i];
            return true;
        }
    }
    return false;
}

double bench_hist_mean(const struct bench_hist *h)
{
    return h->count > 0 ? h->sum / h->count : NAN;
}

const char *bench_hist_q(const struct bench_hist *h, double q, double scale, char *buf, size_t size)
{
    double lo, hi;

    if (!bench_hist_bucket(h, q, &lo, &hi))
        snprintf(buf, size, "-");
    else if (isinf(hi))
        snprintf(buf, size, "> %g", lo * scale);
    else
        snprintf(buf, size, "(%g, %g]", lo * scale, hi * scale);
    return buf;
}

void bench_print_hist(const char *label, const struct bench_hist *h, double scale, const char *unit)
{
    char q50[64], q99[64];

    printf("  %-34s n=%.0f mean %.2f%s, p50 in %s%s, p99 in %s%s (buckets)\n", label, h->count,
           bench_hist_mean(h) * scale, unit, bench_hist_q(h, 0.5, scale, q50, sizeof(q50)), unit,
           bench_hist_q(h, 0.99, scale, q99, sizeof(q99)), unit);
}

void bench_print_buckets(const char *label, const struct bench_hist *h)
{
    double prev = 0;

    printf("  %-34s", label);
    for (int i = 0; i < h->n; i++) {
        if (h->cum[i] - prev > 0) {
            if (isinf(h->le[i]))
                printf(" >%g:%.0f", h->le[i - 1], h->cum[i] - prev);
            else
                printf(" <=%g:%.0f", h->le[i], h->cum[i] - prev);
        }
        prev = h->cum[i];
    }
    printf("\n");
}
