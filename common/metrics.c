#include "common/metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/parse.h"

/* A double lives in an atomic 64-bit word (bit copy), so readers never see a
 * torn value and writers never take a lock. */
typedef _Atomic uint64_t metric_atomic_double;

/* Room for a double as metrics_fmt_double writes it (at most 24 characters and the NUL). */
#define METRICS_NUM_MAX 32

static void metrics_fmt_double(char *buf, size_t size, double v);

struct metric {
    struct metric *next;
    char *name;
    char *help;
    char *labels; /* "" when none */
    enum metric_kind kind;
    metric_atomic_double value; /* counter and gauge */
    /* Histogram: per-bucket (not cumulative) counts; index nbuckets is +Inf.
     * The count is the sum of the buckets, so _count always equals the +Inf
     * bucket of the same rendering even while observations land. */
    size_t nbuckets;
    double bounds[METRIC_MAX_BUCKETS];
    /* A histogram's bounds as the text rendering writes them (metrics_fmt_double), nbuckets of
     * them, made once at creation (NULL for the other kinds): the bounds never change, and
     * printf's floating-point path and the strtod check for each of them were most of a
     * histogram's rendering. */
    char (*le)[METRICS_NUM_MAX];
    _Atomic uint64_t counts[METRIC_MAX_BUCKETS + 1];
    metric_atomic_double sum;
};

/* The registry: a list kept grouped by name (a new series is linked after the
 * last series of its name), so rendering writes one HELP/TYPE block per name.
 * The lock guards the list shape only; values are atomics. */
static pthread_mutex_t metrics_lock = PTHREAD_MUTEX_INITIALIZER;
static struct metric *metrics_head;
static size_t metrics_render_hint; /* the last text's length (under the lock) */

static atomic_int metrics_live = 1;
static atomic_int metrics_ready = 0;

/* The watched call: its start (monotonic us, 0 = none), the limit and the age gauge. */
static _Atomic int64_t metrics_call_start_us;
static _Atomic long metrics_call_limit_ms;
static _Atomic(struct metric *) metrics_call_gauge;

static uint64_t metrics_d2u(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof(u));
    return u;
}

static double metrics_u2d(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof(d));
    return d;
}

static void metrics_atomic_add(metric_atomic_double *slot, double v)
{
    uint64_t old = atomic_load_explicit(slot, memory_order_relaxed);

    while (!atomic_compare_exchange_weak_explicit(slot, &old, metrics_d2u(metrics_u2d(old) + v),
                                                  memory_order_relaxed, memory_order_relaxed))
        ;
}

static double metrics_atomic_get(const metric_atomic_double *slot)
{
    return metrics_u2d(atomic_load_explicit((metric_atomic_double *)slot, memory_order_relaxed));
}

/* Metric names: [a-zA-Z_:][a-zA-Z0-9_:]*. */
static bool metrics_name_valid(const char *s)
{
    if (s == NULL || *s == '\0')
        return false;
    for (const char *p = s; *p; p++) {
        char c = *p;
        bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
        if (!alpha && !(p != s && c >= '0' && c <= '9'))
            return false;
    }
    return true;
}

/* Checks a fixed label set: name="value"(,name="value")*, with \\ \" \n the
 * only escapes in values, no reserved "__" names and, for histograms, no
 * "le" (the renderer adds it). */
static bool metrics_labels_valid(const char *s, bool histogram)
{
    const char *p = s;

    while (*p) {
        const char *start = p;
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_'))
            return false;
        while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_' ||
               (*p >= '0' && *p <= '9'))
            p++;
        if (p - start >= 2 && start[0] == '_' && start[1] == '_')
            return false;
        if (histogram && p - start == 2 && start[0] == 'l' && start[1] == 'e')
            return false;
        if (*p++ != '=' || *p++ != '"')
            return false;
        while (*p != '"') {
            if (*p == '\0' || *p == '\n')
                return false;
            if (*p == '\\') {
                p++;
                if (*p != '\\' && *p != '"' && *p != 'n')
                    return false;
            }
            p++;
        }
        p++;
        if (*p == ',' && p[1] != '\0')
            p++;
        else if (*p != '\0')
            return false;
    }
    return true;
}

static void metric_free(struct metric *m)
{
    if (m == NULL)
        return;
    free(m->name);
    free(m->help);
    free(m->labels);
    free(m->le);
    free(m);
}

struct metric *metric_register(const char *name, const char *help, enum metric_kind kind,
                               const char *labels, const double *buckets, size_t nbuckets)
{
    struct metric *m = NULL, *found = NULL, *last_same = NULL, *tail = NULL;
    char q[256];

    if (labels == NULL)
        labels = "";
    if (!metrics_name_valid(name)) {
        log_error("metric_invalid", "name=%s reason=\"invalid metric name\"",
                  log_quote(q, sizeof(q), name));
        return NULL;
    }
    if (!metrics_labels_valid(labels, kind == METRIC_HISTOGRAM)) {
        log_error("metric_invalid", "name=%s reason=\"invalid label set\" labels=%s", name,
                  log_quote(q, sizeof(q), labels));
        return NULL;
    }
    if (kind == METRIC_HISTOGRAM) {
        if (nbuckets > METRIC_MAX_BUCKETS || (nbuckets > 0 && buckets == NULL)) {
            log_error("metric_invalid", "name=%s reason=\"too many buckets\"", name);
            return NULL;
        }
        for (size_t i = 0; i < nbuckets; i++) {
            if (isnan(buckets[i]) || isinf(buckets[i]) || (i > 0 && buckets[i] <= buckets[i - 1])) {
                log_error("metric_invalid",
                          "name=%s reason=\"buckets must be finite and strictly ascending\"", name);
                return NULL;
            }
        }
    } else if (kind != METRIC_COUNTER && kind != METRIC_GAUGE) {
        return NULL;
    }

    m = calloc(1, sizeof(*m));
    if (m == NULL)
        return NULL;
    m->name = strdup(name);
    m->help = strdup(help != NULL ? help : "");
    m->labels = strdup(labels);
    if (m->name == NULL || m->help == NULL || m->labels == NULL) {
        metric_free(m);
        return NULL;
    }
    m->kind = kind;
    if (kind == METRIC_HISTOGRAM) {
        m->nbuckets = nbuckets;
        if (nbuckets > 0)
            memcpy(m->bounds, buckets, nbuckets * sizeof(buckets[0]));
        m->le = calloc(nbuckets > 0 ? nbuckets : 1, sizeof(*m->le));
        if (m->le == NULL) {
            metric_free(m);
            return NULL;
        }
        for (size_t i = 0; i < nbuckets; i++)
            metrics_fmt_double(m->le[i], sizeof(m->le[i]), m->bounds[i]);
    }

    pthread_mutex_lock(&metrics_lock);
    for (struct metric *it = metrics_head; it != NULL; it = it->next) {
        if (strcmp(it->name, name) == 0) {
            last_same = it;
            if (it->kind != kind) {
                pthread_mutex_unlock(&metrics_lock);
                log_error("metric_invalid",
                          "name=%s reason=\"registered before with another type\"", name);
                metric_free(m);
                return NULL;
            }
            if (strcmp(it->labels, labels) == 0)
                found = it;
        }
        tail = it;
    }
    if (found != NULL) {
        /* Registering the same series twice hands back the first one, so
         * two modules may declare a shared metric. */
        pthread_mutex_unlock(&metrics_lock);
        metric_free(m);
        return found;
    }
    if (last_same != NULL) {
        m->next = last_same->next;
        last_same->next = m;
    } else if (tail != NULL) {
        tail->next = m;
    } else {
        metrics_head = m;
    }
    pthread_mutex_unlock(&metrics_lock);
    return m;
}

struct metric *metric_series(const char *name, const char *help, enum metric_kind kind,
                             const char *label, const char *value, size_t max_series)
{
    char labels[512];
    size_t len, nseries = 0;
    bool known = false;
    int w;

    w = snprintf(labels, sizeof(labels), "%s=\"", label);
    if (w < 0 || (size_t)w >= sizeof(labels) - 8)
        return NULL;
    len = (size_t)w;
    for (const char *p = value; *p != '\0' && len < sizeof(labels) - 4; p++) {
        if (*p == '\\' || *p == '"' || *p == '\n') {
            labels[len++] = '\\';
            labels[len++] = *p == '\n' ? 'n' : *p;
        } else {
            labels[len++] = *p;
        }
    }
    labels[len++] = '"';
    labels[len] = '\0';
    pthread_mutex_lock(&metrics_lock);
    for (struct metric *it = metrics_head; it != NULL; it = it->next)
        if (strcmp(it->name, name) == 0) {
            nseries++;
            known |= strcmp(it->labels, labels) == 0;
        }
    pthread_mutex_unlock(&metrics_lock);
    if (!known && nseries >= max_series)
        snprintf(labels, sizeof(labels), "%s=\"other\"", label);
    return metric_register(name, help, kind, labels, NULL, 0);
}

void metric_inc(struct metric *m, double v)
{
    if (m == NULL || isnan(v) || m->kind == METRIC_HISTOGRAM)
        return;
    /* A counter only goes up; a negative step would break rate(). */
    if (m->kind == METRIC_COUNTER && v < 0)
        return;
    metrics_atomic_add(&m->value, v);
}

void metric_set(struct metric *m, double v)
{
    if (m == NULL || m->kind == METRIC_HISTOGRAM)
        return;
    atomic_store_explicit(&m->value, metrics_d2u(v), memory_order_relaxed);
}

void metric_observe(struct metric *m, double v)
{
    size_t i;

    if (m == NULL || m->kind != METRIC_HISTOGRAM || isnan(v))
        return;
    /* Upper bounds are inclusive (le = "less or equal"). */
    for (i = 0; i < m->nbuckets && v > m->bounds[i]; i++)
        ;
    metrics_atomic_add(&m->sum, v);
    atomic_fetch_add_explicit(&m->counts[i], 1, memory_order_relaxed);
}

double metric_value(const struct metric *m)
{
    double total = 0;

    if (m == NULL)
        return 0;
    if (m->kind != METRIC_HISTOGRAM)
        return metrics_atomic_get(&m->value);
    for (size_t i = 0; i <= m->nbuckets; i++)
        total +=
            (double)atomic_load_explicit((_Atomic uint64_t *)&m->counts[i], memory_order_relaxed);
    return total;
}

double metric_sum(const struct metric *m)
{
    if (m == NULL || m->kind != METRIC_HISTOGRAM)
        return 0;
    return metrics_atomic_get(&m->sum);
}

/* ---- rendering ---------------------------------------------------------- */

/* Output that counts what it would need even when the buffer is full, so
 * callers learn the size like with snprintf. */
struct metrics_out {
    char *buf;
    size_t size;
    size_t len;
};

static void metrics_put(struct metrics_out *o, const char *s, size_t n)
{
    if (o->len < o->size) {
        size_t room = o->size - o->len - 1; /* keep the NUL */
        size_t c = n < room ? n : room;
        memcpy(o->buf + o->len, s, c);
        o->buf[o->len + c] = '\0';
    }
    o->len += n;
}

static void metrics_puts(struct metrics_out *o, const char *s)
{
    metrics_put(o, s, strlen(s));
}

/* Shortest text that reads back as the same double; Prometheus spells the
 * special values +Inf, -Inf and NaN. */
static void metrics_fmt_double(char *buf, size_t size, double v)
{
    if (isnan(v)) {
        snprintf(buf, size, "NaN");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, size, "%s", v > 0 ? "+Inf" : "-Inf");
        return;
    }
    /* A whole number below 10^15 (counters, a gauge of partitions or bytes), written as %.15g
     * writes it: its digits, no point, no exponent. Without printf's floating-point path and the
     * strtod check, which were most of a scrape's CPU (a scrape every 20 ms while a benchmark
     * polls, for one). -0 keeps its sign through printf below. */
    if (v >= 0 && v < 1e15 && !signbit(v) && v == (double)(uint64_t)v) {
        char digits[16];
        size_t n = 0;
        uint64_t u = (uint64_t)v;

        do {
            digits[n++] = (char)('0' + u % 10);
            u /= 10;
        } while (u > 0);
        if (n < size) {
            for (size_t i = 0; i < n; i++)
                buf[i] = digits[n - 1 - i];
            buf[n] = '\0';
            return;
        }
    }
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, size, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

static void metrics_put_double(struct metrics_out *o, double v)
{
    char num[40];

    metrics_fmt_double(num, sizeof(num), v);
    metrics_puts(o, num);
}

static void metrics_put_u64(struct metrics_out *o, uint64_t v)
{
    char num[24];
    size_t at = sizeof(num);

    /* Digits from the right, without printf: a histogram writes one per bucket. */
    do {
        num[--at] = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0);
    metrics_put(o, num + at, sizeof(num) - at);
}

/* HELP text escapes backslash and newline. */
static void metrics_put_help(struct metrics_out *o, const char *s)
{
    for (const char *p = s; *p; p++) {
        if (*p == '\\')
            metrics_puts(o, "\\\\");
        else if (*p == '\n')
            metrics_puts(o, "\\n");
        else
            metrics_put(o, p, 1);
    }
}

/* name + suffix + {labels[,le="x"]} */
static void metrics_put_series(struct metrics_out *o, const struct metric *m, const char *suffix,
                               const char *le)
{
    metrics_puts(o, m->name);
    metrics_puts(o, suffix);
    if (*m->labels == '\0' && le == NULL)
        return;
    metrics_puts(o, "{");
    metrics_puts(o, m->labels);
    if (le != NULL) {
        if (*m->labels != '\0')
            metrics_puts(o, ",");
        metrics_puts(o, "le=\"");
        metrics_puts(o, le);
        metrics_puts(o, "\"");
    }
    metrics_puts(o, "}");
}

static const char *metrics_kind_str(enum metric_kind kind)
{
    switch (kind) {
    case METRIC_COUNTER:
        return "counter";
    case METRIC_GAUGE:
        return "gauge";
    case METRIC_HISTOGRAM:
        return "histogram";
    }
    return "untyped";
}

static void metrics_render_one(struct metrics_out *o, const struct metric *m)
{
    uint64_t counts[METRIC_MAX_BUCKETS + 1];
    uint64_t cumulative = 0;

    if (m->kind != METRIC_HISTOGRAM) {
        metrics_put_series(o, m, "", NULL);
        metrics_puts(o, " ");
        metrics_put_double(o, metrics_atomic_get(&m->value));
        metrics_puts(o, "\n");
        return;
    }
    /* Snapshot the buckets once, then derive every cumulative line and the
     * count from the snapshot: the lines stay consistent with each other. */
    for (size_t i = 0; i <= m->nbuckets; i++)
        counts[i] = atomic_load_explicit((_Atomic uint64_t *)&m->counts[i], memory_order_relaxed);
    for (size_t i = 0; i <= m->nbuckets; i++) {
        cumulative += counts[i];
        metrics_put_series(o, m, "_bucket", i < m->nbuckets ? m->le[i] : "+Inf");
        metrics_puts(o, " ");
        metrics_put_u64(o, cumulative);
        metrics_puts(o, "\n");
    }
    metrics_put_series(o, m, "_sum", NULL);
    metrics_puts(o, " ");
    metrics_put_double(o, metrics_atomic_get(&m->sum));
    metrics_puts(o, "\n");
    metrics_put_series(o, m, "_count", NULL);
    metrics_puts(o, " ");
    metrics_put_u64(o, cumulative);
    metrics_puts(o, "\n");
}

static size_t metrics_render_locked(struct metrics_out *o)
{
    const struct metric *prev = NULL;

    if (o->size > 0)
        o->buf[0] = '\0';
    for (const struct metric *m = metrics_head; m != NULL; prev = m, m = m->next) {
        if (prev == NULL || strcmp(prev->name, m->name) != 0) {
            if (*m->help != '\0') {
                metrics_puts(o, "# HELP ");
                metrics_puts(o, m->name);
                metrics_puts(o, " ");
                metrics_put_help(o, m->help);
                metrics_puts(o, "\n");
            }
            metrics_puts(o, "# TYPE ");
            metrics_puts(o, m->name);
            metrics_puts(o, " ");
            metrics_puts(o, metrics_kind_str(m->kind));
            metrics_puts(o, "\n");
        }
        metrics_render_one(o, m);
    }
    return o->len;
}

void metrics_call_begin(void)
{
    int64_t now = clock_mono_us();

    atomic_store(&metrics_call_start_us, now > 0 ? now : 1);
}

void metrics_call_end(void)
{
    atomic_store(&metrics_call_start_us, 0);
}

void metrics_call_watch(struct metric *age_gauge, long limit_ms)
{
    atomic_store(&metrics_call_gauge, age_gauge);
    atomic_store(&metrics_call_limit_ms, limit_ms > 0 ? limit_ms : 0);
}

long metrics_call_age_ms(void)
{
    int64_t start = atomic_load(&metrics_call_start_us);

    return start != 0 ? (long)((clock_mono_us() - start) / 1000) : 0;
}

/* True while the watched call has run longer than its limit. */
static bool metrics_call_stuck(long *age_ms)
{
    long limit = atomic_load(&metrics_call_limit_ms);

    *age_ms = metrics_call_age_ms();
    return limit > 0 && *age_ms > limit;
}

/* The age gauge as of this rendering. */
static void metrics_call_gauge_update(void)
{
    struct metric *g = atomic_load(&metrics_call_gauge);

    if (g != NULL)
        metric_set(g, (double)metrics_call_age_ms() / 1000.0);
}

size_t metrics_render(char *buf, size_t size)
{
    struct metrics_out o = {.buf = buf, .size = buf != NULL ? size : 0, .len = 0};
    size_t n;

    metrics_call_gauge_update();
    pthread_mutex_lock(&metrics_lock);
    n = metrics_render_locked(&o);
    pthread_mutex_unlock(&metrics_lock);
    return n;
}

/* Renders into a malloc'd buffer; *len receives the text length. */
static char *metrics_render_alloc(size_t *len)
{
    struct metrics_out o = {0};
    char *buf = NULL;
    size_t n = 0;

    metrics_call_gauge_update();
    pthread_mutex_lock(&metrics_lock);
    /* One pass into a buffer the size of the last text and some room for digits to grow (a scrape
     * every 20 ms while a benchmark polls: a sizing pass first was half the cost); a text that
     * outgrew it is measured by that pass and written again. */
    o.size = metrics_render_hint + 1024;
    buf = malloc(o.size);
    if (buf != NULL) {
        o.buf = buf;
        /* Under the lock the list cannot change, but values may grow a digit between two
         * passes: a pass may be cut, so measure again and retry with room to spare. */
        n = metrics_render_locked(&o);
        while (buf != NULL && n >= o.size) {
            char *grown = realloc(buf, n + 64);
            if (grown == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = grown;
            o = (struct metrics_out){.buf = buf, .size = n + 64, .len = 0};
            n = metrics_render_locked(&o);
        }
    }
    if (buf != NULL)
        metrics_render_hint = n;
    pthread_mutex_unlock(&metrics_lock);
    *len = n;
    return buf;
}

enum og_status metrics_write_textfile(const char *path, struct og_error *err)
{
    char tmp[4096];
    char *text = NULL;
    size_t len = 0;
    enum og_status st = OG_OK;
    FILE *f = NULL;

    if (path == NULL || *path == '\0')
        return og_error_set(err, OG_ERR_ARG, false, "textfile path is empty");
    if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= sizeof(tmp))
        return og_error_set(err, OG_ERR_ARG, false, "textfile path is too long");
    text = metrics_render_alloc(&len);
    if (text == NULL)
        return og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
    /* node_exporter may read the file at any moment: it must only ever see
     * a complete file, so write a temporary beside it and rename over. */
    f = fopen(tmp, "w");
    if (f == NULL) {
        st = og_error_set(err, OG_ERR_IO, false, "%s: cannot create: %s", tmp, strerror(errno));
        goto out;
    }
    if (fwrite(text, 1, len, f) != len || fflush(f) != 0 || fsync(fileno(f)) != 0) {
        st = og_error_set(err, OG_ERR_IO, true, "%s: cannot write: %s", tmp, strerror(errno));
        goto out;
    }
    if (fclose(f) != 0) {
        f = NULL;
        st = og_error_set(err, OG_ERR_IO, true, "%s: cannot write: %s", tmp, strerror(errno));
        goto out;
    }
    f = NULL;
    if (rename(tmp, path) != 0)
        st = og_error_set(err, OG_ERR_IO, false, "cannot rename %s to %s: %s", tmp, path,
                          strerror(errno));
out:
    if (f != NULL)
        fclose(f);
    if (st != OG_OK)
        unlink(tmp);
    free(text);
    return st;
}

void metrics_set_health(int live, int ready)
{
    atomic_store(&metrics_live, live != 0);
    atomic_store(&metrics_ready, ready != 0);
}

void metrics_reset(void)
{
    struct metric *m;

    pthread_mutex_lock(&metrics_lock);
    m = metrics_head;
    metrics_head = NULL;
    metrics_call_watch(NULL, 0);
    metrics_call_end();
    pthread_mutex_unlock(&metrics_lock);
    while (m != NULL) {
        struct metric *next = m->next;
        metric_free(m);
        m = next;
    }
    metrics_set_health(1, 0);
}

/* ---- HTTP --------------------------------------------------------------- */

static pthread_mutex_t metrics_http_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t metrics_http_lock_log = PTHREAD_MUTEX_INITIALIZER;
static struct MHD_Daemon *metrics_daemon;
static int metrics_port;

static enum MHD_Result metrics_http_reply(struct MHD_Connection *conn, unsigned int code,
                                          const char *content_type, void *body, size_t len,
                                          enum MHD_ResponseMemoryMode mode)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, body, mode);
    enum MHD_Result rc;

    if (resp == NULL) {
        if (mode == MHD_RESPMEM_MUST_FREE)
            free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    rc = MHD_queue_response(conn, code, resp);
    MHD_destroy_response(resp);
    return rc;
}

static enum MHD_Result metrics_http_text(struct MHD_Connection *conn, unsigned int code,
                                         const char *text)
{
    return metrics_http_reply(conn, code, "text/plain; charset=utf-8", (void *)text, strlen(text),
                              MHD_RESPMEM_PERSISTENT);
}

static enum MHD_Result metrics_http_handle(void *cls, struct MHD_Connection *conn, const char *url,
                                           const char *method, const char *version,
                                           const char *upload_data, size_t *upload_data_size,
                                           void **con_cls)
{
    /* HEAD is GET without a body (MHD drops it); anything else is refused
     * before its body is read. */
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return metrics_http_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n");
    if (strcmp(url, "/metrics") == 0) {
        size_t len = 0;
        char *text = metrics_render_alloc(&len);
        if (text == NULL)
            return metrics_http_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
        return metrics_http_reply(conn, MHD_HTTP_OK, "text/plain; version=0.0.4", text, len,
                                  MHD_RESPMEM_MUST_FREE);
    }
    if (strcmp(url, "/healthz") == 0 || strcmp(url, "/readyz") == 0) {
        bool healthz = strcmp(url, "/healthz") == 0;
        long age_ms = 0;

        if (metrics_call_stuck(&age_ms)) {
            char text[96];
            int n = snprintf(text, sizeof(text), "%s: database call running for %ld ms\n",
                             healthz ? "not live" : "not ready", age_ms);
            return metrics_http_reply(conn, MHD_HTTP_SERVICE_UNAVAILABLE,
                                      "text/plain; charset=utf-8", text, (size_t)n,
                                      MHD_RESPMEM_MUST_COPY);
        }
        if (healthz)
            return atomic_load(&metrics_live)
                       ? metrics_http_text(conn, MHD_HTTP_OK, "ok\n")
                       : metrics_http_text(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "not live\n");
        return atomic_load(&metrics_ready)
                   ? metrics_http_text(conn, MHD_HTTP_OK, "ready\n")
                   : metrics_http_text(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "not ready\n");
    }
    return metrics_http_text(conn, MHD_HTTP_NOT_FOUND, "not found\n");
}

/* MHD's complaints, one log line per METRICS_HTTP_LOG_EVERY_MS at most: a flood of refused
 * connections (each one a "connection limit" complaint) must not flood the log too. The next
 * line after a quiet spell says how many were left out. Called from MHD's one thread. */
#define METRICS_HTTP_LOG_EVERY_MS 10000
static int64_t metrics_http_log_next_ms;
static unsigned long metrics_http_log_dropped;

__attribute__((format(printf, 2, 0))) static void metrics_http_log(void *cls, const char *fmt,
                                                                   va_list ap)
{
    char msg[512], q[600];
    size_t len;
    int64_t now = clock_mono_ms();
    unsigned long dropped;

    (void)cls;
    pthread_mutex_lock(&metrics_http_lock_log);
    if (now < metrics_http_log_next_ms) {
        metrics_http_log_dropped++;
        pthread_mutex_unlock(&metrics_http_lock_log);
        return;
    }
    metrics_http_log_next_ms = now + METRICS_HTTP_LOG_EVERY_MS;
    dropped = metrics_http_log_dropped;
    metrics_http_log_dropped = 0;
    pthread_mutex_unlock(&metrics_http_lock_log);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    len = strlen(msg);
    while (len > 0 && msg[len - 1] == '\n')
        msg[--len] = '\0';
    log_warn("metrics_http", "error=%s suppressed=%lu", log_quote(q, sizeof(q), msg), dropped);
}

/* Splits "ADDR:PORT", "[V6]:PORT" or ":PORT" and resolves the address
 * numerically or by name (first result). An empty address or "*" binds every
 * IPv4 interface. */
static enum og_status metrics_http_addr(const char *listen, struct sockaddr_storage *ss, bool *ipv6,
                                        struct og_error *err)
{
    char host[256];
    const char *colon, *port_s;
    int64_t port;
    size_t hlen;
    struct addrinfo hints, *res = NULL;
    int rc;

    if (listen[0] == '[') {
        const char *close = strchr(listen, ']');
        if (close == NULL || close[1] != ':')
            return og_error_set(err, OG_ERR_CONFIG, false,
                                "metrics listen '%s': expected [ADDR]:PORT", listen);
        hlen = (size_t)(close - listen - 1);
        if (hlen >= sizeof(host))
            return og_error_set(err, OG_ERR_CONFIG, false, "metrics listen '%s': address too long",
                                listen);
        memcpy(host, listen + 1, hlen);
        host[hlen] = '\0';
        port_s = close + 2;
    } else {
        colon = strrchr(listen, ':');
        if (colon == NULL)
            return og_error_set(err, OG_ERR_CONFIG, false,
                                "metrics listen '%s': expected ADDR:PORT", listen);
        hlen = (size_t)(colon - listen);
        if (hlen >= sizeof(host))
            return og_error_set(err, OG_ERR_CONFIG, false, "metrics listen '%s': address too long",
                                listen);
        memcpy(host, listen, hlen);
        host[hlen] = '\0';
        if (memchr(host, ':', hlen) != NULL)
            return og_error_set(err, OG_ERR_CONFIG, false,
                                "metrics listen '%s': write IPv6 addresses as [ADDR]:PORT", listen);
        port_s = colon + 1;
    }
    if (parse_int64(NULL, port_s, 0, 65535, &port, NULL) != OG_OK)
        return og_error_set(err, OG_ERR_CONFIG, false,
                            "metrics listen '%s': port must be 0 to 65535", listen);

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    if (host[0] == '\0' || strcmp(host, "*") == 0) {
        hints.ai_family = AF_INET;
        hints.ai_flags |= AI_PASSIVE;
    }
    rc = getaddrinfo(host[0] != '\0' && strcmp(host, "*") != 0 ? host : NULL, port_s, &hints, &res);
    if (rc != 0 || res == NULL)
        return og_error_set(err, OG_ERR_CONFIG, false, "metrics listen '%s': %s", listen,
                            rc != 0 ? gai_strerror(rc) : "no address");
    memset(ss, 0, sizeof(*ss));
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *ipv6 = res->ai_family == AF_INET6;
    freeaddrinfo(res);
    return OG_OK;
}

static const struct metrics_http_limits metrics_http_defaults = {
    METRICS_HTTP_PER_IP_DEFAULT, METRICS_HTTP_MAX_CONNECTIONS_DEFAULT,
    METRICS_HTTP_TIMEOUT_S_DEFAULT};

static enum og_status metrics_http_check_limits(const struct metrics_http_limits *l,
                                                struct og_error *err)
{
    if (l->per_ip < 1 || l->timeout_s < 1 || l->max_connections < 2)
        return og_error_set(err, OG_ERR_CONFIG, false,
                            "metrics limits: per-peer limit and timeout must be at least 1, the "
                            "connection limit at least 2 (got %u, %u s, %u)",
                            l->per_ip, l->timeout_s, l->max_connections);
    if (l->per_ip >= l->max_connections)
        return og_error_set(err, OG_ERR_CONFIG, false,
                            "metrics limits: the per-peer limit (%u) must be below the connection "
                            "limit (%u), or one peer can take every connection",
                            l->per_ip, l->max_connections);
    return OG_OK;
}

enum og_status metrics_http_check(const char *listen, const struct metrics_http_limits *limits,
                                  struct og_error *err)
{
    struct sockaddr_storage ss;
    bool ipv6 = false;
    enum og_status st;

    if (limits != NULL && (st = metrics_http_check_limits(limits, err)) != OG_OK)
        return st;
    if (listen == NULL || *listen == '\0')
        return OG_OK;
    return metrics_http_addr(listen, &ss, &ipv6, err);
}

enum og_status metrics_http_start(const char *listen, struct og_error *err)
{
    return metrics_http_start_bounded(listen, NULL, err);
}

enum og_status metrics_http_start_bounded(const char *listen,
                                          const struct metrics_http_limits *limits,
                                          struct og_error *err)
{
    struct sockaddr_storage ss;
    bool ipv6 = false;
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG;
    const union MHD_DaemonInfo *info;
    const struct metrics_http_limits *l = limits != NULL ? limits : &metrics_http_defaults;
    enum og_status st;

    if (listen == NULL || *listen == '\0') {
        log_info("metrics_http_disabled", NULL);
        return OG_OK;
    }
    st = metrics_http_check_limits(l, err);
    if (st != OG_OK)
        return st;
    st = metrics_http_addr(listen, &ss, &ipv6, err);
    if (st != OG_OK)
        return st;
    if (ipv6)
        flags |= MHD_USE_IPv6;

    pthread_mutex_lock(&metrics_http_lock);
    if (metrics_daemon != NULL) {
        st = og_error_set(err, OG_ERR_INTERNAL, false, "metrics HTTP server is already running");
        goto out;
    }
    /* Bounded so that no client can starve the others: a peer address holds at most per_ip
     * connections (MHD closes its next one at once), all peers together max_connections, and
     * a connection idle (or sending nothing) for timeout_s is closed. A scrape or a probe is
     * one short request, so a timeout of a few seconds loses nothing and a socket opened and
     * left idle frees its slot within that time. The logger goes first so MHD's complaints
     * about later options reach our log too. */
    metrics_daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, metrics_http_handle, NULL, MHD_OPTION_EXTERNAL_LOGGER,
        metrics_http_log, NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned int)l->max_connections,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned int)l->per_ip, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned int)l->timeout_s, MHD_OPTION_END);
    if (metrics_daemon == NULL) {
        /* A busy or forbidden port may free up: the caller may retry. */
        st = og_error_set(err, OG_ERR_IO, true, "metrics HTTP server cannot listen on %s", listen);
        goto out;
    }
    info = MHD_get_daemon_info(metrics_daemon, MHD_DAEMON_INFO_BIND_PORT);
    metrics_port = info != NULL ? info->port : 0;
    log_info("metrics_http_listening",
             "listen=%s port=%d per_ip_limit=%u max_connections=%u "
             "timeout_s=%u",
             listen, metrics_port, l->per_ip, l->max_connections, l->timeout_s);
out:
    pthread_mutex_unlock(&metrics_http_lock);
    return st;
}

int metrics_http_port(void)
{
    int port;

    pthread_mutex_lock(&metrics_http_lock);
    port = metrics_daemon != NULL ? metrics_port : 0;
    pthread_mutex_unlock(&metrics_http_lock);
    return port;
}

void metrics_http_stop(void)
{
    pthread_mutex_lock(&metrics_http_lock);
    if (metrics_daemon != NULL)
        MHD_stop_daemon(metrics_daemon);
    metrics_daemon = NULL;
    metrics_port = 0;
    pthread_mutex_unlock(&metrics_http_lock);
}
