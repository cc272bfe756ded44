/* The child-process helper (common/child.h) with /bin/sh as the child: exit statuses, the bound
 * of every wait, a stop that escalates to SIGKILL, output into files and pipes, the
 * environment and working directory it is given, and its own process group. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/child.h"
#include "common/clock.h"
#include "support/testutil.h"

/* Starts `/bin/sh -c script`; fails the test when it cannot. */
static pid_t sh(const char *script, const struct child_opts *opts)
{
    const char *argv[] = {"/bin/sh", "-c", script, NULL};
    struct og_error err = {0};
    pid_t pid = child_spawn(argv, opts, &err);

    if (pid < 0)
        fail_msg("child_spawn: %s", err.msg);
    return pid;
}

/* A file of this test's own, removed by the caller. */
static void path_for(char *buf, size_t size, const char *what)
{
    snprintf(buf, size, "%s/tests/child.%s.%d", OG_BINARY_DIR, what, (int)getpid());
}

static char *slurp_and_remove(const char *path)
{
    char *text = testutil_slurp(path);

    assert_non_null(text);
    unlink(path);
    return text;
}

static void test_exit_status(void **state)
{
    int ws = 0;
    pid_t pid = sh("exit 3", NULL);

    (void)state;
    assert_int_equal(child_wait(pid, 10000, &ws), 3);
    assert_true(WIFEXITED(ws));
    assert_int_equal(WEXITSTATUS(ws), 3);
    /* Reaped: nothing left to wait for. */
    assert_int_equal(child_wait(pid, 0, NULL), CHILD_UNKNOWN);
}

static void test_signal_status(void **state)
{
    pid_t pid = sh("kill -TERM $$; sleep 5", NULL);

    (void)state;
    assert_int_equal(child_wait(pid, 10000, NULL), 128 + SIGTERM);
}

static void test_wait_bound(void **state)
{
    pid_t pid = sh("exec sleep 30", NULL);
    int64_t t0 = clock_mono_ms();

    (void)state;
    assert_int_equal(child_wait(pid, 0, NULL), CHILD_RUNNING);
    assert_int_equal(child_wait(pid, 200, NULL), CHILD_RUNNING);
    /* The bound holds on both sides: not cut short, not overrun by much. */
    assert_true(clock_mono_ms() - t0 >= 200);
    assert_true(clock_mono_ms() - t0 < 5000);
    assert_int_equal(child_stop(pid, SIGTERM, 10000, NULL), 128 + SIGTERM);
}

/* A child that ignores SIGTERM is killed once the bound passes. */
static void test_stop_escalates(void **state)
{
    char ready[512];
    bool killed = false;
    pid_t pid;
    int64_t t0;
    char script[700];

    (void)state;
    path_for(ready, sizeof(ready), "ready");
    unlink(ready);
    snprintf(script, sizeof(script), "trap '' TERM; : > '%s'; while :; do sleep 1; done", ready);
    pid = sh(script, NULL);
    /* The trap must be in place before the signal, or the shell dies of it. */
    for (int i = 0; i < 500 && access(ready, F_OK) != 0; i++)
        testutil_sleep_ms(10);
    assert_int_equal(access(ready, F_OK), 0);
    t0 = clock_mono_ms();
    assert_int_equal(child_stop(pid, SIGTERM, 300, &killed), 128 + SIGKILL);
    assert_true(killed);
    assert_true(clock_mono_ms() - t0 >= 300);
    unlink(ready);
}

/* A quick exit on SIGTERM is not reported as a kill. */
static void test_stop_polite(void **state)
{
    bool killed = true;
    pid_t pid = sh("exec sleep 30", NULL);

    (void)state;
    assert_int_equal(child_stop(pid, SIGTERM, 10000, &killed), 128 + SIGTERM);
    assert_false(killed);
}

/* Whether pid has ended: gone, or a zombie its new parent has not reaped yet. */
static bool ended(pid_t pid)
{
    char path[64], *text, *close_paren;
    bool gone;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    text = testutil_slurp(path);
    if (text == NULL)
        return true;
    close_paren = strrchr(text, ')');
    gone = close_paren == NULL || close_paren[1] == '\0' || close_paren[2] == 'Z' ||
           close_paren[2] == 'X';
    free(text);
    return gone;
}

/* The signal reaches the whole group: the shell's own child too. */
static void test_group(void **state)
{
    char pidfile[512], script[700], *text;
    pid_t pid, grandchild;

    (void)state;
    path_for(pidfile, sizeof(pidfile), "grandchild");
    unlink(pidfile);
    snprintf(script, sizeof(script), "sleep 30 & echo $! > '%s'; wait", pidfile);
    pid = sh(script, NULL);
    for (int i = 0; i < 500 && access(pidfile, F_OK) != 0; i++)
        testutil_sleep_ms(10);
    testutil_sleep_ms(50); /* the line written whole */
    text = slurp_and_remove(pidfile);
    grandchild = (pid_t)atoi(text);
    free(text);
    assert_true(grandchild > 0);
    assert_int_equal(getpgid(pid), pid);
    assert_int_equal(getpgid(grandchild), pid);
    assert_int_not_equal(getpgid(0), pid);
    assert_int_equal(child_stop(pid, SIGTERM, 10000, NULL), 128 + SIGTERM);
    /* The grandchild got SIGTERM too (it is init's to reap now). */
    for (int i = 0; i < 500 && !ended(grandchild); i++)
        testutil_sleep_ms(10);
    assert_true(ended(grandchild));
}

static void test_output_files(void **state)
{
    char out[512], errp[512], *text;
    pid_t pid;

    (void)state;
    path_for(out, sizeof(out), "out");
    path_for(errp, sizeof(errp), "err");
    pid =
        sh("echo to-out; echo to-err >&2", &(struct child_opts){.out_path = out, .err_path = errp});
    assert_int_equal(child_wait(pid, 10000, NULL), 0);
    text = slurp_and_remove(out);
    assert_string_equal(text, "to-out\n");
    free(text);
    text = slurp_and_remove(errp);
    assert_string_equal(text, "to-err\n");
    free(text);

    /* One path for both: one file, in the order written. */
    pid = sh("echo one; echo two >&2; echo three",
             &(struct child_opts){.out_path = out, .err_path = out});
    assert_int_equal(child_wait(pid, 10000, NULL), 0);
    text = slurp_and_remove(out);
    assert_string_equal(text, "one\ntwo\nthree\n");
    free(text);
}

static void test_output_fd_and_null(void **state)
{
    char out[512], *text;
    int fd;
    pid_t pid;

    (void)state;
    path_for(out, sizeof(out), "fd");
    fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd > 0);
    pid = sh("echo kept; echo dropped >&2",
             &(struct child_opts){.out_fd = fd, .err_fd = CHILD_FD_NULL});
    close(fd);
    assert_int_equal(child_wait(pid, 10000, NULL), 0);
    text = slurp_and_remove(out);
    assert_string_equal(text, "kept\n");
    free(text);
}

static void test_output_pipe(void **state)
{
    char buf[256];
    size_t used = 0;
    ssize_t n;
    int fd = -1;
    pid_t pid;

    (void)state;
    pid = sh(
        "echo first; echo second >&2",
        &(struct child_opts){.out_fd = CHILD_FD_PIPE, .err_fd = CHILD_FD_STDOUT, .pipe_fd = &fd});
    assert_true(fd >= 0);
    /* End of file comes when the child exits: the parent holds no write end. */
    while ((n = read(fd, buf + used, sizeof(buf) - 1 - used)) > 0)
        used += (size_t)n;
    close(fd);
    buf[used] = '\0';
    assert_string_equal(buf, "first\nsecond\n");
    assert_int_equal(child_wait(pid, 10000, NULL), 0);
}

static void test_env_and_dir(void **state)
{
    char out[512], *text;
    static const char *const env[] = {"OG_CHILD_ADDED=added", "OG_CHILD_REPLACED=new", NULL};
    static const char *const unset[] = {"OG_CHILD_GONE", NULL};
    pid_t pid;

    (void)state;
    setenv("OG_CHILD_REPLACED", "old", 1);
    setenv("OG_CHILD_GONE", "here", 1);
    path_for(out, sizeof(out), "env");
    pid = sh("echo \"$OG_CHILD_ADDED $OG_CHILD_REPLACED ${OG_CHILD_GONE-unset} $(pwd)\"",
             &(struct child_opts){.env = env, .unset = unset, .dir = "/", .out_path = out});
    assert_int_equal(child_wait(pid, 10000, NULL), 0);
    text = slurp_and_remove(out);
    assert_string_equal(text, "added new unset /\n");
    free(text);
    /* The caller's environment is its own still. */
    assert_string_equal(getenv("OG_CHILD_REPLACED"), "old");
    assert_string_equal(getenv("OG_CHILD_GONE"), "here");
    assert_null(getenv("OG_CHILD_ADDED"));
}

static void test_cannot_run(void **state)
{
    const char *missing[] = {"/nonexistent/program", NULL};
    const char *nodir[] = {"/bin/true", NULL};
    const char *bare[] = {"true", NULL};
    struct og_error err = {0};
    char out[512], errp[512], *text;

    (void)state;
    path_for(errp, sizeof(errp), "cannot");
    assert_int_equal(child_run(missing, &(struct child_opts){.err_path = errp}, 10000, &err), 127);
    text = slurp_and_remove(errp);
    assert_non_null(strstr(text, "cannot run /nonexistent/program"));
    free(text);
    assert_int_equal(child_run(nodir, &(struct child_opts){.dir = "/nonexistent"}, 10000, &err),
                     126);
    /* No '/': searched in PATH. */
    assert_int_equal(child_run(bare, NULL, 10000, &err), 0);
    /* An output file that cannot be opened: an error here, no child. */
    snprintf(out, sizeof(out), "/nonexistent/dir/out");
    assert_int_equal(child_spawn(nodir, &(struct child_opts){.out_path = out}, &err), -1);
    assert_int_equal(err.status, OG_ERR_IO);
    assert_non_null(strstr(err.msg, "/nonexistent/dir/out"));
}

/* child_run kills what outlives its bound and says so. */
static void test_run_bound(void **state)
{
    const char *argv[] = {"/bin/sleep", "30", NULL};
    struct og_error err = {0};
    int64_t t0 = clock_mono_ms();

    (void)state;
    assert_int_equal(child_run(argv, NULL, 200, &err), -1);
    assert_true(clock_mono_ms() - t0 < 5000);
    assert_non_null(strstr(err.msg, "did not exit within 200 ms"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exit_status),  cmocka_unit_test(test_signal_status),
        cmocka_unit_test(test_wait_bound),   cmocka_unit_test(test_stop_escalates),
        cmocka_unit_test(test_stop_polite),  cmocka_unit_test(test_group),
        cmocka_unit_test(test_output_files), cmocka_unit_test(test_output_fd_and_null),
        cmocka_unit_test(test_output_pipe),  cmocka_unit_test(test_env_and_dir),
        cmocka_unit_test(test_cannot_run),   cmocka_unit_test(test_run_bound),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
