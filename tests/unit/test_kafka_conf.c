/* kafka.properties reach every handle, except what only the other role reads:
 * a consumer-only property on a producer (or the reverse) is skipped rather
 * than set and warned about by librdkafka at every start. Reserved properties
 * are still refused whichever role they would apply to. No broker needed:
 * only configuration objects are built. */
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

static void test_roles(void **state)
{
    (void)state;
    assert_false(kafka_prop_applies(KAFKA_ROLE_PRODUCER, "session.timeout.ms"));
    assert_false(kafka_prop_applies(KAFKA_ROLE_PRODUCER, "group.instance.id"));
    assert_true(kafka_prop_applies(KAFKA_ROLE_CONSUMER, "session.timeout.ms"));
    assert_false(kafka_prop_applies(KAFKA_ROLE_CONSUMER, "linger.ms"));
    assert_false(kafka_prop_applies(KAFKA_ROLE_CONSUMER, "acks"));
    assert_true(kafka_prop_applies(KAFKA_ROLE_PRODUCER, "linger.ms"));
    /* Shared by both roles, or unknown (librdkafka then says it is unknown). */
    assert_true(kafka_prop_applies(KAFKA_ROLE_PRODUCER, "security.protocol"));
    assert_true(kafka_prop_applies(KAFKA_ROLE_CONSUMER, "security.protocol"));
    assert_true(kafka_prop_applies(KAFKA_ROLE_CONSUMER, "no.such.property"));
}

/* props: NULL-terminated "name=value" entries of kafka.properties. */
static void config_with(struct og_config *cfg, const char *const *props)
{
    struct og_error err = {0};

    assert_int_equal(cfg_init(cfg, &err), OG_OK);
    assert_int_equal(cfg_set(cfg, "kafka.brokers", "127.0.0.1:1", &err), OG_OK);
    for (size_t i = 0; props[i] != NULL; i++)
        if (cfg_set(cfg, "kafka.properties", props[i], &err) != OG_OK)
            fail_msg("kafka.properties: %s", err.msg);
}

static void conf_get(rd_kafka_conf_t *conf, const char *name, char *out, size_t size)
{
    assert_int_equal(rd_kafka_conf_get(conf, name, out, &size), RD_KAFKA_CONF_OK);
}

static void test_handles_get_their_share(void **state)
{
    struct og_config cfg;
    struct og_error err = {0};
    rd_kafka_conf_t *conf = NULL;
    char v[64];

    (void)state;
    config_with(&cfg, (const char *[]){"session.timeout.ms=12345", "linger.ms=7",
                                       "client.id=shop-a", NULL});

    assert_int_equal(kafka_conf_new(&cfg, KAFKA_ROLE_PRODUCER, NULL, &conf, &err), OG_OK);
    conf_get(conf, "linger.ms", v, sizeof(v));
    assert_string_equal(v, "7");
    conf_get(conf, "session.timeout.ms", v, sizeof(v));
    assert_string_not_equal(v, "12345"); /* skipped: librdkafka's default stays */
    conf_get(conf, "client.id", v, sizeof(v));
    assert_string_equal(v, "shop-a");
    rd_kafka_conf_destroy(conf);

    assert_int_equal(kafka_conf_new(&cfg, KAFKA_ROLE_CONSUMER, NULL, &conf, &err), OG_OK);
    conf_get(conf, "session.timeout.ms", v, sizeof(v));
    assert_string_equal(v, "12345");
    conf_get(conf, "linger.ms", v, sizeof(v));
    assert_string_not_equal(v, "7");
    rd_kafka_conf_destroy(conf);
    cfg_free(&cfg);
}

static void test_reserved_refused_for_both_roles(void **state)
{
    struct og_config cfg;
    struct og_error err = {0};
    rd_kafka_conf_t *conf = NULL;

    (void)state;
    /* group.id is consumer-only, yet a producer must refuse it too: the
     * mistake is the same whichever handle would have skipped it. */
    config_with(&cfg, (const char *[]){"group.id=elsewhere", NULL});
    assert_int_equal(kafka_conf_new(&cfg, KAFKA_ROLE_PRODUCER, NULL, &conf, &err), OG_ERR_CONFIG);
    assert_null(conf);
    assert_non_null(strstr(err.msg, "group.id may not be set here"));
    cfg_free(&cfg);

    config_with(&cfg, (const char *[]){"enable.idempotence=false", NULL});
    assert_int_equal(kafka_conf_new(&cfg, KAFKA_ROLE_CONSUMER, NULL, &conf, &err), OG_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "enable.idempotence may not be set here"));
    cfg_free(&cfg);
}

/* Static membership: the setting, else host name and ORDERGATE_INSTANCE, else none. */
static void test_group_instance_id(void **state)
{
    struct og_config cfg;
    struct og_error err = {0};
    rd_kafka_conf_t *conf = NULL;
    char v[300], host[256], want[300];
    size_t size = sizeof(v);

    (void)state;
    unsetenv("ORDERGATE_INSTANCE");
    config_with(&cfg, (const char *[]){NULL});
    assert_int_equal(kafka_conf_new(&cfg, KAFKA_ROLE_CONSUMER, NULL, &conf, &err), OG_OK);
    /* Dynamic: never set (librdkafka reports an unset string property as invalid). */
    assert_int_not_equal(rd_kafka_conf_get(conf, "group.instance.id", v, &size), RD_KAFKA_CONF_OK);
    conf_get(conf, "session.timeout.ms", v, sizeof(v));
    assert_string_equal(v, "10000");
    rd_kafka_conf_destroy(conf);

    setenv("ORDERGATE_INSTANCE", "b", 1);
    assert_int_equal(gethostname(host, sizeof(host)), 0);
    snprintf(want, sizeof(want), "%s-b", host);
    assert_int_equal(kafka_conf_new(&cfg, KAFKA_ROLE_CONSUMER, NULL, &conf, &err), OG_OK);
    conf_get(conf, "group.instance.id", v, sizeof(v));
    assert_string_equal(v, want);
    rd_kafka_conf_destroy(conf);
    /* Producers are not group members. */
    assert_int_equal(kafka_conf_new(&cfg, KAFKA_ROLE_PRODUCER, NULL, &conf, &err), OG_OK);
    size = sizeof(v);
    assert_int_not_equal(rd_kafka_conf_get(conf, "group.instance.id", v, &size), RD_KAFKA_CONF_OK);
    rd_kafka_conf_destroy(conf);

    setenv("ORDERGATE_INSTANCE", "a/b", 1);
    assert_int_equal(kafka_conf_new(&cfg, KAFKA_ROLE_CONSUMER, NULL, &conf, &err), OG_ERR_CONFIG);
    assert_null(conf);
    assert_non_null(strstr(err.msg, "ORDERGATE_INSTANCE"));

    /* The setting wins over the environment. */
    assert_int_equal(cfg_set(&cfg, "kafka.group_instance_id", "shop-consumer-1", &err), OG_OK);
    assert_int_equal(kafka_conf_new(&cfg, KAFKA_ROLE_CONSUMER, NULL, &conf, &err), OG_OK);
    conf_get(conf, "group.instance.id", v, sizeof(v));
    assert_string_equal(v, "shop-consumer-1");
    rd_kafka_conf_destroy(conf);
    unsetenv("ORDERGATE_INSTANCE");

    assert_int_equal(cfg_set(&cfg, "kafka.group_instance_id", "no spaces", &err), OG_OK);
    assert_int_equal(kafka_conf_new(&cfg, KAFKA_ROLE_CONSUMER, NULL, &conf, &err), OG_ERR_CONFIG);
    assert_string_equal(err.setting, "kafka.group_instance_id");
    cfg_free(&cfg);

    /* Only through the setting, never kafka.properties. */
    config_with(&cfg, (const char *[]){"group.instance.id=x", NULL});
    assert_int_equal(kafka_conf_new(&cfg, KAFKA_ROLE_CONSUMER, NULL, &conf, &err), OG_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "use kafka.group_instance_id"));
    cfg_free(&cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roles),
        cmocka_unit_test(test_handles_get_their_share),
        cmocka_unit_test(test_reserved_refused_for_both_roles),
        cmocka_unit_test(test_group_instance_id),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
