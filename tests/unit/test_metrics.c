/* Metrics: exact exposition text, lock-free updates under contention, the
 * HTTP endpoint scraped with a plain socket, and the atomic textfile. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/metrics.h"
#include "common/scrape.h"

static int reset(void **state)
{
    (void)state;
    metrics_http_stop();
    metrics_reset();
    return 0;
}

static void test_render_exact(void **state)
{
    static const double buckets[] = {0.1, 0.5, 2.5};
    struct metric *cancelled, *paid, *lag, *batch, *other;
    char buf[4096];
    size_t n;

    (void)state;
    cancelled = metric_register("og_claims_total", "Claims by outcome.", METRIC_COUNTER,
                                "outcome=\"cancelled\"", NULL, 0);
    lag = metric_register("og_lag_seconds", "Lag\\behind\ndue time.", METRIC_GAUGE, NULL, NULL, 0);
    batch = metric_register("og_batch_seconds", "Batch duration.", METRIC_HISTOGRAM,
                            "source=\"consumer\",topic=\"a.b\"", buckets, 3);
    /* Registered last, rendered beside its sibling under one HELP/TYPE. */
    paid = metric_register("og_claims_total", "ignored: the first help wins", METRIC_COUNTER,
                           "outcome=\"paid\"", NULL, 0);
    other = metric_register("og_plain_hist", NULL, METRIC_HISTOGRAM, NULL, buckets, 1);
    assert_non_null(cancelled);
    assert_non_null(paid);
    assert_non_null(lag);
    assert_non_null(batch);
    assert_non_null(other);

    metric_inc(cancelled, 3);
    metric_inc(cancelled, -5); /* counters never go down */
    metric_inc(paid, 1);
    metric_set(lag, 2.5);
    metric_inc(lag, -4);
    metric_observe(batch, 0.05);
    metric_observe(batch, 0.1); /* on the bound: le is inclusive */
    metric_observe(batch, 1);
    metric_observe(batch, 10);
    metric_observe(other, 7);

    n = metrics_render(buf, sizeof(buf));
    assert_string_equal(buf,
                        "# HELP og_claims_total Claims by outcome.\n"
                        "# TYPE og_claims_total counter\n"
                        "og_claims_total{outcome=\"cancelled\"} 3\n"
                        "og_claims_total{outcome=\"paid\"} 1\n"
                        "# HELP og_lag_seconds Lag\\\\behind\\ndue time.\n"
                        "# TYPE og_lag_seconds gauge\n"
                        "og_lag_seconds -1.5\n"
                        "# HELP og_batch_seconds Batch duration.\n"
                        "# TYPE og_batch_seconds histogram\n"
                        "og_batch_seconds_bucket{source=\"consumer\",topic=\"a.b\",le=\"0.1\"} 2\n"
                        "og_batch_seconds_bucket{source=\"consumer\",topic=\"a.b\",le=\"0.5\"} 2\n"
                        "og_batch_seconds_bucket{source=\"consumer\",topic=\"a.b\",le=\"2.5\"} 3\n"
                        "og_batch_seconds_bucket{source=\"consumer\",topic=\"a.b\",le=\"+Inf\"} 4\n"
                        "og_batch_seconds_sum{source=\"consumer\",topic=\"a.b\"} 11.15\n"
                        "og_batch_seconds_count{source=\"consumer\",topic=\"a.b\"} 4\n"
                        "# TYPE og_plain_hist histogram\n"
                        "og_plain_hist_bucket{le=\"0.1\"} 0\n"
                        "og_plain_hist_bucket{le=\"+Inf\"} 1\n"
                        "og_plain_hist_sum 7\n"
                        "og_plain_hist_count 1\n");
    assert_int_equal(n, strlen(buf));
    assert_true(metric_value(cancelled) == 3);
    assert_true(metric_value(batch) == 4);
    assert_true(metric_sum(batch) == 11.15);
}

/* Values are written as the shortest text that reads back the same; whole numbers (the common
 * case, written without printf's floating-point path) exactly as %.15g writes them. */
static void test_render_numbers(void **state)
{
    static const double values[] = {0,
                                    -0.0,
                                    1,
                                    7,
                                    10,
                                    999999,
                                    1e14,
                                    1e15 - 1,
                                    1e15,
                                    1e15 + 2,
                                    123456789012345678.0,
                                    0.5,
                                    -3,
                                    2.5e-7,
                                    1.0 / 3,
                                    4503599627370497.0};
    struct metric *g = metric_register("og_value", NULL, METRIC_GAUGE, NULL, NULL, 0);
    char buf[256], want[256], num[40];

    (void)state;
    assert_non_null(g);
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        metric_set(g, values[i]);
        metrics_render(buf, sizeof(buf));
        for (int prec = 15; prec <= 17; prec++) {
            snprintf(num, sizeof(num), "%.*g", prec, values[i]);
            if (strtod(num, NULL) == values[i])
                break;
        }
        snprintf(want, sizeof(want), "# TYPE og_value gauge\nog_value %s\n", num);
        assert_string_equal(buf, want);
    }
}

static void test_render_small_buffer(void **state)
{
    struct metric *g;
    char small[16];
    char *full;
    size_t need, n;

    (void)state;
    g = metric_register("og_value", "A value.", METRIC_GAUGE, NULL, NULL, 0);
    metric_set(g, 0.1);
    need = metrics_render(NULL, 0);
    full = malloc(need + 1);
    assert_non_null(full);
    assert_int_equal(metrics_render(full, need + 1), need);
    assert_string_equal(full, "# HELP og_value A value.\n# TYPE og_value gauge\nog_value 0.1\n");
    /* Too small: cut and NUL-terminated, the return says what was needed. */
    memset(small, 'x', sizeof(small));
    n = metrics_render(small, sizeof(small));
    assert_int_equal(n, need);
    assert_int_equal(strlen(small), sizeof(small) - 1);
    assert_memory_equal(small, full, sizeof(small) - 1);
    free(full);
}

static void test_register_rules(void **state)
{
    static const double bad[] = {1, 0.5};
    static const double many[METRIC_MAX_BUCKETS + 1] = {0};
    struct metric *a, *b;

    (void)state;
    a = metric_register("og_x_total", "X.", METRIC_COUNTER, "k=\"v\"", NULL, 0);
    assert_non_null(a);
    /* Same series twice: the first one comes back. */
    b = metric_register("og_x_total", "X.", METRIC_COUNTER, "k=\"v\"", NULL, 0);
    assert_ptr_equal(a, b);
    /* Same name, other kind: refused. */
    assert_null(metric_register("og_x_total", "X.", METRIC_GAUGE, "k=\"w\"", NULL, 0));
    assert_null(metric_register("9bad", "X.", METRIC_GAUGE, NULL, NULL, 0));
    assert_null(metric_register("og-bad", "X.", METRIC_GAUGE, NULL, NULL, 0));
    assert_null(metric_register("og_l", "X.", METRIC_GAUGE, "k=v", NULL, 0));
    assert_null(metric_register("og_l", "X.", METRIC_GAUGE, "k=\"v", NULL, 0));
    assert_null(metric_register("og_l", "X.", METRIC_GAUGE, "k=\"v\",", NULL, 0));
    assert_null(metric_register("og_l", "X.", METRIC_GAUGE, "__k=\"v\"", NULL, 0));
    assert_null(metric_register("og_l", "X.", METRIC_GAUGE, "k=\"a\\x\"", NULL, 0));
    assert_null(metric_register("og_h", "X.", METRIC_HISTOGRAM, "le=\"1\"", bad, 0));
    assert_null(metric_register("og_h", "X.", METRIC_HISTOGRAM, NULL, bad, 2));
    assert_null(
        metric_register("og_h", "X.", METRIC_HISTOGRAM, NULL, many, METRIC_MAX_BUCKETS + 1));
    /* Escaped quote and backslash in a value are fine. */
    assert_non_null(
        metric_register("og_l", "X.", METRIC_GAUGE, "k=\"a\\\"b\\\\c\",j=\"\"", NULL, 0));
    /* NULL metrics are ignored, never a crash. */
    metric_inc(NULL, 1);
    metric_set(NULL, 1);
    metric_observe(NULL, 1);
    assert_true(metric_value(NULL) == 0);
}

#define THREADS 4
#define ROUNDS  200000

struct worker {
    struct metric *counter, *gauge, *hist;
};

static void *worker_run(void *arg)
{
    struct worker *w = arg;

    for (int i = 0; i < ROUNDS; i++) {
        metric_inc(w->counter, 1);
        metric_inc(w->gauge, 0.5);
        metric_observe(w->hist, (i % 2) ? 0.25 : 4);
    }
    return NULL;
}

static void test_concurrent_updates(void **state)
{
    static const double buckets[] = {1};
    struct worker w;
    pthread_t th[THREADS];
    char buf[2048];

    (void)state;
    w.counter = metric_register("og_c_total", "C.", METRIC_COUNTER, NULL, NULL, 0);
    w.gauge = metric_register("og_g", "G.", METRIC_GAUGE, NULL, NULL, 0);
    w.hist = metric_register("og_h", "H.", METRIC_HISTOGRAM, NULL, buckets, 1);
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, worker_run, &w), 0);
    /* Scrapes during the updates must not block them or break the text. */
    for (int i = 0; i < 20; i++)
        assert_true(metrics_render(buf, sizeof(buf)) < sizeof(buf));
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    /* Every step is exactly representable: a lost update would show. */
    assert_true(metric_value(w.counter) == (double)THREADS * ROUNDS);
    assert_true(metric_value(w.gauge) == 0.5 * THREADS * ROUNDS);
    assert_true(metric_value(w.hist) == (double)THREADS * ROUNDS);
    assert_true(metric_sum(w.hist) == (0.25 + 4) * (THREADS * ROUNDS / 2));
    metrics_render(buf, sizeof(buf));
    assert_non_null(strstr(buf, "og_h_bucket{le=\"1\"} 400000\n"));
    assert_non_null(strstr(buf, "og_h_bucket{le=\"+Inf\"} 800000\n"));
    assert_non_null(strstr(buf, "og_c_total 800000\n"));
}

/* One request; fails the test when nothing answers HTTP. */
static int http_request(int port, const char *method, const char *path, char *resp, size_t size)
{
    int code = scrape_http(port, method, path, resp, size, 10000);

    if (code < 0)
        fail_msg("%s %s on port %d: not an HTTP response: %s", method, path, port, resp);
    return code;
}

static const char *http_body(const char *resp)
{
    const char *p = scrape_body(resp);
    assert_non_null(p);
    return p;
}

static void test_http_endpoints(void **state)
{
    struct og_error err = {0};
    struct metric *c;
    char resp[8192];
    int port;

    (void)state;
    c = metric_register("og_scraped_total", "Scraped.", METRIC_COUNTER, "k=\"v\"", NULL, 0);
    metric_inc(c, 42);
    assert_int_equal(metrics_http_port(), 0);
    assert_int_equal(metrics_http_start("127.0.0.1:0", &err), OG_OK);
    port = metrics_http_port();
    assert_true(port > 0);
    /* One server per process. */
    assert_int_not_equal(metrics_http_start("127.0.0.1:0", &err), OG_OK);

    assert_int_equal(http_request(port, "GET", "/metrics", resp, sizeof(resp)), 200);
    assert_non_null(strstr(resp, "Content-Type: text/plain; version=0.0.4\r\n"));
    assert_string_equal(http_body(resp), "# HELP og_scraped_total Scraped.\n"
                                         "# TYPE og_scraped_total counter\n"
                                         "og_scraped_total{k=\"v\"} 42\n");

    /* Live from the start, ready only once told so. */
    assert_int_equal(http_request(port, "GET", "/healthz", resp, sizeof(resp)), 200);
    assert_string_equal(http_body(resp), "ok\n");
    assert_int_equal(http_request(port, "GET", "/readyz", resp, sizeof(resp)), 503);
    metrics_set_health(1, 1);
    assert_int_equal(http_request(port, "GET", "/readyz", resp, sizeof(resp)), 200);
    metrics_set_health(0, 0);
    assert_int_equal(http_request(port, "GET", "/healthz", resp, sizeof(resp)), 503);
    assert_int_equal(http_request(port, "GET", "/readyz", resp, sizeof(resp)), 503);

    assert_int_equal(http_request(port, "GET", "/nope", resp, sizeof(resp)), 404);
    assert_int_equal(http_request(port, "GET", "/metrics/x", resp, sizeof(resp)), 404);
    assert_int_equal(http_request(port, "POST", "/metrics", resp, sizeof(resp)), 405);
    assert_non_null(strstr(resp, "Allow: GET, HEAD\r\n"));
    assert_int_equal(http_request(port, "DELETE", "/healthz", resp, sizeof(resp)), 405);
    assert_int_equal(http_request(port, "HEAD", "/metrics", resp, sizeof(resp)), 200);
    assert_string_equal(http_body(resp), "");

    metrics_http_stop();
    assert_int_equal(metrics_http_port(), 0);
    /* The port is free again after a stop: a restart works. */
    assert_int_equal(metrics_http_start("127.0.0.1:0", &err), OG_OK);
    assert_true(metrics_http_port() > 0);
    metrics_http_stop();
}

/* A watched call that runs longer than its limit fails /healthz and /readyz and shows in the
 * age gauge; between calls both answer as set. */
static void test_http_call_watch(void **state)
{
    struct og_error err = {0};
    struct metric *age;
    char resp[8192];
    int port;

    (void)state;
    age = metric_register("og_call_age_seconds", "Age.", METRIC_GAUGE, NULL, NULL, 0);
    metrics_call_watch(age, 50);
    metrics_set_health(1, 1);
    assert_int_equal(metrics_http_start("127.0.0.1:0", &err), OG_OK);
    port = metrics_http_port();

    metrics_call_begin();
    assert_int_equal(http_request(port, "GET", "/healthz", resp, sizeof(resp)), 200);
    clock_sleep_until_flag(120, NULL, NULL);
    assert_true(metrics_call_age_ms() >= 100);
    assert_int_equal(http_request(port, "GET", "/healthz", resp, sizeof(resp)), 503);
    assert_non_null(strstr(http_body(resp), "not live: database call running for "));
    assert_int_equal(http_request(port, "GET", "/readyz", resp, sizeof(resp)), 503);
    assert_int_equal(http_request(port, "GET", "/metrics", resp, sizeof(resp)), 200);
    {
        const char *line = strstr(http_body(resp), "\nog_call_age_seconds ");
        assert_non_null(line);
        assert_true(strtod(line + strlen("\nog_call_age_seconds "), NULL) >= 0.1);
    }
    metrics_call_end();
    assert_int_equal(metrics_call_age_ms(), 0);
    assert_int_equal(http_request(port, "GET", "/healthz", resp, sizeof(resp)), 200);
    assert_int_equal(http_request(port, "GET", "/readyz", resp, sizeof(resp)), 200);
    assert_int_equal(http_request(port, "GET", "/metrics", resp, sizeof(resp)), 200);
    assert_non_null(strstr(http_body(resp), "\nog_call_age_seconds 0\n"));

    /* Without a limit a long call is only shown. */
    metrics_call_watch(age, 0);
    metrics_call_begin();
    clock_sleep_until_flag(60, NULL, NULL);
    assert_int_equal(http_request(port, "GET", "/healthz", resp, sizeof(resp)), 200);
    metrics_call_end();
    metrics_http_stop();
}

static void test_http_listen_errors(void **state)
{
    static const char *const bad[] = {"127.0.0.1", "127.0.0.1:", "127.0.0.1:x", "127.0.0.1:70000",
                                      "::1:80",    "[::1",       "[::1]80",     "127.0.0.1:-1"};
    struct og_error err = {0};

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        og_error_clear(&err);
        if (metrics_http_start(bad[i], &err) != OG_ERR_CONFIG)
            fail_msg("accepted listen '%s'", bad[i]);
        assert_non_null(strstr(err.msg, bad[i]));
        assert_int_equal(metrics_http_port(), 0);
    }
    /* Empty: the endpoint is disabled, which is not an error. */
    assert_int_equal(metrics_http_start("", &err), OG_OK);
    assert_int_equal(metrics_http_port(), 0);
}

/* The bounds of the server: refused alike by the check (--check-config) and the start; a
 * per-peer limit must leave other peers room. */
static void test_http_limits(void **state)
{
    static const struct metrics_http_limits bad[] = {
        {0, 64, 2}, {4, 64, 0}, {4, 1, 2}, {4, 4, 2}, {10, 8, 2},
    };
    struct metrics_http_limits ok = {1, 2, 1};
    struct og_error err = {0};

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        og_error_clear(&err);
        if (metrics_http_check("127.0.0.1:0", &bad[i], &err) != OG_ERR_CONFIG)
            fail_msg("check accepted limits %u/%u/%u", bad[i].per_ip, bad[i].max_connections,
                     bad[i].timeout_s);
        assert_non_null(strstr(err.msg, "metrics limits"));
        og_error_clear(&err);
        assert_int_equal(metrics_http_start_bounded("127.0.0.1:0", &bad[i], &err), OG_ERR_CONFIG);
        assert_int_equal(metrics_http_port(), 0);
    }
    og_error_clear(&err);
    assert_int_equal(metrics_http_check("127.0.0.1:99999", NULL, &err), OG_ERR_CONFIG);
    assert_int_equal(metrics_http_check("", &ok, &err), OG_OK);
    assert_int_equal(metrics_http_start_bounded("127.0.0.1:0", &ok, &err), OG_OK);
    assert_true(metrics_http_port() > 0);
    metrics_http_stop();
}

static void test_textfile(void **state)
{
    struct og_error err = {0};
    char dir[] = "/tmp/og_metrics_XXXXXX";
    char path[256], tmp[300], bad[300], want[1024], got[1024];
    struct metric *g;
    struct stat sb;
    size_t n;
    FILE *f;

    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/ordergate.prom", dir);
    snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
    g = metric_register("og_last_run_orders", "Orders in the last run.", METRIC_GAUGE, NULL, NULL,
                        0);
    metric_set(g, 17);

    /* An old version is replaced whole. */
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("stale\n", f);
    fclose(f);
    assert_int_equal(metrics_write_textfile(path, &err), OG_OK);
    metrics_render(want, sizeof(want));
    f = fopen(path, "r");
    assert_non_null(f);
    n = fread(got, 1, sizeof(got) - 1, f);
    fclose(f);
    got[n] = '\0';
    assert_string_equal(got, want);
    assert_non_null(strstr(got, "og_last_run_orders 17\n"));
    assert_int_not_equal(stat(tmp, &sb), 0); /* no temporary left behind */

    /* A directory that does not exist: a clear error, nothing written. */
    snprintf(bad, sizeof(bad), "%s/missing/ordergate.prom", dir);
    assert_int_equal(metrics_write_textfile(bad, &err), OG_ERR_IO);
    assert_non_null(strstr(err.msg, "missing"));
    assert_int_equal(metrics_write_textfile("", &err), OG_ERR_ARG);

    unlink(path);
    rmdir(dir);
}

/* The textfile's text is rendered in one pass into a buffer the size of the last text: a text that
 * has since grown far beyond it (series registered in between, a count that gained digits) is
 * still written whole, the same as metrics_render writes it. */
static void test_textfile_grows(void **state)
{
    static const double buckets[] = {1e-7, 0.001, 0.0125, 3.5e21};
    struct og_error err = {0};
    char dir[] = "/tmp/og_metrics_XXXXXX";
    char path[256], *want, *got;
    size_t n, len;
    FILE *f;

    (void)state;
    want = malloc(65536);
    got = malloc(65536);
    assert_non_null(want);
    assert_non_null(got);
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/ordergate.prom", dir);
    metric_set(metric_register("og_small", NULL, METRIC_GAUGE, NULL, NULL, 0), 1);
    assert_int_equal(metrics_write_textfile(path, &err), OG_OK); /* the hint: a short text */
    for (int i = 0; i < 100; i++) {
        char labels[32];
        snprintf(labels, sizeof(labels), "n=\"%d\"", i);
        struct metric *h =
            metric_register("og_grown_seconds", "Grown.", METRIC_HISTOGRAM, labels, buckets, 4);
        assert_non_null(h);
        metric_observe(h, 0.005 * i);
    }
    assert_int_equal(metrics_write_textfile(path, &err), OG_OK);
    len = metrics_render(want, 65536);
    assert_true(len > 20000 && len < 65536);
    f = fopen(path, "r");
    assert_non_null(f);
    n = fread(got, 1, 65535, f);
    fclose(f);
    got[n] = '\0';
    assert_int_equal(n, len);
    assert_string_equal(got, want);
    /* Each bound as printf's shortest round trip writes it, made once at registration. */
    assert_non_null(strstr(got, "og_grown_seconds_bucket{n=\"7\",le=\"0.0125\"} 0\n"));
    assert_non_null(strstr(got, "og_grown_seconds_bucket{n=\"7\",le=\"1e-07\"} 0\n"));
    assert_non_null(strstr(got, "og_grown_seconds_bucket{n=\"7\",le=\"3.5e+21\"} 1\n"));
    unlink(path);
    rmdir(dir);
    free(want);
    free(got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_render_exact, reset, reset),
        cmocka_unit_test_setup_teardown(test_render_numbers, reset, reset),
        cmocka_unit_test_setup_teardown(test_render_small_buffer, reset, reset),
        cmocka_unit_test_setup_teardown(test_register_rules, reset, reset),
        cmocka_unit_test_setup_teardown(test_concurrent_updates, reset, reset),
        cmocka_unit_test_setup_teardown(test_http_endpoints, reset, reset),
        cmocka_unit_test_setup_teardown(test_http_call_watch, reset, reset),
        cmocka_unit_test_setup_teardown(test_http_listen_errors, reset, reset),
        cmocka_unit_test_setup_teardown(test_http_limits, reset, reset),
        cmocka_unit_test_setup_teardown(test_textfile, reset, reset),
        cmocka_unit_test_setup_teardown(test_textfile_grows, reset, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
