/* og_bench_consumer: ordergate-consumer end to end, against the real broker
 * and database. Prints figures; not a test.
 *
 * The built consumer binary runs as a child process with a generated config
 * (batch size from --batch-size, outbox relay off unless --outbox, metrics on
 * a free port that the bench scrapes). Three phases, each in a database of its
 * own copied from the template the tests build (ordergate_tpl) and on topics
 * of its own, deleted afterwards:
 *
 *   e2e       a backlog of --orders overdue orders (bulk SQL) and one due
 *             message each, produced at full speed before the consumer starts;
 *             ONE consumer cancels them all. Cancels/s (first to last commit, from
 *             status_log) next to the gate-only ceiling measured in the same run
 *             on the same database: gate_claim_cancel() in batches of the same
 *             size from one session, on --ceiling-orders orders of the same shape,
 *             once before and once after the consumer (the machine is shared, so
 *             the mean of the two is the ceiling). og_bench_gate, when built next
 *             to this program, also runs as a child for its batch-size figure.
 *   lateness  --rate due orders/s for --duration s: expire_at spread evenly, each
 *             message produced --ahead-ms before it is due, in real time.
 *             Lateness = status_log.created_at - expire_at per order (SQL
 *             percentiles), and the consumer's own lateness histogram.
 *   memory    --waiting messages due in an hour, produced at full speed; the
 *             consumer's VmRSS every second for --rss-seconds once every partition
 *             is assigned and paused. The first messages of every partition have
 *             orders in the database that are overdue there: a consumer that
 *             claimed early would cancel them, so status_log must stay empty.
 *
 * Bulk loads run as the superuser with session_replication_role = replica
 * (foreign keys hold by construction; original_expire_at is given explicitly;
 * stock is reduced by what the orders hold, so reconcile() holds).
 *
 * Connection parameters come from libpq's environment (PGHOST, PGPORT, PGUSER:
 * a superuser), brokers from --brokers or ORDERGATE_BROKERS. Exit status: 0 the
 * run completed (targets met or not: see the table), 1 runtime failure, 2 bad
 * usage. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libpq-fe.h>
#include <librdkafka/rdkafka.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/codec.h"
#include "common/db.h"
#include "common/gate.h"
#include "common/kafka.h"
#include "common/log.h"
#include "common/parse.h"
#include "common/path.h"
#include "common/version.h"
#include "tools/bench/support/bench_proc.h"

#define PROG "og_bench_consumer"

#define TARGET_RATIO      0.80  /* end-to-end >= 80 % of the gate ceiling */
#define TARGET_P99_MS     250.0 /* lateness p99 at a steady 5,000 due orders/s */
#define TARGET_RSS_MB     64.0  /* resident memory with 10M messages waiting */
#define TARGET_RSS_FLAT   0.10  /* "flat": final within 10 % of the first sample */
#define LOAD_CHUNK        200000
#define MAX_TOPICS        8
#define METRICS_MAX_BYTES (256 * 1024)
#define HIST_MAX          32

struct opts {
    bool e2e, lateness, memory;
    long orders;         /* e2e backlog */
    long ceiling_orders; /* per ceiling measurement */
    int slice_s;         /* e2e: consumer seconds between paired gate slices; 0 = none */
    int slice_ms;        /* e2e: length of one paired gate slice */
    long slice_pool;     /* e2e: orders loaded for the paired slices */
    int rate;            /* lateness: due orders per second */
    int duration;        /* lateness: seconds */
    int ahead_ms;        /* lateness: a message is produced this long before it is due */
    int lead_s;          /* lateness: start to first due time; 0 = from the size */
    long waiting;        /* memory: messages due in an hour */
    long waiting_db;     /* memory: overdue orders in the database for the first messages */
    int rss_seconds;
    int partitions;
    int batch_size;
    int linger_ms, poll_ms; /* -1: the consumer's defaults */
    int items, skus, coupon_every;
    bool outbox;
    const char *log_level; /* the consumer's */
    const char *compression;
    const char *dbname;
    const char *template_db;
    const char *brokers;
    int metrics_port;
    char consumer[PATH_MAX];
    char gate_bench[PATH_MAX]; /* "" = not run */
    bool reconcile;
    int timeout_s;
    bool keep;
};

/* What the cleanup needs to undo, whatever way the program ends. */
static struct {
    PGconn *admin; /* dbname=postgres */
    PGconn *conn;  /* the phase's database */
    char dbname[64];
    bool db_created;
    pid_t child;
    rd_kafka_t *admin_rk;
    char topics[MAX_TOPICS][160];
    int ntopics;
    char workdir[PATH_MAX];
    bool keep;
    long dr_ok, dr_failed;
    char dr_error[256];
} g;

static volatile sig_atomic_t stop_flag;

/* ------------------------------------------------------------------------------------------ */
/* Plumbing */

static void bench_cleanup(bool failed);

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die(const char *fmt, ...)
{
    va_list ap;

    fflush(stdout);
    fprintf(stderr, PROG ": ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    bench_cleanup(true);
    exit(1);
}

static void progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void progress(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "  .. ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
}

static void on_signal(int sig)
{
    (void)sig;
    stop_flag = 1;
}

static void check_stop(void)
{
    if (stop_flag)
        die("interrupted");
}

static void sleep_ms(long ms)
{
    clock_sleep_until_flag(ms, &stop_flag, NULL);
}

static double mono_s(void)
{
    return (double)clock_mono_us() / 1e6;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf = NULL;
    size_t used = 0, cap = 0;

    if (f == NULL)
        return NULL;
    for (;;) {
        if (used + 4096 + 1 > cap) {
            char *grown = realloc(buf, cap = cap ? cap * 2 : 65536);
            if (grown == NULL)
                break;
            buf = grown;
        }
        size_t n = fread(buf + used, 1, cap - used - 1, f);
        used += n;
        if (n == 0)
            break;
    }
    fclose(f);
    if (buf != NULL)
        buf[used] = '\0';
    return buf;
}

/* The first line of a command's output (no shell involved), or "?". */
static const char *run_line(char *const argv[], char *buf, size_t size)
{
    int fds[2];
    pid_t pid;
    ssize_t n = 0;

    snprintf(buf, size, "?");
    if (pipe(fds) != 0)
        return buf;
    pid = fork();
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0)
            dup2(devnull, STDERR_FILENO);
        close(fds[0]);
        close(fds[1]);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);
    if (pid > 0) {
        n = read(fds[0], buf, size - 1);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    close(fds[0]);
    if (n > 0) {
        buf[n] = '\0';
        buf[strcspn(buf, "\n")] = '\0';
    } else {
        snprintf(buf, size, "?");
    }
    return buf;
}

/* ------------------------------------------------------------------------------------------ */
/* /proc */

/* A "Vm...:" line of /proc/PID/status in MB (field e.g. "VmRSS:"); -1 if unknown. */
static double proc_vm_mb(pid_t pid, const char *field)
{
    char path[64], line[256];
    double mb = -1;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    f = fopen(path, "r");
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, field, strlen(field)) == 0) {
            mb = strtod(line + strlen(field), NULL) / 1024.0;
            break;
        }
    }
    fclose(f);
    return mb;
}

/* CPU pressure (PSI "some" avg60: share of time runnable tasks waited for a
 * CPU), or "?" where the kernel does not report it. */
static void cpu_pressure(char *buf, size_t size)
{
    FILE *f = fopen("/proc/pressure/cpu", "r");
    double avg10 = 0, avg60 = 0;

    snprintf(buf, size, "?");
    if (f != NULL) {
        if (fscanf(f, "some avg10=%lf avg60=%lf", &avg10, &avg60) == 2)
            snprintf(buf, size, "%.0f %%", avg60);
        fclose(f);
    }
}

/* The Kafka broker of deploy/local/services.sh, when ORDERGATE_STATE_DIR names it. */
static pid_t broker_pid(void)
{
    const char *state = getenv("ORDERGATE_STATE_DIR");
    char path[PATH_MAX];
    FILE *f;
    int pid = 0;

    if (state == NULL || *state == '\0')
        return 0;
    snprintf(path, sizeof(path), "%s/kafka/kafka.pid", state);
    f = fopen(path, "r");
    if (f == NULL)
        return 0;
    if (fscanf(f, "%d", &pid) != 1)
        pid = 0;
    fclose(f);
    return (pid_t)pid;
}

/* ------------------------------------------------------------------------------------------ */
/* PostgreSQL */

static PGconn *pg_connect(const char *conninfo)
{
    PGconn *c = PQconnectdb(conninfo);

    if (PQstatus(c) != CONNECTION_OK) {
        char msg[512];
        snprintf(msg, sizeof(msg), "%s", PQerrorMessage(c));
        PQfinish(c);
        die("cannot connect (%s): %s", conninfo, msg);
    }
    return c;
}

/* Runs a constant statement with text parameters; dies on failure. */
static PGresult *sql(PGconn *c, const char *text, int n, const char *const *params)
{
    PGresult *res = PQexecParams(c, text, n, NULL, params, NULL, NULL, 0);
    ExecStatusType st = PQresultStatus(res);

    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        char msg[1024];
        snprintf(msg, sizeof(msg), "%s", PQerrorMessage(c));
        PQclear(res);
        die("SQL failed: %s\n  %s", text, msg);
    }
    return res;
}

static void sql_do(PGconn *c, const char *text)
{
    PQclear(sql(c, text, 0, NULL));
}

static double sql_num(PGconn *c, const char *text, int n, const char *const *params)
{
    PGresult *res = sql(c, text, n, params);
    double v =
        PQntuples(res) > 0 && !PQgetisnull(res, 0, 0) ? strtod(PQgetvalue(res, 0, 0), NULL) : 0;

    PQclear(res);
    return v;
}

static const char *sql_str(PGconn *c, const char *text, char *buf, size_t size)
{
    PGresult *res = sql(c, text, 0, NULL);

    snprintf(buf, size, "%s",
             PQntuples(res) > 0 && !PQgetisnull(res, 0, 0) ? PQgetvalue(res, 0, 0) : "?");
    PQclear(res);
    return buf;
}

/* Database names are checked by name_valid() before they reach SQL text. */
static bool name_valid(const char *s)
{
    size_t n = strlen(s);

    return n > 0 && n < 60 && !(s[0] >= '0' && s[0] <= '9') &&
           strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_") == n;
}

static void db_drop(void)
{
    char text[160];

    if (g.conn != NULL) {
        PQfinish(g.conn);
        g.conn = NULL;
    }
    if (g.admin == NULL || !g.db_created)
        return;
    snprintf(text, sizeof(text), "DROP DATABASE IF EXISTS %s WITH (FORCE)", g.dbname);
    PQclear(PQexec(g.admin, text));
    g.db_created = false;
}

/* A fresh database for a phase, copied from the template. */
static void db_fresh(const struct opts *o)
{
    static bool printed;
    const char *p[1] = {o->template_db};
    char text[256], conninfo[192];

    db_drop();
    if (sql_num(g.admin, "SELECT count(*) FROM pg_database WHERE datname = $1", 1, p) != 1)
        die("template database %s not found: build it first with tests/support/db_template.sh "
            "(same PG* environment)",
            o->template_db);
    snprintf(g.dbname, sizeof(g.dbname), "%s", o->dbname);
    snprintf(text, sizeof(text), "DROP DATABASE IF EXISTS %s WITH (FORCE)", g.dbname);
    sql_do(g.admin, text);
    snprintf(text, sizeof(text), "CREATE DATABASE %s TEMPLATE %s", g.dbname, o->template_db);
    sql_do(g.admin, text);
    g.db_created = true;
    snprintf(conninfo, sizeof(conninfo),
             "dbname=%s application_name=" PROG " options='-c client_min_messages=warning'",
             g.dbname);
    g.conn = pg_connect(conninfo);
    if (!printed) {
        char v[64], md5[40], md5b[40];
        printf("schema: migrations %s; claim_cancel md5 %s, _cancel_effects md5 %s\n",
               sql_str(g.conn,
                       "SELECT string_agg(version, ',' ORDER BY version) "
                       "FROM ordergate.schema_migrations",
                       v, sizeof(v)),
               sql_str(g.conn,
                       "SELECT md5(string_agg(prosrc, '' ORDER BY oid)) FROM pg_proc "
                       "WHERE proname = 'claim_cancel'",
                       md5, sizeof(md5)),
               sql_str(g.conn,
                       "SELECT md5(string_agg(prosrc, '' ORDER BY oid)) FROM pg_proc "
                       "WHERE proname = '_cancel_effects'",
                       md5b, sizeof(md5b)));
        printed = true;
    }
}

static void db_stock(const struct opts *o)
{
    char skus[16];
    const char *p[1] = {skus};

    snprintf(skus, sizeof(skus), "%d", o->skus);
    PQclear(sql(g.conn,
                "SELECT count(ordergate.add_stock('k' || i, 1000000000)) "
                "FROM generate_series(0, $1::int - 1) i",
                1, p));
}

/* Orders prefix0 .. prefix(n-1), pending; expire_at = base_ms + i * 1000 / per_s ms
 * (per_s 0: all at base_ms); items and coupons as in og_bench_gate. */
static void db_load(const struct opts *o, const char *prefix, long n, int64_t base_ms, long per_s)
{
    double t0 = mono_s();

    for (long a = 0; a < n; a += LOAD_CHUNK) {
        long b = a + LOAD_CHUNK < n ? a + LOAD_CHUNK : n;
        char lo[24], hi[24], every[16], base[24], per[24], items[16], skus[16];
        const char *pc[4] = {prefix, lo, hi, every};
        const char *po[6] = {prefix, lo, hi, every, base, per};
        const char *pi[5] = {prefix, lo, hi, items, skus};

        snprintf(lo, sizeof(lo), "%ld", a);
        snprintf(hi, sizeof(hi), "%ld", b);
        snprintf(every, sizeof(every), "%d", o->coupon_every);
        snprintf(base, sizeof(base), "%lld", (long long)base_ms);
        snprintf(per, sizeof(per), "%ld", per_s);
        snprintf(items, sizeof(items), "%d", o->items);
        snprintf(skus, sizeof(skus), "%d", o->skus);
        check_stop();
        sql_do(g.conn, "BEGIN");
        /* Triggers off for the bulk load (superuser): see the file comment. */
        sql_do(g.conn, "SET LOCAL session_replication_role = replica");
        PQclear(sql(
            g.conn,
            "INSERT INTO ordergate.coupons (coupon_id, state) "
            "SELECT $1 || 'c' || i, 'locked' FROM generate_series($2::bigint, $3::bigint - 1) i "
            "WHERE $4::int > 0 AND i % $4::int = 0",
            4, pc));
        PQclear(
            sql(g.conn,
                "INSERT INTO ordergate.orders "
                "  (order_no, status, amount_cents, coupon_id, expire_at, original_expire_at) "
                "SELECT $1 || i, 'pending_payment', 1000 + (i % 50) * 100, "
                "       CASE WHEN $4::int > 0 AND i % $4::int = 0 THEN $1 || 'c' || i END, e, e "
                "FROM generate_series($2::bigint, $3::bigint - 1) i, "
                "     LATERAL (SELECT timestamptz 'epoch' + ($5::bigint + CASE WHEN "
                "$6::bigint > 0 THEN i * 1000 / $6::bigint ELSE 0 END) "
                "* interval '1 millisecond' AS e) x",
                6, po));
        PQclear(sql(g.conn,
                    "INSERT INTO ordergate.order_items (order_no, sku, qty) "
                    "SELECT $1 || i, 'k' || ((i * 7 + j * 13) % $5::int), 1 + j "
                    "FROM generate_series($2::bigint, $3::bigint - 1) i, "
                    "     generate_series(0, $4::int - 1) j",
                    5, pi));
        sql_do(g.conn, "COMMIT");
        if (n > LOAD_CHUNK)
            progress("loaded %s%ld..%s%ld", prefix, a, prefix, b - 1);
    }
    progress("loaded %ld orders %s* in %.1f s", n, prefix, mono_s() - t0);
}

/* Stock minus what the loaded orders hold (reconcile's stock invariant). */
static void db_settle(void)
{
    double t0 = mono_s();

    sql_do(g.conn, "UPDATE ordergate.inventory v SET available = v.available - h.q "
                   "FROM (SELECT sku, sum(qty) AS q FROM ordergate.order_items GROUP BY sku) h "
                   "WHERE v.sku = h.sku");
    sql_do(g.conn, "VACUUM (ANALYZE) ordergate.orders");
    sql_do(g.conn, "VACUUM (ANALYZE) ordergate.order_items");
    sql_do(g.conn, "VACUUM (ANALYZE) ordergate.coupons");
    sql_do(g.conn, "VACUUM (ANALYZE) ordergate.inventory");
    sql_do(g.conn, "CHECKPOINT");
    progress("stock settled, vacuum analyze, checkpoint: %.1f s", mono_s() - t0);
}

static double db_wal_lsn_bytes(void)
{
    return sql_num(g.conn, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')", 0, NULL);
}

/* Autovacuum runs and checkpoints so far (to say what a phase competed with). */
static void db_background(double *autovacuums, double *checkpoints)
{
    *autovacuums = sql_num(g.conn,
                           "SELECT coalesce(sum(autovacuum_count + autoanalyze_count), 0) "
                           "FROM pg_stat_user_tables WHERE schemaname = 'ordergate'",
                           0, NULL);
    *checkpoints = sql_num(
        g.conn, "SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter", 0, NULL);
}

static long db_count_log(const char *prefix)
{
    const char *p[1] = {prefix};

    return (long)sql_num(
        g.conn, "SELECT count(*) FROM ordergate.status_log WHERE order_no LIKE $1 || '%'", 1, p);
}

static pid_t db_consumer_backend(void)
{
    return (pid_t)sql_num(g.conn,
                          "SELECT coalesce(min(pid), 0) FROM pg_stat_activity "
                          "WHERE datname = current_database() "
                          "AND application_name = 'ordergate-consumer'",
                          0, NULL);
}

struct child;
static void child_alive(struct child *c);

/* Waits until a backend has no statement running (the stopped consumer's
 * claim in flight has committed). */
static void db_backend_idle(pid_t backend, struct child *c)
{
    char pid[16];
    const char *p[1] = {pid};

    snprintf(pid, sizeof(pid), "%d", (int)backend);
    for (int i = 0; i < 3000; i++) {
        PGresult *res = sql(g.conn, "SELECT state FROM pg_stat_activity WHERE pid = $1", 1, p);
        bool idle = PQntuples(res) == 0 || strncmp(PQgetvalue(res, 0, 0), "idle", 4) == 0;
        PQclear(res);
        if (idle)
            return;
        child_alive(c);
        sleep_ms(10);
    }
    die("the consumer's database session stayed busy for 30 s while the consumer was stopped");
}

/* ------------------------------------------------------------------------------------------ */
/* Kafka */

static void kconf(rd_kafka_conf_t *conf, const char *name, const char *value)
{
    char errstr[256];

    if (rd_kafka_conf_set(conf, name, value, errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK)
        die("kafka property %s=%s: %s", name, value, errstr);
}

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    (void)opaque;
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        g.dr_ok++;
    } else {
        if (g.dr_failed++ == 0)
            snprintf(g.dr_error, sizeof(g.dr_error), "%s", rd_kafka_err2str(m->err));
    }
}

static rd_kafka_t *kafka_client(const struct opts *o, rd_kafka_type_t type,
                                const char *const *props)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char errstr[512];
    rd_kafka_t *rk;

    kconf(conf, "bootstrap.servers", o->brokers);
    kconf(conf, "client.id", PROG);
    kconf(conf, "log_level", "4"); /* no notices about the topics we delete */
    /* A metadata refresh for a topic deleted at the end of a phase must not
     * create it again (the broker auto-creates topics). */
    kconf(conf, "allow.auto.create.topics", "false");
    for (size_t i = 0; props != NULL && props[i] != NULL; i += 2)
        kconf(conf, props[i], props[i + 1]);
    if (type == RD_KAFKA_PRODUCER)
        rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
    rk = rd_kafka_new(type, conf, errstr, sizeof(errstr));
    if (rk == NULL) {
        rd_kafka_conf_destroy(conf);
        die("kafka client: %s", errstr);
    }
    return rk;
}

static void topic_create(const struct opts *o, const char *topic, int partitions)
{
    struct og_error err = {0};
    bool created = false;

    if (g.admin_rk == NULL)
        g.admin_rk = kafka_client(o, RD_KAFKA_PRODUCER, NULL);
    if (g.ntopics == MAX_TOPICS)
        die("too many topics");
    if (kafka_topic_create(g.admin_rk, topic, partitions, 1, &created, &err) != OG_OK)
        die("CreateTopics %s: %s", topic, err.msg);
    /* Every run names its topics afresh: one that exists is someone else's. */
    if (!created)
        die("CreateTopics %s: the topic already exists", topic);
    snprintf(g.topics[g.ntopics++], sizeof(g.topics[0]), "%s", topic);
    if (!kafka_topic_wait_ready(g.admin_rk, topic, partitions, 10000))
        die("topic %s: partitions have no leader after 10 s", topic);
}

/* Deletes every topic this run created (frees the broker's disk). */
static void topics_delete(void)
{
    rd_kafka_DeleteTopic_t *dt[MAX_TOPICS];
    rd_kafka_queue_t *q;
    rd_kafka_event_t *ev = NULL;

    if (g.admin_rk == NULL || g.ntopics == 0)
        return;
    for (int i = 0; i < g.ntopics; i++)
        dt[i] = rd_kafka_DeleteTopic_new(g.topics[i]);
    q = rd_kafka_queue_new(g.admin_rk);
    rd_kafka_DeleteTopics(g.admin_rk, dt, (size_t)g.ntopics, NULL, q);
    for (int i = 0; i < 60 && ev == NULL; i++) {
        ev = rd_kafka_queue_poll(q, 1000);
        if (ev != NULL && rd_kafka_event_type(ev) != RD_KAFKA_EVENT_DELETETOPICS_RESULT) {
            rd_kafka_event_destroy(ev);
            ev = NULL;
        }
    }
    if (ev == NULL) {
        fprintf(stderr, PROG ": DeleteTopics: no answer; delete these topics by hand:");
        for (int i = 0; i < g.ntopics; i++)
            fprintf(stderr, " %s", g.topics[i]);
        fprintf(stderr, "\n");
    } else {
        size_t n;
        const rd_kafka_topic_result_t **res =
            rd_kafka_DeleteTopics_result_topics(rd_kafka_event_DeleteTopics_result(ev), &n);
        for (size_t i = 0; i < n; i++)
            if (rd_kafka_topic_result_error(res[i]) != RD_KAFKA_RESP_ERR_NO_ERROR)
                fprintf(stderr, PROG ": DeleteTopics %s: %s\n", rd_kafka_topic_result_name(res[i]),
                        rd_kafka_err2str(rd_kafka_topic_result_error(res[i])));
        rd_kafka_event_destroy(ev);
    }
    rd_kafka_queue_destroy(q);
    for (int i = 0; i < g.ntopics; i++)
        rd_kafka_DeleteTopic_destroy(dt[i]);
    g.ntopics = 0;
}

/* The message value of the contract, built without a JSON library so that
 * 10M of them cost little; msg_check() compares it with the codec's once. */
static size_t msg_value(char *buf, size_t size, const char *order_no, const char *due_iso)
{
    int n =
        snprintf(buf, size, "{\"v\":1,\"order_no\":\"%s\",\"due_at\":\"%s\"}", order_no, due_iso);

    return n > 0 && (size_t)n < size ? (size_t)n : 0;
}

static void msg_check(const char *order_no, int64_t due_ms)
{
    char ours[256], codec[256], iso[32];
    size_t len = 0, ours_len;
    struct og_error err = {0};

    clock_format_iso(due_ms, iso, sizeof(iso));
    ours_len = msg_value(ours, sizeof(ours), order_no, iso);
    if (codec_encode_cancel(order_no, due_ms, codec, sizeof(codec), &len, &err) != OG_OK)
        die("codec_encode_cancel: %s", err.msg);
    if (len != ours_len || memcmp(ours, codec, len) != 0)
        die("the message format differs from common/codec (%s vs %s): update msg_value()", ours,
            codec);
}

static void produce(rd_kafka_t *rk, rd_kafka_topic_t *rkt, const char *key, size_t key_len,
                    const char *value, size_t len)
{
    while (rd_kafka_produce(rkt, RD_KAFKA_PARTITION_UA, RD_KAFKA_MSG_F_COPY, (void *)value, len,
                            key, key_len, NULL) != 0) {
        if (rd_kafka_last_error() != RD_KAFKA_RESP_ERR__QUEUE_FULL)
            die("produce: %s", rd_kafka_err2str(rd_kafka_last_error()));
        rd_kafka_poll(rk, 5);
        check_stop();
    }
}

static void producer_finish(rd_kafka_t *rk, long expected)
{
    rd_kafka_resp_err_t err = rd_kafka_flush(rk, 300000);

    if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
        die("producer flush: %s", rd_kafka_err2str(err));
    if (g.dr_failed > 0 || g.dr_ok != expected)
        die("producer: %ld of %ld messages acknowledged, %ld failed (%s)", g.dr_ok, expected,
            g.dr_failed, g.dr_error);
}

/* Produces n messages prefix<i>, all due at due_ms, at full speed. Returns
 * messages per second. */
static double produce_backlog(const struct opts *o, const char *topic, const char *prefix, long n,
                              int64_t due_ms)
{
    const char *props[] = {"linger.ms",
                           "100",
                           "batch.num.messages",
                           "100000",
                           "batch.size",
                           "1000000",
                           "queue.buffering.max.messages",
                           "2000000",
                           "queue.buffering.max.kbytes",
                           "262144",
                           "compression.codec",
                           o->compression,
                           NULL};
    rd_kafka_t *rk = kafka_client(o, RD_KAFKA_PRODUCER, props);
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    char iso[32], key[48], value[160];
    double t0 = mono_s(), next = t0 + 10, secs;

    clock_format_iso(due_ms, iso, sizeof(iso));
    g.dr_ok = g.dr_failed = 0;
    snprintf(key, sizeof(key), "%s0", prefix);
    msg_check(key, due_ms);
    for (long i = 0; i < n; i++) {
        int klen = snprintf(key, sizeof(key), "%s%ld", prefix, i);
        size_t vlen = msg_value(value, sizeof(value), key, iso);
        produce(rk, rkt, key, (size_t)klen, value, vlen);
        if ((i & 0xffff) == 0) {
            rd_kafka_poll(rk, 0);
            if (mono_s() >= next) {
                progress("produced %ld of %ld messages", i, n);
                next += 10;
            }
        }
    }
    producer_finish(rk, n);
    secs = mono_s() - t0;
    rd_kafka_topic_destroy(rkt);
    rd_kafka_destroy(rk);
    progress("produced %ld messages to %s in %.1f s (%.0f/s, compression %s)", n, topic, secs,
             (double)n / secs, o->compression);
    return (double)n / secs;
}

/* Megabytes the broker keeps for topic (the .log segments of its partition
 * directories), when ORDERGATE_STATE_DIR names the local broker; else -1. */
static double topic_disk_mb(const char *topic)
{
    const char *state = getenv("ORDERGATE_STATE_DIR");
    char path[PATH_MAX], file[PATH_MAX + 300];
    double bytes = 0;
    bool any = false;

    if (state == NULL || *state == '\0')
        return -1;
    for (int p = 0; p < 1024; p++) {
        DIR *d;
        struct dirent *e;
        snprintf(path, sizeof(path), "%s/kafka/data/%s-%d", state, topic, p);
        d = opendir(path);
        if (d == NULL)
            break;
        any = true;
        while ((e = readdir(d)) != NULL) {
            struct stat st;
            size_t len = strlen(e->d_name);
            if (len < 5 || strcmp(e->d_name + len - 4, ".log") != 0)
                continue;
            snprintf(file, sizeof(file), "%s/%s", path, e->d_name);
            if (stat(file, &st) == 0)
                bytes += (double)st.st_size;
        }
        closedir(d);
    }
    return any ? bytes / 1048576.0 : -1;
}

/* ------------------------------------------------------------------------------------------ */
/* The consumer child */

struct child {
    pid_t pid;
    char log[PATH_MAX];
    char config[PATH_MAX];
    int port;
    int status; /* exit status once reaped; -1 before */
};

static void child_config(const struct opts *o, struct child *c, const char *tag, const char *base)
{
    FILE *f;

    snprintf(c->config, sizeof(c->config), "%s/%s.conf", g.workdir, tag);
    f = fopen(c->config, "w");
    if (f == NULL)
        die("%s: %s", c->config, strerror(errno));
    fprintf(f, "# written by " PROG " for the %s phase\n", tag);
    fprintf(f, "log_level = \"%s\";\n", o->log_level);
    fprintf(f, "kafka = { dead_letter_topic = \"%s.dlq\"; };\n", base);
    fprintf(f, "consumer = { batch_size = %d;", o->batch_size);
    if (o->linger_ms >= 0)
        fprintf(f, " linger_ms = %d;", o->linger_ms);
    if (o->poll_ms >= 0)
        fprintf(f, " poll_ms = %d;", o->poll_ms);
    fprintf(f, " };\n");
    fprintf(f,
            "outbox = { enabled = %s; topic = \"%s.events\"; refund_topic = \"%s.refunds\"; "
            "alert_topic = \"%s.alerts\"; };\n",
            o->outbox ? "true" : "false", base, base, base);
    fclose(f);
}

static void child_spawn(const struct opts *o, struct child *c, const char *tag, const char *topic,
                        const char *group)
{
    char db[96], port[32], batch[16];
    const char *argv[20];
    int argc = 0;

    snprintf(c->log, sizeof(c->log), "%s/%s.log", g.workdir, tag);
    snprintf(db, sizeof(db), "dbname=%s", g.dbname);
    snprintf(port, sizeof(port), "127.0.0.1:%d", o->metrics_port);
    snprintf(batch, sizeof(batch), "%d", o->batch_size);
    argv[argc++] = o->consumer;
    argv[argc++] = "--config";
    argv[argc++] = c->config;
    argv[argc++] = "--db";
    argv[argc++] = db;
    argv[argc++] = "--brokers";
    argv[argc++] = o->brokers;
    argv[argc++] = "--topics";
    argv[argc++] = topic;
    argv[argc++] = "--group";
    argv[argc++] = group;
    argv[argc++] = "--batch-size";
    argv[argc++] = batch;
    argv[argc++] = "--metrics-listen";
    argv[argc++] = port;
    argv[argc] = NULL;
    c->status = -1;
    c->port = 0;
    c->pid = fork();
    if (c->pid < 0)
        die("fork: %s", strerror(errno));
    if (c->pid == 0) {
        int fd = open(c->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, STDOUT_FILENO);
            dup2(fd, STDERR_FILENO);
            close(fd);
        }
        execv(argv[0], (char *const *)argv);
        fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    g.child = c->pid;
    progress("consumer pid %d: %s --topics %s --group %s --batch-size %s (log %s)", (int)c->pid,
             o->consumer, topic, group, batch, c->log);
}

static int decode_status(int ws)
{
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : WIFSIGNALED(ws) ? 128 + WTERMSIG(ws) : -1;
}

/* Dies (with the log's tail) when the child has exited. */
static void child_alive(struct child *c)
{
    int ws;

    if (c->status < 0 && waitpid(c->pid, &ws, WNOHANG) == c->pid) {
        char *text = slurp(c->log);
        const char *tail = text ? text : "";
        size_t n = strlen(tail);
        c->status = decode_status(ws);
        g.child = 0;
        fprintf(stderr, "%s\n", n > 3000 ? tail + n - 3000 : tail);
        free(text);
        die("the consumer exited with status %d (log %s)", c->status, c->log);
    }
}

static bool child_log_has(const struct child *c, const char *needle)
{
    char *text = slurp(c->log);
    bool found = text != NULL && strstr(text, needle) != NULL;

    free(text);
    return found;
}

static void child_wait_log(struct child *c, const char *needle, int timeout_s)
{
    double deadline = mono_s() + timeout_s;

    while (!child_log_has(c, needle)) {
        child_alive(c);
        check_stop();
        if (mono_s() > deadline)
            die("'%s' did not appear in %s within %d s", needle, c->log, timeout_s);
        sleep_ms(50);
    }
}

static void child_port(struct child *c)
{
    char *text, *s;

    child_wait_log(c, "event=metrics_listening", 30);
    text = slurp(c->log);
    s = text ? strstr(text, "event=metrics_listening") : NULL;
    s = s ? strstr(s, "port=") : NULL;
    c->port = s ? atoi(s + 5) : 0;
    free(text);
    if (c->port <= 0)
        die("no metrics port in %s", c->log);
}

/* SIGTERM, then waits; returns the exit status (SIGKILL after 60 s). */
static int child_stop(struct child *c)
{
    int ws;

    if (c->status >= 0)
        return c->status;
    kill(c->pid, SIGTERM);
    for (int i = 0; i < 600; i++) {
        if (waitpid(c->pid, &ws, WNOHANG) == c->pid) {
            c->status = decode_status(ws);
            g.child = 0;
            return c->status;
        }
        sleep_ms(100);
    }
    kill(c->pid, SIGKILL);
    waitpid(c->pid, &ws, 0);
    g.child = 0;
    c->status = 128 + SIGKILL;
    return c->status;
}

/* GET /metrics into buf; false when the endpoint does not answer. */
static bool metrics_get(int port, char *buf, size_t size)
{
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    struct timeval tv = {5, 0};
    const char *req = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    size_t used = 0;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    bool ok = false;

    buf[0] = '\0';
    if (fd < 0)
        return false;
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0 &&
        write(fd, req, strlen(req)) == (ssize_t)strlen(req)) {
        for (;;) {
            ssize_t n = read(fd, buf + used, size - 1 - used);
            if (n <= 0)
                break;
            used += (size_t)n;
            if (used + 1 >= size)
                break;
        }
        buf[used] = '\0';
        ok = strncmp(buf, "HTTP/1.", 7) == 0 && strstr(buf, " 200 ") != NULL;
    }
    close(fd);
    return ok;
}

/* The value of sample "name" or "name{labels}"; -1 when absent. */
static double prom(const char *text, const char *sample)
{
    size_t n = strlen(sample);

    for (const char *s = text; s != NULL && *s; s = strchr(s, '\n'), s = s ? s + 1 : NULL)
        if (strncmp(s, sample, n) == 0 && s[n] == ' ')
            return strtod(s + n + 1, NULL);
    return -1;
}

/* Sum of every sample of a metric family name{...}. */
static double prom_sum(const char *text, const char *name)
{
    size_t n = strlen(name);
    double sum = 0;

    for (const char *s = text; s != NULL && *s; s = strchr(s, '\n'), s = s ? s + 1 : NULL) {
        if (strncmp(s, name, n) == 0 && (s[n] == '{' || s[n] == ' ')) {
            const char *v = strchr(s, ' ');
            if (v != NULL)
                sum += strtod(v + 1, NULL);
        }
    }
    return sum;
}

struct hist {
    int n;
    double le[HIST_MAX]; /* upper bounds; the last is +Inf */
    double cum[HIST_MAX];
    double sum, count;
};

static void prom_hist(const char *text, const char *name, struct hist *h)
{
    char prefix[160], key[160];
    size_t n;

    memset(h, 0, sizeof(*h));
    snprintf(prefix, sizeof(prefix), "%s_bucket{le=\"", name);
    n = strlen(prefix);
    for (const char *s = text; s != NULL && *s; s = strchr(s, '\n'), s = s ? s + 1 : NULL) {
        if (strncmp(s, prefix, n) == 0 && h->n < HIST_MAX) {
            const char *v = strstr(s, "} ");
            h->le[h->n] = strtod(s + n, NULL);
            h->cum[h->n] = v ? strtod(v + 2, NULL) : 0;
            h->n++;
        }
    }
    snprintf(key, sizeof(key), "%s_sum", name);
    h->sum = prom(text, key);
    snprintf(key, sizeof(key), "%s_count", name);
    h->count = prom(text, key);
}

/* The bucket (lo, hi] that holds quantile q, the way Prometheus's
 * histogram_quantile() finds it; hi is +Inf for the overflow bucket. Returns
 * false when the histogram is empty. */
static bool hist_bucket(const struct hist *h, double q, double *lo, double *hi)
{
    double total = h->n > 0 ? h->cum[h->n - 1] : 0, rank = q * total;

    if (total <= 0)
        return false;
    for (int i = 0; i < h->n; i++) {
        if (h->cum[i] >= rank) {
            *lo = i > 0 ? h->le[i - 1] : 0;
            *hi = h->le[i];
            return true;
        }
    }
    return false;
}

static double hist_mean(const struct hist *h)
{
    return h->count > 0 ? h->sum / h->count : NAN;
}

/* A quantile as its bucket: "(0.1, 0.25] ms" (scaled). */
static const char *hist_q(const struct hist *h, double q, double scale, char *buf, size_t size)
{
    double lo, hi;

    if (!hist_bucket(h, q, &lo, &hi))
        snprintf(buf, size, "-");
    else if (isinf(hi))
        snprintf(buf, size, "> %g", lo * scale);
    else
        snprintf(buf, size, "(%g, %g]", lo * scale, hi * scale);
    return buf;
}

static void print_hist(const char *label, const struct hist *h, double scale, const char *unit)
{
    char q50[64], q99[64];

    printf("  %-34s n=%.0f mean %.2f%s, p50 in %s%s, p99 in %s%s (buckets)\n", label, h->count,
           hist_mean(h) * scale, unit, hist_q(h, 0.5, scale, q50, sizeof(q50)), unit,
           hist_q(h, 0.99, scale, q99, sizeof(q99)), unit);
}

/* One cumulative line per bucket, for the batch size distribution. */
static void print_buckets(const char *label, const struct hist *h)
{
    double prev = 0;

    printf("  %-34s", label);
    for (int i = 0; i < h->n; i++) {
        if (h->cum[i] - prev > 0) {
            if (isinf(h->le[i]))
                printf(" >%g:%.0f", h->le[i - 1], h->cum[i] - prev);
            else
                printf(" <=%g:%.0f", h->le[i], h->cum[i] - prev);
        }
        prev = h->cum[i];
    }
    printf("\n");
}

/* ------------------------------------------------------------------------------------------ */
/* Results */

struct ceiling {
    long orders;
    double seconds, rate, p50_ms, p99_ms, backend_cpu_s, wal_kb_per_order;
};

struct results {
    /* e2e */
    bool e2e;
    long e2e_orders;
    double produce_rate;
    double startup_s, steady_s, wall_s, steady_rate, wall_rate;
    struct ceiling ceil[2];
    double ceiling_mean;
    /* paired windows: the consumer running vs the gate alone, alternating */
    int pairs;
    long pair_e2e_n, pair_gate_n;
    double pair_e2e_s, pair_gate_s, pair_min, pair_max;
    double frozen_s; /* consumer frozen for the slices, inside first..last */
    double pair_gate_cpu_s, pair_gate_wal_kb; /* the slices' backend CPU and WAL */
    double gate_bench_rate;                   /* og_bench_gate's figure, -1 when not run */
    double consumer_cpu_s, backend_cpu_s, broker_cpu_s, e2e_wal_kb_per_order;
    double e2e_autovacuums, e2e_checkpoints;
    double e2e_rss_max;
    long e2e_violations; /* -1: not checked */
    int e2e_exit;
    /* lateness */
    bool lat;
    long lat_orders, lat_cancelled, lat_early, lat_not_due;
    double lat_p50, lat_p90, lat_p99, lat_p999, lat_max, lat_min;
    char lat_h50[48], lat_h99[48]; /* buckets of the consumer's histogram, ms */
    double lat_produce_rate, lat_rss_max, lat_consumer_cpu, lat_backend_cpu, lat_broker_cpu,
        lat_wall;
    int lat_exit;
    /* memory */
    bool mem;
    long mem_messages;
    double mem_produce_rate, mem_topic_mb, mem_to_paused_s;
    double rss_first, rss_min, rss_max, rss_final, rss_hwm;
    int rss_samples;
    long mem_log_rows;
    double mem_claims, mem_committed, mem_consumed, mem_deferred, mem_dropped, mem_paused;
    int mem_exit;
};

/* ------------------------------------------------------------------------------------------ */
/* Gate ceiling */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The session the ceiling measurements share (warm: PL/pgSQL compiled, plans
 * cached), like the consumer's own long-lived session. */
static struct db *ceiling_session(void)
{
    char conninfo[96];
    struct og_error err = {0};
    struct db *db;

    snprintf(conninfo, sizeof(conninfo), "dbname=%s", g.dbname);
    db = db_new(conninfo, NULL, PROG "-ceiling", NULL, NULL);
    if (db == NULL || db_connect(db, &err) != OG_OK)
        die("ceiling session: %s", db ? err.msg : "out of memory");
    return db;
}

/* gate_claim_cancel() on prefix<first> .. prefix<first+n-1> in batches of
 * batch_size from one session, back to back, until all are done or max_s
 * seconds have passed (0: no limit): the rate the gate alone reaches on this
 * database at this moment. r->orders says how many it cancelled. */
static void ceiling_run(const struct opts *o, struct db *db, const char *prefix, long first, long n,
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
        die("out of memory");
    memset(r, 0, sizeof(*r));
    for (long i = 0; i < n; i++) {
        snprintf(names[i], sizeof(names[i]), "%s%ld", prefix, first + i);
        nos[i] = names[i];
    }
    backend = PQbackendPID(db_conn(db));
    cpu0 = bench_proc_cpu_s(backend);
    wal0 = db_wal_lsn_bytes();
    t0 = mono_s();
    long i;

    for (i = 0; i < n && (max_s <= 0 || mono_s() - t0 < max_s); i += o->batch_size) {
        size_t len = (size_t)(n - i < o->batch_size ? n - i : o->batch_size), nrows = 0;
        int64_t c0 = clock_mono_us();

        check_stop();
        if (gate_claim_cancel(db, nos + i, len, GATE_SRC_TIMEOUT_CONSUMER, rows, &nrows, &err) !=
            OG_OK)
            die("ceiling: claim_cancel: %s", err.msg);
        lat[calls++] = (double)(clock_mono_us() - c0) / 1000.0;
        for (size_t k = 0; k < nrows; k++)
            if (rows[k].outcome != GATE_CANCELLED)
                die("ceiling: %s came back %s, expected cancelled", rows[k].order_no,
                    gate_outcome_str(rows[k].outcome));
        if (nrows != len)
            die("ceiling: %zu rows for %zu orders", nrows, len);
    }
    r->seconds = mono_s() - t0;
    r->orders = i < n ? i : n;
    r->rate = (double)r->orders / r->seconds;
    r->backend_cpu_s = cpu0 >= 0 ? bench_proc_cpu_s(backend) - cpu0 : -1;
    r->wal_kb_per_order = (db_wal_lsn_bytes() - wal0) / 1024.0 / (double)r->orders;
    qsort(lat, (size_t)calls, sizeof(*lat), cmp_double);
    r->p50_ms = lat[(calls - 1) / 2];
    r->p99_ms = lat[(calls - 1) * 99 / 100];
    free(lat);
    free(rows);
    free(nos);
    free(names);
    if (verbose)
        progress("gate ceiling on %s*: %ld orders in %.2f s = %.0f orders/s (call p50 %.1f ms, "
                 "p99 %.1f ms)",
                 prefix, r->orders, r->seconds, r->rate, r->p50_ms, r->p99_ms);
}

/* og_bench_gate as a child on the same server; its orders/s for our batch size,
 * or -1 when it is not there or fails. */
static double gate_bench_run(const struct opts *o)
{
    char orders[24], batch[16], dbname[80], line[512];
    const char *argv[] = {o->gate_bench, "--dbname", dbname,         "--batches", batch,
                          "--orders",    orders,     "--no-pgbench", NULL};
    double rate = -1;
    int fds[2], ws;
    pid_t pid;
    FILE *f;

    if (o->gate_bench[0] == '\0')
        return -1;
    if (access(o->gate_bench, X_OK) != 0) {
        progress("og_bench_gate not found at %s: skipped", o->gate_bench);
        return -1;
    }
    snprintf(orders, sizeof(orders), "%ld", o->ceiling_orders);
    snprintf(batch, sizeof(batch), "%d", o->batch_size);
    snprintf(dbname, sizeof(dbname), "%s_gate", o->dbname);
    progress("running %s --dbname %s --batches %s --orders %s --no-pgbench", o->gate_bench, dbname,
             batch, orders);
    if (pipe(fds) != 0)
        return -1;
    pid = fork();
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        close(fds[1]);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    f = fdopen(fds[0], "r");
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        int b;
        long n, calls;
        double secs, ops;
        /* Its table: batch orders calls seconds orders/s ... */
        if (sscanf(line, "%d %ld %ld %lf %lf", &b, &n, &calls, &secs, &ops) == 5 &&
            b == o->batch_size && rate < 0)
            rate = ops;
    }
    if (f != NULL)
        fclose(f);
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
        ;
    if (decode_status(ws) != 0)
        progress("og_bench_gate exited with status %d (its figure, if any, is still shown)",
                 decode_status(ws));
    return rate;
}

/* What the consumer's log says about its pauses: the blocking seek of every
 * pause (seek_us=, logged at debug level) and seeks that timed out. */
static void print_seeks(const struct child *c)
{
    char *text = slurp(c->log);
    double *us = NULL, total = 0;
    size_t n = 0, cap = 0;
    long failed = 0;

    for (const char *s = text; s != NULL && (s = strstr(s, "seek_us=")) != NULL; s += 8) {
        if (n == cap) {
            double *grown = realloc(us, (cap = cap ? cap * 2 : 1024) * sizeof(*us));
            if (grown == NULL)
                break;
            us = grown;
        }
        us[n] = strtod(s + 8, NULL);
        total += us[n++];
    }
    for (const char *s = text; s != NULL && (s = strstr(s, "event=seek_failed")) != NULL; s++)
        failed++;
    if (n > 0) {
        qsort(us, n, sizeof(*us), cmp_double);
        printf(
            "  pause+seek in the consume loop: %zu seeks, p50 %.2f ms, p99 %.2f ms, max %.1f ms, "
            "total %.2f s blocked; %ld timed out (seek_failed)\n",
            n, us[(n - 1) / 2] / 1000, us[(n - 1) * 99 / 100] / 1000, us[n - 1] / 1000, total / 1e6,
            failed);
    } else if (failed > 0) {
        printf("  seeks that timed out in the consume loop (seek_failed, 1 s each): %ld\n", failed);
    }
    free(us);
    free(text);
}

/* ------------------------------------------------------------------------------------------ */
/* Phase 1: end to end with a backlog */

struct sampler {
    pid_t consumer, backend, broker;
    double c0, b0, k0; /* CPU seconds at the start */
    double rss_max;
};

static void sampler_start(struct sampler *s, pid_t consumer, pid_t backend)
{
    s->consumer = consumer;
    s->backend = backend;
    s->broker = broker_pid();
    s->c0 = bench_proc_cpu_s(consumer);
    s->b0 = bench_proc_cpu_s(backend);
    s->k0 = bench_proc_cpu_s(s->broker);
    s->rss_max = 0;
}

static void sampler_rss(struct sampler *s)
{
    double rss = proc_vm_mb(s->consumer, "VmRSS:");

    if (rss > s->rss_max)
        s->rss_max = rss;
}

static double cpu_since(pid_t pid, double start)
{
    double now = bench_proc_cpu_s(pid);

    return start >= 0 && now >= 0 ? now - start : -1;
}

static void phase_e2e(const struct opts *o, const char *run, struct results *r)
{
    char topic[160], group[160], base[128], *metrics = malloc(METRICS_MAX_BYTES);
    struct child c;
    struct sampler s;
    struct hist h_batch, h_db, h_late;
    double av0, ck0, av1, ck1, wal0, t_spawn, t_first = -1, t_done, next_line, last_line_t;
    double win_t0 = 0;
    long last_line_n = 0, done = 0, win_n0 = 0, next_slice = 0;
    long slice_pool = o->slice_s > 0 ? o->slice_pool : 0;
    bool stopped = false;
    struct db *cdb;
    int64_t past_ms = clock_wall_ms() - 3600 * 1000;

    if (metrics == NULL)
        die("out of memory");
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
    sql_do(g.conn, "CHECKPOINT");

    child_config(o, &c, "e2e", base);
    db_background(&av0, &ck0);
    wal0 = db_wal_lsn_bytes();
    t_spawn = mono_s();
    child_spawn(o, &c, "e2e", topic, group);
    child_port(&c);
    /* Its database session appears once it connected. */
    pid_t backend = 0;
    for (int i = 0; i < 200 && backend == 0; i++) {
        child_alive(&c);
        backend = db_consumer_backend();
        if (backend == 0)
            sleep_ms(50);
    }
    sampler_start(&s, c.pid, backend);
    next_line = mono_s() + 10;
    last_line_t = t_spawn;
    for (;;) {
        double now;
        child_alive(&c);
        check_stop();
        sleep_ms(250);
        now = mono_s();
        if (metrics_get(c.port, metrics, METRICS_MAX_BYTES))
            done = (long)prom(metrics, "ordergate_claims_total{outcome=\"cancelled\"}");
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
            win_t1 = mono_s();
            win_n1 = db_count_log("e");
            ceiling_run(o, cdb, "p", next_slice, slice_pool - next_slice, o->slice_ms / 1000.0, &sr,
                        false);
            next_slice += sr.orders;
            kill(c.pid, SIGCONT);
            stopped = false;
            r->frozen_s += mono_s() - win_t1;
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
            progress("pair %d: consumer %.0f/s over %.1f s, gate alone %.0f/s over %.1f s: %.0f %%",
                     r->pairs, win_rate, win_t1 - win_t0, sr.rate, sr.seconds,
                     100 * win_rate / sr.rate);
            win_t0 = mono_s();
            win_n0 = win_n1;
        }
        if (now >= next_line) {
            double cc = cpu_since(s.consumer, s.c0), bc = cpu_since(s.backend, s.b0);
            progress("e2e t=%.0fs cancelled %ld (%.0f/s over the last %.0f s); cpu so far: "
                     "consumer %.1f s, its backend %.1f s; rss %.1f MB",
                     now - t_spawn, done, (double)(done - last_line_n) / (now - last_line_t),
                     now - last_line_t, cc, bc, s.rss_max);
            last_line_n = done;
            last_line_t = now;
            next_line = now + 10;
        }
        if (now - t_spawn > o->timeout_s)
            die("e2e: only %ld of %ld cancelled after %d s (log %s)", done, o->orders, o->timeout_s,
                c.log);
    }
    (void)stopped;
    /* The last window closes with the last commit. */
    if (t_first >= 0) {
        long n_end = db_count_log("e");
        r->pair_e2e_n += n_end - win_n0;
        r->pair_e2e_s += mono_s() - win_t0;
    }
    t_done = mono_s();
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
    if (!metrics_get(c.port, metrics, METRICS_MAX_BYTES))
        metrics[0] = '\0';
    r->e2e_exit = child_stop(&c);

    /* The figures from the database: first to last commit. */
    {
        PGresult *res =
            sql(g.conn,
                "SELECT count(*), extract(epoch FROM max(created_at) - min(created_at)) "
                "FROM ordergate.status_log WHERE order_no LIKE 'e%'",
                0, NULL);
        long n = atol(PQgetvalue(res, 0, 0));
        r->steady_s = strtod(PQgetvalue(res, 0, 1), NULL);
        PQclear(res);
        if (n != o->orders)
            die("e2e: %ld status_log rows for %ld orders", n, o->orders);
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
        PQclear(sql(g.conn,
                    "SELECT count(*) FROM ordergate.claim_cancel(ARRAY(SELECT 'p' || i "
                    "FROM generate_series($1::bigint, $2::bigint - 1) i), 'timeout_scanner')",
                    2, p));
    }
    r->e2e_violations = -1;
    if (o->reconcile) {
        double t0 = mono_s();
        r->e2e_violations = (long)sql_num(
            g.conn, "SELECT coalesce(sum(violations), 0) FROM ordergate.reconcile()", 0, NULL);
        progress("reconcile: %ld violations (%.1f s)", r->e2e_violations, mono_s() - t0);
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
    printf("  cpu during the run (%.1f s wall): consumer %.1f s (%.0f %%), its backend %.1f s "
           "(%.0f %%), broker %.1f s (%.0f %%)\n",
           r->wall_s, r->consumer_cpu_s, 100 * r->consumer_cpu_s / r->wall_s, r->backend_cpu_s,
           100 * r->backend_cpu_s / r->wall_s, r->broker_cpu_s, 100 * r->broker_cpu_s / r->wall_s);
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
        prom_hist(metrics, "ordergate_batch_size", &h_batch);
        prom_hist(metrics, "ordergate_db_latency_seconds", &h_db);
        prom_hist(metrics, "ordergate_lateness_seconds", &h_late);
        printf("  consumer metrics: consumed %.0f, committed %.0f in %.0f batches, deferred %.0f, "
               "dropped %.0f, not_due %.0f, db errors %.0f\n",
               prom_sum(metrics, "ordergate_messages_consumed_total"),
               prom(metrics, "ordergate_messages_committed_total"),
               prom(metrics, "ordergate_batches_total"),
               prom(metrics, "ordergate_messages_deferred_total"),
               prom(metrics, "ordergate_messages_dropped_total"),
               prom(metrics, "ordergate_claims_total{outcome=\"not_due\"}"),
               prom(metrics, "ordergate_db_errors_total"));
        printf("  %-34s %.0f batches, mean %.1f messages\n", "batch size", h_batch.count,
               hist_mean(&h_batch));
        print_buckets("batch size distribution", &h_batch);
        print_hist("db round trip (claim_cancel)", &h_db, 1000, " ms");
        printf("  consumer-side share: %.0f batches x %.1f ms db = %.1f s of %.1f s (%.0f %%) "
               "spent waiting for claim_cancel\n",
               h_db.count, 1000 * hist_mean(&h_db), h_db.sum, r->steady_s,
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

/* ------------------------------------------------------------------------------------------ */
/* Phase 2: lateness at a steady rate */

static void phase_lateness(const struct opts *o, const char *run, struct results *r)
{
    char topic[160], group[160], base[128], *metrics = malloc(METRICS_MAX_BYTES);
    long n = (long)o->rate * o->duration;
    int lead = o->lead_s > 0 ? o->lead_s : 20 + (int)(n / 7500);
    int64_t t0_ms = clock_wall_ms() + (int64_t)lead * 1000, end_ms;
    double setup_start = mono_s(), next_line, last_line_t, prod_t0, prod_t1, lat_t0;
    long last_line_n = 0, done = 0, produced = 0;
    struct child c;
    struct sampler s;
    struct hist h_late, h_batch, h_db;
    rd_kafka_t *rk;
    rd_kafka_topic_t *rkt;
    /* Messages go out ahead_ms before they are due, so the producer may
     * linger a little without making anything late; 5 ms batches of a few
     * messages cost the broker (on the same 2 cores) ~2.5x the CPU. */
    char linger[16];
    const char *props[] = {"linger.ms", linger, "compression.codec", o->compression, NULL};

    if (metrics == NULL)
        die("out of memory");
    printf("\n== lateness: %d due orders/s for %d s (%ld orders), produced %d ms ahead (producer "
           "linger.ms %d) ==\n",
           o->rate, o->duration, n, o->ahead_ms, o->ahead_ms / 4 < 50 ? o->ahead_ms / 4 : 50);
    fflush(stdout);
    r->lat = true;
    r->lat_orders = n;
    db_fresh(o);
    db_stock(o);
    db_load(o, "l", n, t0_ms, o->rate);
    db_settle();
    {
        /* The database's expire_at must be the message's due_at to the millisecond. */
        char no[32];
        const char *p[1] = {no};
        long last = n - 1;
        int64_t want = t0_ms + (int64_t)last * 1000 / o->rate, got;
        snprintf(no, sizeof(no), "l%ld", last);
        got = (int64_t)sql_num(g.conn,
                               "SELECT (extract(epoch FROM expire_at) * 1000)::bigint "
                               "FROM ordergate.orders WHERE order_no = $1",
                               1, p);
        if (got != want)
            die("lateness: expire_at of %s is %lld ms, the message says %lld", no, (long long)got,
                (long long)want);
        msg_check(no, want);
    }
    snprintf(base, sizeof(base), "ogbench.%s.lat", run);
    snprintf(topic, sizeof(topic), "%s.cancel", base);
    snprintf(group, sizeof(group), "%s.group", base);
    topic_create(o, topic, o->partitions);
    child_config(o, &c, "lateness", base);
    child_spawn(o, &c, "lateness", topic, group);
    child_port(&c);
    child_wait_log(&c, "event=partitions_assigned", 60);
    {
        pid_t backend = 0;
        for (int i = 0; i < 200 && backend == 0; i++) {
            backend = db_consumer_backend();
            if (backend == 0)
                sleep_ms(50);
        }
        sampler_start(&s, c.pid, backend);
    }
    lat_t0 = mono_s();
    if (clock_wall_ms() > t0_ms - o->ahead_ms - 1000)
        die("lateness: setup took %.0f s, longer than the lead of %d s; rerun with --lead %d",
            mono_s() - setup_start, lead, (int)(mono_s() - setup_start) * 2 + 10);
    progress("setup took %.0f s of the %d s lead; first order due in %.1f s",
             mono_s() - setup_start, lead, (double)(t0_ms - clock_wall_ms()) / 1000.0);

    snprintf(linger, sizeof(linger), "%d", o->ahead_ms / 4 < 50 ? o->ahead_ms / 4 : 50);
    rk = kafka_client(o, RD_KAFKA_PRODUCER, props);
    rkt = rd_kafka_topic_new(rk, topic, NULL);
    g.dr_ok = g.dr_failed = 0;
    end_ms = t0_ms + (int64_t)(n - 1) * 1000 / o->rate;
    next_line = mono_s() + 10;
    last_line_t = mono_s();
    prod_t0 = -1;
    prod_t1 = -1;
    while (produced < n || done < n) {
        int64_t now = clock_wall_ms();
        double m = mono_s();

        check_stop();
        child_alive(&c);
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
            if (metrics_get(c.port, metrics, METRICS_MAX_BYTES))
                done = (long)prom(metrics, "ordergate_claims_total{outcome=\"cancelled\"}");
            sampler_rss(&s);
            progress("lateness t=%+.0fs produced %ld cancelled %ld (%.0f/s over the last %.0f s) "
                     "rss %.1f MB",
                     (double)(now - t0_ms) / 1000.0, produced, done,
                     (double)(done - last_line_n) / (m - last_line_t), m - last_line_t, s.rss_max);
            last_line_n = done;
            last_line_t = m;
            next_line = m + 10;
            if (produced == n && now > end_ms + 60000)
                die("lateness: %ld of %ld cancelled 60 s after the last due time", done, n);
        }
        if (produced == n && now > end_ms) {
            /* Every message is out: look at the count more often. */
            if (metrics_get(c.port, metrics, METRICS_MAX_BYTES))
                done = (long)prom(metrics, "ordergate_claims_total{outcome=\"cancelled\"}");
            sampler_rss(&s);
            if (done >= n)
                break;
            sleep_ms(100);
        } else {
            sleep_ms(2);
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
    r->lat_wall = mono_s() - lat_t0;
    if (!metrics_get(c.port, metrics, METRICS_MAX_BYTES))
        metrics[0] = '\0';
    r->lat_exit = child_stop(&c);

    {
        PGresult *res =
            sql(g.conn,
                "SELECT count(*), percentile_cont(0.5) WITHIN GROUP (ORDER BY ms), "
                "       percentile_cont(0.9) WITHIN GROUP (ORDER BY ms), "
                "       percentile_cont(0.99) WITHIN GROUP (ORDER BY ms), "
                "       percentile_cont(0.999) WITHIN GROUP (ORDER BY ms), max(ms), min(ms), "
                "       count(*) FILTER (WHERE ms < 0) "
                "FROM (SELECT extract(epoch FROM l.created_at - o.expire_at) * 1000 AS ms "
                "      FROM ordergate.status_log l JOIN ordergate.orders o USING (order_no) "
                "      WHERE l.order_no LIKE 'l%') x",
                0, NULL);
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
    printf("  produced at %.0f msg/s (target %d) over %d partitions; consumer exit status %d; rss "
           "max %.1f MB\n",
           r->lat_produce_rate, o->rate, o->partitions, r->lat_exit, r->lat_rss_max);
    printf(
        "  cpu over %.0f s: consumer %.1f s (%.0f %%), its backend %.1f s (%.0f %%), broker %.1f "
        "s (%.0f %%)\n",
        r->lat_wall, r->lat_consumer_cpu, 100 * r->lat_consumer_cpu / r->lat_wall,
        r->lat_backend_cpu, 100 * r->lat_backend_cpu / r->lat_wall, r->lat_broker_cpu,
        100 * r->lat_broker_cpu / r->lat_wall);
    printf("  lateness = status_log.created_at (claim transaction start) - expire_at, %ld "
           "orders:\n",
           r->lat_cancelled);
    printf("    p50 %.1f ms  p90 %.1f ms  p99 %.1f ms  p99.9 %.1f ms  max %.1f ms  min %.1f ms; "
           "cancelled before expire_at: %ld\n",
           r->lat_p50, r->lat_p90, r->lat_p99, r->lat_p999, r->lat_max, r->lat_min, r->lat_early);
    snprintf(r->lat_h50, sizeof(r->lat_h50), "-");
    snprintf(r->lat_h99, sizeof(r->lat_h99), "-");
    if (metrics[0] != '\0') {
        prom_hist(metrics, "ordergate_lateness_seconds", &h_late);
        prom_hist(metrics, "ordergate_batch_size", &h_batch);
        prom_hist(metrics, "ordergate_db_latency_seconds", &h_db);
        hist_q(&h_late, 0.5, 1000, r->lat_h50, sizeof(r->lat_h50));
        hist_q(&h_late, 0.99, 1000, r->lat_h99, sizeof(r->lat_h99));
        r->lat_not_due = (long)prom(metrics, "ordergate_claims_total{outcome=\"not_due\"}");
        print_hist("consumer lateness (after commit)", &h_late, 1000, " ms");
        print_buckets("consumer lateness buckets (s)", &h_late);
        printf("  %-34s %.0f batches, mean %.1f messages\n", "batch size", h_batch.count,
               hist_mean(&h_batch));
        print_buckets("batch size distribution", &h_batch);
        print_hist("db round trip", &h_db, 1000, " ms");
        printf("  consumer metrics: consumed %.0f, deferred (pause+seek) %.0f, dropped prefetch "
               "%.0f, not_due %.0f, rescheduled %.0f\n",
               prom_sum(metrics, "ordergate_messages_consumed_total"),
               prom(metrics, "ordergate_messages_deferred_total"),
               prom(metrics, "ordergate_messages_dropped_total"),
               prom(metrics, "ordergate_claims_total{outcome=\"not_due\"}"),
               prom(metrics, "ordergate_rescheduled_total"));
    }
    print_seeks(&c);
    fflush(stdout);
    if (!g.keep) {
        db_drop();
        topics_delete();
    }
    free(metrics);
}

/* ------------------------------------------------------------------------------------------ */
/* Phase 3: memory with a waiting backlog */

static void phase_memory(const struct opts *o, const char *run, struct results *r)
{
    char topic[160], group[160], base[128], *metrics = malloc(METRICS_MAX_BYTES);
    long in_db = o->waiting_db < o->waiting ? o->waiting_db : o->waiting;
    int64_t due_ms = clock_wall_ms() + 3600 * 1000;
    struct child c;
    double t_spawn, t_paused, sum = 0;

    if (metrics == NULL)
        die("out of memory");
    printf("\n== memory: %ld messages due in an hour, %d partitions ==\n", o->waiting,
           o->partitions);
    fflush(stdout);
    r->mem = true;
    r->mem_messages = o->waiting;
    db_fresh(o);
    db_stock(o);
    /* Overdue in the database: only the message's due time holds them back. */
    db_load(o, "w", in_db, clock_wall_ms() - 3600 * 1000, 0);
    db_settle();
    snprintf(base, sizeof(base), "ogbench.%s.mem", run);
    snprintf(topic, sizeof(topic), "%s.cancel", base);
    snprintf(group, sizeof(group), "%s.group", base);
    topic_create(o, topic, o->partitions);
    r->mem_produce_rate = produce_backlog(o, topic, "w", o->waiting, due_ms);
    r->mem_topic_mb = topic_disk_mb(topic);

    child_config(o, &c, "memory", base);
    t_spawn = mono_s();
    child_spawn(o, &c, "memory", topic, group);
    child_port(&c);
    for (;;) {
        child_alive(&c);
        check_stop();
        if (metrics_get(c.port, metrics, METRICS_MAX_BYTES) &&
            prom(metrics, "ordergate_paused_partitions") >= o->partitions)
            break;
        if (mono_s() - t_spawn > 120)
            die("memory: the consumer did not pause all %d partitions within 120 s (log %s)",
                o->partitions, c.log);
        sleep_ms(200);
    }
    t_paused = mono_s();
    r->mem_to_paused_s = t_paused - t_spawn;
    progress("all %d partitions assigned and paused %.1f s after the start; sampling VmRSS for "
             "%d s",
             o->partitions, r->mem_to_paused_s, o->rss_seconds);
    r->rss_min = 1e18;
    r->rss_max = 0;
    for (int i = 0; i < o->rss_seconds; i++) {
        double rss;
        child_alive(&c);
        check_stop();
        rss = proc_vm_mb(c.pid, "VmRSS:");
        if (i == 0)
            r->rss_first = rss;
        if (rss < r->rss_min)
            r->rss_min = rss;
        if (rss > r->rss_max)
            r->rss_max = rss;
        r->rss_final = rss;
        sum += rss;
        r->rss_samples++;
        if (i % 10 == 0)
            progress("t=%ds rss %.1f MB", i, rss);
        /* One sample per second, wherever the turn started. */
        sleep_ms(1000 - (long)(fmod(mono_s() - t_paused, 1.0) * 1000));
    }
    r->rss_hwm = proc_vm_mb(c.pid, "VmHWM:");
    if (metrics_get(c.port, metrics, METRICS_MAX_BYTES)) {
        r->mem_claims = prom_sum(metrics, "ordergate_claims_total");
        r->mem_committed = prom(metrics, "ordergate_messages_committed_total");
        r->mem_consumed = prom_sum(metrics, "ordergate_messages_consumed_total");
        r->mem_deferred = prom(metrics, "ordergate_messages_deferred_total");
        r->mem_dropped = prom(metrics, "ordergate_messages_dropped_total");
        r->mem_paused = prom(metrics, "ordergate_paused_partitions");
    } else {
        r->mem_claims = r->mem_committed = -1;
    }
    r->mem_exit = child_stop(&c);
    r->mem_log_rows = db_count_log("");
    printf("  produced at %.0f msg/s; broker log %.0f MB on disk; consumer exit status %d\n",
           r->mem_produce_rate, r->mem_topic_mb, r->mem_exit);
    printf("  VmRSS over %d one-second samples after every partition paused (%.1f s after start): "
           "min %.1f MB, max %.1f MB, final %.1f MB, mean %.1f MB (first %.1f MB); VmHWM %.1f "
           "MB\n",
           r->rss_samples, r->mem_to_paused_s, r->rss_min, r->rss_max, r->rss_final,
           sum / r->rss_samples, r->rss_first, r->rss_hwm);
    printf("  backlog untouched: status_log rows %ld (of %ld orders overdue in the database), "
           "claims %.0f, offsets committed %.0f; consumed %.0f (deferred %.0f, dropped prefetch "
           "%.0f), paused %.0f\n",
           r->mem_log_rows, in_db, r->mem_claims, r->mem_committed, r->mem_consumed,
           r->mem_deferred, r->mem_dropped, r->mem_paused);
    fflush(stdout);
    if (!g.keep) {
        db_drop();
        topics_delete();
    }
    free(metrics);
}

/* ------------------------------------------------------------------------------------------ */

static void bench_cleanup(bool failed)
{
    if (g.child > 0) {
        int ws;
        kill(g.child, SIGCONT);
        kill(g.child, SIGTERM);
        for (int i = 0; i < 100 && waitpid(g.child, &ws, WNOHANG) == 0; i++)
            sleep_ms(100);
        kill(g.child, SIGKILL);
        waitpid(g.child, &ws, WNOHANG);
        g.child = 0;
    }
    if (!g.keep) {
        topics_delete();
        db_drop();
    }
    if (g.admin_rk != NULL) {
        rd_kafka_destroy(g.admin_rk);
        g.admin_rk = NULL;
    }
    if (g.admin != NULL) {
        PQfinish(g.admin);
        g.admin = NULL;
    }
    if (g.workdir[0] != '\0') {
        if (failed || g.keep) {
            fprintf(stderr, PROG ": consumer logs and configs kept in %s\n", g.workdir);
        } else {
            DIR *d = opendir(g.workdir);
            struct dirent *e;
            char file[PATH_MAX + 300];
            while (d != NULL && (e = readdir(d)) != NULL) {
                if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                    continue;
                snprintf(file, sizeof(file), "%s/%s", g.workdir, e->d_name);
                unlink(file);
            }
            if (d != NULL)
                closedir(d);
            rmdir(g.workdir);
        }
        g.workdir[0] = '\0';
    }
}

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: " PROG " [options]\n"
        "  --phases LIST        e2e,lateness,memory (default all three)\n"
        "  --orders N           e2e: due messages in the backlog (default 1000000)\n"
        "  --ceiling-orders N   e2e: orders of the gate ceiling before and after the consumer\n"
        "                       (default 50000 each)\n"
        "  --slice-seconds S    e2e: every S s of consumer time, freeze it (SIGSTOP) and run\n"
        "                       the gate alone for a paired slice (default 10; 0 = none)\n"
        "  --slice-orders N     e2e: orders per paired slice (default 5000; at most 30 slices)\n"
        "  --rate N             lateness: due orders per second (default 5000)\n"
        "  --duration S         lateness: seconds of due times (default 60)\n"
        "  --ahead-ms MS        lateness: produce each message this long before it is due "
        "(default 2000)\n"
        "  --lead S             lateness: setup time before the first due time (default "
        "20 + orders/7500)\n"
        "  --waiting N          memory: messages due in an hour (default 10000000)\n"
        "  --waiting-db N       memory: of those, the first N have overdue orders in the "
        "database (default 100000)\n"
        "  --rss-seconds S      memory: VmRSS samples, one a second (default 60)\n"
        "  --partitions N       partitions of every bench topic (default 8)\n"
        "  --batch-size N       consumer.batch_size and the ceiling's batch (default 500)\n"
        "  --linger-ms MS, --poll-ms MS   consumer settings (default: the consumer's)\n"
        "  --outbox             run the consumer's outbox relay too (default off: the "
        "ceiling has none)\n"
        "  --compression C      producer compression.codec (default none)\n"
        "  --consumer-log-level L  info (default), debug (adds per-pause seek times to the\n"
        "                       report) or warn\n"
        "  --items N, --skus N, --coupon-every N   order shape (default 2, 1000, 3)\n"
        "  --dbname NAME        database created per phase (default og_bench_consumer)\n"
        "  --template NAME      template database (default ordergate_tpl, built by\n"
        "                       tests/support/db_template.sh)\n"
        "  --brokers LIST       Kafka bootstrap (default $ORDERGATE_BROKERS)\n"
        "  --consumer PATH      the consumer binary (default ../consumer/ordergate-consumer "
        "from this program)\n"
        "  --gate-bench PATH    og_bench_gate to run as a child (default: next to this "
        "program)\n"
        "  --no-gate-bench      do not run og_bench_gate\n"
        "  --metrics-port N     consumer metrics port (default 0: a free one)\n"
        "  --no-reconcile       skip reconcile() after the e2e phase\n"
        "  --timeout S          give up on the e2e phase after S seconds (default 3600)\n"
        "  --keep               keep the consumer logs and configs, the topics, and the last\n"
        "                       phase's database (each phase re-creates --dbname)\n"
        "Connection: libpq's environment (PGHOST, PGPORT, PGUSER: a superuser).\n");
}

/* dir of /proc/self/exe + rel, into out. */
static void beside_self(char *out, size_t size, const char *rel)
{
    char exe[PATH_MAX];

    if (path_exe_dir(exe, sizeof(exe)))
        snprintf(out, size, "%s/%s", exe, rel);
    else
        snprintf(out, size, "%s", rel);
}

static int parse_args(int argc, char **argv, struct opts *o)
{
    enum {
        O_PHASES = 256,
        O_ORDERS,
        O_CEIL,
        O_SLICE_S,
        O_SLICE_MS,
        O_SLICE_POOL,
        O_RATE,
        O_DURATION,
        O_AHEAD,
        O_LEAD,
        O_WAITING,
        O_WAITING_DB,
        O_RSS,
        O_PARTS,
        O_BATCH,
        O_LINGER,
        O_POLL,
        O_OUTBOX,
        O_COMPRESSION,
        O_LOG_LEVEL,
        O_ITEMS,
        O_SKUS,
        O_COUPON,
        O_DBNAME,
        O_TEMPLATE,
        O_BROKERS,
        O_CONSUMER,
        O_GATE,
        O_NO_GATE,
        O_PORT,
        O_NO_RECONCILE,
        O_TIMEOUT,
        O_KEEP,
    };
    static const struct option longopts[] = {
        {"phases", required_argument, NULL, O_PHASES},
        {"orders", required_argument, NULL, O_ORDERS},
        {"ceiling-orders", required_argument, NULL, O_CEIL},
        {"slice-seconds", required_argument, NULL, O_SLICE_S},
        {"slice-ms", required_argument, NULL, O_SLICE_MS},
        {"slice-pool", required_argument, NULL, O_SLICE_POOL},
        {"rate", required_argument, NULL, O_RATE},
        {"duration", required_argument, NULL, O_DURATION},
        {"ahead-ms", required_argument, NULL, O_AHEAD},
        {"lead", required_argument, NULL, O_LEAD},
        {"waiting", required_argument, NULL, O_WAITING},
        {"waiting-db", required_argument, NULL, O_WAITING_DB},
        {"rss-seconds", required_argument, NULL, O_RSS},
        {"partitions", required_argument, NULL, O_PARTS},
        {"batch-size", required_argument, NULL, O_BATCH},
        {"linger-ms", required_argument, NULL, O_LINGER},
        {"poll-ms", required_argument, NULL, O_POLL},
        {"outbox", no_argument, NULL, O_OUTBOX},
        {"compression", required_argument, NULL, O_COMPRESSION},
        {"consumer-log-level", required_argument, NULL, O_LOG_LEVEL},
        {"items", required_argument, NULL, O_ITEMS},
        {"skus", required_argument, NULL, O_SKUS},
        {"coupon-every", required_argument, NULL, O_COUPON},
        {"dbname", required_argument, NULL, O_DBNAME},
        {"template", required_argument, NULL, O_TEMPLATE},
        {"brokers", required_argument, NULL, O_BROKERS},
        {"consumer", required_argument, NULL, O_CONSUMER},
        {"gate-bench", required_argument, NULL, O_GATE},
        {"no-gate-bench", no_argument, NULL, O_NO_GATE},
        {"metrics-port", required_argument, NULL, O_PORT},
        {"no-reconcile", no_argument, NULL, O_NO_RECONCILE},
        {"timeout", required_argument, NULL, O_TIMEOUT},
        {"keep", no_argument, NULL, O_KEEP},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *brokers = getenv("ORDERGATE_BROKERS");
    int c, li = -1;

    *o = (struct opts){.e2e = true,
                       .lateness = true,
                       .memory = true,
                       .orders = 1000000,
                       .ceiling_orders = 50000,
                       .slice_s = 10,
                       .slice_ms = 2000,
                       .slice_pool = 300000,
                       .rate = 5000,
                       .duration = 60,
                       .ahead_ms = 2000,
                       .waiting = 10000000,
                       .waiting_db = 100000,
                       .rss_seconds = 60,
                       .partitions = 8,
                       .batch_size = 500,
                       .linger_ms = -1,
                       .poll_ms = -1,
                       .items = 2,
                       .skus = 1000,
                       .coupon_every = 3,
                       .compression = "none",
                       .log_level = "info",
                       .dbname = "og_bench_consumer",
                       .template_db = "ordergate_tpl",
                       .brokers = brokers && *brokers ? brokers : "localhost:9092",
                       .reconcile = true,
                       .timeout_s = 3600};
    beside_self(o->consumer, sizeof(o->consumer), "../consumer/ordergate-consumer");
    beside_self(o->gate_bench, sizeof(o->gate_bench), "og_bench_gate");

    while ((c = getopt_long(argc, argv, "h", longopts, &li)) != -1) {
        int bad = 0;
        switch (c) {
        case O_PHASES: {
            char buf[128], *save = NULL;
            o->e2e = o->lateness = o->memory = false;
            snprintf(buf, sizeof(buf), "%s", optarg);
            for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                if (strcmp(t, "e2e") == 0)
                    o->e2e = true;
                else if (strcmp(t, "lateness") == 0)
                    o->lateness = true;
                else if (strcmp(t, "memory") == 0)
                    o->memory = true;
                else
                    bad = 1;
            }
            bad |= !o->e2e && !o->lateness && !o->memory;
            break;
        }
        case O_ORDERS:
            bad = parse_long(optarg, 1000, 100000000, &o->orders);
            break;
        case O_CEIL:
            bad = parse_long(optarg, 1000, 10000000, &o->ceiling_orders);
            break;
        case O_SLICE_S:
            bad = parse_int(optarg, 0, 3600, &o->slice_s);
            break;
        case O_SLICE_MS:
            bad = parse_int(optarg, 100, 600000, &o->slice_ms);
            break;
        case O_SLICE_POOL:
            bad = parse_long(optarg, 1000, 100000000, &o->slice_pool);
            break;
        case O_RATE:
            bad = parse_int(optarg, 1, 1000000, &o->rate);
            break;
        case O_DURATION:
            bad = parse_int(optarg, 1, 86400, &o->duration);
            break;
        case O_AHEAD:
            bad = parse_int(optarg, 0, 600000, &o->ahead_ms);
            break;
        case O_LEAD:
            bad = parse_int(optarg, 1, 86400, &o->lead_s);
            break;
        case O_WAITING:
            bad = parse_long(optarg, 1, 1000000000, &o->waiting);
            break;
        case O_WAITING_DB:
            bad = parse_long(optarg, 0, 100000000, &o->waiting_db);
            break;
        case O_RSS:
            bad = parse_int(optarg, 1, 86400, &o->rss_seconds);
            break;
        case O_PARTS:
            bad = parse_int(optarg, 1, 1000, &o->partitions);
            break;
        case O_BATCH:
            bad = parse_int(optarg, 1, GATE_BATCH_MAX, &o->batch_size);
            break;
        case O_LINGER:
            bad = parse_int(optarg, 0, 60000, &o->linger_ms);
            break;
        case O_POLL:
            bad = parse_int(optarg, 1, 10000, &o->poll_ms);
            break;
        case O_OUTBOX:
            o->outbox = true;
            break;
        case O_COMPRESSION:
            o->compression = optarg;
            bad = strspn(optarg, "abcdefghijklmnopqrstuvwxyz0123456789") != strlen(optarg);
            break;
        case O_LOG_LEVEL:
            o->log_level = optarg;
            bad = strcmp(optarg, "debug") != 0 && strcmp(optarg, "info") != 0 &&
                  strcmp(optarg, "warn") != 0;
            break;
        case O_ITEMS:
            bad = parse_int(optarg, 1, 10, &o->items);
            break;
        case O_SKUS:
            bad = parse_int(optarg, 20, 10000000, &o->skus);
            break;
        case O_COUPON:
            bad = parse_int(optarg, 0, 1000000, &o->coupon_every);
            break;
        case O_DBNAME:
            o->dbname = optarg;
            bad = !name_valid(optarg);
            break;
        case O_TEMPLATE:
            o->template_db = optarg;
            bad = !name_valid(optarg);
            break;
        case O_BROKERS:
            o->brokers = optarg;
            break;
        case O_CONSUMER:
            snprintf(o->consumer, sizeof(o->consumer), "%s", optarg);
            break;
        case O_GATE:
            snprintf(o->gate_bench, sizeof(o->gate_bench), "%s", optarg);
            break;
        case O_NO_GATE:
            o->gate_bench[0] = '\0';
            break;
        case O_PORT:
            bad = parse_int(optarg, 0, 65535, &o->metrics_port);
            break;
        case O_NO_RECONCILE:
            o->reconcile = false;
            break;
        case O_TIMEOUT:
            bad = parse_int(optarg, 10, 86400, &o->timeout_s);
            break;
        case O_KEEP:
            o->keep = true;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            return -1;
        }
        if (bad) {
            /* The option by name: argv[optind - 1] is the value itself when it
             * came as a separate argument. */
            fprintf(stderr, PROG ": bad value '%s' for --%s\n", optarg ? optarg : "",
                    li >= 0 ? longopts[li].name : "?");
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, PROG ": unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    if (access(o->consumer, X_OK) != 0) {
        fprintf(stderr, PROG ": no consumer binary at %s (build it, or use --consumer)\n",
                o->consumer);
        return -1;
    }
    return 0;
}

/* The environment the figures came from. */
static void print_header(const struct opts *o)
{
    char buf[512], load[64], pgv[128], fsync_v[16], sync_v[16], sb[32], kafka[64] = "?";
    char src[PATH_MAX], *cut;
    struct utsname u;
    FILE *f;

    printf(PROG " (ordergate %s)\n", OG_VERSION);
    snprintf(src, sizeof(src), "%s", __FILE__);
    cut = strstr(src, "/tools/bench/");
    if (cut != NULL) {
        char *const git[] = {"git", "-C", src, "describe", "--always", "--dirty", NULL};
        *cut = '\0';
        printf("source: %s at %s\n", src, run_line(git, buf, sizeof(buf)));
    }
    uname(&u);
    bench_load_average(load, sizeof(load));
    buf[0] = '\0';
    f = fopen("/proc/cpuinfo", "r");
    if (f != NULL) {
        char line[512];
        while (fgets(line, sizeof(line), f) != NULL)
            if (strncmp(line, "model name", 10) == 0 && strchr(line, ':') != NULL) {
                snprintf(buf, sizeof(buf), "%s", strchr(line, ':') + 2);
                buf[strcspn(buf, "\n")] = '\0';
                break;
            }
        fclose(f);
    }
    {
        char psi[32];
        cpu_pressure(psi, sizeof(psi));
        printf("host: nproc %ld (%s), %s %s, load average at start %s, cpu pressure (avg60) %s "
               "(a shared machine: wall-clock figures move with it)\n",
               sysconf(_SC_NPROCESSORS_ONLN), buf[0] ? buf : "?", u.sysname, u.release, load, psi);
    }
    sql_str(g.admin, "SELECT version()", pgv, sizeof(pgv));
    pgv[strcspn(pgv, ",")] = '\0';
    printf("database: %s; fsync=%s synchronous_commit=%s shared_buffers=%s\n", pgv,
           sql_str(g.admin, "SHOW fsync", fsync_v, sizeof(fsync_v)),
           sql_str(g.admin, "SHOW synchronous_commit", sync_v, sizeof(sync_v)),
           sql_str(g.admin, "SHOW shared_buffers", sb, sizeof(sb)));
    {
        const char *state = getenv("ORDERGATE_STATE_DIR");
        if (state != NULL && *state != '\0') {
            char path[PATH_MAX];
            char *text;
            snprintf(path, sizeof(path), "%s/kafka/logs/server.log", state);
            text = slurp(path);
            if (text != NULL) {
                const char *v = strstr(text, "Kafka version: ");
                if (v != NULL)
                    snprintf(kafka, sizeof(kafka), "%.*s", (int)strcspn(v + 15, " \n\r"), v + 15);
                free(text);
            }
        }
    }
    printf("kafka: broker %s at %s (single node); librdkafka %s\n", kafka, o->brokers,
           rd_kafka_version_str());
    {
        char *const argv[] = {(char *)o->consumer, "--version", NULL};
        printf("consumer: %s (%s)\n", o->consumer, run_line(argv, buf, sizeof(buf)));
    }
    snprintf(buf, sizeof(buf), "%d", o->linger_ms);
    snprintf(load, sizeof(load), "%d", o->poll_ms);
    printf("consumer config: batch_size %d, linger_ms %s, poll_ms %s, outbox relay %s, log_level "
           "%s; %d partitions per topic, producer compression %s; order shape: %d items over %d "
           "skus, a coupon on 1 in %d\n",
           o->batch_size, o->linger_ms >= 0 ? buf : "default", o->poll_ms >= 0 ? load : "default",
           o->outbox ? "on" : "off", o->log_level, o->partitions, o->compression, o->items, o->skus,
           o->coupon_every);
    fflush(stdout);
}

static const char *verdict(bool met)
{
    return met ? "met" : "NOT met";
}

static void print_summary(const struct opts *o, const struct results *r)
{
    char load[64], psi[32];

    bench_load_average(load, sizeof(load));
    cpu_pressure(psi, sizeof(psi));
    printf("\n== summary (nproc %ld, load average at the end %s, cpu pressure avg60 %s) ==\n",
           sysconf(_SC_NPROCESSORS_ONLN), load, psi);
    printf("%-58s %-28s %-16s %s\n", "figure", "value", "target", "verdict");
    if (r->e2e) {
        double ratio = r->steady_rate / r->ceiling_mean;
        char v[64];
        snprintf(v, sizeof(v), "%.0f /s", r->steady_rate);
        printf("%-58s %-28s %-16s %s\n", "e2e cancels/s, 1 consumer, first to last commit", v, "",
               "");
        snprintf(v, sizeof(v), "%.0f /s", r->wall_rate);
        printf("%-58s %-28s %-16s %s\n", "e2e cancels/s, start to done (startup, slices in)", v, "",
               "");
        snprintf(v, sizeof(v), "%.0f / %.0f /s", r->ceil[0].rate, r->ceil[1].rate);
        printf("%-58s %-28s %-16s %s\n", "gate ceiling batch, before / after (same db)", v, "", "");
        if (r->gate_bench_rate > 0) {
            snprintf(v, sizeof(v), "%.0f /s", r->gate_bench_rate);
            printf("%-58s %-28s %-16s %s\n", "og_bench_gate, same batch size (own db)", v, "", "");
        }
        snprintf(v, sizeof(v), "%.1f %%", 100 * ratio);
        printf("%-58s %-28s %-16s %s\n", "e2e / gate ceiling (mean of before and after)", v,
               r->pairs > 0 ? "" : ">= 80 %", r->pairs > 0 ? "" : verdict(ratio >= TARGET_RATIO));
        if (r->pairs > 0) {
            double pe = (double)r->pair_e2e_n / r->pair_e2e_s;
            double pg = (double)r->pair_gate_n / r->pair_gate_s;
            snprintf(v, sizeof(v), "%.0f / %.0f /s", pe, pg);
            printf("%-58s %-28s %-16s %s\n", "paired windows: consumer / gate alone", v, "", "");
            snprintf(v, sizeof(v), "%.1f %% (%d pairs)", 100 * pe / pg, r->pairs);
            printf("%-58s %-28s %-16s %s\n", "e2e / gate ceiling, paired (the target figure)", v,
                   ">= 80 %", verdict(pe / pg >= TARGET_RATIO));
        }
        if (r->e2e_violations >= 0) {
            snprintf(v, sizeof(v), "%ld", r->e2e_violations);
            printf("%-58s %-28s %-16s %s\n", "reconcile violations after e2e", v, "0",
                   verdict(r->e2e_violations == 0));
        }
    }
    if (r->lat) {
        char v[64], label[96];
        snprintf(label, sizeof(label), "lateness p50 / p99 / max at %d/s (status_log)", o->rate);
        snprintf(v, sizeof(v), "%.0f / %.0f / %.0f ms", r->lat_p50, r->lat_p99, r->lat_max);
        printf("%-58s %-28s %-16s %s\n", label, v, "p99 <= 250 ms",
               verdict(r->lat_p99 <= TARGET_P99_MS && r->lat_cancelled == r->lat_orders));
        snprintf(v, sizeof(v), "%s / %s ms", r->lat_h50, r->lat_h99);
        printf("%-58s %-28s %-16s %s\n", "lateness p50 / p99 buckets, consumer histogram", v, "",
               "");
        snprintf(v, sizeof(v), "%ld of %ld", r->lat_cancelled, r->lat_orders);
        printf("%-58s %-28s %-16s %s\n", "orders cancelled", v, "all",
               verdict(r->lat_cancelled == r->lat_orders));
        snprintf(v, sizeof(v), "%ld", r->lat_early);
        printf("%-58s %-28s %-16s %s\n", "cancelled before expire_at", v, "0",
               verdict(r->lat_early == 0));
    }
    if (r->mem) {
        char v[64], label[96];
        bool flat = r->rss_final <= r->rss_first * (1 + TARGET_RSS_FLAT);
        snprintf(label, sizeof(label), "consumer VmRSS min / max / final, %ld waiting",
                 r->mem_messages);
        snprintf(v, sizeof(v), "%.1f / %.1f / %.1f MB", r->rss_min, r->rss_max, r->rss_final);
        printf("%-58s %-28s %-16s %s\n", label, v, "<= 64 MB, flat",
               verdict(r->rss_max <= TARGET_RSS_MB && flat));
        snprintf(v, sizeof(v), "%+.1f MB over %d s", r->rss_final - r->rss_first, r->rss_samples);
        printf("%-58s %-28s %-16s %s\n", "VmRSS growth, first to final sample", v, "flat",
               verdict(flat));
        snprintf(v, sizeof(v), "%ld rows, %.0f claims", r->mem_log_rows, r->mem_claims);
        printf("%-58s %-28s %-16s %s\n", "early cancels with the backlog waiting", v, "0",
               verdict(r->mem_log_rows == 0 && r->mem_claims == 0));
    }
    fflush(stdout);
}

int main(int argc, char **argv)
{
    struct opts o;
    struct results r;
    char run[48];
    struct sigaction sa;

    if (parse_args(argc, argv, &o) != 0)
        return 2;
    memset(&r, 0, sizeof(r));
    log_init(PROG, LOG_LVL_WARN);
    g.keep = o.keep;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);

    snprintf(g.workdir, sizeof(g.workdir), "/tmp/" PROG ".XXXXXX");
    if (mkdtemp(g.workdir) == NULL) {
        fprintf(stderr, PROG ": mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    snprintf(run, sizeof(run), "%d-%lld", (int)getpid(), (long long)(clock_wall_ms() % 100000000));
    g.admin = pg_connect("dbname=postgres application_name=" PROG
                         " options='-c client_min_messages=warning'");
    print_header(&o);

    if (o.e2e)
        phase_e2e(&o, run, &r);
    if (o.lateness)
        phase_lateness(&o, run, &r);
    if (o.memory)
        phase_memory(&o, run, &r);
    print_summary(&o, &r);
    bench_cleanup(false);
    return 0;
}
