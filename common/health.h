/* The health file: liveness and readiness without a socket.
 *
 * The HTTP endpoint's /healthz answers only while a client can get a connection, and a port
 * anyone can reach can be filled by anyone. The health file is the channel no peer can take
 * away: the process's main loop rewrites it (health_file_write) at least every second while it
 * turns, and a probe run inside the same container or host (`ordergate-consumer --check-health`
 * or `--check-ready`, health_file_check) reads it. A loop that stops turning (a wedged call, a
 * deadlock) stops writing, and the file goes stale; a process that is gone leaves a stale file
 * or none.
 *
 * Format, one line (rewritten whole by rename, so a reader sees an old or a new line, never a
 * mix):
 *   ordergate-health v1 pid=P mono_ms=T stale_ms=S ready=0|1
 * T is CLOCK_MONOTONIC in milliseconds at the write (the same clock for every process of one
 * machine, unaffected by wall-clock steps); S is the writer's own bound: the longest gap
 * between two writes of a healthy loop. The check needs no configuration beyond the path. */
#ifndef OG_COMMON_HEALTH_H
#define OG_COMMON_HEALTH_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

/* Writes the file atomically (PATH.tmp, then rename). OG_ERR_IO when the directory is missing
 * or not writable. */
enum og_status health_file_write(const char *path, bool ready, long stale_ms, struct og_error *err);
/* Removes the file (and a leftover PATH.tmp); a missing file is fine. */
void health_file_remove(const char *path);

enum health_verdict {
    HEALTH_OK = 0,        /* live (and ready, when asked) */
    HEALTH_NOT_READY = 1, /* live, not ready (only when want_ready) */
    HEALTH_STALE = 2,     /* the last write is older than its stale_ms: the loop is stuck */
    HEALTH_MISSING = 3,   /* no file: not started yet, or stopped */
    HEALTH_BAD = 4,       /* unreadable or not a health file */
};

/* Reads the file at now_ms (clock_mono_ms()) and judges it; msg gets one line for a person
 * ("live: written 0.4 s ago, ready", "not live: written 75.2 s ago, bound 41.0 s"). */
enum health_verdict health_file_check(const char *path, bool want_ready, long long now_ms,
                                      char *msg, size_t size);

#endif
