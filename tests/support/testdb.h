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

/* The test database through the transaction-pooling PgBouncer of deploy/local/services.sh
 * (ORDERGATE_PGBOUNCER_PORT on 127.0.0.1, the PGUSER of the environment): a conninfo for the
 * programs under test. Fails the test (never skips) when the export is missing. */
void testdb_pgbouncer_conninfo(const struct testdb *t, char *buf, size_t size);
/* A connection to PgBouncer's admin console (database "pgbouncer"; simple queries only, as
 * SHOW POOLS, SHOW CLIENTS, SHOW SERVERS); fails the test when it cannot be had. */
PGconn *testdb_pgbouncer_admin(void);
/* Rows of an admin console SHOW command whose column `database` is dbname; with col != NULL,
 * the sum of that integer column over them instead. */
long testdb_pgbouncer_count(PGconn *admin, const char *show, const char *dbname, const char *col);

#endif
