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
    cfg.kafka.topics = (char *)topics;
    cfg.kafka.topic_levels = (char *)topic_levels;
    return delay_levels_parse(&cfg, DELAY_ALL_TOPICS, d, err);
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

/* The consumer's reading: topics without a level in their name are left out, not refused; the
 * pick, the level of a topic and the longest. */
static void test_levels_named_only(void **state)
{
    struct og_config cfg;
    struct delay_levels d;
    struct og_error err = {0};

    (void)state;
    memset(&cfg, 0, sizeof(cfg));
    cfg.kafka.topics =
        "ordergate.cancel.30m,ordergate.cancel.15m,ordergate.cancel.2h,og.t.cancel.a,nodot";
    cfg.kafka.topic_levels = "";
    assert_int_equal(delay_levels_parse(&cfg, DELAY_NAMED_ONLY, &d, &err), OG_OK);
    assert_int_equal(d.n, 3);
    assert_int_equal(delay_level_of(&d, "ordergate.cancel.30m"), 1800000);
    assert_int_equal(delay_level_of(&d, "ordergate.cancel.15m"), 900000);
    assert_int_equal(delay_level_of(&d, "og.t.cancel.a"), -1);
    assert_int_equal(delay_level_of(&d, "nodot"), -1);
    assert_string_equal(delay_longest(&d)->topic, "ordergate.cancel.2h");
    /* The shortest level not shorter than the wait; the longest beyond them all. */
    assert_string_equal(delay_pick(&d, 0)->topic, "ordergate.cancel.15m");
    assert_string_equal(delay_pick(&d, 900000)->topic, "ordergate.cancel.15m");
    assert_string_equal(delay_pick(&d, 900001)->topic, "ordergate.cancel.30m");
    assert_string_equal(delay_pick(&d, 7200000)->topic, "ordergate.cancel.2h");
    assert_string_equal(delay_pick(&d, 7200001)->topic, "ordergate.cancel.2h");
    assert_true(delay_pick(&d, 7200001)->level_ms < 7200001);
    delay_levels_free(&d);

    /* Explicit levels still apply to every topic, and still must match. */
    cfg.kafka.topics = "og.t.cancel.a,og.t.cancel.b";
    cfg.kafka.topic_levels = "1m,10m";
    assert_int_equal(delay_levels_parse(&cfg, DELAY_NAMED_ONLY, &d, &err), OG_OK);
    assert_int_equal(delay_level_of(&d, "og.t.cancel.b"), 600000);
    delay_levels_free(&d);
    cfg.kafka.topic_levels = "1m";
    assert_int_equal(delay_levels_parse(&cfg, DELAY_NAMED_ONLY, &d, &err), OG_ERR_CONFIG);

    /* No level anywhere: an empty table (the consumer then re-schedules to the source). */
    cfg.kafka.topics = "og.t.cancel.a";
    cfg.kafka.topic_levels = "";
    assert_int_equal(delay_levels_parse(&cfg, DELAY_NAMED_ONLY, &d, &err), OG_OK);
    assert_int_equal(d.n, 0);
    assert_null(delay_pick(&d, 0));
    assert_null(delay_longest(&d));
    delay_levels_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_levels_from_names),
        cmocka_unit_test(test_levels_explicit),
        cmocka_unit_test(test_levels_refused),
        cmocka_unit_test(test_levels_named_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
