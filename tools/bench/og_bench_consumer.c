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
 *             percentiles), and the consumer's own lateness histogram. With
 *             --round-every N every Nth order expires 0.6 ms into the millisecond
 *             its message names (a producer that rounds due_at down). --consumers N:
 *             N members of one group. --peer: a peer queue beside the consumer on
 *             orders of its own; with --peer-only, the peer alone, no consumer.
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
 * A fourth phase, burst (tools/bench/consumer/phase_burst.c), has every order
 * due in the same second with the consumers already waiting for it, once
 * without statistics and once after ANALYZE.
 *
 * Connection parameters come from libpq's environment (PGHOST, PGPORT, PGUSER:
 * a superuser), brokers from --brokers or ORDERGATE_BROKERS. Exit status: 0 the
 * run completed (targets met or not: see the table), 1 runtime failure, 2 bad
 * usage. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/version.h"
#include "tools/bench/consumer/bench_consumer.h"
#include "tools/bench/support/bench_pg.h"
#include "tools/bench/support/bench_proc.h"
#include "tools/bench/support/bench_run.h"

struct bench_consumer_state g;

static void bench_cleanup(bool failed)
{
    bench_prog_stop_all();
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

/* What bench_die runs before the exit. */
static void bench_cleanup_failed(void)
{
    bench_cleanup(true);
}

static void print_header(const struct opts *o)
{
    char buf[512], poll[32], pgv[128], fsync_v[16], sync_v[16], sb[32], kafka[64] = "?";

    printf(PROG " (ordergate %s)\n", OG_VERSION);
    bench_print_source_host();
    bench_pg_str(g.admin, "SELECT version()", pgv, sizeof(pgv));
    pgv[strcspn(pgv, ",")] = '\0';
    printf("database: %s; fsync=%s synchronous_commit=%s shared_buffers=%s\n", pgv,
           bench_pg_str(g.admin, "SHOW fsync", fsync_v, sizeof(fsync_v)),
           bench_pg_str(g.admin, "SHOW synchronous_commit", sync_v, sizeof(sync_v)),
           bench_pg_str(g.admin, "SHOW shared_buffers", sb, sizeof(sb)));
    {
        const char *state = getenv("ORDERGATE_STATE_DIR");
        if (state != NULL && *state != '\0') {
            char path[PATH_MAX];
            char *text;
            snprintf(path, sizeof(path), "%s/kafka/logs/server.log", state);
            text = bench_slurp(path);
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
        printf("consumer: %s (%s)\n", o->consumer, bench_run_line(argv, buf, sizeof(buf)));
    }
    snprintf(buf, sizeof(buf), "%d", o->linger_ms);
    snprintf(poll, sizeof(poll), "%d", o->poll_ms);
    printf("consumer config: batch_size %d, linger_ms %s, poll_ms %s, outbox relay %s, log_level "
           "%s (burst: debug); %d partitions per topic, producer compression %s; order shape: %d "
           "items over %d skus, a coupon on 1 in %d\n",
           o->batch_size, o->linger_ms >= 0 ? buf : "default", o->poll_ms >= 0 ? poll : "default",
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
    bench_cpu_pressure(psi, sizeof(psi));
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
    if (r->burst)
        burst_summary(o, r);
    if (r->lat) {
        char v[64], label[96];
        snprintf(label, sizeof(label), "lateness p50 / p99 / max at %d/s (status_log)", o->rate);
        snprintf(v, sizeof(v), "%.0f / %.0f / %.0f ms", r->lat_p50, r->lat_p99, r->lat_max);
        printf("%-58s %-28s %-16s %s\n", label, v, "p99 <= 250 ms",
               verdict(r->lat_p99 <= TARGET_P99_MS && r->lat_cancelled == r->lat_orders));
        if (r->lat_ceiling > 0) {
            snprintf(v, sizeof(v), "%.0f /s (%d/s = %.0f %% of it)", r->lat_ceiling, o->rate,
                     100.0 * o->rate / r->lat_ceiling);
            printf("%-58s %-28s %-16s %s\n", "  gate alone right after, same db, 1 session", v, "",
                   "");
        }
        snprintf(v, sizeof(v), "%.0f ms", r->lat_max);
        printf("%-58s %-28s %-16s %s\n", "lateness max (no order waits behind others)", v,
               "<= 1000 ms", verdict(r->lat_max <= TARGET_MAX_MS));
        if (o->round_every > 0) {
            snprintf(v, sizeof(v), "%.0f ms (%ld orders)", r->lat_rounded_max, r->lat_rounded);
            printf("%-58s %-28s %-16s %s\n", "lateness max of the ms-rounded due_at", v,
                   "<= 1000 ms", verdict(r->lat_rounded_max <= TARGET_MAX_MS));
        }
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
        /* The --waiting-due orders are claimed on purpose: every claim beyond them is early. */
        snprintf(v, sizeof(v), "%ld rows, %.0f claims", r->mem_log_rows,
                 r->mem_claims - (double)r->mem_due_rows);
        printf("%-58s %-28s %-16s %s\n", "early cancels with the backlog waiting", v, "0",
               verdict(r->mem_log_rows == 0 && r->mem_claims == (double)r->mem_due_rows));
        if (r->mem_due > 0) {
            snprintf(v, sizeof(v), "%ld of %ld", r->mem_due_rows, r->mem_due);
            printf("%-58s %-28s %-16s %s\n", "due at once ahead of the backlog, cancelled", v,
                   "all", verdict(r->mem_due_rows == r->mem_due));
        }
    }
    fflush(stdout);
}

int main(int argc, char **argv)
{
    struct opts o;
    struct results r;
    char run[48];

    if (parse_args(argc, argv, &o) != 0)
        return 2;
    memset(&r, 0, sizeof(r));
    log_init(PROG, LOG_LVL_WARN);
    bench_init(PROG, bench_cleanup_failed);
    g.keep = o.keep;
    bench_signals_install();
    setvbuf(stdout, NULL, _IOLBF, 0);

    snprintf(g.workdir, sizeof(g.workdir), "/tmp/" PROG ".XXXXXX");
    if (mkdtemp(g.workdir) == NULL) {
        fprintf(stderr, PROG ": mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    snprintf(run, sizeof(run), "%d-%lld", (int)getpid(), (long long)(clock_wall_ms() % 100000000));
    g.admin = bench_pg_connect("dbname=postgres application_name=" PROG
                               " options='-c client_min_messages=warning'");
    print_header(&o);

    if (o.e2e)
        phase_e2e(&o, run, &r);
    if (o.burst)
        phase_burst(&o, run, &r);
    if (o.lateness)
        phase_lateness(&o, run, &r);
    if (o.memory)
        phase_memory(&o, run, &r);
    print_summary(&o, &r);
    bench_cleanup(false);
    return 0;
}
