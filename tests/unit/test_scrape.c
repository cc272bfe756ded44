/* Reading the metrics endpoint: sample lookup and the bounds of a request. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/scrape.h"

static const char text[] = "# HELP og_x_total Things.\n"
                           "# TYPE og_x_total counter\n"
                           "og_x_total 42\n"
                           "og_x_total_extra 7\n"
                           "og_lat_bucket{le=\"0.5\"} 3\n"
                           "og_lat_bucket{le=\"+Inf\"} 5\n"
                           "og_gauge -2.5\n"
                           "og_last 9";

static void test_sample(void **state)
{
    double v = 0;

    (void)state;
    assert_true(scrape_sample(text, "og_x_total", &v));
    assert_true(v == 42);
    assert_true(scrape_sample(text, "og_x_total_extra", &v));
    assert_true(v == 7);
    assert_true(scrape_sample(text, "og_lat_bucket{le=\"+Inf\"}", &v));
    assert_true(v == 5);
    assert_true(scrape_sample(text, "og_gauge", &v));
    assert_true(v == -2.5);
    /* The last line needs no newline. */
    assert_true(scrape_sample(text, "og_last", &v));
    assert_true(v == 9);
}

/* Only whole names count, and comments are not samples. */
static void test_sample_absent(void **state)
{
    double v = 123;

    (void)state;
    assert_false(scrape_sample(text, "og_x", &v));
    assert_false(scrape_sample(text, "og_lat_bucket", &v));
    assert_false(scrape_sample(text, "HELP", &v));
    assert_false(scrape_sample(text, "og_missing", &v));
    assert_false(scrape_sample("", "og_x_total", &v));
    assert_true(v == 123);
}

static void test_body(void **state)
{
    (void)state;
    assert_string_equal(scrape_body("HTTP/1.1 200 OK\r\nA: b\r\n\r\nhello"), "hello");
    assert_null(scrape_body("HTTP/1.1 200 OK\r\n"));
}

/* A port that accepts connections but never answers: the request gives up
 * after its bound. */
static void test_http_bounded(void **state)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof(sa);
    char resp[256];
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int64_t t0;

    (void)state;
    assert_true(fd >= 0);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(fd, 4), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    t0 = clock_mono_ms();
    assert_int_equal(scrape_http(ntohs(sa.sin_port), "GET", "/metrics", resp, sizeof(resp), 300),
                     -1);
    assert_true(clock_mono_ms() - t0 >= 250);
    assert_true(clock_mono_ms() - t0 < 3000);
    assert_string_equal(resp, "");
    close(fd);
}

/* Nothing listens: -1 at once. */
static void test_http_refused(void **state)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof(sa);
    char resp[64];
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int port;

    (void)state;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    port = ntohs(sa.sin_port);
    close(fd);
    assert_int_equal(scrape_http(port, "GET", "/metrics", resp, sizeof(resp), 1000), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sample),       cmocka_unit_test(test_sample_absent),
        cmocka_unit_test(test_body),         cmocka_unit_test(test_http_bounded),
        cmocka_unit_test(test_http_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
