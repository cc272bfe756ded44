/* Delay levels: where a cancel message due in a given time goes, and the
 * configurations that must be refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "common/delay.h"

static enum og_status levels(const char *topics, const char *topic_levels, struct delay_levels *d,
                             struct og_error *err)
{
    struct og_config cfg;

    memset(&cfg, 0, sizeof(cfg));
    cfg.topics = (char *)topics;
    cfg.topic_levels = (char *)topic_levels;
    return delay_levels_parse(&cfg, d, err);
}

/* Levels from the names; the smallest level that is long enough wins, the
 * longest when none is. */
static void test_levels_from_names(void **state)
{
    struct delay_levels d;
    struct og_error err = {0};

    (void)state;
    assert_int_equal(levels("shop.cancel.30m, shop.cancel.1m,shop.cancel.15m", "", &d, &err),
                     OG_OK);
    assert_int_equal(d.n, 3);
    assert_string_equal(delay_topic_for(&d, -5000), "shop.cancel.1m");
    assert_string_equal(delay_topic_for(&d, 0), "shop.cancel.1m");
    assert_string_equal(delay_topic_for(&d, 60000), "shop.cancel.1m");
    assert_string_equal(delay_topic_for(&d, 60001), "shop.cancel.15m");
    assert_string_equal(delay_topic_for(&d, 15 * 60000), "shop.cancel.15m");
    assert_string_equal(delay_topic_for(&d, 20 * 60000), "shop.cancel.30m");
    assert_string_equal(delay_topic_for(&d, 86400000), "shop.cancel.30m");
    delay_levels_free(&d);
    assert_int_equal(d.n, 0);
    assert_null(delay_topic_for(&d, 0));
}

static void test_levels_explicit(void **state)
{
    struct delay_levels d;
    struct og_error err = {0};

    (void)state;
    assert_int_equal(levels("cancel-short,cancel-long", "90s, 2h", &d, &err), OG_OK);
    assert_string_equal(delay_topic_for(&d, 90000), "cancel-short");
    assert_string_equal(delay_topic_for(&d, 90001), "cancel-long");
    delay_levels_free(&d);
}

/* Each refusal names the setting and leaves nothing behind. */
static void test_levels_refused(void **state)
{
    struct delay_levels d;
    struct og_error err = {0};

    (void)state;
    assert_int_equal(levels("og-test-topic", "", &d, &err), OG_ERR_CONFIG);
    assert_string_equal(err.setting, "kafka.topics");
    assert_non_null(strstr(err.msg, "og-test-topic"));
    assert_int_equal(d.n, 0);

    memset(&err, 0, sizeof(err));
    assert_int_equal(levels("a,b", "15m", &d, &err), OG_ERR_CONFIG);
    assert_string_equal(err.setting, "kafka.topic_levels");
    assert_non_null(strstr(err.msg, "none for b"));

    memset(&err, 0, sizeof(err));
    assert_int_equal(levels("a", "15m,30m", &d, &err), OG_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "more durations"));

    memset(&err, 0, sizeof(err));
    assert_int_equal(levels("a", "0s", &d, &err), OG_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "\"0s\" for topic a"));

    memset(&err, 0, sizeof(err));
    assert_int_equal(levels("a.forever", "", &d, &err), OG_ERR_CONFIG);
    /* A bare number ending a name is no level. */
    memset(&err, 0, sizeof(err));
    assert_int_equal(levels("og-test.4242.6", "", &d, &err), OG_ERR_CONFIG);
    assert_int_equal(d.n, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_levels_from_names),
        cmocka_unit_test(test_levels_explicit),
        cmocka_unit_test(test_levels_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
