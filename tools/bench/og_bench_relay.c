/* og_bench_relay: placement with the database scheduling the cancels
 * (schedule_cancels = 1) next to the outbox relay that publishes them. Does
 * one relay keep up with placement? Prints figures; not a test.
 *
 * For each outbox.batch of --batches (500, the setting's default, and 2000),
 * in a database of its own copied from the template the tests build
 * (ordergate_tpl), with schedule_cancels = 1, and on two delay topics of its
 * own named by level (<run>.1m, <run>.15m; deleted afterwards):
 *
 *   1. placement alone: --clients sessions place --orders orders through
 *      gate_place() (common/gate.c), durable commits, one item line each over
 *      --skus SKUs, due in --due-s: orders/s and the call's latency. Each
 *      placement writes its cancel_scheduled event in its own transaction;
 *   2. the relay alone, on the backlog phase 1 left: one relay as
 *      ordergate-consumer runs it (consumer/relay_thread.c): outbox_relay_step() of
 *      common/outbox.c on a database connection and an idempotent producer of
 *      its own (kafka_producer_new with outbox_dr_cb), stepping as its thread
 *      does: at once again after a full step, else after outbox.interval_ms.
 *      Events/s from the first step's start to the last one's end, and the
 *      duration of every step;
 *   3. both at once: phase 1's placement again while the relay runs, its
 *      backlog (ordergate.outbox_backlog()) sampled every 100 ms: the peak,
 *      what is left when placement ends and how long the relay needs for it,
 *      the worst step, and each event's time in the outbox
 *      (published_at - created_at).
 *
 * The ratio of 2 over 1 says by how much one relay outruns placement on this
 * machine; 3 shows it doing so (or not) while both compete for the same
 * cores. Every event must reach the delay topic of its level (the topics'
 * sizes are checked after each batch size: the run fails otherwise).
 *
 * Connection parameters come from libpq's environment (PGHOST, PGPORT,
 * PGUSER: a superuser), brokers from --brokers or ORDERGATE_BROKERS. Exit
 * status: 0 the run completed, 1 runtime failure, 2 bad usage. */
#include <inttypes.h>
#include <libpq-fe.h>
#include <librdkafka/rdkafka.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cfg.h"
#include "common/clock.h"
#include "common/db.h"
#include "common/gate.h"
#include "common/kafka.h"
#include "common/log.h"
#include "common/outbox.h"
#include "common/parse.h"
#include "common/version.h"
#include "tools/bench/support/bench_kafka.h"
#include "tools/bench/support/bench_opt.h"
#include "tools/bench/support/bench_pg.h"
#include "tools/bench/support/bench_proc.h"
#include "tools/bench/support/bench_run.h"

#define PROG            "og_bench_relay"
#define MAX_BATCHES     8
#define MAX_CLIENTS     64
#define SAMPLE_MS       100
#define DRAIN_TIMEOUT_S 600 /* a relay that has not published everything by then has failed */

struct opts {
    long orders;
    int clients;
    int batches[MAX_BATCHES];
    int nbatches;
    int interval_ms;
    int partitions;
    int skus;
    int due_s;
    const char *brokers;
    const char *dbname;
    const char *template_db;
    bool keep;
};

/* What one batch size measured. */
struct result {
    int batch;
    double place_rate, place_p50, place_p99, place_max; /* 1 */
    double relay_rate, step_p50, step_p99, step_worst;  /* 2 */
    long relay_steps;
    double both_place_rate, both_relay_rate, both_step_worst, drain_s; /* 3 */
    long backlog_peak, backlog_at_end;
    double age_p50, age_p99, age_max;
    int64_t on_short, on_long; /* messages on the 1m and the 15m topic */
};

static struct {
    PGconn *admin;
    char dbname[64];
    bool db_created;
    char conninfo[192];
    rd_kafka_t *admin_rk;
    struct bench_topics topics;
    bool keep;
    struct db_retry retry; /* the placing sessions' */
} g;

/* ---------------------------------------------------------------------------------------- */

static void bench_cleanup(void)
{
    if (!g.keep) {
        bench_topics_delete(&g.topics, g.admin_rk);
        if (g.db_created && g.admin != NULL) {
            bench_pg_db_drop(g.admin, g.dbname);
            g.db_created = false;
        }
    }
    if (g.admin_rk != NULL) {
        rd_kafka_destroy(g.admin_rk);
        g.admin_rk = NULL;
    }
    if (g.admin != NULL) {
        PQfinish(g.admin);
        g.admin = NULL;
    }
}

static int parse_args(int argc, char **argv, struct opts *o)
{
    const struct bench_opt rows[] = {
        BENCH_LONG("orders", "N", "orders per placement phase (default 20000)", &o->orders, 1,
                   10000000),
        BENCH_INT("clients", "K", "placing sessions (default 4)", &o->clients, 1, MAX_CLIENTS),
        BENCH_INTS("batches", "LIST", "outbox.batch values, one run each (default 500,2000)",
                   o->batches, &o->nbatches, MAX_BATCHES, 1, 10000),
        BENCH_INT("interval-ms", "MS",
                  "outbox.interval_ms, the pause after a short step (default 200)", &o->interval_ms,
                  1, 600000),
        BENCH_INT("partitions", "N", "partitions per delay topic (default 4)", &o->partitions, 1,
                  256),
        BENCH_INT("skus", "N", "SKUs the orders' single item lines spread over (default 1000)",
                  &o->skus, 1, 1000000),
        /* Above one minute and at most 15: the 15m topic is the fitting level. */
        BENCH_INT("due-s", "S", "orders fall due S seconds after placement (default 600)",
                  &o->due_s, 61, 900),
        BENCH_STR("brokers", "LIST",
                  "Kafka bootstrap servers (default $ORDERGATE_BROKERS, else\n"
                  "localhost:9092)",
                  &o->brokers),
        BENCH_NAME("dbname", "NAME",
                   "the database to create (default og_bench_relay; dropped first)", &o->dbname),
        BENCH_NAME("template", "NAME",
                   "template database (default ordergate_tpl, built by\n"
                   "tests/support/db_template.sh)",
                   &o->template_db),
        BENCH_ON("keep", "keep the last database and the topics", &o->keep),
        BENCH_END,
    };

    *o = (struct opts){.orders = 20000,
                       .clients = 4,
                       .batches = {500, 2000},
                       .nbatches = 2,
                       .interval_ms = 200,
                       .partitions = 4,
                       .skus = 1000,
                       .due_s = 600,
                       .brokers = getenv("ORDERGATE_BROKERS") ? getenv("ORDERGATE_BROKERS")
                                                              : "localhost:9092",
                       .dbname = "og_bench_relay",
                       .template_db = "ordergate_tpl"};
    return bench_opt_parse(PROG,
                           "Places orders with schedule_cancels = 1 and measures the outbox relay "
                           "that\npublishes their cancel messages: placement alone, the relay "
                           "alone, both at once.\n",
                           NULL, rows, argc, argv);
}

/* ---------------------------------------------------------------------------------------- */
/* Percentiles */

static double pct(double *v, size_t n, double q)
{
    size_t i;

    if (n == 0)
        return 0;
    i = (size_t)ceil(q * (double)n);
    return v[i > 0 ? i - 1 : 0];
}

/* ---------------------------------------------------------------------------------------- */
/* Placement: K sessions through the gate client */

struct placer {
    const struct opts *o;
    const char *prefix;
    int index;
    double *lat_ms; /* one per order this session placed */
    long done;
    char error[512];
};

static void *placer_main(void *arg)
{
    struct placer *p = arg;
    const struct opts *o = p->o;
    struct db *db = db_new(g.conninfo, NULL, PROG, &g.retry, &bench_stop);
    struct og_error err = {0};
    char order_no[64], items[96], expire[32];

    if (db == NULL || db_connect(db, &err) != OG_OK) {
        snprintf(p->error, sizeof(p->error), "connect: %s", db == NULL ? "no memory" : err.msg);
        goto out;
    }
    for (long i = p->index; i < o->orders && !bench_stop; i += o->clients) {
        enum gate_outcome out = GATE_UNKNOWN;
        double t0 = bench_mono_s();

        snprintf(order_no, sizeof(order_no), "%s%07ld", p->prefix, i);
        snprintf(items, sizeof(items), "[{\"sku\":\"k%ld\",\"qty\":1}]", i % o->skus);
        clock_format_iso(clock_wall_ms() + (int64_t)o->due_s * 1000, expire, sizeof(expire));
        if (gate_place(db, order_no, 1000 + i % 9000, items, NULL, expire, &out, &err) != OG_OK ||
            out != GATE_PLACED) {
            snprintf(p->error, sizeof(p->error), "place %s: %s", order_no,
                     out != GATE_PLACED && err.msg[0] == '\0' ? gate_outcome_str(out) : err.msg);
            break;
        }
        p->lat_ms[p->done++] = (bench_mono_s() - t0) * 1000.0;
    }
out:
    db_free(db);
    return NULL;
}

/* Places o->orders orders named prefix0000000...; fills rate and latency. */
static void place_orders(const struct opts *o, const char *prefix, double *rate, double *p50,
                         double *p99, double *max)
{
    pthread_t tids[MAX_CLIENTS];
    struct placer p[MAX_CLIENTS];
    double *all = malloc((size_t)o->orders * sizeof(double));
    size_t n = 0;
    double t0 = bench_mono_s(), secs;

    if (all == NULL)
        bench_die("out of memory");
    for (int k = 0; k < o->clients; k++) {
        p[k] = (struct placer){.o = o, .prefix = prefix, .index = k};
        p[k].lat_ms = malloc(((size_t)o->orders / (size_t)o->clients + 1) * sizeof(double));
        if (p[k].lat_ms == NULL || pthread_create(&tids[k], NULL, placer_main, &p[k]) != 0)
            bench_die("cannot start a placing session");
    }
    for (int k = 0; k < o->clients; k++)
        pthread_join(tids[k], NULL);
    secs = bench_mono_s() - t0;
    for (int k = 0; k < o->clients; k++) {
        if (p[k].error[0] != '\0')
            bench_die("%s", p[k].error);
        memcpy(all + n, p[k].lat_ms, (size_t)p[k].done * sizeof(double));
        n += (size_t)p[k].done;
        free(p[k].lat_ms);
    }
    bench_check_stop();
    if ((long)n != o->orders)
        bench_die("placed %zu of %ld orders", n, o->orders);
    qsort(all, n, sizeof(double), bench_cmp_double);
    *rate = (double)n / secs;
    *p50 = pct(all, n, 0.50);
    *p99 = pct(all, n, 0.99);
    *max = all[n - 1];
    free(all);
}

/* ---------------------------------------------------------------------------------------- */
/* The relay, stepping as consumer/relay_thread.c's thread does */

struct relay_run {
    struct outbox_relay *relay;
    rd_kafka_t *producer;
    int batch, interval_ms;
    long target; /* stop once this many are published and a step came back short */
    atomic_long published;
    double *step_ms; /* steps that published something */
    size_t nsteps, cap;
    double first_s, last_s; /* start of the first step that published, end of the last */
    double deadline_s;
    char error[512];
};

/* A run of the relay as the consumer's would step it, on rdb and producer, not yet started. */
static void relay_run_init(struct relay_run *r, struct db *rdb, rd_kafka_t *producer,
                           const struct og_config *cfg, const struct opts *o, int batch)
{
    memset(r, 0, sizeof(*r));
    r->relay = outbox_relay_new(rdb, producer, cfg);
    if (r->relay == NULL)
        bench_die("outbox_relay_new failed (see the log)");
    r->producer = producer;
    r->batch = batch;
    r->interval_ms = o->interval_ms;
    r->target = o->orders;
}

static void *relay_main(void *arg)
{
    struct relay_run *r = arg;
    int failures = 0;

    while (!bench_stop) {
        struct og_error err = {0};
        size_t n = 0;
        double t0 = bench_mono_s(), t1;
        enum og_status st = outbox_relay_step(r->relay, &n, &err);

        t1 = bench_mono_s();
        rd_kafka_poll(r->producer, 0);
        if (t1 > r->deadline_s) {
            snprintf(r->error, sizeof(r->error),
                     "the relay published only %ld of %ld events by its deadline (%d s more "
                     "than placement needs)",
                     atomic_load(&r->published), r->target, DRAIN_TIMEOUT_S);
            break;
        }
        if (st != OG_OK) {
            /* The product backs off and tries again; a benchmark whose relay
             * keeps failing measures nothing. */
            if (++failures == 10) {
                snprintf(r->error, sizeof(r->error), "outbox_relay_step failed 10 times: %s",
                         err.msg);
                break;
            }
            bench_sleep_ms(r->interval_ms);
            continue;
        }
        failures = 0;
        if (n > 0) {
            if (r->nsteps == r->cap) {
                size_t cap = r->cap ? r->cap * 2 : 1024;
                double *v = realloc(r->step_ms, cap * sizeof(double));
                if (v == NULL) {
                    snprintf(r->error, sizeof(r->error), "out of memory");
                    break;
                }
                r->step_ms = v;
                r->cap = cap;
            }
            r->step_ms[r->nsteps++] = (t1 - t0) * 1000.0;
            if (r->first_s == 0)
                r->first_s = t0;
            r->last_s = t1;
            atomic_fetch_add(&r->published, (long)n);
        }
        if (atomic_load(&r->published) >= r->target && n < (size_t)r->batch)
            break;
        if (n < (size_t)r->batch)
            bench_sleep_ms(r->interval_ms);
    }
    return NULL;
}

static void relay_stats(struct relay_run *r, double *p50, double *p99, double *worst)
{
    qsort(r->step_ms, r->nsteps, sizeof(double), bench_cmp_double);
    *p50 = pct(r->step_ms, r->nsteps, 0.50);
    *p99 = pct(r->step_ms, r->nsteps, 0.99);
    *worst = r->nsteps > 0 ? r->step_ms[r->nsteps - 1] : 0;
}

/* ---------------------------------------------------------------------------------------- */
/* The backlog, sampled */

struct sampler {
    atomic_int stop;
    atomic_long last, peak;
};

static void *sampler_main(void *arg)
{
    struct sampler *s = arg;
    PGconn *c = bench_pg_connect(g.conninfo);

    while (!atomic_load(&s->stop) && !bench_stop) {
        long v = (long)bench_pg_num(c, "SELECT ordergate.outbox_backlog()", 0, NULL);
        atomic_store(&s->last, v);
        if (v > atomic_load(&s->peak))
            atomic_store(&s->peak, v);
        bench_sleep_ms(SAMPLE_MS);
    }
    PQfinish(c);
    return NULL;
}

/* ---------------------------------------------------------------------------------------- */

static void db_fresh(const struct opts *o)
{
    char skus[16];
    const char *sp[1] = {skus};
    PGconn *c;

    snprintf(g.dbname, sizeof(g.dbname), "%s", o->dbname);
    bench_pg_db_create(g.admin, g.dbname, o->template_db);
    g.db_created = true;
    snprintf(g.conninfo, sizeof(g.conninfo),
             "dbname=%s application_name=" PROG " options='-c client_min_messages=warning'",
             g.dbname);
    c = bench_pg_connect(g.conninfo);
    bench_pg_exec(c, "SELECT ordergate.set_setting('schedule_cancels', '1')");
    snprintf(skus, sizeof(skus), "%d", o->skus);
    PQclear(bench_pg_query(c,
                           "SELECT count(ordergate.add_stock('k' || i, 1000000000)) "
                           "FROM generate_series(0, $1::int - 1) i",
                           1, sp));
    PQfinish(c);
}

static void cfg_or_die(struct og_config *cfg, const char *name, const char *value)
{
    struct og_error err = {0};

    if (cfg_set(cfg, name, value, &err) != OG_OK)
        bench_die("%s", err.msg);
}

/* One batch size: the three phases in a fresh database. */
static void run_batch(const struct opts *o, const char *run, int batch, struct result *res)
{
    struct og_config cfg;
    struct og_error err = {0};
    struct db *rdb = NULL;
    rd_kafka_t *producer = NULL;
    char topic_short[160], topic_long[160], topics[340], events[160], num[16], prefix[32];
    struct relay_run r;
    struct sampler s;
    pthread_t rt, st;
    double t_place0, t_place1;
    PGconn *c;

    memset(res, 0, sizeof(*res));
    res->batch = batch;
    printf("\n== outbox.batch %d%s, outbox.interval_ms %d ==\n", batch,
           batch == 500 ? " (the default)" : "", o->interval_ms);
    db_fresh(o);
    snprintf(topic_short, sizeof(topic_short), "ogbench.relay.%s.b%d.1m", run, batch);
    snprintf(topic_long, sizeof(topic_long), "ogbench.relay.%s.b%d.15m", run, batch);
    snprintf(topics, sizeof(topics), "%s,%s", topic_short, topic_long);
    snprintf(events, sizeof(events), "ogbench.relay.%s.b%d.events", run, batch);
    bench_topic_create(&g.topics, g.admin_rk, topic_short, o->partitions);
    bench_topic_create(&g.topics, g.admin_rk, topic_long, o->partitions);

    /* The relay's settings as a consumer's config would give them. */
    if (cfg_init(&cfg, &err) != OG_OK)
        bench_die("%s", err.msg);
    cfg_or_die(&cfg, "kafka.brokers", o->brokers);
    cfg_or_die(&cfg, "kafka.topics", topics);
    cfg_or_die(&cfg, "outbox.topic", events);
    snprintf(num, sizeof(num), "%d", batch);
    cfg_or_die(&cfg, "outbox.batch", num);
    snprintf(num, sizeof(num), "%d", o->interval_ms);
    cfg_or_die(&cfg, "outbox.interval_ms", num);
    cfg_or_die(&cfg, "database.conninfo", g.conninfo);
    /* Opened as the consumer opens its relay's (consumer/relay_thread.c); the placing sessions, the
     * shop's, retry by the same policy. */
    if (cfg_db_open(&cfg, PROG "-outbox", NULL, &bench_stop, &rdb, &err) != OG_OK ||
        db_connect(rdb, &err) != OG_OK)
        bench_die("relay connection: %s", err.msg);
    g.retry = cfg_db_retry(&cfg);
    if (kafka_producer_new(&cfg, PROG "-outbox", outbox_dr_cb, &producer, &err) != OG_OK)
        bench_die("relay producer: %s", err.msg);
    /* A consumer's relay learns its topics once, at its first step after the
     * start; that cost is not the throughput measured here. */
    if (!kafka_topic_wait_ready(producer, topic_short, o->partitions, 10000) ||
        !kafka_topic_wait_ready(producer, topic_long, o->partitions, 10000))
        bench_die("the relay's producer does not see the delay topics");

    /* 1. placement alone */
    snprintf(prefix, sizeof(prefix), "a%d-", batch);
    place_orders(o, prefix, &res->place_rate, &res->place_p50, &res->place_p99, &res->place_max);
    printf("  1. placement alone: %ld orders, %d sessions: %.0f orders/s (call p50 %.1f ms, "
           "p99 %.1f ms, max %.1f ms)\n",
           o->orders, o->clients, res->place_rate, res->place_p50, res->place_p99, res->place_max);

    /* 2. the relay alone on that backlog */
    relay_run_init(&r, rdb, producer, &cfg, o, batch);
    r.deadline_s = bench_mono_s() + DRAIN_TIMEOUT_S;
    relay_main(&r);
    if (r.error[0] != '\0')
        bench_die("%s", r.error);
    bench_check_stop();
    res->relay_rate = (double)atomic_load(&r.published) / (r.last_s - r.first_s);
    res->relay_steps = (long)r.nsteps;
    relay_stats(&r, &res->step_p50, &res->step_p99, &res->step_worst);
    printf("  2. relay alone: %ld events in %ld steps: %.0f events/s (step p50 %.1f ms, p99 %.1f "
           "ms, worst %.1f ms)\n",
           atomic_load(&r.published), res->relay_steps, res->relay_rate, res->step_p50,
           res->step_p99, res->step_worst);
    printf("     relay / placement: %.2fx\n", res->relay_rate / res->place_rate);
    free(r.step_ms);
    outbox_relay_free(r.relay);

    /* 3. both at once */
    memset(&s, 0, sizeof(s));
    relay_run_init(&r, rdb, producer, &cfg, o, batch);
    /* Placement takes what phase 1 took, give or take the load. */
    r.deadline_s = bench_mono_s() + 2 * (double)o->orders / res->place_rate + DRAIN_TIMEOUT_S;
    if (pthread_create(&st, NULL, sampler_main, &s) != 0 ||
        pthread_create(&rt, NULL, relay_main, &r) != 0)
        bench_die("cannot start the relay or the sampler");
    snprintf(prefix, sizeof(prefix), "b%d-", batch);
    t_place0 = bench_mono_s();
    {
        double p50, p99, max;
        place_orders(o, prefix, &res->both_place_rate, &p50, &p99, &max);
    }
    t_place1 = bench_mono_s();
    {
        long published_then = atomic_load(&r.published);
        c = bench_pg_connect(g.conninfo);
        res->backlog_at_end = (long)bench_pg_num(c, "SELECT ordergate.outbox_backlog()", 0, NULL);
        res->both_relay_rate = (double)published_then / (t_place1 - t_place0);
    }
    pthread_join(rt, NULL);
    atomic_store(&s.stop, 1);
    pthread_join(st, NULL);
    if (r.error[0] != '\0')
        bench_die("%s", r.error);
    bench_check_stop();
    res->drain_s = r.last_s > t_place1 ? r.last_s - t_place1 : 0;
    res->backlog_peak = atomic_load(&s.peak);
    {
        double p50, p99;
        relay_stats(&r, &p50, &p99, &res->both_step_worst);
    }
    free(r.step_ms);
    {
        const char *pp[1] = {prefix};
        PGresult *q = bench_pg_query(
            c,
            "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY a), "
            "       percentile_cont(0.99) WITHIN GROUP (ORDER BY a), max(a), "
            "       count(*) FILTER (WHERE published_at IS NULL) "
            "  FROM (SELECT extract(epoch FROM published_at - created_at) * 1000 AS a, "
            "               published_at "
            "          FROM ordergate.outbox "
            "         WHERE event_type = 'cancel_scheduled' AND starts_with(order_no, $1)) x",
            1, pp);
        res->age_p50 = atof(PQgetvalue(q, 0, 0));
        res->age_p99 = atof(PQgetvalue(q, 0, 1));
        res->age_max = atof(PQgetvalue(q, 0, 2));
        if (atol(PQgetvalue(q, 0, 3)) != 0)
            bench_die("%s of phase 3's events left unpublished", PQgetvalue(q, 0, 3));
        PQclear(q);
    }
    PQfinish(c);
    printf("  3. both at once: placement %.0f orders/s, the relay %.0f events/s meanwhile; "
           "backlog peak %ld, %ld when placement ended, published %.2f s later; worst step %.1f "
           "ms; time in the outbox p50 %.0f ms, p99 %.0f ms, max %.0f ms\n",
           res->both_place_rate, res->both_relay_rate, res->backlog_peak, res->backlog_at_end,
           res->drain_s, res->both_step_worst, res->age_p50, res->age_p99, res->age_max);

    /* Every event on the topic of its level: due in --due-s, the 15m topic. */
    res->on_short = kafka_topic_messages(producer, topic_short, 10000);
    res->on_long = kafka_topic_messages(producer, topic_long, 10000);
    printf("     on the delay topics: %" PRId64 " on %s, %" PRId64 " on %s\n", res->on_short,
           topic_short, res->on_long, topic_long);
    if (res->on_short != 0 || res->on_long < 2 * o->orders)
        bench_die("the delay topics hold %" PRId64 " and %" PRId64
                  " messages; expected 0 and at least %ld",
                  res->on_short, res->on_long, 2 * o->orders);

    outbox_relay_free(r.relay);
    rd_kafka_flush(producer, 10000);
    rd_kafka_destroy(producer);
    db_free(rdb);
    cfg_free(&cfg);
    if (!o->keep) {
        bench_topics_delete(&g.topics, g.admin_rk);
    }
}

static void print_header(const struct opts *o)
{
    char pgv[128], fsync_v[16], sync_v[16];

    printf(PROG " (ordergate %s)\n", OG_VERSION);
    bench_print_source_host();
    bench_pg_str(g.admin, "SELECT version()", pgv, sizeof(pgv));
    pgv[strcspn(pgv, ",")] = '\0';
    printf("database: %s; fsync=%s synchronous_commit=%s\n", pgv,
           bench_pg_str(g.admin, "SHOW fsync", fsync_v, sizeof(fsync_v)),
           bench_pg_str(g.admin, "SHOW synchronous_commit", sync_v, sizeof(sync_v)));
    printf("kafka: %s; librdkafka %s\n", o->brokers, rd_kafka_version_str());
    printf("load: %ld orders per placement phase, %d sessions, one item line over %d skus, due "
           "in %d s (the 15m level); %d partitions per delay topic\n",
           o->orders, o->clients, o->skus, o->due_s, o->partitions);
    fflush(stdout);
}

static void print_summary(const struct opts *o, const struct result *res, int n)
{
    char load[64], psi[32];

    bench_load_average(load, sizeof(load));
    bench_cpu_pressure(psi, sizeof(psi));
    printf("\n== summary (load average at the end %s, cpu pressure avg60 %s) ==\n", load, psi);
    printf("%6s %10s %10s %8s %6s | %10s %10s %8s %8s %8s %9s\n", "batch", "place/s", "relay/s",
           "relay:pl", "worst", "place/s", "relay/s", "peak", "at end", "worst", "age p99");
    printf("%6s %10s %10s %8s %6s | %10s %10s %8s %8s %8s %9s\n", "", "(alone)", "(alone)", "",
           "ms", "(both)", "(both)", "backlog", "backlog", "ms", "ms");
    for (int i = 0; i < n; i++)
        printf("%6d %10.0f %10.0f %7.2fx %6.0f | %10.0f %10.0f %8ld %8ld %8.0f %9.0f\n",
               res[i].batch, res[i].place_rate, res[i].relay_rate,
               res[i].relay_rate / res[i].place_rate, res[i].step_worst, res[i].both_place_rate,
               res[i].both_relay_rate, res[i].backlog_peak, res[i].backlog_at_end,
               res[i].both_step_worst, res[i].age_p99);
    (void)o;
    fflush(stdout);
}

int main(int argc, char **argv)
{
    struct opts o;
    struct result res[MAX_BATCHES];
    char run[48];

    if (parse_args(argc, argv, &o) != 0)
        return 2;
    log_init(PROG, LOG_LVL_WARN);
    bench_init(PROG, bench_cleanup);
    g.keep = o.keep;
    bench_signals_install();
    setvbuf(stdout, NULL, _IOLBF, 0);

    snprintf(run, sizeof(run), "%d-%lld", (int)getpid(), (long long)(clock_wall_ms() % 100000000));
    g.admin = bench_pg_connect("dbname=postgres application_name=" PROG
                               " options='-c client_min_messages=warning'");
    g.admin_rk = bench_kafka_client(o.brokers, PROG, RD_KAFKA_PRODUCER, NULL, NULL);
    print_header(&o);
    for (int i = 0; i < o.nbatches; i++)
        run_batch(&o, run, o.batches[i], &res[i]);
    print_summary(&o, res, o.nbatches);
    bench_cleanup();
    return 0;
}
