/* og_bench_consumer: the memory phase (what it measures: tools/bench/og_bench_consumer.c). */
#include <math.h>
#include <stdlib.h>

#include "common/clock.h"
#include "tools/bench/consumer/bench_consumer.h"
#include "tools/bench/support/bench_proc.h"
#include "tools/bench/support/bench_run.h"

/* ------------------------------------------------------------------------------------------ */
/* Phase 3: memory with a waiting backlog */

void phase_memory(const struct opts *o, const char *run, struct results *r)
{
    char topic[160], group[160], base[128], *metrics = malloc(METRICS_MAX_BYTES);
    long in_db = o->waiting_db < o->waiting ? o->waiting_db : o->waiting;
    int64_t due_ms = clock_wall_ms() + 3600 * 1000;
    struct bench_prog c;
    double t_spawn, t_paused, sum = 0;

    if (metrics == NULL)
        bench_die("out of memory");
    printf("\n== memory: %ld messages due in an hour, %d partitions ==\n", o->waiting,
           o->partitions);
    fflush(stdout);
    r->mem = true;
    r->mem_messages = o->waiting;
    r->mem_due = o->waiting_due;
    db_fresh(o);
    db_stock(o);
    /* Overdue in the database: only the message's due time holds them back. */
    db_load(o, "w", in_db, clock_wall_ms() - 3600 * 1000, 0);
    /* Due at once: the consumer's first flush claims them, which also starts its claim sessions
     * (they connect with the first flush, commit.c), so the sampling sees a consumer that has
     * claimed, not only one that has waited. */
    if (o->waiting_due > 0)
        db_load(o, "d", o->waiting_due, clock_wall_ms() - 3600 * 1000, 0);
    db_settle();
    snprintf(base, sizeof(base), "ogbench.%s.mem", run);
    /* The name carries the topic's delay level (common/delay.h): a message due within its
     * topic's level waits in Kafka, paused; one due beyond it (level + consumer.level_margin_ms)
     * would be claimed at once, and nothing would wait. */
    snprintf(topic, sizeof(topic), "%s.cancel.2h", base);
    snprintf(group, sizeof(group), "%s.group", base);
    topic_create(o, topic, o->partitions);
    if (o->waiting_due > 0)
        (void)produce_backlog(o, topic, "d", o->waiting_due, clock_wall_ms() - 1000);
    r->mem_produce_rate = produce_backlog(o, topic, "w", o->waiting, due_ms);
    r->mem_topic_mb = topic_disk_mb(topic);

    launch_config(o, &c, "memory", base);
    t_spawn = bench_mono_s();
    launch_consumer(o, &c, "memory", topic, group);
    bench_prog_port(&c);
    for (;;) {
        bench_prog_alive(&c);
        bench_check_stop();
        if (bench_metrics_get(c.port, metrics, METRICS_MAX_BYTES) &&
            bench_prom(metrics, "ordergate_consumer_paused_partitions") >= o->partitions &&
            bench_prom(metrics, "ordergate_consumer_claims_total{outcome=\"cancelled\"}") >=
                (double)o->waiting_due)
            break;
        if (bench_mono_s() - t_spawn > 120)
            bench_die("memory: the consumer did not pause all %d partitions (and cancel the %ld "
                      "due) within 120 s (log %s)",
                      o->partitions, o->waiting_due, c.log);
        bench_sleep_ms(200);
    }
    t_paused = bench_mono_s();
    r->mem_to_paused_s = t_paused - t_spawn;
    bench_progress(
        "all %d partitions assigned and paused %.1f s after the start; sampling VmRSS for "
        "%d s",
        o->partitions, r->mem_to_paused_s, o->rss_seconds);
    r->rss_min = 1e18;
    r->rss_max = 0;
    for (int i = 0; i < o->rss_seconds; i++) {
        double rss;
        bench_prog_alive(&c);
        bench_check_stop();
        rss = bench_proc_vm_mb(c.pid, "VmRSS:");
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
            bench_progress("t=%ds rss %.1f MB", i, rss);
        /* One sample per second, wherever the turn started. */
        bench_sleep_ms(1000 - (long)(fmod(bench_mono_s() - t_paused, 1.0) * 1000));
    }
    r->rss_hwm = bench_proc_vm_mb(c.pid, "VmHWM:");
    if (bench_metrics_get(c.port, metrics, METRICS_MAX_BYTES)) {
        r->mem_claims = bench_prom_sum(metrics, "ordergate_consumer_claims_total");
        r->mem_committed = bench_prom(metrics, "ordergate_consumer_messages_committed_total");
        r->mem_consumed = bench_prom_sum(metrics, "ordergate_consumer_messages_consumed_total");
        r->mem_deferred = bench_prom(metrics, "ordergate_consumer_messages_deferred_total");
        r->mem_dropped = bench_prom(metrics, "ordergate_consumer_messages_dropped_total");
        r->mem_paused = bench_prom(metrics, "ordergate_consumer_paused_partitions");
        r->mem_sessions = bench_prom(metrics, "ordergate_consumer_claim_sessions_connected");
    } else {
        r->mem_claims = r->mem_committed = -1;
    }
    r->mem_exit = bench_prog_stop(&c);
    r->mem_log_rows = db_count_log("w");
    r->mem_due_rows = db_count_log("d");
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
    printf("  due at once ahead of it: %ld messages, %ld cancelled (status_log); claim sessions "
           "connected beside the loop's: %.0f\n",
           o->waiting_due, r->mem_due_rows, r->mem_sessions);
    fflush(stdout);
    if (!g.keep) {
        db_drop();
        topics_delete();
    }
    free(metrics);
}
