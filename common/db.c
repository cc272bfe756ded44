#include "common/db.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"

#define DB_MAX_PREPARED 64

struct db {
    char *conninfo;
    char *password;
    char *app_name;
    char *user; /* db_set_user; NULL: the conninfo's */
    struct db_retry retry;
    volatile sig_atomic_t *stop;
    PGconn *conn;
    const struct db_stmt *prepared[DB_MAX_PREPARED];
    int nprepared;
    double last_ms;
    int last_attempts; /* of the last db_call */
    struct db_session session;
    db_call_hook hook;
    void *hook_arg;
    db_connect_hook on_connect;
    void *on_connect_arg;
    db_wait_hook on_wait; /* db_set_wait_hook; NULL: db_wait_result polls without it */
    void *on_wait_arg;
    int wait_every_ms;
    const char *local_name, *local_value; /* db_set_local; NULL: none */
    const char *cur_stmt;                 /* the statement db_run is running, for db_outage_note */
    /* The wait for the reply of the call under way ends at this instant (clock_mono_us; 0: no
     * bound); no_reply: it did, and the connection is dropped as lost (db_wait_result). */
    int64_t reply_deadline_us;
    bool no_reply;
    /* A connection lost or refused, not yet reported (db_outage_note, db_outage_report). */
    struct {
        bool open;
        int64_t since_us; /* when it was first seen */
        int failures;     /* failed statements and connects since */
        char stmt[64];    /* what was running when it was seen */
        char sqlstate[6];
        char msg[256];
    } outage;
};

static char *db_strdup_or_null(const char *s)
{
    return s != NULL ? strdup(s) : NULL;
}

struct db *db_new(const char *conninfo, const char *password, const char *app_name,
                  const struct db_retry *retry, volatile sig_atomic_t *stop)
{
    struct db *db = calloc(1, sizeof(*db));

    if (db == NULL)
        return NULL;
    db->conninfo = strdup(conninfo != NULL ? conninfo : "");
    db->password = db_strdup_or_null(password);
    db->app_name = strdup(app_name != NULL ? app_name : "ordergate");
    if (db->conninfo == NULL || db->app_name == NULL || (password != NULL && !db->password)) {
        db_free(db);
        return NULL;
    }
    if (retry != NULL)
        db->retry = *retry;
    else
        db->retry = (struct db_retry){.max_attempts = 8, .base_ms = 50, .cap_ms = 5000};
    db->stop = stop;
    return db;
}

void db_free(struct db *db)
{
    if (db == NULL)
        return;
    if (db->conn != NULL)
        PQfinish(db->conn);
    free(db->conninfo);
    db_password_free(db->password);
    free(db->app_name);
    free(db->user);
    free(db);
}

enum og_status db_set_user(struct db *db, const char *user, struct og_error *err)
{
    char *copy = NULL;

    if (user != NULL && (copy = strdup(user)) == NULL)
        return og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
    free(db->user);
    db->user = copy;
    return OG_OK;
}

void db_forget_password(struct db *db)
{
    db_password_free(db->password);
    db->password = NULL;
}

enum og_status db_password_read(const char *path, char **password, struct og_error *err)
{
    enum og_status st = OG_OK;
    char *buf = NULL;
    size_t n = 0;
    FILE *f = NULL;

    *password = NULL;
    if (path == NULL || *path == '\0')
        return OG_OK;
    /* Read straight into the buffer handed out: no other copy is left to
     * wipe. Room for the longest password, a trailing "\r\n" and one byte more, which
     * tells a file too long. */
    buf = malloc(DB_PASSWORD_MAX + 4);
    f = fopen(path, "r");
    if (buf == NULL) {
        st = og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
        goto out;
    }
    if (f == NULL) {
        st = og_error_set(err, OG_ERR_CONFIG, false, "database.password_file %s: %s", path,
                          strerror(errno));
        goto out;
    }
    /* Unbuffered: stdio would keep a copy in its own buffer. */
    setvbuf(f, NULL, _IONBF, 0);
    n = fread(buf, 1, DB_PASSWORD_MAX + 3, f);
    bool more = n == DB_PASSWORD_MAX + 3 && fgetc(f) != EOF;
    buf[n] = '\0';
    /* Files written by editors or Kubernetes secrets often end in a newline. */
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        buf[--n] = '\0';
    /* Never cut: a cut password would only fail the login, far from its cause. */
    if (more || n > DB_PASSWORD_MAX) {
        db_password_wipe(buf);
        st = og_error_set(err, OG_ERR_CONFIG, false,
                          "database.password_file %s: longer than %d bytes", path, DB_PASSWORD_MAX);
        goto out;
    }
    *password = buf;
    buf = NULL;
out:
    if (f != NULL)
        fclose(f);
    free(buf); /* nothing was read into it */
    return st;
}

void db_password_wipe(char *password)
{
    if (password != NULL)
        explicit_bzero(password, strlen(password));
}

void db_password_free(char *password)
{
    db_password_wipe(password);
    free(password);
}

enum og_status db_new_passfile(const char *conninfo, const char *password_file,
                               const char *app_name, const struct db_retry *retry,
                               volatile sig_atomic_t *stop, struct db **out, struct og_error *err)
{
    char *password = NULL;
    enum og_status st = db_password_read(password_file, &password, err);

    *out = NULL;
    if (st == OG_OK) {
        *out = db_new(conninfo, password, app_name, retry, stop);
        if (*out == NULL)
            st = og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
    }
    /* db_new keeps its own copy, wiped by db_free. */
    db_password_free(password);
    return st;
}

bool db_sqlstate_retriable(const char *sqlstate)
{
    static const char *const transient[] = {
        "40001", /* serialization_failure */
        "40P01", /* deadlock_detected */
        "55P03", /* lock_not_available */
        "57P01", /* admin_shutdown */
        "57P02", /* crash_shutdown */
        "57P03", /* cannot_connect_now */
        "53300", /* too_many_connections */
        "25P03", /* idle_in_transaction_session_timeout */
    };

    if (sqlstate == NULL || *sqlstate == '\0')
        return false;
    if (strncmp(sqlstate, "08", 2) == 0) /* connection_exception class */
        return true;
    for (size_t i = 0; i < sizeof(transient) / sizeof(transient[0]); i++)
        if (strcmp(sqlstate, transient[i]) == 0)
            return true;
    return false;
}

/* SQLSTATEs that mean "the server refused a parameter value": the gate
 * functions raise 22023 for bad arguments, and a parameter that does not even
 * convert to its declared type (json, timestamptz, bigint) fails with the
 * other three before the function runs. Both are the caller's fault. Other
 * data exceptions (division by zero...) are not about the input. */
static bool db_sqlstate_bad_input(const char *sqlstate)
{
    static const char *const bad_input[] = {
        "22023", /* invalid_parameter_value */
        "22P02", /* invalid_text_representation */
        "22007", /* invalid_datetime_format */
        "22008", /* datetime_field_overflow */
    };

    if (sqlstate == NULL)
        return false;
    for (size_t i = 0; i < sizeof(bad_input) / sizeof(bad_input[0]); i++)
        if (strcmp(sqlstate, bad_input[i]) == 0)
            return true;
    return false;
}

static void db_disconnect(struct db *db)
{
    if (db->conn != NULL)
        PQfinish(db->conn);
    db->conn = NULL;
    db->nprepared = 0;
    db->no_reply = false;
}

/* The bound of the replies of one call, from now: database.statement_timeout_ms, after which the
 * server ends the statement itself, plus DB_REPLY_SLACK_MS. Keepalives and tcp_user_timeout only
 * see a peer that stops acknowledging: a server that is gone behind a proxy, a pooler or a load
 * balancer that still acknowledges (or a backend that hangs) leaves a TCP connection that is
 * healthy and silent, and without this bound the call would wait on it for ever. A session
 * without a statement timeout (--reconcile's long read, ordergatectl's own reads) waits as long
 * as the server takes. */
static void db_reply_arm(struct db *db)
{
    db->no_reply = false;
    db->reply_deadline_us =
        db->session.statement_timeout_ms > 0
            ? clock_mono_us() +
                  ((int64_t)db->session.statement_timeout_ms + DB_REPLY_SLACK_MS) * 1000
            : 0;
}

/* PQgetResult within the call's bound: NULL with db->no_reply raised when nothing complete
 * came in time (the caller then treats the connection as lost and drops it). With hook and a
 * wait hook installed (db_set_wait_hook: the bounded pipeline path only) the wait is cut into
 * slices of wait_every_ms, the hook run before each, until the hook says it is done; the bound is
 * the same. */
static PGresult *db_wait_result(struct db *db, bool hook)
{
    bool want = hook && db->on_wait != NULL;

    if (db->no_reply)
        return NULL;
    /* Everything sent first: PQgetResult would flush what a pipeline left buffered, PQisBusy
     * does not, and the server would wait on what we wait for. A failed flush is a broken
     * connection, which PQgetResult reports. */
    if (PQflush(db->conn) != 0)
        return PQgetResult(db->conn);
    while (PQisBusy(db->conn)) {
        struct pollfd p = {.fd = PQsocket(db->conn), .events = POLLIN};
        int timeout_ms = -1, n;

        if (p.fd < 0)
            break;
        if (db->reply_deadline_us > 0) {
            int64_t left = (db->reply_deadline_us - clock_mono_us() + 999) / 1000;
            if (left <= 0) {
                db->no_reply = true;
                return NULL;
            }
            timeout_ms = left < INT32_MAX ? (int)left : INT32_MAX;
        }
        if (want)
            want = db->on_wait(db->on_wait_arg);
        if (want && (timeout_ms < 0 || timeout_ms > db->wait_every_ms))
            timeout_ms = db->wait_every_ms;
        n = poll(&p, 1, timeout_ms);
        if (n < 0 && errno == EINTR)
            continue;
        /* A broken connection: PQgetResult below says so. */
        if (n < 0 || (n > 0 && PQconsumeInput(db->conn) != 1))
            break;
    }
    return PQgetResult(db->conn);
}

/* What PQexec returns (its last result, or the first error), each reply within the call's bound;
 * sent is PQsend*'s answer. NULL when nothing came in time, or nothing could be sent. */
static PGresult *db_collect(struct db *db, int sent)
{
    PGresult *keep = NULL, *x;

    if (sent != 1)
        return NULL;
    while ((x = db_wait_result(db, false)) != NULL) {
        if (keep != NULL && PQresultStatus(keep) == PGRES_FATAL_ERROR) {
            PQclear(x);
            continue;
        }
        PQclear(keep);
        keep = x;
    }
    if (db->no_reply) {
        PQclear(keep);
        return NULL;
    }
    return keep;
}

/* Remembers a lost or refused connection; the first one of an outage names it. db->cur_stmt
 * is the statement being run ("connect" outside one). */
static void db_outage_note(struct db *db, const char *sqlstate, const char *msg)
{
    if (db->outage.open) {
        db->outage.failures++;
        return;
    }
    db->outage.open = true;
    db->outage.since_us = clock_mono_us();
    db->outage.failures = 1;
    snprintf(db->outage.stmt, sizeof(db->outage.stmt), "%s",
             db->cur_stmt != NULL ? db->cur_stmt : "connect");
    snprintf(db->outage.sqlstate, sizeof(db->outage.sqlstate), "%s",
             sqlstate != NULL && *sqlstate ? sqlstate : "08006");
    snprintf(db->outage.msg, sizeof(db->outage.msg), "%s", msg != NULL ? msg : "");
    /* libpq's connection messages end in newlines and may span lines. */
    for (char *c = db->outage.msg; *c; c++)
        if (*c == '\n' || *c == '\r')
            *c = ' ';
}

/* After a statement succeeded: the outage that ended, in one line. */
static void db_outage_report(struct db *db, const char *stmt)
{
    char q[600];

    if (!db->outage.open)
        return;
    db->outage.open = false;
    log_warn("db_reconnected",
             "app=%s lost_in=%s sqlstate=%s error=%s down_ms=%.0f failed_attempts=%d "
             "answered=%s msg=\"the database connection was lost; reconnected and the "
             "statement repeated (each is one idempotent call: nothing is applied twice)\"",
             db->app_name, db->outage.stmt, db->outage.sqlstate,
             log_quote(q, sizeof(q), db->outage.msg),
             (double)(clock_mono_us() - db->outage.since_us) / 1000.0, db->outage.failures, stmt);
}

/* Fills err from a failed result or a broken connection. */
static enum og_status db_result_error(struct db *db, PGresult *res, struct og_error *err)
{
    const char *state = res != NULL ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    const char *msg = res != NULL ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    bool lost = PQstatus(db->conn) != CONNECTION_OK || db->no_reply;
    bool retriable = lost || db_sqlstate_retriable(state);
    char no_reply[160];
    enum og_status st;

    if (db->no_reply) {
        snprintf(no_reply, sizeof(no_reply),
                 "no reply from the server within %d ms (database.statement_timeout_ms + %d ms): "
                 "connection dropped",
                 db->session.statement_timeout_ms, DB_REPLY_SLACK_MS);
        msg = no_reply;
        state = NULL;
    }
    if (msg == NULL)
        msg = PQerrorMessage(db->conn);
    st = og_error_set(
        err, retriable ? OG_ERR_DB : (db_sqlstate_bad_input(state) ? OG_ERR_ARG : OG_ERR_DB),
        retriable, "%s", msg);
    if (err != NULL) {
        const char *schema = res != NULL ? PQresultErrorField(res, PG_DIAG_SCHEMA_NAME) : NULL;
        const char *table = res != NULL ? PQresultErrorField(res, PG_DIAG_TABLE_NAME) : NULL;
        snprintf(err->sqlstate, sizeof(err->sqlstate), "%s",
                 state != NULL ? state : (lost ? "08006" : ""));
        if (schema != NULL && table != NULL)
            snprintf(err->object, sizeof(err->object), "%s.%s", schema, table);
        /* Trim the newline libpq appends to connection messages. */
        size_t len = strlen(err->msg);
        while (len > 0 && err->msg[len - 1] == '\n')
            err->msg[--len] = '\0';
    }
    if (lost) {
        db_outage_note(db, err != NULL ? err->sqlstate : "08006",
                       err != NULL ? err->msg : PQerrorMessage(db->conn));
        db_disconnect(db);
    }
    return st;
}

void db_set_call_hook(struct db *db, db_call_hook fn, void *arg)
{
    db->hook = fn;
    db->hook_arg = arg;
}

enum og_status db_set_connect_hook(struct db *db, db_connect_hook fn, void *arg,
                                   struct og_error *err)
{
    db->on_connect = fn;
    db->on_connect_arg = arg;
    if (fn == NULL || db->conn == NULL || PQstatus(db->conn) != CONNECTION_OK)
        return OG_OK;
    return fn(arg, db->conn, db->session.transaction_pool, err);
}

static void db_hook(struct db *db, bool begin)
{
    if (db->hook != NULL)
        db->hook(db->hook_arg, begin);
}

enum og_status db_set_session(struct db *db, const struct db_session *session, struct og_error *err)
{
    (void)err;
    /* Nothing to send now: the bounds travel with each transaction (db_run, db_exec). */
    db->session = *session;
    return OG_OK;
}

static enum og_status db_open(struct db *db, struct og_error *err)
{
    /* The keepalive defaults come before dbname, whose conninfo libpq expands in place: a
     * value the conninfo names overrides them (libpq: the last non-empty value of a key wins).
     * application_name and connect_timeout come after it and win. */
    const char *keys[] = {"keepalives",
                          "keepalives_idle",
                          "keepalives_interval",
                          "keepalives_count",
                          "tcp_user_timeout",
                          "dbname",
                          "application_name",
                          "connect_timeout",
                          "password",
                          NULL,
                          NULL};
    const char *vals[] = {"1",
                          DB_KEEPALIVES_IDLE,
                          DB_KEEPALIVES_INTERVAL,
                          DB_KEEPALIVES_COUNT,
                          DB_TCP_USER_TIMEOUT_MS,
                          db->conninfo,
                          db->app_name,
                          "10",
                          db->password,
                          NULL,
                          NULL};
    enum og_status st = OG_OK;

    if (db->conn != NULL && PQstatus(db->conn) == CONNECTION_OK)
        return OG_OK;
    db_disconnect(db);
    /* Without a password file the password is left to libpq's own sources (PGPASSWORD,
     * .pgpass): the key list ends before it. */
    if (db->password == NULL) {
        keys[8] = NULL;
    } else if (db->user != NULL) {
        keys[9] = "user";
        vals[9] = db->user;
    }
    if (db->password == NULL && db->user != NULL) {
        keys[8] = "user";
        vals[8] = db->user;
        keys[9] = NULL;
    }
    db->conn = PQconnectdbParams(keys, vals, 1);
    if (db->conn == NULL)
        return og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
    if (PQstatus(db->conn) != CONNECTION_OK) {
        char *msg = PQerrorMessage(db->conn);
        size_t len = strlen(msg);
        while (len > 0 && (msg[len - 1] == '\n' || msg[len - 1] == ' '))
            msg[--len] = '\0';
        /* A refused or dropped connection may come back: the caller retries. */
        st = og_error_set(err, OG_ERR_DB, true, "cannot connect to PostgreSQL: %s", msg);
        if (err != NULL)
            memcpy(err->sqlstate, "08001", 6);
        db_outage_note(db, "08001", msg);
        db_disconnect(db);
        return st;
    }
    if (db->on_connect != NULL)
        st = db->on_connect(db->on_connect_arg, db->conn, db->session.transaction_pool, err);
    if (st != OG_OK)
        db_disconnect(db);
    return st;
}

void db_close(struct db *db)
{
    db_disconnect(db);
}

enum og_status db_connect(struct db *db, struct og_error *err)
{
    enum og_status st;

    db_hook(db, true);
    st = db_open(db, err);
    db_hook(db, false);
    return st;
}

static enum og_status db_prepare(struct db *db, const struct db_stmt *stmt, struct og_error *err)
{
    PGresult *res;
    enum og_status st = OG_OK;

    for (int i = 0; i < db->nprepared; i++)
        if (db->prepared[i] == stmt)
            return OG_OK;
    if (db->nprepared == DB_MAX_PREPARED)
        return og_error_set(err, OG_ERR_INTERNAL, false, "too many prepared statements");
    res = db_collect(db, PQsendPrepare(db->conn, stmt->name, stmt->sql, stmt->nparams, NULL));
    if (res == NULL || PQresultStatus(res) != PGRES_COMMAND_OK)
        st = db_result_error(db, res, err);
    else
        db->prepared[db->nprepared++] = stmt;
    PQclear(res);
    return st;
}

void db_set_local(struct db *db, const char *name, const char *value)
{
    db->local_name = name;
    db->local_value = name != NULL ? value : NULL;
}

void db_set_wait_hook(struct db *db, db_wait_hook fn, void *arg, int every_ms)
{
    db->on_wait = fn;
    db->on_wait_arg = arg;
    db->wait_every_ms = every_ms < 1 ? 1 : every_ms > 1000 ? 1000 : every_ms;
}

/* The parameters of db_sql_local_bounds: the bounds as set_config values ("5000ms"), NULL for
 * a bound left to the server, then db_set_local's name and value (NULL: none). False when
 * there is nothing to set. */
static bool db_bounds_text(const struct db *db, char lock[24], char stmt[24], const char *p[4])
{
    p[0] = p[1] = NULL;
    p[2] = db->local_name;
    p[3] = db->local_value;
    if (db->session.lock_timeout_ms > 0) {
        snprintf(lock, 24, "%dms", db->session.lock_timeout_ms);
        p[0] = lock;
    }
    if (db->session.statement_timeout_ms > 0) {
        snprintf(stmt, 24, "%dms", db->session.statement_timeout_ms);
        p[1] = stmt;
    }
    return p[0] != NULL || p[1] != NULL || p[2] != NULL;
}

/* The bounds and db_set_local's setting for the current transaction only (is_local = true). */
static const char db_sql_local_bounds[] =
    "SELECT set_config('lock_timeout', coalesce($1, current_setting('lock_timeout')), true), "
    "set_config('statement_timeout', coalesce($2, current_setting('statement_timeout')), true), "
    "CASE WHEN $3::text IS NOT NULL THEN set_config($3, $4, true) END";

/* The statement, prepared (named) or, with transaction_pool, unnamed; outside an explicit
 * transaction, in one pipeline after the bounds (no Sync between them: one implicit
 * transaction, so the bounds end with it and nothing is left in the session, whichever server
 * connection a pooler lends, whatever database.pool_mode says). Returns the statement's
 * result, or the first error (NULL when the connection broke before any result). *reset: the
 * connection was left in a state the next call cannot use (still in pipeline mode): the
 * caller drops it. */
static PGresult *db_run_bounded(struct db *db, const struct db_stmt *stmt,
                                const char *const *params, bool *reset)
{
    bool named = !db->session.transaction_pool;
    char lock[24], stm[24];
    const char *bp[4];
    PGresult *keep = NULL, *x;
    int stage = 0; /* 0: the bounds' results, 1: the statement's, 2: the Sync */

    if (PQtransactionStatus(db->conn) != PQTRANS_IDLE || !db_bounds_text(db, lock, stm, bp))
        return db_collect(db, named ? PQsendQueryPrepared(db->conn, stmt->name, stmt->nparams,
                                                          params, NULL, NULL, 0)
                                    : PQsendQueryParams(db->conn, stmt->sql, stmt->nparams, NULL,
                                                        params, NULL, NULL, 0));
    if (PQenterPipelineMode(db->conn) != 1)
        return NULL;
    if (PQsendQueryParams(db->conn, db_sql_local_bounds, 4, NULL, bp, NULL, NULL, 0) != 1 ||
        (named ? PQsendQueryPrepared(db->conn, stmt->name, stmt->nparams, params, NULL, NULL, 0)
               : PQsendQueryParams(db->conn, stmt->sql, stmt->nparams, NULL, params, NULL, NULL,
                                   0)) != 1 ||
        PQpipelineSync(db->conn) != 1) {
        *reset = PQexitPipelineMode(db->conn) != 1;
        return NULL;
    }
    while (stage <= 2) {
        x = db_wait_result(db, true);
        if (x == NULL && db->no_reply) {
            /* Silent past the bound: the pipeline is abandoned with the connection. */
            PQclear(keep);
            *reset = true;
            return NULL;
        }
        if (x == NULL) {
            /* NULL ends one query's results; a broken connection gives nothing more. */
            if (PQstatus(db->conn) != CONNECTION_OK || stage == 2)
                break;
            stage++;
            continue;
        }
        ExecStatusType rs = PQresultStatus(x);
        if (rs == PGRES_PIPELINE_SYNC) {
            PQclear(x);
            break;
        }
        /* The first error wins (the statement is then PIPELINE_ABORTED); else the
         * statement's own result. */
        bool failed = rs != PGRES_TUPLES_OK && rs != PGRES_COMMAND_OK;
        if (keep == NULL && (failed || stage == 1) && rs != PGRES_PIPELINE_ABORTED)
            keep = x;
        else
            PQclear(x);
    }
    if (PQstatus(db->conn) == CONNECTION_OK)
        *reset = PQexitPipelineMode(db->conn) != 1;
    return keep;
}

/* A named statement missing on the server, or one already there that this connection never
 * prepared: the session changed under us, which only a transaction pooler does. */
static enum og_status db_pooler_error(const struct db_stmt *stmt, PGresult *r, struct og_error *err)
{
    const char *state = r != NULL ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    enum og_status st;

    if (state == NULL || (strcmp(state, "26000") != 0 && strcmp(state, "42P05") != 0))
        return OG_OK;
    st = og_error_set(err, OG_ERR_CONFIG, false,
                      "database.pool_mode: prepared statement %s %s on the server (%s): the "
                      "connection goes through a transaction-pooling PgBouncer; set "
                      "database.pool_mode = \"transaction\" (--pool-mode transaction)",
                      stmt->name, strcmp(state, "26000") == 0 ? "missing" : "already present",
                      state);
    if (err != NULL) {
        snprintf(err->sqlstate, sizeof(err->sqlstate), "%s", state);
        og_error_setting(err, "database.pool_mode");
    }
    return st;
}

enum og_status db_run(struct db *db, const struct db_stmt *stmt, const char *const *params,
                      PGresult **res, struct og_error *err)
{
    PGresult *r = NULL;
    enum og_status st;
    ExecStatusType rs;
    bool reset = false;
    int64_t t0;

    if (res != NULL)
        *res = NULL;
    db_hook(db, true);
    db->cur_stmt = stmt->name;
    st = db_open(db, err);
    db_reply_arm(db);
    if (st == OG_OK && !db->session.transaction_pool) {
        st = db_prepare(db, stmt, err);
        if (st != OG_OK && err != NULL && (strcmp(err->sqlstate, "42P05") == 0)) {
            db->nprepared = 0;
            st = og_error_set(err, OG_ERR_CONFIG, false,
                              "database.pool_mode: prepared statement %s already present on the "
                              "server (42P05): the connection goes through a transaction-pooling "
                              "PgBouncer; set database.pool_mode = \"transaction\" "
                              "(--pool-mode transaction)",
                              stmt->name);
            og_error_setting(err, "database.pool_mode");
        }
    }
    if (st != OG_OK)
        goto out;
    t0 = clock_mono_us();
    r = db_run_bounded(db, stmt, params, &reset);
    db->last_ms = (double)(clock_mono_us() - t0) / 1000.0;
    rs = r != NULL ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    if (rs != PGRES_TUPLES_OK && rs != PGRES_COMMAND_OK) {
        if (!db->session.transaction_pool && db_pooler_error(stmt, r, err) != OG_OK) {
            /* Prepared again on the next call, wherever it lands. */
            db->nprepared = 0;
            st = err != NULL ? err->status : OG_ERR_CONFIG;
        } else {
            st = db_result_error(db, r, err);
        }
        PQclear(r);
        if (reset)
            db_disconnect(db);
        goto out;
    }
    if (reset)
        db_disconnect(db); /* the result stands; the connection does not */
    db_outage_report(db, stmt->name);
    if (res != NULL)
        *res = r;
    else
        PQclear(r);
out:
    db->cur_stmt = NULL;
    db_hook(db, false);
    return st;
}

enum og_status db_exec(struct db *db, const char *sql, struct og_error *err)
{
    PGresult *r;
    enum og_status st = OG_OK;

    db_hook(db, true);
    db->cur_stmt = "db_exec";
    st = db_open(db, err);
    if (st != OG_OK)
        goto out;
    bool was_idle = PQtransactionStatus(db->conn) == PQTRANS_IDLE;
    db_reply_arm(db);
    r = db_collect(db, PQsendQuery(db->conn, sql));
    if (r == NULL ||
        (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK))
        st = db_result_error(db, r, err);
    PQclear(r);
    /* A transaction just opened gets the bounds for its duration, and only it. */
    char lock[24], stm[24];
    const char *bp[4];
    if (st == OG_OK && was_idle && PQtransactionStatus(db->conn) == PQTRANS_INTRANS &&
        db_bounds_text(db, lock, stm, bp)) {
        r = db_collect(
            db, PQsendQueryParams(db->conn, db_sql_local_bounds, 4, NULL, bp, NULL, NULL, 0));
        if (r == NULL || PQresultStatus(r) != PGRES_TUPLES_OK)
            st = db_result_error(db, r, err);
        PQclear(r);
    }
    if (st == OG_OK)
        db_outage_report(db, "db_exec");
out:
    db->cur_stmt = NULL;
    db_hook(db, false);
    return st;
}

void db_backoff(const struct db_retry *retry, int attempt, volatile sig_atomic_t *stop)
{
    /* Jitter keeps several consumers from retrying in lockstep. */
    long ms = clock_jitter_ms(clock_backoff_ms(retry->base_ms, retry->cap_ms, attempt),
                              (unsigned long)rand());

    clock_sleep_until_flag(ms, stop, NULL);
}

enum og_status db_call(struct db *db, const struct db_stmt *stmt, const char *const *params,
                       PGresult **res, struct og_error *err)
{
    enum og_status st = OG_OK;
    struct og_error local;

    /* Retriability is read from the error record: a caller that passes no
     * record still gets the retry policy. */
    if (err == NULL)
        err = &local;
    /* At least one attempt, whatever the configuration says: a zero bound
     * must not turn into "OG_OK without running the statement". */
    int max_attempts = db->retry.max_attempts > 0 ? db->retry.max_attempts : 1;
    for (int attempt = 0; attempt < max_attempts; attempt++) {
        char q[600];

        db->last_attempts = attempt + 1;
        st = db_run(db, stmt, params, res, err);
        if (st == OG_OK || !err->retriable)
            return st;
        if (attempt + 1 == max_attempts) {
            log_warn("db_retry_exhausted", "stmt=%s attempts=%d sqlstate=%s error=%s", stmt->name,
                     max_attempts, err->sqlstate, log_quote(q, sizeof(q), err->msg));
            break;
        }
        log_warn("db_retry", "stmt=%s attempt=%d sqlstate=%s error=%s", stmt->name, attempt + 1,
                 err->sqlstate, log_quote(q, sizeof(q), err->msg));
        if (db->stop != NULL && *db->stop)
            return og_error_set(err, OG_ERR_STOPPED, true, "stopped while retrying %s", stmt->name);
        db_backoff(&db->retry, attempt, db->stop);
    }
    return st;
}

int db_last_attempts(const struct db *db)
{
    return db->last_attempts;
}

double db_last_ms(const struct db *db)
{
    return db->last_ms;
}

PGconn *db_conn(struct db *db)
{
    return db->conn;
}
