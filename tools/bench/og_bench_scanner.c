/* og_bench_scanner: the fallback sweep at scale. Prints figures; not a test.
 *
 * In a database of its own (copied from the template the tests build,
 * ordergate_tpl) it loads orders with generate_series in SQL, then measures:
 *
 *   1. the sweep's page query (ordergate.scan_overdue, one keyset page, as the
 *      scanner sends it) at 1,000,000 rows and again at 10,000,000 rows, from
 *      the front of the overdue range and from its middle;
 *   2. a real sweep: the built ordergate-scanner, run as cron would, claims
 *      1,000,000 overdue orders among the 10,000,000 (orders/s, from its run
 *      row and its own page/claim histograms);
 *   3. the page query right after that churn (1,000,000 entries of the
 *      partial index just turned dead, autovacuum off, before VACUUM), then
 *      after VACUUM;
 *   4. where a batch's time goes: every statement inside one claim_cancel
 *      call, with auto_explain's actual times.
 *
 * Row mix, repeated every 100 orders: 11 pending and overdue (every tenth
 * with a coupon), 2 pending and not yet due, 87 closed (paid or cancelled);
 * every order has one item line (1,000 SKUs). expire_at grows with insertion
 * order over the past week (--layout time: orders expire a fixed time after
 * they are placed) or is scattered over it (--layout random). So 10M rows
 * hold 1.1M overdue orders; the sweep is capped at 1M (--max-orders) and
 * leaves the 100,000 newest overdue behind the dead region for step 3.
 *
 * Connection parameters come from libpq's environment (PGHOST, PGPORT,
 * PGUSER). Exit status: 0 done, 1 runtime failure, 2 bad usage. */
#include <errno.h>
#include <libpq-fe.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/child.h"
#include "common/clock.h"
#include "common/parse.h"
#include "common/path.h"
#include "tools/bench/support/bench_opt.h"
#include "tools/bench/support/bench_pg.h"
#include "tools/bench/support/bench_prom.h"
#include "tools/bench/support/bench_run.h"

/* Largest table the options accept; the sweep's cap is an int in the
 * scanner (--max-orders), and this keeps it there. */
#define BENCH_MAX_ROWS 1000000000L

struct bench_opts {
    const char *dbname;
    const char *template_db;
    long small_rows; /* first measurement point */
    long rows;       /* second measurement point and sweep */
    long sweep;      /* orders the sweep claims (--max-orders) */
    int batch;
    int workers; /* the scanner's --workers */
    int pages;
    int chunk;
    int random_layout; /* expire_at unrelated to insertion order */
    char scanner[PATH_MAX];
    bool keep;
};

static PGconn *bench_conn;

static void bench_exec(PGconn *conn, const char *sql)
{
    PGresult *res = PQexec(conn, sql);

    if (PQresultStatus(res) != PGRES_COMMAND_OK && PQresultStatus(res) != PGRES_TUPLES_OK)
        bench_die("%s\n%s", sql, PQerrorMessage(conn));
    PQclear(res);
}

static double bench_scalar(PGconn *conn, const char *sql)
{
    PGresult *res = PQexec(conn, sql);
    double v;

    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
        bench_die("%s\n%s", sql, PQerrorMessage(conn));
    v = PQgetisnull(res, 0, 0) ? 0 : strtod(PQgetvalue(res, 0, 0), NULL);
    PQclear(res);
    return v;
}

/* A server setting's value (name is a constant of this file). */
static const char *bench_show(const char *name, char *buf, size_t size)
{
    const char *params[1] = {name};
    PGresult *res =
        PQexecParams(bench_conn, "SELECT current_setting($1)", 1, NULL, params, NULL, NULL, 0);

    snprintf(buf, size, "%s", PQresultStatus(res) == PGRES_TUPLES_OK ? PQgetvalue(res, 0, 0) : "?");
    PQclear(res);
    return buf;
}

static void bench_execf(PGconn *conn, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void bench_execf(PGconn *conn, const char *fmt, ...)
{
    char sql[4096];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(sql, sizeof(sql), fmt, ap);
    va_end(ap);
    bench_exec(conn, sql);
}

/* Loads rows (lo, hi] in chunks: coupons first (foreign key), then orders
 * and the items of the pending ones in one statement. */
static void bench_load(const struct bench_opts *o, long lo, long hi)
{
    int64_t t0 = clock_mono_ms();

    for (long a = lo; a < hi; a += o->chunk) {
        long b = a + o->chunk < hi ? a + o->chunk : hi;
        int64_t c0 = clock_mono_ms();

        bench_execf(bench_conn,
                    "INSERT INTO ordergate.coupons (coupon_id, state) SELECT 'BC-' || g, 'locked' "
                    "FROM generate_series(%ld, %ld) g WHERE g %% 100 < 11 AND g %% 10 = 0",
                    a + 1, b);
        bench_execf(
            bench_conn,
            "WITH ins AS ("
            " INSERT INTO ordergate.orders (order_no, status, amount_cents, coupon_id, expire_at,"
            "  original_expire_at, created_at, closed_at)"
            " SELECT 'BS-' || g, x.status, 100 + g %% 900,"
            "  CASE WHEN g %% 100 < 11 AND g %% 10 = 0 THEN 'BC-' || g END, x.e, x.e,"
            "  x.e - interval '30 minutes', CASE WHEN x.status <> 'pending_payment' THEN x.e END"
            " FROM generate_series(%ld, %ld) g, LATERAL (SELECT"
            "  CASE WHEN g %% 100 < 13 THEN 'pending_payment' WHEN g %% 2 = 0 THEN 'paid'"
            "   ELSE 'cancelled' END AS status,"
            "  CASE WHEN g %% 100 BETWEEN 11 AND 12 THEN now() + (60 + g %% 3600) * interval '1 s'"
            "   WHEN %d = 1"
            "   THEN now() - interval '2 minutes' - ((g::bigint * 7919) %% 604800) * interval '1 s'"
            "   ELSE now() - interval '2 minutes' - interval '7 days'"
            "    + (g::double precision / %ld) * interval '7 days'"
            "    + (g %% 2) * interval '15 minutes' - interval '15 minutes'"
            "  END AS e) x"
            " RETURNING order_no, status, substr(order_no, 4)::bigint AS g)"
            " INSERT INTO ordergate.order_items (order_no, sku, qty)"
            " SELECT order_no, 'BSKU-' || (g %% 1000), 1 FROM ins",
            a + 1, b, o->random_layout, o->rows);
        bench_progress("loaded rows %ld..%ld in %.1f s", a + 1, b,
                       (double)(clock_mono_ms() - c0) / 1000.0);
    }
    bench_progress("load of %ld rows: %.1f s", hi - lo, (double)(clock_mono_ms() - t0) / 1000.0);
}

static void bench_vacuum(void)
{
    int64_t t0 = clock_mono_ms();

    bench_exec(bench_conn, "VACUUM (ANALYZE) ordergate.orders");
    bench_exec(bench_conn, "VACUUM (ANALYZE) ordergate.order_items");
    bench_exec(bench_conn, "VACUUM (ANALYZE) ordergate.coupons");
    bench_progress("vacuum analyze: %.1f s", (double)(clock_mono_ms() - t0) / 1000.0);
}

static void bench_sizes(const char *label)
{
    printf(
        "  %-28s orders %.0f rows, %.0f MB heap; orders_overdue_idx %.0f entries, %.1f MB; "
        "pkey %.0f MB\n",
        label, bench_scalar(bench_conn, "SELECT count(*) FROM ordergate.orders"),
        bench_scalar(bench_conn, "SELECT pg_relation_size('ordergate.orders') / 1048576.0"),
        bench_scalar(bench_conn, "SELECT count(*) FROM ordergate.orders WHERE status = "
                                 "'pending_payment'"),
        bench_scalar(bench_conn,
                     "SELECT pg_relation_size('ordergate.orders_overdue_idx') / 1048576.0"),
        bench_scalar(bench_conn, "SELECT pg_relation_size('ordergate.orders_pkey') / 1048576.0"));
}

/* Walks `pages` keyset pages from a position (NULLs = the front) with the
 * scanner's statement, timing each; prints first/median/p95/max. */
static void bench_pages(const char *label, const char *after_expire, const char *after_order,
                        int pages, int batch)
{
    static int prepared;
    char exp[64] = "", ord[80] = "", lim[16];
    const char *params[3];
    double *ms = calloc((size_t)pages, sizeof(double));
    double first = 0;
    long rows = 0;
    int n = 0;

    if (ms == NULL)
        bench_die("out of memory");
    if (!prepared) {
        PGresult *r = PQprepare(bench_conn, "page",
                                "SELECT order_no, expire_at FROM ordergate.scan_overdue("
                                "make_interval(secs => 60), $1::timestamptz, $2, $3::int)",
                                3, NULL);
        if (PQresultStatus(r) != PGRES_COMMAND_OK)
            bench_die("prepare: %s", PQerrorMessage(bench_conn));
        PQclear(r);
        prepared = 1;
    }
    if (after_expire != NULL) {
        snprintf(exp, sizeof(exp), "%s", after_expire);
        snprintf(ord, sizeof(ord), "%s", after_order);
    }
    snprintf(lim, sizeof(lim), "%d", batch);
    for (n = 0; n < pages; n++) {
        int64_t t0;
        PGresult *r;

        params[0] = exp[0] ? exp : NULL;
        params[1] = exp[0] ? ord : NULL;
        params[2] = lim;
        t0 = clock_mono_us();
        r = PQexecPrepared(bench_conn, "page", 3, params, NULL, NULL, 0);
        ms[n] = (double)(clock_mono_us() - t0) / 1000.0;
        if (PQresultStatus(r) != PGRES_TUPLES_OK)
            bench_die("page: %s", PQerrorMessage(bench_conn));
        if (n == 0)
            first = ms[0];
        rows += PQntuples(r);
        if (PQntuples(r) == 0) {
            PQclear(r);
            n++;
            break;
        }
        snprintf(exp, sizeof(exp), "%s", PQgetvalue(r, PQntuples(r) - 1, 1));
        snprintf(ord, sizeof(ord), "%s", PQgetvalue(r, PQntuples(r) - 1, 0));
        PQclear(r);
    }
    qsort(ms, (size_t)n, sizeof(double), bench_cmp_double);
    printf("  %-40s %4d pages of %d (%ld rows): first %7.2f ms, median %6.2f ms, p95 %6.2f ms, "
           "max %7.2f ms\n",
           label, n, batch, rows, first, ms[n / 2], ms[(n * 95) / 100 < n ? (n * 95) / 100 : n - 1],
           ms[n - 1]);
    fflush(stdout);
    free(ms);
}

/* The page query from the middle of the overdue range. */
static void bench_pages_middle(const char *label, const struct bench_opts *o)
{
    char sql[512];
    PGresult *r;
    long overdue = (long)bench_scalar(bench_conn, "SELECT overdue FROM "
                                                  "ordergate.scan_overdue_count(make_interval("
                                                  "secs => 60))");

    snprintf(sql, sizeof(sql),
             "SELECT expire_at, order_no FROM ordergate.orders WHERE status = 'pending_payment' "
             "AND expire_at < now() - interval '60 s' ORDER BY expire_at, order_no OFFSET %ld "
             "LIMIT 1",
             overdue / 2);
    r = PQexec(bench_conn, sql);
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)
        bench_die("middle: %s", PQerrorMessage(bench_conn));
    bench_pages(label, PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1), o->pages, o->batch);
    PQclear(r);
}

/* Cluster-wide WAL and checkpoint counters (pg_stat_wal, pg_stat_bgwriter)
 * and this database's block reads: what a sweep costs besides CPU. */
struct bench_wal {
    double bytes, fpi, checkpoints, reads;
};

static void bench_wal_snapshot(struct bench_wal *w)
{
    w->bytes = bench_scalar(bench_conn, "SELECT wal_bytes FROM pg_stat_wal");
    w->fpi = bench_scalar(bench_conn, "SELECT wal_fpi FROM pg_stat_wal");
    w->checkpoints = bench_scalar(bench_conn, "SELECT checkpoints_timed + checkpoints_req FROM "
                                              "pg_stat_bgwriter");
    w->reads = bench_scalar(bench_conn, "SELECT blks_read FROM pg_stat_database WHERE datname = "
                                        "current_database()");
}

static void bench_sweep(const struct bench_opts *o)
{
    char db_arg[256], batch[16], workers[16], max_orders[24], prom_path[128], text[65536] = "";
    const char *argv[18];
    struct og_error err = {0};
    int status;
    int64_t t0;
    double wall, duration_ms, cancelled, batches;
    FILE *fp;
    struct bench_wal w0, w1;

    snprintf(db_arg, sizeof(db_arg), "dbname=%s", o->dbname);
    snprintf(batch, sizeof(batch), "%d", o->batch);
    snprintf(workers, sizeof(workers), "%d", o->workers);
    snprintf(max_orders, sizeof(max_orders), "%ld", o->sweep);
    snprintf(prom_path, sizeof(prom_path), "/tmp/og_bench_scanner.%d.prom", (int)getpid());
    argv[0] = o->scanner;
    argv[1] = "--db";
    argv[2] = db_arg;
    argv[3] = "--grace";
    argv[4] = "60";
    argv[5] = "--batch-size";
    argv[6] = batch;
    argv[7] = "--pause-ms";
    argv[8] = "0";
    argv[9] = "--max-orders";
    argv[10] = max_orders;
    argv[11] = "--textfile";
    argv[12] = prom_path;
    argv[13] = "--log-level";
    argv[14] = "warn";
    argv[15] = "--workers";
    argv[16] = workers;
    argv[17] = NULL;
    printf("\nsweep: %s --batch-size %s --pause-ms 0 --max-orders %s --workers %s\n", o->scanner,
           batch, max_orders, workers);
    bench_wal_snapshot(&w0);
    fflush(stdout);
    t0 = clock_mono_ms();
    /* Bounded: an hour, and a second per 1,000 orders on top, means it is stuck. */
    status = child_run(argv, NULL, (3600 + o->sweep / 1000) * 1000L, &err);
    wall = (double)(clock_mono_ms() - t0) / 1000.0;
    /* Its backend reports its statistics when it exits, just after the client. */
    for (int i = 0; i < 100 && bench_scalar(bench_conn, "SELECT count(*) FROM pg_stat_activity "
                                                        "WHERE application_name = "
                                                        "'ordergate-scanner'") > 0;
         i++)
        usleep(50000);
    bench_wal_snapshot(&w1);
    if (status < 0)
        bench_die("the scanner failed: %s", err.msg);
    if (status != 0)
        bench_die("the scanner failed (exit status %d)", status);
    duration_ms = bench_scalar(bench_conn, "SELECT duration_ms FROM ordergate.scanner_runs "
                                           "ORDER BY run_id DESC LIMIT 1");
    cancelled = bench_scalar(bench_conn, "SELECT cancelled FROM ordergate.scanner_runs ORDER BY "
                                         "run_id DESC LIMIT 1");
    batches = bench_scalar(bench_conn, "SELECT batches FROM ordergate.scanner_runs ORDER BY "
                                       "run_id DESC LIMIT 1");
    if (cancelled != (double)o->sweep)
        bench_die("the sweep cancelled %.0f orders, expected %ld", cancelled, o->sweep);
    if (bench_scalar(bench_conn, "SELECT count(*) FROM ordergate.status_log WHERE source = "
                                 "'timeout_scanner'") != cancelled)
        bench_die("status_log does not match the sweep");
    fp = fopen(prom_path, "r");
    if (fp != NULL) {
        text[0] = '\n';
        if (fread(text + 1, 1, sizeof(text) - 2, fp) == 0)
            text[0] = '\0';
        fclose(fp);
        unlink(prom_path);
    }
    printf("  cancelled %.0f orders in %.0f batches: run row %.1f s, process %.1f s => %.0f "
           "orders/s (run row), %.0f orders/s (process)\n",
           cancelled, batches, duration_ms / 1000.0, wall, cancelled / (duration_ms / 1000.0),
           cancelled / wall);
    {
        double page_ms = 1000.0 * bench_prom(text, "ordergate_scanner_page_seconds_sum") / batches;
        double claim_ms =
            1000.0 * bench_prom(text, "ordergate_scanner_claim_seconds_sum") / batches;
        if (o->workers == 1)
            printf("  per batch of %d (means, from the scanner's histograms): page query %.2f ms, "
                   "claim_cancel %.2f ms, the rest (run log update, client) %.2f ms\n",
                   o->batch, page_ms, claim_ms, duration_ms / batches - page_ms - claim_ms);
        else /* claims overlap: say how many sessions were busy on average */
            printf("  per batch of %d (means, from the scanner's histograms): page query %.2f ms, "
                   "claim_cancel %.2f ms on one of %d sessions; wall time per batch %.2f ms, "
                   "so %.2f claims in flight on average\n",
                   o->batch, page_ms, claim_ms, o->workers, duration_ms / batches,
                   claim_ms * batches / duration_ms);
    }
    printf("  WAL during the sweep: %.0f MB, %.0f bytes and %.2f full-page images per order; %.0f "
           "checkpoints; %.0f buffers read from outside shared_buffers by this database\n",
           (w1.bytes - w0.bytes) / 1048576.0, (w1.bytes - w0.bytes) / cancelled,
           (w1.fpi - w0.fpi) / cancelled, w1.checkpoints - w0.checkpoints, w1.reads - w0.reads);
    fflush(stdout);
}

struct bench_notices {
    char text[1 << 17];
    size_t used;
};

static void bench_notice(void *arg, const char *message)
{
    struct bench_notices *n = arg;
    size_t len = strlen(message);

    if (n->used + len + 1 < sizeof(n->text)) {
        memcpy(n->text + n->used, message, len);
        n->used += len;
        n->text[n->used] = '\0';
    }
}

/* One claim_cancel of a batch of still-overdue orders with auto_explain
 * (actual times) on every nested statement: where the batch's time goes. */
static void bench_breakdown(const struct bench_opts *o)
{
    struct bench_notices *n = calloc(1, sizeof(*n));
    struct bench_wal w0, w1;
    char sql[512];
    const char *p;
    int64_t t0, t1;

    if (n == NULL)
        bench_die("out of memory");
    printf("\nwhere one batch's time goes: claim_cancel of %d overdue orders with auto_explain "
           "(log_analyze, timing on; adds overhead)\n",
           o->batch);
    bench_wal_snapshot(&w0);
    bench_exec(bench_conn, "LOAD 'auto_explain'");
    bench_exec(bench_conn, "SET auto_explain.log_min_duration = 0");
    bench_exec(bench_conn, "SET auto_explain.log_nested_statements = on");
    bench_exec(bench_conn, "SET auto_explain.log_analyze = on");
    bench_exec(bench_conn, "SET auto_explain.log_buffers = on");
    bench_exec(bench_conn, "SET auto_explain.log_level = 'notice'");
    bench_exec(bench_conn, "SET client_min_messages = 'notice'");
    PQsetNoticeProcessor(bench_conn, bench_notice, n);
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM ordergate.claim_cancel(ARRAY(SELECT order_no FROM "
             "ordergate.scan_overdue(make_interval(secs => 60), NULL, NULL, %d)), "
             "'timeout_scanner')",
             o->batch);
    t0 = clock_mono_us();
    bench_exec(bench_conn, sql);
    t1 = clock_mono_us();
    PQsetNoticeProcessor(bench_conn, NULL, NULL);
    bench_exec(bench_conn, "SET auto_explain.log_min_duration = -1");
    bench_exec(bench_conn, "SELECT pg_stat_force_next_flush()");
    bench_wal_snapshot(&w1);
    printf("  whole statement: %.2f ms; WAL %.0f kB, %.0f full-page images\n",
           (double)(t1 - t0) / 1000.0, (w1.bytes - w0.bytes) / 1024.0, w1.fpi - w0.fpi);
    /* Each notice: "duration: X ms  plan:\nQuery Text: <sql>\n<plan>". */
    for (p = strstr(n->text, "duration: "); p != NULL; p = strstr(p + 1, "duration: ")) {
        double d = strtod(p + 10, NULL);
        const char *q = strstr(p, "Query Text: ");
        char first[120] = "";
        if (q != NULL) {
            int i = 0;
            q += 12;
            /* The statement's first meaningful words, on one line. */
            while (*q && i < (int)sizeof(first) - 1 && strncmp(q, "\n", 1) != 0)
                first[i++] = *q++;
            first[i] = '\0';
            if (i < 60 && *q == '\n') {
                while (*q == '\n' || *q == ' ')
                    q++;
                snprintf(first + i, sizeof(first) - (size_t)i, " %.*s", 60, q);
                for (char *c = first; *c; c++)
                    if (*c == '\n')
                        *c = ' ';
            }
        }
        printf("  %8.2f ms  %s\n", d, first);
        /* The top node's buffer counts, when this plan has any. */
        {
            const char *next = strstr(p + 1, "duration: ");
            const char *buf = strstr(p, "Buffers: ");
            if (buf != NULL && (next == NULL || buf < next)) {
                const char *eol = strchr(buf, '\n');
                printf("              %.*s\n", (int)(eol ? eol - buf : (long)strlen(buf)), buf);
            }
        }
    }
    if (getenv("OG_BENCH_PLANS") != NULL)
        printf("\n%s\n", n->text);
    free(n);
}

/* --layout: time or random. */
static int bench_layout(void *target, const char *value)
{
    int *random_layout = target;

    if (strcmp(value, "time") != 0 && strcmp(value, "random") != 0)
        return -1;
    *random_layout = strcmp(value, "random") == 0;
    return 0;
}

static int bench_parse_args(int argc, char **argv, struct bench_opts *o)
{
    const struct bench_opt rows[] = {
        BENCH_NAME("dbname", "NAME",
                   "database to create (default og_bench_scanner; dropped first,\n"
                   "and at the end unless --keep)",
                   &o->dbname),
        BENCH_NAME("template", "NAME",
                   "copied with every migration applied (default ordergate_tpl,\n"
                   "built by tests/support/db_template.sh or any ctest run)",
                   &o->template_db),
        BENCH_LONG("rows", "N", "table size for the sweep (default 10000000)", &o->rows, 100,
                   BENCH_MAX_ROWS),
        BENCH_LONG("small-rows", "N", "first measurement point (default 1000000)", &o->small_rows,
                   100, BENCH_MAX_ROWS),
        BENCH_LONG("sweep", "N", "orders the sweep claims (default 1000000; <= 11% of rows)",
                   &o->sweep, 1, BENCH_MAX_ROWS),
        /* The scanner's own ranges (scanner.batch_size, scanner.workers). */
        BENCH_INT("batch-size", "N", "scanner batch size (default 1000)", &o->batch, 1, 10000),
        BENCH_INT("workers", "N", "the scanner's claim sessions (default 1)", &o->workers, 1, 16),
        BENCH_INT("pages", "N", "pages per page-time measurement (default 200)", &o->pages, 1,
                  1000000),
        BENCH_INT("chunk", "N", "rows per load statement (default 1000000)", &o->chunk, 1000,
                  100000000),
        BENCH_PATH("scanner", "PATH",
                   "ordergate-scanner (default: ../scanner/ next to this program)", o->scanner),
        BENCH_FN("layout", "L",
                 "time (default): expire_at grows with insertion order, as\n"
                 "when orders expire a fixed time after they are placed;\n"
                 "random: expire_at unrelated to where the row lies",
                 bench_layout, &o->random_layout),
        BENCH_ON("keep", "keep the database", &o->keep),
        BENCH_END,
    };

    if (bench_opt_parse("og_bench_scanner", NULL,
                        "  OG_BENCH_PLANS=1      also print the full plans of the breakdown\n",
                        rows, argc, argv) != 0)
        return -1;
    /* Each number is in its range already; what is left ties them together. */
    if (o->small_rows > o->rows) {
        fprintf(stderr, "og_bench_scanner: --small-rows %ld is larger than --rows %ld\n",
                o->small_rows, o->rows);
        return -1;
    }
    if (o->sweep > o->rows / 100 * 11) {
        fprintf(stderr,
                "og_bench_scanner: --sweep %ld is more than the %ld overdue orders of --rows %ld\n",
                o->sweep, o->rows / 100 * 11, o->rows);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct bench_opts o = {.dbname = "og_bench_scanner",
                           .template_db = "ordergate_tpl",
                           .small_rows = 1000000,
                           .rows = 10000000,
                           .sweep = 1000000,
                           .batch = 1000,
                           .workers = 1,
                           .pages = 200,
                           .chunk = 1000000};
    char self[PATH_MAX], conninfo[256];
    PGconn *admin;

    bench_init("og_bench_scanner", NULL);
    if (path_exe_dir(self, sizeof(self)))
        snprintf(o.scanner, sizeof(o.scanner), "%s/../scanner/ordergate-scanner", self);
    if (bench_parse_args(argc, argv, &o) != 0)
        return 2;
    if (access(o.scanner, X_OK) != 0)
        bench_die("%s is not an executable (build it, or give --scanner)", o.scanner);

    admin = bench_pg_connect("dbname=postgres");
    bench_pg_db_create(admin, o.dbname, o.template_db);
    snprintf(conninfo, sizeof(conninfo), "dbname=%s", o.dbname);
    bench_conn = bench_pg_connect(conninfo);

    {
        char fsync_v[32], sync_v[32], sb_v[32], wal_v[32];
        printf("og_bench_scanner: layout %s\n", o.random_layout ? "random" : "time");
        printf("og_bench_scanner: PostgreSQL %s, fsync=%s, synchronous_commit=%s, "
               "shared_buffers=%s, max_wal_size=%s, %ld online CPUs\n",
               PQparameterStatus(bench_conn, "server_version"),
               bench_show("fsync", fsync_v, sizeof(fsync_v)),
               bench_show("synchronous_commit", sync_v, sizeof(sync_v)),
               bench_show("shared_buffers", sb_v, sizeof(sb_v)),
               bench_show("max_wal_size", wal_v, sizeof(wal_v)), sysconf(_SC_NPROCESSORS_ONLN));
    }
    /* Bulk load: original_expire_at is given, so the insert guard (which
     * only fills it) is switched off; autovacuum stays off on orders so the
     * churn measurement sees the index as the sweep left it. */
    bench_exec(bench_conn,
               "INSERT INTO ordergate.inventory (sku, available, total) SELECT 'BSKU-' || g, "
               "100000000, 100000000 FROM generate_series(0, 999) g");
    bench_exec(bench_conn, "ALTER TABLE ordergate.orders DISABLE TRIGGER orders_guard_insert");
    bench_exec(bench_conn, "ALTER TABLE ordergate.orders SET (autovacuum_enabled = false)");

    printf("\npage query (scan_overdue, %d per page, grace 60 s):\n", o.batch);
    bench_load(&o, 0, o.small_rows);
    bench_vacuum();
    bench_sizes("at the first size:");
    bench_pages("front of the overdue range", NULL, NULL, o.pages, o.batch);
    bench_pages_middle("middle of the overdue range", &o);

    bench_load(&o, o.small_rows, o.rows);
    bench_exec(bench_conn, "ALTER TABLE ordergate.orders ENABLE TRIGGER orders_guard_insert");
    /* Stock as the invariant wants it: total = available + held. */
    bench_exec(bench_conn,
               "UPDATE ordergate.inventory i SET total = i.available + h.q FROM (SELECT it.sku, "
               "sum(it.qty) AS q FROM ordergate.order_items it JOIN ordergate.orders o ON "
               "o.order_no = it.order_no WHERE o.status IN ('pending_payment', 'paid') GROUP BY "
               "it.sku) h WHERE h.sku = i.sku");
    bench_vacuum();
    bench_exec(bench_conn, "CHECKPOINT");
    bench_sizes("at the second size:");
    bench_pages("front of the overdue range", NULL, NULL, o.pages, o.batch);
    bench_pages_middle("middle of the overdue range", &o);

    bench_sweep(&o);

    printf("\nright after the sweep (%ld index entries just turned dead, no VACUUM yet):\n",
           o.sweep);
    bench_sizes("after the sweep:");
    bench_pages("first page, cold (walks the dead entries)", NULL, NULL, 1, o.batch);
    bench_pages("first page again (entries now marked dead)", NULL, NULL, 1, o.batch);
    bench_pages("keyset walk from the front", NULL, NULL, o.pages, o.batch);
    {
        int64_t t0 = clock_mono_ms();
        bench_exec(bench_conn, "VACUUM (ANALYZE) ordergate.orders");
        printf("  VACUUM orders: %.1f s\n", (double)(clock_mono_ms() - t0) / 1000.0);
    }
    bench_pages("after VACUUM: keyset walk from the front", NULL, NULL, o.pages, o.batch);

    bench_breakdown(&o);

    PQfinish(bench_conn);
    if (!o.keep)
        bench_pg_db_drop(admin, o.dbname);
    PQfinish(admin);
    return 0;
}
