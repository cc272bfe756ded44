/* A program under benchmark (the consumer), started with common/child: its output in a log
 * file, its announcements read from there, its end awaited with a bound. The programs started
 * and not yet reaped (up to 16) are the "running" ones that bench_prog_stop_all ends, for a
 * driver's cleanup on any exit. */
#ifndef OG_TOOLS_BENCH_PROG_H
#define OG_TOOLS_BENCH_PROG_H

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

struct bench_prog {
    pid_t pid;
    char what[32];         /* "the consumer": how messages name it */
    char log[PATH_MAX];    /* its stdout and stderr */
    char config[PATH_MAX]; /* the config file it was started with, if any */
    int port;              /* the metrics port it announced; 0 until bench_prog_port */
    int status;            /* exit status once reaped; -1 before; 128 + n for signal n */
};

/* Starts argv (argv[0] a path) with stdout and stderr into c->log, which the
 * caller has set. Dies when it cannot start it. */
void bench_prog_start(struct bench_prog *c, const char *what, const char *const *argv);
/* Dies, with the log's tail, when the child has exited. */
void bench_prog_alive(struct bench_prog *c);
bool bench_prog_log_has(const struct bench_prog *c, const char *needle);
/* The lines of the child's log (logfmt, common/log.h) whose event is `event`: returns how many,
 * -1 when the log cannot be read. With key non-NULL, *values (the caller frees it; NULL when
 * none) gets the number after " key=" of each such line that has one, in the order logged, and
 * *nvalues how many those are. */
long bench_prog_log_events(const struct bench_prog *c, const char *event, const char *key,
                           double **values, size_t *nvalues);
/* Waits until the log holds needle; dies when the child exits, on a stop
 * request, or after timeout_s. */
void bench_prog_wait_log(struct bench_prog *c, const char *needle, int timeout_s);
/* Reads the port of "event=metrics_listening ... port=N" (waits 30 s). */
void bench_prog_port(struct bench_prog *c);
/* SIGTERM, then waits; SIGKILL after 60 s. Returns the exit status. */
int bench_prog_stop(struct bench_prog *c);
/* Ends every running program, if any (SIGTERM, 10 s, SIGKILL). */
void bench_prog_stop_all(void);

#endif
