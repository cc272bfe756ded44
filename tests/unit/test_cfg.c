/* The configuration table: defaults, file, flags, and errors that name file:line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/cfg.h"

static char *write_tmp(const char *text)
{
    static char path[64];
    FILE *f;

    snprintf(path, sizeof(path), "/tmp/og_cfg_test_%d.conf", (int)getpid());
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static void test_defaults(void **state)
{
    struct og_config cfg;
    struct og_error err = {0};

    (void)state;
    assert_int_equal(cfg_init(&cfg, &err), OG_OK);
    assert_int_equal(cfg.consumer.batch_size, 500);
    assert_int_equal(cfg.scanner.grace_s, 60);
    assert_string_equal(cfg.kafka.group, "ordergate-consumer");
    assert_string_equal(cfg.database.conninfo, "");
    assert_int_equal(cfg.outbox.enabled, 1);
    assert_int_equal((int)cfg.kafka.properties_n, 0);
    cfg_free(&cfg);
}

static void test_file_and_flags(void **state)
{
    struct og_config cfg;
    struct og_error err = {0};
    char *path = write_tmp("log_level = \"debug\";\n"
                           "database: { conninfo = \"dbname=shop\"; };\n"
                           "kafka: {\n"
                           "  topics = [\"a.15m\", \"b.30m\"];\n"
                           "  properties = [\"fetch.wait.max.ms=100\", \"client.id=x\"];\n"
                           "};\n"
                           "consumer: { batch_size = 250; };\n"
                           "outbox: { enabled = false; };\n");

    (void)state;
    assert_int_equal(cfg_init(&cfg, &err), OG_OK);
    assert_int_equal(cfg_load(&cfg, path, &err), OG_OK);
    assert_string_equal(cfg.log_level, "debug");
    assert_string_equal(cfg.database.conninfo, "dbname=shop");
    assert_string_equal(cfg.kafka.topics, "a.15m,b.30m");
    assert_int_equal((int)cfg.kafka.properties_n, 2);
    assert_string_equal(cfg.kafka.properties[0], "fetch.wait.max.ms=100");
    assert_int_equal(cfg.consumer.batch_size, 250);
    assert_int_equal(cfg.outbox.enabled, 0);
    /* A flag overrides the file. */
    assert_int_equal(cfg_set(&cfg, "consumer.batch_size", "100", &err), OG_OK);
    assert_int_equal(cfg.consumer.batch_size, 100);
    cfg_free(&cfg);
    unlink(path);
}

/* Asserts cfg_load refuses text; the operator's line (cfg_error_format) must contain needle
 * and name the file, and an error about a setting must carry it in err.setting. */
static void expect_file_error(const char *text, const char *needle, const char *setting)
{
    struct og_config cfg;
    struct og_error err = {0};
    char *path = write_tmp(text);
    char line[1024];

    assert_int_equal(cfg_init(&cfg, &err), OG_OK);
    assert_int_equal(cfg_load(&cfg, path, &err), OG_ERR_CONFIG);
    cfg_error_format(&cfg, &err, line, sizeof(line));
    if (strstr(line, needle) == NULL)
        fail_msg("error '%s' does not contain '%s'", line, needle);
    if (strstr(line, path) == NULL)
        fail_msg("error '%s' does not name the file", line);
    assert_string_equal(err.setting, setting);
    cfg_free(&cfg);
    unlink(path);
}

static void test_file_errors(void **state)
{
    (void)state;
    expect_file_error("consumer: {\n batch_size = \"many\";\n};\n",
                      ":2: consumer.batch_size: expected an integer in 1..10000",
                      "consumer.batch_size");
    expect_file_error("consumer: {\n\n batch_size = -5;\n};\n",
                      ":3: consumer.batch_size: expected an integer in 1..10000, got \"-5\"",
                      "consumer.batch_size");
    expect_file_error("consumer: { batchsize = 5; };\n", "unknown setting 'consumer.batchsize'",
                      "");
    expect_file_error("log_level = \"loud\";\n", ":1: log_level: expected one of", "log_level");
    expect_file_error("kafka: { properties = [\"novalue\"]; };\n", "name=value",
                      "kafka.properties");
    expect_file_error("consumer: { batch_size = 5 \n", ":2:", "");
}

/* An integer never wraps: libconfig reads a literal without the L suffix into an int (so
 * 4294967796 would be 500 and 4294967297 would be 1); the full value is range-checked. */
static void test_integers_do_not_wrap(void **state)
{
    (void)state;
    expect_file_error("consumer: {\n batch_size = 4294967796;\n};\n",
                      ":2: consumer.batch_size: expected an integer in 1..10000, got "
                      "\"4294967796\"",
                      "consumer.batch_size");
    expect_file_error("scanner: { lease_s = 4294967297; };\n",
                      ":1: scanner.lease_s: expected an integer in 1..3600, got \"4294967297\"",
                      "scanner.lease_s");
    expect_file_error("scanner: { grace_s = 0x100000001; };\n",
                      "scanner.grace_s: expected an integer in 0..86400, got \"0x100000001\"",
                      "scanner.grace_s");
    expect_file_error("scanner: { max_orders = -4294967295; };\n",
                      "scanner.max_orders: expected an integer", "scanner.max_orders");
    /* With the suffix, libconfig keeps the full value: refused by the bounds alike. */
    expect_file_error("consumer: { batch_size = 4294967796L; };\n",
                      "consumer.batch_size: expected an integer in 1..10000",
                      "consumer.batch_size");
    /* Large numbers in comments, strings and other settings' text change nothing. */
    {
        struct og_config cfg;
        struct og_error err = {0};
        char *path;

        path = write_tmp("# batch_size = 4294967796\n"
                         "log_level = \"warn\"; // 99999999999\n"
                         "kafka: { properties = [\"fetch.max.bytes=99999999999\"]; };\n"
                         "/* 4294967297 */ consumer: { batch_size = 321; poll_ms = 7; };\n");
        assert_int_equal(cfg_init(&cfg, &err), OG_OK);
        assert_int_equal(cfg_load(&cfg, path, &err), OG_OK);
        assert_int_equal(cfg.consumer.batch_size, 321);
        assert_int_equal(cfg.consumer.poll_ms, 7);
        cfg_free(&cfg);
        unlink(path);
    }
}

/* A kafka.topics list is kept whole, however long (it was cut at 4 KiB). */
static void test_topics_list_whole(void **state)
{
    struct og_config cfg;
    struct og_error err = {0};
    size_t cap = 64 * 1024, len = 0;
    char *text = malloc(cap), *want = malloc(cap), *path;
    size_t wlen = 0;

    (void)state;
    assert_non_null(text);
    assert_non_null(want);
    len += (size_t)snprintf(text + len, cap - len, "kafka: { topics = [");
    for (int i = 0; i < 300; i++) {
        len += (size_t)snprintf(text + len, cap - len, "%s\"ordergate.cancel.t%04d.15m\"",
                                i ? ", " : "", i);
        wlen += (size_t)snprintf(want + wlen, cap - wlen, "%sordergate.cancel.t%04d.15m",
                                 i ? "," : "", i);
    }
    snprintf(text + len, cap - len, "]; };\n");
    assert_true(wlen > 4096);
    path = write_tmp(text);
    assert_int_equal(cfg_init(&cfg, &err), OG_OK);
    assert_int_equal(cfg_load(&cfg, path, &err), OG_OK);
    assert_int_equal(strlen(cfg.kafka.topics), wlen);
    assert_string_equal(cfg.kafka.topics, want);
    cfg_free(&cfg);
    unlink(path);
    free(text);
    free(want);
}

/* consumer.metrics_listen is checked when set, from the file or a flag: a port past 65535
 * is refused (not only when the endpoint starts). */
static void test_metrics_listen(void **state)
{
    struct og_config cfg;
    struct og_error err = {0};

    (void)state;
    expect_file_error("consumer: { metrics_listen = \"127.0.0.1:99999\"; };\n",
                      ":1: consumer.metrics_listen: port: expected an integer in 0..65535, got "
                      "\"99999\"",
                      "consumer.metrics_listen");
    expect_file_error("consumer: { metrics_listen = \"localhost\"; };\n",
                      "consumer.metrics_listen: expected ADDR:PORT", "consumer.metrics_listen");
    expect_file_error("consumer: { metrics_listen = \"::1:9464\"; };\n",
                      "consumer.metrics_listen: write an IPv6 address as [ADDR]:PORT",
                      "consumer.metrics_listen");
    assert_int_equal(cfg_init(&cfg, &err), OG_OK);
    assert_int_equal(cfg_set(&cfg, "consumer.metrics_listen", "0.0.0.0:-1", &err), OG_ERR_CONFIG);
    assert_int_equal(cfg_set(&cfg, "consumer.metrics_listen", "[::1]:65536", &err), OG_ERR_CONFIG);
    assert_string_equal(cfg.consumer.metrics_listen, "127.0.0.1:9464"); /* unchanged */
    assert_int_equal(cfg_set(&cfg, "consumer.metrics_listen", "[::1]:65535", &err), OG_OK);
    assert_int_equal(cfg_set(&cfg, "consumer.metrics_listen", ":0", &err), OG_OK);
    assert_int_equal(cfg_set(&cfg, "consumer.metrics_listen", "", &err), OG_OK);
    cfg_free(&cfg);
}

/* A flag over the file: the error is located at the flag, not at the file's line. */
static void test_error_located_at_flag(void **state)
{
    struct og_config cfg;
    struct og_error err = {0};
    char *path = write_tmp("scanner: {\n  workers = 2;\n  grace_s = 30;\n};\n");
    char line[1024];

    (void)state;
    assert_int_equal(cfg_init(&cfg, &err), OG_OK);
    assert_int_equal(cfg_load(&cfg, path, &err), OG_OK);
    assert_int_equal(cfg_set_flag(&cfg, "scanner.workers", "+3", "workers", &err), OG_ERR_CONFIG);
    assert_string_equal(err.setting, "scanner.workers");
    assert_string_equal(cfg_error_format(&cfg, &err, line, sizeof(line)),
                        "--workers: scanner.workers: expected an integer in 1..16, got \"+3\"");
    assert_int_equal(cfg.scanner.workers, 2); /* unchanged */
    /* An error found later about a setting from the file names the file's line. */
    og_error_set(&err, OG_ERR_CONFIG, false, "scanner.grace_s: too short for this database");
    og_error_setting(&err, "scanner.grace_s");
    cfg_error_format(&cfg, &err, line, sizeof(line));
    assert_non_null(strstr(line, ":3: scanner.grace_s: too short"));
    assert_non_null(strstr(line, path));
    cfg_free(&cfg);
    unlink(path);
}

static void test_flag_errors(void **state)
{
    struct og_config cfg;
    struct og_error err = {0};

    (void)state;
    assert_int_equal(cfg_init(&cfg, &err), OG_OK);
    assert_int_equal(cfg_set(&cfg, "scanner.batch_size", "-5", &err), OG_ERR_CONFIG);
    assert_string_equal(err.msg, "scanner.batch_size: expected an integer in 1..10000, got \"-5\"");
    assert_string_equal(err.setting, "scanner.batch_size");
    assert_int_equal(cfg.scanner.batch_size, 500); /* unchanged */
    assert_int_equal(cfg_set(&cfg, "scanner.batch_size", "12abc", &err), OG_ERR_CONFIG);
    /* The same strict rules as the command line: no sign, no spaces. */
    assert_int_equal(cfg_set(&cfg, "scanner.batch_size", "+12", &err), OG_ERR_CONFIG);
    assert_int_equal(cfg_set(&cfg, "scanner.batch_size", " 12", &err), OG_ERR_CONFIG);
    assert_int_equal(cfg_set(&cfg, "scanner.batch_size", "12 ", &err), OG_ERR_CONFIG);
    assert_int_equal(cfg_set(&cfg, "scanner.batch_size", "", &err), OG_ERR_CONFIG);
    assert_int_equal(cfg.scanner.batch_size, 500);
    assert_int_equal(cfg_set(&cfg, "no.such", "1", &err), OG_ERR_CONFIG);
    assert_int_equal(cfg_set(&cfg, "outbox.enabled", "maybe", &err), OG_ERR_CONFIG);
    cfg_free(&cfg);
}

static void test_missing_file(void **state)
{
    struct og_config cfg;
    struct og_error err = {0};

    (void)state;
    assert_int_equal(cfg_init(&cfg, &err), OG_OK);
    assert_int_equal(cfg_load(&cfg, "/nonexistent/og.conf", &err), OG_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "/nonexistent/og.conf"));
    cfg_free(&cfg);
}

static void test_password_file(void **state)
{
    struct og_config cfg;
    struct og_error err = {0};
    char *pw = NULL;
    char *path = write_tmp("s3cret\n");

    (void)state;
    assert_int_equal(cfg_init(&cfg, &err), OG_OK);
    assert_int_equal(cfg_db_password(&cfg, &pw, &err), OG_OK);
    assert_null(pw);
    assert_int_equal(cfg_set(&cfg, "database.password_file", path, &err), OG_OK);
    assert_int_equal(cfg_db_password(&cfg, &pw, &err), OG_OK);
    assert_string_equal(pw, "s3cret");
    free(pw);
    cfg_free(&cfg);
    unlink(path);
}

/* cfg_db_open: the retry policy of the settings (capped by opts), the password file read
 * (an unreadable one refused, nothing opened), and no connection until one is needed. The
 * attempts are counted against a server that does not exist. */
static void test_db_open(void **state)
{
    static const struct db_stmt one = {"og_cfg_test_one", "SELECT 1", 0};
    static const struct cfg_db_open_opts capped = {.max_attempts = 2};
    struct og_config cfg;
    struct og_error err = {0};
    struct db_retry retry;
    struct db *db = NULL;

    (void)state;
    assert_int_equal(cfg_init(&cfg, &err), OG_OK);
    assert_int_equal(cfg_set(&cfg, "database.conninfo",
                             "host=/nonexistent-ordergate-socket-dir port=1 connect_timeout=1",
                             &err),
                     OG_OK);
    assert_int_equal(cfg_set(&cfg, "database.retry_max", "3", &err), OG_OK);
    assert_int_equal(cfg_set(&cfg, "database.retry_base_ms", "1", &err), OG_OK);
    assert_int_equal(cfg_set(&cfg, "database.retry_cap_ms", "2", &err), OG_OK);
    retry = cfg_db_retry(&cfg);
    assert_int_equal(retry.max_attempts, 3);
    assert_int_equal(retry.base_ms, 1);
    assert_int_equal(retry.cap_ms, 2);

    assert_int_equal(cfg_db_open(&cfg, "unit_cfg", NULL, NULL, &db, &err), OG_OK);
    assert_null(db_conn(db));
    assert_int_not_equal(db_call(db, &one, NULL, NULL, &err), OG_OK);
    assert_int_equal(db_last_attempts(db), 3);
    db_free(db);

    assert_int_equal(cfg_db_open(&cfg, "unit_cfg", &capped, NULL, &db, &err), OG_OK);
    assert_int_not_equal(db_call(db, &one, NULL, NULL, &err), OG_OK);
    assert_int_equal(db_last_attempts(db), 2);
    db_free(db);

    assert_int_equal(cfg_set(&cfg, "database.password_file", "/nonexistent/ordergate-pw", &err),
                     OG_OK);
    db = (struct db *)&db; /* must be reset */
    assert_int_equal(cfg_db_open(&cfg, "unit_cfg", NULL, NULL, &db, &err), OG_ERR_CONFIG);
    assert_null(db);
    assert_non_null(strstr(err.msg, "/nonexistent/ordergate-pw"));
    cfg_free(&cfg);
}

/* Every row of the table describes itself: a description of whole sentences, the programs
 * that read it, a group that exists; the environment fallbacks are the four documented ones. */
static void test_settings_described(void **state)
{
    struct cfg_setting_info info;
    struct cfg_section_info sec;
    size_t n = 0, nenv = 0;

    (void)state;
    for (size_t i = 0; cfg_setting_info(i, &info); i++, n++) {
        const char *dot = strchr(info.name, '.');
        size_t glen = dot != NULL ? (size_t)(dot - info.name) : 0;
        bool grouped = false;
        size_t len;

        assert_non_null(info.description);
        len = strlen(info.description);
        if (len < 20 || info.description[len - 1] != '.')
            fail_msg("%s: description \"%s\" is not a sentence", info.name, info.description);
        if (info.progs == 0 || (info.progs & ~(unsigned)(CFG_PROG_CONSUMER | CFG_PROG_SCANNER |
                                                         CFG_PROG_CTL | CFG_PROG_CONSOLE)) != 0)
            fail_msg("%s: programs %#x", info.name, info.progs);
        for (size_t j = 0; cfg_section_info(j, &sec); j++)
            grouped =
                grouped || (strlen(sec.name) == glen && strncmp(sec.name, info.name, glen) == 0);
        if (!grouped)
            fail_msg("%s: no group", info.name);
        nenv += info.env != NULL;
    }
    assert_true(n >= 50);
    assert_int_equal(nenv, 4);
    assert_true(cfg_setting_info(0, &info));
    assert_string_equal(info.name, "log_level");
    assert_false(cfg_setting_info(n, &info));
}

/* The environment fallbacks apply to a setting still at its default, never over the file. */
static void test_env_fallbacks(void **state)
{
    struct og_config cfg;
    struct og_error err = {0};

    (void)state;
    setenv("ORDERGATE_BROKERS", "envhost:1", 1);
    setenv("ORDERGATE_DB", "dbname=fromenv", 1);
    setenv("ORDERGATE_DB_PASSWORD_FILE", "", 1);
    assert_int_equal(cfg_init(&cfg, &err), OG_OK);
    assert_int_equal(cfg_set(&cfg, "database.conninfo", "dbname=fromfile", &err), OG_OK);
    assert_int_equal(cfg_apply_env(&cfg, &err), OG_OK);
    assert_string_equal(cfg.kafka.brokers, "envhost:1");
    assert_string_equal(cfg.database.conninfo, "dbname=fromfile");
    assert_string_equal(cfg.database.password_file, "");
    cfg_free(&cfg);
    unsetenv("ORDERGATE_BROKERS");
    unsetenv("ORDERGATE_DB");
    unsetenv("ORDERGATE_DB_PASSWORD_FILE");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),          cmocka_unit_test(test_file_and_flags),
        cmocka_unit_test(test_file_errors),       cmocka_unit_test(test_integers_do_not_wrap),
        cmocka_unit_test(test_topics_list_whole), cmocka_unit_test(test_metrics_listen),
        cmocka_unit_test(test_flag_errors),       cmocka_unit_test(test_error_located_at_flag),
        cmocka_unit_test(test_missing_file),      cmocka_unit_test(test_password_file),
        cmocka_unit_test(test_db_open),           cmocka_unit_test(test_settings_described),
        cmocka_unit_test(test_env_fallbacks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
