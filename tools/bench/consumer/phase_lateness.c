/* og_bench_consumer: the lateness phase (what it measures: tools/bench/og_bench_consumer.c). */
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/kafka.h"
#include "tools/bench/consumer/bench_consumer.h"
#include "tools/bench/support/bench_pg.h"
#include "tools/bench/support/bench_run.h"

/* ------------------------------------------------------------------------------------------ */
/* Phase 2: lateness at a steady rate */

/* The cancels of every consumer of the phase, from their metrics; done when one did not answer. */
static long lateness_done(const struct bench_prog *c, const struct bench_prog *more, int nmore,
                          char *metrics, long done)
{
    double sum;

    if (!bench_metrics_get(c->port, metrics, METRICS_MAX_BYTES))
        return done;
    sum = bench_prom(metrics, "ordergate_consumer_claims_total{outcome=\"cancelled\"}");
    for (int i = 0; i < nmore; i++) {
        char *buf = malloc(METRICS_MAX_BYTES);
        bool ok = buf != NULL && bench_metrics_get(more[i].port, buf, METRICS_MAX_BYTES);
        double v =
            ok ? bench_prom(buf, "ordergate_consumer_claims_total{outcome=\"cancelled\"}") : -1;
        free(buf);
        if (!ok)
            return done;
        sum += v > 0 ? v : 0;
    }
    return (long)sum;
}

/* The phase's database: n orders of prefix l (the consumer's, unless --peer-only) and, with a
 * peer, as many of prefix r with the same due times, from t0_ms at o->rate a second; overdue
 * orders of prefix g for the gate alone. */
static void lateness_load(const struct opts *o, struct results *r, long n, int64_t t0_ms)
{
    /* The due times are checked on the consumer's orders, or the peer's when it runs alone. */
    const char *checked = o->peer_only ? "r" : "l";

    r->lat = true;
    r->lat_orders = n;
    db_fresh(o);
    db_stock(o);
    if (!o->peer_only)
        db_load(o, "l", n, t0_ms, o->rate);
    if (o->peer != NULL)
        db_load(o, "r", n, t0_ms, o->rate);
    if (o->round_every > 0) {
        /* A producer that writes due_at rounded down: the message names the millisecond, the
         * order expires 0.6 ms into it. Bulk update as the loader's superuser, triggers off
         * (original_expire_at is immutable for everyone else). */
        char every[16];
        const char *p[1] = {every};
        snprintf(every, sizeof(every), "%d", o->round_every);
        bench_pg_exec(g.conn, "BEGIN");
        bench_pg_exec(g.conn, "SET LOCAL session_replication_role = replica");
        PQclear(bench_pg_query(g.conn,
                               "UPDATE ordergate.orders SET expire_at = expire_at + interval "
                               "'600 microseconds', original_expire_at = original_expire_at + "
                               "interval '600 microseconds' WHERE order_no LIKE 'l%' AND "
                               "substr(order_no, 2)::bigint % $1::int = 0",
                               1, p));
        bench_pg_exec(g.conn, "COMMIT");
        r->lat_rounded = n / o->round_every + (n % o->round_every != 0);
    }
    /* Overdue orders of the same shape for the gate alone, right after the run: no message
     * names them, so the consumer never sees them. */
    db_load(o, "g", o->ceiling_orders, clock_wall_ms() - 3600 * 1000, 0);
    db_settle();
    {
        /* The database's expire_at must be the message's due_at to the millisecond (rounded
         * down). */
        char no[32];
        const char *p[1] = {no};
        long last = n - 1;
        int64_t want = t0_ms + (int64_t)last * 1000 / o->rate, got;
        snprintf(no, sizeof(no), "%s%ld", checked, last);
        got = (int64_t)bench_pg_num(g.conn,
                                    "SELECT floor(extract(epoch FROM expire_at) * 1000)::bigint "
                                    "FROM ordergate.orders WHERE order_no = $1",
                                    1, p);
        if (got != want)
            bench_die("lateness: expire_at of %s is %lld ms, the message says %lld", no,
                      (long long)got, (long long)want);
        if (!o->peer_only)
            msg_check(no, want);
    }
}

/* The gate alone in one session on the phase's database (the overdue orders of prefix g), right
 * after the systems measured: orders/s. */
static double lateness_gate_alone(const struct opts *o)
{
    struct db *cdb = ceiling_session();
    struct ceiling cr;

    ceiling_run(o, cdb, "g", 0, o->ceiling_orders, 0, &cr, true);
    db_free(cdb);
    return cr.rate;
}

/* The lateness figures of the orders of prefix, from status_log (peer_query: the same SQL for
 * every system). */
static void lateness_figures(const char *prefix, struct results *r)
{
    PGresult *res = peer_query(prefix);

    r->lat_cancelled = atol(PQgetvalue(res, 0, 0));
    r->lat_p50 = strtod(PQgetvalue(res, 0, 1), NULL);
    r->lat_p90 = strtod(PQgetvalue(res, 0, 2), NULL);
    r->lat_p99 = strtod(PQgetvalue(res, 0, 3), NULL);
    r->lat_p999 = strtod(PQgetvalue(res, 0, 4), NULL);
    r->lat_max = strtod(PQgetvalue(res, 0, 5), NULL);
    r->lat_min = strtod(PQgetvalue(res, 0, 6), NULL);
    r->lat_early = atol(PQgetvalue(res, 0, 7));
    PQclear(res);
}

/* The gate alone and the lateness figures of the run, as lateness_figures read them. */
static void lateness_print_figures(const struct opts *o, const struct results *r)
{
    printf("  gate alone right after the run, same database, one session, batch %d: %.0f orders/s "
           "(%d/s is %.0f %% of it)\n",
           o->batch_size, r->lat_ceiling, o->rate, 100.0 * o->rate / r->lat_ceiling);
    printf("  lateness = status_log.created_at (claim transaction start) - expire_at, %ld "
           "orders:\n",
           r->lat_cancelled);
    printf("    p50 %.1f ms  p90 %.1f ms  p99 %.1f ms  p99.9 %.1f ms  max %.1f ms  min %.1f ms; "
           "cancelled before expire_at: %ld\n",
           r->lat_p50, r->lat_p90, r->lat_p99, r->lat_p999, r->lat_max, r->lat_min, r->lat_early);
}

/* --peer-only: the peer alone on its orders (prefix r), nothing else claiming; no topic, no
 * consumer, no broker. The same due times, figures and checks as the consumer's run: the summary's
 * lateness rows are then the peer's. The peer has until 60 s after the last due time, as the
 * consumer has. */
static void lateness_peer_only(const struct opts *o, struct results *r, long n, int64_t t0_ms,
                               int lead, double setup_start)
{
    struct bench_prog peer = {.pid = 0};
    int64_t end_ms = t0_ms + (int64_t)(n - 1) * 1000 / o->rate;
    double t0;
    char workload[32];

    peer_start(&peer, o->peer, "r", 0);
    if (clock_wall_ms() > t0_ms - 1000)
        bench_die("lateness: setup took %.0f s, longer than the lead of %d s; rerun with --lead %d",
                  bench_mono_s() - setup_start, lead, (int)(bench_mono_s() - setup_start) * 2 + 10);
    bench_progress("setup took %.0f s of the %d s lead; first order due in %.1f s",
                   bench_mono_s() - setup_start, lead, (double)(t0_ms - clock_wall_ms()) / 1000.0);
    t0 = bench_mono_s();
    (void)peer_wait(&peer, (int)((end_ms - clock_wall_ms()) / 1000) + 60);
    r->lat_wall = bench_mono_s() - t0;
    r->lat_ceiling = lateness_gate_alone(o);
    lateness_figures("r", r);
    printf("  the peer %s alone, %.0f s from its start to done\n", o->peer_name, r->lat_wall);
    lateness_print_figures(o, r);
    snprintf(r->lat_h50, sizeof(r->lat_h50), "-");
    snprintf(r->lat_h99, sizeof(r->lat_h99), "-");
    snprintf(workload, sizeof(workload), "steady-%d/s", o->rate);
    peer_line_consumers(o->peer_name, workload, "r", r->lat_ceiling, 0);
    fflush(stdout);
    if (!g.keep)
        db_drop();
}

void phase_lateness(const struct opts *o, const char *run, struct results *r)
{
    char topic[160], group[160], base[128], *metrics = malloc(METRICS_MAX_BYTES);
    long n = (long)o->rate * o->duration;
    int lead = o->lead_s > 0 ? o->lead_s : 20 + (int)(n / 7500);
    int64_t t0_ms = clock_wall_ms() + (int64_t)lead * 1000, end_ms;
    double setup_start = bench_mono_s(), next_line, last_line_t, prod_t0, prod_t1, lat_t0;
    long last_line_n = 0, done = 0, produced = 0;
    struct bench_prog c, peer = {.pid = 0};
    /* --consumers N: N - 1 more members of the same group (the figures of the consumer's own
     * metrics, its CPU and RSS, are the first one's; the lateness is everyone's, from status_log)
     */
    struct bench_prog more[7];
    int nmore = o->consumers - 1;
    struct sampler s;
    struct bench_hist h_late, h_batch, h_db;
    rd_kafka_t *rk;
    rd_kafka_topic_t *rkt;
    /* Messages go out ahead_ms before they are due, so the producer may
     * linger a little without making anything late; 5 ms batches of a few
     * messages cost the broker (on the same 2 cores) ~2.5x the CPU. */
    char linger[16];
    const char *props[] = {"linger.ms", linger, "compression.codec", o->compression, NULL};

    if (metrics == NULL)
        bench_die("out of memory");
    if (o->peer_only)
        printf("\n== lateness: %d due orders/s for %d s (%ld orders), the peer %s alone ==\n",
               o->rate, o->duration, n, o->peer_name);
    else
        printf("\n== lateness: %d due orders/s for %d s (%ld orders), produced %d ms ahead "
               "(producer linger.ms %d) ==\n",
               o->rate, o->duration, n, o->ahead_ms, o->ahead_ms / 4 < 50 ? o->ahead_ms / 4 : 50);
    fflush(stdout);
    lateness_load(o, r, n, t0_ms);
    if (o->peer_only) {
        lateness_peer_only(o, r, n, t0_ms, lead, setup_start);
        free(metrics);
        return;
    }
    snprintf(base, sizeof(base), "ogbench.%s.lat", run);
    snprintf(topic, sizeof(topic), "%s.cancel", base);
    snprintf(group, sizeof(group), "%s.group", base);
    topic_create(o, topic, o->partitions);
    launch_config(o, &c, "lateness", base);
    launch_consumer(o, &c, "lateness", topic, group);
    bench_prog_port(&c);
    for (int i = 0; i < nmore; i++) {
        char tag[32];
        snprintf(tag, sizeof(tag), "lateness-%d", i + 1);
        launch_config(o, &more[i], tag, base);
        launch_consumer(o, &more[i], tag, topic, group);
        bench_prog_port(&more[i]);
    }
    bench_prog_wait_log(&c, "event=partitions_assigned", 60);
    for (int i = 0; i < nmore; i++)
        bench_prog_wait_log(&more[i], "event=partitions_assigned", 60);
    {
        pid_t backend = 0;
        for (int i = 0; i < 200 && backend == 0; i++) {
            backend = db_consumer_backend();
            if (backend == 0)
                bench_sleep_ms(50);
        }
        sampler_start(&s, c.pid, backend);
    }
    /* The peer queue: its own orders (prefix r), the same due times, the same database, in the
     * same minute as the consumer. */
    if (o->peer != NULL)
        peer_start(&peer, o->peer, "r", 0);
    lat_t0 = bench_mono_s();
    if (clock_wall_ms() > t0_ms - o->ahead_ms - 1000)
        bench_die("lateness: setup took %.0f s, longer than the lead of %d s; rerun with --lead %d",
                  bench_mono_s() - setup_start, lead, (int)(bench_mono_s() - setup_start) * 2 + 10);
    bench_progress("setup took %.0f s of the %d s lead; first order due in %.1f s",
                   bench_mono_s() - setup_start, lead, (double)(t0_ms - clock_wall_ms()) / 1000.0);

    snprintf(linger, sizeof(linger), "%d", o->ahead_ms / 4 < 50 ? o->ahead_ms / 4 : 50);
    rk = kafka_client(o, RD_KAFKA_PRODUCER, props);
    rkt = rd_kafka_topic_new(rk, topic, NULL);
    g.dr_ok = g.dr_failed = 0;
    end_ms = t0_ms + (int64_t)(n - 1) * 1000 / o->rate;
    next_line = bench_mono_s() + 10;
    last_line_t = bench_mono_s();
    prod_t0 = -1;
    prod_t1 = -1;
    while (produced < n || done < n) {
        int64_t now = clock_wall_ms();
        double m = bench_mono_s();

        bench_check_stop();
        bench_prog_alive(&c);
        for (int i = 0; i < nmore; i++)
            bench_prog_alive(&more[i]);
        while (produced < n && t0_ms + produced * 1000 / o->rate - o->ahead_ms <= now) {
            char key[32], value[160], iso[32];
            int64_t due = t0_ms + produced * 1000 / o->rate;
            int klen = snprintf(key, sizeof(key), "l%ld", produced);
            clock_format_iso(due, iso, sizeof(iso));
            produce(rk, rkt, key, (size_t)klen, value, msg_value(value, sizeof(value), key, iso));
            if (produced == 0)
                prod_t0 = m;
            produced++;
            if (produced == n)
                prod_t1 = m;
        }
        rd_kafka_poll(rk, 0);
        if (m >= next_line || (produced == n && now > end_ms + 60000)) {
            done = lateness_done(&c, more, nmore, metrics, done);
            sampler_rss(&s);
            bench_progress(
                "lateness t=%+.0fs produced %ld cancelled %ld (%.0f/s over the last %.0f s) "
                "rss %.1f MB",
                (double)(now - t0_ms) / 1000.0, produced, done,
                (double)(done - last_line_n) / (m - last_line_t), m - last_line_t, s.rss_max);
            last_line_n = done;
            last_line_t = m;
            next_line = m + 10;
            if (produced == n && now > end_ms + 60000) {
                /* The database may be beyond its capacity (beside a peer, or on a loaded
                 * machine): the figures and the lines say how many were left instead of the run
                 * ending without them; the summary's "orders cancelled" row fails. */
                printf("  consumer: %ld of %ld cancelled 60 s after the last due time\n", done, n);
                break;
            }
        }
        if (produced == n && now > end_ms) {
            /* Every message is out: look at the count more often. */
            done = lateness_done(&c, more, nmore, metrics, done);
            sampler_rss(&s);
            if (done >= n)
                break;
            bench_sleep_ms(100);
        } else {
            bench_sleep_ms(2);
        }
    }
    producer_finish(rk, n);
    rd_kafka_topic_destroy(rkt);
    rd_kafka_destroy(rk);
    r->lat_produce_rate = prod_t1 > prod_t0 ? (double)(n - 1) / (prod_t1 - prod_t0) : 0;
    r->lat_rss_max = s.rss_max;
    r->lat_consumer_cpu = cpu_since(s.consumer, s.c0);
    r->lat_backend_cpu = cpu_since(s.backend, s.b0);
    r->lat_broker_cpu = cpu_since(s.broker, s.k0);
    r->lat_wall = bench_mono_s() - lat_t0;
    if (!bench_metrics_get(c.port, metrics, METRICS_MAX_BYTES))
        metrics[0] = '\0';
    r->lat_exit = bench_prog_stop(&c);
    for (int i = 0; i < nmore; i++)
        if (bench_prog_stop(&more[i]) != 0 && r->lat_exit == 0)
            r->lat_exit = 1;
    if (o->peer != NULL)
        (void)peer_wait(&peer, 60 + o->duration);
    r->lat_ceiling = lateness_gate_alone(o);

    {
        PGresult *res;
        lateness_figures("l", r);
        res = bench_pg_query(g.conn,
                             "SELECT coalesce(max(extract(epoch FROM l.created_at - o.expire_at) "
                             "* 1000), 0) FROM ordergate.status_log l JOIN ordergate.orders o "
                             "USING (order_no) WHERE l.order_no LIKE 'l%' AND "
                             "o.expire_at <> date_trunc('milliseconds', o.expire_at)",
                             0, NULL);
        r->lat_rounded_max = strtod(PQgetvalue(res, 0, 0), NULL);
        PQclear(res);
    }
    printf("  produced at %.0f msg/s (target %d) over %d partitions; %d consumer(s) in one group, "
           "exit status %d; rss max %.1f MB%s\n",
           r->lat_produce_rate, o->rate, o->partitions, o->consumers, r->lat_exit, r->lat_rss_max,
           nmore > 0 ? " (the first consumer's; its metrics, CPU and batches below too)" : "");
    {
        char kb[48];
        printf("  cpu over %.0f s: consumer %.2f s (%.0f %%), its backend %.1f s (%.0f %%), broker "
               "%s\n",
               r->lat_wall, r->lat_consumer_cpu, 100 * r->lat_consumer_cpu / r->lat_wall,
               r->lat_backend_cpu, 100 * r->lat_backend_cpu / r->lat_wall,
               cpu_share_str(r->lat_broker_cpu, r->lat_wall, kb, sizeof(kb)));
    }
    lateness_print_figures(o, r);
    if (o->round_every > 0)
        printf("    ms-rounded due_at (every %d-th order, %ld orders): their max %.1f ms\n",
               o->round_every, r->lat_rounded, r->lat_rounded_max);
    snprintf(r->lat_h50, sizeof(r->lat_h50), "-");
    snprintf(r->lat_h99, sizeof(r->lat_h99), "-");
    if (metrics[0] != '\0') {
        bench_prom_hist(metrics, "ordergate_consumer_lateness_seconds", &h_late);
        bench_prom_hist(metrics, "ordergate_consumer_batch_size", &h_batch);
        bench_prom_hist(metrics, "ordergate_consumer_db_latency_seconds", &h_db);
        bench_hist_q(&h_late, 0.5, 1000, r->lat_h50, sizeof(r->lat_h50));
        bench_hist_q(&h_late, 0.99, 1000, r->lat_h99, sizeof(r->lat_h99));
        r->lat_not_due =
            (long)bench_prom(metrics, "ordergate_consumer_claims_total{outcome=\"not_due\"}");
        bench_print_hist("consumer lateness (after commit)", &h_late, 1000, " ms");
        bench_print_buckets("consumer lateness buckets (s)", &h_late);
        printf("  %-34s %.0f batches, mean %.1f messages\n", "batch size", h_batch.count,
               bench_hist_mean(&h_batch));
        bench_print_buckets("batch size distribution", &h_batch);
        bench_print_hist("db round trip", &h_db, 1000, " ms");
        printf("  consumer metrics: consumed %.0f, deferred (pause+seek) %.0f, dropped prefetch "
               "%.0f, not_due %.0f, busy %.0f, local retries not_due %.0f / busy %.0f, "
               "rescheduled %.0f\n",
               bench_prom_sum(metrics, "ordergate_consumer_messages_consumed_total"),
               bench_prom(metrics, "ordergate_consumer_messages_deferred_total"),
               bench_prom(metrics, "ordergate_consumer_messages_dropped_total"),
               bench_prom(metrics, "ordergate_consumer_claims_total{outcome=\"not_due\"}"),
               bench_prom(metrics, "ordergate_consumer_claims_total{outcome=\"busy\"}"),
               bench_prom(metrics, "ordergate_consumer_retries_total{reason=\"not_due\"}"),
               bench_prom(metrics, "ordergate_consumer_retries_total{reason=\"busy\"}"),
               bench_prom(metrics, "ordergate_consumer_rescheduled_total"));
    }
    {
        /* The consumer's line whether a peer ran beside it or not: tools/bench/peers/run.sh
         * compares a peer alone with the consumer alone, each from a run of its own. */
        char workload[32];
        snprintf(workload, sizeof(workload), "steady-%d/s", o->rate);
        if (o->peer != NULL)
            peer_report(r);
        peer_line_consumers("ordergate-consumer", workload, "l", r->lat_ceiling, o->consumers);
        if (o->peer != NULL)
            peer_line_consumers(o->peer_name, workload, "r", r->lat_ceiling, 0);
    }
    print_seeks(&c);
    fflush(stdout);
    if (!g.keep) {
        db_drop();
        topics_delete();
    }
    free(metrics);
}
