/* The health endpoint cannot be starved. One peer opens 64 idle connections to the metrics
 * port and keeps reopening whatever the server closes, as a hostile pod would; meanwhile,
 * nine times in a row:
 *   - the liveness probe (`ordergate-consumer --check-health`, the health file) answers 0
 *     within 3 s, the probe timeout of the shipped manifests;
 *   - another peer (127.0.0.2: all of 127.0.0.0/8 is loopback) gets /healthz and /metrics,
 *     because one address holds at most consumer.metrics_per_ip_limit connections;
 *   - the flooding peer's own scrape is answered or refused within 3 s, never left hanging.
 * Then: an idle connection is closed by the server within consumer.metrics_timeout_s (2 s) plus
 * 2 s of slack; a stopped loop (SIGSTOP) turns --check-health to 1 once its bound passes, and back
 * to 0 when it turns again; after SIGTERM the file is gone and the probe says so.
 *
 * The consumer runs against librdkafka's mock cluster (only PostgreSQL is needed). Loopback
 * only, every wait bounded. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <librdkafka/rdkafka.h>
/* rdkafka_mock.h needs rdkafka.h first. */
#include <librdkafka/rdkafka_mock.h>

#include "ct.h"
#include "support/testutil.h"

#define FLOOD_SOCKETS  64
#define PROBE_ROUNDS   9
#define PROBE_BOUND_MS 3000 /* timeoutSeconds of the manifests' probes */

/* A connection from source address src to 127.0.0.1:port, connected within timeout_ms;
 * -1 when it cannot be made. */
static int tcp_connect_from(const char *src, int port, long timeout_ms)
{
    struct sockaddr_in a, b;
    struct pollfd pfd;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), err = 0;
    socklen_t len = sizeof(err);

    if (fd < 0)
        return -1;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    inet_pton(AF_INET, src, &a.sin_addr);
    memset(&b, 0, sizeof(b));
    b.sin_family = AF_INET;
    b.sin_port = htons((uint16_t)port);
    inet_pton(AF_INET, "127.0.0.1", &b.sin_addr);
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
        goto fail;
    if (connect(fd, (struct sockaddr *)&b, sizeof(b)) != 0 && errno != EINPROGRESS)
        goto fail;
    pfd = (struct pollfd){.fd = fd, .events = POLLOUT};
    if (poll(&pfd, 1, (int)timeout_ms) != 1 ||
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0)
        goto fail;
    return fd;
fail:
    close(fd);
    return -1;
}

/* GET path from source address src within timeout_ms in all. Returns the HTTP status, 0 when
 * the server closed or reset the connection without an answer (refused), -1 when the bound
 * passed first (the request hangs: what a starved endpoint does). */
static int http_get_from(const char *src, int port, const char *path, long timeout_ms)
{
    char req[256], resp[512];
    size_t got = 0;
    int64_t end = ct_now_ms() + timeout_ms;
    int fd = tcp_connect_from(src, port, timeout_ms), n, code = 0;

    if (fd < 0)
        return 0;
    n = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
    if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
        close(fd);
        return 0;
    }
    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int64_t left = end - ct_now_ms();
        ssize_t r;

        if (left <= 0 || poll(&pfd, 1, (int)left) != 1) {
            close(fd);
            return -1;
        }
        r = recv(fd, resp + got, sizeof(resp) - 1 - got, 0);
        if (r <= 0)
            break;
        got += (size_t)r;
        if (got == sizeof(resp) - 1)
            break;
    }
    close(fd);
    resp[got] = '\0';
    if (sscanf(resp, "HTTP/1.%*d %d", &code) != 1)
        return 0;
    return code;
}

/* True when the server has closed fd (EOF or reset). */
static bool tcp_closed(int fd)
{
    char b;
    ssize_t r = recv(fd, &b, 1, MSG_DONTWAIT);

    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

/* The flooding peer: keeps FLOOD_SOCKETS idle connections open, reopening what the server
 * closed. Returns how many it had to reopen. */
static int flood_refill(int *fds, int port)
{
    int reopened = 0;

    for (int i = 0; i < FLOOD_SOCKETS; i++) {
        if (fds[i] >= 0 && !tcp_closed(fds[i]))
            continue;
        if (fds[i] >= 0) {
            close(fds[i]);
            reopened++;
        }
        fds[i] = tcp_connect_from("127.0.0.1", port, 1000);
    }
    return reopened;
}

/* Runs `ordergate-consumer --config FILE flag`; fails the test when it takes longer than
 * PROBE_BOUND_MS. Returns its exit status; out gets its output line. */
static int probe(const struct ct *t, const char *flag, char *out, size_t size)
{
    char bin[512], log[300];
    const char *argv[] = {bin, "--config", t->config, flag, NULL};
    pid_t pid;
    int fd, st;
    char *text;

    testutil_binary(bin, sizeof(bin), "consumer/ordergate-consumer");
    snprintf(log, sizeof(log), "%s/tests/consumer/chealth.probe.%d.out", OG_BINARY_DIR,
             (int)getpid());
    fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    pid = testutil_child_start(argv, &(struct child_opts){.out_fd = fd, .err_fd = fd});
    close(fd);
    st = testutil_child_wait(pid, PROBE_BOUND_MS, "the health probe");
    text = testutil_slurp(log);
    snprintf(out, size, "%s", text != NULL ? text : "");
    free(text);
    unlink(log);
    return st;
}

/* Polls the probe until it exits want or timeout_ms passes; returns the last status. */
static int probe_wait(const struct ct *t, const char *flag, int want, long timeout_ms, char *out,
                      size_t size)
{
    int64_t end = ct_now_ms() + timeout_ms;
    int st = probe(t, flag, out, size);

    while (st != want && ct_now_ms() < end) {
        testutil_sleep_ms(250);
        st = probe(t, flag, out, size);
    }
    return st;
}

static void conf_set(rd_kafka_conf_t *conf, const char *k, const char *v)
{
    char errstr[256];

    if (rd_kafka_conf_set(conf, k, v, errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK)
        fail_msg("%s=%s: %s", k, v, errstr);
}

static void test_health_under_flood(void **state)
{
    char errstr[256], base[96], dir[300], health[400], out[600];
    rd_kafka_conf_t *conf;
    rd_kafka_t *host;
    rd_kafka_mock_cluster_t *mc;
    static struct ct t; /* static: ct_cleanup may tear it down after a failure */
    struct ct_proc p;
    int fds[FLOOD_SOCKETS], idle[4], port, reopened = 0;
    int64_t probe_max_ms = 0, other_max_ms = 0;
    FILE *f;

    (void)state;
    memset(&t, 0, sizeof(t));
    conf = rd_kafka_conf_new();
    conf_set(conf, "log_level", "3");
    host = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    assert_non_null(host);
    mc = rd_kafka_mock_cluster_new(host, 1);
    assert_non_null(mc);
    ct_brokers_override = rd_kafka_mock_cluster_bootstraps(mc);

    snprintf(t.tag, sizeof(t.tag), "chealth");
    testdb_create(&t.db, "chealth");
    t.conn = testdb_connect(&t.db);
    testutil_unique(base, sizeof(base), "chealth");
    snprintf(t.topic, sizeof(t.topic), "og.%s.cancel", base);
    snprintf(t.dlq, sizeof(t.dlq), "og.%s.dlq", base);
    snprintf(t.group, sizeof(t.group), "og-%s", base);
    assert_int_equal(rd_kafka_mock_topic_create(mc, t.topic, 2, 1), RD_KAFKA_RESP_ERR_NO_ERROR);
    assert_int_equal(rd_kafka_mock_topic_create(mc, t.dlq, 1, 1), RD_KAFKA_RESP_ERR_NO_ERROR);
    snprintf(dir, sizeof(dir), "%s/tests/consumer/chealth.%d", OG_BINARY_DIR, (int)getpid());
    assert_int_equal(mkdir(dir, 0700) == 0 || errno == EEXIST, 1);
    snprintf(health, sizeof(health), "%s/health", dir);
    snprintf(t.config, sizeof(t.config), "%s/tests/consumer/chealth.%d.conf", OG_BINARY_DIR,
             (int)getpid());
    f = fopen(t.config, "w");
    assert_non_null(f);
    /* The HTTP bounds are the defaults (4 per peer, 64 in all, 2 s idle): what ships. A 2 s
     * database-call bound makes the health file's own bound 8.05 s, so the stopped loop below
     * shows within the test's time. */
    fprintf(f,
            "database = { retry_max = 3; retry_base_ms = 50; retry_cap_ms = 400; };\n"
            "outbox = { enabled = false; };\n"
            "consumer = { health_file = \"%s\"; health_db_call_ms = 2000; };\n"
            "kafka = { dead_letter_topic = \"%s\";\n"
            "  properties = [\"session.timeout.ms=6000\", \"heartbeat.interval.ms=500\"]; };\n",
            health, t.dlq);
    fclose(f);

    /* Before the consumer runs there is no heartbeat: the probe says not live. */
    assert_int_equal(probe(&t, "--check-health", out, sizeof(out)), 1);
    assert_non_null(strstr(out, "not live"));

    ct_spawn(&t, &p, "c1", t.topic, NULL);
    port = ct_metrics_port(&p);
    assert_int_equal(probe_wait(&t, "--check-ready", 0, 30000, out, sizeof(out)), 0);
    assert_non_null(strstr(out, "ready"));

    /* The flood: 64 idle connections from one peer, kept open. */
    for (int i = 0; i < FLOOD_SOCKETS; i++)
        fds[i] = -1;
    flood_refill(fds, port);
    testutil_sleep_ms(200);
    for (int round = 0; round < PROBE_ROUNDS; round++) {
        int64_t t0;
        int code;

        reopened += flood_refill(fds, port);
        /* Liveness and readiness without the port: 0 within the probe's timeout, every time. */
        t0 = ct_now_ms();
        assert_int_equal(probe(&t, "--check-health", out, sizeof(out)), 0);
        if (ct_now_ms() - t0 > probe_max_ms)
            probe_max_ms = ct_now_ms() - t0;
        assert_int_equal(probe(&t, "--check-ready", out, sizeof(out)), 0);
        /* Another peer is served at once: the flooder holds only its own share. */
        t0 = ct_now_ms();
        code = http_get_from("127.0.0.2", port, "/healthz", PROBE_BOUND_MS);
        if (ct_now_ms() - t0 > other_max_ms)
            other_max_ms = ct_now_ms() - t0;
        if (code != 200)
            fail_msg("round %d: /healthz from another peer during the flood: %s", round,
                     code < 0 ? "no answer within 3 s" : "refused");
        assert_int_equal(http_get_from("127.0.0.2", port, "/metrics", PROBE_BOUND_MS), 200);
        /* The flooding peer's own scrape: served or refused, never left hanging. */
        t0 = ct_now_ms();
        code = http_get_from("127.0.0.1", port, "/metrics", PROBE_BOUND_MS);
        if (code != 200 && code != 0)
            fail_msg("round %d: a scrape from the flooding peer hung %lld ms", round,
                     (long long)(ct_now_ms() - t0));
        testutil_sleep_ms(300);
    }
    for (int i = 0; i < FLOOD_SOCKETS; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    print_message("flood: %d connections reopened after the server closed them; slowest "
                  "--check-health %lld ms, slowest /healthz from another peer %lld ms\n",
                  reopened, (long long)probe_max_ms, (long long)other_max_ms);
    /* The server refused the connections past the per-peer share: the flooder had to reopen. */
    assert_true(reopened > 0);
    assert_int_equal(ct_wait_exit(&p, 0), -1);

    /* Idle connections are closed by the server within its timeout (2 s) and 2 s of slack
     * for a loaded machine (on 10 s they stayed open). */
    for (int i = 0; i < 4; i++) {
        idle[i] = tcp_connect_from("127.0.0.3", port, 1000);
        assert_true(idle[i] >= 0);
    }
    {
        int64_t t0 = ct_now_ms();
        int open_left = 4;

        while (open_left > 0 && ct_now_ms() - t0 < 4000) {
            testutil_sleep_ms(100);
            open_left = 0;
            for (int i = 0; i < 4; i++)
                open_left += tcp_closed(idle[i]) ? 0 : 1;
        }
        for (int i = 0; i < 4; i++)
            close(idle[i]);
        if (open_left > 0)
            fail_msg("%d idle connections still open after 4 s", open_left);
    }

    /* The health file means the loop turns: a stopped process goes stale past its bound
     * (8.05 s here), and is live again once it runs. */
    assert_int_equal(kill(p.pid, SIGSTOP), 0);
    assert_int_equal(probe_wait(&t, "--check-health", 1, 15000, out, sizeof(out)), 1);
    assert_non_null(strstr(out, "not live"));
    assert_int_equal(kill(p.pid, SIGCONT), 0);
    assert_int_equal(probe_wait(&t, "--check-health", 0, 10000, out, sizeof(out)), 0);

    /* A clean stop removes the file; the probe then says not live. */
    assert_int_equal(ct_stop(&p, SIGTERM, 30000), 0);
    assert_int_equal(access(health, F_OK), -1);
    assert_int_equal(probe(&t, "--check-health", out, sizeof(out)), 1);

    ct_brokers_override = NULL;
    rd_kafka_mock_cluster_destroy(mc);
    rd_kafka_destroy(host);
    PQfinish(t.conn);
    t.conn = NULL;
    unlink(t.config);
    rmdir(dir);
    testdb_drop(&t.db);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_health_under_flood, ct_cleanup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
