/* Child processes: a program started with fork/exec, its output sent where the caller says, its
 * end awaited with a bound, its stop asked for and then forced. The one place that forks for
 * the tests, the benchmark drivers and ordergatectl.
 *
 * Contract:
 * - A child runs in a process group of its own (its pid is the group's id), so a Ctrl-C at the
 *   terminal reaches only the parent, whose handler sets a flag and whose way out stops its
 *   children (child_stop); child_signal and child_stop signal the whole group.
 * - Every wait has a bound: child_wait returns CHILD_RUNNING at its bound and leaves the child
 *   running; child_stop and child_run kill what outlives their bound.
 * - Nothing here installs a signal handler or touches the caller's environment, working
 *   directory or file descriptors (the files and pipes it opens are close-on-exec, so a child
 *   started later does not inherit them).
 * - A child that cannot be run exits 127 (126 when opts->dir cannot be entered), after one line
 *   on its stderr saying why. */
#ifndef OG_COMMON_CHILD_H
#define OG_COMMON_CHILD_H

#include <stdbool.h>
#include <sys/types.h>

#include "common/error.h"

/* child_wait: still running at the bound. */
#define CHILD_RUNNING (-1)
/* child_wait: pid is not a child of this process still to be reaped. */
#define CHILD_UNKNOWN (-2)

/* Where a child's stdout or stderr goes, when no path is given. 0 (what an omitted member of a
 * designated initializer holds) and -1 keep the caller's; a descriptor > 0 is duplicated onto
 * it (the caller keeps and closes its own). */
enum {
    CHILD_FD_KEEP = 0,
    CHILD_FD_NULL = -2,   /* /dev/null */
    CHILD_FD_PIPE = -3,   /* a pipe whose read end the caller gets in *pipe_fd (stdout only) */
    CHILD_FD_STDOUT = -4, /* stderr only: wherever stdout goes (a file, a pipe) */
};

struct child_opts {
    const char *const *env;   /* "NAME=value" set in the child, replacing a same-named variable;
                                 NULL-terminated; may be NULL */
    const char *const *unset; /* names removed from the child's environment; NULL-terminated; may
                                 be NULL */
    const char *dir;          /* the child's working directory; NULL keeps the caller's */
    const char *out_path;     /* stdout into this file, created or truncated (0644); NULL: out_fd */
    const char *err_path;     /* stderr likewise; NULL: err_fd. The same path as out_path opens
                                 the file once: both streams in one file, in the order written */
    int out_fd;               /* see CHILD_FD_* */
    int err_fd;               /* see CHILD_FD_* */
    int *pipe_fd;             /* with out_fd CHILD_FD_PIPE: receives the pipe's read end
                                 (close-on-exec); the caller reads it and closes it */
    bool die_with_parent;     /* SIGKILL when the thread that started it ends (a test's program
                                 must not outlive the test, even one killed by its timeout) */
};

/* Starts argv[0] with argv (NULL-terminated): a path when it holds a '/', else searched in PATH.
 * opts may be NULL (everything kept). Returns the child's pid, or -1 with err set (OG_ERR_IO:
 * an output file or pipe cannot be opened, fork fails; OG_ERR_ARG: no argv[0]). Output
 * buffered in the caller's stdio is flushed first, so it is not written twice. */
pid_t child_spawn(const char *const *argv, const struct child_opts *opts, struct og_error *err);

/* Waits at most timeout_ms (0: only looks) for the child to end and reaps it. Returns its exit
 * status (128 + n when killed by signal n), CHILD_RUNNING when it still runs at the bound (it is
 * left running), CHILD_UNKNOWN when pid is no child of ours to reap. wstatus, when not NULL,
 * receives the raw waitpid status of a child that ended. */
int child_wait(pid_t pid, long timeout_ms, int *wstatus);

/* Sends sig to the child's process group (SIGCONT after it, so a stopped child sees it too).
 * Returns 0, or -1 (errno) when there is no such group. */
int child_signal(pid_t pid, int sig);

/* Asks the child to stop: sig (usually SIGTERM) to its group, waits timeout_ms, then SIGKILL
 * to the group and waits CHILD_KILL_BOUND_MS more. Returns the exit status as child_wait (128 +
 * SIGKILL when it had to be killed), CHILD_RUNNING when even SIGKILL did not end it within the
 * bound, CHILD_UNKNOWN as child_wait. *killed, when not NULL, says whether SIGKILL was needed. */
int child_stop(pid_t pid, int sig, long timeout_ms, bool *killed);
#define CHILD_KILL_BOUND_MS 10000L

/* child_spawn, then child_wait up to timeout_ms; a child still running then is stopped
 * (child_stop with SIGKILL). Returns the exit status, or -1 with err set when it could not be
 * started or outlived its bound (OG_ERR_INTERNAL, naming argv[0] and the bound). */
int child_run(const char *const *argv, const struct child_opts *opts, long timeout_ms,
              struct og_error *err);

/* A raw waitpid status as an exit status: 128 + n when killed by signal n; -1 otherwise. */
int child_status(int wstatus);

#endif
