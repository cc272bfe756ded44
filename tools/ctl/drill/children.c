/* The drill's child processes: K consumers (or without Kafka the scanner repeating every
 * second) while the race runs, a consumer SIGKILLed and restarted now and then, and the scanner
 * once at the end for what the lost messages left. Started, waited for and stopped through
 * common/child, each in a process group of its own, every wait bounded. Owns finding the
 * programs. It must not write their configurations (conf.c) nor decide when to kill (race.c). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/child.h"
#include "common/clock.h"
#include "common/path.h"
#include "common/signals.h"
#include "tools/ctl/drill/drill.h"

/* How long a trigger has to stop on SIGTERM at the end, and a killed one to go. */
#define DRILL_CHILDREN_STOP_MS 30000
#define DRILL_CHILDREN_KILL_MS 1000
/* The fallback sweep covers the lost share only: seconds even for a large drill. A sweep that
 * runs this long hangs. */
#define DRILL_CHILDREN_SCAN_MAX_MS (3600L * 1000)

/* In a process group of its own a child no longer gets what is sent to the drill's group (a
 * terminal's Ctrl-C, a harness killing the group): it is SIGKILLed when the drill's main
 * thread, which starts every child, ends, so that none outlives a drill killed outright. */
static const struct child_opts drill_children_opts = {.die_with_parent = true};

/* name in --bin-dir; else beside ordergatectl, or in the build tree (tools/ next to subdir/);
 * else on PATH. */
static bool drill_children_find_one(const struct drill *d, const char *name, const char *subdir,
                                    char *out, size_t size)
{
    char self[PATH_MAX];
    const char *path;

    if (d->o.bin_dir != NULL) {
        snprintf(out, size, "%s/%s", d->o.bin_dir, name);
        return access(out, X_OK) == 0;
    }
    if (path_exe_dir(self, sizeof(self))) {
        snprintf(out, size, "%s/%s", self, name);
        if (access(out, X_OK) == 0)
            return true;
        snprintf(out, size, "%s/../%s/%s", self, subdir, name);
        if (access(out, X_OK) == 0)
            return true;
    }
    path = getenv("PATH");
    while (path != NULL && *path) {
        const char *colon = strchr(path, ':');
        int len = colon ? (int)(colon - path) : (int)strlen(path);
        snprintf(out, size, "%.*s/%s", len, path, name);
        if (access(out, X_OK) == 0)
            return true;
        path = colon ? colon + 1 : NULL;
    }
    return false;
}

enum og_status drill_children_find(struct drill *d, struct og_error *err)
{
    if ((!d->o.no_kafka && !drill_children_find_one(d, "ordergate-consumer", "consumer",
                                                    d->consumer_bin, sizeof(d->consumer_bin))) ||
        !drill_children_find_one(d, "ordergate-scanner", "scanner", d->scanner_bin,
                                 sizeof(d->scanner_bin)))
        return og_error_set(err, OG_ERR_CONFIG, false,
                            "ordergate-consumer/ordergate-scanner not found beside ordergatectl "
                            "or on PATH (use --bin-dir)");
    return OG_OK;
}

static enum og_status drill_children_consumer(struct drill *d, int k, struct og_error *err)
{
    const char *args[] = {d->consumer_bin, "--config", d->conf_path[k + 1], NULL};

    d->consumers[k] = child_spawn(args, &drill_children_opts, err);
    if (d->consumers[k] < 0) {
        d->consumers[k] = 0;
        og_error_prefix(err, "consumer %d", k + 1);
        return err->status;
    }
    return OG_OK;
}

enum og_status drill_children_start(struct drill *d, struct og_error *err)
{
    if (d->o.no_kafka) {
        const char *args[] = {d->scanner_bin, "--config", d->conf_path[0], NULL};
        d->scanner_pid = child_spawn(args, &drill_children_opts, err);
        if (d->scanner_pid < 0) {
            d->scanner_pid = 0;
            og_error_prefix(err, "scanner");
            return err->status;
        }
        return OG_OK;
    }
    for (int k = 0; k < d->o.consumers; k++)
        if (drill_children_consumer(d, k, err) != OG_OK)
            return err->status;
    return OG_OK;
}

enum og_status drill_children_restart(struct drill *d, int k, struct og_error *err)
{
    if (d->consumers[k] > 0)
        child_stop(d->consumers[k], SIGKILL, CHILD_KILL_BOUND_MS, NULL);
    d->consumers[k] = 0;
    return drill_children_consumer(d, k, err);
}

void drill_children_stop(struct drill *d)
{
    for (int k = 0; k < d->o.consumers && !d->o.no_kafka; k++) {
        bool killed = false;
        if (d->consumers[k] <= 0)
            continue;
        if (child_stop(d->consumers[k], SIGTERM, DRILL_CHILDREN_STOP_MS, &killed) != 0 || killed)
            drill_report_progress(d, "consumer %d did not stop cleanly on SIGTERM", k);
        d->consumers[k] = 0;
    }
    if (d->scanner_pid > 0) {
        child_stop(d->scanner_pid, SIGTERM, DRILL_CHILDREN_STOP_MS, NULL);
        d->scanner_pid = 0;
    }
}

void drill_children_kill(struct drill *d)
{
    for (int k = 0; k < DRILL_MAX_CONSUMERS; k++)
        if (d->consumers[k] > 0) {
            child_stop(d->consumers[k], SIGKILL, DRILL_CHILDREN_KILL_MS, NULL);
            d->consumers[k] = 0;
        }
    if (d->scanner_pid > 0) {
        child_stop(d->scanner_pid, SIGKILL, DRILL_CHILDREN_KILL_MS, NULL);
        d->scanner_pid = 0;
    }
}

/* Waits in short steps so that SIGINT or SIGTERM (signals_stop) ends the wait: the sweep is
 * then stopped like the triggers. */
enum og_status drill_children_scan_once(struct drill *d, int *status, struct og_error *err)
{
    const char *args[] = {d->scanner_bin, "--config", d->conf_path[0], "--every", "0", NULL};
    int64_t deadline = clock_mono_ms() + DRILL_CHILDREN_SCAN_MAX_MS;
    pid_t pid = child_spawn(args, &drill_children_opts, err);
    int st = CHILD_RUNNING;

    if (pid < 0) {
        og_error_prefix(err, "scanner");
        return err->status;
    }
    while (st == CHILD_RUNNING && !signals_stop && clock_mono_ms() < deadline)
        st = child_wait(pid, 200, NULL);
    if (st == CHILD_RUNNING) {
        child_stop(pid, SIGTERM, DRILL_CHILDREN_STOP_MS, NULL);
        return og_error_set(
            err, signals_stop ? OG_ERR_STOPPED : OG_ERR_INTERNAL, false, "the scanner's sweep %s",
            signals_stop ? "was stopped by a signal" : "did not end within an hour");
    }
    if (st < 0)
        return og_error_set(err, OG_ERR_INTERNAL, false, "lost track of the scanner's process");
    *status = st;
    return OG_OK;
}
