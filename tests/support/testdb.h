/* Per-test databases copied from the template that the db_template fixture
 * builds from schema/. Connection parameters come from libpq's environment. */
#ifndef OG_TESTS_TESTDB_H
#define OG_TESTS_TESTDB_H

#include <libpq-fe.h>
#include <stddef.h>

#include "common/db.h"

struct testdb {
    char name[64];
    char conninfo[128]; /* "dbname=NAME": host, port, user from the environment */
};

/* Creates a fresh database named og_<tag>_<pid> from the template; aborts
 * the test (fail, never skip) when PostgreSQL cannot be reached. */
void testdb_create(struct testdb *t, const char *tag);
void testdb_drop(struct testdb *t);
/* Opens a raw libpq connection to the test database (asserts success). */
PGconn *testdb_connect(const struct testdb *t);
/* Opens a gate client connection with application name `app`. */
struct db *testdb_open(const struct testdb *t, const char *app);
/* Runs SQL (no parameters) and returns the first column of the first row as
 * a long; asserts success. */
long testdb_scalar(PGconn *conn, const char *sql);
/* Runs SQL and asserts it succeeded. */
void testdb_exec(PGconn *conn, const char *sql);
/* Runs the SQL file at relpath (from the source tree's root, e.g.
 * "tests/support/failing_hook.sql") as one simple query; asserts it succeeded. */
void testdb_exec_file(PGconn *conn, const char *relpath);

#endif
