/* Child processes (common/child.h). Owns fork, exec and waitpid for the whole tree; installs
 * no signal handler. Between fork and exec the child only calls async-signal-safe functions
 * (the caller may have threads): its environment is built before the fork. */
#define _GNU_SOURCE /* execvpe, pipe2 */
#include "common/child.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* Where the kernel has no pidfd: how often child_wait looks, often enough that a quick child
 * costs a test no time. */
#define CHILD_POLL_MIN_MS 1
#define CHILD_POLL_MAX_MS 20

/* Whether variable entry "NAME=value" (or a bare "NAME") is named name_of's name. */
static bool child_env_same(const char *entry, const char *name_of)
{
    size_t n = strcspn(name_of, "=");

    return strncmp(entry, name_of, n) == 0 && (entry[n] == '=' || entry[n] == '\0');
}

static bool child_env_listed(const char *entry, const char *const *list)
{
    for (const char *const *l = list; l != NULL && *l != NULL; l++)
        if (child_env_same(entry, *l))
            return true;
    return false;
}

/* The child's environment: the caller's without opts->unset and the names opts->env sets, then
 * opts->env. The strings stay the caller's; only the array is new (free it). */
static char **child_env_build(const struct child_opts *opts)
{
    size_t n = 0, k = 0;
    char **envp;

    for (char **e = environ; e != NULL && *e != NULL; e++)
        n++;
    for (const char *const *a = opts->env; a != NULL && *a != NULL; a++)
        n++;
    envp = calloc(n + 1, sizeof(*envp));
    if (envp == NULL)
        return NULL;
    for (char **e = environ; e != NULL && *e != NULL; e++)
        if (!child_env_listed(*e, opts->unset) && !child_env_listed(*e, opts->env))
            envp[k++] = *e;
    for (const char *const *a = opts->env; a != NULL && *a != NULL; a++)
        envp[k++] = (char *)*a;
    envp[k] = NULL;
    return envp;
}

static void child_say(const char *s)
{
    ssize_t written = write(STDERR_FILENO, s, strlen(s));

    (void)written; /* nothing to do about a stderr that cannot be written */
}

/* Between fork and exec: "<what><name>: <reason>" on the child's stderr, then exit code. */
static void __attribute__((noreturn)) child_fail(const char *what, const char *name, int code)
{
    const char *reason = strerror(errno);

    child_say(what);
    child_say(name);
    child_say(": ");
    child_say(reason);
    child_say("\n");
    _exit(code);
}

/* Where one output stream of the child goes: path, opened here close-on-exec (dup2 clears that
 * on the child's copy) and put in *own for the caller to close, or a descriptor by CHILD_FD_*;
 * -1 keeps the caller's. -2 after err when path cannot be opened. */
static int child_target(const char *path, int fd, int *own, struct og_error *err)
{
    if (path == NULL && fd == CHILD_FD_NULL)
        path = "/dev/null";
    if (path == NULL)
        return fd > 0 ? fd : -1;
    *own = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (*own < 0) {
        og_error_set(err, OG_ERR_IO, false, "%s: %s", path, strerror(errno));
        return -2;
    }
    return *own;
}

/* The child's side: never returns. fds: what goes on stdout and stderr (-1 keeps it). */
static void __attribute__((noreturn))
child_exec(const char *const *argv, const struct child_opts *opts, char **envp, pid_t parent,
           int out, int err)
{
    setpgid(0, 0);
    if (opts->die_with_parent) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127); /* the parent died before the line above */
    }
    if (out >= 0 && dup2(out, STDOUT_FILENO) < 0)
        child_fail("cannot redirect the stdout of ", argv[0], 127);
    if (err >= 0 && dup2(err, STDERR_FILENO) < 0)
        child_fail("cannot redirect the stderr of ", argv[0], 127);
    if (opts->dir != NULL && chdir(opts->dir) != 0)
        child_fail("cannot enter the working directory ", opts->dir, 126);
    if (strchr(argv[0], '/') != NULL)
        execve(argv[0], (char *const *)argv, envp);
    else
        execvpe(argv[0], (char *const *)argv, envp);
    child_fail("cannot run ", argv[0], 127);
}

pid_t child_spawn(const char *const *argv, const struct child_opts *opts, struct og_error *err)
{
    static const struct child_opts none = {0};
    int out = -1, errfd = -1, pipefd[2] = {-1, -1};
    int out_own = -1, err_own = -1; /* what this function opened and closes */
    char **envp = NULL;
    pid_t parent = getpid(), pid = -1;

    if (argv == NULL || argv[0] == NULL) {
        og_error_set(err, OG_ERR_ARG, false, "child_spawn: no program");
        return -1;
    }
    if (opts == NULL)
        opts = &none;
    if (opts->out_path == NULL && opts->out_fd == CHILD_FD_PIPE) {
        if (opts->pipe_fd == NULL) {
            og_error_set(err, OG_ERR_ARG, false, "%s: a pipe for stdout but nowhere to put it",
                         argv[0]);
            goto out;
        }
        if (pipe2(pipefd, O_CLOEXEC) != 0) {
            og_error_set(err, OG_ERR_IO, false, "%s: pipe: %s", argv[0], strerror(errno));
            goto out;
        }
        out = pipefd[1];
    } else if ((out = child_target(opts->out_path, opts->out_fd, &out_own, err)) == -2) {
        goto out;
    }
    if (opts->err_path != NULL
            ? opts->out_path != NULL && strcmp(opts->err_path, opts->out_path) == 0
            : opts->err_fd == CHILD_FD_STDOUT)
        errfd = out;
    else if ((errfd = child_target(opts->err_path, opts->err_fd, &err_own, err)) == -2)
        goto out;
    envp = child_env_build(opts);
    if (envp == NULL) {
        og_error_set(err, OG_ERR_NOMEM, false, "%s: out of memory", argv[0]);
        goto out;
    }
    /* Nothing buffered may be written twice, by the parent and by the child. */
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid < 0) {
        og_error_set(err, OG_ERR_IO, true, "%s: fork: %s", argv[0], strerror(errno));
        goto out;
    }
    if (pid == 0)
        child_exec(argv, opts, envp, parent, out, errfd);
    /* Also here, so the group exists before anyone signals it (whichever side runs first). */
    setpgid(pid, pid);
    if (pipefd[0] >= 0) {
        *opts->pipe_fd = pipefd[0];
        pipefd[0] = -1;
    }
out:
    free(envp);
    if (out_own >= 0)
        close(out_own);
    if (err_own >= 0)
        close(err_own);
    if (pipefd[0] >= 0)
        close(pipefd[0]);
    if (pipefd[1] >= 0)
        close(pipefd[1]);
    return pid;
}

int child_status(int wstatus)
{
    if (WIFEXITED(wstatus))
        return WEXITSTATUS(wstatus);
    if (WIFSIGNALED(wstatus))
        return 128 + WTERMSIG(wstatus);
    return -1;
}

static void child_sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL); /* a signal cuts it short: the caller looks again */
}

static long child_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits up to ms for pid to end without reaping it: on a pidfd (woken the moment it ends), or
 * by sleeping a slice where the kernel has none. Returns early on a signal. */
static void child_nap(pid_t pid, long ms, long *slice_ms)
{
#ifdef SYS_pidfd_open
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);

    if (fd >= 0) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        poll(&p, 1, ms > INT_MAX ? INT_MAX : (int)ms);
        close(fd);
        return;
    }
#endif
    child_sleep_ms(*slice_ms < ms ? *slice_ms : ms);
    if (*slice_ms < CHILD_POLL_MAX_MS)
        *slice_ms *= 2;
}

int child_wait(pid_t pid, long timeout_ms, int *wstatus)
{
    long deadline = child_now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    long slice_ms = CHILD_POLL_MIN_MS;
    int ws;

    if (pid <= 0)
        return CHILD_UNKNOWN;
    for (;;) {
        pid_t r = waitpid(pid, &ws, WNOHANG);
        long left;
        if (r == pid) {
            if (wstatus != NULL)
                *wstatus = ws;
            return child_status(ws);
        }
        if (r < 0 && errno != EINTR)
            return CHILD_UNKNOWN;
        left = deadline - child_now_ms();
        if (left <= 0)
            return CHILD_RUNNING;
        child_nap(pid, left, &slice_ms);
    }
}

int child_signal(pid_t pid, int sig)
{
    if (pid <= 0) {
        errno = ESRCH;
        return -1;
    }
    if (kill(-pid, sig) != 0)
        return -1;
    if (sig != SIGKILL && sig != SIGSTOP && sig != SIGCONT)
        kill(-pid, SIGCONT);
    return 0;
}

int child_stop(pid_t pid, int sig, long timeout_ms, bool *killed)
{
    int st;

    if (killed != NULL)
        *killed = false;
    /* A group already gone may still hold a zombie to reap: wait regardless. */
    child_signal(pid, sig);
    st = child_wait(pid, timeout_ms, NULL);
    if (st != CHILD_RUNNING)
        return st;
    if (killed != NULL)
        *killed = true;
    child_signal(pid, SIGKILL);
    return child_wait(pid, CHILD_KILL_BOUND_MS, NULL);
}

int child_run(const char *const *argv, const struct child_opts *opts, long timeout_ms,
              struct og_error *err)
{
    pid_t pid = child_spawn(argv, opts, err);
    int st;

    if (pid < 0)
        return -1;
    st = child_wait(pid, timeout_ms, NULL);
    if (st == CHILD_RUNNING) {
        child_stop(pid, SIGKILL, 0, NULL);
        og_error_set(err, OG_ERR_INTERNAL, false, "%s did not exit within %ld ms: killed", argv[0],
                     timeout_ms);
        return -1;
    }
    if (st < 0)
        og_error_set(err, OG_ERR_INTERNAL, false, "%s: lost track of its process", argv[0]);
    return st < 0 ? -1 : st;
}
