/* og_bench_consumer: the consumer under benchmark, launched: its config file and command line. */
#include <errno.h>
#include <string.h>

#include "tools/bench/consumer/bench_consumer.h"
#include "tools/bench/support/bench_run.h"

void launch_config(const struct opts *o, struct bench_prog *c, const char *tag, const char *base)
{
    FILE *f;

    snprintf(c->config, sizeof(c->config), "%s/%s.conf", g.workdir, tag);
    f = fopen(c->config, "w");
    if (f == NULL)
        bench_die("%s: %s", c->config, strerror(errno));
    fprintf(f, "# written by " PROG " for the %s phase\n", tag);
    fprintf(f, "log_level = \"%s\";\n", o->log_level);
    fprintf(f, "kafka = { dead_letter_topic = \"%s.dlq\"; };\n", base);
    fprintf(f, "consumer = { batch_size = %d;", o->batch_size);
    if (o->linger_ms >= 0)
        fprintf(f, " linger_ms = %d;", o->linger_ms);
    if (o->poll_ms >= 0)
        fprintf(f, " poll_ms = %d;", o->poll_ms);
    fprintf(f, " claim_sessions = %d;", o->claim_sessions);
    fprintf(f, " };\n");
    fprintf(f,
            "outbox = { enabled = %s; topic = \"%s.events\"; refund_topic = \"%s.refunds\"; "
            "alert_topic = \"%s.alerts\"; };\n",
            o->outbox ? "true" : "false", base, base, base);
    fclose(f);
}

void launch_consumer(const struct opts *o, struct bench_prog *c, const char *tag, const char *topic,
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
    bench_prog_start(c, "the consumer", argv);
    bench_progress("consumer pid %d: %s --topics %s --group %s --batch-size %s (log %s)",
                   (int)c->pid, o->consumer, topic, group, batch, c->log);
}
