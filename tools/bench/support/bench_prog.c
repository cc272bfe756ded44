#include "tools/bench/support/bench_prog.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/child.h"
#include "tools/bench/support/bench_run.h"

/* The programs started and not yet reaped: what bench_prog_stop_all ends. */
#define BENCH_PROG_MAX 16
static pid_t bench_prog_running[BENCH_PROG_MAX];

static void bench_prog_track(pid_t pid)
{
    for (int i = 0; i < BENCH_PROG_MAX; i++)
        if (bench_prog_running[i] <= 0) {
            bench_prog_running[i] = pid;
            return;
        }
}

static void bench_prog_untrack(pid_t pid)
{
    for (int i = 0; i < BENCH_PROG_MAX; i++)
        if (bench_prog_running[i] == pid)
            bench_prog_running[i] = 0;
}

void bench_prog_start(struct bench_prog *c, const char *what, const char *const *argv)
{
    struct og_error err = {0};

    snprintf(c->what, sizeof(c->what), "%s", what);
    c->status = -1;
    c->port = 0;
    c->pid = child_spawn(argv, &(struct child_opts){.out_path = c->log, .err_path = c->log}, &err);
    if (c->pid < 0)
        bench_die("cannot start %s: %s", what, err.msg);
    bench_prog_track(c->pid);
}

void bench_prog_alive(struct bench_prog *c)
{
    char *text;
    size_t n;
    int st;

    if (c->status >= 0 || (st = child_wait(c->pid, 0, NULL)) < 0)
        return;
    c->status = st;
    bench_prog_untrack(c->pid);
    text = bench_slurp(c->log);
    n = text != NULL ? strlen(text) : 0;
    fprintf(stderr, "%s\n", text == NULL ? "" : n > 3000 ? text + n - 3000 : text);
    free(text);
    bench_die("%s exited with status %d (log %s)", c->what, c->status, c->log);
}

bool bench_prog_log_has(const struct bench_prog *c, const char *needle)
{
    char *text = bench_slurp(c->log);
    bool found = text != NULL && strstr(text, needle) != NULL;

    free(text);
    return found;
}

long bench_prog_log_events(const struct bench_prog *c, const char *event, const char *key,
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

void bench_prog_wait_log(struct bench_prog *c, const char *needle, int timeout_s)
{
    double deadline = bench_mono_s() + timeout_s;

    while (!bench_prog_log_has(c, needle)) {
        bench_prog_alive(c);
        bench_check_stop();
        if (bench_mono_s() > deadline)
            bench_die("'%s' did not appear in %s within %d s", needle, c->log, timeout_s);
        bench_sleep_ms(50);
    }
}

void bench_prog_port(struct bench_prog *c)
{
    char *text, *s;

    bench_prog_wait_log(c, "event=metrics_listening", 30);
    text = bench_slurp(c->log);
    s = text ? strstr(text, "event=metrics_listening") : NULL;
    s = s ? strstr(s, "port=") : NULL;
    c->port = s ? atoi(s + 5) : 0;
    free(text);
    if (c->port <= 0)
        bench_die("no metrics port in %s", c->log);
}

int bench_prog_stop(struct bench_prog *c)
{
    if (c->status >= 0)
        return c->status;
    c->status = child_stop(c->pid, SIGTERM, 60000, NULL);
    bench_prog_untrack(c->pid);
    return c->status;
}

void bench_prog_stop_all(void)
{
    /* All asked first, so they stop side by side; then each is awaited. */
    for (int i = 0; i < BENCH_PROG_MAX; i++)
        if (bench_prog_running[i] > 0)
            child_signal(bench_prog_running[i], SIGTERM);
    for (int i = 0; i < BENCH_PROG_MAX; i++)
        if (bench_prog_running[i] > 0) {
            child_stop(bench_prog_running[i], SIGTERM, 10000, NULL);
            bench_prog_running[i] = 0;
        }
}
