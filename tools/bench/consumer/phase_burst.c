/* og_bench_consumer: the burst phase. Every order falls due in the same second, as at the end
 * of a flash sale's payment window: --burst-orders orders due at one whole second T, their cancel
 * messages (due_at = T) already on the topic, --consumers consumers of one group already running
 * with every partition assigned and paused (waiting for T). Measured: the drain time (the last
 * cancel committed, as the consumers' claims_total counts it, polled every 20 ms, minus T),
 * lateness from status_log, and the gate alone on the same database at the same shape (one
 * session before and after the consumers, and as many sessions at once as there are consumers).
 *
 * The orders come from a bulk load (generate_series, as in the other phases) or, with
 * --burst-load place, as a flash sale places them: through ordergate.place_order from
 * --burst-clients sessions (bench_place_orders), on at most 50 SKUs.
 *
 * Run twice by default: once with the tables as the load leaves them, no VACUUM and no ANALYZE
 * (autovacuum is switched off on the phase database's tables so that it cannot analyze them
 * behind the run's back: the statistics a flash sale meets when its orders arrive faster than
 * autovacuum_naptime), once after ANALYZE. Every claim batch of the consumers is timed: each
 * logs its claim call's time (batch_committed, claim_ms, at debug level, which the phase's
 * consumers always run at).
 *
 * With --peer, a peer queue (tools/bench/consumer/peer.c) drains the same burst instead of the
 * consumers: its jobs queued before the due second, its workers started at it; the setup, the
 * gate alone before and after, and the figures from status_log are the same. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "tools/bench/consumer/bench_consumer.h"
#include "tools/bench/support/bench_pg.h"
#include "tools/bench/support/bench_place.h"
#include "tools/bench/support/bench_proc.h"
#include "tools/bench/support/bench_run.h"

#define BURST_POLL_MS 20
/* The consumers' CPU is also counted from this long before the due second: their partitions
 * resume CONSUMER_WINDOW_LEAD_MS (3 s) before it to fill the window, work for the burst that the
 * figure from the due second leaves out. */
#define BURST_LEAD_CPU_MS 5000

/* Autovacuum off on every table of the phase database (its own copy of the template). */
static const char AUTOVACUUM_OFF[] =
    "DO $$ DECLARE t regclass; BEGIN "
    "FOR t IN SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = 'ordergate' AND c.relkind = 'r' LOOP "
    "EXECUTE format('ALTER TABLE %s SET (autovacuum_enabled = false)', t); END LOOP; END $$";

struct par_session {
    const struct opts *o;
    struct db *db;
    const char *prefix;
    long first, n, done;
    char error[300];
};

/* One of the parallel gate sessions: its slice of prefix<first..first+n-1>, back to back. */
static void *par_thread(void *arg)
{
    struct par_session *p = arg;
    int batch = p->o->batch_size;
    char(*names)[GATE_ORDER_NO_MAX + 1] = calloc((size_t)p->n, sizeof(*names));
    const char **nos = calloc((size_t)p->n, sizeof(*nos));
    struct gate_cancel_row *rows = calloc((size_t)batch, sizeof(*rows));
    struct og_error err = {0};

    if (names == NULL || nos == NULL || rows == NULL) {
        snprintf(p->error, sizeof(p->error), "out of memory");
        goto out;
    }
    /* With a stride S, the slice is taken residue class by residue class (0, S, 2S, ..., then 1,
     * S + 1, ...): a batch then spans S times the orders, as a consumer's batch spans the
     * orders of its partitions' messages (each partition an eighth of them by key hash with 8
     * partitions), where a stride of 1 claims neighbours in the heap and the primary key. */
    for (long r = 0, k = 0; r < p->o->par_stride; r++)
        for (long i = r; i < p->n; i += p->o->par_stride, k++) {
            snprintf(names[k], sizeof(names[k]), "%s%ld", p->prefix, p->first + i);
            nos[k] = names[k];
        }
    for (long i = 0; i < p->n && !bench_stop; i += batch) {
        size_t len = (size_t)(p->n - i < batch ? p->n - i : batch), nrows = 0;
        if (gate_claim_cancel(p->db, nos + i, len, GATE_SRC_TIMEOUT_CONSUMER, rows, &nrows, &err) !=
            OG_OK) {
            snprintf(p->error, sizeof(p->error), "claim_cancel: %s", err.msg);
            goto out;
        }
        for (size_t k = 0; k < nrows; k++)
            if (rows[k].outcome != GATE_CANCELLED) {
                snprintf(p->error, sizeof(p->error), "%s came back %s, expected cancelled",
                         rows[k].order_no, gate_outcome_str(rows[k].outcome));
                goto out;
            }
        p->done += (long)nrows;
    }
out:
    free(rows);
    free(nos);
    free(names);
    return NULL;
}

/* k gate sessions at once, each on its own slice of prefix<0..n-1>: orders/s of them all; their
 * backends' CPU and the WAL per order into b. */
static double ceiling_parallel(const struct opts *o, const char *prefix, long n, int k,
                               struct burst_result *b)
{
    struct par_session s[BURST_MAX_CONSUMERS];
    pthread_t t[BURST_MAX_CONSUMERS];
    pid_t backend[BURST_MAX_CONSUMERS];
    long done = 0;
    double t0, secs, cpu0 = 0, cpu1 = 0, wal0;

    for (int i = 0; i < k; i++)
        s[i] = (struct par_session){.o = o,
                                    .db = ceiling_session(),
                                    .prefix = prefix,
                                    .first = n * i / k,
                                    .n = n * (i + 1) / k - n * i / k};
    for (int i = 0; i < k; i++) {
        backend[i] = PQbackendPID(db_conn(s[i].db));
        cpu0 += bench_proc_cpu_s(backend[i]);
    }
    wal0 = db_wal_lsn_bytes();
    t0 = bench_mono_s();
    for (int i = 0; i < k; i++)
        if (pthread_create(&t[i], NULL, par_thread, &s[i]) != 0)
            bench_die("pthread_create failed");
    for (int i = 0; i < k; i++)
        pthread_join(t[i], NULL);
    secs = bench_mono_s() - t0;
    for (int i = 0; i < k; i++)
        cpu1 += bench_proc_cpu_s(backend[i]);
    for (int i = 0; i < k; i++) {
        if (s[i].error[0] != '\0')
            bench_die("parallel ceiling: %s", s[i].error);
        done += s[i].done;
        db_free(s[i].db);
    }
    b->ceil_par_cpu_us = 1e6 * (cpu1 - cpu0) / (double)done;
    b->ceil_par_wal_kb = (db_wal_lsn_bytes() - wal0) / 1024.0 / (double)done;
    bench_progress("gate ceiling, %d sessions at once on %s* (stride %d): %ld orders in %.2f s "
                   "= %.0f orders/s; backends' cpu %.1f us, WAL %.2f KB per order",
                   k, prefix, o->par_stride, done, secs, (double)done / secs, b->ceil_par_cpu_us,
                   b->ceil_par_wal_kb);
    return (double)done / secs;
}

/* The database sessions of the running consumers, and their CPU seconds so far. */
static double consumer_backends_cpu(void)
{
    PGresult *res = bench_pg_query(g.conn,
                                   "SELECT pid FROM pg_stat_activity WHERE datname = "
                                   "current_database() AND (application_name = "
                                   "'ordergate-consumer' OR application_name LIKE "
                                   "'ordergate-consumer-claim-%')",
                                   0, NULL);
    double sum = 0;

    for (int i = 0; i < PQntuples(res); i++) {
        double s = bench_proc_cpu_s((pid_t)atoi(PQgetvalue(res, i, 0)));
        if (s > 0)
            sum += s;
    }
    PQclear(res);
    return sum;
}

static double consumers_cpu(const struct bench_prog *c, int n)
{
    double sum = 0;

    for (int i = 0; i < n; i++) {
        double s = bench_proc_cpu_s(c[i].pid);
        if (s > 0)
            sum += s;
    }
    return sum;
}

/* The consumers' CPU by thread: librdkafka's ("rdk:"), the metrics HTTP server's ("MHD-"), and the
 * rest (the consume loop's and the claim threads, named after the binary, which --consumer may
 * rename). */
struct burst_threads {
    double loop, rdk, http;
};

static struct burst_threads consumers_threads(const struct bench_prog *c, int n)
{
    struct burst_threads t = {0};

    for (int i = 0; i < n; i++) {
        double all = bench_proc_cpu_s(c[i].pid);
        double r = bench_proc_threads_cpu_s(c[i].pid, "rdk:");
        double h = bench_proc_threads_cpu_s(c[i].pid, "MHD-");
        r = r > 0 ? r : 0;
        h = h > 0 ? h : 0;
        t.rdk += r;
        t.http += h;
        t.loop += all > r + h ? all - r - h : 0;
    }
    return t;
}

/* The sum of one sample over every consumer's metrics; -1 when one did not answer. */
static double consumers_metric(const struct bench_prog *c, int n, char *buf, const char *sample,
                               double *each)
{
    double sum = 0;

    for (int i = 0; i < n; i++) {
        double v;
        if (!bench_metrics_get(c[i].port, buf, METRICS_MAX_BYTES))
            return -1;
        v = bench_prom(buf, sample);
        if (each != NULL)
            each[i] = v;
        sum += v > 0 ? v : 0;
    }
    return sum;
}

/* One VmRSS sample of every consumer: the largest so far of each, and of them all. */
static void burst_rss(const struct bench_prog *c, int n, struct burst_result *b)
{
    for (int i = 0; i < n; i++) {
        double rss = bench_proc_vm_mb(c[i].pid, "VmRSS:");
        if (rss > b->rss_each_mb[i])
            b->rss_each_mb[i] = rss;
        if (rss > b->rss_max_mb)
            b->rss_max_mb = rss;
    }
}

/* Order i of the burst, the shape db_load gives it (amount, o->items lines over o->skus SKUs,
 * the coupon bc<i> on one order in coupon_every), for place_order. */
static void burst_order(const void *arg, long i, struct bench_place_order *order)
{
    const struct opts *o = arg;
    size_t len = 1;

    snprintf(order->order_no, sizeof(order->order_no), "b%ld", i);
    order->amount_cents = 1000 + (i % 50) * 100;
    order->items[0] = '[';
    for (int j = 0; j < o->items && len < sizeof(order->items); j++)
        len += (size_t)snprintf(order->items + len, sizeof(order->items) - len,
                                "%s{\"sku\": \"k%ld\", \"qty\": %d}", j > 0 ? ", " : "",
                                (i * 7 + j * 13) % o->skus, 1 + j);
    if (len + 2 > sizeof(order->items))
        bench_die("burst: the items of order %ld do not fit", i);
    snprintf(order->items + len, sizeof(order->items) - len, "]");
    if (o->coupon_every > 0 && i % o->coupon_every == 0)
        snprintf(order->coupon, sizeof(order->coupon), "bc%ld", i);
}

/* The burst's orders b0..b(n-1) through place_order, all expiring at due_ms, from
 * o->burst_clients sessions: their coupons first (available; place_order locks them), then the
 * orders, which reserve their own stock. */
static void burst_place(const struct opts *o, long n, int64_t due_ms, struct burst_result *b)
{
    char conninfo[96], expire_at[32], n_s[24], every_s[16];
    const char *p[2] = {n_s, every_s};
    struct bench_place_result r;

    snprintf(n_s, sizeof(n_s), "%ld", n);
    snprintf(every_s, sizeof(every_s), "%d", o->coupon_every);
    PQclear(bench_pg_query(g.conn,
                           "SELECT count(ordergate.add_coupon('bc' || i)) "
                           "FROM generate_series(0, $1::bigint - 1) i "
                           "WHERE $2::int > 0 AND i % $2::int = 0",
                           2, p));
    snprintf(conninfo, sizeof(conninfo), "dbname=%s", g.dbname);
    clock_format_iso(due_ms, expire_at, sizeof(expire_at));
    if (bench_place_orders(conninfo, PROG "-place", o->burst_clients, n, expire_at, burst_order, o,
                           &r) != 0)
        bench_die("burst: %s", r.error);
    b->place_s = r.seconds;
    b->place_max_ms = r.max_ms;
    /* The rest of the setup (messages, the gate alone, the consumers' start) still needs time. */
    if (clock_wall_ms() > due_ms - 500)
        bench_die("burst: placement took %.0f s and ended past the due second; rerun with "
                  "--burst-lead %d",
                  r.seconds, 30 + (int)(n / 10000) + (int)(r.seconds * 2));
    bench_progress("placed %ld orders b* through place_order from %d sessions in %.1f s = %.0f "
                   "orders/s (slowest call %.0f ms); the due second in %.1f s",
                   r.placed, o->burst_clients, r.seconds, (double)r.placed / r.seconds, r.max_ms,
                   (double)(due_ms - clock_wall_ms()) / 1000.0);
}

/* Every claim batch of the consumers, from their batch_committed debug lines (claim_ms: the
 * claim call's wall time; 0 in a batch that claimed nothing). */
static void burst_claim_times(const struct bench_prog *c, int nc, struct burst_result *b)
{
    double *all = NULL;
    size_t n = 0;

    for (int i = 0; i < nc; i++) {
        double *v = NULL;
        size_t nv = 0;
        long lines = bench_prog_log_events(&c[i], "batch_committed", "claim_ms", &v, &nv);
        double *grown = nv > 0 ? realloc(all, (n + nv) * sizeof(*all)) : all;

        if (grown == NULL)
            bench_die("out of memory");
        all = grown;
        b->claim_lines += lines > 0 ? lines : 0;
        for (size_t k = 0; k < nv; k++)
            if (v[k] > 0) {
                all[n++] = v[k];
                b->claim_sum_ms += v[k];
            }
        free(v);
    }
    b->claim_batches = (long)n;
    if (n > 0) {
        qsort(all, n, sizeof(*all), bench_cmp_double);
        b->claim_p50_ms = all[(n - 1) / 2];
        b->claim_p99_ms = all[(n - 1) * 99 / 100];
        b->claim_max_ms = all[n - 1];
    }
    free(all);
}

static void burst_run(const struct opts *o, const char *run, bool analyzed, struct burst_result *b)
{
    struct opts so = *o;
    const char *how = analyzed ? "analyze" : "none";
    long n = o->burst_orders, ceil_n = o->ceiling_orders;
    long par_n = o->par_orders > 0 ? o->par_orders : ceil_n;
    int nc = o->consumers;
    /* T and the orders' expire_at are one value, fixed here: place_order takes expire_at, so T
     * cannot wait for the placement to end. The default lead covers placement at 250 orders/s
     * per session, up to 4 sessions (about 1,600/s were measured with 4 on 2 cores: margin for
     * a loaded machine). */
    int place_s =
        !o->burst_place ? 0 : (int)(n / (250L * (o->burst_clients < 4 ? o->burst_clients : 4)));
    /* A gate alone on more orders than ceil_n is loaded and run in the lead too: about 10,000
     * orders/s each. */
    int par_s = par_n > ceil_n ? (int)(par_n / 5000) : 0;
    int lead = o->burst_lead_s > 0 ? o->burst_lead_s : 30 + (int)(n / 10000) + place_s + par_s;
    int64_t due_ms = (clock_wall_ms() + (int64_t)lead * 1000) / 1000 * 1000;
    int64_t past_ms = clock_wall_ms() - 3600 * 1000, end_ms = 0;
    char topic[160], group[160], base[128], *metrics = malloc(METRICS_MAX_BYTES);
    struct bench_prog c[BURST_MAX_CONSUMERS];
    struct ceiling cb, ca;
    struct db *cdb;
    double setup_t0 = bench_mono_s(), k0, kj0, c0, b0, wal0, t_due, lead0;
    struct burst_threads ct0, ct1;
    pid_t broker = 0;

    if (metrics == NULL)
        bench_die("out of memory");
    memset(b, 0, sizeof(*b));
    b->analyzed = analyzed;
    b->placed = o->burst_place;
    b->orders = n;
    b->consumers = nc;
    b->violations = -1;
    b->ceil_par_cpu_us = b->ceil_par_wal_kb = -1;
    so.skus = o->burst_skus;
    so.log_level = "debug"; /* the batch_committed lines: every batch's claim time */
    printf("\n== burst, %s: %ld orders due in the same second, %d consumer(s) in one group, "
           "batch %d, %d partitions, %d line(s) per order over %d SKUs; orders %s ==\n",
           analyzed ? "after ANALYZE" : "no statistics (no VACUUM/ANALYZE after the load)", n, nc,
           o->batch_size, o->partitions, o->items, o->burst_skus,
           o->burst_place ? "placed through place_order (a flash sale)" : "bulk-loaded");
    fflush(stdout);

    db_fresh(&so);
    bench_pg_exec(g.conn, AUTOVACUUM_OFF);
    db_stock(&so);
    if (!o->burst_place)
        db_load(&so, "b", n, due_ms, 0);
    db_load(&so, "g", ceil_n, past_ms, 0);
    db_load(&so, "h", ceil_n, past_ms, 0);
    if (nc * o->claim_sessions > 1)
        db_load(&so, "m", par_n, past_ms, 0);
    bench_pg_exec(g.conn,
                  "UPDATE ordergate.inventory v SET available = v.available - h.q "
                  "FROM (SELECT sku, sum(qty) AS q FROM ordergate.order_items GROUP BY sku) h "
                  "WHERE v.sku = h.sku");
    /* After the stock update: place_order reserves the stock of what it places. */
    if (o->burst_place)
        burst_place(&so, n, due_ms, b);
    if (analyzed)
        bench_pg_exec(g.conn, "ANALYZE");
    bench_pg_exec(g.conn, "CHECKPOINT");

    snprintf(base, sizeof(base), "ogbench.%s.burst-%s", run, how);
    snprintf(topic, sizeof(topic), "%s.cancel", base);
    snprintf(group, sizeof(group), "%s.group", base);
    if (o->peer == NULL) {
        topic_create(o, topic, o->partitions);
        (void)produce_backlog(o, topic, "b", n, due_ms);
    }

    /* The gate alone on the same database before the consumers start: no statistics either. */
    cdb = ceiling_session();
    ceiling_run(o, cdb, "g", 0, ceil_n, 0, &cb, true);
    /* As many gate sessions at once as the consumers claim on. */
    b->ceil_par_n = nc * o->claim_sessions;
    if (b->ceil_par_n > 1)
        b->ceil_par = ceiling_parallel(o, "m", par_n, b->ceil_par_n, b);
    bench_pg_exec(g.conn, "CHECKPOINT");
    if (o->peer != NULL) {
        /* No consumer: the peer drains the burst, and the figures below are taken alike. */
        b->consumers = 0;
        peer_burst(o, due_ms, b);
        goto drained;
    }

    for (int i = 0; i < nc; i++) {
        char tag[48];
        snprintf(tag, sizeof(tag), "burst-%s-%d", how, i);
        launch_config(&so, &c[i], tag, base);
        launch_consumer(o, &c[i], tag, topic, group);
    }
    for (int i = 0; i < nc; i++)
        bench_prog_port(&c[i]);
    /* Ready: every partition paused, spread over all consumers, twice in a row a second apart
     * (a rebalance while the second member joins moves partitions). */
    {
        int stable = 0;
        double each[BURST_MAX_CONSUMERS];
        while (stable < 2) {
            double paused;
            bool all = true;
            for (int i = 0; i < nc; i++)
                bench_prog_alive(&c[i]);
            bench_check_stop();
            paused = consumers_metric(c, nc, metrics, "ordergate_consumer_paused_partitions", each);
            for (int i = 0; i < nc && nc <= o->partitions; i++)
                all &= each[i] > 0;
            stable = paused == o->partitions && all ? stable + 1 : 0;
            if (clock_wall_ms() > due_ms - 500)
                bench_die("burst: the consumers were not all paused 0.5 s before the due second "
                          "(setup took %.0f s of the %d s lead); rerun with --burst-lead %d",
                          bench_mono_s() - setup_t0, lead,
                          (int)(bench_mono_s() - setup_t0) * 2 + 10);
            bench_sleep_ms(stable > 0 ? 1000 : 200);
        }
    }
    b->ready_s = (double)(due_ms - clock_wall_ms()) / 1000.0;
    bench_progress("burst: every partition paused; setup took %.0f s, due second in %.1f s",
                   bench_mono_s() - setup_t0, b->ready_s);
    b->reltuples = bench_pg_num(g.conn,
                                "SELECT reltuples FROM pg_class WHERE oid = "
                                "'ordergate.orders'::regclass",
                                0, NULL);
    b->stats_rows = bench_pg_num(g.conn,
                                 "SELECT count(*) FROM pg_stats WHERE schemaname = 'ordergate' "
                                 "AND tablename = 'orders'",
                                 0, NULL);
    while (clock_wall_ms() < due_ms - BURST_LEAD_CPU_MS)
        bench_sleep_ms(20);
    lead0 = consumers_cpu(c, nc);
    /* The CPU counters right before the due second. */
    while (clock_wall_ms() < due_ms - 100)
        bench_sleep_ms(20);
    {
        struct sampler s;
        sampler_start(&s, c[0].pid, 0);
        broker = s.broker;
    }
    k0 = bench_proc_cpu_s(broker);
    /* The JVM compiles hot code for minutes after the broker starts, and again for paths a run
     * takes first: CPU the broker spends whatever the client does, shown apart. */
    kj0 = bench_proc_threads_cpu_s(broker, "C2 Compiler") +
          bench_proc_threads_cpu_s(broker, "C1 Compiler");
    ct0 = consumers_threads(c, nc);
    c0 = consumers_cpu(c, nc);
    b0 = consumer_backends_cpu();
    wal0 = db_wal_lsn_bytes();
    while (clock_wall_ms() < due_ms)
        bench_sleep_ms(1);
    t_due = bench_mono_s();
    {
        double next_line = t_due + 1, done = 0;
        int64_t give_up = due_ms + 120000 + n / 2; /* 120 s + 0.5 ms per order */
        for (;;) {
            double now;
            for (int i = 0; i < nc; i++)
                bench_prog_alive(&c[i]);
            bench_check_stop();
            done = consumers_metric(c, nc, metrics,
                                    "ordergate_consumer_claims_total{outcome=\"cancelled\"}", NULL);
            if (done >= (double)n) {
                end_ms = clock_wall_ms();
                break;
            }
            now = bench_mono_s();
            if (now >= next_line) {
                burst_rss(c, nc, b);
                bench_progress("burst t=+%.0fs cancelled %.0f of %ld; consumer rss max %.1f MB",
                               now - t_due, done, n, b->rss_max_mb);
                next_line += 1;
            }
            if (clock_wall_ms() > give_up)
                bench_die("burst: %.0f of %ld cancelled %.0f s after the due second", done, n,
                          (double)(clock_wall_ms() - due_ms) / 1000.0);
            bench_sleep_ms(BURST_POLL_MS);
        }
    }
    b->wall_s = bench_mono_s() - t_due;
    b->drain_s = (double)(end_ms - due_ms) / 1000.0;
    b->rate = (double)n / b->drain_s;
    burst_rss(c, nc, b);
    for (int i = 0; i < nc; i++)
        b->hwm_each_mb[i] = bench_proc_vm_mb(c[i].pid, "VmHWM:");
    b->consumer_cpu = consumers_cpu(c, nc) - c0;
    b->consumer_lead_cpu = c0 - lead0;
    b->backend_cpu = consumer_backends_cpu() - b0;
    b->broker_cpu = k0 >= 0 ? bench_proc_cpu_s(broker) - k0 : -1;
    b->broker_jit_cpu = k0 >= 0 ? bench_proc_threads_cpu_s(broker, "C2 Compiler") +
                                      bench_proc_threads_cpu_s(broker, "C1 Compiler") - kj0
                                : -1;
    ct1 = consumers_threads(c, nc);
    b->consumer_loop_cpu = ct1.loop - ct0.loop;
    b->consumer_rdk_cpu = ct1.rdk - ct0.rdk;
    b->consumer_http_cpu = ct1.http - ct0.http;
    for (int i = 0; i < nc; i++) {
        if (!bench_metrics_get(c[i].port, metrics, METRICS_MAX_BYTES))
            continue;
        b->consumed += bench_prom_sum(metrics, "ordergate_consumer_messages_consumed_total");
        b->deferred += bench_prom(metrics, "ordergate_consumer_messages_deferred_total");
        b->dropped += bench_prom(metrics, "ordergate_consumer_messages_dropped_total");
    }
    b->wal_kb_per_order = (db_wal_lsn_bytes() - wal0) / 1024.0 / (double)n;
    {
        struct bench_hist hb, hd;
        double db_sum = 0, db_count = 0;
        for (int i = 0; i < nc; i++) {
            if (!bench_metrics_get(c[i].port, metrics, METRICS_MAX_BYTES))
                continue;
            bench_prom_hist(metrics, "ordergate_consumer_batch_size", &hb);
            bench_prom_hist(metrics, "ordergate_consumer_db_latency_seconds", &hd);
            b->batches += hb.count;
            b->batch_mean += hb.sum;
            db_sum += hd.sum;
            db_count += hd.count;
            b->not_due +=
                bench_prom(metrics, "ordergate_consumer_claims_total{outcome=\"not_due\"}");
            b->busy += bench_prom(metrics, "ordergate_consumer_claims_total{outcome=\"busy\"}");
        }
        b->batch_mean = b->batches > 0 ? b->batch_mean / b->batches : 0;
        b->db_mean_ms = db_count > 0 ? 1000 * db_sum / db_count : 0;
    }
    for (int i = 0; i < nc; i++)
        (void)bench_prog_stop(&c[i]);
    burst_claim_times(c, nc, b);

drained : {
    char due[24];
    const char *p[1] = {due};
    PGresult *res;
    long got;
    snprintf(due, sizeof(due), "%lld", (long long)due_ms);
    res =
        bench_pg_query(g.conn,
                       "SELECT count(*), min(ms), max(ms), "
                       "       percentile_cont(0.5) WITHIN GROUP (ORDER BY late), "
                       "       percentile_cont(0.99) WITHIN GROUP (ORDER BY late), max(late), "
                       "       count(*) FILTER (WHERE late < 0) "
                       "FROM (SELECT extract(epoch FROM l.created_at) * 1000 - $1::bigint AS ms, "
                       "             extract(epoch FROM l.created_at - o.expire_at) * 1000 AS late "
                       "      FROM ordergate.status_log l JOIN ordergate.orders o USING (order_no) "
                       "      WHERE l.order_no LIKE 'b%') x",
                       1, p);
    got = atol(PQgetvalue(res, 0, 0));
    b->first_claim_s = strtod(PQgetvalue(res, 0, 1), NULL) / 1000.0;
    b->last_claim_s = strtod(PQgetvalue(res, 0, 2), NULL) / 1000.0;
    b->p50 = strtod(PQgetvalue(res, 0, 3), NULL);
    b->p99 = strtod(PQgetvalue(res, 0, 4), NULL);
    b->max = strtod(PQgetvalue(res, 0, 5), NULL);
    if (got != n || atol(PQgetvalue(res, 0, 6)) != 0)
        bench_die("burst: %ld status_log rows for %ld orders, %s before expire_at", got, n,
                  PQgetvalue(res, 0, 6));
    PQclear(res);
}

    /* The gate alone again, after the consumers, same database. */
    ceiling_run(o, cdb, "h", 0, ceil_n, 0, &ca, true);
    db_free(cdb);
    b->ceil_before = cb.rate;
    b->ceil_after = ca.rate;
    b->ceil_p99_ms = cb.p99_ms > ca.p99_ms ? cb.p99_ms : ca.p99_ms;
    if (o->reconcile)
        b->violations = (long)bench_pg_num(
            g.conn, "SELECT coalesce(sum(violations), 0) FROM ordergate.reconcile()", 0, NULL);
    bench_load_average(b->load, sizeof(b->load));
    bench_cpu_pressure(b->psi, sizeof(b->psi));
    b->done = true;

    if (o->peer == NULL)
        printf(
            "  ready: every partition paused %.1f s before the due second; orders reltuples %.0f, "
            "%.0f pg_stats rows on orders at that moment\n",
            b->ready_s, b->reltuples, b->stats_rows);
    printf("  drain: last cancel committed %.2f s after the due second (consumers' counters "
           "polled every %d ms) = %.0f orders/s; claims started from +%.2f s to +%.2f s "
           "(status_log)\n",
           b->drain_s, BURST_POLL_MS, b->rate, b->first_claim_s, b->last_claim_s);
    printf("  lateness (status_log.created_at - expire_at): p50 %.0f ms, p99 %.0f ms, max %.0f ms; "
           "none before expire_at\n",
           b->p50, b->p99, b->max);
    printf("  gate alone, same database, batch %d%s: one session %.0f /s before, %.0f /s after "
           "(mean %.0f; call p99 up to %.1f ms)",
           o->batch_size, b->placed ? ", on bulk-loaded orders of the same shape" : "",
           b->ceil_before, b->ceil_after, (b->ceil_before + b->ceil_after) / 2, b->ceil_p99_ms);
    if (b->ceil_par_n > 1)
        printf("; %d sessions at once %.0f /s", b->ceil_par_n, b->ceil_par);
    printf("\n  drain rate / gate alone (one session, mean): %.1f %%",
           100 * b->rate * 2 / (b->ceil_before + b->ceil_after));
    if (b->ceil_par_n > 1)
        printf("; / %d sessions at once: %.1f %%", b->ceil_par_n, 100 * b->rate / b->ceil_par);
    printf("\n");
    if (o->peer == NULL)
        printf("  consumers: %.0f batches, mean %.1f messages, claim round trip mean %.1f ms, "
               "not_due %.0f, busy %.0f\n",
               b->batches, b->batch_mean, b->db_mean_ms, b->not_due, b->busy);
    if (b->claim_batches > 0)
        printf(
            "  claim batches: %ld, claim call p50 %.1f ms, p99 %.1f ms, max %.1f ms (every batch: "
            "claim_ms of the consumers' batch_committed debug lines, %ld lines; the metrics "
            "counted %.0f batches); claims outstanding %.1f s of the %.2f s drain (%.1f %%, over "
            "%d consumer(s): the rest is the database idle between one consumer's claims)\n",
            b->claim_batches, b->claim_p50_ms, b->claim_p99_ms, b->claim_max_ms, b->claim_lines,
            b->batches, b->claim_sum_ms / 1000.0, b->drain_s,
            b->drain_s > 0 ? 100.0 * b->claim_sum_ms / 1000.0 / b->drain_s / nc : 0, nc);
    else if (o->peer == NULL)
        printf("  claim batches: no claim_ms in the consumers' %ld batch_committed lines (a "
               "consumer built before batch_committed carried it?)\n",
               b->claim_lines);
    if (b->placed)
        printf("  placement: %ld orders through place_order from %d sessions in %.1f s = %.0f "
               "orders/s, slowest call %.0f ms\n",
               n, o->burst_clients, b->place_s, (double)n / b->place_s, b->place_max_ms);
    if (o->peer == NULL) {
        char kb[32], kj[32];
        printf("  cpu from the due second to drained (%.1f s): consumers %.2f s, their backends "
               "%.1f s, broker %s; WAL %.2f KB/order; consumer rss max %.1f MB (VmRSS, the "
               "largest consumer, once a second)\n",
               b->wall_s, b->consumer_cpu, b->backend_cpu, cpu_str(b->broker_cpu, kb, sizeof(kb)),
               b->wal_kb_per_order, b->rss_max_mb);
        printf("  per order: the consumers' backends %.1f us of cpu, WAL %.2f KB",
               1e6 * b->backend_cpu / (double)n, b->wal_kb_per_order);
        if (b->ceil_par_cpu_us >= 0)
            printf("; the gate alone on %d sessions %.1f us, %.2f KB", b->ceil_par_n,
                   b->ceil_par_cpu_us, b->ceil_par_wal_kb);
        printf(" (cpu from /proc, 10 ms ticks: load-independent, unlike the rates)\n");
        printf("  consumers' memory: VmRSS max while draining (once a second) / VmHWM (the whole "
               "life, setup included):");
        for (int i = 0; i < nc; i++)
            printf("%s consumer %d %.1f / %.1f MB", i > 0 ? ";" : "", i, b->rss_each_mb[i],
                   b->hwm_each_mb[i]);
        printf("\n");
        printf("  of it: consumers' loop and claim threads %.2f s, librdkafka %.2f s, metrics "
               "HTTP %.2f s (the phase's scrapes every %d ms); broker's JIT compiler %s\n",
               b->consumer_loop_cpu, b->consumer_rdk_cpu, b->consumer_http_cpu, BURST_POLL_MS,
               cpu_str(b->broker_jit_cpu, kj, sizeof(kj)));
        printf("  consumers' messages: consumed %.0f of %ld (a message fetched again after a "
               "pause counts again), deferred (pause and seek) %.0f, dropped prefetched copies "
               "%.0f\n",
               b->consumed, n, b->deferred, b->dropped);
    }
    if (o->peer == NULL)
        printf("  consumers' cpu (user+sys) from %d s before the due second to drained: %.2f s "
               "(%.2f s of it before the due second) = %.2f s per 100,000 messages\n",
               BURST_LEAD_CPU_MS / 1000, b->consumer_lead_cpu + b->consumer_cpu,
               b->consumer_lead_cpu,
               (b->consumer_lead_cpu + b->consumer_cpu) * 100000.0 / (double)n);
    printf("  reconcile: %ld violations; load average %s, cpu pressure avg60 %s at the end\n",
           b->violations, b->load, b->psi);
    {
        char workload[48];
        snprintf(workload, sizeof(workload), "burst-%ld%s", n, analyzed ? "-analyzed" : "");
        peer_line(o->peer != NULL ? o->peer_name : "ordergate-consumer", workload, "b",
                  (b->ceil_before + b->ceil_after) / 2);
    }
    fflush(stdout);
    if (!g.keep) {
        db_drop();
        topics_delete();
    }
    free(metrics);
}

void phase_burst(const struct opts *o, const char *run, struct results *r)
{
    if (o->consumers > BURST_MAX_CONSUMERS)
        bench_die("burst: at most %d consumers", BURST_MAX_CONSUMERS);
    r->burst = true;
    if (o->burst_plain)
        burst_run(o, run, false, &r->burst_r[0]);
    if (o->burst_analyze)
        burst_run(o, run, true, &r->burst_r[1]);
}

static void row(const char *figure, const char *value, const char *target, const char *verdict)
{
    printf("%-58s %-28s %-16s %s\n", figure, value, target, verdict);
}

void burst_summary(const struct opts *o, const struct results *r)
{
    double target_s = 0;
    char v[96], label[128], t[32];

    (void)o;
    for (int k = 0; k < 2; k++) {
        const struct burst_result *b = &r->burst_r[k];
        double mean;
        if (!b->done)
            continue;
        if (b->orders == TARGET_BURST_1_N && b->consumers == 1)
            target_s = TARGET_BURST_1_S;
        else if (b->orders == TARGET_BURST_2_N && b->consumers == 2)
            target_s = TARGET_BURST_2_S;
        else
            target_s = 0;
        mean = (b->ceil_before + b->ceil_after) / 2;
        snprintf(label, sizeof(label), "burst %ld due at once, %d consumer%s, %s: drain", b->orders,
                 b->consumers, b->consumers > 1 ? "s" : "",
                 b->analyzed ? "after ANALYZE" : "no statistics");
        snprintf(v, sizeof(v), "%.2f s = %.0f /s", b->drain_s, b->rate);
        snprintf(t, sizeof(t), "<= %.0f s", target_s);
        row(label, v, target_s > 0 ? t : "",
            target_s > 0 ? (b->drain_s <= target_s ? "met" : "NOT met") : "");
        if (b->placed) {
            snprintf(v, sizeof(v), "%.0f /s, slowest call %.0f ms", (double)b->orders / b->place_s,
                     b->place_max_ms);
            row("  orders placed through place_order (not bulk-loaded)", v, "", "");
        }
        snprintf(v, sizeof(v), "%.0f / %.0f /s", b->ceil_before, b->ceil_after);
        row("  gate alone, same db, 1 session, before / after", v, "", "");
        if (b->ceil_par_n > 1) {
            snprintf(label, sizeof(label), "  gate alone, same db, %d sessions at once",
                     b->ceil_par_n);
            snprintf(v, sizeof(v), "%.0f /s", b->ceil_par);
            row(label, v, "", "");
        }
        snprintf(v, sizeof(v), "%.1f %% of 1 session", 100 * b->rate / mean);
        if (b->ceil_par_n > 1)
            snprintf(v + strlen(v), sizeof(v) - strlen(v), ", %.1f %% of %d",
                     100 * b->rate / b->ceil_par, b->ceil_par_n);
        row("  drain rate / gate alone", v, "", "");
        if (target_s > 0) {
            /* What the goal asks of the gate: the rate it implies against what one session (or
             * as many sessions as consumers) gave here. */
            double need = (double)b->orders / target_s;
            double have = b->ceil_par_n > 1 ? b->ceil_par : mean;
            snprintf(v, sizeof(v), "%.0f /s vs %.0f /s alone", need, have);
            row("  the goal's rate vs the gate alone here", v, "",
                need <= have ? "reachable" : "beyond it");
        }
        snprintf(v, sizeof(v), "%.0f / %.0f / %.0f ms", b->p50, b->p99, b->max);
        row("  lateness p50 / p99 / max (status_log)", v, "", "");
        if (b->claim_batches > 0) {
            snprintf(v, sizeof(v), "%ld; %.1f / %.1f / %.1f ms", b->claim_batches, b->claim_p50_ms,
                     b->claim_p99_ms, b->claim_max_ms);
            row("  claim batches; p50 / p99 / max (consumers' claim_ms)", v, "", "");
        }
        snprintf(v, sizeof(v), "%s; %s", b->load, b->psi);
        row("  load average; cpu pressure avg60 at its end", v, "", "");
        if (b->violations >= 0) {
            snprintf(v, sizeof(v), "%ld", b->violations);
            row("  reconcile violations", v, "0", b->violations == 0 ? "met" : "NOT met");
        }
    }
    if (r->burst_r[0].done && r->burst_r[1].done) {
        double ratio = r->burst_r[0].rate / r->burst_r[1].rate;
        double cr = (r->burst_r[0].ceil_before + r->burst_r[0].ceil_after) /
                    (r->burst_r[1].ceil_before + r->burst_r[1].ceil_after);
        snprintf(v, sizeof(v), "%.1f %%", 100 * ratio);
        row("burst drain rate, no statistics / after ANALYZE", v, ">= 90 %",
            ratio >= TARGET_STATS ? "met" : "NOT met");
        snprintf(v, sizeof(v), "%.1f %%", 100 * cr);
        row("  the same for the gate alone (1 session, mean)", v, "", "");
    }
}
