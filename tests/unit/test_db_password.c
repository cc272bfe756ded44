/* Password files: what is read, what is refused, and that no copy of the
 * password is left behind in freed memory. */
#include <malloc.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/db.h"

#define MARKER "pw-marker-7f3a9c"

/* The build links this test with --wrap=free: every free() in the test and in
 * libogcommon comes here first. A freed block that still starts with the
 * marker is a password copy that nobody wiped. */
void __real_free(void *p);
void __wrap_free(void *p);
static int unwiped_frees;

void __wrap_free(void *p)
{
    if (p != NULL && malloc_usable_size(p) >= sizeof(MARKER) - 1 &&
        memcmp(p, MARKER, sizeof(MARKER) - 1) == 0)
        unwiped_frees++;
    __real_free(p);
}

static char *write_tmp(const char *text)
{
    static char path[64];
    FILE *f;

    snprintf(path, sizeof(path), "/tmp/og_pw_test_%d", (int)getpid());
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static void test_read_strips_newlines(void **state)
{
    struct og_error err = {0};
    char *pw = NULL;
    char *path = write_tmp("s3cret\r\n\n");

    (void)state;
    assert_int_equal(db_password_read(path, &pw, &err), OG_OK);
    assert_string_equal(pw, "s3cret");
    db_password_free(pw);
    unlink(path);
}

static void test_no_file_configured(void **state)
{
    struct og_error err = {0};
    char *pw = (char *)"x";

    (void)state;
    assert_int_equal(db_password_read(NULL, &pw, &err), OG_OK);
    assert_null(pw);
    pw = (char *)"x";
    assert_int_equal(db_password_read("", &pw, &err), OG_OK);
    assert_null(pw);
    db_password_free(NULL);
    db_password_wipe(NULL);
}

static void test_missing_file(void **state)
{
    struct og_error err = {0};
    char *pw = (char *)"x";
    struct db *db = (struct db *)&err;

    (void)state;
    assert_int_equal(db_password_read("/nonexistent/pw", &pw, &err), OG_ERR_CONFIG);
    assert_null(pw);
    assert_non_null(strstr(err.msg, "/nonexistent/pw"));
    assert_int_equal(db_new_passfile("", "/nonexistent/pw", "t", NULL, NULL, &db, &err),
                     OG_ERR_CONFIG);
    assert_null(db);
}

/* A password of DB_PASSWORD_MAX bytes is read whole (a trailing newline or two dropped); a
 * longer one is refused naming the file, never cut (a cut one only failed the login). */
static void test_long_file(void **state)
{
    struct og_error err = {0};
    char *pw = NULL;
    char *text = malloc(DB_PASSWORD_MAX + 100);
    char *path;

    (void)state;
    assert_non_null(text);
    memset(text, 'a', DB_PASSWORD_MAX);
    strcpy(text + DB_PASSWORD_MAX, "\r\n\n");
    path = write_tmp(text);
    assert_int_equal(db_password_read(path, &pw, &err), OG_OK);
    assert_int_equal(strlen(pw), DB_PASSWORD_MAX);
    db_password_free(pw);
    pw = NULL;
    unlink(path);
    for (int extra = 1; extra <= 99; extra += 98) {
        memset(text, 'a', DB_PASSWORD_MAX + extra);
        text[DB_PASSWORD_MAX + extra] = '\0';
        path = write_tmp(text);
        assert_int_equal(db_password_read(path, &pw, &err), OG_ERR_CONFIG);
        assert_null(pw);
        assert_non_null(strstr(err.msg, path));
        assert_non_null(strstr(err.msg, "longer than 1023 bytes"));
        unlink(path);
    }
    /* A newline inside does not hide what follows it. */
    memset(text, 'a', DB_PASSWORD_MAX);
    strcpy(text + DB_PASSWORD_MAX, "\n\n\nb");
    path = write_tmp(text);
    assert_int_equal(db_password_read(path, &pw, &err), OG_ERR_CONFIG);
    assert_null(pw);
    unlink(path);
    free(text);
}

static void test_wipe(void **state)
{
    char pw[] = "s3cret";

    (void)state;
    db_password_wipe(pw);
    for (size_t i = 0; i < sizeof(pw); i++)
        assert_int_equal(pw[i], 0);
}

/* Reading, connecting (a handle: db_new does not dial) and freeing leave no
 * freed copy of the password. */
static void test_passfile_leaves_no_copy(void **state)
{
    struct og_error err = {0};
    struct db *db = NULL;
    char *path = write_tmp(MARKER "\n");
    char *pw = NULL;

    (void)state;
    unwiped_frees = 0;
    assert_int_equal(db_new_passfile("dbname=none", path, "t", NULL, NULL, &db, &err), OG_OK);
    assert_non_null(db);
    db_free(db);
    assert_int_equal(db_password_read(path, &pw, &err), OG_OK);
    db_password_free(pw);
    assert_int_equal(unwiped_frees, 0);
    /* The check itself works: a plain free of a copy is seen. */
    pw = strdup(MARKER);
    assert_non_null(pw);
    free(pw);
    assert_int_equal(unwiped_frees, 1);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_strips_newlines),
        cmocka_unit_test(test_no_file_configured),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_long_file),
        cmocka_unit_test(test_wipe),
        cmocka_unit_test(test_passfile_leaves_no_copy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
