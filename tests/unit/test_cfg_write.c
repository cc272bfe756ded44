/* cfg_write: a configuration written and read back with cfg_load has every setting of the
 * table equal, strings with quotes, backslashes, control characters and comment marks
 * included; kafka.properties comes back as the same list; a failed write is an error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/cfg.h"
#include "common/cfg_write.h"

/* Writes cfg to a file, reads it into a fresh configuration (defaults first, as a program
 * does) and asserts that every row of the table reads the same in both. */
static void assert_round_trip(const struct og_config *cfg)
{
    char path[64], a[32], b[32];
    struct og_config back;
    struct og_error err = {0};
    struct cfg_setting_info info;
    FILE *f;
    size_t rows = 0;

    snprintf(path, sizeof(path), "/tmp/og_cfg_write_test_%d.conf", (int)getpid());
    f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(cfg_write(cfg, f, &err), OG_OK);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(cfg_init(&back, &err), OG_OK);
    if (cfg_load(&back, path, &err) != OG_OK)
        fail_msg("cfg_load of the written file: %s", err.msg);
    for (size_t i = 0; cfg_setting_info(i, &info); i++, rows++) {
        for (size_t j = 0;; j++) {
            const char *want = cfg_setting_value(cfg, i, j, a, sizeof(a));
            const char *got = cfg_setting_value(&back, i, j, b, sizeof(b));
            if (want == NULL || got == NULL) {
                if (want != got)
                    fail_msg("%s[%zu]: written %s, read back %s", info.name, j,
                             want ? want : "(none)", got ? got : "(none)");
                break;
            }
            if (strcmp(want, got) != 0)
                fail_msg("%s[%zu]: written \"%s\", read back \"%s\"", info.name, j, want, got);
        }
    }
    assert_true(rows > 40);
    /* The same through the fields themselves, not only through cfg_setting_value. */
    assert_string_equal(back.database.conninfo, cfg->database.conninfo);
    assert_int_equal(back.consumer.batch_size, cfg->consumer.batch_size);
    assert_int_equal((int)back.kafka.properties_n, (int)cfg->kafka.properties_n);
    for (size_t j = 0; j < cfg->kafka.properties_n; j++)
        assert_string_equal(back.kafka.properties[j], cfg->kafka.properties[j]);
    cfg_free(&back);
    unlink(path);
}

static void test_defaults_round_trip(void **state)
{
    struct og_config cfg;
    struct og_error err = {0};

    (void)state;
    assert_int_equal(cfg_init(&cfg, &err), OG_OK);
    assert_round_trip(&cfg);
    cfg_free(&cfg);
}

/* Every setting away from its default: strings hostile to a careless writer (each its own, so
 * that two settings swapped would show), ints at their upper bound, bools flipped. */
static void test_hostile_round_trip(void **state)
{
    static const char *const props[] = {
        "sasl.password=p\"w\\x\n# not a comment",
        "client.id=a b /* c */ // d",
        "ssl.key.password=\\\"\t\x01\x7f\xc3\xa9;=}",
    };
    struct og_config cfg;
    struct og_error err = {0};
    struct cfg_setting_info info;
    char value[256], num[32];
    int hostile = 0;

    (void)state;
    assert_int_equal(cfg_init(&cfg, &err), OG_OK);
    for (size_t i = 0; cfg_setting_info(i, &info); i++) {
        if (strcmp(info.type, "string") == 0) {
            snprintf(value, sizeof(value),
                     "%s: say \"hi\"; back\\slash\\\\, \\\" new\nline\r\ttab # hash // slash "
                     "/* c */ @include \"x\" \x01\x1f\x7f \xc3\xa9 };",
                     info.name);
            /* A setting with a closed set of values (log_level, pool_mode, an address)
             * refuses this one and keeps its default. */
            if (cfg_set(&cfg, info.name, value, &err) == OG_OK)
                hostile++;
        } else if (strcmp(info.type, "int") == 0) {
            snprintf(num, sizeof(num), "%ld", info.max);
            assert_int_equal(cfg_set(&cfg, info.name, num, &err), OG_OK);
        } else if (strcmp(info.type, "bool") == 0) {
            assert_non_null(cfg_setting_value(&cfg, i, 0, num, sizeof(num)));
            assert_int_equal(
                cfg_set(&cfg, info.name,
                        strcmp(cfg_setting_value(&cfg, i, 0, num, sizeof(num)), "true") == 0
                            ? "false"
                            : "true",
                        &err),
                OG_OK);
        } else {
            for (size_t j = 0; j < sizeof(props) / sizeof(props[0]); j++)
                assert_int_equal(cfg_set(&cfg, info.name, props[j], &err), OG_OK);
        }
    }
    assert_true(hostile >= 15);
    assert_int_equal((int)cfg.kafka.properties_n, 3);
    assert_round_trip(&cfg);
    cfg_free(&cfg);
}

/* The text itself: sections once each, kafka.properties a list, strings escaped. */
static void test_text(void **state)
{
    struct og_config cfg;
    struct og_error err = {0};
    char *text = NULL;
    size_t size = 0;
    FILE *f;

    (void)state;
    assert_int_equal(cfg_init(&cfg, &err), OG_OK);
    assert_int_equal(cfg_set(&cfg, "database.conninfo", "password='p\"w\\\\x'\n", &err), OG_OK);
    assert_int_equal(cfg_set(&cfg, "kafka.properties", "a=1", &err), OG_OK);
    assert_int_equal(cfg_set(&cfg, "kafka.properties", "b=\"2\"", &err), OG_OK);
    f = open_memstream(&text, &size);
    assert_non_null(f);
    assert_int_equal(cfg_write(&cfg, f, &err), OG_OK);
    fclose(f);
    assert_non_null(strstr(text, "conninfo = \"password='p\\\"w\\\\\\\\x'\\x0a\";\n"));
    assert_non_null(strstr(text, "properties = [\"a=1\", \"b=\\\"2\\\"\"];\n"));
    assert_non_null(strstr(text, "\ndatabase: {\n"));
    assert_null(strstr(strstr(text, "database: {") + 1, "database: {"));
    assert_non_null(strstr(text, "  batch_size = 500;\n"));
    assert_non_null(strstr(text, "  enabled = true;\n"));
    free(text);
    cfg_free(&cfg);
}

static void test_write_error(void **state)
{
    struct og_config cfg;
    struct og_error err = {0};
    FILE *f = fopen("/dev/full", "w");

    (void)state;
    assert_non_null(f);
    assert_int_equal(cfg_init(&cfg, &err), OG_OK);
    assert_int_equal(cfg_write(&cfg, f, &err), OG_ERR_IO);
    assert_non_null(strstr(err.msg, "writing the configuration"));
    fclose(f);
    cfg_free(&cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_round_trip),
        cmocka_unit_test(test_hostile_round_trip),
        cmocka_unit_test(test_text),
        cmocka_unit_test(test_write_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
