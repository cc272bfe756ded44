/* Timestamps of the message contract: what parses, what is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/clock.h"

static int64_t parse_ok(const char *s)
{
    int64_t ms = -1;
    assert_int_equal(clock_parse_iso(s, strlen(s), &ms), 0);
    return ms;
}

static void test_parse_utc(void **state)
{
    (void)state;
    assert_int_equal(parse_ok("1970-01-01T00:00:00Z"), 0);
    assert_int_equal(parse_ok("1970-01-01T00:00:00.001Z"), 1);
    assert_int_equal(parse_ok("2026-11-30T16:00:00.000Z"), INT64_C(1796054400000));
    /* Fractions are cut to the millisecond, not rounded up past a second. */
    assert_int_equal(parse_ok("2026-11-30T16:00:00.999999999Z"), INT64_C(1796054400999));
    assert_int_equal(parse_ok("2024-02-29T12:00:00.5Z"), INT64_C(1709208000500));
}

static void test_parse_offsets(void **state)
{
    (void)state;
    assert_int_equal(parse_ok("2026-11-30T17:00:00+01:00"), parse_ok("2026-11-30T16:00:00Z"));
    assert_int_equal(parse_ok("2026-11-30T10:30:00-05:30"), parse_ok("2026-11-30T16:00:00Z"));
}

static void test_parse_rejects(void **state)
{
    static const char *const bad[] = {
        "",
        "2026-11-30",
        "2026-11-30T16:00:00",             /* no zone */
        "2026-11-30 16:00:00Z",            /* space instead of T */
        "2026-13-01T00:00:00Z",            /* month */
        "2026-02-29T00:00:00Z",            /* not a leap year */
        "2026-11-31T00:00:00Z",            /* day */
        "2026-11-30T24:00:00Z",            /* hour */
        "2026-11-30T16:60:00Z",            /* minute */
        "2026-11-30T16:00:00.Z",           /* empty fraction */
        "2026-11-30T16:00:00Zjunk",        /* trailing bytes */
        "2026-11-30T16:00:00+2:00",        /* short offset */
        "2026-11-30T16:00:00.1234567890Z", /* ten fraction digits */
        "+2026-11-30T16:00:00Z",
    };
    int64_t ms;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (clock_parse_iso(bad[i], strlen(bad[i]), &ms) == 0)
            fail_msg("accepted '%s'", bad[i]);
    }
    assert_int_equal(clock_parse_iso(NULL, 0, &ms), -1);
    /* Length is honoured: a valid prefix of a longer buffer is not enough. */
    assert_int_equal(clock_parse_iso("2026-11-30T16:00:00Z", 19, &ms), -1);
}

static void test_format_roundtrip(void **state)
{
    char buf[32];
    int64_t values[] = {0, 1, 999, INT64_C(1796054400123), INT64_C(4102444799999)};

    (void)state;
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        clock_format_iso(values[i], buf, sizeof(buf));
        assert_int_equal(parse_ok(buf), values[i]);
    }
    assert_string_equal(clock_format_iso(INT64_C(1796054400123), buf, sizeof(buf)),
                        "2026-11-30T16:00:00.123Z");
}

static void test_sleep_whole(void **state)
{
    volatile sig_atomic_t down = 0;
    int64_t t0 = clock_mono_ms();

    (void)state;
    assert_true(clock_sleep_until_flag(120, &down, NULL));
    assert_true(clock_mono_ms() - t0 >= 120);
    assert_true(clock_sleep_until_flag(0, NULL, NULL));
    assert_true(clock_sleep_until_flag(-5, NULL, NULL));
}

static void test_sleep_raised_before(void **state)
{
    volatile sig_atomic_t up = 1;
    int64_t t0 = clock_mono_ms();

    (void)state;
    assert_false(clock_sleep_until_flag(10000, NULL, &up));
    assert_true(clock_mono_ms() - t0 < CLOCK_SLEEP_SLICE_MS);
}

static volatile sig_atomic_t raise_flag;

static void *raise_later(void *arg)
{
    (void)arg;
    clock_sleep_until_flag(100, NULL, NULL);
    raise_flag = 1;
    return NULL;
}

/* A flag raised by another thread ends a long sleep within one slice. */
static void test_sleep_interrupted(void **state)
{
    pthread_t t;
    int64_t t0 = clock_mono_ms(), took;

    (void)state;
    raise_flag = 0;
    assert_int_equal(pthread_create(&t, NULL, raise_later, NULL), 0);
    assert_false(clock_sleep_until_flag(10000, NULL, &raise_flag));
    took = clock_mono_ms() - t0;
    pthread_join(t, NULL);
    assert_true(took >= 100);
    assert_true(took < 100 + CLOCK_SLEEP_SLICE_MS + 200);
}

static void on_alarm(int sig)
{
    (void)sig;
    raise_flag = 1;
}

/* A signal handler that raises the flag ends the sleep at once. */
static void test_sleep_signal(void **state)
{
    struct sigaction sa = {.sa_handler = on_alarm};
    int64_t t0 = clock_mono_ms(), took;

    (void)state;
    raise_flag = 0;
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGALRM, &sa, NULL), 0);
    ualarm(80 * 1000, 0);
    assert_false(clock_sleep_until_flag(10000, &raise_flag, NULL));
    took = clock_mono_ms() - t0;
    signal(SIGALRM, SIG_DFL);
    assert_true(took >= 70);
    assert_true(took < 80 + CLOCK_SLEEP_SLICE_MS + 200);
}

static void test_backoff_bounds(void **state)
{
    (void)state;
    assert_int_equal(clock_backoff_ms(50, 5000, 0), 50);
    assert_int_equal(clock_backoff_ms(50, 5000, 1), 100);
    assert_int_equal(clock_backoff_ms(50, 5000, 6), 3200);
    assert_int_equal(clock_backoff_ms(50, 5000, 7), 5000);
    assert_int_equal(clock_backoff_ms(50, 5000, 1000000), 5000);
    assert_int_equal(clock_backoff_ms(7000, 5000, 0), 5000);
    /* No overflow on a huge cap. */
    assert_int_equal(clock_backoff_ms(1, LONG_MAX, 200), LONG_MAX);
    for (int a = 0; a < 70; a++) {
        long ms = clock_backoff_ms(3, 1000000, a);
        assert_true(ms >= 3 && ms <= 1000000);
        assert_true(ms >= clock_backoff_ms(3, 1000000, a > 0 ? a - 1 : 0));
    }
}

static void test_jitter_bounds(void **state)
{
    (void)state;
    assert_int_equal(clock_jitter_ms(0, 12345), 0);
    assert_int_equal(clock_jitter_ms(-3, 12345), 0);
    assert_int_equal(clock_jitter_ms(1, 0), 0);
    assert_int_equal(clock_jitter_ms(100, 0), 50);
    assert_int_equal(clock_jitter_ms(100, 50), 100);
    assert_int_equal(clock_jitter_ms(100, 51), 50);
    for (unsigned long r = 0; r < 5000; r += 7) {
        long ms = clock_jitter_ms(1001, r * 2654435761UL);
        assert_true(ms >= 500 && ms <= 1001);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_utc),         cmocka_unit_test(test_parse_offsets),
        cmocka_unit_test(test_parse_rejects),     cmocka_unit_test(test_format_roundtrip),
        cmocka_unit_test(test_sleep_whole),       cmocka_unit_test(test_sleep_raised_before),
        cmocka_unit_test(test_sleep_interrupted), cmocka_unit_test(test_sleep_signal),
        cmocka_unit_test(test_backoff_bounds),    cmocka_unit_test(test_jitter_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
