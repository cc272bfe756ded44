#include "tools/bench/support/bench_proc.h"

#include <dirent.h>
#include <stdbool.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "tools/bench/support/bench_run.h"

/* user + system ticks from a /proc stat file; false when it cannot be read. */
static bool bench_proc_stat_ticks(const char *path, unsigned long *ticks)
{
    char line[2048];
    const char *p;
    unsigned long utime = 0, stime = 0;
    FILE *f = fopen(path, "r");

    if (f == NULL)
        return false;
    p = fgets(line, sizeof(line), f);
    fclose(f);
    /* The command name in parentheses may hold spaces: fields count from
     * the last ')'. After it: state is field 3, utime 14, stime 15. */
    if (p == NULL || (p = strrchr(line, ')')) == NULL)
        return false;
    if (sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime) != 2)
        return false;
    *ticks = utime + stime;
    return true;
}

double bench_proc_cpu_s(pid_t pid)
{
    char path[64];
    unsigned long ticks;

    if (pid <= 0)
        return -1;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if (!bench_proc_stat_ticks(path, &ticks))
        return -1;
    return (double)ticks / (double)sysconf(_SC_CLK_TCK);
}

double bench_proc_threads_cpu_s(pid_t pid, const char *prefix)
{
    char path[PATH_MAX], comm[64];
    unsigned long sum = 0;
    struct dirent *d;
    DIR *dir;

    if (pid <= 0)
        return -1;
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    dir = opendir(path);
    if (dir == NULL)
        return -1;
    while ((d = readdir(dir)) != NULL) {
        unsigned long ticks;
        FILE *f;
        bool match;

        if (d->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "/proc/%d/task/%s/comm", (int)pid, d->d_name);
        f = fopen(path, "r");
        if (f == NULL)
            continue;
        match = fgets(comm, sizeof(comm), f) != NULL && strncmp(comm, prefix, strlen(prefix)) == 0;
        fclose(f);
        snprintf(path, sizeof(path), "/proc/%d/task/%s/stat", (int)pid, d->d_name);
        if (match && bench_proc_stat_ticks(path, &ticks))
            sum += ticks;
    }
    closedir(dir);
    return (double)sum / (double)sysconf(_SC_CLK_TCK);
}

const char *bench_load_average(char *buf, size_t size)
{
    FILE *f = fopen("/proc/loadavg", "r");
    float a = 0, b = 0, c = 0;

    snprintf(buf, size, "?");
    if (f != NULL) {
        if (fscanf(f, "%f %f %f", &a, &b, &c) == 3)
            snprintf(buf, size, "%.2f %.2f %.2f", a, b, c);
        fclose(f);
    }
    return buf;
}

double bench_proc_vm_mb(pid_t pid, const char *field)
{
    char path[64], line[256];
    double mb = -1;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    f = fopen(path, "r");
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, field, strlen(field)) == 0) {
            mb = strtod(line + strlen(field), NULL) / 1024.0;
            break;
        }
    }
    fclose(f);
    return mb;
}

void bench_cpu_pressure(char *buf, size_t size)
{
    FILE *f = fopen("/proc/pressure/cpu", "r");
    double avg10 = 0, avg60 = 0;

    snprintf(buf, size, "?");
    if (f != NULL) {
        if (fscanf(f, "some avg10=%lf avg60=%lf", &avg10, &avg60) == 2)
            snprintf(buf, size, "%.0f %%", avg60);
        fclose(f);
    }
}

void bench_print_source_host(void)
{
    char buf[512], load[64], psi[32], src[PATH_MAX], *cut;
    struct utsname u;
    FILE *f;

    snprintf(src, sizeof(src), "%s", __FILE__);
    cut = strstr(src, "/tools/bench/");
    if (cut != NULL) {
        char *const git[] = {"git", "-C", src, "describe", "--always", "--dirty", NULL};
        *cut = '\0';
        printf("source: %s at %s\n", src, bench_run_line(git, buf, sizeof(buf)));
    }
    uname(&u);
    bench_load_average(load, sizeof(load));
    buf[0] = '\0';
    f = fopen("/proc/cpuinfo", "r");
    if (f != NULL) {
        char line[512];
        while (fgets(line, sizeof(line), f) != NULL)
            if (strncmp(line, "model name", 10) == 0 && strchr(line, ':') != NULL) {
                snprintf(buf, sizeof(buf), "%s", strchr(line, ':') + 2);
                buf[strcspn(buf, "\n")] = '\0';
                break;
            }
        fclose(f);
    }
    bench_cpu_pressure(psi, sizeof(psi));
    printf("host: nproc %ld (%s), %s %s, load average at start %s, cpu pressure (avg60) %s "
           "(a shared machine: wall-clock figures move with it)\n",
           sysconf(_SC_NPROCESSORS_ONLN), buf[0] ? buf : "?", u.sysname, u.release, load, psi);
}
