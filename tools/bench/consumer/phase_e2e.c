/* og_bench_consumer: the e2e phase (what it measures: tools/bench/og_bench_consumer.c). */
#include <stdlib.h>

#include "common/clock.h"
#include "common/kafka.h"
#include "tools/bench/consumer/bench_consumer.h"
#include "tools/bench/support/bench_pg.h"
#include "tools/bench/support/bench_run.h"

/* ------------------------------------------------------------------------------------------ */
/* Phase 1: end to end with a backlog */

void phase_e2e(const struct opts *o, const char *run, struct results *r)
{
    char topic[160], group[160], base[128], *metrics = malloc(METRICS_MAX_BYTES);
    struct bench_prog c;
    struct sampler s;
    struct bench_hist h_batch, h_db, h_late;
    double av0, ck0, av1, ck1, wal0, t_spawn, t_first = -1, t_done, next_line, last_line_t;
    double win_t0 = 0;
    long last_line_n = 0, done = 0, win_n0 = 0, next_slice = 0;
    long slice_pool = o->slice_s > 0 ? o->slice_pool : 0;
    bool stopped = false;
    struct db *cdb;
    int64_t past_ms = clock_wall_ms() - 3600 * 1000;

    if (metrics == NULL)
        bench_die("out of memory");
    printf("\n== e2e: %ld due messages in the backlog, one consumer, batch %d ==\n", o->orders,
           o->batch_size);
    fflush(stdout);
    r->e2e = true;
    r->e2e_orders = o->orders;
    db_fresh(o);
    db_stock(o);
    db_load(o, "e", o->orders, past_ms, 0);
    db_load(o, "g", o->ceiling_orders, past_ms, 0);
    db_load(o, "h", o->ceiling_orders, past_ms, 0);
    if (slice_pool > 0)
        db_load(o, "p", slice_pool, past_ms, 0);
    db_settle();

    snprintf(base, sizeof(base), "ogbench.%s.e2e", run);
    snprintf(topic, sizeof(topic), "%s.cancel", base);
    snprintf(group, sizeof(group), "%s.group", base);
    topic_create(o, topic, o->partitions);
    if (o->outbox) {
        char events[160];
        snprintf(events, sizeof(events), "%s.events", base);
        topic_create(o, events, 1);
    }
    r->produce_rate = produce_backlog(o, topic, "e", o->orders, past_ms);

    /* Ceiling before the consumer. */
    cdb = ceiling_session();
    ceiling_run(o, cdb, "g", 0, o->ceiling_orders, 0, &r->ceil[0], true);
    bench_pg_exec(g.conn, "CHECKPOINT");

    launch_config(o, &c, "e2e", base);
    db_background(&av0, &ck0);
    wal0 = db_wal_lsn_bytes();
    t_spawn = bench_mono_s();
    launch_consumer(o, &c, "e2e", topic, group);
    bench_prog_port(&c);
    /* Its database session appears once it connected. */
    pid_t backend = 0;
    for (int i = 0; i < 200 && backend == 0; i++) {
        bench_prog_alive(&c);
        backend = db_consumer_backend();
        if (backend == 0)
            bench_sleep_ms(50);
    }
    sampler_start(&s, c.pid, backend);
    next_line = bench_mono_s() + 10;
    last_line_t = t_spawn;
    for (;;) {
        double now;
        bench_prog_alive(&c);
        bench_check_stop();
        bench_sleep_ms(250);
        now = bench_mono_s();
        if (bench_metrics_get(c.port, metrics, METRICS_MAX_BYTES))
            done =
                (long)bench_prom(metrics, "ordergate_consumer_claims_total{outcome=\"cancelled\"}");
        else
            done = db_count_log("e");
        sampler_rss(&s);
        if (done > 0 && t_first < 0) {
            /* The first paired window opens with the first commit. */
            t_first = now;
            win_t0 = now;
            win_n0 = db_count_log("e");
        }
        if (done >= o->orders && db_count_log("e") >= o->orders)
            break;
        if (t_first >= 0 && o->slice_s > 0 && now - win_t0 >= o->slice_s &&
            slice_pool - next_slice >= 10L * o->batch_size && done < o->orders - o->orders / 20) {
            /* A paired slice: freeze the consumer, let its claim in flight
             * finish, close its window, run the gate alone for a moment. */
            struct ceiling sr;
            double win_t1, win_rate;
            long win_n1;
            kill(c.pid, SIGSTOP);
            stopped = true;
            db_backend_idle(backend, &c);
            win_t1 = bench_mono_s();
            win_n1 = db_count_log("e");
            ceiling_run(o, cdb, "p", next_slice, slice_pool - next_slice, o->slice_ms / 1000.0, &sr,
                        false);
            next_slice += sr.orders;
            kill(c.pid, SIGCONT);
            stopped = false;
            r->frozen_s += bench_mono_s() - win_t1;
            r->pair_gate_cpu_s += sr.backend_cpu_s;
            r->pair_gate_wal_kb += sr.wal_kb_per_order * (double)sr.orders;
            win_rate = (double)(win_n1 - win_n0) / (win_t1 - win_t0);
            r->pair_e2e_n += win_n1 - win_n0;
            r->pair_e2e_s += win_t1 - win_t0;
            r->pair_gate_n += sr.orders;
            r->pair_gate_s += sr.seconds;
            if (r->pairs == 0 || win_rate / sr.rate < r->pair_min)
                r->pair_min = win_rate / sr.rate;
            if (r->pairs == 0 || win_rate / sr.rate > r->pair_max)
                r->pair_max = win_rate / sr.rate;
            r->pairs++;
            bench_progress(
                "pair %d: consumer %.0f/s over %.1f s, gate alone %.0f/s over %.1f s: %.0f %%",
                r->pairs, win_rate, win_t1 - win_t0, sr.rate, sr.seconds, 100 * win_rate / sr.rate);
            win_t0 = bench_mono_s();
            win_n0 = win_n1;
        }
        if (now >= next_line) {
            double cc = cpu_since(s.consumer, s.c0), bc = cpu_since(s.backend, s.b0);
            bench_progress("e2e t=%.0fs cancelled %ld (%.0f/s over the last %.0f s); cpu so far: "
                           "consumer %.1f s, its backend %.1f s; rss %.1f MB",
                           now - t_spawn, done, (double)(done - last_line_n) / (now - last_line_t),
                           now - last_line_t, cc, bc, s.rss_max);
            last_line_n = done;
            last_line_t = now;
            next_line = now + 10;
        }
        if (now - t_spawn > o->timeout_s)
            bench_die("e2e: only %ld of %ld cancelled after %d s (log %s)", done, o->orders,
                      o->timeout_s, c.log);
    }
    (void)stopped;
    /* The last window closes with the last commit. */
    if (t_first >= 0) {
        long n_end = db_count_log("e");
        r->pair_e2e_n += n_end - win_n0;
        r->pair_e2e_s += bench_mono_s() - win_t0;
    }
    t_done = bench_mono_s();
    r->consumer_cpu_s = cpu_since(s.consumer, s.c0);
    r->backend_cpu_s = cpu_since(s.backend, s.b0);
    r->broker_cpu_s = cpu_since(s.broker, s.k0);
    r->e2e_rss_max = s.rss_max;
    /* The slices' own WAL is not the consumer's. */
    r->e2e_wal_kb_per_order =
        ((db_wal_lsn_bytes() - wal0) / 1024.0 - r->pair_gate_wal_kb) / (double)o->orders;
    db_background(&av1, &ck1);
    r->e2e_autovacuums = av1 - av0;
    r->e2e_checkpoints = ck1 - ck0;
    if (!bench_metrics_get(c.port, metrics, METRICS_MAX_BYTES))
        metrics[0] = '\0';
    r->e2e_exit = bench_prog_stop(&c);

    /* The figures from the database: first to last commit. */
    {
        PGresult *res =
            bench_pg_query(g.conn,
                           "SELECT count(*), extract(epoch FROM max(created_at) - min(created_at)) "
                           "FROM ordergate.status_log WHERE order_no LIKE 'e%'",
                           0, NULL);
        long n = atol(PQgetvalue(res, 0, 0));
        r->steady_s = strtod(PQgetvalue(res, 0, 1), NULL);
        PQclear(res);
        if (n != o->orders)
            bench_die("e2e: %ld status_log rows for %ld orders", n, o->orders);
        /* Not counting the time the consumer stood frozen for the slices. */
        r->steady_rate =
            r->steady_s > r->frozen_s ? (double)(n - 1) / (r->steady_s - r->frozen_s) : 0;
        r->startup_s = t_first - t_spawn;
        r->wall_s = t_done - t_spawn;
        r->wall_rate = (double)n / r->wall_s;
    }

    /* Ceiling after the consumer, on the same database. */
    ceiling_run(o, cdb, "h", 0, o->ceiling_orders, 0, &r->ceil[1], true);
    db_free(cdb);
    r->ceiling_mean = (r->ceil[0].rate + r->ceil[1].rate) / 2;

    /* Slice orders left over would stay overdue (reconcile invariant 6):
     * cancel them, unmeasured, like the scanner would. */
    for (long a = next_slice; a < slice_pool; a += 10000) {
        char lo[24], hi[24];
        const char *p[2] = {lo, hi};
        snprintf(lo, sizeof(lo), "%ld", a);
        snprintf(hi, sizeof(hi), "%ld", a + 10000 < slice_pool ? a + 10000 : slice_pool);
        PQclear(bench_pg_query(
            g.conn,
            "SELECT count(*) FROM ordergate.claim_cancel(ARRAY(SELECT 'p' || i "
            "FROM generate_series($1::bigint, $2::bigint - 1) i), 'timeout_scanner')",
            2, p));
    }
    r->e2e_violations = -1;
    if (o->reconcile) {
        double t0 = bench_mono_s();
        r->e2e_violations = (long)bench_pg_num(
            g.conn, "SELECT coalesce(sum(violations), 0) FROM ordergate.reconcile()", 0, NULL);
        bench_progress("reconcile: %ld violations (%.1f s)", r->e2e_violations,
                       bench_mono_s() - t0);
    }
    if (!g.keep)
        db_drop();
    r->gate_bench_rate = gate_bench_run(o);

    printf("  backlog produced at %.0f msg/s (%d partitions); consumer exit status %d\n",
           r->produce_rate, o->partitions, r->e2e_exit);
    printf("  consumer start to first cancel %.1f s; first to last commit %.1f s, of which %.1f s "
           "frozen for the paired slices; start to done %.1f s\n",
           r->startup_s, r->steady_s, r->frozen_s, r->wall_s);
    printf(
        "  end to end: %.0f cancels/s (first to last commit, frozen time excluded); %.0f/s start "
        "to done, frozen time included\n",
        r->steady_rate, r->wall_rate);
    for (int i = 0; i < 2; i++)
        printf(
            "  gate ceiling %-6s batch %d: %7.0f orders/s (%ld orders, call p50 %.1f ms p99 %.1f "
            "ms, backend cpu %.2f s, WAL %.2f KB/order)\n",
            i == 0 ? "before" : "after", o->batch_size, r->ceil[i].rate, r->ceil[i].orders,
            r->ceil[i].p50_ms, r->ceil[i].p99_ms, r->ceil[i].backend_cpu_s,
            r->ceil[i].wal_kb_per_order);
    if (r->gate_bench_rate > 0)
        printf("  og_bench_gate --batches %d (own database): %.0f orders/s\n", o->batch_size,
               r->gate_bench_rate);
    printf("  ratio end to end / ceiling (mean of before and after): %.1f %%\n",
           100.0 * r->steady_rate / r->ceiling_mean);
    if (r->pairs > 0)
        printf("  paired: %d gate slices of ~%d ms between consumer windows (same load at the "
               "same time): consumer %.0f/s over %.0f s, gate alone %.0f/s over %.0f s: %.1f %% "
               "(pairs from %.0f %% to %.0f %%)\n",
               r->pairs, o->slice_ms, (double)r->pair_e2e_n / r->pair_e2e_s, r->pair_e2e_s,
               (double)r->pair_gate_n / r->pair_gate_s, r->pair_gate_s,
               100 * ((double)r->pair_e2e_n / r->pair_e2e_s) /
                   ((double)r->pair_gate_n / r->pair_gate_s),
               100 * r->pair_min, 100 * r->pair_max);
    if (r->pairs > 0 && r->pair_gate_n > 0)
        printf("  paired slices: backend cpu %.1f us/order, WAL %.2f KB/order (the consumer's: see "
               "below)\n",
               1e6 * r->pair_gate_cpu_s / (double)r->pair_gate_n,
               r->pair_gate_wal_kb / (double)r->pair_gate_n);
    {
        char kb[48];
        printf("  cpu during the run (%.1f s wall): consumer %.1f s (%.0f %%), its backend %.1f s "
               "(%.0f %%), broker %s\n",
               r->wall_s, r->consumer_cpu_s, 100 * r->consumer_cpu_s / r->wall_s, r->backend_cpu_s,
               100 * r->backend_cpu_s / r->wall_s,
               cpu_share_str(r->broker_cpu_s, r->wall_s, kb, sizeof(kb)));
    }
    printf("  per order: consumer %.1f us cpu, backend %.1f us cpu (ceiling backend %.1f us); WAL "
           "%.2f KB\n",
           1e6 * r->consumer_cpu_s / (double)o->orders, 1e6 * r->backend_cpu_s / (double)o->orders,
           1e6 * (r->ceil[0].backend_cpu_s + r->ceil[1].backend_cpu_s) /
               (double)(r->ceil[0].orders + r->ceil[1].orders),
           r->e2e_wal_kb_per_order);
    printf("  background during the run: %.0f autovacuum/analyze runs, %.0f checkpoints; consumer "
           "rss max %.1f MB\n",
           r->e2e_autovacuums, r->e2e_checkpoints, r->e2e_rss_max);
    if (metrics[0] != '\0') {
        bench_prom_hist(metrics, "ordergate_consumer_batch_size", &h_batch);
        bench_prom_hist(metrics, "ordergate_consumer_db_latency_seconds", &h_db);
        bench_prom_hist(metrics, "ordergate_consumer_lateness_seconds", &h_late);
        printf("  consumer metrics: consumed %.0f, committed %.0f in %.0f batches, deferred %.0f, "
               "dropped %.0f, not_due %.0f, db errors %.0f\n",
               bench_prom_sum(metrics, "ordergate_consumer_messages_consumed_total"),
               bench_prom(metrics, "ordergate_consumer_messages_committed_total"),
               bench_prom(metrics, "ordergate_consumer_batches_total"),
               bench_prom(metrics, "ordergate_consumer_messages_deferred_total"),
               bench_prom(metrics, "ordergate_consumer_messages_dropped_total"),
               bench_prom(metrics, "ordergate_consumer_claims_total{outcome=\"not_due\"}"),
               bench_prom(metrics, "ordergate_consumer_db_errors_total"));
        printf("  %-34s %.0f batches, mean %.1f messages\n", "batch size", h_batch.count,
               bench_hist_mean(&h_batch));
        bench_print_buckets("batch size distribution", &h_batch);
        bench_print_hist("db round trip (claim_cancel)", &h_db, 1000, " ms");
        printf("  consumer-side share: %.0f batches x %.1f ms db = %.1f s of %.1f s (%.0f %%) "
               "spent waiting for claim_cancel\n",
               h_db.count, 1000 * bench_hist_mean(&h_db), h_db.sum, r->steady_s,
               100 * h_db.sum / r->steady_s);
    }
    print_seeks(&c);
    if (r->e2e_violations >= 0)
        printf("  reconcile after the run: %ld violations\n", r->e2e_violations);
    fflush(stdout);
    if (!g.keep)
        topics_delete();
    free(metrics);
}
