/* kafka.sasl_password_file: its content becomes sasl.password on every handle (consumer and
 * producer), a trailing newline dropped; a file that is missing or empty, or a sasl.password
 * in kafka.properties as well, is a configuration error naming the setting, also for
 * kafka_check_config; a settings dump shows the path, never the password;
 * ORDERGATE_KAFKA_SASL_PASSWORD_FILE is the fallback when the file leaves it empty; the error
 * callbacks' reasons that mean a refusal for good are told from a connection that may come back,
 * whichever code librdkafka reports them with. No broker needed: only configuration objects
 * are built. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/cfg.h"
#include "common/kafka.h"

static char path[128];

static void write_password(const char *text)
{
    FILE *f;

    snprintf(path, sizeof(path), "/tmp/og_kafka_sasl_test_%d", (int)getpid());
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void config_with(struct og_config *cfg, const char *password_file, const char *prop)
{
    struct og_error err = {0};

    assert_int_equal(cfg_init(cfg, &err), OG_OK);
    assert_int_equal(cfg_set(cfg, "kafka.brokers", "127.0.0.1:1", &err), OG_OK);
    assert_int_equal(cfg_set(cfg, "kafka.properties", "sasl.username=ordergate", &err), OG_OK);
    if (prop != NULL)
        assert_int_equal(cfg_set(cfg, "kafka.properties", prop, &err), OG_OK);
    if (password_file != NULL)
        assert_int_equal(cfg_set(cfg, "kafka.sasl_password_file", password_file, &err), OG_OK);
}

static void test_password_reaches_both_roles(void **state)
{
    static const enum kafka_role roles[] = {KAFKA_ROLE_CONSUMER, KAFKA_ROLE_PRODUCER};
    struct og_config cfg;
    struct og_error err = {0};

    (void)state;
    write_password("s3cret-pw\n");
    config_with(&cfg, path, NULL);
    for (size_t i = 0; i < 2; i++) {
        rd_kafka_conf_t *conf = NULL;
        char v[64];
        size_t size = sizeof(v);
        assert_int_equal(kafka_conf_new(&cfg, roles[i], "t", &conf, &err), OG_OK);
        assert_int_equal(rd_kafka_conf_get(conf, "sasl.password", v, &size), RD_KAFKA_CONF_OK);
        assert_string_equal(v, "s3cret-pw");
        size = sizeof(v);
        assert_int_equal(rd_kafka_conf_get(conf, "sasl.username", v, &size), RD_KAFKA_CONF_OK);
        assert_string_equal(v, "ordergate");
        rd_kafka_conf_destroy(conf);
    }
    assert_int_equal(kafka_check_config(&cfg, &err), OG_OK);
    cfg_free(&cfg);
    unlink(path);
}

static void expect_refused(struct og_config *cfg, const char *needle)
{
    struct og_error err = {0};
    rd_kafka_conf_t *conf = NULL;

    assert_int_equal(kafka_conf_new(cfg, KAFKA_ROLE_PRODUCER, "t", &conf, &err), OG_ERR_CONFIG);
    assert_null(conf);
    assert_string_equal(err.setting, "kafka.sasl_password_file");
    if (strstr(err.msg, needle) == NULL)
        fail_msg("error \"%s\" lacks \"%s\"", err.msg, needle);
    og_error_clear(&err);
    assert_int_equal(kafka_check_config(cfg, &err), OG_ERR_CONFIG);
    assert_non_null(strstr(err.msg, needle));
}

static void test_refusals(void **state)
{
    struct og_config cfg;
    char missing[160];

    (void)state;
    snprintf(missing, sizeof(missing), "/tmp/og_kafka_sasl_missing_%d", (int)getpid());
    config_with(&cfg, missing, NULL);
    expect_refused(&cfg, "No such file or directory");
    assert_non_null(strstr(missing, "og_kafka_sasl_missing"));
    cfg_free(&cfg);

    write_password("\n");
    config_with(&cfg, path, NULL);
    expect_refused(&cfg, "is empty");
    cfg_free(&cfg);

    /* Longer than a password may be: refused, never cut. */
    {
        char long_pw[DB_PASSWORD_MAX + 3];
        memset(long_pw, 'p', DB_PASSWORD_MAX + 1);
        strcpy(long_pw + DB_PASSWORD_MAX + 1, "\n");
        write_password(long_pw);
        config_with(&cfg, path, NULL);
        expect_refused(&cfg, "longer than 1023 bytes");
        cfg_free(&cfg);
    }

    write_password("s3cret-pw\n");
    config_with(&cfg, path, "sasl.password=inline");
    expect_refused(&cfg, "keep one of them");
    cfg_free(&cfg);
    unlink(path);
}

static void test_dump_shows_path_only(void **state)
{
    struct og_config cfg;
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);

    (void)state;
    assert_non_null(out);
    write_password("s3cret-pw\n");
    config_with(&cfg, path, NULL);
    cfg_dump(&cfg, out);
    fclose(out);
    assert_non_null(strstr(text, "kafka.sasl_password_file = \"/tmp/og_kafka_sasl_test_"));
    assert_null(strstr(text, "s3cret-pw"));
    free(text);
    cfg_free(&cfg);
    unlink(path);
}

/* Without the setting nothing changes: no sasl.password is set. */
static void test_unset(void **state)
{
    struct og_config cfg;
    struct og_error err = {0};
    rd_kafka_conf_t *conf = NULL;
    char v[64];
    size_t size = sizeof(v);

    (void)state;
    config_with(&cfg, NULL, NULL);
    assert_int_equal(kafka_conf_new(&cfg, KAFKA_ROLE_CONSUMER, "t", &conf, &err), OG_OK);
    /* Never set: librdkafka has no value to give. */
    assert_int_not_equal(rd_kafka_conf_get(conf, "sasl.password", v, &size), RD_KAFKA_CONF_OK);
    rd_kafka_conf_destroy(conf);
    cfg_free(&cfg);
}

/* ORDERGATE_KAFKA_SASL_PASSWORD_FILE stands in when the file leaves the setting empty. */
static void test_environment_fallback(void **state)
{
    struct og_config cfg;
    struct og_error err = {0};

    (void)state;
    setenv("ORDERGATE_KAFKA_SASL_PASSWORD_FILE", "/run/secrets/kafka_sasl_password", 1);
    assert_int_equal(cfg_init(&cfg, &err), OG_OK);
    assert_int_equal(cfg_apply_env(&cfg, &err), OG_OK);
    assert_string_equal(cfg.kafka.sasl_password_file, "/run/secrets/kafka_sasl_password");
    cfg_free(&cfg);
    assert_int_equal(cfg_init(&cfg, &err), OG_OK);
    assert_int_equal(cfg_set(&cfg, "kafka.sasl_password_file", "/etc/ordergate/kafka.pw", &err),
                     OG_OK);
    assert_int_equal(cfg_apply_env(&cfg, &err), OG_OK);
    assert_string_equal(cfg.kafka.sasl_password_file, "/etc/ordergate/kafka.pw");
    cfg_free(&cfg);
    unsetenv("ORDERGATE_KAFKA_SASL_PASSWORD_FILE");
}

/* The reasons are librdkafka's own, as the local SASL_SSL listener produced them. */
static void test_refusal_reasons(void **state)
{
    (void)state;
    assert_int_equal(kafka_refusal(RD_KAFKA_RESP_ERR__AUTHENTICATION,
                                   "sasl_ssl://127.0.0.1:30011/bootstrap: SASL authentication "
                                   "error: Authentication failed during authentication due to "
                                   "invalid credentials with SASL mechanism SCRAM-SHA-512"),
                     RD_KAFKA_RESP_ERR__AUTHENTICATION);
    assert_int_equal(kafka_refusal(RD_KAFKA_RESP_ERR__SSL,
                                   "sasl_ssl://127.0.0.1:30011/bootstrap: SSL handshake failed: "
                                   "error:0A000086:SSL routines::certificate verify failed: broker "
                                   "certificate could not be verified"),
                     RD_KAFKA_RESP_ERR__SSL);
    /* The same refusal met while reading the handshake comes as a transport error. */
    assert_int_equal(kafka_refusal(RD_KAFKA_RESP_ERR__TRANSPORT,
                                   "sasl_ssl://127.0.0.1:30011/bootstrap: error:0A000086:SSL "
                                   "routines::certificate verify failed (after 5ms in state "
                                   "SSL_HANDSHAKE)"),
                     RD_KAFKA_RESP_ERR__SSL);
    /* Connections that may come back. */
    assert_int_equal(kafka_refusal(RD_KAFKA_RESP_ERR__TRANSPORT,
                                   "sasl_ssl://127.0.0.1:30011/bootstrap: Connect to "
                                   "ipv4#127.0.0.1:30011 failed: Connection refused"),
                     RD_KAFKA_RESP_ERR_NO_ERROR);
    assert_int_equal(kafka_refusal(RD_KAFKA_RESP_ERR__SSL,
                                   "sasl_ssl://127.0.0.1:30011/1: SSL handshake failed: "
                                   "Disconnected: connection closed by peer"),
                     RD_KAFKA_RESP_ERR_NO_ERROR);
    assert_int_equal(kafka_refusal(RD_KAFKA_RESP_ERR__TRANSPORT, NULL), RD_KAFKA_RESP_ERR_NO_ERROR);
    assert_int_equal(kafka_refusal(RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN, "1/1 brokers are down"),
                     RD_KAFKA_RESP_ERR_NO_ERROR);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_password_reaches_both_roles), cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_dump_shows_path_only),        cmocka_unit_test(test_unset),
        cmocka_unit_test(test_environment_fallback),        cmocka_unit_test(test_refusal_reasons),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
