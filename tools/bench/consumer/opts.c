/* og_bench_consumer: the command line (moved here unchanged). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <librdkafka/rdkafka.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
#include "tools/bench/consumer/bench_consumer.h"
#include "tools/bench/support/bench_child.h"
#include "tools/bench/support/bench_pg.h"
#include "tools/bench/support/bench_place.h"
#include "tools/bench/support/bench_proc.h"
#include "tools/bench/support/bench_prom.h"
#include "tools/bench/support/bench_run.h"

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: " PROG " [options]\n"
        "  --phases LIST        e2e,burst,lateness,memory (default all four)\n"
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
        "  --round-every N      lateness: every Nth order's expire_at lies 0.6 ms past the\n"
        "                       millisecond its message's due_at names (a producer that rounds\n"
        "                       down), so a claim at due_at may come early (default 0 = none)\n"
        "  --waiting N          memory: messages due in an hour (default 10000000)\n"
        "  --waiting-db N       memory: of those, the first N have overdue orders in the "
        "database (default 100000)\n"
        "  --rss-seconds S      memory: VmRSS samples, one a second (default 60)\n"
        "  --burst-orders N     burst: orders due in the same second (default 100000)\n"
        "  --consumers N        burst: consumer instances in one group (default 1)\n"
        "  --burst-skus N       burst: SKUs the orders' lines use (default 50)\n"
        "  --burst-stats LIST   burst: none (no ANALYZE after loading), analyze, or both\n"
        "                       (default none,analyze: both, in that order)\n"
        "  --burst-load KIND    burst: bulk (default: generate_series, as the other phases) or\n"
        "                       place (a flash sale: through ordergate.place_order from\n"
        "                       --burst-clients sessions, --burst-skus at most 50)\n"
        "  --burst-clients N    burst, place: placing sessions (default 4)\n"
        "  --burst-lead S       burst: setup start to the due second (default 30 + orders/10000,\n"
        "                       with --burst-load place + orders/(250 * min(clients, 4)))\n"
        "  --partitions N       partitions of every bench topic (default 8)\n"
        "  --batch-size N       consumer.batch_size and the ceiling's batch (default 500)\n"
        "  --linger-ms MS, --poll-ms MS   consumer settings (default: the consumer's)\n"
        "  --outbox             run the consumer's outbox relay too (default off: the "
        "ceiling has none)\n"
        "  --compression C      producer compression.codec (default none)\n"
        "  --consumer-log-level L  info (default), debug (adds per-pause seek times to the\n"
        "                       report) or warn; the burst phase's consumers log at debug\n"
        "                       whatever this says: their batch_committed lines carry each\n"
        "                       batch's claim time (claim_ms), the phase's batch figures\n"
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

int parse_args(int argc, char **argv, struct opts *o)
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
        O_ROUND,
        O_WAITING,
        O_WAITING_DB,
        O_RSS,
        O_PARTS,
        O_BURST_ORDERS,
        O_CONSUMERS,
        O_BURST_SKUS,
        O_BURST_STATS,
        O_BURST_LEAD,
        O_BURST_LOAD,
        O_BURST_CLIENTS,
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
        {"round-every", required_argument, NULL, O_ROUND},
        {"waiting", required_argument, NULL, O_WAITING},
        {"waiting-db", required_argument, NULL, O_WAITING_DB},
        {"rss-seconds", required_argument, NULL, O_RSS},
        {"partitions", required_argument, NULL, O_PARTS},
        {"burst-orders", required_argument, NULL, O_BURST_ORDERS},
        {"consumers", required_argument, NULL, O_CONSUMERS},
        {"burst-skus", required_argument, NULL, O_BURST_SKUS},
        {"burst-stats", required_argument, NULL, O_BURST_STATS},
        {"burst-lead", required_argument, NULL, O_BURST_LEAD},
        {"burst-load", required_argument, NULL, O_BURST_LOAD},
        {"burst-clients", required_argument, NULL, O_BURST_CLIENTS},
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
                       .burst = true,
                       .burst_orders = 100000,
                       .consumers = 1,
                       .burst_skus = 50,
                       .burst_plain = true,
                       .burst_analyze = true,
                       .burst_clients = 4,
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
            o->e2e = o->lateness = o->memory = o->burst = false;
            snprintf(buf, sizeof(buf), "%s", optarg);
            for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                if (strcmp(t, "e2e") == 0)
                    o->e2e = true;
                else if (strcmp(t, "lateness") == 0)
                    o->lateness = true;
                else if (strcmp(t, "memory") == 0)
                    o->memory = true;
                else if (strcmp(t, "burst") == 0)
                    o->burst = true;
                else
                    bad = 1;
            }
            bad |= !o->e2e && !o->lateness && !o->memory && !o->burst;
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
        case O_ROUND:
            bad = parse_int(optarg, 0, 1000000, &o->round_every);
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
        case O_BURST_ORDERS:
            bad = parse_long(optarg, 1000, 100000000, &o->burst_orders);
            break;
        case O_CONSUMERS:
            bad = parse_int(optarg, 1, 8, &o->consumers);
            break;
        case O_BURST_SKUS:
            bad = parse_int(optarg, 20, 10000000, &o->burst_skus);
            break;
        case O_BURST_STATS: {
            char buf[64], *save = NULL;
            o->burst_plain = o->burst_analyze = false;
            snprintf(buf, sizeof(buf), "%s", optarg);
            for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                if (strcmp(t, "none") == 0)
                    o->burst_plain = true;
                else if (strcmp(t, "analyze") == 0)
                    o->burst_analyze = true;
                else if (strcmp(t, "both") == 0)
                    o->burst_plain = o->burst_analyze = true;
                else
                    bad = 1;
            }
            bad |= !o->burst_plain && !o->burst_analyze;
            break;
        }
        case O_BURST_LEAD:
            bad = parse_int(optarg, 5, 86400, &o->burst_lead_s);
            break;
        case O_BURST_LOAD:
            o->burst_place = strcmp(optarg, "place") == 0;
            bad = !o->burst_place && strcmp(optarg, "bulk") != 0;
            break;
        case O_BURST_CLIENTS:
            bad = parse_int(optarg, 1, BENCH_PLACE_SESSIONS_MAX, &o->burst_clients);
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
            bad = !bench_name_valid(optarg);
            break;
        case O_TEMPLATE:
            o->template_db = optarg;
            bad = !bench_name_valid(optarg);
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

/* The environment the figures came from. */
