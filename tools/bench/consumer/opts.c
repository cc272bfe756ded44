/* og_bench_consumer: the command line. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/gate.h"
#include "common/path.h"
#include "tools/bench/consumer/bench_consumer.h"
#include "tools/bench/support/bench_opt.h"
#include "tools/bench/support/bench_place.h"

/* dir of /proc/self/exe + rel, into out. */
static void beside_self(char *out, size_t size, const char *rel)
{
    char exe[PATH_MAX];

    if (path_exe_dir(exe, sizeof(exe)))
        snprintf(out, size, "%s/%s", exe, rel);
    else
        snprintf(out, size, "%s", rel);
}

/* --burst-stats: none, analyze or both, comma-separated; at least one. */
static int opt_burst_stats(void *target, const char *value)
{
    struct opts *o = target;
    char buf[64], *save = NULL;

    o->burst_plain = o->burst_analyze = false;
    snprintf(buf, sizeof(buf), "%s", value);
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (strcmp(t, "none") == 0)
            o->burst_plain = true;
        else if (strcmp(t, "analyze") == 0)
            o->burst_analyze = true;
        else if (strcmp(t, "both") == 0)
            o->burst_plain = o->burst_analyze = true;
        else
            return -1;
    }
    return !o->burst_plain && !o->burst_analyze;
}

static int opt_burst_load(void *target, const char *value)
{
    bool *place = target;

    *place = strcmp(value, "place") == 0;
    return !*place && strcmp(value, "bulk") != 0;
}

static int opt_compression(void *target, const char *value)
{
    *(const char **)target = value;
    return strspn(value, "abcdefghijklmnopqrstuvwxyz0123456789") != strlen(value);
}

static int opt_log_level(void *target, const char *value)
{
    *(const char **)target = value;
    return strcmp(value, "debug") != 0 && strcmp(value, "info") != 0 && strcmp(value, "warn") != 0;
}

static int opt_no_gate_bench(void *target, const char *value)
{
    (void)value;
    *(char *)target = '\0';
    return 0;
}

int parse_args(int argc, char **argv, struct opts *o)
{
    const struct bench_opt rows[] = {
        BENCH_WORDS("phases", "LIST", "e2e,burst,lateness,memory (default all four)",
                    ((const char *const[]){"e2e", "burst", "lateness", "memory", NULL}),
                    ((bool *const[]){&o->e2e, &o->burst, &o->lateness, &o->memory})),
        BENCH_LONG("orders", "N", "e2e: due messages in the backlog (default 1000000)", &o->orders,
                   1000, 100000000),
        BENCH_LONG("ceiling-orders", "N",
                   "e2e: orders of the gate ceiling before and after the consumer\n"
                   "(default 50000 each)",
                   &o->ceiling_orders, 1000, 10000000),
        BENCH_LONG("ceiling-par-orders", "N",
                   "burst: orders of the gate alone on as many sessions at once as\n"
                   "the consumers claim on (default: --ceiling-orders); a burst's\n"
                   "size meets the checkpoints and the tables' growth past\n"
                   "shared_buffers that a smaller one does not",
                   &o->par_orders, 1000, 100000000),
        BENCH_INT("ceiling-par-stride", "S",
                  "burst: that gate alone's batches take every Sth order of a\n"
                  "session's slice (0, S, 2S, ..., then 1, S + 1, ...), so that a\n"
                  "batch spans S times as many rows, as a consumer's batch of\n"
                  "several partitions' messages does (default 1: neighbours)",
                  &o->par_stride, 1, 1000),
        BENCH_INT("slice-seconds", "S",
                  "e2e: every S s of consumer time, freeze it (SIGSTOP) and run\n"
                  "the gate alone for a paired slice (default 10; 0 = none)",
                  &o->slice_s, 0, 3600),
        BENCH_INT("slice-ms", "MS", "e2e: length of one paired slice (default 2000)", &o->slice_ms,
                  100, 600000),
        BENCH_LONG("slice-pool", "N", "e2e: orders loaded for the paired slices (default 300000)",
                   &o->slice_pool, 1000, 100000000),
        BENCH_INT("rate", "N", "lateness: due orders per second (default 5000)", &o->rate, 1,
                  1000000),
        BENCH_INT("duration", "S", "lateness: seconds of due times (default 60)", &o->duration, 1,
                  86400),
        BENCH_INT("ahead-ms", "MS",
                  "lateness: produce each message this long before it is due (default 2000)",
                  &o->ahead_ms, 0, 600000),
        BENCH_INT("lead", "S",
                  "lateness: setup time before the first due time (default 20 + orders/7500)",
                  &o->lead_s, 1, 86400),
        BENCH_INT("round-every", "N",
                  "lateness: every Nth order's expire_at lies 0.6 ms past the\n"
                  "millisecond its message's due_at names (a producer that rounds\n"
                  "down), so a claim at due_at may come early (default 0 = none)",
                  &o->round_every, 0, 1000000),
        BENCH_LONG("waiting", "N", "memory: messages due in an hour (default 10000000)",
                   &o->waiting, 1, 1000000000),
        BENCH_LONG("waiting-db", "N",
                   "memory: of those, the first N have overdue orders in the database\n"
                   "(default 100000)",
                   &o->waiting_db, 0, 100000000),
        BENCH_LONG("waiting-due", "N",
                   "memory: also N messages due at once ahead of the backlog, with\n"
                   "overdue orders: the consumer claims them before the sampling,\n"
                   "so its claim sessions are connected and its window has been\n"
                   "used (default 0: a consumer that has never claimed)",
                   &o->waiting_due, 0, 10000000),
        BENCH_INT("rss-seconds", "S", "memory: VmRSS samples, one a second (default 60)",
                  &o->rss_seconds, 1, 86400),
        BENCH_LONG("burst-orders", "N", "burst: orders due in the same second (default 100000)",
                   &o->burst_orders, 1000, 100000000),
        BENCH_INT("consumers", "N",
                  "burst and lateness: consumer instances in one group (default 1)", &o->consumers,
                  1, 8),
        BENCH_INT("burst-skus", "N", "burst: SKUs the orders' lines use (default 50)",
                  &o->burst_skus, 20, 10000000),
        BENCH_FN("burst-stats", "LIST",
                 "burst: none (no ANALYZE after loading), analyze, or both\n"
                 "(default none,analyze: both, in that order)",
                 opt_burst_stats, o),
        BENCH_FN("burst-load", "KIND",
                 "burst: bulk (default: generate_series, as the other phases) or\n"
                 "place (a flash sale: through ordergate.place_order from\n"
                 "--burst-clients sessions, --burst-skus at most 50)",
                 opt_burst_load, &o->burst_place),
        BENCH_INT("burst-clients", "N", "burst, place: placing sessions (default 4)",
                  &o->burst_clients, 1, BENCH_PLACE_SESSIONS_MAX),
        BENCH_INT("burst-lead", "S",
                  "burst: setup start to the due second (default 30 + orders/10000,\n"
                  "with --burst-load place + orders/(250 * min(clients, 4)))",
                  &o->burst_lead_s, 5, 86400),
        BENCH_INT("partitions", "N", "partitions of every bench topic (default 8)", &o->partitions,
                  1, 1000),
        BENCH_INT("batch-size", "N", "consumer.batch_size and the ceiling's batch (default 500)",
                  &o->batch_size, 1, GATE_BATCH_MAX),
        BENCH_INT("linger-ms", "MS", "consumer.linger_ms (default: the consumer's)", &o->linger_ms,
                  0, 60000),
        BENCH_INT("poll-ms", "MS", "consumer.poll_ms (default: the consumer's)", &o->poll_ms, 1,
                  10000),
        BENCH_INT("claim-sessions", "N",
                  "consumer.claim_sessions (default 2); burst: the gate alone\n"
                  "also runs on consumers x N sessions at once",
                  &o->claim_sessions, 1, 8),
        BENCH_ON("outbox",
                 "run the consumer's outbox relay too (default off: the ceiling has none)",
                 &o->outbox),
        BENCH_FN("compression", "C", "producer compression.codec (default none)", opt_compression,
                 &o->compression),
        BENCH_FN("consumer-log-level", "L",
                 "info (default), debug (adds per-pause seek times to the\n"
                 "report) or warn; the burst phase's consumers log at debug\n"
                 "whatever this says: their batch_committed lines carry each\n"
                 "batch's claim time (claim_ms), the phase's batch figures",
                 opt_log_level, &o->log_level),
        BENCH_INT("items", "N", "order shape: lines per order (default 2)", &o->items, 1, 10),
        BENCH_INT("skus", "N", "order shape: SKUs (default 1000)", &o->skus, 20, 10000000),
        BENCH_INT("coupon-every", "N", "order shape: one order in N holds a coupon (default 3)",
                  &o->coupon_every, 0, 1000000),
        BENCH_NAME("dbname", "NAME", "database created per phase (default og_bench_consumer)",
                   &o->dbname),
        BENCH_NAME("template", "NAME",
                   "template database (default ordergate_tpl, built by\n"
                   "tests/support/db_template.sh)",
                   &o->template_db),
        BENCH_STR("peer", "PATH",
                  "lateness: also run this peer program (tools/bench/peers/) on\n"
                  "as many orders of its own (prefix r), same due times, same\n"
                  "database, and report its lateness beside the consumer's;\n"
                  "burst: the peer drains the burst instead of the consumers",
                  &o->peer),
        BENCH_STR("peer-name", "NAME",
                  "the peer's name in the \"peers:\" lines (default: the file name\n"
                  "of --peer)",
                  &o->peer_name),
        BENCH_ON("peer-only",
                 "lateness: the peer alone on its orders (prefix r), with no\n"
                 "consumer, no topic and no broker: a system's punctuality with\n"
                 "nothing else claiming (needs --peer)",
                 &o->peer_only),
        BENCH_STR("brokers", "LIST", "Kafka bootstrap (default $ORDERGATE_BROKERS)", &o->brokers),
        BENCH_PATH("consumer", "PATH",
                   "the consumer binary (default ../consumer/ordergate-consumer from\n"
                   "this program)",
                   o->consumer),
        BENCH_PATH("gate-bench", "PATH",
                   "og_bench_gate to run as a child (default: next to this program)",
                   o->gate_bench),
        BENCH_FN("no-gate-bench", NULL, "do not run og_bench_gate", opt_no_gate_bench,
                 o->gate_bench),
        BENCH_INT("metrics-port", "N", "consumer metrics port (default 0: a free one)",
                  &o->metrics_port, 0, 65535),
        BENCH_OFF("no-reconcile", "skip reconcile() after the e2e phase", &o->reconcile),
        BENCH_INT("timeout", "S", "give up on the e2e phase after S seconds (default 3600)",
                  &o->timeout_s, 10, 86400),
        BENCH_ON("keep",
                 "keep the consumer logs and configs, the topics, and the last\n"
                 "phase's database (each phase re-creates --dbname)",
                 &o->keep),
        BENCH_END,
    };
    const char *brokers = getenv("ORDERGATE_BROKERS");

    *o = (struct opts){.e2e = true,
                       .lateness = true,
                       .memory = true,
                       .burst = true,
                       .burst_orders = 100000,
                       .consumers = 1,
                       .burst_skus = 50,
                       .burst_plain = true,
                       .burst_analyze = true,
                       .burst_clients = 4,
                       .orders = 1000000,
                       .ceiling_orders = 50000,
                       .par_stride = 1,
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
                       .claim_sessions = 2,
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
    if (bench_opt_parse(PROG, NULL,
                        "Connection: libpq's environment (PGHOST, PGPORT, PGUSER: a superuser).\n",
                        rows, argc, argv) != 0)
        return -1;
    if (o->peer_only && o->peer == NULL) {
        fprintf(stderr, PROG ": --peer-only needs --peer\n");
        return -1;
    }
    if (o->peer_only && o->round_every > 0) {
        /* The rounded expire_at are the consumer's orders' (prefix l), which a peer-only run has
         * none of. */
        fprintf(stderr, PROG ": --peer-only takes no --round-every\n");
        return -1;
    }
    if (o->peer != NULL && o->peer_name == NULL)
        o->peer_name = strrchr(o->peer, '/') != NULL ? strrchr(o->peer, '/') + 1 : o->peer;
    if (o->burst_place && o->burst_skus > BURST_PLACE_SKUS) {
        fprintf(stderr,
                PROG ": --burst-load place takes --burst-skus %d at most (a flash sale's "
                     "few SKUs), not %d\n",
                BURST_PLACE_SKUS, o->burst_skus);
        return -1;
    }
    if (access(o->consumer, X_OK) != 0) {
        fprintf(stderr, PROG ": no consumer binary at %s (build it, or use --consumer)\n",
                o->consumer);
        return -1;
    }
    return 0;
}
