/* og_bench_consumer: CPU and memory of the consumer, its database backend and the broker. */
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
#include "tools/bench/support/bench_prog.h"
#include "tools/bench/support/bench_pg.h"
#include "tools/bench/support/bench_proc.h"
#include "tools/bench/support/bench_prom.h"
#include "tools/bench/support/bench_run.h"

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

void sampler_start(struct sampler *s, pid_t consumer, pid_t backend)
{
    s->consumer = consumer;
    s->backend = backend;
    s->broker = broker_pid();
    s->c0 = bench_proc_cpu_s(consumer);
    s->b0 = bench_proc_cpu_s(backend);
    s->k0 = bench_proc_cpu_s(s->broker);
    s->rss_max = 0;
}

void sampler_rss(struct sampler *s)
{
    double rss = bench_proc_vm_mb(s->consumer, "VmRSS:");

    if (rss > s->rss_max)
        s->rss_max = rss;
}

double cpu_since(pid_t pid, double start)
{
    double now = bench_proc_cpu_s(pid);

    return start >= 0 && now >= 0 ? now - start : -1;
}
