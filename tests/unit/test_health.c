/* The health file (common/health.c): what a write leaves, and each verdict of the check. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/clock.h"
#include "common/health.h"

static char dir[] = "/tmp/og_health_XXXXXX";
static char path[256];

static int setup(void **state)
{
    (void)state;
    if (mkdtemp(dir) == NULL)
        return -1;
    snprintf(path, sizeof(path), "%s/health", dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    health_file_remove(path);
    rmdir(dir);
    return 0;
}

static void write_raw(const char *text)
{
    FILE *f = fopen(path, "w");

    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_write_and_check(void **state)
{
    struct og_error err = {0};
    char msg[256], tmp[300];
    long long now;

    (void)state;
    assert_int_equal(health_file_write(path, false, 5000, &err), OG_OK);
    now = (long long)clock_mono_ms();
    /* Fresh and not ready: live, not ready. */
    assert_int_equal(health_file_check(path, false, now, msg, sizeof(msg)), HEALTH_OK);
    assert_non_null(strstr(msg, "live: pid "));
    assert_int_equal(health_file_check(path, true, now, msg, sizeof(msg)), HEALTH_NOT_READY);
    assert_non_null(strstr(msg, "not ready"));
    /* Rewritten ready: both pass; no temporary file is left beside it. */
    assert_int_equal(health_file_write(path, true, 5000, &err), OG_OK);
    assert_int_equal(health_file_check(path, true, now, msg, sizeof(msg)), HEALTH_OK);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    assert_int_equal(access(tmp, F_OK), -1);
    /* Past its own bound the file is stale, whatever it says about readiness. */
    assert_int_equal(health_file_check(path, false, now + 5001 + 1000, msg, sizeof(msg)),
                     HEALTH_STALE);
    assert_non_null(strstr(msg, "not live: pid "));
    assert_non_null(strstr(msg, "bound 5.0 s"));
    assert_int_equal(health_file_check(path, false, now + 4000, msg, sizeof(msg)), HEALTH_OK);
    /* Written by a clock far ahead (another boot): not trusted. */
    assert_int_equal(health_file_check(path, false, now - 60000, msg, sizeof(msg)), HEALTH_BAD);

    health_file_remove(path);
    assert_int_equal(health_file_check(path, false, now, msg, sizeof(msg)), HEALTH_MISSING);
    assert_non_null(strstr(msg, "not live"));
}

static void test_bad_files(void **state)
{
    static const char *const bad[] = {
        "",
        "hello\n",
        "ordergate-health v1 pid=1 mono_ms=5 stale_ms=0 ready=1\n",
        "ordergate-health v1 pid=1 mono_ms=5 stale_ms=100 ready=2\n",
        "ordergate-health v2 pid=1 mono_ms=5 stale_ms=100 ready=1\n",
        "ordergate-health v1 pid=1 mono_ms=5\n",
    };
    char msg[256];

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        write_raw(bad[i]);
        if (health_file_check(path, false, 10, msg, sizeof(msg)) != HEALTH_BAD)
            fail_msg("accepted '%s'", bad[i]);
        assert_non_null(strstr(msg, "not live"));
    }
    write_raw("ordergate-health v1 pid=1 mono_ms=5 stale_ms=100 ready=1\n");
    assert_int_equal(health_file_check(path, true, 10, msg, sizeof(msg)), HEALTH_OK);
}

static void test_write_refused(void **state)
{
    struct og_error err = {0};
    char missing[300];

    (void)state;
    snprintf(missing, sizeof(missing), "%s/no/such/dir/health", dir);
    assert_int_equal(health_file_write(missing, true, 5000, &err), OG_ERR_IO);
    assert_non_null(strstr(err.msg, "no/such/dir"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_write_and_check),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_write_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
