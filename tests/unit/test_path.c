/* The directory of the running program. */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/path.h"

/* This test is built in the build tree's tests/ directory. */
static void test_exe_dir(void **state)
{
    char dir[PATH_MAX], self[PATH_MAX + 32];
    char *want = realpath(OG_BINARY_DIR "/tests", NULL);

    (void)state;
    assert_true(path_exe_dir(dir, sizeof(dir)));
    assert_non_null(want);
    assert_string_equal(dir, want);
    assert_true(dir[strlen(dir) - 1] != '/');
    snprintf(self, sizeof(self), "%s/unit_path", dir);
    assert_int_equal(access(self, X_OK), 0);
    free(want);
}

static void test_exe_dir_too_small(void **state)
{
    char dir[PATH_MAX], small[4] = "xyz";
    size_t len;

    (void)state;
    assert_true(path_exe_dir(dir, sizeof(dir)));
    len = strlen(dir);
    assert_false(path_exe_dir(small, sizeof(small)));
    assert_string_equal(small, "");
    /* Exactly large enough: the directory and its NUL. */
    {
        char *exact = malloc(len + 1);
        assert_non_null(exact);
        assert_true(path_exe_dir(exact, len + 1));
        assert_string_equal(exact, dir);
        assert_false(path_exe_dir(exact, len));
        free(exact);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exe_dir),
        cmocka_unit_test(test_exe_dir_too_small),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
