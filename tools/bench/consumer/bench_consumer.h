/* og_bench_consumer's parts (see tools/bench/og_bench_consumer.c for what it
 * measures): the options, the state the cleanup undoes, the results, and the
 * functions the phases share. */
#ifndef OG_TOOLS_BENCH_CONSUMER_H
#define OG_TOOLS_BENCH_CONSUMER_H

#include <libpq-fe.h>
#include <librdkafka/rdkafka.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "tools/bench/support/bench_prog.h"
#include "tools/bench/support/bench_kafka.h"
#include "tools/bench/support/bench_prom.h"

#define PROG "og_bench_consumer"

#define TARGET_RATIO      0.80   /* end-to-end >= 80 % of the gate ceiling */
#define TARGET_P99_MS     250.0  /* lateness p99 at a steady 5,000 due orders/s */
#define TARGET_MAX_MS     1000.0 /* lateness max at that rate: no order waits behind others */
#define TARGET_RSS_MB     64.0   /* resident memory with 10M messages waiting */
#define TARGET_RSS_FLAT   0.10   /* "flat": final within 10 % of the first sample */
#define TARGET_BURST_1_N  100000 /* due at once, one consumer: drained within 5 s */
#define TARGET_BURST_1_S  5.0
#define TARGET_BURST_2_N  1000000 /* due at once, two consumers: drained within 25 s */
#define TARGET_BURST_2_S  25.0
#define TARGET_STATS      0.90 /* burst without statistics >= 90 % of the rate after ANALYZE */
#define BURST_PLACE_SKUS  50   /* burst through place_order: a flash sale's few SKUs at most */
#define LOAD_CHUNK        200000
#define METRICS_MAX_BYTES (256 * 1024)

struct opts {
    bool e2e, lateness, memory, burst;
    long orders;           /* e2e backlog */
    long ceiling_orders;   /* per ceiling measurement */
    long par_orders;       /* burst: the gate alone on N sessions; 0 = ceiling_orders */
    int par_stride;        /* burst: that gate alone's batches take every Nth order */
    int slice_s;           /* e2e: consumer seconds between paired gate slices; 0 = none */
    int slice_ms;          /* e2e: length of one paired gate slice */
    long slice_pool;       /* e2e: orders loaded for the paired slices */
    int rate;              /* lateness: due orders per second */
    int duration;          /* lateness: seconds */
    int ahead_ms;          /* lateness: a message is produced this long before it is due */
    int lead_s;            /* lateness: start to first due time; 0 = from the size */
    int round_every;       /* lateness: every Nth expire_at 0.6 ms past its due_at; 0 = none */
    const char *peer;      /* a peer queue's program: beside the consumer (lateness), instead of
                              it (burst) */
    const char *peer_name; /* its name in the "peers:" lines (default: the program's file name) */
    bool peer_only;        /* lateness: the peer alone, no consumer (and no broker) */
    long waiting;          /* memory: messages due in an hour */
    long waiting_db;       /* memory: overdue orders in the database for the first messages */
    long waiting_due;      /* memory: messages due at once, claimed before the sampling */
    int rss_seconds;
    long burst_orders;  /* burst: orders due in the same second */
    int consumers;      /* burst: consumer instances, one group */
    int burst_skus;     /* burst: SKUs of the orders (a flash sale's few) */
    int burst_lead_s;   /* burst: start of the setup to the due second; 0 = from the size */
    bool burst_plain;   /* burst: run without statistics */
    bool burst_analyze; /* burst: run after ANALYZE */
    bool burst_place;   /* burst: orders through place_order (a flash sale), not generate_series */
    int burst_clients;  /* burst, place: placing sessions */
    int partitions;
    int batch_size;
    int linger_ms, poll_ms; /* -1: the consumer's defaults */
    int claim_sessions;     /* consumer.claim_sessions of every consumer */
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
struct bench_consumer_state {
    PGconn *admin; /* dbname=postgres */
    PGconn *conn;  /* the phase's database */
    char dbname[64];
    bool db_created;
    rd_kafka_t *admin_rk;
    struct bench_topics topics; /* created by this run, deleted at its end */
    char workdir[PATH_MAX];
    bool keep;
    long dr_ok, dr_failed;
    char dr_error[256];
};
extern struct bench_consumer_state g;

struct ceiling {
    long orders;
    double seconds, rate, p50_ms, p99_ms, backend_cpu_s, wal_kb_per_order;
};

#define BURST_MAX_CONSUMERS 8

/* One burst run: every order due in the same second. */
struct burst_result {
    bool done, analyzed, placed; /* placed: the orders came through place_order */
    long orders;
    int consumers;
    double ready_s; /* every partition paused this long before the due second */
    double drain_s; /* last cancel commit (as the consumers count it) - due second */
    double first_claim_s, last_claim_s; /* status_log.created_at - due second */
    double rate;                        /* orders / drain_s */
    double p50, p99, max;               /* lateness from status_log, ms */
    double ceil_before, ceil_after;     /* one gate session, orders/s */
    double ceil_par; /* as many gate sessions as consumers at once; 0 = not run */
    int ceil_par_n;  /* how many: the consumers' claim sessions (consumers x claim_sessions) */
    /* The gate alone on those sessions: its backends' CPU and the WAL, per order (load-independent
     * beside the drain's own); -1 when not run. */
    double ceil_par_cpu_us, ceil_par_wal_kb;
    double ceil_p99_ms;
    double reltuples, stats_rows; /* orders' reltuples and pg_stats rows at the due second */
    double consumer_cpu, backend_cpu, broker_cpu, wall_s; /* due second to drained */
    double consumer_lead_cpu; /* the consumers' CPU in the 5 s before the due second */
    /* Of consumer_cpu: the consume loop's thread (and the claim threads, which share its
     * name), librdkafka's threads, the metrics HTTP thread (the phase's scrapes). */
    double consumer_loop_cpu, consumer_rdk_cpu, consumer_http_cpu;
    double broker_jit_cpu; /* of broker_cpu: the JVM's JIT compiler threads; -1 unknown */
    double consumed, deferred, dropped; /* the consumers' metrics at the end */
    double rss_max_mb; /* the largest consumer's VmRSS, sampled once a second while it drains */
    /* Each consumer's own: its VmRSS sampled as above, and its VmHWM (the peak the kernel saw
     * over its whole life, setup and window included) read before it stops. */
    double rss_each_mb[BURST_MAX_CONSUMERS], hwm_each_mb[BURST_MAX_CONSUMERS];
    double wal_kb_per_order;
    double batches, batch_mean, db_mean_ms, not_due, busy;
    double place_s, place_max_ms; /* placement through place_order, when placed */
    /* Each batch's claim call, from the consumers' batch_committed debug lines (claim_ms). */
    long claim_batches, claim_lines; /* batches that claimed; batch_committed lines in all */
    double claim_p50_ms, claim_p99_ms, claim_max_ms;
    double claim_sum_ms; /* every claim call's wall time added up: the database busy with them */
    long violations;     /* -1: not checked */
    char load[64], psi[32];
};

/* CPU seconds and peak memory while a phase runs. */
struct sampler {
    pid_t consumer, backend, broker;
    double c0, b0, k0; /* CPU seconds at the start */
    double rss_max;
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
    long lat_orders, lat_cancelled, lat_early, lat_not_due, lat_rounded;
    double lat_rounded_max; /* the ms-rounded orders' own worst lateness */
    double lat_p50, lat_p90, lat_p99, lat_p999, lat_max, lat_min;
    char lat_h50[48], lat_h99[48]; /* buckets of the consumer's histogram, ms */
    double lat_produce_rate, lat_rss_max, lat_consumer_cpu, lat_backend_cpu, lat_broker_cpu,
        lat_wall;
    int lat_exit;
    /* memory */
    bool mem;
    long mem_messages, mem_due;
    double mem_produce_rate, mem_topic_mb, mem_to_paused_s;
    double rss_first, rss_min, rss_max, rss_final, rss_hwm;
    int rss_samples;
    long mem_log_rows;   /* status_log rows of the waiting orders: early cancels */
    long mem_due_rows;   /* status_log rows of the --waiting-due orders */
    double mem_sessions; /* claim sessions connected beside the loop's, at the end */
    double mem_claims, mem_committed, mem_consumed, mem_deferred, mem_dropped, mem_paused;
    int mem_exit;
    /* lateness: the gate alone on the same database right after */
    double lat_ceiling;
    /* burst: [0] without statistics, [1] after ANALYZE */
    bool burst;
    struct burst_result burst_r[2];
};

/* tools/bench/consumer/db.c */
void db_drop(void);
void db_fresh(const struct opts *o);
void db_stock(const struct opts *o);
void db_load(const struct opts *o, const char *prefix, long n, int64_t base_ms, long per_s);
void db_settle(void);
double db_wal_lsn_bytes(void);
void db_background(double *autovacuums, double *checkpoints);
long db_count_log(const char *prefix);
pid_t db_consumer_backend(void);
void db_backend_idle(pid_t backend, struct bench_prog *c);

/* tools/bench/consumer/kafka.c */
rd_kafka_t *kafka_client(const struct opts *o, rd_kafka_type_t type, const char *const *props);
void topic_create(const struct opts *o, const char *topic, int partitions);
void topics_delete(void);
size_t msg_value(char *buf, size_t size, const char *order_no, const char *due_iso);
void msg_check(const char *order_no, int64_t due_ms);
void produce(rd_kafka_t *rk, rd_kafka_topic_t *rkt, const char *key, size_t key_len,
             const char *value, size_t len);
void producer_finish(rd_kafka_t *rk, long expected);
double produce_backlog(const struct opts *o, const char *topic, const char *prefix, long n,
                       int64_t due_ms);
double topic_disk_mb(const char *topic);

/* tools/bench/consumer/launch.c */
void launch_config(const struct opts *o, struct bench_prog *c, const char *tag, const char *base);
void launch_consumer(const struct opts *o, struct bench_prog *c, const char *tag, const char *topic,
                     const char *group);

/* tools/bench/consumer/ceiling.c */
struct db *ceiling_session(void);
void ceiling_run(const struct opts *o, struct db *db, const char *prefix, long first, long n,
                 double max_s, struct ceiling *r, bool verbose);
double gate_bench_run(const struct opts *o);
void print_seeks(const struct bench_prog *c);

/* tools/bench/consumer/sampler.c */
void sampler_start(struct sampler *s, pid_t consumer, pid_t backend);
void sampler_rss(struct sampler *s);
double cpu_since(pid_t pid, double start);
/* "1.23 s", or "n/a" for a negative figure (a process not found, such as a broker whose pid
 * file is not where broker_pid looks); returns buf. */
const char *cpu_str(double s, char *buf, size_t size);
/* "1.23 s (4 %)" of wall_s, or "n/a" as cpu_str. */
const char *cpu_share_str(double s, double wall_s, char *buf, size_t size);

/* tools/bench/consumer/phase_e2e.c */
void phase_e2e(const struct opts *o, const char *run, struct results *r);

/* tools/bench/consumer/phase_lateness.c */
void phase_lateness(const struct opts *o, const char *run, struct results *r);

/* tools/bench/consumer/phase_burst.c */
void phase_burst(const struct opts *o, const char *run, struct results *r);
/* The summary's rows for the burst phase. */
void burst_summary(const struct opts *o, const struct results *r);

/* tools/bench/consumer/phase_memory.c */
void phase_memory(const struct opts *o, const char *run, struct results *r);

/* tools/bench/consumer/peer.c */
void peer_start(struct bench_prog *p, const char *path, const char *prefix, int64_t burst_ms);
bool peer_wait(struct bench_prog *p, int timeout_s);
/* The same figures for every system: lateness, drain and what is left, of one prefix. */
PGresult *peer_query(const char *prefix);
void peer_report(const struct results *r);
void peer_line(const char *system, const char *workload, const char *prefix, double gate_alone);
/* peer_line with consumers=N at its end: how many consumers claimed (0: a peer alone). */
void peer_line_consumers(const char *system, const char *workload, const char *prefix,
                         double gate_alone, int consumers);
void peer_burst(const struct opts *o, int64_t due_ms, struct burst_result *b);

/* tools/bench/consumer/opts.c */
int parse_args(int argc, char **argv, struct opts *o);

#endif
