/* libpq for the benchmark drivers: every failure ends the run through
 * bench_die, so a driver's figures never rest on a statement that failed.
 * Statements are the drivers' constants; values go as parameters. */
#ifndef OG_TOOLS_BENCH_PG_H
#define OG_TOOLS_BENCH_PG_H

#include <libpq-fe.h>
#include <stddef.h>

PGconn *bench_pg_connect(const char *conninfo);
/* Runs one statement with n text parameters; the caller PQclear()s. */
PGresult *bench_pg_query(PGconn *c, const char *text, int n, const char *const *params);
void bench_pg_exec(PGconn *c, const char *text);
/* The first column of the first row as a number; 0 for no row or NULL. */
double bench_pg_num(PGconn *c, const char *text, int n, const char *const *params);
/* The same as text into buf; "?" for no row or NULL. Returns buf. */
const char *bench_pg_str(PGconn *c, const char *text, char *buf, size_t size);

/* Database names here passed bench_name_valid: safe in SQL text. */
/* dbname afresh (dropped first, with every session on it) as a copy of template_db; dies when
 * the template does not exist, naming tests/support/db_template.sh, which builds it. */
void bench_pg_db_create(PGconn *admin, const char *dbname, const char *template_db);
/* Drops dbname, if it exists, with every session on it; a failure is only warned about (for a
 * cleanup, which must go on). */
void bench_pg_db_drop(PGconn *admin, const char *dbname);

#endif
