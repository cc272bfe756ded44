/* kafka_group_reader_new, the drill's reader of its group's offsets: built from the
 * configuration like every client of the product, so kafka.sasl_password_file and
 * kafka.properties reach it; it reads the group it is given and commits nothing, whatever the
 * configuration's own group; a bad property is a configuration error naming the setting. No
 * broker needed: the handle is created, never used. */
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

static void assert_prop(rd_kafka_t *rk, const char *name, const char *want)
{
    char v[256];
    size_t size = sizeof(v);

    assert_int_equal(rd_kafka_conf_get(rd_kafka_conf(rk), name, v, &size), RD_KAFKA_CONF_OK);
    if (strcmp(v, want) != 0)
        fail_msg("%s: \"%s\", expected \"%s\"", name, v, want);
}

static void test_settings_reach_the_reader(void **state)
{
    struct og_config cfg;
    struct og_error err = {0};
    char path[64];
    rd_kafka_t *rk = NULL;
    FILE *f;

    (void)state;
    snprintf(path, sizeof(path), "/tmp/og_kafka_group_reader_%d", (int)getpid());
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("from-the-file\n", f);
    fclose(f);
    assert_int_equal(cfg_init(&cfg, &err), OG_OK);
    assert_int_equal(cfg_set(&cfg, "kafka.brokers", "127.0.0.1:1", &err), OG_OK);
    assert_int_equal(cfg_set(&cfg, "kafka.properties", "sasl.username=drill", &err), OG_OK);
    assert_int_equal(cfg_set(&cfg, "kafka.properties", "socket.timeout.ms=4321", &err), OG_OK);
    assert_int_equal(cfg_set(&cfg, "kafka.sasl_password_file", path, &err), OG_OK);
    assert_int_equal(cfg_set(&cfg, "kafka.group_instance_id", "the-service-1", &err), OG_OK);

    assert_int_equal(kafka_group_reader_new(&cfg, "drill-group", "t", &rk, &err), OG_OK);
    assert_non_null(rk);
    assert_prop(rk, "sasl.password", "from-the-file");
    assert_prop(rk, "sasl.username", "drill");
    assert_prop(rk, "socket.timeout.ms", "4321");
    assert_prop(rk, "group.id", "drill-group");
    assert_prop(rk, "enable.auto.commit", "false");
    assert_prop(rk, "client.id", "t");
    /* The service's static membership is not the reader's. */
    {
        char v[256];
        size_t size = sizeof(v);
        rd_kafka_conf_res_t r = rd_kafka_conf_get(rd_kafka_conf(rk), "group.instance.id", v, &size);
        assert_true(r != RD_KAFKA_CONF_OK || strcmp(v, "the-service-1") != 0);
    }
    rd_kafka_destroy(rk);
    cfg_free(&cfg);
    unlink(path);
}

static void test_bad_property_refused(void **state)
{
    struct og_config cfg;
    struct og_error err = {0};
    rd_kafka_t *rk = (rd_kafka_t *)&cfg;

    (void)state;
    assert_int_equal(cfg_init(&cfg, &err), OG_OK);
    assert_int_equal(cfg_set(&cfg, "kafka.properties", "socket.timeout.ms=soon", &err), OG_OK);
    assert_int_equal(kafka_group_reader_new(&cfg, "g", "t", &rk, &err), OG_ERR_CONFIG);
    assert_null(rk);
    assert_string_equal(err.setting, "kafka.properties");
    cfg_free(&cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_settings_reach_the_reader),
        cmocka_unit_test(test_bad_property_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
