/* og_bench_pool: what database.pool_mode = "transaction" costs a call, direct and through a
 * transaction-pooling PgBouncer. One gate call (claim_cancel of an order that does not exist:
 * the function runs, answers not_found, writes nothing) is timed, one connection, one call at a
 * time, in each way of sending it:
 *
 *   named      session mode: a named prepared statement after the bounds (set_config(...,
 *              true)) in one pipeline and one Sync (db.c)
 *   pipeline   transaction mode (db.c): the bounds with set_config(..., true) and the
 *              statement, unnamed, in one pipeline and one Sync (one round trip)
 *   unbounded  transaction mode without bounds: the statement unnamed, nothing else
 *   explicit   the other way to carry the bounds: BEGIN; SET LOCAL lock_timeout;
 *              SET LOCAL statement_timeout (one simple query), the statement, COMMIT
 *              (three round trips)
 *
 * Rounds interleave the ways (their order rotates) so that load on the machine hits them
 * alike; per way: mean, p50, p99 and the worst call, and the ratio of each mean to named on
 * the same path. Prints the machine's load average next to the figures.
 *
 *   og_bench_pool --db CONNINFO [--pooled CONNINFO] [--calls N] [--rounds R]
 *
 * The database needs the ordergate schema (any database made from the test template). */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "common/db.h"
#include "tools/bench/support/bench_opt.h"
#include "tools/bench/support/bench_pg.h"
#include "tools/bench/support/bench_run.h"

#define PROG "og_bench_pool"

enum way { WAY_NAMED, WAY_PIPELINE, WAY_UNBOUNDED, WAY_EXPLICIT, WAY_N };
static const char *const way_names[WAY_N] = {"named", "pipeline", "unbounded", "explicit"};

static const struct db_stmt stmt_claim = {
    "og_bench_pool_claim",
    "SELECT order_no, outcome, status FROM ordergate.claim_cancel($1::text[], $2)", 2};
static const char *const claim_params[] = {"{og-bench-pool-none}", "timeout_consumer"};

struct samples {
    double *ms;
    int n;
};

static struct db *open_db(const char *conninfo, const struct db_session *s)
{
    struct db_retry retry = {1, 10, 10};
    struct db *db = db_new(conninfo, NULL, PROG, &retry, NULL);
    struct og_error err = {0};

    if (db == NULL)
        bench_die("out of memory");
    db_set_session(db, s, NULL);
    if (db_connect(db, &err) != OG_OK)
        bench_die("%s: %s", conninfo, err.msg);
    return db;
}

static void call_db(struct db *db)
{
    struct og_error err = {0};
    PGresult *res = NULL;

    if (db_call(db, &stmt_claim, claim_params, &res, &err) != OG_OK)
        bench_die("claim: %s", err.msg);
    if (PQntuples(res) != 1 || strcmp(PQgetvalue(res, 0, 1), "not_found") != 0)
        bench_die("claim answered something else than not_found");
    PQclear(res);
}

static void call_explicit(PGconn *c)
{
    PGresult *r;

    /* A constant multi-statement simple query (PQexec): one round trip. */
    r = PQexec(c, "BEGIN; SET LOCAL lock_timeout = '5000ms'; "
                  "SET LOCAL statement_timeout = '20000ms'");
    if (PQresultStatus(r) != PGRES_COMMAND_OK)
        bench_die("BEGIN; SET LOCAL ...: %s", PQerrorMessage(c));
    PQclear(r);
    r = bench_pg_query(c, stmt_claim.sql, 2, claim_params);
    if (PQntuples(r) != 1 || strcmp(PQgetvalue(r, 0, 1), "not_found") != 0)
        bench_die("claim answered something else than not_found");
    PQclear(r);
    r = PQexec(c, "COMMIT");
    if (PQresultStatus(r) != PGRES_COMMAND_OK)
        bench_die("COMMIT: %s", PQerrorMessage(c));
    PQclear(r);
}

static int cmp(const void *a, const void *b)
{
    return bench_cmp_double(a, b);
}

static void report(const char *path, struct samples s[WAY_N])
{
    double mean[WAY_N];

    for (int w = 0; w < WAY_N; w++) {
        double sum = 0;
        for (int i = 0; i < s[w].n; i++)
            sum += s[w].ms[i];
        mean[w] = sum / s[w].n;
        qsort(s[w].ms, (size_t)s[w].n, sizeof(double), cmp);
    }
    for (int w = 0; w < WAY_N; w++) {
        int n = s[w].n;
        printf("%-7s %-9s calls=%-6d mean_ms=%.3f p50_ms=%.3f p99_ms=%.3f max_ms=%.3f "
               "vs_named=%.2f\n",
               path, way_names[w], n, mean[w], s[w].ms[n / 2], s[w].ms[(int)(n * 0.99)],
               s[w].ms[n - 1], mean[w] / mean[WAY_NAMED]);
    }
}

static void run_path(const char *path, const char *conninfo, int calls, int rounds)
{
    struct db_session named = {5000, 20000, false};
    struct db_session pipe = {5000, 20000, true};
    struct db_session unb = {0, 0, true};
    struct db *db[3];
    PGconn *raw = bench_pg_connect(conninfo);
    struct samples s[WAY_N];

    db[WAY_NAMED] = open_db(conninfo, &named);
    db[WAY_PIPELINE] = open_db(conninfo, &pipe);
    db[WAY_UNBOUNDED] = open_db(conninfo, &unb);
    for (int w = 0; w < WAY_N; w++) {
        s[w].ms = calloc((size_t)calls * (size_t)rounds, sizeof(double));
        s[w].n = 0;
        if (s[w].ms == NULL)
            bench_die("out of memory");
    }
    /* Warm-up: plans cached, connections through the pooler made. */
    for (int i = 0; i < 50; i++) {
        for (int w = 0; w < WAY_EXPLICIT; w++)
            call_db(db[w]);
        call_explicit(raw);
    }
    for (int r = 0; r < rounds; r++) {
        for (int k = 0; k < WAY_N; k++) {
            int w = (k + r) % WAY_N;
            for (int i = 0; i < calls; i++) {
                double t0 = bench_mono_s();
                if (w == WAY_EXPLICIT)
                    call_explicit(raw);
                else
                    call_db(db[w]);
                s[w].ms[s[w].n++] = (bench_mono_s() - t0) * 1000.0;
            }
            bench_check_stop();
        }
    }
    report(path, s);
    for (int w = 0; w < WAY_N; w++)
        free(s[w].ms);
    for (int w = 0; w < WAY_EXPLICIT; w++)
        db_free(db[w]);
    PQfinish(raw);
}

int main(int argc, char **argv)
{
    const char *direct = NULL, *pooled = NULL;
    int calls = 2000, rounds = 5;
    char load[128] = "?";
    char *text;

    const struct bench_opt rows[] = {
        BENCH_STR("db", "CONNINFO", "the database, directly (required)", &direct),
        BENCH_STR("pooled", "CONNINFO", "the same database through PgBouncer (default: none)",
                  &pooled),
        BENCH_INT("calls", "N", "calls per way and round (default 2000)", &calls, 10, INT_MAX),
        BENCH_INT("rounds", "R", "rounds (default 5)", &rounds, 1, INT_MAX),
        BENCH_END,
    };

    bench_init(PROG, NULL);
    if (bench_opt_parse(PROG, NULL, NULL, rows, argc, argv) != 0)
        return 2;
    if (direct == NULL) {
        fprintf(stderr, PROG ": --db is required (see " PROG " --help)\n");
        return 2;
    }
    text = bench_slurp("/proc/loadavg");
    if (text != NULL) {
        snprintf(load, sizeof(load), "%.*s", (int)strcspn(text, "\n"), text);
        free(text);
    }
    printf("og_bench_pool: %d calls x %d rounds per way; load average before: %s\n", calls, rounds,
           load);
    run_path("direct", direct, calls, rounds);
    if (pooled != NULL)
        run_path("pooled", pooled, calls, rounds);
    text = bench_slurp("/proc/loadavg");
    if (text != NULL) {
        printf("load average after: %.*s\n", (int)strcspn(text, "\n"), text);
        free(text);
    }
    return 0;
}
