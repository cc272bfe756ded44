/* og_bench_consumer: a peer queue (tools/bench/peers/) driven beside or instead of the consumer,
 * and the one line per system and workload that tools/bench/peers/run.sh collects.
 *
 * The peers' protocol: the program is started with "-prefix P" (and "-burst -start-at MS" for a
 * drain) and PGDATABASE set to the phase's database; it claims every pending order of prefix P
 * through ordergate.claim_cancel, logs "event=loaded" once it has read them, "event=inserted"
 * once a burst's jobs are queued, and "event=done orders=N seconds=S" when every one came back
 * cancelled. This file starts, awaits and stops it; it never writes to the phase's database. */
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "tools/bench/consumer/bench_consumer.h"
#include "tools/bench/support/bench_pg.h"
#include "tools/bench/support/bench_run.h"

/* The peer on the orders of prefix, with PGDATABASE the phase's database for its lifetime only;
 * burst_ms > 0: a burst, every job queued first and its workers started at burst_ms. */
void peer_start(struct bench_prog *p, const char *path, const char *prefix, int64_t burst_ms)
{
    char at[24];
    const char *argv[] = {path, "-prefix", prefix, "-burst", "-start-at", at, NULL};
    const char *old = getenv("PGDATABASE");
    char *saved = old ? strdup(old) : NULL;

    snprintf(at, sizeof(at), "%lld", (long long)burst_ms);
    if (burst_ms <= 0)
        argv[3] = NULL;
    snprintf(p->log, sizeof(p->log), "%s/peer-%s.log", g.workdir, prefix);
    setenv("PGDATABASE", g.dbname, 1);
    bench_prog_start(p, "the peer", argv);
    if (saved != NULL) {
        setenv("PGDATABASE", saved, 1);
        free(saved);
    } else {
        unsetenv("PGDATABASE");
    }
    bench_prog_wait_log(p, "event=loaded", 120);
    bench_progress("peer pid %d: %s -prefix %s%s (log %s)", (int)p->pid, path, prefix,
                   burst_ms > 0 ? " -burst" : "", p->log);
}

/* Waits up to timeout_s for the peer's "event=done", then stops it; false when it was not done
 * (the lines then say how many of its orders it left). */
bool peer_wait(struct bench_prog *p, int timeout_s)
{
    bool done = false;

    for (long i = 0; i < (long)timeout_s * 10 && !(done = bench_prog_log_has(p, "event=done"));
         i++) {
        bench_check_stop();
        bench_sleep_ms(100);
    }
    if (!done)
        printf("  peer: not done within %d s (see %s)\n", timeout_s, p->log);
    bench_prog_stop(p);
    return done;
}

/* The figures of one prefix from status_log, the same SQL for every system and workload: 0 count,
 * lateness (status_log.created_at - expire_at, ms) 1 p50, 2 p90, 3 p99, 4 p99.9, 5 max, 6 min,
 * 7 how many were cancelled before expire_at, 8 drain (the last claim's transaction start - the
 * first expire_at, s), 9 how many are still pending. */
PGresult *peer_query(const char *prefix)
{
    const char *p[1] = {prefix};

    return bench_pg_query(
        g.conn,
        "SELECT count(l.order_no), "
        "       coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms), 0), "
        "       coalesce(percentile_cont(0.9) WITHIN GROUP (ORDER BY ms), 0), "
        "       coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms), 0), "
        "       coalesce(percentile_cont(0.999) WITHIN GROUP (ORDER BY ms), 0), "
        "       coalesce(max(ms), 0), coalesce(min(ms), 0), count(*) FILTER (WHERE ms < 0), "
        "       coalesce(extract(epoch FROM max(l.created_at) - min(o.expire_at)), 0), "
        "       count(*) FILTER (WHERE o.status = 'pending_payment') "
        "FROM ordergate.orders o LEFT JOIN ordergate.status_log l USING (order_no), "
        "     LATERAL (SELECT extract(epoch FROM l.created_at - o.expire_at) * 1000 AS ms) x "
        "WHERE o.order_no LIKE $1 || '%'",
        1, p);
}

/* consumers < 0: the line has no consumers= key (the burst's lines, one system per run). */
static void peer_print_line(const char *system, const char *workload, const char *prefix,
                            double gate_alone, int consumers)
{
    PGresult *res = peer_query(prefix);
    long n = atol(PQgetvalue(res, 0, 0));
    double drain = strtod(PQgetvalue(res, 0, 8), NULL);
    char tail[32] = "";

    if (consumers >= 0)
        snprintf(tail, sizeof(tail), " consumers=%d", consumers);
    /* One line, key=value, for tools/bench/peers/run.sh; gate_alone: the gate alone in one
     * session on the same database in the same run (orders/s), the figure the load moves. New
     * keys go at the end: run.sh reads the lines of earlier runs too. */
    printf("peers: system=%s workload=%s orders=%ld drain_s=%.3f rate=%.0f p50_ms=%.1f "
           "p99_ms=%.1f max_ms=%.1f early=%s left=%s gate_alone=%.0f%s\n",
           system, workload, n, drain, drain > 0 ? (double)n / drain : 0,
           strtod(PQgetvalue(res, 0, 1), NULL), strtod(PQgetvalue(res, 0, 3), NULL),
           strtod(PQgetvalue(res, 0, 5), NULL), PQgetvalue(res, 0, 7), PQgetvalue(res, 0, 9),
           gate_alone, tail);
    fflush(stdout);
    PQclear(res);
}

void peer_line(const char *system, const char *workload, const char *prefix, double gate_alone)
{
    peer_print_line(system, workload, prefix, gate_alone, -1);
}

void peer_line_consumers(const char *system, const char *workload, const char *prefix,
                         double gate_alone, int consumers)
{
    peer_print_line(system, workload, prefix, gate_alone, consumers);
}

/* The side-by-side lateness of the consumer's orders (l) and the peer's (r). */
void peer_report(const struct results *r)
{
    PGresult *res = peer_query("r");
    double p50 = strtod(PQgetvalue(res, 0, 1), NULL), p99 = strtod(PQgetvalue(res, 0, 3), NULL),
           max = strtod(PQgetvalue(res, 0, 5), NULL);

    printf("  side by side, same SQL over status_log, same due times, same database:\n");
    printf("    %-18s %6ld orders  p50 %8.1f ms  p99 %8.1f ms  max %8.1f ms  early %ld\n",
           "ordergate-consumer", r->lat_cancelled, r->lat_p50, r->lat_p99, r->lat_max,
           r->lat_early);
    printf("    %-18s %6s orders  p50 %8.1f ms  p99 %8.1f ms  max %8.1f ms  early %s  left %s\n",
           "peer", PQgetvalue(res, 0, 0), p50, p99, max, PQgetvalue(res, 0, 7),
           PQgetvalue(res, 0, 9));
    printf("    peer / ordergate: p50 %.2fx  p99 %.2fx  max %.2fx\n",
           r->lat_p50 > 0 ? p50 / r->lat_p50 : 0, r->lat_p99 > 0 ? p99 / r->lat_p99 : 0,
           r->lat_max > 0 ? max / r->lat_max : 0);
    PQclear(res);
}

/* The burst drained by the peer alone: its jobs queued before the due second, its workers started
 * at it. Sets the drain from the peer's own count of cancelled claims (its "seconds", counted
 * from the due second, as the consumers' claims_total is). */
void peer_burst(const struct opts *o, int64_t due_ms, struct burst_result *b)
{
    struct bench_prog p = {.pid = 0};
    double *v = NULL;
    size_t nv = 0;
    int64_t give_up = due_ms + 120000 + o->burst_orders * 2; /* 120 s + 2 ms per order */

    peer_start(&p, o->peer, "b", due_ms);
    while (!bench_prog_log_has(&p, "event=inserted")) {
        bench_prog_alive(&p);
        bench_check_stop();
        if (clock_wall_ms() > due_ms - 500)
            bench_die("burst: the peer had not queued its jobs 0.5 s before the due second; "
                      "rerun with a longer --burst-lead");
        bench_sleep_ms(50);
    }
    b->ready_s = (double)(due_ms - clock_wall_ms()) / 1000.0;
    bench_progress("burst: the peer queued %ld jobs, due second in %.1f s", o->burst_orders,
                   b->ready_s);
    while (!bench_prog_log_has(&p, "event=done")) {
        bench_prog_alive(&p);
        bench_check_stop();
        if (clock_wall_ms() > give_up)
            bench_die("burst: the peer was not done %.0f s after the due second (see %s)",
                      (double)(clock_wall_ms() - due_ms) / 1000.0, p.log);
        bench_sleep_ms(20);
    }
    if (bench_prog_log_events(&p, "done", "seconds", &v, &nv) < 1 || nv < 1)
        bench_die("burst: no seconds= in the peer's event=done line (see %s)", p.log);
    b->drain_s = v[0];
    b->wall_s = v[0];
    b->rate = (double)o->burst_orders / b->drain_s;
    free(v);
    bench_prog_stop(&p);
    printf("  peer %s: drained in %.2f s by its own count = %.0f orders/s\n", o->peer, b->drain_s,
           b->rate);
}
