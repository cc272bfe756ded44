/* og_bench_gate: claim_cancel throughput of the gate client, against pgbench.
 *
 * One session, durable commits (fsync and synchronous_commit must be on),
 * every side effect of a cancel on (restock, coupon return, status_log row,
 * outbox event). For each batch size it places its own overdue orders (bulk
 * SQL: setup is not measured), then cancels all of them through
 * gate_claim_cancel() in batches of that size and reports orders/s, calls
 * (= transactions)/s and call latency. In the same run, pgbench -N with one
 * client on a separate database gives the server's durable single-client
 * transaction rate, and the table shows the ratio. A benchmark prints
 * figures; it is not a test, but it refuses to run on a non-durable server
 * unless told to, and it checks that every order was really cancelled and
 * that reconcile() finds nothing wrong afterwards.
 *
 * The flash case (--cases flash) is the shape of a flash sale instead: a fresh
 * database with autovacuum off on its tables, orders placed through
 * ordergate.place_order() (gate_place()) on a few dozen hot SKUs, and then,
 * with no VACUUM or ANALYZE in between, gate_claim_cancel() in batches from one
 * new session, every batch timed (a PL/pgSQL statement switches to a generic
 * plan at its sixth execution, so the first ten batches are printed). The same
 * case runs again after ANALYZE, and the table shows the ratio of the two.
 *
 * Connection parameters come from libpq's environment (PGHOST, PGPORT, ...).
 * Exit status: 0 done, 1 runtime failure, 2 bad usage. */
#include <dirent.h>
#include <errno.h>
#include <libpq-fe.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/db.h"
#include "common/gate.h"
#include "common/log.h"
#include "common/parse.h"
#include "tools/bench/support/bench_opt.h"
#include "tools/bench/support/bench_place.h"
#include "tools/bench/support/bench_proc.h"
#include "tools/bench/support/bench_run.h"

#define BENCH_MAX_BATCHES  16
#define BENCH_TARGET_BATCH 500
#define BENCH_TARGET_RATE  20000.0
/* psql applying a migration, pgbench's setup, and pgbench past its -T: none takes this long. */
#define BENCH_HELPER_TIMEOUT_S 600

struct bench_opts {
    const char *dbname; /* database created (dropped first) for the run */
    const char *db;     /* existing database with the schema: no create, no drop */
    char schema_dir[PATH_MAX];
    int batches[BENCH_MAX_BATCHES];
    int nbatches;
    int orders;       /* orders per batch size >= 100 */
    int small_orders; /* orders for batch sizes < 100 (each call is a commit) */
    int max_seconds;  /* per batch size */
    int skus;
    int items;        /* lines per order */
    int coupon_every; /* one order in N holds a coupon; 0 = none */
    const char *pgbench_db;
    int pgbench_seconds;
    bool no_pgbench;
    bool keep;
    bool profile; /* per-function server time (track_functions) */
    bool allow_nondurable;
    bool case_standard, case_flash;
    int flash_orders;
    int flash_skus;    /* SKUs in the flash database; the first 4/5 of them are the hot ones */
    int flash_clients; /* placing sessions */
    int flash_batch;
    int flash_rounds; /* each round: one database without statistics, one after ANALYZE */
};

struct phase_result {
    int batch;
    long orders;
    long calls;
    double seconds;
    double p50_ms, p99_ms, max_ms;
    double cpu_s;     /* CPU time of the server backend, -1 when unknown */
    double wal_bytes; /* WAL written during the phase */
};

static int parse_args(int argc, char **argv, struct bench_opts *o)
{
    const struct bench_opt rows[] = {
        BENCH_NAME("dbname", "NAME",
                   "database to create for the run (default og_bench; dropped\n"
                   "first, dropped again at the end unless --keep)",
                   &o->dbname),
        BENCH_STR("db", "CONNINFO", "use this existing database instead (schema applied)", &o->db),
        BENCH_PATH("schema", "DIR", "migrations applied with psql (default: the source tree's)",
                   o->schema_dir),
        BENCH_INTS("batches", "LIST", "batch sizes (default 1,100,500,1000)", o->batches,
                   &o->nbatches, BENCH_MAX_BATCHES, 1, GATE_BATCH_MAX),
        BENCH_INT("orders", "N", "orders per batch size >= 100 (default 50000)", &o->orders, 1,
                  10000000),
        BENCH_INT("small-orders", "N", "orders for batch sizes < 100 (default 2000)",
                  &o->small_orders, 1, 10000000),
        BENCH_INT("max-seconds", "N", "stop a batch size after N seconds (default 60)",
                  &o->max_seconds, 1, 86400),
        BENCH_INT("skus", "N", "distinct SKUs (default 1000)", &o->skus, 200, 10000000),
        BENCH_INT("items", "N", "lines per order, 1..10 (default 2)", &o->items, 1, 10),
        BENCH_INT("coupon-every", "N", "one order in N holds a coupon, 0 = none (default 3)",
                  &o->coupon_every, 0, 1000000),
        BENCH_NAME("pgbench-db", "NAME", "database for pgbench (default og_bench_pgbench)",
                   &o->pgbench_db),
        BENCH_INT("pgbench-seconds", "N", "pgbench -T (default 10)", &o->pgbench_seconds, 1, 3600),
        BENCH_ON("no-pgbench", "skip the pgbench comparison", &o->no_pgbench),
        BENCH_ON("profile", "also print server time per SQL function (track_functions)",
                 &o->profile),
        BENCH_ON("allow-nondurable", "run even if fsync or synchronous_commit is off",
                 &o->allow_nondurable),
        BENCH_WORDS("cases", "LIST", "standard,flash (default standard)",
                    ((const char *const[]){"standard", "flash", NULL}),
                    ((bool *const[]){&o->case_standard, &o->case_flash})),
        BENCH_INT("flash-orders", "N", "flash: orders placed through place_order (default 20000)",
                  &o->flash_orders, 100, 10000000),
        BENCH_INT("flash-skus", "N", "flash: SKUs, 5..50; 4/5 of them hot (default 50)",
                  &o->flash_skus, 5, 50),
        BENCH_INT("flash-clients", "N", "flash: placing sessions (default 4)", &o->flash_clients, 1,
                  64),
        BENCH_INT("flash-batch", "N", "flash: claim_cancel batch size (default 500)",
                  &o->flash_batch, 1, GATE_BATCH_MAX),
        BENCH_INT("flash-rounds", "N", "flash: rounds of (no ANALYZE, ANALYZE) (default 1)",
                  &o->flash_rounds, 1, 20),
        BENCH_ON("keep", "keep the databases afterwards", &o->keep),
        BENCH_END,
    };
    const char *here = __FILE__, *slash;

    *o = (struct bench_opts){.dbname = "og_bench",
                             .batches = {1, 100, 500, 1000},
                             .nbatches = 4,
                             .orders = 50000,
                             .small_orders = 2000,
                             .max_seconds = 60,
                             .skus = 1000,
                             .items = 2,
                             .coupon_every = 3,
                             .pgbench_db = "og_bench_pgbench",
                             .pgbench_seconds = 10,
                             .case_standard = true,
                             .flash_orders = 20000,
                             .flash_skus = 50,
                             .flash_clients = 4,
                             .flash_batch = 500,
                             .flash_rounds = 1};
    /* Default schema directory: ../../schema from this source file. */
    slash = strstr(here, "/tools/bench/");
    if (slash != NULL)
        snprintf(o->schema_dir, sizeof(o->schema_dir), "%.*s/schema", (int)(slash - here), here);
    else
        snprintf(o->schema_dir, sizeof(o->schema_dir), "schema");
    if (bench_opt_parse("og_bench_gate", NULL,
                        "Connection: libpq's environment (PGHOST, PGPORT, PGUSER; a superuser, "
                        "for setup).\n",
                        rows, argc, argv) != 0)
        return -1;
    if (!o->no_pgbench && o->db == NULL && strcmp(o->pgbench_db, o->dbname) == 0) {
        fprintf(stderr, "og_bench_gate: --pgbench-db must differ from --dbname\n");
        return -1;
    }
    return 0;
}

static int sql_ok(PGconn *c, const char *sql, int n, const char *const *params, PGresult **out)
{
    PGresult *res = PQexecParams(c, sql, n, NULL, params, NULL, NULL, 0);
    ExecStatusType st = PQresultStatus(res);

    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        fprintf(stderr, "og_bench_gate: SQL failed: %s\n  %s", sql, PQerrorMessage(c));
        PQclear(res);
        return -1;
    }
    if (out != NULL)
        *out = res;
    else
        PQclear(res);
    return 0;
}

static const char *sql_text(PGconn *c, const char *sql, char *buf, size_t size)
{
    PGresult *res;

    snprintf(buf, size, "?");
    if (sql_ok(c, sql, 0, NULL, &res) == 0) {
        if (PQntuples(res) > 0)
            snprintf(buf, size, "%s", PQgetvalue(res, 0, 0));
        PQclear(res);
    }
    return buf;
}

static PGconn *connect_db(const char *conninfo)
{
    PGconn *c = PQconnectdb(conninfo);

    if (PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr, "og_bench_gate: cannot connect (%s): %s", conninfo, PQerrorMessage(c));
        PQfinish(c);
        return NULL;
    }
    return c;
}

/* DROP and CREATE a database whose name passed bench_name_valid(). */
static int recreate_db(PGconn *admin, const char *name)
{
    char sql[160];

    snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS %s WITH (FORCE)", name);
    if (sql_ok(admin, sql, 0, NULL, NULL) != 0)
        return -1;
    snprintf(sql, sizeof(sql), "CREATE DATABASE %s", name);
    return sql_ok(admin, sql, 0, NULL, NULL);
}

static void drop_db(PGconn *admin, const char *name)
{
    char sql[160];

    snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS %s WITH (FORCE)", name);
    (void)sql_ok(admin, sql, 0, NULL, NULL);
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Applies schema_dir/install.sql with plain psql, exactly as the test
 * template fixture and an operator do. A directory without install.sql is
 * an older layout (NNN_*.sql applied in lexical order), so that --schema can
 * point at an earlier revision's schema for a comparison. */
static int apply_schema(const struct bench_opts *o, const char *dbname)
{
    DIR *dir = opendir(o->schema_dir);
    struct dirent *e;
    char *files[256];
    int n = 0, rc = -1;

    if (dir == NULL) {
        fprintf(stderr, "og_bench_gate: cannot open %s: %s (use --schema)\n", o->schema_dir,
                strerror(errno));
        return -1;
    }
    while ((e = readdir(dir)) != NULL && n < 256) {
        size_t len = strlen(e->d_name);
        if (strcmp(e->d_name, "install.sql") == 0 ||
            (len > 8 && strspn(e->d_name, "0123456789") == 3 && e->d_name[3] == '_' &&
             strcmp(e->d_name + len - 4, ".sql") == 0))
            files[n++] = strdup(e->d_name);
    }
    closedir(dir);
    qsort(files, (size_t)n, sizeof(files[0]), cmp_name);
    if (n == 0) {
        fprintf(stderr, "og_bench_gate: no install.sql (or NNN_*.sql) in %s (use --schema)\n",
                o->schema_dir);
        goto out;
    }
    /* install.sql sorts after the digits: with it, it alone is applied. */
    for (int i = 0; i < n; i++) {
        char path[PATH_MAX + 300], out[4096];
        char *const argv[] = {"psql", "-X",           "-q", "-v", "ON_ERROR_STOP=1",
                              "-d",   (char *)dbname, "-f", path, NULL};

        if (files[i] == NULL)
            goto out;
        if (strcmp(files[n - 1], "install.sql") == 0 && i != n - 1)
            continue;
        snprintf(path, sizeof(path), "%s/%s", o->schema_dir, files[i]);
        if (bench_run_capture(argv, out, sizeof(out), BENCH_HELPER_TIMEOUT_S) != 0) {
            fprintf(stderr, "og_bench_gate: psql -f %s failed:\n%s\n", path, out);
            goto out;
        }
    }
    printf("schema: %s from %s applied to %s\n",
           strcmp(files[n - 1], "install.sql") == 0 ? "install.sql" : "numbered scripts",
           o->schema_dir, dbname);
    rc = 0;
out:
    for (int i = 0; i < n; i++)
        free(files[i]);
    return rc;
}

/* pgbench -i, then -N with one client; returns tps or -1. */
static double run_pgbench(const struct bench_opts *o, PGconn *admin)
{
    char out[16384], secs[16];
    const char *tps;

    if (recreate_db(admin, o->pgbench_db) != 0)
        return -1;
    {
        char *const argv[] = {"pgbench", "-i", "-q", "-s", "1", (char *)o->pgbench_db, NULL};
        if (bench_run_capture(argv, out, sizeof(out), BENCH_HELPER_TIMEOUT_S) != 0) {
            fprintf(stderr, "og_bench_gate: pgbench -i failed:\n%s\n", out);
            return -1;
        }
    }
    (void)sql_ok(admin, "CHECKPOINT", 0, NULL, NULL);
    snprintf(secs, sizeof(secs), "%d", o->pgbench_seconds);
    {
        char *const argv[] = {
            "pgbench", "-N", "-c", "1", "-j", "1", "-T", secs, (char *)o->pgbench_db, NULL};
        if (bench_run_capture(argv, out, sizeof(out),
                              o->pgbench_seconds + BENCH_HELPER_TIMEOUT_S) != 0) {
            fprintf(stderr, "og_bench_gate: pgbench failed:\n%s\n", out);
            return -1;
        }
    }
    tps = strstr(out, "tps = ");
    if (tps == NULL) {
        fprintf(stderr, "og_bench_gate: no tps in pgbench's output:\n%s\n", out);
        return -1;
    }
    return strtod(tps + 6, NULL);
}

/* Bulk setup of one batch size's orders, straight into the tables (not
 * measured): pending, overdue by an hour, items over the SKUs, a locked
 * coupon on one order in coupon_every, stock reduced by what they hold so
 * that reconcile's stock invariant holds. */
static int place_phase_orders(PGconn *c, const struct bench_opts *o, const char *prefix, int n)
{
    char ns[16], items[16], skus[16], every[16];
    const char *p[4] = {prefix, ns, items, skus};
    const char *pc[3] = {prefix, ns, every};

    snprintf(ns, sizeof(ns), "%d", n);
    snprintf(items, sizeof(items), "%d", o->items);
    snprintf(skus, sizeof(skus), "%d", o->skus);
    snprintf(every, sizeof(every), "%d", o->coupon_every);
    if (sql_ok(c, "BEGIN", 0, NULL, NULL) != 0 ||
        sql_ok(c,
               "INSERT INTO ordergate.coupons (coupon_id, state) "
               "SELECT $1 || 'c' || i, 'locked' FROM generate_series(0, $2::int - 1) i "
               "WHERE $3::int > 0 AND i % $3::int = 0",
               3, pc, NULL) != 0 ||
        sql_ok(
            c,
            "INSERT INTO ordergate.orders (order_no, status, amount_cents, coupon_id, expire_at) "
            "SELECT $1 || i, 'pending_payment', 1000 + (i % 50) * 100, "
            "       CASE WHEN $3::int > 0 AND i % $3::int = 0 THEN $1 || 'c' || i END, "
            "       now() - interval '1 hour' "
            "FROM generate_series(0, $2::int - 1) i",
            3, pc, NULL) != 0 ||
        sql_ok(c,
               "INSERT INTO ordergate.order_items (order_no, sku, qty) "
               "SELECT $1 || i, 'k' || ((i * 7 + j * 13) % $4::int), 1 + j "
               "FROM generate_series(0, $2::int - 1) i, generate_series(0, $3::int - 1) j",
               4, p, NULL) != 0 ||
        sql_ok(c,
               "UPDATE ordergate.inventory v SET available = v.available - h.q "
               "FROM (SELECT it.sku, sum(it.qty) AS q FROM ordergate.order_items it "
               "      WHERE it.order_no LIKE $1 || '%' GROUP BY it.sku) h WHERE v.sku = h.sku",
               1, p, NULL) != 0 ||
        sql_ok(c, "COMMIT", 0, NULL, NULL) != 0)
        return -1;
    return 0;
}

/* Cancels the n orders "<prefix><i>" in batches through the gate client. */
/* One claim_cancel of len orders that must all come back cancelled; 0, or -1 with the reason
 * on stderr. rows has room for len. */
static int bench_claim_checked(struct db *db, const char *const *nos, size_t len,
                               enum gate_source source, struct gate_cancel_row *rows)
{
    struct og_error err = {0};
    size_t nrows = 0;

    if (gate_claim_cancel(db, nos, len, source, rows, &nrows, &err) != OG_OK) {
        fprintf(stderr, "og_bench_gate: claim_cancel failed: %s\n", err.msg);
        return -1;
    }
    for (size_t k = 0; k < nrows; k++)
        if (rows[k].outcome != GATE_CANCELLED) {
            fprintf(stderr, "og_bench_gate: %s came back %s, expected cancelled\n",
                    rows[k].order_no, gate_outcome_str(rows[k].outcome));
            return -1;
        }
    if (nrows != len) {
        fprintf(stderr, "og_bench_gate: %zu rows for %zu orders\n", nrows, len);
        return -1;
    }
    return 0;
}

static int run_phase(struct db *db, const struct bench_opts *o, const char *prefix, int n,
                     int batch, struct phase_result *r)
{
    int pid = db_conn(db) != NULL ? PQbackendPID(db_conn(db)) : 0;
    double cpu0 = pid > 0 ? bench_proc_cpu_s(pid) : -1;
    char(*names)[GATE_ORDER_NO_MAX + 1] = calloc((size_t)n, sizeof(*names));
    const char **nos = calloc((size_t)n, sizeof(*nos));
    struct gate_cancel_row *rows = calloc((size_t)batch, sizeof(*rows));
    double *lat = calloc((size_t)n / (size_t)batch + 1, sizeof(*lat));
    int rc = -1;
    int64_t t0, deadline;

    memset(r, 0, sizeof(*r));
    r->batch = batch;
    if (names == NULL || nos == NULL || rows == NULL || lat == NULL)
        goto out;
    for (int i = 0; i < n; i++) {
        snprintf(names[i], sizeof(names[i]), "%s%d", prefix, i);
        nos[i] = names[i];
    }
    t0 = clock_mono_us();
    deadline = t0 + (int64_t)o->max_seconds * 1000000;
    for (int i = 0; i < n && clock_mono_us() < deadline; i += batch) {
        size_t len = (size_t)(n - i < batch ? n - i : batch);
        int64_t c0 = clock_mono_us();

        if (bench_claim_checked(db, nos + i, len, GATE_SRC_TIMEOUT_SCANNER, rows) != 0)
            goto out;
        lat[r->calls++] = (double)(clock_mono_us() - c0) / 1000.0;
        r->orders += (long)len;
    }
    r->seconds = (double)(clock_mono_us() - t0) / 1e6;
    /* The same backend throughout, or the CPU figure would mix two. */
    if (cpu0 >= 0 && db_conn(db) != NULL && PQbackendPID(db_conn(db)) == pid)
        r->cpu_s = bench_proc_cpu_s(pid) - cpu0;
    else
        r->cpu_s = -1;
    qsort(lat, (size_t)r->calls, sizeof(*lat), bench_cmp_double);
    r->p50_ms = lat[(r->calls - 1) / 2];
    r->p99_ms = lat[(r->calls - 1) * 99 / 100];
    r->max_ms = lat[r->calls - 1];
    rc = 0;
out:
    free(lat);
    free(rows);
    free(nos);
    free(names);
    return rc;
}

static void print_profile(PGconn *c, struct db *db)
{
    struct og_error err = {0};
    PGresult *res;

    /* The gate session flushes its function counters when it goes idle. */
    if (db_exec(db, "SELECT pg_stat_force_next_flush()", &err) != OG_OK ||
        db_exec(db, "SELECT 1", &err) != OG_OK)
        return;
    if (sql_ok(
            c,
            "SELECT funcname, calls, round(total_time::numeric, 1), round(self_time::numeric, 1) "
            "FROM pg_stat_user_functions WHERE schemaname = 'ordergate' "
            "ORDER BY total_time DESC",
            0, NULL, &res) != 0)
        return;
    printf("  %-22s %10s %12s %12s\n", "function", "calls", "total ms", "self ms");
    for (int i = 0; i < PQntuples(res); i++)
        printf("  %-22s %10s %12s %12s\n", PQgetvalue(res, i, 0), PQgetvalue(res, i, 1),
               PQgetvalue(res, i, 2), PQgetvalue(res, i, 3));
    PQclear(res);
    (void)sql_ok(c, "SELECT pg_stat_reset()", 0, NULL, NULL);
}

/* ---- The flash case ---------------------------------------------------------------------- */

struct flash_result {
    int analyzed;
    int round;
    long orders, calls;
    double place_s, place_max_ms;
    double claim_s;
    double p50_ms, p99_ms, max_ms;
    double first[10];
    int nfirst;
    double cpu_s;            /* claim session's backend CPU, -1 when unknown */
    double wal_kb_per_order; /* claim phase */
    char reltuples[32];      /* orders' reltuples and pg_stats rows when the claims began */
    char stats_rows[32];
    char autovac[32]; /* autovacuum/autoanalyze runs on the database's tables by then */
    long violations;
};

/* The order number, lines and coupon of flash order i: one or two lines, the first on one of the
 * hot SKUs (the first 4/5), the second on one of the others; a coupon on one order in
 * coupon_every. */
static void flash_order(const void *arg, long i, struct bench_place_order *order)
{
    const struct bench_opts *o = arg;
    int hot = o->flash_skus * 4 / 5, cold = o->flash_skus - hot;

    snprintf(order->order_no, sizeof(order->order_no), "f%ld", i);
    order->amount_cents = 1000 + (i % 50) * 100;
    if (i % 2 == 0 && cold > 0)
        snprintf(order->items, sizeof(order->items),
                 "[{\"sku\": \"k%ld\", \"qty\": 1}, {\"sku\": \"k%ld\", \"qty\": 2}]",
                 (i * 7) % hot, hot + (i / 2) % cold);
    else
        snprintf(order->items, sizeof(order->items), "[{\"sku\": \"k%ld\", \"qty\": 1}]",
                 (i * 7) % hot);
    if (o->coupon_every > 0 && i % o->coupon_every == 0)
        snprintf(order->coupon, sizeof(order->coupon), "fc%ld", i);
}

/* One flash database: fresh, autovacuum off, stock and coupons, orders through place_order from
 * flash_clients sessions, ANALYZE or not, a CHECKPOINT (both ways), then the claims from a new
 * session. */
static int flash_run(const struct bench_opts *o, PGconn *admin, int analyzed, int round,
                     struct flash_result *r)
{
    char dbname[80], conninfo[160], expire_at[40], lsn[64], n_s[16], skus_s[16], every_s[16];
    const char *p_stock[1] = {skus_s};
    const char *p_coupons[2] = {n_s, every_s};
    struct bench_place_result placed = {0};
    const char **nos = NULL;
    char(*names)[16] = NULL;
    struct gate_cancel_row *rows = NULL;
    double *lat = NULL, *sorted = NULL, t0;
    PGconn *c = NULL;
    struct db *db = NULL;
    struct og_error err = {0};
    int rc = -1;
    pid_t pid;
    double cpu0;

    memset(r, 0, sizeof(*r));
    r->analyzed = analyzed;
    r->round = round;
    r->violations = -1;
    snprintf(dbname, sizeof(dbname), "%s_flash_case", o->dbname);
    if (!bench_name_valid(dbname)) {
        fprintf(stderr, "og_bench_gate: %s: too long for a database name (shorten --dbname)\n",
                dbname);
        return -1; /* nothing made yet, and a name that long must not reach DROP DATABASE */
    }
    if (recreate_db(admin, dbname) != 0 || apply_schema(o, dbname) != 0)
        goto out;
    snprintf(conninfo, sizeof(conninfo), "dbname=%s", dbname);
    c = connect_db(conninfo);
    if (c == NULL)
        goto out;
    snprintf(n_s, sizeof(n_s), "%d", o->flash_orders);
    snprintf(skus_s, sizeof(skus_s), "%d", o->flash_skus);
    snprintf(every_s, sizeof(every_s), "%d", o->coupon_every);
    /* No autovacuum, so that nothing analyzes the tables behind the run's back: what a flash
     * sale meets when the orders come faster than autovacuum_naptime. */
    if (sql_ok(c,
               "DO $$ DECLARE t regclass; BEGIN "
               "FOR t IN SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = "
               "c.relnamespace WHERE n.nspname = 'ordergate' AND c.relkind = 'r' LOOP "
               "EXECUTE format('ALTER TABLE %s SET (autovacuum_enabled = false)', t); "
               "END LOOP; END $$",
               0, NULL, NULL) != 0 ||
        sql_ok(c,
               "SELECT count(ordergate.add_stock('k' || i, 1000000000)) "
               "FROM generate_series(0, $1::int - 1) i",
               1, p_stock, NULL) != 0 ||
        sql_ok(c,
               "SELECT count(ordergate.add_coupon('fc' || i)) FROM generate_series(0, $1::int - 1) "
               "i WHERE $2::int > 0 AND i % $2::int = 0",
               2, p_coupons, NULL) != 0)
        goto out;

    /* Every order due at the moment placement starts: all of them are due when the claims
     * begin, as they are at the end of a flash sale's payment window. */
    clock_format_iso(clock_wall_ms(), expire_at, sizeof(expire_at));
    if (bench_place_orders(conninfo, "og_bench_gate-place", o->flash_clients, o->flash_orders,
                           expire_at, flash_order, o, &placed) != 0) {
        fprintf(stderr, "og_bench_gate: %s\n", placed.error);
        goto out;
    }
    r->place_s = placed.seconds;
    r->place_max_ms = placed.max_ms;
    if (analyzed && sql_ok(c, "ANALYZE", 0, NULL, NULL) != 0)
        goto out;
    (void)sql_ok(c, "CHECKPOINT", 0, NULL, NULL);
    sql_text(c, "SELECT reltuples::bigint FROM pg_class WHERE oid = 'ordergate.orders'::regclass",
             r->reltuples, sizeof(r->reltuples));
    sql_text(c,
             "SELECT count(*) FROM pg_stats WHERE schemaname = 'ordergate' AND tablename = "
             "'orders'",
             r->stats_rows, sizeof(r->stats_rows));
    sql_text(c,
             "SELECT coalesce(sum(autovacuum_count + autoanalyze_count), 0) FROM "
             "pg_stat_user_tables WHERE schemaname = 'ordergate'",
             r->autovac, sizeof(r->autovac));

    names = calloc((size_t)o->flash_orders, sizeof(*names));
    nos = calloc((size_t)o->flash_orders, sizeof(*nos));
    rows = calloc((size_t)o->flash_batch, sizeof(*rows));
    lat = calloc((size_t)(o->flash_orders / o->flash_batch + 1), sizeof(*lat));
    sorted = calloc((size_t)(o->flash_orders / o->flash_batch + 1), sizeof(*sorted));
    if (names == NULL || nos == NULL || rows == NULL || lat == NULL || sorted == NULL)
        goto out;
    for (int i = 0; i < o->flash_orders; i++) {
        snprintf(names[i], sizeof(names[i]), "f%d", i);
        nos[i] = names[i];
    }
    /* A new session: its plan cache starts empty, like a consumer's after a restart. */
    db = db_new(conninfo, NULL, "og_bench_gate-flash", NULL, NULL);
    if (db == NULL || db_connect(db, &err) != OG_OK) {
        fprintf(stderr, "og_bench_gate: %s\n", db ? err.msg : "out of memory");
        goto out;
    }
    pid = PQbackendPID(db_conn(db));
    cpu0 = bench_proc_cpu_s(pid);
    sql_text(c, "SELECT pg_current_wal_lsn()", lsn, sizeof(lsn));
    t0 = bench_mono_s();
    for (int i = 0; i < o->flash_orders; i += o->flash_batch) {
        size_t len =
            (size_t)(o->flash_orders - i < o->flash_batch ? o->flash_orders - i : o->flash_batch);
        int64_t c0 = clock_mono_us();

        if (bench_claim_checked(db, nos + i, len, GATE_SRC_TIMEOUT_CONSUMER, rows) != 0)
            goto out;
        lat[r->calls++] = (double)(clock_mono_us() - c0) / 1000.0;
        r->orders += (long)len;
    }
    r->claim_s = bench_mono_s() - t0;
    r->cpu_s = cpu0 >= 0 && PQbackendPID(db_conn(db)) == pid ? bench_proc_cpu_s(pid) - cpu0 : -1;
    {
        const char *p[1] = {lsn};
        PGresult *res;
        r->wal_kb_per_order = -1;
        if (sql_ok(c, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)", 1, p, &res) ==
            0) {
            r->wal_kb_per_order = atof(PQgetvalue(res, 0, 0)) / 1024.0 / (double)r->orders;
            PQclear(res);
        }
    }
    r->nfirst = r->calls < 10 ? (int)r->calls : 10;
    for (int i = 0; i < r->nfirst; i++)
        r->first[i] = lat[i];
    memcpy(sorted, lat, (size_t)r->calls * sizeof(*sorted));
    qsort(sorted, (size_t)r->calls, sizeof(*sorted), bench_cmp_double);
    r->p50_ms = sorted[(r->calls - 1) / 2];
    r->p99_ms = sorted[(r->calls - 1) * 99 / 100];
    r->max_ms = sorted[r->calls - 1];
    {
        PGresult *res;
        if (sql_ok(c, "SELECT coalesce(sum(violations), -1) FROM ordergate.reconcile()", 0, NULL,
                   &res) == 0) {
            r->violations = atol(PQgetvalue(res, 0, 0));
            PQclear(res);
        }
    }
    printf("flash %-10s round %d: %ld orders placed in %.1f s (%.0f/s, %d sessions, slowest "
           "call %.0f ms); before the claims: orders reltuples %s, %s pg_stats rows, %s "
           "autovacuum runs\n",
           analyzed ? "ANALYZE" : "no ANALYZE", round, placed.placed, r->place_s,
           (double)placed.placed / r->place_s, o->flash_clients, r->place_max_ms, r->reltuples,
           r->stats_rows, r->autovac);
    printf("  claims: %ld calls of %d in %.2f s = %.0f orders/s; call p50 %.1f ms, p99 %.1f ms, "
           "max %.1f ms; backend cpu %.1f ms/call; WAL %.2f KB/order; reconcile %ld violations\n",
           r->calls, o->flash_batch, r->claim_s, (double)r->orders / r->claim_s, r->p50_ms,
           r->p99_ms, r->max_ms, r->cpu_s >= 0 ? r->cpu_s * 1000.0 / (double)r->calls : -1.0,
           r->wal_kb_per_order, r->violations);
    printf("  calls 1..%d (ms):", r->nfirst);
    for (int i = 0; i < r->nfirst; i++)
        printf(" %.1f", r->first[i]);
    printf("\n");
    fflush(stdout);
    rc = r->violations == 0 ? 0 : -1;
out:
    db_free(db);
    free(sorted);
    free(lat);
    free(rows);
    free(nos);
    free(names);
    PQfinish(c);
    if (!o->keep)
        drop_db(admin, dbname);
    return rc;
}

/* Rounds of (no ANALYZE, ANALYZE), the order alternating between rounds so that a drift of
 * the machine's load does not favour one; then the table and the ratio. */
static int flash_case(const struct bench_opts *o, PGconn *admin)
{
    struct flash_result res[40];
    int n = 0;
    double rate[2] = {0, 0}, secs[2] = {0, 0}, orders[2] = {0, 0};
    char load[64], psi[32];

    printf("\nflash case: a fresh database per run, autovacuum off on its tables, %d orders "
           "placed through place_order() from %d sessions on %d SKUs (%d hot; 1 or 2 lines, a "
           "coupon on 1 in %d), all due when placement starts; CHECKPOINT, then gate_claim_cancel "
           "in batches of %d from one new session. No VACUUM/ANALYZE between placement and "
           "claims, then the same with ANALYZE.\n",
           o->flash_orders, o->flash_clients, o->flash_skus, o->flash_skus * 4 / 5, o->coupon_every,
           o->flash_batch);
    bench_cpu_pressure(psi, sizeof(psi));
    printf("load average %s, cpu pressure avg60 %s at the start\n",
           bench_load_average(load, sizeof(load)), psi);
    fflush(stdout);
    for (int round = 1; round <= o->flash_rounds; round++)
        for (int k = 0; k < 2; k++) {
            int analyzed = round % 2 == 1 ? k : 1 - k;
            if (flash_run(o, admin, analyzed, round, &res[n]) != 0)
                return -1;
            secs[analyzed] += res[n].claim_s;
            orders[analyzed] += (double)res[n].orders;
            n++;
        }
    printf("\n%-11s %5s %9s %9s %9s %8s %8s %8s  %s\n", "flash", "round", "orders", "seconds",
           "orders/s", "p50 ms", "p99 ms", "max ms", "calls 1..10 (ms)");
    for (int i = 0; i < n; i++) {
        printf("%-11s %5d %9ld %9.2f %9.0f %8.1f %8.1f %8.1f ",
               res[i].analyzed ? "ANALYZE" : "no ANALYZE", res[i].round, res[i].orders,
               res[i].claim_s, (double)res[i].orders / res[i].claim_s, res[i].p50_ms, res[i].p99_ms,
               res[i].max_ms);
        for (int k = 0; k < res[i].nfirst; k++)
            printf(" %.0f", res[i].first[k]);
        printf("\n");
    }
    for (int k = 0; k < 2; k++)
        rate[k] = orders[k] / secs[k];
    bench_cpu_pressure(psi, sizeof(psi));
    printf("flash claims, no ANALYZE / ANALYZE: %.0f / %.0f orders/s = %.1f %% (all rounds); load "
           "average %s, cpu pressure avg60 %s at the end\n",
           rate[0], rate[1], 100.0 * rate[0] / rate[1], bench_load_average(load, sizeof(load)),
           psi);
    return 0;
}

int main(int argc, char **argv)
{
    struct bench_opts o;
    struct phase_result results[BENCH_MAX_BATCHES];
    char conninfo[512], lsn[64], fsync_v[32], sync_v[32], fpw[32], method[32], version[64];
    PGconn *admin = NULL, *c = NULL;
    struct db *db = NULL;
    struct og_error err = {0};
    double pgbench_tps = -1;
    int rc = 1, created = 0, nresults = 0;
    long violations = -1;

    if (parse_args(argc, argv, &o) != 0)
        return 2;
    log_init("og_bench_gate", LOG_LVL_WARN);

    admin = connect_db("dbname=postgres options='-c client_min_messages=warning'");
    if (admin == NULL)
        goto out;
    if (o.db != NULL) {
        snprintf(conninfo, sizeof(conninfo), "%s", o.db);
    } else {
        if (recreate_db(admin, o.dbname) != 0)
            goto out;
        created = 1;
        if (apply_schema(&o, o.dbname) != 0)
            goto out;
        snprintf(conninfo, sizeof(conninfo), "dbname=%s", o.dbname);
    }
    c = connect_db(conninfo);
    if (c == NULL)
        goto out;

    sql_text(c, "SHOW fsync", fsync_v, sizeof(fsync_v));
    sql_text(c, "SHOW synchronous_commit", sync_v, sizeof(sync_v));
    sql_text(c, "SHOW full_page_writes", fpw, sizeof(fpw));
    sql_text(c, "SHOW wal_sync_method", method, sizeof(method));
    sql_text(c, "SELECT split_part(version(), ' ', 2)", version, sizeof(version));
    printf("server: PostgreSQL %s  fsync=%s  synchronous_commit=%s  full_page_writes=%s  "
           "wal_sync_method=%s\n",
           version, fsync_v, sync_v, fpw, method);
    printf("host: %ld CPUs online, load average %s (shared machine: other work skews "
           "wall-clock figures; the backend CPU columns do not depend on it as much)\n",
           sysconf(_SC_NPROCESSORS_ONLN), bench_load_average(lsn, sizeof(lsn)));
    if ((strcmp(fsync_v, "on") != 0 || strcmp(sync_v, "on") != 0) && !o.allow_nondurable) {
        fprintf(stderr,
                "og_bench_gate: commits are not durable on this server (fsync=%s, "
                "synchronous_commit=%s); figures would be meaningless. Use "
                "--allow-nondurable to run anyway.\n",
                fsync_v, sync_v);
        goto out;
    }
    if (sql_ok(c, "SELECT count(*) FROM ordergate.schema_migrations", 0, NULL, NULL) != 0) {
        fprintf(stderr, "og_bench_gate: the database has no ordergate schema\n");
        goto out;
    }
    {
        char m1[40], m2[40], m3[40], psi[32];
        sql_text(c,
                 "SELECT md5(string_agg(prosrc, '' ORDER BY oid)) FROM pg_proc WHERE proname = "
                 "'claim_cancel'",
                 m1, sizeof(m1));
        sql_text(
            c,
            "SELECT md5(string_agg(prosrc || coalesce(proconfig::text, ''), '' ORDER BY "
            "proname)) FROM pg_proc WHERE proname IN ('_cancel_orders', '_cancel_orders_claim')",
            m2, sizeof(m2));
        sql_text(c,
                 "SELECT md5(string_agg(prosrc, '' ORDER BY oid)) FROM pg_proc WHERE proname = "
                 "'place_order'",
                 m3, sizeof(m3));
        bench_cpu_pressure(psi, sizeof(psi));
        printf("gate functions: claim_cancel md5 %s, _cancel_orders+_cancel_orders_claim md5 %s, "
               "place_order md5 %s; "
               "cpu pressure avg60 %s\n",
               m1, m2, m3, psi);
    }
    if (!o.case_standard) {
        rc = flash_case(&o, admin) == 0 ? 0 : 1;
        goto out;
    }

    if (!o.no_pgbench) {
        printf("pgbench: -i -s 1 on %s, then -N -c 1 -j 1 -T %d ...\n", o.pgbench_db,
               o.pgbench_seconds);
        fflush(stdout);
        pgbench_tps = run_pgbench(&o, admin);
        if (pgbench_tps <= 0)
            goto out;
        if (!o.keep)
            drop_db(admin, o.pgbench_db);
    }

    /* Stock: a billion units per SKU, reduced by what the placed orders hold. */
    {
        char skus[16];
        const char *p[1] = {skus};
        snprintf(skus, sizeof(skus), "%d", o.skus);
        if (sql_ok(c,
                   "INSERT INTO ordergate.inventory (sku, available, total) "
                   "SELECT 'k' || i, 1000000000, 1000000000 FROM generate_series(0, $1::int - 1) i "
                   "ON CONFLICT (sku) DO NOTHING",
                   1, p, NULL) != 0)
            goto out;
    }
    db = db_new(conninfo, NULL, "og_bench_gate", NULL, NULL);
    if (db == NULL || db_connect(db, &err) != OG_OK) {
        fprintf(stderr, "og_bench_gate: %s\n", db ? err.msg : "out of memory");
        goto out;
    }
    if (o.profile && db_exec(db, "SET track_functions = 'pl'", &err) != OG_OK) {
        fprintf(stderr, "og_bench_gate: --profile: %s\n", err.msg);
        goto out;
    }

    printf("data: per batch size its own overdue orders, %d line(s) each over %d SKUs, a coupon "
           "on 1 in %d;\n      every cancel restocks, returns the coupon, writes status_log and "
           "outbox; one session, one statement and one durable commit per call\n\n",
           o.items, o.skus, o.coupon_every);
    printf("%6s %9s %8s %8s %11s %9s %8s %8s %8s %9s %11s %9s\n", "batch", "orders", "calls",
           "seconds", "orders/s", "tx/s", "p50 ms", "p99 ms", "max ms", "cpu ms/tx", "orders/cpu-s",
           "WAL KB/tx");
    for (int b = 0; b < o.nbatches; b++) {
        char prefix[32];
        int n = o.batches[b] < 100 ? o.small_orders : o.orders;
        int64_t stamp = clock_wall_ms();
        struct phase_result *r = &results[nresults];

        /* Unique per run, so --db can be reused. */
        snprintf(prefix, sizeof(prefix), "b%d-%lld-", o.batches[b], (long long)(stamp % 100000000));
        if (place_phase_orders(c, &o, prefix, n) != 0)
            goto out;
        (void)sql_ok(c, "VACUUM ANALYZE ordergate.orders", 0, NULL, NULL);
        (void)sql_ok(c, "VACUUM ANALYZE ordergate.order_items", 0, NULL, NULL);
        (void)sql_ok(c, "VACUUM ANALYZE ordergate.inventory", 0, NULL, NULL);
        (void)sql_ok(c, "VACUUM ANALYZE ordergate.coupons", 0, NULL, NULL);
        (void)sql_ok(c, "CHECKPOINT", 0, NULL, NULL);
        sql_text(c, "SELECT pg_current_wal_lsn()", lsn, sizeof(lsn));
        if (run_phase(db, &o, prefix, n, o.batches[b], r) != 0)
            goto out;
        {
            const char *p[1] = {lsn};
            PGresult *res;
            r->wal_bytes = -1;
            if (sql_ok(c, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)", 1, p, &res) ==
                0) {
                r->wal_bytes = atof(PQgetvalue(res, 0, 0));
                PQclear(res);
            }
        }
        nresults++;
        printf("%6d %9ld %8ld %8.2f %11.0f %9.1f %8.2f %8.2f %8.2f", r->batch, r->orders, r->calls,
               r->seconds, (double)r->orders / r->seconds, (double)r->calls / r->seconds, r->p50_ms,
               r->p99_ms, r->max_ms);
        if (r->cpu_s > 0)
            printf(" %9.2f %11.0f", r->cpu_s * 1000.0 / (double)r->calls,
                   (double)r->orders / r->cpu_s);
        else
            printf(" %9s %11s", "-", "-");
        printf(" %9.1f\n", r->wal_bytes / 1024.0 / (double)r->calls);
        fflush(stdout);
        if (o.profile)
            print_profile(c, db);
    }

    {
        PGresult *res;
        if (sql_ok(c, "SELECT coalesce(sum(violations), -1) FROM ordergate.reconcile()", 0, NULL,
                   &res) == 0) {
            violations = atol(PQgetvalue(res, 0, 0));
            PQclear(res);
        }
    }

    printf("\n");
    if (pgbench_tps > 0) {
        printf("pgbench -N -c1 -j1 -T%d (same server, durable, single client): %.1f tps\n\n",
               o.pgbench_seconds, pgbench_tps);
        printf("%6s %11s %9s %16s %16s\n", "batch", "orders/s", "tx/s", "orders/s : tps",
               "tx/s : tps");
        for (int i = 0; i < nresults; i++) {
            double ops = (double)results[i].orders / results[i].seconds;
            double tps = (double)results[i].calls / results[i].seconds;
            printf("%6d %11.0f %9.1f %15.2fx %15.2fx\n", results[i].batch, ops, tps,
                   ops / pgbench_tps, tps / pgbench_tps);
        }
        printf("\n");
    }
    for (int i = 0; i < nresults; i++)
        if (results[i].batch == BENCH_TARGET_BATCH) {
            double ops = (double)results[i].orders / results[i].seconds;
            printf("target: >= %.0f orders/s at batch %d: %s (%.0f orders/s)\n", BENCH_TARGET_RATE,
                   BENCH_TARGET_BATCH, ops >= BENCH_TARGET_RATE ? "met" : "NOT met", ops);
        }
    printf("reconcile after the run: %ld violations; load average at the end %s\n", violations,
           bench_load_average(lsn, sizeof(lsn)));
    printf("columns: tx = one gate_claim_cancel call (one statement, one commit); cpu ms/tx = CPU "
           "of the server\nbackend per call (from /proc); orders/cpu-s = orders per CPU-second of "
           "that backend, i.e. the\nrate one session reaches with a core to itself and free "
           "commits; WAL KB/tx = WAL written per call.\n");
    rc = violations == 0 ? 0 : 1;
    if (o.case_flash && flash_case(&o, admin) != 0)
        rc = 1;
out:
    db_free(db);
    PQfinish(c);
    if (admin != NULL && created && !o.keep)
        drop_db(admin, o.dbname);
    PQfinish(admin);
    return rc;
}
