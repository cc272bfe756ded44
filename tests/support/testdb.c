#include "support/testdb.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/testutil.h"

static PGconn *testdb_admin(void)
{
    PGconn *conn = PQconnectdb("dbname=postgres");

    if (PQstatus(conn) != CONNECTION_OK) {
        fail_msg("cannot reach PostgreSQL (PGHOST=%s PGPORT=%s): %s; start it with "
                 "deploy/local/services.sh up",
                 getenv("PGHOST") ? getenv("PGHOST") : "", getenv("PGPORT") ? getenv("PGPORT") : "",
                 PQerrorMessage(conn));
    }
    return conn;
}

void testdb_exec(PGconn *conn, const char *sql)
{
    PGresult *res = PQexec(conn, sql);
    ExecStatusType st = PQresultStatus(res);

    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        fail_msg("SQL failed: %s\n%s", sql, PQerrorMessage(conn));
    PQclear(res);
}

void testdb_exec_file(PGconn *conn, const char *relpath)
{
    char path[4096];
    char *sql;

    snprintf(path, sizeof(path), "%s/%s", OG_SOURCE_DIR, relpath);
    sql = testutil_slurp(path);
    if (sql == NULL)
        fail_msg("cannot read %s", path);
    testdb_exec(conn, sql);
    free(sql);
}

long testdb_scalar(PGconn *conn, const char *sql)
{
    PGresult *res = PQexec(conn, sql);
    long v;

    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) < 1)
        fail_msg("SQL failed or returned no row: %s\n%s", sql, PQerrorMessage(conn));
    v = PQgetisnull(res, 0, 0) ? 0 : atol(PQgetvalue(res, 0, 0));
    PQclear(res);
    return v;
}

void testdb_create(struct testdb *t, const char *tag)
{
    char sql[256];
    const char *tpl = getenv("ORDERGATE_TEMPLATE_DB");
    PGconn *admin = testdb_admin();

    snprintf(t->name, sizeof(t->name), "og_%s_%d", tag, (int)getpid());
    snprintf(t->conninfo, sizeof(t->conninfo), "dbname=%s", t->name);
    snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS %s", t->name);
    testdb_exec(admin, sql);
    snprintf(sql, sizeof(sql), "CREATE DATABASE %s TEMPLATE %s", t->name,
             tpl != NULL && *tpl ? tpl : "ordergate_tpl");
    testdb_exec(admin, sql);
    PQfinish(admin);
}

void testdb_drop(struct testdb *t)
{
    char sql[256];
    PGconn *admin = testdb_admin();

    snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS %s WITH (FORCE)", t->name);
    testdb_exec(admin, sql);
    PQfinish(admin);
}

PGconn *testdb_connect(const struct testdb *t)
{
    PGconn *conn = PQconnectdb(t->conninfo);

    if (PQstatus(conn) != CONNECTION_OK)
        fail_msg("cannot connect to %s: %s", t->name, PQerrorMessage(conn));
    return conn;
}

struct db *testdb_open(const struct testdb *t, const char *app)
{
    struct db_retry retry = {.max_attempts = 5, .base_ms = 10, .cap_ms = 200};
    struct db *db = db_new(t->conninfo, NULL, app, &retry, NULL);
    struct og_error err = {0};

    assert_non_null(db);
    if (db_connect(db, &err) != OG_OK)
        fail_msg("db_connect %s: %s", t->name, err.msg);
    return db;
}

static const char *testdb_pgbouncer_port(void)
{
    const char *port = getenv("ORDERGATE_PGBOUNCER_PORT");

    if (port == NULL || *port == '\0')
        fail_msg("ORDERGATE_PGBOUNCER_PORT is not set: start PgBouncer with "
                 "ORDERGATE_SERVICES=pg,kafka,pgbouncer deploy/local/services.sh up (tests/run.sh "
                 "does)");
    return port;
}

void testdb_pgbouncer_conninfo(const struct testdb *t, char *buf, size_t size)
{
    snprintf(buf, size, "host=127.0.0.1 port=%s dbname=%s", testdb_pgbouncer_port(), t->name);
}

PGconn *testdb_pgbouncer_admin(void)
{
    char conninfo[128];
    PGconn *conn;

    snprintf(conninfo, sizeof(conninfo), "host=127.0.0.1 port=%s dbname=pgbouncer",
             testdb_pgbouncer_port());
    conn = PQconnectdb(conninfo);
    if (PQstatus(conn) != CONNECTION_OK)
        fail_msg("cannot reach PgBouncer's admin console (%s): %s", conninfo, PQerrorMessage(conn));
    return conn;
}

long testdb_pgbouncer_count(PGconn *admin, const char *show, const char *dbname, const char *col)
{
    PGresult *res = PQexec(admin, show);
    int cdb, cv = -1;
    long n = 0;

    if (PQresultStatus(res) != PGRES_TUPLES_OK)
        fail_msg("PgBouncer %s: %s", show, PQerrorMessage(admin));
    cdb = PQfnumber(res, "database");
    if (col != NULL)
        cv = PQfnumber(res, col);
    if (cdb < 0 || (col != NULL && cv < 0))
        fail_msg("PgBouncer %s: no column database%s%s", show, col ? " or " : "", col ? col : "");
    for (int i = 0; i < PQntuples(res); i++)
        if (strcmp(PQgetvalue(res, i, cdb), dbname) == 0)
            n += col != NULL ? atol(PQgetvalue(res, i, cv)) : 1;
    PQclear(res);
    return n;
}
