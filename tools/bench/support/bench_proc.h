/* What the benchmark drivers read from /proc about this machine: the CPU a
 * process has used and the load average, printed beside their figures so a
 * reader can tell a slow machine from a slow program. */
#ifndef OG_TOOLS_BENCH_PROC_H
#define OG_TOOLS_BENCH_PROC_H

#include <stddef.h>
#include <sys/types.h>

/* CPU seconds (user + system, every thread) a local process has used so far,
 * from /proc/PID/stat; -1 when the process is not on this machine or /proc
 * cannot be read. */
double bench_proc_cpu_s(pid_t pid);

/* CPU seconds (user + system) of a local process's threads whose name (/proc/PID/task/TID/comm)
 * starts with prefix; -1 as bench_proc_cpu_s. A thread that ended before the call is not
 * counted: read it while the process runs. */
double bench_proc_threads_cpu_s(pid_t pid, const char *prefix);

/* "1.23 0.98 0.50" from /proc/loadavg into buf, or "?"; returns buf. */
const char *bench_load_average(char *buf, size_t size);

/* A "Vm...:" line of /proc/PID/status in MB (field e.g. "VmRSS:"); -1 if
 * unknown. */
double bench_proc_vm_mb(pid_t pid, const char *field);

/* CPU pressure (PSI "some" avg60: share of time runnable tasks waited for a
 * CPU) as "12 %" into buf, or "?" where the kernel does not report it. */
void bench_cpu_pressure(char *buf, size_t size);

/* Prints "source: DIR at <git describe>" (the source tree this driver was
 * built from) and "host: nproc, CPU model, kernel, load average, CPU
 * pressure", the lines every driver's header starts with. */
void bench_print_source_host(void);

#endif
