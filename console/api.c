/* One request of the console (console.h): the static pages, login and logout, and the JSON API.
 * Every API call runs one console function (schema/functions/console/) on the session's own
 * database connection, as the person's login, with values only as parameters; the answer is the
 * function's JSON as it is. What a role may not execute the database refuses (42501: 403 here);
 * what a request gets wrong is a 400 before anything is sent, or the function's 22023 (400),
 * and changes nothing. Writes need the session's CSRF token (X-CSRF-Token) and a JSON body;
 * each is logged (event console_action) with the login as actor, and the function records it
 * in ordergate.console_audit in the same transaction. */
#include <inttypes.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "common/parse.h"
#include "console/console.h"

#define API_BODY_MAX     65536
#define API_LOCK_WAIT_S  10 /* a session's requests queue for its connection this long */
#define API_PAGE_DEFAULT 50
#define API_RESOLVE_MAX  500
#define API_TEXT_MAX     2000
#define API_ORDER_NO_MAX 64
#define API_APP_NAME     "ordergate-console"

static const struct db_stmt api_stmt_whoami = {"console_whoami",
                                               "SELECT ordergate.console_whoami()::text", 0};
static const struct db_stmt api_stmt_overview = {"console_overview",
                                                 "SELECT ordergate.console_overview()::text", 0};
static const struct db_stmt api_stmt_exceptions = {
    "console_exceptions",
    "SELECT json_build_object('items', coalesce(json_agg(x), '[]'))::text FROM "
    "ordergate.console_exceptions($1, $2, $3::bigint, $4::bigint, $5, $6::timestamptz, "
    "$7::bigint, $8::int) x",
    8};
static const struct db_stmt api_stmt_exception = {
    "console_exception", "SELECT ordergate.console_exception($1::bigint)::text", 1};
static const struct db_stmt api_stmt_resolve = {
    "console_resolve",
    "SELECT json_build_object('items', coalesce(json_agg(x), '[]'))::text FROM "
    "ordergate.console_resolve($1::bigint[], $2) x",
    2};
static const struct db_stmt api_stmt_refund = {
    "console_refund",
    "SELECT json_build_object('outcome', x.outcome)::text FROM "
    "ordergate.console_refund($1::bigint, $2, $3) x",
    3};
static const struct db_stmt api_stmt_orders = {
    "console_orders",
    "SELECT json_build_object('items', coalesce(json_agg(x), '[]'))::text FROM "
    "ordergate.console_orders($1, $2, 50) x",
    2};
static const struct db_stmt api_stmt_order = {"console_order",
                                              "SELECT ordergate.console_order($1)::text", 1};
static const struct db_stmt api_stmt_close = {
    "console_close", "SELECT row_to_json(x)::text FROM ordergate.console_close($1, $2) x", 2};
static const struct db_stmt api_stmt_audit = {
    "console_audit_list",
    "SELECT json_build_object('items', coalesce(json_agg(x), '[]'))::text FROM "
    "ordergate.console_audit_list($1::bigint, $2::int) x",
    2};
static const struct db_stmt api_stmt_settings = {"console_settings",
                                                 "SELECT ordergate.console_settings()::text", 0};
static const struct db_stmt api_stmt_set_setting = {
    "console_set_setting",
    "SELECT json_build_object('previous', ordergate.console_set_setting($1, $2))::text", 2};

/* ---- replies ----------------------------------------------------------------------------- */

static void api_reply(struct console_resp *resp, unsigned status, char *json)
{
    resp->status = status;
    resp->content_type = "application/json";
    resp->body = json;
    resp->len = json != NULL ? strlen(json) : 0;
    if (json == NULL) {
        resp->status = 500;
        resp->static_body = "{\"error\":\"out of memory\"}";
        resp->len = strlen(resp->static_body);
    }
}

static void api_error(struct console_resp *resp, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* {"error": "..."}: the message a person reads, never a secret. */
static void api_error(struct console_resp *resp, unsigned status, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    json_t *o;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    o = json_pack("{s:s}", "error", msg);
    api_reply(resp, status, o != NULL ? json_dumps(o, JSON_COMPACT) : NULL);
    if (resp->body == NULL || o == NULL)
        resp->status = status;
    json_decref(o);
}

/* ---- request parts ----------------------------------------------------------------------- */

static const char *api_get(const struct console_req *req, enum console_kind kind, const char *name)
{
    const char *v = req->get != NULL ? req->get(req->ctx, kind, name) : NULL;
    return v != NULL && *v != '\0' ? v : NULL;
}

/* A text a person typed (note, reason): 1..API_TEXT_MAX bytes, not only blanks, no control
 * character but newline and tab. NULL when fine, else what is wrong. */
static const char *api_text_problem(const char *s)
{
    size_t n;
    bool blank = true;

    if (s == NULL)
        return "is required";
    n = strlen(s);
    if (n == 0 || n > API_TEXT_MAX)
        return "must be 1..2000 characters";
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch < 0x20 && ch != '\n' && ch != '\t')
            return "may not hold control characters";
        if (ch != ' ' && ch != '\n' && ch != '\t')
            blank = false;
    }
    return blank ? "is required (not only blanks)" : NULL;
}

/* An order number as the gate accepts it: 1..64 of [A-Za-z0-9._:-]. */
static bool api_order_no_ok(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > API_ORDER_NO_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-", s[i]) ==
            NULL)
            return false;
    return true;
}

/* A write from a page of another origin: the browser names the page's origin (Origin), and it
 * must be this console's own (scheme://Host). No Origin (a script, curl) passes: the CSRF token
 * and the JSON body are what stop a forged request; this refuses one more layer early. */
static bool api_cross_origin(const struct console_req *req)
{
    const char *origin = api_get(req, CONSOLE_HEADER, "Origin");
    const char *host = api_get(req, CONSOLE_HEADER, "Host");
    const char *sep;

    if (origin == NULL)
        return false;
    sep = strstr(origin, "://");
    return host == NULL || sep == NULL || strcmp(sep + 3, host) != 0;
}

/* The JSON object of a POST body; NULL (and resp set) when it is not one. */
static json_t *api_body(const struct console_req *req, struct console_resp *resp)
{
    const char *ct = api_get(req, CONSOLE_HEADER, "Content-Type");
    json_error_t jerr;
    json_t *o;

    if (req->body_too_large) {
        api_error(resp, 413, "request body above %d bytes", API_BODY_MAX);
        return NULL;
    }
    /* JSON only: a form another site posts cannot be JSON without a preflight we never allow. */
    if (ct == NULL || strncasecmp(ct, "application/json", 16) != 0) {
        api_error(resp, 415, "send the body as application/json");
        return NULL;
    }
    o = json_loadb(req->body != NULL ? req->body : "", req->body_len, JSON_REJECT_DUPLICATES,
                   &jerr);
    if (o == NULL || !json_is_object(o)) {
        api_error(resp, 400, "the body is not a JSON object%s%s", o == NULL ? ": " : "",
                  o == NULL ? jerr.text : "");
        json_decref(o);
        return NULL;
    }
    return o;
}

/* A string member, NULL when absent or not a string. */
static const char *api_str(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* ---- the database ------------------------------------------------------------------------ */

/* Runs stmt on the session's connection and answers with its one text value: 200 with it, 404
 * (not_found) when it is NULL, or the error as the person should read it. Returns true when the
 * statement succeeded. */
static bool api_call(struct console *c, struct console_session *ses, const struct db_stmt *stmt,
                     const char *const *params, struct console_resp *resp, const char *not_found)
{
    struct og_error err = {0};
    PGresult *res = NULL;
    struct timespec until;
    enum og_status st;
    char q[600];
    int rc;

    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += API_LOCK_WAIT_S;
    rc = pthread_mutex_timedlock(&ses->lock, &until);
    if (rc != 0) {
        api_error(resp, 503, "this session's earlier requests are still running; try again");
        return false;
    }
    st = db_run(ses->db, stmt, params, &res, &err);
    pthread_mutex_unlock(&ses->lock);
    if (st == OG_OK) {
        bool null = PQntuples(res) == 0 || PQgetisnull(res, 0, 0);
        if (null)
            api_error(resp, 404, "%s", not_found != NULL ? not_found : "not found");
        else
            api_reply(resp, 200, strdup(PQgetvalue(res, 0, 0)));
        PQclear(res);
        return !null;
    }
    if (strcmp(err.sqlstate, "42501") == 0) {
        api_error(resp, 403, "your database role may not do this (%s)", stmt->name);
    } else if (strncmp(err.sqlstate, "22", 2) == 0) {
        api_error(resp, 400, "%s", err.msg);
    } else if (strcmp(err.sqlstate, "57014") == 0) {
        api_error(resp, 504, "the database took too long (database.statement_timeout_ms)");
    } else if (strcmp(err.sqlstate, "55P03") == 0 || strcmp(err.sqlstate, "40001") == 0 ||
               strcmp(err.sqlstate, "40P01") == 0) {
        api_error(resp, 409, "the row is busy (%s); try again", err.sqlstate);
    } else if (db_conn(ses->db) == NULL || PQstatus(db_conn(ses->db)) != CONNECTION_OK) {
        /* Never reopened: the console kept no password. */
        session_close(&c->sessions, ses);
        api_error(resp, 401, "the session's database connection was lost; log in again");
    } else {
        api_error(resp, 500, "database error %s", err.sqlstate[0] ? err.sqlstate : "");
    }
    log_warn("console_db_error", "login=%s stmt=%s sqlstate=%s error=%s", ses->login, stmt->name,
             err.sqlstate[0] ? err.sqlstate : "-", log_quote(q, sizeof(q), err.msg));
    return false;
}

static void api_action_log(struct console *c, const struct console_session *ses, const char *action,
                           const char *target, const struct console_resp *r)
{
    char t[200], o[300];

    metric_inc(c->m.actions, 1);
    log_info("console_action", "login=%s action=%s target=%s status=%u result=%s", ses->login,
             action, log_quote(t, sizeof(t), target), r->status,
             log_quote(o, sizeof(o), r->body != NULL ? r->body : ""));
}

/* ---- login and logout -------------------------------------------------------------------- */

/* A PostgreSQL login as the console accepts it: 1..63 of [A-Za-z0-9_.-]. */
static bool api_login_ok(const char *s)
{
    size_t n = s != NULL ? strlen(s) : 0;

    if (n == 0 || n > CONSOLE_LOGIN_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-", s[i]) ==
            NULL)
            return false;
    return true;
}

static void api_cookie(struct console *c, struct console_resp *resp, const char *token)
{
    snprintf(resp->set_cookie, sizeof(resp->set_cookie),
             "og_session=%s; Path=/; HttpOnly; SameSite=Strict%s%s", token,
             c->secure_cookie ? "; Secure" : "", *token == '\0' ? "; Max-Age=0" : "");
}

/* {"login", "may", "csrf"}: whoami's answer with the session's CSRF token. */
static void api_session_reply(struct console_resp *resp, const struct console_session *ses)
{
    json_t *who = json_loads(resp->body != NULL ? resp->body : "{}", 0, NULL);

    if (who == NULL)
        who = json_object();
    json_object_set_new(who, "csrf", json_string(ses->csrf));
    free(resp->body);
    resp->body = NULL;
    api_reply(resp, 200, json_dumps(who, JSON_COMPACT));
    json_decref(who);
}

static void api_login(struct console *c, const struct console_req *req, struct console_resp *resp)
{
    const struct og_config *cfg = c->cfg;
    struct db_retry once = {1, 1, 1};
    struct db_session bounds = cfg_db_session(cfg);
    struct console_session *ses = NULL;
    struct og_error err = {0};
    int64_t now = console_now_ms();
    const char *login, *password;
    struct db *db = NULL;
    json_t *body;
    char q[600], app[128];

    if (!limiter_allowed(&c->limiter, req->peer, now)) {
        metric_inc(c->m.logins_limited, 1);
        log_warn("console_login_limited", "peer=%s", req->peer);
        api_error(resp, 429, "too many failed logins from your address; wait a minute");
        return;
    }
    body = api_body(req, resp);
    if (body == NULL)
        return;
    login = api_str(body, "login");
    password = api_str(body, "password");
    if (!api_login_ok(login) || password == NULL || *password == '\0' ||
        strlen(password) > DB_PASSWORD_MAX) {
        api_error(resp, 400, "give login (1..63 of A-Z a-z 0-9 _ . -) and password");
        goto out;
    }
    /* pg_stat_activity shows whose session a connection is ("ordergate-console/alice"). */
    snprintf(app, sizeof(app), "%s/%s", API_APP_NAME, login);
    db = db_new(cfg->database.conninfo, password, app, &once, c->stop);
    /* The person's password lives only in the connection attempt: wiped from the request now. */
    explicit_bzero((char *)password, strlen(password));
    if (db == NULL || db_set_user(db, login, &err) != OG_OK) {
        api_error(resp, 500, "out of memory");
        goto out;
    }
    db_set_session(db, &bounds, &err);
    if (db_connect(db, &err) != OG_OK) {
        db_forget_password(db);
        limiter_failed(&c->limiter, req->peer, now);
        metric_inc(c->m.logins_refused, 1);
        log_warn("console_login_refused", "login=%s peer=%s error=%s", login, req->peer,
                 log_quote(q, sizeof(q), err.msg));
        api_error(resp, 401, "login refused");
        goto out;
    }
    db_forget_password(db);
    /* A server that let the login in without asking its password (trust, peer) would let
     * anyone be anyone: refused, whatever the password given. */
    if (!PQconnectionUsedPassword(db_conn(db))) {
        limiter_failed(&c->limiter, req->peer, now);
        metric_inc(c->m.logins_refused, 1);
        log_error("console_login_no_password",
                  "login=%s peer=%s msg=\"the server did not ask for a password: the console "
                  "accepts only logins the database checks by password (pg_hba.conf)\"",
                  login, req->peer);
        api_error(resp, 401,
                  "login refused: the database did not check a password for this "
                  "login (see docs/console.md, \"Roles\")");
        goto out;
    }
    if (session_add(&c->sessions, login, db, now, &ses, &err) != OG_OK) {
        db = NULL; /* freed by session_add */
        api_error(resp, 503, "%s", err.msg);
        goto out;
    }
    db = NULL;
    if (!api_call(c, ses, &api_stmt_whoami, NULL, resp, NULL)) {
        /* Not a console user (no console role): 403 from the call; the session goes. */
        session_close(&c->sessions, ses);
        session_release(&c->sessions, ses);
        limiter_failed(&c->limiter, req->peer, now);
        metric_inc(c->m.logins_refused, 1);
        log_warn("console_login_refused", "login=%s peer=%s error=\"no console role\"", login,
                 req->peer);
        free(resp->body);
        resp->body = NULL;
        api_error(resp, 403, "login %s has no console role (ordergate_console_viewer)", login);
        goto out;
    }
    api_session_reply(resp, ses);
    api_cookie(c, resp, ses->token);
    metric_inc(c->m.logins_ok, 1);
    log_info("console_login", "login=%s peer=%s", login, req->peer);
    session_release(&c->sessions, ses);
out:
    db_free(db);
    json_decref(body);
}

/* ---- the API ----------------------------------------------------------------------------- */

/* Query argument as an integer within bounds into buf; *out NULL when absent. false (and resp
 * set) when it is not one. */
static bool api_int_arg(const struct console_req *req, const char *name, int64_t min, int64_t max,
                        char *buf, size_t size, const char **out, struct console_resp *resp)
{
    const char *v = api_get(req, CONSOLE_ARG, name);
    struct og_error err = {0};
    int64_t n;

    *out = NULL;
    if (v == NULL)
        return true;
    if (parse_int64(name, v, min, max, &n, &err) != OG_OK) {
        api_error(resp, 400, "%s", err.msg);
        return false;
    }
    snprintf(buf, size, "%" PRId64, n);
    *out = buf;
    return true;
}

static void api_exceptions(struct console *c, struct console_session *ses,
                           const struct console_req *req, struct console_resp *resp)
{
    char age[24], amount[24], before_id[24], limit[24];
    const char *params[8];
    const char *before_at = api_get(req, CONSOLE_ARG, "before_at");

    params[0] = api_get(req, CONSOLE_ARG, "state");
    if (params[0] == NULL)
        params[0] = "open";
    params[1] = api_get(req, CONSOLE_ARG, "kind");
    if (!api_int_arg(req, "min_age_s", 0, 315360000, age, sizeof(age), &params[2], resp) ||
        !api_int_arg(req, "min_amount", 0, INT64_MAX, amount, sizeof(amount), &params[3], resp) ||
        !api_int_arg(req, "before_id", 1, INT64_MAX, before_id, sizeof(before_id), &params[6],
                     resp) ||
        !api_int_arg(req, "limit", 1, 500, limit, sizeof(limit), &params[7], resp))
        return;
    params[4] = api_get(req, CONSOLE_ARG, "channel");
    if (before_at != NULL && strlen(before_at) > 64) {
        api_error(resp, 400, "before_at: not a timestamp");
        return;
    }
    params[5] = before_at;
    if (params[7] == NULL)
        params[7] = "50";
    api_call(c, ses, &api_stmt_exceptions, params, resp, NULL);
}

/* "/api/exceptions/123" -> 123 in buf; false when the rest is not an id. */
static bool api_path_id(const char *rest, char *buf, size_t size, const char **tail)
{
    struct og_error err = {0};
    char digits[24];
    size_t n = strspn(rest, "0123456789");
    int64_t id;

    if (n == 0 || n >= sizeof(digits))
        return false;
    memcpy(digits, rest, n);
    digits[n] = '\0';
    if (parse_int64("id", digits, 1, INT64_MAX, &id, &err) != OG_OK)
        return false;
    snprintf(buf, size, "%" PRId64, id);
    *tail = rest + n;
    return true;
}

static void api_resolve(struct console *c, struct console_session *ses, json_t *body,
                        struct console_resp *resp)
{
    const json_t *ids = json_object_get(body, "ids");
    const char *note = api_str(body, "note"), *problem = api_text_problem(note);
    char *arr = NULL;
    size_t used = 0, i;
    const json_t *v;

    if (!json_is_array(ids) || json_array_size(ids) == 0 ||
        json_array_size(ids) > API_RESOLVE_MAX) {
        api_error(resp, 400, "ids: give 1..%d exception ids", API_RESOLVE_MAX);
        return;
    }
    if (problem != NULL) {
        api_error(resp, 400, "note %s", problem);
        return;
    }
    arr = malloc(json_array_size(ids) * 22 + 3);
    if (arr == NULL) {
        api_error(resp, 500, "out of memory");
        return;
    }
    arr[used++] = '{';
    json_array_foreach(ids, i, v)
    {
        if (!json_is_integer(v) || json_integer_value(v) < 1) {
            api_error(resp, 400, "ids: element %zu is not an exception id", i);
            free(arr);
            return;
        }
        used += (size_t)sprintf(arr + used, "%s%" JSON_INTEGER_FORMAT, i > 0 ? "," : "",
                                json_integer_value(v));
    }
    arr[used++] = '}';
    arr[used] = '\0';
    {
        const char *params[2] = {arr, note};
        api_call(c, ses, &api_stmt_resolve, params, resp, NULL);
    }
    api_action_log(c, ses, "resolve", arr, resp);
    free(arr);
}

static void api_refund(struct console *c, struct console_session *ses, const char *id, json_t *body,
                       struct console_resp *resp)
{
    const char *decision = api_str(body, "decision"), *note = api_str(body, "note");
    const char *problem = api_text_problem(note);
    const char *params[3] = {id, decision, note};

    if (decision == NULL ||
        (strcmp(decision, "approve") != 0 && strcmp(decision, "decline") != 0)) {
        api_error(resp, 400, "decision: approve or decline");
        return;
    }
    if (problem != NULL) {
        api_error(resp, 400, "note %s", problem);
        return;
    }
    api_call(c, ses, &api_stmt_refund, params, resp, NULL);
    api_action_log(c, ses, strcmp(decision, "approve") == 0 ? "refund_approve" : "refund_decline",
                   id, resp);
}

static void api_close(struct console *c, struct console_session *ses, const char *order_no,
                      json_t *body, struct console_resp *resp)
{
    const char *reason = api_str(body, "reason"), *problem = api_text_problem(reason);
    const char *params[2] = {order_no, reason};

    if (problem != NULL) {
        api_error(resp, 400, "reason %s", problem);
        return;
    }
    if (!json_is_true(json_object_get(body, "confirm"))) {
        api_error(resp, 400, "confirm: true is required (the page shows what closing does first)");
        return;
    }
    api_call(c, ses, &api_stmt_close, params, resp, NULL);
    api_action_log(c, ses, "close", order_no, resp);
}

static void api_set_setting(struct console *c, struct console_session *ses, json_t *body,
                            struct console_resp *resp)
{
    const char *key = api_str(body, "key"), *value = api_str(body, "value");
    const char *params[2] = {key, value};

    if (key == NULL || value == NULL || strlen(key) > 64 || strlen(value) > 64) {
        api_error(resp, 400, "give key and value (text, at most 64 characters each)");
        return;
    }
    api_call(c, ses, &api_stmt_set_setting, params, resp, NULL);
    api_action_log(c, ses, "set_setting", key, resp);
}

/* The routes that need a session. */
static void api_route(struct console *c, struct console_session *ses, const struct console_req *req,
                      struct console_resp *resp)
{
    bool get = strcmp(req->method, "GET") == 0;
    const char *p = req->path, *tail = "";
    char id[24];
    json_t *body = NULL;

    if (!get) {
        const char *csrf = api_get(req, CONSOLE_HEADER, "X-CSRF-Token");
        if (!session_token_equal(csrf, ses->csrf)) {
            log_warn("console_csrf_refused", "login=%s peer=%s path=%s", ses->login, req->peer, p);
            api_error(resp, 403, "missing or wrong CSRF token (X-CSRF-Token)");
            return;
        }
        body = api_body(req, resp);
        if (body == NULL)
            return;
    }
    if (strcmp(p, "/api/session") == 0 && get) {
        if (api_call(c, ses, &api_stmt_whoami, NULL, resp, NULL))
            api_session_reply(resp, ses);
    } else if (strcmp(p, "/api/logout") == 0 && !get) {
        session_close(&c->sessions, ses);
        log_info("console_logout", "login=%s", ses->login);
        api_reply(resp, 200, strdup("{\"ok\":true}"));
        api_cookie(c, resp, "");
    } else if (strcmp(p, "/api/overview") == 0 && get) {
        api_call(c, ses, &api_stmt_overview, NULL, resp, NULL);
    } else if (strcmp(p, "/api/exceptions") == 0 && get) {
        api_exceptions(c, ses, req, resp);
    } else if (strcmp(p, "/api/exceptions/resolve") == 0 && !get) {
        api_resolve(c, ses, body, resp);
    } else if (strncmp(p, "/api/exceptions/", 16) == 0 &&
               api_path_id(p + 16, id, sizeof(id), &tail)) {
        const char *params[1] = {id};
        if (*tail == '\0' && get)
            api_call(c, ses, &api_stmt_exception, params, resp, "no such exception");
        else if (strcmp(tail, "/refund") == 0 && !get)
            api_refund(c, ses, id, body, resp);
        else
            api_error(resp, get ? 404 : 405, "no such endpoint");
    } else if (strcmp(p, "/api/orders") == 0 && get) {
        const char *params[2] = {api_get(req, CONSOLE_ARG, "field"),
                                 api_get(req, CONSOLE_ARG, "q")};
        if (params[0] == NULL)
            params[0] = "order_no";
        if (params[1] == NULL)
            api_error(resp, 400, "q: give what to search for");
        else
            api_call(c, ses, &api_stmt_orders, params, resp, NULL);
    } else if (strncmp(p, "/api/orders/", 12) == 0) {
        char order_no[API_ORDER_NO_MAX + 1];
        const char *slash = strchr(p + 12, '/');
        size_t n = slash != NULL ? (size_t)(slash - (p + 12)) : strlen(p + 12);
        const char *params[1] = {order_no};

        if (n == 0 || n > API_ORDER_NO_MAX) {
            api_error(resp, 400, "order number: 1..64 of A-Z a-z 0-9 . _ : -");
            goto out;
        }
        memcpy(order_no, p + 12, n);
        order_no[n] = '\0';
        if (!api_order_no_ok(order_no))
            api_error(resp, 400, "order number: 1..64 of A-Z a-z 0-9 . _ : -");
        else if (slash == NULL && get)
            api_call(c, ses, &api_stmt_order, params, resp, "no such order");
        else if (slash != NULL && strcmp(slash, "/close") == 0 && !get)
            api_close(c, ses, order_no, body, resp);
        else
            api_error(resp, 404, "no such endpoint");
    } else if (strcmp(p, "/api/audit") == 0 && get) {
        char before[24], limit[24];
        const char *params[2];
        if (api_int_arg(req, "before_id", 1, INT64_MAX, before, sizeof(before), &params[0], resp) &&
            api_int_arg(req, "limit", 1, 500, limit, sizeof(limit), &params[1], resp)) {
            if (params[1] == NULL)
                params[1] = "50";
            api_call(c, ses, &api_stmt_audit, params, resp, NULL);
        }
    } else if (strcmp(p, "/api/settings") == 0 && get) {
        api_call(c, ses, &api_stmt_settings, NULL, resp, NULL);
    } else if (strcmp(p, "/api/settings") == 0 && !get) {
        api_set_setting(c, ses, body, resp);
    } else {
        api_error(resp, 404, "no such endpoint");
    }
out:
    json_decref(body);
}

static void api_static(const struct console_req *req, struct console_resp *resp)
{
    const char *p = strcmp(req->path, "/index.html") == 0 ? "/" : req->path;

    for (size_t i = 0; i < console_nassets; i++) {
        if (strcmp(console_assets[i].path, p) == 0) {
            resp->status = 200;
            resp->content_type = console_assets[i].content_type;
            resp->static_body = (const char *)console_assets[i].data;
            resp->len = console_assets[i].len;
            resp->cacheable = true;
            return;
        }
    }
    resp->status = 404;
    resp->content_type = "text/plain; charset=utf-8";
    resp->static_body = "not found\n";
    resp->len = strlen(resp->static_body);
}

void console_handle(struct console *c, const struct console_req *req, struct console_resp *resp)
{
    bool get = strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0;
    struct console_session *ses;

    memset(resp, 0, sizeof(*resp));
    if (!get && strcmp(req->method, "POST") != 0) {
        api_error(resp, 405, "GET or POST only");
        return;
    }
    if (strncmp(req->path, "/api/", 5) != 0) {
        if (!get) {
            api_error(resp, 405, "GET only");
            return;
        }
        api_static(req, resp);
        return;
    }
    if (!get && api_cross_origin(req)) {
        log_warn("console_cross_origin_refused", "peer=%s path=%s", req->peer, req->path);
        api_error(resp, 403, "a write from another origin");
        return;
    }
    if (strcmp(req->path, "/api/login") == 0) {
        if (get)
            api_error(resp, 405, "POST only");
        else
            api_login(c, req, resp);
        return;
    }
    ses =
        session_acquire(&c->sessions, api_get(req, CONSOLE_COOKIE, "og_session"), console_now_ms());
    if (ses == NULL) {
        api_error(resp, 401, "log in first (no session, or it ended)");
        return;
    }
    {
        struct console_req r = *req;
        if (strcmp(r.method, "HEAD") == 0)
            r.method = "GET";
        api_route(c, ses, &r, resp);
    }
    session_release(&c->sessions, ses);
}

void console_metrics_register(struct console_metrics *m)
{
    static const char *const classes[5] = {"class=\"1xx\"", "class=\"2xx\"", "class=\"3xx\"",
                                           "class=\"4xx\"", "class=\"5xx\""};
    static const double buckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1, 2.5, 10};

    for (int i = 0; i < 5; i++)
        m->requests[i] = metric_register("ordergate_console_requests_total",
                                         "HTTP requests answered by the console, by status class",
                                         METRIC_COUNTER, classes[i], NULL, 0);
    m->seconds =
        metric_register("ordergate_console_request_seconds",
                        "Time to answer one console request (database call included)",
                        METRIC_HISTOGRAM, NULL, buckets, sizeof(buckets) / sizeof(buckets[0]));
    m->logins_ok = metric_register("ordergate_console_logins_total", "Console logins, by result",
                                   METRIC_COUNTER, "result=\"ok\"", NULL, 0);
    m->logins_refused =
        metric_register("ordergate_console_logins_total", "Console logins, by result",
                        METRIC_COUNTER, "result=\"refused\"", NULL, 0);
    m->logins_limited =
        metric_register("ordergate_console_logins_total", "Console logins, by result",
                        METRIC_COUNTER, "result=\"limited\"", NULL, 0);
    m->sessions = metric_register("ordergate_console_sessions", "Open console sessions",
                                  METRIC_GAUGE, NULL, NULL, 0);
    m->actions = metric_register("ordergate_console_actions_total",
                                 "Writes operators made through the console (any outcome)",
                                 METRIC_COUNTER, NULL, NULL, 0);
}
