#include "tools/bench/support/bench_child.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tools/bench/support/bench_run.h"

/* The children started and not yet reaped: what bench_child_kill_running ends. */
#define BENCH_CHILD_MAX 16
static pid_t bench_child_running[BENCH_CHILD_MAX];

static void bench_child_track(pid_t pid)
{
    for (int i = 0; i < BENCH_CHILD_MAX; i++)
        if (bench_child_running[i] <= 0) {
            bench_child_running[i] = pid;
            return;
        }
}

static void bench_child_untrack(pid_t pid)
{
    for (int i = 0; i < BENCH_CHILD_MAX; i++)
        if (bench_child_running[i] == pid)
            bench_child_running[i] = 0;
}

static int bench_child_decode(int ws)
{
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : WIFSIGNALED(ws) ? 128 + WTERMSIG(ws) : -1;
}

void bench_child_start(struct bench_child *c, const char *what, const char *const *argv)
{
    snprintf(c->what, sizeof(c->what), "%s", what);
    c->status = -1;
    c->port = 0;
    c->pid = fork();
    if (c->pid < 0)
        bench_die("fork: %s", strerror(errno));
    if (c->pid == 0) {
        int fd = open(c->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, STDOUT_FILENO);
            dup2(fd, STDERR_FILENO);
            close(fd);
        }
        execv(argv[0], (char *const *)argv);
        fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    bench_child_track(c->pid);
}

void bench_child_alive(struct bench_child *c)
{
    int ws;

    if (c->status < 0 && waitpid(c->pid, &ws, WNOHANG) == c->pid) {
        char *text = bench_slurp(c->log);
        const char *tail = text ? text : "";
        size_t n = strlen(tail);
        c->status = bench_child_decode(ws);
        bench_child_untrack(c->pid);
        fprintf(stderr, "%s\n", n > 3000 ? tail + n - 3000 : tail);
        free(text);
        bench_die("%s exited with status %d (log %s)", c->what, c->status, c->log);
    }
}

bool bench_child_log_has(const struct bench_child *c, const char *needle)
{
    char *text = bench_slurp(c->log);
    bool found = text != NULL && strstr(text, needle) != NULL;

    free(text);
    return found;
}

long bench_child_log_events(const struct bench_child *c, const char *event, const char *key,
                            double **values, size_t *nvalues)
{
    char *text = bench_slurp(c->log), ev[80], k[48];
    size_t evlen, klen, cap = 0;
    long lines = 0;

    if (values != NULL)
        *values = NULL;
    if (nvalues != NULL)
        *nvalues = 0;
    if (text == NULL) {
        lines = -1;
        goto out;
    }
    evlen = (size_t)snprintf(ev, sizeof(ev), " event=%s", event);
    klen = key != NULL ? (size_t)snprintf(k, sizeof(k), " %s=", key) : 0;
    for (char *line = text, *next; line != NULL && *line != '\0'; line = next) {
        char *hit, *v;
        next = strchr(line, '\n');
        if (next != NULL)
            *next++ = '\0';
        /* The whole name: event=batch matches neither batch_committed nor batch_done. */
        hit = strstr(line, ev);
        if (hit == NULL || (hit[evlen] != ' ' && hit[evlen] != '\0'))
            continue;
        lines++;
        if (key == NULL || values == NULL || nvalues == NULL || (v = strstr(line, k)) == NULL)
            continue;
        if (*nvalues == cap) {
            double *grown = realloc(*values, (cap = cap ? cap * 2 : 1024) * sizeof(**values));
            if (grown == NULL)
                bench_die("out of memory");
            *values = grown;
        }
        (*values)[(*nvalues)++] = strtod(v + klen, NULL);
    }
out:
    free(text);
    return lines;
}

void bench_child_wait_log(struct bench_child *c, const char *needle, int timeout_s)
{
    double deadline = bench_mono_s() + timeout_s;

    while (!bench_child_log_has(c, needle)) {
        bench_child_alive(c);
        bench_check_stop();
        if (bench_mono_s() > deadline)
            bench_die("'%s' did not appear in %s within %d s", needle, c->log, timeout_s);
        bench_sleep_ms(50);
    }
}

void bench_child_port(struct bench_child *c)
{
    char *text, *s;

    bench_child_wait_log(c, "event=metrics_listening", 30);
    text = bench_slurp(c->log);
    s = text ? strstr(text, "event=metrics_listening") : NULL;
    s = s ? strstr(s, "port=") : NULL;
    c->port = s ? atoi(s + 5) : 0;
    free(text);
    if (c->port <= 0)
        bench_die("no metrics port in %s", c->log);
}

int bench_child_stop(struct bench_child *c)
{
    int ws;

    if (c->status >= 0)
        return c->status;
    kill(c->pid, SIGTERM);
    for (int i = 0; i < 600; i++) {
        if (waitpid(c->pid, &ws, WNOHANG) == c->pid) {
            c->status = bench_child_decode(ws);
            bench_child_untrack(c->pid);
            return c->status;
        }
        bench_sleep_ms(100);
    }
    kill(c->pid, SIGKILL);
    waitpid(c->pid, &ws, 0);
    bench_child_untrack(c->pid);
    c->status = 128 + SIGKILL;
    return c->status;
}

void bench_child_kill_running(void)
{
    int ws;

    /* SIGCONT first: a child stopped on purpose would not see SIGTERM. */
    for (int i = 0; i < BENCH_CHILD_MAX; i++)
        if (bench_child_running[i] > 0) {
            kill(bench_child_running[i], SIGCONT);
            kill(bench_child_running[i], SIGTERM);
        }
    for (int i = 0; i < BENCH_CHILD_MAX; i++) {
        pid_t pid = bench_child_running[i];
        if (pid <= 0)
            continue;
        for (int k = 0; k < 100 && waitpid(pid, &ws, WNOHANG) == 0; k++)
            bench_sleep_ms(100);
        kill(pid, SIGKILL);
        waitpid(pid, &ws, WNOHANG);
        bench_child_running[i] = 0;
    }
}
