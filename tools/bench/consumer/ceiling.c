/* og_bench_consumer: the gate-only ceiling the end-to-end figure is set against. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/gate.h"
#include "tools/bench/consumer/bench_consumer.h"
#include "tools/bench/support/bench_proc.h"
#include "tools/bench/support/bench_run.h"

/* The session the ceiling measurements share (warm: PL/pgSQL compiled, plans
 * cached), like the consumer's own long-lived session. */
struct db *ceiling_session(void)
{
    char conninfo[96];
    struct og_error err = {0};
    struct db *db;

    snprintf(conninfo, sizeof(conninfo), "dbname=%s", g.dbname);
    db = db_new(conninfo, NULL, PROG "-ceiling", NULL, NULL);
    if (db == NULL || db_connect(db, &err) != OG_OK)
        bench_die("ceiling session: %s", db ? err.msg : "out of memory");
    return db;
}

/* gate_claim_cancel() on prefix<first> .. prefix<first+n-1> in batches of
 * batch_size from one session, back to back, until all are done or max_s
 * seconds have passed (0: no limit): the rate the gate alone reaches on this
 * database at this moment. r->orders says how many it cancelled. */
void ceiling_run(const struct opts *o, struct db *db, const char *prefix, long first, long n,
                 double max_s, struct ceiling *r, bool verbose)
{
    char(*names)[GATE_ORDER_NO_MAX + 1] = calloc((size_t)n, sizeof(*names));
    const char **nos = calloc((size_t)n, sizeof(*nos));
    struct gate_cancel_row *rows = calloc((size_t)o->batch_size, sizeof(*rows));
    double *lat = calloc((size_t)(n / o->batch_size + 1), sizeof(*lat));
    struct og_error err = {0};
    pid_t backend;
    double cpu0, wal0, t0;
    long calls = 0;

    if (names == NULL || nos == NULL || rows == NULL || lat == NULL)
        bench_die("out of memory");
    memset(r, 0, sizeof(*r));
    for (long i = 0; i < n; i++) {
        snprintf(names[i], sizeof(names[i]), "%s%ld", prefix, first + i);
        nos[i] = names[i];
    }
    backend = PQbackendPID(db_conn(db));
    cpu0 = bench_proc_cpu_s(backend);
    wal0 = db_wal_lsn_bytes();
    t0 = bench_mono_s();
    long i;

    for (i = 0; i < n && (max_s <= 0 || bench_mono_s() - t0 < max_s); i += o->batch_size) {
        size_t len = (size_t)(n - i < o->batch_size ? n - i : o->batch_size), nrows = 0;
        int64_t c0 = clock_mono_us();

        bench_check_stop();
        if (gate_claim_cancel(db, nos + i, len, GATE_SRC_TIMEOUT_CONSUMER, rows, &nrows, &err) !=
            OG_OK)
            bench_die("ceiling: claim_cancel: %s", err.msg);
        lat[calls++] = (double)(clock_mono_us() - c0) / 1000.0;
        for (size_t k = 0; k < nrows; k++)
            if (rows[k].outcome != GATE_CANCELLED)
                bench_die("ceiling: %s came back %s, expected cancelled", rows[k].order_no,
                          gate_outcome_str(rows[k].outcome));
        if (nrows != len)
            bench_die("ceiling: %zu rows for %zu orders", nrows, len);
    }
    r->seconds = bench_mono_s() - t0;
    r->orders = i < n ? i : n;
    r->rate = (double)r->orders / r->seconds;
    r->backend_cpu_s = cpu0 >= 0 ? bench_proc_cpu_s(backend) - cpu0 : -1;
    r->wal_kb_per_order = (db_wal_lsn_bytes() - wal0) / 1024.0 / (double)r->orders;
    qsort(lat, (size_t)calls, sizeof(*lat), bench_cmp_double);
    r->p50_ms = lat[(calls - 1) / 2];
    r->p99_ms = lat[(calls - 1) * 99 / 100];
    free(lat);
    free(rows);
    free(nos);
    free(names);
    if (verbose)
        bench_progress(
            "gate ceiling on %s*: %ld orders in %.2f s = %.0f orders/s (call p50 %.1f ms, "
            "p99 %.1f ms)",
            prefix, r->orders, r->seconds, r->rate, r->p50_ms, r->p99_ms);
}

/* og_bench_gate as a child on the same server; its orders/s for our batch size,
 * or -1 when it is not there or fails. */
double gate_bench_run(const struct opts *o)
{
    char orders[24], batch[16], dbname[80], *out = malloc(65536);
    char *const argv[] = {
        (char *)o->gate_bench, "--dbname", dbname, "--batches", batch, "--orders", orders,
        "--no-pgbench",        NULL};
    double rate = -1;
    int status;

    if (o->gate_bench[0] == '\0' || out == NULL) {
        free(out);
        return -1;
    }
    if (access(o->gate_bench, X_OK) != 0) {
        bench_progress("og_bench_gate not found at %s: skipped", o->gate_bench);
        free(out);
        return -1;
    }
    snprintf(orders, sizeof(orders), "%ld", o->ceiling_orders);
    snprintf(batch, sizeof(batch), "%d", o->batch_size);
    snprintf(dbname, sizeof(dbname), "%s_gate", o->dbname);
    bench_progress("running %s --dbname %s --batches %s --orders %s --no-pgbench", o->gate_bench,
                   dbname, batch, orders);
    /* Its own --max-seconds bounds each batch size; this, the whole run with its setup. */
    status = bench_run_capture(argv, out, 65536, 3600);
    for (char *line = strtok(out, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        int b;
        long n, calls;
        double secs, ops;
        /* Its table: batch orders calls seconds orders/s ... */
        if (sscanf(line, "%d %ld %ld %lf %lf", &b, &n, &calls, &secs, &ops) == 5 &&
            b == o->batch_size && rate < 0)
            rate = ops;
    }
    free(out);
    if (status != 0)
        bench_progress("og_bench_gate exited with status %d (its figure, if any, is still shown)",
                       status);
    return rate;
}

/* What the consumer's log says about its pauses: the blocking seek of every
 * pause (seek_us=, logged at debug level) and seeks that timed out. */
void print_seeks(const struct bench_prog *c)
{
    double *us = NULL, total = 0;
    size_t n = 0;
    long failed = bench_prog_log_events(c, "seek_failed", NULL, NULL, NULL);

    (void)bench_prog_log_events(c, "partition_paused", "seek_us", &us, &n);
    for (size_t i = 0; i < n; i++)
        total += us[i];
    if (n > 0) {
        qsort(us, n, sizeof(*us), bench_cmp_double);
        printf(
            "  pause+seek in the consume loop: %zu seeks, p50 %.2f ms, p99 %.2f ms, max %.1f ms, "
            "total %.2f s blocked; %ld timed out (seek_failed)\n",
            n, us[(n - 1) / 2] / 1000, us[(n - 1) * 99 / 100] / 1000, us[n - 1] / 1000, total / 1e6,
            failed);
    } else if (failed > 0) {
        printf("  seeks that timed out in the consume loop (seek_failed, 1 s each): %ld\n", failed);
    }
    free(us);
}
