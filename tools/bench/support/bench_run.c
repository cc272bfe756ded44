#include "tools/bench/support/bench_run.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/child.h"
#include "common/clock.h"

volatile sig_atomic_t bench_stop;

static const char *bench_prog = "bench";
static void (*bench_on_die)(void);

void bench_init(const char *prog, void (*on_die)(void))
{
    bench_prog = prog;
    bench_on_die = on_die;
}

void bench_die(const char *fmt, ...)
{
    va_list ap;

    fflush(stdout);
    fprintf(stderr, "%s: ", bench_prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    if (bench_on_die != NULL)
        bench_on_die();
    exit(1);
}

void bench_warn(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "%s: ", bench_prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
}

void bench_progress(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "  .. ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
}

static void bench_on_signal(int sig)
{
    (void)sig;
    bench_stop = 1;
}

void bench_signals_install(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = bench_on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

void bench_check_stop(void)
{
    if (bench_stop)
        bench_die("interrupted");
}

void bench_sleep_ms(long ms)
{
    clock_sleep_until_flag(ms, &bench_stop, NULL);
}

double bench_mono_s(void)
{
    return (double)clock_mono_us() / 1e6;
}

char *bench_slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf = NULL;
    size_t used = 0, cap = 0;

    if (f == NULL)
        return NULL;
    for (;;) {
        if (used + 4096 + 1 > cap) {
            char *grown = realloc(buf, cap = cap ? cap * 2 : 65536);
            if (grown == NULL)
                break;
            buf = grown;
        }
        size_t n = fread(buf + used, 1, cap - used - 1, f);
        used += n;
        if (n == 0)
            break;
    }
    fclose(f);
    if (buf != NULL)
        buf[used] = '\0';
    return buf;
}

/* Starts argv (PATH searched) with stdout into a pipe, stderr too or to /dev/null; -1 when it
 * cannot. */
static pid_t bench_spawn_piped(char *const argv[], bool with_stderr, int *read_fd)
{
    struct og_error err = {0};
    pid_t pid =
        child_spawn((const char *const *)argv,
                    &(struct child_opts){.out_fd = CHILD_FD_PIPE,
                                         .err_fd = with_stderr ? CHILD_FD_STDOUT : CHILD_FD_NULL,
                                         .pipe_fd = read_fd},
                    &err);

    if (pid < 0)
        bench_warn("%s", err.msg);
    return pid;
}

/* Reads fd to its end or until timeout_s or a stop request (bench_stop), keeping in out (size >
 * 0) the tail, or with head the beginning; then reaps pid, stopping it if it still runs.
 * Returns its exit status, -1 when it was stopped or killed by a signal. */
static int bench_collect(pid_t pid, int fd, char *out, size_t size, bool head, int timeout_s)
{
    double deadline = bench_mono_s() + timeout_s;
    size_t used = 0;
    int st, ws = 0;

    out[0] = '\0';
    for (;;) {
        char buf[4096];
        struct pollfd p = {.fd = fd, .events = POLLIN};
        ssize_t r;
        if (bench_stop || bench_mono_s() > deadline)
            break;
        if (poll(&p, 1, 200) <= 0)
            continue;
        r = read(fd, buf, sizeof(buf));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        if (head) {
            size_t fit = (size_t)r < size - 1 - used ? (size_t)r : size - 1 - used;
            memcpy(out + used, buf, fit);
            used += fit;
            out[used] = '\0';
            continue;
        }
        /* Keep the tail: errors come last. */
        if (used + (size_t)r >= size) {
            size_t drop = used + (size_t)r - size + 1;
            if (drop > used)
                drop = used;
            memmove(out, out + drop, used - drop);
            used -= drop;
        }
        if ((size_t)r < size) {
            memcpy(out + used, buf, (size_t)r);
            used += (size_t)r;
            out[used] = '\0';
        }
    }
    close(fd);
    /* At end of file it is exiting; otherwise it is stopped here. */
    st = child_wait(pid, 10000, &ws);
    if (st == CHILD_RUNNING) {
        bench_warn("%s", bench_stop ? "interrupted: stopping a helper program"
                                    : "a helper program outlived its bound: stopped");
        child_stop(pid, SIGTERM, 10000, NULL);
        return -1;
    }
    return st >= 0 && WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
}

const char *bench_run_line(char *const argv[], char *buf, size_t size)
{
    int fd;
    pid_t pid = bench_spawn_piped(argv, false, &fd);

    if (pid < 0 || bench_collect(pid, fd, buf, size, true, 30) < 0 || buf[0] == '\0')
        snprintf(buf, size, "?");
    else
        buf[strcspn(buf, "\n")] = '\0';
    return buf;
}

int bench_run_capture(char *const argv[], char *out, size_t size, int timeout_s)
{
    int fd;
    pid_t pid;

    if (size > 0)
        out[0] = '\0';
    pid = bench_spawn_piped(argv, true, &fd);
    if (pid < 0 || size == 0)
        return -1;
    return bench_collect(pid, fd, out, size, false, timeout_s);
}

int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int bench_name_valid(const char *s)
{
    size_t n = strlen(s);

    return n > 0 && n <= 63 && !(s[0] >= '0' && s[0] <= '9') &&
           strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_") == n;
}
