#include "scanner/runlog.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

static const struct db_stmt runlog_stmt_start = {
    "og_scan_run_start",
    "SELECT kind, run_id, status, started_at, progress_at, batches, cancelled, checkpoint, detail "
    "FROM ordergate.scanner_run_start(make_interval(secs => $1::int), $2::int, $3::int, $4::int, "
    "$5, $6::int, $7::bigint * interval '1 millisecond', $8)",
    8};

static const struct db_stmt runlog_stmt_progress = {
    "og_scan_run_progress",
    "SELECT ordergate.scanner_run_progress($1::bigint, $2::int, $3::bigint, $4::bigint, "
    "$5::bigint, $6::bigint, $7::bigint, $8::bigint, $9::timestamptz, $10, $11::bigint, "
    "$12::bigint)",
    12};

static const struct db_stmt runlog_stmt_finish = {
    "og_scan_run_finish",
    "SELECT status, duration_ms FROM ordergate.scanner_run_finish($1::bigint, $2, $3, $4, "
    "$5::int, $6::bigint, $7::bigint, $8::bigint, $9::bigint, $10::bigint, $11::bigint, "
    "$12::timestamptz, $13, $14::bigint, $15::bigint)",
    15};

static const struct db_stmt runlog_stmt_sweep_status = {
    "og_scan_sweep_status",
    "SELECT extract(epoch FROM last_sweep_at)::float8, age_s, holder_pid, holder_role, "
    "holder_application FROM ordergate.scanner_sweep_status()",
    0};

/* Text forms of the counters, kept alive for the duration of one call. */
struct runlog_count_text {
    char batches[16];
    char scanned[24];
    char cancelled[24];
    char already_cancelled[24];
    char already_paid[24];
    char not_due[24];
    char not_found[24];
    char busy[24];
    char hook_failed[24];
};

static void runlog_counts_format(const struct runlog_counts *c, struct runlog_count_text *t)
{
    snprintf(t->batches, sizeof(t->batches), "%d", c->batches);
    snprintf(t->scanned, sizeof(t->scanned), "%" PRId64, c->scanned);
    snprintf(t->cancelled, sizeof(t->cancelled), "%" PRId64, c->cancelled);
    snprintf(t->already_cancelled, sizeof(t->already_cancelled), "%" PRId64, c->already_cancelled);
    snprintf(t->already_paid, sizeof(t->already_paid), "%" PRId64, c->already_paid);
    snprintf(t->not_due, sizeof(t->not_due), "%" PRId64, c->not_due);
    snprintf(t->not_found, sizeof(t->not_found), "%" PRId64, c->not_found);
    snprintf(t->busy, sizeof(t->busy), "%" PRId64, c->busy);
    snprintf(t->hook_failed, sizeof(t->hook_failed), "%" PRId64, c->hook_failed);
}

static const char *runlog_value(PGresult *res, int row, int col)
{
    return PQgetisnull(res, row, col) ? NULL : PQgetvalue(res, row, col);
}

/* The run token: 32 hex digits, drawn once per run and sent with every attempt of its
 * scanner_run_start, so that an attempt repeated after a lost reply is recognised as the same
 * start and resumes the run the first attempt recorded (scanner_run_start.sql). Random, so that
 * no other run, on any host, sends the same. Without entropy at hand (getrandom() would block,
 * early at boot) it is built from the clocks and the process id instead: unique for this
 * host's runs, which is what the start needs. */
static void runlog_token(char *buf, size_t size)
{
    unsigned char r[16];
    struct timespec rt = {0}, mt = {0};

    if (getrandom(r, sizeof(r), GRND_NONBLOCK) == (ssize_t)sizeof(r)) {
        for (size_t i = 0; i < sizeof(r) && 2 * i + 2 < size; i++)
            snprintf(buf + 2 * i, size - 2 * i, "%02x", r[i]);
        return;
    }
    clock_gettime(CLOCK_REALTIME, &rt);
    clock_gettime(CLOCK_MONOTONIC, &mt);
    snprintf(buf, size, "t%" PRIx64 "x%" PRIx64 "x%x",
             (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec,
             (uint64_t)mt.tv_sec * 1000000000u + (uint64_t)mt.tv_nsec, (unsigned)getpid());
}

enum og_status runlog_start(struct db *db, const struct runlog_settings *settings,
                            struct runlog_start_result *out, struct og_error *err)
{
    char grace[16], batch[16], max_orders[16], max_seconds[16], os_pid[16], lease[24];
    char host[256] = "";
    const char *params[8];
    PGresult *res = NULL;
    enum og_status st;
    bool have_run = false;

    memset(out, 0, sizeof(*out));
    if (gethostname(host, sizeof(host) - 1) != 0)
        host[0] = '\0';
    snprintf(grace, sizeof(grace), "%d", settings->grace_s);
    snprintf(batch, sizeof(batch), "%d", settings->batch_size);
    snprintf(max_orders, sizeof(max_orders), "%d", settings->max_orders);
    snprintf(max_seconds, sizeof(max_seconds), "%d", settings->max_seconds);
    snprintf(os_pid, sizeof(os_pid), "%d", (int)getpid());
    snprintf(lease, sizeof(lease), "%ld", settings->lease_ms);
    params[0] = grace;
    params[1] = batch;
    params[2] = max_orders;
    params[3] = max_seconds;
    params[4] = host;
    params[5] = os_pid;
    params[6] = lease;
    runlog_token(out->token, sizeof(out->token));
    params[7] = out->token;

    /* db_call() repeats the start after a lost reply with the same token: the repeat resumes
     * the run the first attempt recorded instead of finding its lease held and skipping. */
    st = db_call(db, &runlog_stmt_start, params, &res, err);
    if (st != OG_OK)
        goto out;
    if (PQnfields(res) != 9) {
        st = og_error_set(err, OG_ERR_INTERNAL, false,
                          "scanner_run_start returned %d columns, expected 9", PQnfields(res));
        goto out;
    }
    for (int i = 0; i < PQntuples(res); i++) {
        const char *kind = PQgetvalue(res, i, 0);
        const char *status = PQgetvalue(res, i, 2);
        const char *detail = runlog_value(res, i, 8);

        if (strcmp(kind, "run") == 0) {
            out->run_id = strtoll(PQgetvalue(res, i, 1), NULL, 10);
            /* 'skipped', or, for a repeated start whose run another run took over meanwhile,
             * 'crashed': either way this process does not sweep. */
            out->skipped = strcmp(status, "running") != 0;
            snprintf(out->detail, sizeof(out->detail), "%s", detail ? detail : "");
            have_run = true;
        } else if (strcmp(kind, "crashed") == 0) {
            const char *cp = runlog_value(res, i, 7);
            const char *progress = runlog_value(res, i, 4);
            char q1[300], q2[120], q3[120], q4[300];

            out->crashed_found++;
            log_warn("scanner_crashed_run",
                     "run_id=%s started_at=%s last_progress_at=%s batches=%s cancelled=%s "
                     "checkpoint=%s detail=%s",
                     PQgetvalue(res, i, 1), log_quote(q2, sizeof(q2), PQgetvalue(res, i, 3)),
                     log_quote(q3, sizeof(q3), progress ? progress : "none"), PQgetvalue(res, i, 5),
                     PQgetvalue(res, i, 6), log_quote(q1, sizeof(q1), cp ? cp : "none"),
                     log_quote(q4, sizeof(q4), detail ? detail : ""));
        }
    }
    if (!have_run)
        st = og_error_set(err, OG_ERR_INTERNAL, false, "scanner_run_start returned no run row");
    else if (db_last_attempts(db) > 1)
        log_info("scanner_run_start_repeated", "run_id=%" PRId64 " attempts=%d skipped=%d token=%s",
                 out->run_id, db_last_attempts(db), out->skipped, out->token);
out:
    PQclear(res);
    return st;
}

enum og_status runlog_progress(struct db *db, int64_t run_id, const struct runlog_counts *counts,
                               const struct runlog_checkpoint *cp, bool *still_running,
                               struct og_error *err)
{
    char id[24];
    struct runlog_count_text t;
    const char *params[12];
    PGresult *res = NULL;
    enum og_status st;

    *still_running = true;
    snprintf(id, sizeof(id), "%" PRId64, run_id);
    runlog_counts_format(counts, &t);
    params[0] = id;
    params[1] = t.batches;
    params[2] = t.scanned;
    params[3] = t.cancelled;
    params[4] = t.already_cancelled;
    params[5] = t.already_paid;
    params[6] = t.not_due;
    params[7] = t.not_found;
    params[8] = cp->expire_at[0] ? cp->expire_at : NULL;
    params[9] = cp->order_no[0] ? cp->order_no : NULL;
    params[10] = t.busy;
    params[11] = t.hook_failed;
    st = db_call(db, &runlog_stmt_progress, params, &res, err);
    if (st == OG_OK && (PQnfields(res) != 1 || PQntuples(res) != 1))
        st = og_error_set(err, OG_ERR_INTERNAL, false, "scanner_run_progress: unexpected result");
    if (st == OG_OK) {
        const char *status = runlog_value(res, 0, 0);
        *still_running = status != NULL && strcmp(status, "running") == 0;
    }
    PQclear(res);
    return st;
}

enum og_status runlog_finish(struct db *db, int64_t run_id, const char *status,
                             const char *stop_reason, const char *detail,
                             const struct runlog_counts *counts, const struct runlog_checkpoint *cp,
                             int64_t *duration_ms, struct og_error *err)
{
    char id[24];
    struct runlog_count_text t;
    const char *params[15];
    PGresult *res = NULL;
    enum og_status st;

    if (duration_ms != NULL)
        *duration_ms = 0;
    snprintf(id, sizeof(id), "%" PRId64, run_id);
    runlog_counts_format(counts, &t);
    params[0] = id;
    params[1] = status;
    params[2] = stop_reason;
    params[3] = (detail != NULL && *detail) ? detail : NULL;
    params[4] = t.batches;
    params[5] = t.scanned;
    params[6] = t.cancelled;
    params[7] = t.already_cancelled;
    params[8] = t.already_paid;
    params[9] = t.not_due;
    params[10] = t.not_found;
    params[11] = cp->expire_at[0] ? cp->expire_at : NULL;
    params[12] = cp->order_no[0] ? cp->order_no : NULL;
    params[13] = t.busy;
    params[14] = t.hook_failed;
    st = db_call(db, &runlog_stmt_finish, params, &res, err);
    if (st == OG_OK && (PQnfields(res) != 2 || PQntuples(res) != 1))
        st = og_error_set(err, OG_ERR_INTERNAL, false,
                          "scanner_run_finish: run %" PRId64 " not found", run_id);
    if (st == OG_OK && duration_ms != NULL && !PQgetisnull(res, 0, 1))
        *duration_ms = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
    PQclear(res);
    return st;
}

enum og_status runlog_sweep_status(struct db *db, struct runlog_sweep_status *out,
                                   struct og_error *err)
{
    PGresult *res = NULL;
    enum og_status st;

    memset(out, 0, sizeof(*out));
    st = db_call(db, &runlog_stmt_sweep_status, NULL, &res, err);
    if (st == OG_OK && (PQnfields(res) != 5 || PQntuples(res) != 1))
        st = og_error_set(err, OG_ERR_INTERNAL, false,
                          "scanner_sweep_status returned %d columns and %d rows, expected 5 and 1",
                          PQnfields(res), PQntuples(res));
    if (st == OG_OK) {
        out->have_sweep = !PQgetisnull(res, 0, 0);
        out->last_sweep_at = out->have_sweep ? strtod(PQgetvalue(res, 0, 0), NULL) : 0;
        out->age_s = strtod(PQgetvalue(res, 0, 1), NULL);
        out->holder_pid = PQgetisnull(res, 0, 2) ? 0 : atoi(PQgetvalue(res, 0, 2));
        snprintf(out->holder_role, sizeof(out->holder_role), "%s", PQgetvalue(res, 0, 3));
        snprintf(out->holder_application, sizeof(out->holder_application), "%s",
                 PQgetvalue(res, 0, 4));
    }
    PQclear(res);
    return st;
}
