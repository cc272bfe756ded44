/* The command line: --help documents every flag, bad usage and bad
 * configuration exit 2 with one line (file:line when the file is at fault),
 * --check-config validates without connecting, a runtime failure exits 1.
 * Needs no services. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/testutil.h"

/* The runs here need no services and end in seconds. */
#define CLI_RUN_TIMEOUT_MS 60000

struct run {
    int status;
    char out[16384];
    char err[16384];
};

static void slurp(const char *path, char *buf, size_t size)
{
    char *text = testutil_slurp(path);

    snprintf(buf, size, "%s", text != NULL ? text : "");
    free(text);
}

/* Runs the consumer with argv (NULL-terminated) and an empty environment
 * for Kafka and the database, capturing stdout and stderr. */
static void run(struct run *r, const char *const *args)
{
    char bin[512], out[256], err[256];
    const char *argv[32];
    static const char *const unset[] = {"ORDERGATE_BROKERS", "ORDERGATE_DB", NULL};
    int argc = 0, fo, fe;

    testutil_binary(bin, sizeof(bin), "consumer/ordergate-consumer");
    snprintf(out, sizeof(out), "%s/tests/consumer/cli.%d.out", OG_BINARY_DIR, (int)getpid());
    snprintf(err, sizeof(err), "%s/tests/consumer/cli.%d.err", OG_BINARY_DIR, (int)getpid());
    argv[argc++] = bin;
    for (int i = 0; args[i] != NULL && argc < 31; i++)
        argv[argc++] = args[i];
    argv[argc] = NULL;
    fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fo >= 0 && fe >= 0);
    r->status = testutil_child_wait(
        testutil_child_start(argv,
                             &(struct child_opts){.out_fd = fo, .err_fd = fe, .unset = unset}),
        CLI_RUN_TIMEOUT_MS, "ordergate-consumer");
    close(fo);
    close(fe);
    slurp(out, r->out, sizeof(r->out));
    slurp(err, r->err, sizeof(r->err));
    unlink(out);
    unlink(err);
}

static int lines(const char *s)
{
    int n = 0;

    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* Asserts exit 2 with exactly one line on stderr containing needle. */
static void usage_error(const char *const *args, const char *needle)
{
    struct run r;

    run(&r, args);
    if (r.status != 2 || lines(r.err) != 1 || strstr(r.err, needle) == NULL)
        fail_msg("%s...: status %d, stderr \"%s\"; expected 2 and one line with \"%s\"", args[0],
                 r.status, r.err, needle);
}

static char *write_config(const char *name, const char *text, char *path, size_t size)
{
    FILE *f;

    snprintf(path, size, "%s/tests/consumer/%s.%d.conf", OG_BINARY_DIR, name, (int)getpid());
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static void test_help_version(void **state)
{
    static const char *const flags[] = {"--config",
                                        "--db",
                                        "--brokers",
                                        "--topics",
                                        "--group",
                                        "--batch-size",
                                        "--metrics-listen",
                                        "--check-config",
                                        "--list-settings",
                                        "--help",
                                        "--version",
                                        "--lock-timeout-ms",
                                        "--statement-timeout-ms",
                                        "--busy-retry-ms"};
    struct run r;

    (void)state;
    run(&r, (const char *const[]){"--help", NULL});
    assert_int_equal(r.status, 0);
    for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
        if (strstr(r.out, flags[i]) == NULL)
            fail_msg("--help does not document %s", flags[i]);
    assert_non_null(strstr(r.out, "Exit status"));
    run(&r, (const char *const[]){"--version", NULL});
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "ordergate-consumer "));
    assert_non_null(strstr(r.out, "librdkafka 2."));
}

static void test_bad_usage(void **state)
{
    (void)state;
    usage_error((const char *const[]){"--bogus", NULL}, "unknown option '--bogus'");
    usage_error((const char *const[]){"--batch-size", NULL}, "--batch-size: needs a value (N)");
    /* A scanner-only flag is unknown here, though the table has it. */
    usage_error((const char *const[]){"--grace", "5", NULL}, "unknown option '--grace'");
    usage_error((const char *const[]){"extra", NULL}, "unexpected argument 'extra'");
    usage_error((const char *const[]){"--batch-size", "0", NULL}, "consumer.batch_size");
    usage_error((const char *const[]){"--batch-size", "many", NULL},
                "ordergate-consumer: --batch-size: consumer.batch_size: expected an integer in "
                "1..10000, got \"many\"");
    usage_error((const char *const[]){"--batch-size", "+5", NULL}, "got \"+5\"");
    usage_error((const char *const[]){"--batch-size", "1", "--batch-size", "2", NULL},
                "--batch-size: given more than once");
    usage_error((const char *const[]){"--topics", "bad topic!", NULL}, "not a valid topic name");
    usage_error((const char *const[]){"--topics", "a,,b", NULL}, "empty topic name");
    usage_error((const char *const[]){"--topics", "a,a", NULL}, "listed twice");
    usage_error((const char *const[]){"--topics", "ordergate.cancel.dlq", NULL},
                "dead-letter, payments or refund results topic");
    usage_error((const char *const[]){"--config", "/nonexistent/ordergate.conf", NULL},
                "cannot open");
    usage_error((const char *const[]){"--group-instance-id", "host a", NULL},
                "ordergate-consumer: --group-instance-id: kafka.group_instance_id: 'host a' is "
                "not a valid group instance id");
}

static void test_check_config(void **state)
{
    char good[512], unknown[512], syntax[512], prop[512], reserved[512], path[600];
    struct run r;

    (void)state;
    write_config("good",
                 "kafka = {\n"
                 "    topics = [\"ordergate.cancel.15m\", \"ordergate.cancel.60m\"];\n"
                 "    properties = [\"socket.keepalive.enable=true\", \"client.rack=r1\"];\n"
                 "};\n"
                 "consumer = { batch_size = 250; };\n",
                 good, sizeof(good));
    run(&r, (const char *const[]){"--config", good, "--check-config", NULL});
    if (r.status != 0)
        fail_msg("valid config refused: %s", r.err);
    assert_non_null(strstr(r.out, "configuration OK"));
    assert_non_null(strstr(r.out, "consumer.batch_size = 250"));
    assert_non_null(strstr(r.out, "kafka.topics = \"ordergate.cancel.15m,ordergate.cancel.60m\""));
    /* Property values are never printed (they may be secrets). */
    assert_null(strstr(r.out, "r1"));
    /* Flags override the file. */
    run(&r, (const char *const[]){"--config", good, "--batch-size", "7", "--check-config", NULL});
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "consumer.batch_size = 7"));

    write_config("unknown", "# comment\n\nconsumer = { batchsize = 5; };\n", unknown,
                 sizeof(unknown));
    snprintf(path, sizeof(path), "%s:3:", unknown);
    usage_error((const char *const[]){"--config", unknown, "--check-config", NULL}, path);

    write_config("syntax", "kafka = {\n  brokers = \"a:1\"\n", syntax, sizeof(syntax));
    usage_error((const char *const[]){"--config", syntax, "--check-config", NULL}, syntax);

    write_config("prop",
                 "log_level = \"warn\";\nkafka = {\n  properties = [\"no.such.thing=1\"];\n};\n",
                 prop, sizeof(prop));
    snprintf(path, sizeof(path), "%s:3: kafka property no.such.thing", prop);
    usage_error((const char *const[]){"--config", prop, "--check-config", NULL}, path);

    write_config("reserved",
                 "kafka = {\n  properties = [\"client.id=x\",\n"
                 "    \"enable.auto.offset.store=true\"];\n};\n",
                 reserved, sizeof(reserved));
    snprintf(path, sizeof(path), "%s:2: kafka.properties: enable.auto.offset.store", reserved);
    usage_error((const char *const[]){"--config", reserved, "--check-config", NULL}, path);
    /* Without --check-config the same file is refused the same way, before anything starts. */
    usage_error((const char *const[]){"--config", reserved, NULL}, path);

    unlink(good);
    unlink(unknown);
    unlink(syntax);
    unlink(prop);
    unlink(reserved);
}

/* --check-config refuses whatever a start refuses, with the same line and exit 2: a metrics
 * port past 65535 (accepted before), an integer too large for its setting (read wrapped
 * before: 4294967796 as 500), more topics than the consumer subscribes, a topic's level, an outbox
 * topic. */
static void test_check_config_as_start(void **state)
{
    char port[512], wrap[512], levels[512], outbox[512], path[700];

    (void)state;
    write_config("port", "consumer = {\n  metrics_listen = \"127.0.0.1:99999\";\n};\n", port,
                 sizeof(port));
    snprintf(path, sizeof(path),
             "ordergate-consumer: %s:2: consumer.metrics_listen: port: expected an integer in "
             "0..65535, got \"99999\"",
             port);
    usage_error((const char *const[]){"--config", port, "--check-config", NULL}, path);
    usage_error((const char *const[]){"--metrics-listen", "0.0.0.0:99999", "--check-config", NULL},
                "ordergate-consumer: --metrics-listen: consumer.metrics_listen: port: expected an "
                "integer in 0..65535, got \"99999\"");

    write_config("wrap", "consumer = { batch_size = 4294967796; };\n", wrap, sizeof(wrap));
    snprintf(path, sizeof(path),
             "%s:1: consumer.batch_size: expected an integer in 1..10000, got \"4294967796\"",
             wrap);
    usage_error((const char *const[]){"--config", wrap, "--check-config", NULL}, path);

    write_config("levels", "kafka = { topics = \"a.15m,b.30m\"; topic_levels = \"15m\"; };\n",
                 levels, sizeof(levels));
    snprintf(path, sizeof(path), "%s:1: kafka.topic_levels: one duration per topic", levels);
    usage_error((const char *const[]){"--config", levels, "--check-config", NULL}, path);
    usage_error((const char *const[]){"--config", levels, "--brokers", "127.0.0.1:1", NULL}, path);

    write_config("outbox", "outbox = { topic = \"\"; };\n", outbox, sizeof(outbox));
    snprintf(path, sizeof(path), "%s:1: outbox.topic: '' is not a valid topic name", outbox);
    usage_error((const char *const[]){"--config", outbox, "--check-config", NULL}, path);

    usage_error(
        (const char *const[]){"--topics",
                              "t01.1m,t02.1m,t03.1m,t04.1m,t05.1m,t06.1m,t07.1m,t08.1m,t09.1m,"
                              "t10.1m,t11.1m,t12.1m,t13.1m,t14.1m,t15.1m,t16.1m,t17.1m,t18.1m,"
                              "t19.1m,t20.1m,t21.1m,t22.1m,t23.1m,t24.1m,t25.1m,t26.1m,t27.1m,"
                              "t28.1m,t29.1m,t30.1m,t31.1m,t32.1m,t33.1m,t34.1m,t35.1m,t36.1m,"
                              "t37.1m,t38.1m,t39.1m,t40.1m,t41.1m,t42.1m,t43.1m,t44.1m,t45.1m,"
                              "t46.1m,t47.1m,t48.1m,t49.1m,t50.1m,t51.1m,t52.1m,t53.1m,t54.1m,"
                              "t55.1m,t56.1m,t57.1m,t58.1m,t59.1m,t60.1m,t61.1m,t62.1m,t63.1m",
                              "--check-config", NULL},
        "kafka.topics: at most 62 topics");
    unlink(port);
    unlink(wrap);
    unlink(levels);
    unlink(outbox);
}

/* The metrics endpoint's bounds are checked before anything starts (one peer may not take every
 * connection); --check-health needs a health file and says not live when there is none. */
static void test_health_settings(void **state)
{
    char limits[512], health[512], missing[600];
    struct run r;

    (void)state;
    write_config("limits", "consumer = { metrics_per_ip_limit = 64; };\n", limits, sizeof(limits));
    usage_error((const char *const[]){"--config", limits, "--check-config", NULL},
                "per-peer limit (64) must be below the connection limit (64)");
    usage_error((const char *const[]){"--config", limits, NULL}, "consumer.metrics_per_ip_limit");
    usage_error((const char *const[]){"--check-health", NULL}, "consumer.health_file");

    snprintf(missing, sizeof(missing), "%s/tests/consumer/no-such-health.%d", OG_BINARY_DIR,
             (int)getpid());
    {
        char text[800];
        snprintf(text, sizeof(text), "consumer = { health_file = \"%s\"; };\n", missing);
        write_config("health", text, health, sizeof(health));
    }
    run(&r, (const char *const[]){"--config", health, "--check-health", NULL});
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.out, "not live"));
    run(&r, (const char *const[]){"--config", health, "--check-ready", NULL});
    assert_int_equal(r.status, 1);
    unlink(limits);
    unlink(health);
}

/* --list-settings: one tab-separated line per setting, for deploy/validate.sh. */
static void test_list_settings(void **state)
{
    struct run r;

    (void)state;
    run(&r, (const char *const[]){"--list-settings", NULL});
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "consumer.batch_size\t--batch-size\tint\t500\t1..10000\n"));
    assert_non_null(strstr(r.out, "scanner.batch_size\t-\tint\t500\t1..10000\n"));
    assert_non_null(strstr(r.out, "kafka.topics\t--topics\tstring\t"));
    assert_non_null(strstr(r.out, "outbox.enabled\t-\tbool\ttrue\t-\n"));
    assert_true(lines(r.out) >= 30);
}

static void test_runtime_failure(void **state)
{
    struct sockaddr_in addr = {.sin_family = AF_INET};
    socklen_t len = sizeof(addr);
    char listen_on[64];
    struct run r;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    (void)state;
    /* The metrics port is taken: a runtime failure, exit 1, nothing started. */
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    assert_int_equal(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
    assert_int_equal(listen(fd, 1), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&addr, &len), 0);
    snprintf(listen_on, sizeof(listen_on), "127.0.0.1:%d", ntohs(addr.sin_port));
    run(&r, (const char *const[]){"--brokers", "127.0.0.1:1", "--metrics-listen", listen_on, NULL});
    close(fd);
    if (r.status != 1)
        fail_msg("status %d, stderr \"%s\"; expected 1", r.status, r.err);
    assert_non_null(strstr(r.err, "metrics_listen"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help_version),    cmocka_unit_test(test_bad_usage),
        cmocka_unit_test(test_check_config),    cmocka_unit_test(test_check_config_as_start),
        cmocka_unit_test(test_list_settings),   cmocka_unit_test(test_runtime_failure),
        cmocka_unit_test(test_health_settings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
