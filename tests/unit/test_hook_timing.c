/* The gate's hook timing notices (schema/functions/internal/_hooks_run.sql) parsed into samples,
 * and the samples into a histogram per hook (common/hook_timing.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/hook_timing.h"
#include "common/metrics.h"

static void test_parse_notice(void **state)
{
    struct hook_timing_sample s;

    (void)state;
    assert_true(hook_timing_parse("ordergate_hook_timing id=12 event=cancelled ms=3.250 "
                                  "fn=shop.on_cancelled(text[],text)",
                                  &s));
    assert_int_equal(s.id, 12);
    assert_string_equal(s.event, "cancelled");
    assert_true(s.ms > 3.249 && s.ms < 3.251);
    assert_string_equal(s.fn, "shop.on_cancelled(text[],text)");
    /* A name with spaces and quotes is the rest of the line. */
    assert_true(hook_timing_parse("ordergate_hook_timing id=1 event=paid ms=0 "
                                  "fn=\"My Shop\".\"on paid\"(text[],text)\n",
                                  &s));
    assert_string_equal(s.fn, "\"My Shop\".\"on paid\"(text[],text)");
    assert_true(s.ms == 0);
}

static void test_parse_refuses_anything_else(void **state)
{
    struct hook_timing_sample s;
    static const char *const bad[] = {
        NULL,
        "",
        "hook shop.h(text[],text): refused",
        "ordergate_hook_timing",
        "ordergate_hook_timing id=x event=cancelled ms=1 fn=a",
        "ordergate_hook_timing id=0 event=cancelled ms=1 fn=a",
        "ordergate_hook_timing id=1 event= ms=1 fn=a",
        "ordergate_hook_timing id=1 event=cancelled ms=-1 fn=a",
        "ordergate_hook_timing id=1 event=cancelled ms=nan fn=a",
        "ordergate_hook_timing id=1 event=cancelled ms=1 fn=",
        "ordergate_hook_timing id=1 event=cancelled ms=1 fn=a\nsecond line",
        "ordergate_hook_timing id=1 event=cancelled fn=a ms=1",
        "ordergate_hook_timing id=1 event=averyveryverylongeventname ms=1 fn=a",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_false(hook_timing_parse(bad[i], &s));
}

static void test_histogram_per_hook(void **state)
{
    static const struct hook_timing ht = {"og_test_hook_seconds", "test"};
    struct hook_timing_sample s = {.id = 1, .event = "cancelled", .ms = 4};
    char buf[65536];
    char fn[64];

    (void)state;
    snprintf(s.fn, sizeof(s.fn), "%s", "shop.a(text[],text)");
    hook_timing_observe(&ht, &s);
    s.ms = 1500;
    hook_timing_observe(&ht, &s);
    snprintf(s.fn, sizeof(s.fn), "%s", "\"q\".b(text[],text)");
    hook_timing_observe(&ht, &s);
    metrics_render(buf, sizeof(buf));
    assert_non_null(strstr(buf, "og_test_hook_seconds_count{hook=\"shop.a(text[],text)\"} 2\n"));
    assert_non_null(strstr(buf, "og_test_hook_seconds_bucket{hook=\"shop.a(text[],text)\","
                                "le=\"0.005\"} 1\n"));
    assert_non_null(strstr(buf, "og_test_hook_seconds_sum{hook=\"shop.a(text[],text)\"} 1.504\n"));
    assert_non_null(
        strstr(buf, "og_test_hook_seconds_count{hook=\"\\\"q\\\".b(text[],text)\"} 1\n"));
    /* A bounded number of series: the rest share "other". */
    for (int i = 0; i < HOOK_TIMING_SERIES_MAX + 5; i++) {
        snprintf(fn, sizeof(fn), "shop.h%d(text[],text)", i);
        snprintf(s.fn, sizeof(s.fn), "%s", fn);
        hook_timing_observe(&ht, &s);
    }
    metrics_render(buf, sizeof(buf));
    assert_non_null(strstr(buf, "og_test_hook_seconds_count{hook=\"other\"} "));
    assert_null(strstr(buf, "hook=\"shop.h36(text[],text)\""));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_notice),
        cmocka_unit_test(test_parse_refuses_anything_else),
        cmocka_unit_test(test_histogram_per_hook),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
