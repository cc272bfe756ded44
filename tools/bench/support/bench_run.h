/* Plumbing every benchmark driver needs: failing with a message (after the
 * driver's own cleanup), progress lines, the stop request of SIGINT/SIGTERM,
 * sleeping, reading files and running helper programs. */
#ifndef OG_TOOLS_BENCH_RUN_H
#define OG_TOOLS_BENCH_RUN_H

#include <signal.h>
#include <stddef.h>

/* Raised by bench_on_signal. */
extern volatile sig_atomic_t bench_stop;

/* prog prefixes bench_die's message; on_die (may be NULL) runs before the
 * exit, e.g. to drop what the driver created. */
void bench_init(const char *prog, void (*on_die)(void));
/* "prog: message" on stderr, on_die, exit status 1. */
void bench_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* "prog: message" on stderr; the run goes on. */
void bench_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "  .. message" on stderr. */
void bench_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* SIGINT and SIGTERM raise bench_stop (the handler does nothing else); SIGPIPE is ignored. */
void bench_signals_install(void);
/* bench_die("interrupted") once bench_stop is raised. */
void bench_check_stop(void);
/* Sleeps ms milliseconds, less once bench_stop is raised. */
void bench_sleep_ms(long ms);
/* Monotonic seconds. */
double bench_mono_s(void);
/* The whole file, NUL-terminated (free it); NULL when it cannot be read. */
char *bench_slurp(const char *path);
/* The first line a program (no shell; PATH searched) writes to stdout, its
 * stderr dropped; "?" when it does not run, says nothing or takes over 30 s.
 * Returns buf. */
const char *bench_run_line(char *const argv[], char *buf, size_t size);
/* Runs a program (no shell; PATH searched) to its end, keeping the tail of
 * its stdout and stderr in out. Returns its exit status, -1 when it could not
 * be run or was killed, or when it ran past timeout_s or a stop request
 * (bench_stop) and was stopped. */
int bench_run_capture(char *const argv[], char *out, size_t size, int timeout_s);
/* qsort comparison of doubles, ascending. */
int bench_cmp_double(const void *a, const void *b);
/* True for a database name made of [a-z0-9_], not starting with a digit, at
 * most 63 bytes (PostgreSQL's limit): safe to write into SQL text. */
int bench_name_valid(const char *s);

#endif
