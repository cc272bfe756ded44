/* Child processes for the tests: the programs under test started with
 * fork/exec, their output captured, their exit awaited with a bound. */
#ifndef OG_TESTS_CHILD_H
#define OG_TESTS_CHILD_H

#include <sys/types.h>

struct child_opts {
    int out_fd;               /* the child's stdout; 0 or -1 keeps the test's */
    int err_fd;               /* the child's stderr; 0 or -1 keeps the test's */
    const char *const *unset; /* environment variables to drop, NULL-terminated; may be NULL */
    const char *dir;          /* working directory of the child; NULL keeps the test's */
};

/* Starts argv[0] (a path) with argv (NULL-terminated). The child is killed
 * when the test process dies, even by a timeout, so no program outlives its
 * test. It exits 127 when the program cannot be run, 126 when dir cannot be
 * entered. Fails the test when fork fails. */
pid_t child_start(const char *const *argv, const struct child_opts *opts);
/* Waits at most timeout_ms (0: only looks) for the child to exit. Returns
 * its exit status, 128 + n when killed by signal n, or -1 while it still
 * runs (it is left running). wstatus, when not NULL, receives the raw
 * waitpid status of a child that exited. */
int child_wait(pid_t pid, long timeout_ms, int *wstatus);
/* child_wait, but a child still running at the bound is killed and the test
 * fails, naming what. */
int child_wait_or_fail(pid_t pid, long timeout_ms, const char *what);
/* A waitpid status as an exit status: 128 + n when killed by signal n. */
int child_status(int wstatus);

#endif
