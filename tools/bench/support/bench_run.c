#include "tools/bench/support/bench_run.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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

void bench_on_signal(int sig)
{
    (void)sig;
    bench_stop = 1;
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

/* Starts argv with stdout into a pipe (and stderr too, or to /dev/null);
 * -1 when it cannot. */
static pid_t bench_spawn_piped(char *const argv[], bool with_stderr, int *read_fd)
{
    int fds[2];
    pid_t pid;

    if (pipe(fds) != 0)
        return -1;
    pid = fork();
    if (pid == 0) {
        int devnull = with_stderr ? -1 : open("/dev/null", O_WRONLY);
        dup2(fds[1], STDOUT_FILENO);
        dup2(with_stderr ? fds[1] : devnull, STDERR_FILENO);
        close(fds[0]);
        close(fds[1]);
        execvp(argv[0], argv);
        fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(fds[1]);
    if (pid < 0) {
        close(fds[0]);
        return -1;
    }
    *read_fd = fds[0];
    return pid;
}

static int bench_reap(pid_t pid)
{
    int status = 0;

    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

const char *bench_run_line(char *const argv[], char *buf, size_t size)
{
    int fd;
    ssize_t n = 0;
    pid_t pid = bench_spawn_piped(argv, false, &fd);

    if (pid > 0) {
        n = read(fd, buf, size - 1);
        close(fd);
        bench_reap(pid);
    }
    if (n > 0) {
        buf[n] = '\0';
        buf[strcspn(buf, "\n")] = '\0';
    } else {
        snprintf(buf, size, "?");
    }
    return buf;
}

int bench_run_capture(char *const argv[], char *out, size_t size)
{
    size_t used = 0;
    int fd;
    pid_t pid;

    if (size > 0)
        out[0] = '\0';
    pid = bench_spawn_piped(argv, true, &fd);
    if (pid < 0)
        return -1;
    for (;;) {
        char buf[4096];
        ssize_t r = read(fd, buf, sizeof(buf));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        /* Keep the tail: errors come last. */
        if (used + (size_t)r >= size && size > 0) {
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
    return bench_reap(pid);
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
