#include "tools/bench/support/bench_pg.h"

#include <stdio.h>
#include <stdlib.h>

#include "tools/bench/support/bench_run.h"

PGconn *bench_pg_connect(const char *conninfo)
{
    PGconn *c = PQconnectdb(conninfo);

    if (PQstatus(c) != CONNECTION_OK) {
        char msg[512];
        snprintf(msg, sizeof(msg), "%s", PQerrorMessage(c));
        PQfinish(c);
        bench_die("cannot connect (%s): %s", conninfo, msg);
    }
    return c;
}

PGresult *bench_pg_query(PGconn *c, const char *text, int n, const char *const *params)
{
    PGresult *res = PQexecParams(c, text, n, NULL, params, NULL, NULL, 0);
    ExecStatusType st = PQresultStatus(res);

    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        char msg[1024];
        snprintf(msg, sizeof(msg), "%s", PQerrorMessage(c));
        PQclear(res);
        bench_die("SQL failed: %s\n  %s", text, msg);
    }
    return res;
}

void bench_pg_exec(PGconn *c, const char *text)
{
    PQclear(bench_pg_query(c, text, 0, NULL));
}

double bench_pg_num(PGconn *c, const char *text, int n, const char *const *params)
{
    PGresult *res = bench_pg_query(c, text, n, params);
    double v =
        PQntuples(res) > 0 && !PQgetisnull(res, 0, 0) ? strtod(PQgetvalue(res, 0, 0), NULL) : 0;

    PQclear(res);
    return v;
}

const char *bench_pg_str(PGconn *c, const char *text, char *buf, size_t size)
{
    PGresult *res = bench_pg_query(c, text, 0, NULL);

    snprintf(buf, size, "%s",
             PQntuples(res) > 0 && !PQgetisnull(res, 0, 0) ? PQgetvalue(res, 0, 0) : "?");
    PQclear(res);
    return buf;
}

void bench_pg_db_create(PGconn *admin, const char *dbname, const char *template_db)
{
    const char *p[1] = {template_db};
    char text[256];

    if (bench_pg_num(admin, "SELECT count(*) FROM pg_database WHERE datname = $1", 1, p) != 1)
        bench_die("template database %s not found: build it first with "
                  "tests/support/db_template.sh (same PG* environment)",
                  template_db);
    snprintf(text, sizeof(text), "DROP DATABASE IF EXISTS %s WITH (FORCE)", dbname);
    bench_pg_exec(admin, text);
    snprintf(text, sizeof(text), "CREATE DATABASE %s TEMPLATE %s", dbname, template_db);
    bench_pg_exec(admin, text);
}

void bench_pg_db_drop(PGconn *admin, const char *dbname)
{
    char text[160];
    PGresult *res;

    snprintf(text, sizeof(text), "DROP DATABASE IF EXISTS %s WITH (FORCE)", dbname);
    res = PQexec(admin, text);
    if (PQresultStatus(res) != PGRES_COMMAND_OK)
        bench_warn("%s: %s", text, PQerrorMessage(admin));
    PQclear(res);
}
