#include "support/testutil.h"

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <librdkafka/rdkafka.h>

#include "common/kafka.h"

#include "common/clock.h"

const char *testutil_brokers(void)
{
    const char *b = getenv("ORDERGATE_BROKERS");

    if (b == NULL || *b == '\0')
        fail_msg("ORDERGATE_BROKERS is not set; start Kafka with deploy/local/services.sh up");
    return b;
}

void testutil_binary(char *buf, size_t size, const char *relpath)
{
    snprintf(buf, size, "%s/%s", OG_BINARY_DIR, relpath);
    if (access(buf, X_OK) != 0)
        fail_msg("program %s was not built", buf);
}

void testutil_unique(char *buf, size_t size, const char *prefix)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(buf, size, "%s.%d.%ld", prefix, (int)getpid(), (long)(ts.tv_nsec / 1000));
}

void testutil_sleep_ms(long ms)
{
    clock_sleep_until_flag(ms, NULL, NULL);
}

char *testutil_slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf = NULL;
    size_t used = 0, cap = 0;

    if (f == NULL)
        return NULL;
    /* Read to the end rather than trust the size: the file may still grow. */
    for (;;) {
        if (cap - used < 4096) {
            cap = cap ? cap * 2 : 8192;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
        size_t n = fread(buf + used, 1, cap - used - 1, f);
        used += n;
        if (n == 0)
            break;
    }
    fclose(f);
    buf[used] = '\0';
    return buf;
}

void testutil_topic_create(const char *brokers, const char *topic, int partitions)
{
    char errstr[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    struct og_error err = {0};
    bool created = false;
    rd_kafka_t *rk;

    if (rd_kafka_conf_set(conf, "bootstrap.servers", brokers, errstr, sizeof(errstr)) !=
        RD_KAFKA_CONF_OK)
        fail_msg("bootstrap.servers: %s", errstr);
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    if (rk == NULL)
        fail_msg("admin client: %s", errstr);
    if (kafka_topic_create(rk, topic, partitions, 1, &created, &err) != OG_OK)
        fail_msg("CreateTopics %s: %s", topic, err.msg);
    if (!kafka_topic_wait_ready(rk, topic, partitions, 10000))
        fail_msg("topic %s: partitions have no leader after 10 s", topic);
    rd_kafka_destroy(rk);
}

pid_t testutil_child_start(const char *const *argv, const struct child_opts *opts)
{
    struct child_opts o = opts != NULL ? *opts : (struct child_opts){0};
    struct og_error err = {0};
    pid_t pid;

    o.die_with_parent = true;
    pid = child_spawn(argv, &o, &err);
    if (pid < 0)
        fail_msg("cannot start %s: %s", argv[0], err.msg);
    return pid;
}

int testutil_child_wait(pid_t pid, long timeout_ms, const char *what)
{
    int st = child_wait(pid, timeout_ms, NULL);

    if (st == CHILD_RUNNING) {
        child_stop(pid, SIGKILL, 0, NULL);
        fail_msg("%s (pid %d) did not exit within %ld ms", what, (int)pid, timeout_ms);
    }
    if (st < 0)
        fail_msg("%s (pid %d): not a child of this test", what, (int)pid);
    return st;
}
