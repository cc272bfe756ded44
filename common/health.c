#include "common/health.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define HEALTH_MAGIC "ordergate-health v1"

enum og_status health_file_write(const char *path, bool ready, long stale_ms, struct og_error *err)
{
    char tmp[4096], line[160];
    struct timespec ts;
    int fd, n;
    ssize_t w;

    if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
        return og_error_set(err, OG_ERR_CONFIG, false, "health file path too long");
    clock_gettime(CLOCK_MONOTONIC, &ts);
    n = snprintf(line, sizeof(line), HEALTH_MAGIC " pid=%ld mono_ms=%lld stale_ms=%ld ready=%d\n",
                 (long)getpid(), (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000, stale_ms,
                 ready ? 1 : 0);
    /* O_NOFOLLOW: a link planted at the temporary name is refused, never written through. */
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return og_error_set(err, OG_ERR_IO, true, "%s: cannot write: %s", tmp, strerror(errno));
    w = write(fd, line, (size_t)n);
    if (w != n) {
        int e = w < 0 ? errno : ENOSPC;
        close(fd);
        unlink(tmp);
        return og_error_set(err, OG_ERR_IO, true, "%s: cannot write: %s", tmp, strerror(e));
    }
    /* No fsync: the file means "alive now", and a machine that crashed is not alive. */
    if (close(fd) != 0 || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return og_error_set(err, OG_ERR_IO, true, "cannot rename %s to %s: %s", tmp, path,
                            strerror(e));
    }
    return OG_OK;
}

void health_file_remove(const char *path)
{
    char tmp[4096];

    if (path == NULL || *path == '\0')
        return;
    unlink(path);
    if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) < (int)sizeof(tmp))
        unlink(tmp);
}

enum health_verdict health_file_check(const char *path, bool want_ready, long long now_ms,
                                      char *msg, size_t size)
{
    char line[256];
    long pid = 0, stale_ms = 0;
    long long mono_ms = 0, age;
    int ready = 0, fd, used = 0;
    ssize_t n;

    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        snprintf(msg, size, "not live: %s: %s", path, strerror(errno));
        return errno == ENOENT ? HEALTH_MISSING : HEALTH_BAD;
    }
    n = read(fd, line, sizeof(line) - 1);
    close(fd);
    if (n <= 0) {
        snprintf(msg, size, "not live: %s: empty or unreadable", path);
        return HEALTH_BAD;
    }
    line[n] = '\0';
    if (sscanf(line, HEALTH_MAGIC " pid=%ld mono_ms=%lld stale_ms=%ld ready=%d%n", &pid, &mono_ms,
               &stale_ms, &ready, &used) != 4 ||
        used == 0 || stale_ms <= 0 || (ready != 0 && ready != 1)) {
        snprintf(msg, size, "not live: %s is not a health file", path);
        return HEALTH_BAD;
    }
    age = now_ms - mono_ms;
    /* Monotonic time from another boot (a file that outlived its machine) can lie ahead. */
    if (age < -1000) {
        snprintf(msg, size, "not live: %s was written by another clock (%.1f s ahead)", path,
                 (double)-age / 1000.0);
        return HEALTH_BAD;
    }
    if (age < 0)
        age = 0;
    if (age > stale_ms) {
        snprintf(msg, size, "not live: pid %ld wrote %s %.1f s ago, bound %.1f s", pid, path,
                 (double)age / 1000.0, (double)stale_ms / 1000.0);
        return HEALTH_STALE;
    }
    if (want_ready && !ready) {
        snprintf(msg, size, "not ready: pid %ld, written %.1f s ago, reports not ready", pid,
                 (double)age / 1000.0);
        return HEALTH_NOT_READY;
    }
    snprintf(msg, size, "%s: pid %ld, written %.1f s ago%s", want_ready ? "ready" : "live", pid,
             (double)age / 1000.0, ready ? ", ready" : ", not ready");
    return HEALTH_OK;
}
