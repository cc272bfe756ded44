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

#endif
