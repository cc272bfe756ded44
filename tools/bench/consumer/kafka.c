/* og_bench_consumer: Kafka: clients, topics, producing the backlogs. */
#include <dirent.h>
#include <librdkafka/rdkafka.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/clock.h"
#include "common/codec.h"
#include "common/kafka.h"
#include "tools/bench/consumer/bench_consumer.h"
#include "tools/bench/support/bench_kafka.h"
#include "tools/bench/support/bench_run.h"

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

rd_kafka_t *kafka_client(const struct opts *o, rd_kafka_type_t type, const char *const *props)
{
    return bench_kafka_client(o->brokers, PROG, type, props,
                              type == RD_KAFKA_PRODUCER ? dr_cb : NULL);
}

void topic_create(const struct opts *o, const char *topic, int partitions)
{
    if (g.admin_rk == NULL)
        g.admin_rk = kafka_client(o, RD_KAFKA_PRODUCER, NULL);
    bench_topic_create(&g.topics, g.admin_rk, topic, partitions);
}

/* Deletes every topic this run created (frees the broker's disk). */
void topics_delete(void)
{
    bench_topics_delete(&g.topics, g.admin_rk);
}

/* The message value of the contract, built without a JSON library so that
 * 10M of them cost little; msg_check() compares it with the codec's once. */
size_t msg_value(char *buf, size_t size, const char *order_no, const char *due_iso)
{
    int n =
        snprintf(buf, size, "{\"v\":1,\"order_no\":\"%s\",\"due_at\":\"%s\"}", order_no, due_iso);

    return n > 0 && (size_t)n < size ? (size_t)n : 0;
}

void msg_check(const char *order_no, int64_t due_ms)
{
    char ours[256], codec[256], iso[32];
    size_t len = 0, ours_len;
    struct og_error err = {0};

    clock_format_iso(due_ms, iso, sizeof(iso));
    ours_len = msg_value(ours, sizeof(ours), order_no, iso);
    if (codec_encode_cancel(order_no, due_ms, codec, sizeof(codec), &len, &err) != OG_OK)
        bench_die("codec_encode_cancel: %s", err.msg);
    if (len != ours_len || memcmp(ours, codec, len) != 0)
        bench_die("the message format differs from common/codec (%s vs %s): update msg_value()",
                  ours, codec);
}

void produce(rd_kafka_t *rk, rd_kafka_topic_t *rkt, const char *key, size_t key_len,
             const char *value, size_t len)
{
    while (rd_kafka_produce(rkt, RD_KAFKA_PARTITION_UA, RD_KAFKA_MSG_F_COPY, (void *)value, len,
                            key, key_len, NULL) != 0) {
        if (rd_kafka_last_error() != RD_KAFKA_RESP_ERR__QUEUE_FULL)
            bench_die("produce: %s", rd_kafka_err2str(rd_kafka_last_error()));
        rd_kafka_poll(rk, 5);
        bench_check_stop();
    }
}

void producer_finish(rd_kafka_t *rk, long expected)
{
    rd_kafka_resp_err_t err = rd_kafka_flush(rk, 300000);

    if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
        bench_die("producer flush: %s", rd_kafka_err2str(err));
    if (g.dr_failed > 0 || g.dr_ok != expected)
        bench_die("producer: %ld of %ld messages acknowledged, %ld failed (%s)", g.dr_ok, expected,
                  g.dr_failed, g.dr_error);
}

/* Produces n messages prefix<i>, all due at due_ms, at full speed. Returns
 * messages per second. */
double produce_backlog(const struct opts *o, const char *topic, const char *prefix, long n,
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
    double t0 = bench_mono_s(), next = t0 + 10, secs;

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
            if (bench_mono_s() >= next) {
                bench_progress("produced %ld of %ld messages", i, n);
                next += 10;
            }
        }
    }
    producer_finish(rk, n);
    secs = bench_mono_s() - t0;
    rd_kafka_topic_destroy(rkt);
    rd_kafka_destroy(rk);
    bench_progress("produced %ld messages to %s in %.1f s (%.0f/s, compression %s)", n, topic, secs,
                   (double)n / secs, o->compression);
    return (double)n / secs;
}

/* Megabytes the broker keeps for topic (the .log segments of its partition
 * directories), when ORDERGATE_STATE_DIR names the local broker; else -1. */
double topic_disk_mb(const char *topic)
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
