/* og_bench_consumer: CPU and memory of the consumer, its database backend and the broker. */
#include <stdlib.h>
#include <string.h>

#include "tools/bench/consumer/bench_consumer.h"
#include "tools/bench/support/bench_proc.h"

/* The Kafka broker of deploy/local/services.sh: in ORDERGATE_STATE_DIR when that is set, else in
 * the script's default state directory, .local/ at the root of the tree this driver was built
 * from; 0 when neither has a pid file. */
static pid_t broker_pid(void)
{
    const char *state = getenv("ORDERGATE_STATE_DIR");
    char path[PATH_MAX], *cut;
    FILE *f;
    int pid = 0;

    if (state != NULL && *state != '\0') {
        snprintf(path, sizeof(path), "%s/kafka/kafka.pid", state);
    } else {
        snprintf(path, sizeof(path), "%s", __FILE__);
        cut = strstr(path, "/tools/bench/");
        if (cut == NULL)
            return 0;
        snprintf(cut, sizeof(path) - (size_t)(cut - path), "/.local/kafka/kafka.pid");
    }
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

const char *cpu_str(double s, char *buf, size_t size)
{
    if (s < 0)
        snprintf(buf, size, "n/a");
    else
        snprintf(buf, size, "%.2f s", s);
    return buf;
}

const char *cpu_share_str(double s, double wall_s, char *buf, size_t size)
{
    if (s < 0)
        snprintf(buf, size, "n/a");
    else
        snprintf(buf, size, "%.2f s (%.0f %%)", s, wall_s > 0 ? 100 * s / wall_s : 0);
    return buf;
}
