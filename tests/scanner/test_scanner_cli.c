/* The command line without a database: bad usage exits 2 naming the flag and
 * touches nothing; --help, --version, --check-config; an unreachable database
 * is a runtime failure (exit 1) that still reaches the textfile. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/version.h"
#include "scanner_child.h"

struct bad_case {
    const char *args[8];
    const char *message; /* must appear in the output */
};

static void test_bad_usage_exits_2(void **state)
{
    /* An unreachable database: none of these may get as far as connecting. */
    static const struct bad_case cases[] = {
        {{"--batch-size", "-5"},
         "--batch-size: scanner.batch_size: expected an integer in 1..10000, got \"-5\""},
        {{"--batch-size", "0"},
         "--batch-size: scanner.batch_size: expected an integer in 1..10000, got \"0\""},
        {{"--batch-size", "10001"},
         "--batch-size: scanner.batch_size: expected an integer in 1..10000, got \"10001\""},
        {{"--grace", "x"}, "--grace: scanner.grace_s: expected an integer in 0..86400, got \"x\""},
        {{"--grace", "-1"},
         "--grace: scanner.grace_s: expected an integer in 0..86400, got \"-1\""},
        {{"--pause-ms", "10ms"},
         "--pause-ms: scanner.pause_ms: expected an integer in 0..600000, got \"10ms\""},
        {{"--max-orders", "-3"},
         "--max-orders: scanner.max_orders: expected an integer in 0..2147483647, got \"-3\""},
        {{"--max-seconds", "lots"},
         "--max-seconds: scanner.max_seconds: expected an integer in 0..86400, got \"lots\""},
        {{"--every", "-1"},
         "--every: scanner.every_s: expected an integer in 0..86400, got \"-1\""},
        {{"--every"}, "--every: needs a value (SECONDS)"},
        {{"--workers", "0"}, "--workers: scanner.workers: expected an integer in 1..16, got \"0\""},
        {{"--workers", "17"},
         "--workers: scanner.workers: expected an integer in 1..16, got \"17\""},
        {{"--workers", "two"},
         "--workers: scanner.workers: expected an integer in 1..16, got \"two\""},
        {{"--log-level", "loud"},
         "--log-level: log_level: expected one of debug, info, warn, error, got \"loud\""},
        {{"--bogus"}, "unknown option '--bogus' (see ordergate-scanner --help)"},
        {{"--metrics-listen", "x"}, "unknown option '--metrics-listen'"},
        {{"--grace", "5", "--grace", "6"}, "--grace: given more than once"},
        {{"--since", "-5m", "--reconcile"}, "--since: expected an RFC 3339 time"},
        {{"sweep"}, "unexpected argument 'sweep'"},
        {{"--config", "/nonexistent/scanner.conf"},
         "ordergate-scanner: /nonexistent/scanner.conf: cannot open"},
        {{"--since", "yesterday", "--reconcile"},
         "--since: expected an RFC 3339 time (e.g. 2026-11-30T00:00:00Z) or an age such as 90m, "
         "24h, 7d, got \"yesterday\""},
        {{"--since", "24h"}, "--since applies to --reconcile only"},
        {{"--scan-interval", "0", "--reconcile"},
         "--scan-interval: expected an integer in 1..604800, got \"0\""},
        {{"--reconcile", "--every", "60"}, "cannot be combined with --reconcile"},
        {{"--dry-run", "--every", "60"}, "cannot be combined with --dry-run"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct scanner_child c;
        const char *args[12] = {"--db", "host=/nonexistent/og-scanner dbname=none"};
        int n = 2;

        for (int j = 0; cases[i].args[j] != NULL; j++)
            args[n++] = cases[i].args[j];
        args[n] = NULL;
        assert_int_equal(scanner_child_run(&c, args), 2);
        if (strstr(c.output, cases[i].message) == NULL)
            fail_msg("case %zu: expected '%s' in:\n%s", i, cases[i].message, c.output);
        assert_non_null(strstr(c.output, "ordergate-scanner: "));
        assert_null(strstr(c.output, "cannot connect")); /* never got that far */
        scanner_child_free(&c);
    }
}

static void test_bad_config_file_exits_2(void **state)
{
    char path[128];
    FILE *fp;
    struct scanner_child c;
    const char *args[] = {"--config", path, NULL};

    (void)state;
    snprintf(path, sizeof(path), "/tmp/og-scanner-cli.%d.conf", (int)getpid());
    fp = fopen(path, "w");
    assert_non_null(fp);
    fprintf(fp, "scanner:\n{\n  batch_size = 100;\n  batchsize = 5;\n};\n");
    fclose(fp);
    assert_int_equal(scanner_child_run(&c, args), 2);
    assert_non_null(strstr(c.output, ":4: unknown setting 'scanner.batchsize'"));
    scanner_child_free(&c);

    /* A bad value in the file: FILE:LINE, then the setting, then the uniform wording. */
    fp = fopen(path, "w");
    assert_non_null(fp);
    fprintf(fp, "scanner:\n{\n  batch_size = 100;\n  workers = 40;\n};\n");
    fclose(fp);
    assert_int_equal(scanner_child_run(&c, args), 2);
    if (strstr(c.output, ":4: scanner.workers: expected an integer in 1..16, got \"40\"") == NULL)
        fail_msg("no FILE:LINE for the bad value in:\n%s", c.output);
    scanner_child_free(&c);
    unlink(path);
}

static void test_help_version_check_config(void **state)
{
    struct scanner_child c;
    const char *help[] = {"--help", NULL};
    const char *version[] = {"--version", NULL};
    char path[128];
    const char *check[] = {"--config", path, "--grace", "90", "--check-config", NULL};
    FILE *fp;

    (void)state;
    assert_int_equal(scanner_child_run(&c, help), 0);
    assert_non_null(strstr(c.output, "usage: ordergate-scanner [options]"));
    assert_non_null(strstr(c.output, "--dry-run"));
    assert_non_null(strstr(c.output, "--reconcile"));
    assert_non_null(strstr(c.output, "--every SECONDS"));
    scanner_child_free(&c);

    assert_int_equal(scanner_child_run(&c, version), 0);
    assert_non_null(strstr(c.output, "ordergate-scanner " OG_VERSION));
    scanner_child_free(&c);

    /* File, then flags over it; the password-bearing conninfo is masked. */
    snprintf(path, sizeof(path), "/tmp/og-scanner-cli-ok.%d.conf", (int)getpid());
    fp = fopen(path, "w");
    assert_non_null(fp);
    fprintf(fp, "database:\n{\n  conninfo = \"host=db password=s3cret\";\n};\n"
                "scanner:\n{\n  grace_s = 30;\n  batch_size = 250;\n};\n");
    fclose(fp);
    assert_int_equal(scanner_child_run(&c, check), 0);
    assert_non_null(strstr(c.output, "scanner.grace_s = 90\n"));
    assert_non_null(strstr(c.output, "scanner.batch_size = 250\n"));
    assert_non_null(strstr(c.output, "mode = sweep\n"));
    assert_null(strstr(c.output, "s3cret"));
    scanner_child_free(&c);
    unlink(path);
}

/* --check-config refuses what a run refuses, exit 2 and one line naming the setting: a value
 * too large for its setting (read wrapped before: 4294967297 as a lease of 1 s), a metrics
 * port past 65535 in a file shared with the consumer, a password file that cannot be read
 * (a run refused it; --check-config said the configuration was fine). */
static void test_check_config_as_run(void **state)
{
    static const struct {
        const char *text, *message;
    } cases[] = {
        {"scanner: { lease_s = 4294967297; };\n",
         ":1: scanner.lease_s: expected an integer in 1..3600, got \"4294967297\""},
        {"consumer: { metrics_listen = \"127.0.0.1:99999\"; };\n",
         ":1: consumer.metrics_listen: port: expected an integer in 0..65535, got \"99999\""},
        {"database: { password_file = \"/nonexistent/og-scanner-password\"; };\n",
         ":1: database.password_file /nonexistent/og-scanner-password: No such file"},
    };
    char path[128];
    const char *args[] = {"--config", path, "--check-config", NULL};

    (void)state;
    snprintf(path, sizeof(path), "/tmp/og-scanner-cli-run.%d.conf", (int)getpid());
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct scanner_child c;
        FILE *fp = fopen(path, "w");

        assert_non_null(fp);
        fputs(cases[i].text, fp);
        fclose(fp);
        assert_int_equal(scanner_child_run(&c, args), 2);
        if (strstr(c.output, cases[i].message) == NULL)
            fail_msg("case %zu: expected '%s' in:\n%s", i, cases[i].message, c.output);
        assert_null(strstr(c.output, "mode = ")); /* nothing printed as if it were fine */
        scanner_child_free(&c);
    }
    unlink(path);
}

/* No server behind the socket: exit 1, and the textfile says the run failed. */
static void test_unreachable_database_exits_1(void **state)
{
    char conf[128], prom[128], text[8192] = "";
    FILE *fp;
    struct scanner_child c;
    const char *args[] = {"--config",   conf, "--db", "host=/nonexistent/og-scanner dbname=none",
                          "--textfile", prom, NULL};

    (void)state;
    snprintf(conf, sizeof(conf), "/tmp/og-scanner-cli-db.%d.conf", (int)getpid());
    snprintf(prom, sizeof(prom), "/tmp/og-scanner-cli-db.%d.prom", (int)getpid());
    fp = fopen(conf, "w");
    assert_non_null(fp);
    fprintf(fp, "database:\n{\n  retry_max = 2;\n  retry_base_ms = 10;\n};\n");
    fclose(fp);
    assert_int_equal(scanner_child_run(&c, args), 1);
    assert_non_null(strstr(c.output, "event=scanner_run_failed"));
    assert_non_null(strstr(c.output, "cannot connect to PostgreSQL"));
    fp = fopen(prom, "r");
    assert_non_null(fp);
    assert_true(fread(text, 1, sizeof(text) - 1, fp) > 0);
    fclose(fp);
    assert_non_null(strstr(text, "ordergate_scanner_last_run_success 0\n"));
    scanner_child_free(&c);
    unlink(conf);
    unlink(prom);
}

/* A reconciliation that cannot run exports no false zeros. */
static void test_reconcile_unreachable_exits_1(void **state)
{
    char conf[128], prom[128], text[8192] = "";
    FILE *fp;
    struct scanner_child c;
    const char *args[] = {
        "--config",   conf, "--db",        "host=/nonexistent/og-scanner dbname=none",
        "--textfile", prom, "--reconcile", NULL};

    (void)state;
    snprintf(conf, sizeof(conf), "/tmp/og-scanner-cli-rc.%d.conf", (int)getpid());
    snprintf(prom, sizeof(prom), "/tmp/og-scanner-cli-rc.%d.prom", (int)getpid());
    fp = fopen(conf, "w");
    assert_non_null(fp);
    fprintf(fp, "database:\n{\n  retry_max = 1;\n};\n");
    fclose(fp);
    assert_int_equal(scanner_child_run(&c, args), 1);
    assert_non_null(strstr(c.output, "event=reconcile_failed"));
    fp = fopen(prom, "r");
    assert_non_null(fp);
    assert_true(fread(text, 1, sizeof(text) - 1, fp) > 0);
    fclose(fp);
    assert_non_null(strstr(text, "ordergate_reconcile_last_run_success 0\n"));
    assert_null(strstr(text, "ordergate_reconcile_violations"));
    scanner_child_free(&c);
    unlink(conf);
    unlink(prom);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_usage_exits_2),
        cmocka_unit_test(test_bad_config_file_exits_2),
        cmocka_unit_test(test_help_version_check_config),
        cmocka_unit_test(test_check_config_as_run),
        cmocka_unit_test(test_unreachable_database_exits_1),
        cmocka_unit_test(test_reconcile_unreachable_exits_1),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
