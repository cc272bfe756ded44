/* --faults PLAN: a shop's own faults, applied and cleared at their times while the drill races,
 * and what each did to lateness. The plan is a file of blocks, one per fault:
 *
 *   [db-blackhole]              the fault's name (letters, digits, '-', '_', '.')
 *   start = 20s                 after T (the instant the first orders fall due): ms, s or m
 *   duration = 30s              how long it lasts before its clear command runs
 *   apply = toxiproxy-cli ...   a shell command (/bin/sh -c) that applies it
 *   clear = toxiproxy-cli ...   a shell command that clears it
 *
 * '#' starts a comment line; blank lines are ignored. The commands inherit the drill's
 * environment, so a plan can name its proxies and brokers through variables.
 *
 * Owns the plan's parsing (every error names the file and line, and comes before the drill
 * changes anything), the thread that runs the commands at their times, and the per-fault
 * lateness of the report. Every fault applied is cleared, also when the drill is stopped or
 * fails: a shop's staging must not be left broken. It must not touch the race's state: the
 * thread only runs commands and writes the faults' own records. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/child.h"
#include "common/clock.h"
#include "common/signals.h"
#include "tools/ctl/ctl.h"
#include "tools/ctl/drill/drill.h"

/* The bound of one apply or clear command: one that runs longer is killed and counted failed. */
#define DRILL_FAULTS_CMD_MS 60000L
/* Lateness is followed for this long after a fault is cleared. */
#define DRILL_FAULTS_AFTER_MS 30000

/* "20s", "1500ms", "2m": a duration in milliseconds, at most a day; -1 when malformed. */
static int64_t drill_faults_duration(const char *s)
{
    size_t n = strspn(s, "0123456789");
    int64_t unit, v = 0;

    if (n == 0 || n > 9)
        return -1;
    if (strcmp(s + n, "ms") == 0)
        unit = 1;
    else if (strcmp(s + n, "s") == 0)
        unit = 1000;
    else if (strcmp(s + n, "m") == 0)
        unit = 60000;
    else
        return -1;
    for (size_t i = 0; i < n; i++)
        v = v * 10 + (s[i] - '0');
    v *= unit;
    return v <= INT64_C(86400000) ? v : -1;
}

static char *drill_faults_trim(char *s)
{
    char *e = s + strlen(s);

    while (*s != '\0' && isspace((unsigned char)*s))
        s++;
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

/* The fault's block is complete: every key given once. */
static enum og_status drill_faults_complete(const char *path, const struct drill_fault *f,
                                            struct og_error *err)
{
    const char *missing = f->start_ms < 0      ? "start"
                          : f->duration_ms < 0 ? "duration"
                          : f->apply == NULL   ? "apply"
                          : f->clear == NULL   ? "clear"
                                               : NULL;

    if (missing == NULL)
        return OG_OK;
    return og_error_set(err, OG_ERR_ARG, false, "--faults: %s:%d: fault \"%s\" has no %s", path,
                        f->line, f->name, missing);
}

void drill_faults_free(struct drill *d)
{
    for (int i = 0; i < d->nfaults; i++) {
        free(d->faults[i].apply);
        free(d->faults[i].clear);
    }
    free(d->faults);
    d->faults = NULL;
    d->nfaults = 0;
}

enum og_status drill_faults_load(struct drill *d, const char *path, struct og_error *err)
{
    FILE *fp = fopen(path, "r");
    char line[4096];
    int lineno = 0;
    struct drill_fault *f = NULL;
    enum og_status st = OG_OK;

    if (fp == NULL)
        return og_error_set(err, OG_ERR_ARG, false, "--faults: %s: %s", path, strerror(errno));
    d->faults = calloc(DRILL_MAX_FAULTS, sizeof(*d->faults));
    if (d->faults == NULL) {
        fclose(fp);
        return og_error_set(err, OG_ERR_NOMEM, false, "--faults: out of memory");
    }
    while (fgets(line, sizeof(line), fp) != NULL) {
        char *s, *eq, *key, *val;
        size_t len = strlen(line);

        lineno++;
        if (len == sizeof(line) - 1 && line[len - 1] != '\n') {
            st = og_error_set(err, OG_ERR_ARG, false, "--faults: %s:%d: line longer than %zu", path,
                              lineno, sizeof(line) - 2);
            goto out;
        }
        s = drill_faults_trim(line);
        if (*s == '\0' || *s == '#')
            continue;
        if (*s == '[') {
            size_t n = strlen(s);
            if (f != NULL && drill_faults_complete(path, f, err) != OG_OK) {
                st = err->status;
                goto out;
            }
            if (n < 3 || s[n - 1] != ']' || n - 2 >= sizeof(f->name) ||
                strspn(s + 1,
                       "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") !=
                    n - 2) {
                st = og_error_set(err, OG_ERR_ARG, false,
                                  "--faults: %s:%d: expected [name] (letters, digits, '-', '_', "
                                  "'.', at most %zu), got \"%.64s\"",
                                  path, lineno, sizeof(f->name) - 1, s);
                goto out;
            }
            if (d->nfaults == DRILL_MAX_FAULTS) {
                st = og_error_set(err, OG_ERR_ARG, false, "--faults: %s:%d: more than %d faults",
                                  path, lineno, DRILL_MAX_FAULTS);
                goto out;
            }
            f = &d->faults[d->nfaults++];
            memcpy(f->name, s + 1, n - 2);
            f->name[n - 2] = '\0';
            f->line = lineno;
            f->start_ms = f->duration_ms = -1;
            for (int i = 0; i < d->nfaults - 1; i++)
                if (strcmp(d->faults[i].name, f->name) == 0) {
                    st = og_error_set(err, OG_ERR_ARG, false,
                                      "--faults: %s:%d: fault \"%s\" already named on line %d",
                                      path, lineno, f->name, d->faults[i].line);
                    goto out;
                }
            continue;
        }
        if ((eq = strchr(s, '=')) == NULL || f == NULL) {
            st = og_error_set(err, OG_ERR_ARG, false,
                              f == NULL ? "--faults: %s:%d: expected [name] before any key"
                                        : "--faults: %s:%d: expected key = value",
                              path, lineno);
            goto out;
        }
        *eq = '\0';
        key = drill_faults_trim(s);
        val = drill_faults_trim(eq + 1);
        if (strcmp(key, "start") == 0 || strcmp(key, "duration") == 0) {
            int64_t *slot = key[0] == 's' ? &f->start_ms : &f->duration_ms;
            int64_t v = drill_faults_duration(val);
            if (*slot >= 0 || v < 0 || (slot == &f->duration_ms && v == 0)) {
                st = og_error_set(err, OG_ERR_ARG, false,
                                  *slot >= 0 ? "--faults: %s:%d: %s given twice"
                                             : "--faults: %s:%d: %s: expected a duration such as "
                                               "1500ms, 20s or 2m (at most a day%s), got \"%.64s\"",
                                  path, lineno, key, slot == &f->duration_ms ? ", not 0" : "", val);
                goto out;
            }
            *slot = v;
        } else if (strcmp(key, "apply") == 0 || strcmp(key, "clear") == 0) {
            char **slot = key[0] == 'a' ? &f->apply : &f->clear;
            if (*slot != NULL || *val == '\0') {
                st = og_error_set(err, OG_ERR_ARG, false,
                                  *slot != NULL ? "--faults: %s:%d: %s given twice"
                                                : "--faults: %s:%d: %s: an empty command",
                                  path, lineno, key);
                goto out;
            }
            if ((*slot = strdup(val)) == NULL) {
                st = og_error_set(err, OG_ERR_NOMEM, false, "--faults: out of memory");
                goto out;
            }
        } else {
            st = og_error_set(err, OG_ERR_ARG, false,
                              "--faults: %s:%d: unknown key \"%.32s\" (start, duration, apply, "
                              "clear)",
                              path, lineno, key);
            goto out;
        }
    }
    if (ferror(fp)) {
        st = og_error_set(err, OG_ERR_ARG, false, "--faults: %s: read error", path);
        goto out;
    }
    if (f != NULL && drill_faults_complete(path, f, err) != OG_OK) {
        st = err->status;
        goto out;
    }
    if (d->nfaults == 0)
        st = og_error_set(err, OG_ERR_ARG, false, "--faults: %s: no fault in the plan", path);
out:
    fclose(fp);
    if (st != OG_OK)
        drill_faults_free(d);
    return st;
}

int64_t drill_faults_last_end_ms(const struct drill *d)
{
    int64_t last = 0;

    for (int i = 0; i < d->nfaults; i++)
        if (d->faults[i].start_ms + d->faults[i].duration_ms > last)
            last = d->faults[i].start_ms + d->faults[i].duration_ms;
    return d->nfaults > 0 ? d->t_ms + last : 0;
}

/* Runs one command of fault f; returns its exit status (-1: it could not run or outlived its
 * bound). */
static int drill_faults_exec(const struct drill *d, const struct drill_fault *f, bool apply)
{
    const char *cmd = apply ? f->apply : f->clear;
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    struct og_error err = {0};
    int rc;

    drill_report_progress(d, "fault %s: %s", f->name, apply ? "apply" : "clear");
    /* Its output goes to stderr with the drill's progress: stdout is the report's. */
    rc = child_run(argv, &(struct child_opts){.out_fd = STDERR_FILENO}, DRILL_FAULTS_CMD_MS, &err);
    if (rc != 0)
        drill_report_finding("fault %s: its %s command %s %d%s%s", f->name,
                             apply ? "apply" : "clear", rc < 0 ? "failed:" : "exited with", rc,
                             rc < 0 ? " " : "", rc < 0 ? err.msg : "");
    return rc;
}

/* The thread: each fault applied at T + start, cleared duration later (faults may overlap),
 * until every fault is cleared or the drill asks it to stop; then whatever is applied is
 * cleared at once. */
static void *drill_faults_thread(void *arg)
{
    struct drill *d = arg;

    for (;;) {
        int64_t next = INT64_MAX;
        struct drill_fault *due = NULL;
        bool apply = false;

        for (int i = 0; i < d->nfaults; i++) {
            struct drill_fault *f = &d->faults[i];
            int64_t at = !f->applied   ? d->t_ms + f->start_ms
                         : !f->cleared ? f->applied_ms + f->duration_ms
                                       : INT64_MAX;
            if (at < next) {
                next = at;
                due = f;
                apply = !f->applied;
            }
        }
        if (due == NULL)
            break;
        if (!clock_sleep_until_flag((long)(next - clock_wall_ms()), &signals_stop, &d->faults_stop))
            break;
        if (apply) {
            due->applied_ms = clock_wall_ms();
            due->apply_status = drill_faults_exec(d, due, true);
            due->applied = 1;
        } else {
            due->clear_status = drill_faults_exec(d, due, false);
            due->cleared_ms = clock_wall_ms();
            due->cleared = 1;
        }
    }
    for (int i = 0; i < d->nfaults; i++) {
        struct drill_fault *f = &d->faults[i];
        if (f->applied && !f->cleared) {
            f->clear_status = drill_faults_exec(d, f, false);
            f->cleared_ms = clock_wall_ms();
            f->cleared = 1;
        }
    }
    d->faults_done = 1;
    return NULL;
}

enum og_status drill_faults_start(struct drill *d, struct og_error *err)
{
    if (d->nfaults == 0) {
        d->faults_done = 1;
        return OG_OK;
    }
    if (pthread_create(&d->faults_tid, NULL, drill_faults_thread, d) != 0)
        return og_error_set(err, OG_ERR_INTERNAL, false, "--faults: cannot start its thread");
    d->faults_running = 1;
    return OG_OK;
}

void drill_faults_stop(struct drill *d)
{
    if (!d->faults_running)
        return;
    d->faults_stop = 1;
    pthread_join(d->faults_tid, NULL);
    d->faults_running = 0;
}

int drill_faults_failed(const struct drill *d)
{
    int n = 0;

    for (int i = 0; i < d->nfaults; i++)
        n += (d->faults[i].applied && d->faults[i].apply_status != 0) ||
             (d->faults[i].cleared && d->faults[i].clear_status != 0);
    return n;
}

/* The lateness of the trigger's cancellations of the orders due in the 30 s before the first
 * fault (not from T: the triggers' start is not normal either): p99, at least 1 s ("normal").
 * $1 prefix, $2 source, $3 the first fault's start (epoch ms). */
static const struct db_stmt drill_faults_stmt_base = {
    "drill_faults_base",
    "SELECT greatest(1000, coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY "
    "       extract(epoch FROM s.created_at - o.expire_at) * 1000), 0)) "
    "  FROM ordergate.status_log s JOIN ordergate.orders o USING (order_no) "
    " WHERE starts_with(o.order_no, $1) AND s.source = $2 "
    "   AND o.expire_at < to_timestamp($3::float8 / 1000) "
    "   AND o.expire_at >= to_timestamp($3::float8 / 1000) - interval '30 s'",
    3};

/* One fault: the orders due while it lasted ($3..$4, epoch ms) and in the $6 ms after it: n,
 * p50, p99, max lateness; and the time after its end from which every order due in that window
 * was cancelled within $5 ms (NULL: not within the window). */
static const struct db_stmt drill_faults_stmt_window = {
    "drill_faults_window",
    "WITH c AS (SELECT extract(epoch FROM o.expire_at) * 1000 AS due, "
    "                  extract(epoch FROM s.created_at - o.expire_at) * 1000 AS late "
    "             FROM ordergate.status_log s JOIN ordergate.orders o USING (order_no) "
    "            WHERE starts_with(o.order_no, $1) AND s.source = $2), "
    "     w AS (SELECT *, due >= $3::float8 AND due < $4::float8 AS during, "
    "                  due >= $4::float8 AND due < $4::float8 + $6::float8 AS after FROM c) "
    "SELECT count(*) FILTER (WHERE during), "
    "       coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY late) FILTER (WHERE during), 0), "
    "       coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY late) FILTER (WHERE during), 0), "
    "       coalesce(max(late) FILTER (WHERE during), 0), "
    "       count(*) FILTER (WHERE after), "
    "       coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY late) FILTER (WHERE after), 0), "
    "       coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY late) FILTER (WHERE after), 0), "
    "       coalesce(max(late) FILTER (WHERE after), 0), "
    "       (SELECT min(w1.due) - $4::float8 FROM w w1 WHERE w1.after AND NOT EXISTS "
    "          (SELECT 1 FROM w w2 WHERE w2.after AND w2.due >= w1.due AND w2.late > $5::float8)) "
    "  FROM w",
    6};

json_t *drill_faults_report(const struct drill *d, struct db *db)
{
    const char *source = d->o.no_kafka ? "timeout_scanner" : "timeout_consumer";
    char first[24], base_s[32], b[24], e[24], after[16];
    PGresult *res = NULL;
    struct og_error err = {0};
    int64_t first_ms = INT64_MAX;
    double base = 1000;
    json_t *arr = json_array();

    for (int i = 0; i < d->nfaults; i++)
        if (d->faults[i].applied && d->faults[i].applied_ms < first_ms)
            first_ms = d->faults[i].applied_ms;
    if (first_ms == INT64_MAX)
        first_ms = d->t_ms;
    snprintf(first, sizeof(first), "%" PRId64, first_ms);
    if (db_call(db, &drill_faults_stmt_base, (const char *[]){d->prefix, source, first}, &res,
                &err) == OG_OK) {
        base = atof(PQgetvalue(res, 0, 0));
        PQclear(res);
    }
    snprintf(base_s, sizeof(base_s), "%.0f", base);
    snprintf(after, sizeof(after), "%d", DRILL_FAULTS_AFTER_MS);
    for (int i = 0; i < d->nfaults; i++) {
        const struct drill_fault *f = &d->faults[i];
        json_t *j =
            json_pack("{s:s,s:I,s:I,s:b,s:i,s:i}", "name", f->name, "start_ms",
                      (json_int_t)f->start_ms, "duration_ms", (json_int_t)f->duration_ms, "applied",
                      f->applied, "apply_exit", f->apply_status, "clear_exit", f->clear_status);

        if (f->applied) {
            ctl_json_set(j, "applied_at_s", json_real((double)(f->applied_ms - d->t_ms) / 1000.0));
            ctl_json_set(j, "lasted_s",
                         json_real((double)(f->cleared_ms - f->applied_ms) / 1000.0));
            snprintf(b, sizeof(b), "%" PRId64, f->applied_ms);
            snprintf(e, sizeof(e), "%" PRId64, f->cleared_ms);
            if (db_call(db, &drill_faults_stmt_window,
                        (const char *[]){d->prefix, source, b, e, base_s, after}, &res,
                        &err) == OG_OK) {
                ctl_json_set(
                    j, "due_during",
                    json_pack("{s:I,s:f,s:f,s:f}", "count", (json_int_t)atol(PQgetvalue(res, 0, 0)),
                              "p50_ms", atof(PQgetvalue(res, 0, 1)), "p99_ms",
                              atof(PQgetvalue(res, 0, 2)), "max_ms", atof(PQgetvalue(res, 0, 3))));
                ctl_json_set(
                    j, "due_after",
                    json_pack("{s:I,s:f,s:f,s:f}", "count", (json_int_t)atol(PQgetvalue(res, 0, 4)),
                              "p50_ms", atof(PQgetvalue(res, 0, 5)), "p99_ms",
                              atof(PQgetvalue(res, 0, 6)), "max_ms", atof(PQgetvalue(res, 0, 7))));
                /* An order due right at the clearing counts from it. */
                ctl_json_set(j, "normal_after_s",
                             PQgetisnull(res, 0, 8)
                                 ? json_null()
                                 : json_real(fmax(0.0, atof(PQgetvalue(res, 0, 8))) / 1000.0));
                PQclear(res);
            } else {
                drill_report_finding("fault %s: %s", f->name, err.msg);
            }
        }
        json_array_append_new(arr, j);
    }
    return json_pack("{s:s,s:f,s:i,s:o}", "plan", d->faults_path, "normal_p99_ms", base, "after_s",
                     DRILL_FAULTS_AFTER_MS / 1000, "faults", arr);
}

static double drill_faults_num(const json_t *o, const char *key)
{
    return json_number_value(json_object_get(o, key));
}

void drill_faults_text(const json_t *r, FILE *out)
{
    const json_t *f;
    size_t i;

    if (r == NULL || !json_is_object(r))
        return;
    fprintf(out,
            "  faults from %s (normal: p99 %.0f ms, the orders due in the 30 s before the first)\n",
            ctl_json_str(r, "plan"), drill_faults_num(r, "normal_p99_ms"));
    json_array_foreach(json_object_get(r, "faults"), i, f)
    {
        const json_t *dur = json_object_get(f, "due_during"),
                     *aft = json_object_get(f, "due_after");
        const json_t *normal = json_object_get(f, "normal_after_s");

        if (!json_is_true(json_object_get(f, "applied"))) {
            fprintf(out, "  fault %-16s not applied\n", ctl_json_str(f, "name"));
            continue;
        }
        fprintf(out, "  fault %-16s at T%+.1f s for %.1f s (apply exit %d, clear exit %d)\n",
                ctl_json_str(f, "name"), drill_faults_num(f, "applied_at_s"),
                drill_faults_num(f, "lasted_s"), (int)drill_faults_num(f, "apply_exit"),
                (int)drill_faults_num(f, "clear_exit"));
        if (dur == NULL || aft == NULL)
            continue;
        fprintf(out, "    due during it         n=%-6.0f p50 %.0f  p99 %.0f  max %.0f ms\n",
                drill_faults_num(dur, "count"), drill_faults_num(dur, "p50_ms"),
                drill_faults_num(dur, "p99_ms"), drill_faults_num(dur, "max_ms"));
        fprintf(out, "    due in the 30 s after n=%-6.0f p50 %.0f  p99 %.0f  max %.0f ms\n",
                drill_faults_num(aft, "count"), drill_faults_num(aft, "p50_ms"),
                drill_faults_num(aft, "p99_ms"), drill_faults_num(aft, "max_ms"));
        if (json_is_number(normal))
            fprintf(out, "    lateness normal again %.1f s after it was cleared\n",
                    json_number_value(normal));
        else
            fprintf(out, "    lateness not normal again within 30 s of its clearing (or no order "
                         "due then)\n");
    }
}
