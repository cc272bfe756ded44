#include "support/child.h"

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/testutil.h"

#define CHILD_POLL_MS 20

pid_t child_start(const char *const *argv, const struct child_opts *opts)
{
    pid_t parent = getpid();
    pid_t pid;

    /* Nothing buffered may be written twice, by the test and by the child. */
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    assert_true(pid >= 0);
    if (pid != 0)
        return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(127); /* the test died before the line above */
    if (opts != NULL) {
        /* 0 is what an omitted member holds: never the test's stdin. */
        if (opts->out_fd > 0)
            dup2(opts->out_fd, STDOUT_FILENO);
        if (opts->err_fd > 0)
            dup2(opts->err_fd, STDERR_FILENO);
        for (const char *const *u = opts->unset; u != NULL && *u != NULL; u++)
            unsetenv(*u);
        if (opts->dir != NULL && chdir(opts->dir) != 0)
            _exit(126);
    }
    execv(argv[0], (char *const *)argv);
    _exit(127);
}

int child_status(int wstatus)
{
    if (WIFEXITED(wstatus))
        return WEXITSTATUS(wstatus);
    if (WIFSIGNALED(wstatus))
        return 128 + WTERMSIG(wstatus);
    return -1;
}

int child_wait(pid_t pid, long timeout_ms, int *wstatus)
{
    int ws;

    for (long waited = 0;; waited += CHILD_POLL_MS) {
        if (waitpid(pid, &ws, WNOHANG) == pid) {
            if (wstatus != NULL)
                *wstatus = ws;
            return child_status(ws);
        }
        if (waited >= timeout_ms)
            return -1;
        testutil_sleep_ms(CHILD_POLL_MS);
    }
}

int child_wait_or_fail(pid_t pid, long timeout_ms, const char *what)
{
    int st = child_wait(pid, timeout_ms, NULL);

    if (st < 0) {
        kill(pid, SIGKILL);
        child_wait(pid, 10000, NULL);
        fail_msg("%s (pid %d) did not exit within %ld ms", what, (int)pid, timeout_ms);
    }
    return st;
}
