/* Runs the built ordergate-scanner as a child process, as cron would, and
 * helpers shared by the scanner's tests. */
#ifndef OG_TESTS_SCANNER_CHILD_H
#define OG_TESTS_SCANNER_CHILD_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <sys/types.h>

#include "support/testdb.h"

struct scanner_child {
    pid_t pid;
    char log_path[256]; /* the child's stdout and stderr */
    char *output;       /* filled by scanner_child_wait */
    int exit_code;      /* -1 when killed by a signal */
};

/* Starts the scanner with the given arguments (NULL-terminated, without the
 * program name). */
void scanner_child_start(struct scanner_child *c, const char *const *args);
/* Waits up to timeout_ms for the child to exit (fails the test and kills it
 * otherwise); returns its exit status and keeps its output in c->output. */
int scanner_child_wait(struct scanner_child *c, int timeout_ms);
void scanner_child_free(struct scanner_child *c);
/* Starts and waits (60 s); the output stays in c. */
int scanner_child_run(struct scanner_child *c, const char *const *args);

/* What every database test of the scanner starts from. */
struct scanner_fixture {
    struct testdb t;    /* a database of its own, copied from the template */
    PGconn *conn;       /* the test's session on it */
    char textfile[256]; /* a path for --textfile, removed by the teardown */
};

/* cmocka setup helper: a fixture in *state, with a database named after tag
 * and, when seed is true, the stock of scanner_seed. */
int scanner_fixture_setup(void **state, const char *tag, bool seed);
/* cmocka teardown: drops the database, removes the textfile. */
int scanner_fixture_teardown(void **state);

/* Polls a scalar query until its value is >= want; false on timeout. */
bool scanner_poll_at_least(PGconn *conn, const char *sql, long want, int timeout_ms);

/* Stock for the orders the tests place: SKU-A with plenty of units. */
void scanner_seed(PGconn *conn);
/* Places n orders "<prefix>-<i>" (i = 1..n) through the gate, one unit of
 * SKU-A each, expiring at now() + offset_s + i milliseconds. */
void scanner_place(PGconn *conn, const char *prefix, int n, int offset_s);

#endif
