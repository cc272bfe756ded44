/* ordergate-console: the operator's web console and its JSON API.
 *
 * Layout: main.c reads the configuration, checks the listen address and TLS, runs the HTTP
 * server (libmicrohttpd) and turns the idle-session sweep until SIGTERM; session.c holds the
 * sessions (each one database connection of its person's own login) and the login rate limit;
 * api.c answers one request: static pages, login and logout, and the JSON endpoints, each one
 * call of a console function in schema/functions/console/ as the session's login. Nothing here
 * decides what a person may do: the database refuses what their role may not execute (42501),
 * and the console reports it (403).
 *
 * This file's contract: a request as api.c sees it (struct console_req: no libmicrohttpd type,
 * so tests build one by hand) and the reply it fills (struct console_resp). */
#ifndef OG_CONSOLE_CONSOLE_H
#define OG_CONSOLE_CONSOLE_H

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/cfg.h"
#include "common/db.h"
#include "common/error.h"
#include "common/metrics.h"

#define CONSOLE_PROG "ordergate-console"

/* ---- sessions (session.c) ---------------------------------------------------------------- */

/* 32 random bytes as hex: the session cookie and, separately, the session's CSRF token. */
#define CONSOLE_TOKEN_HEX 64
#define CONSOLE_LOGIN_MAX 63 /* PostgreSQL's NAMEDATALEN - 1 */

struct console_session {
    char token[CONSOLE_TOKEN_HEX + 1];
    char csrf[CONSOLE_TOKEN_HEX + 1];
    char login[CONSOLE_LOGIN_MAX + 1];
    struct db *db;        /* the person's own login; owned */
    int64_t last_ms;      /* monotonic time of the last request */
    int busy;             /* requests holding it (session_acquire) */
    bool closed;          /* logged out, expired or lost: freed when busy falls to 0 */
    pthread_mutex_t lock; /* one statement at a time on db */
};

struct console_sessions {
    pthread_mutex_t lock;
    struct console_session **slot;
    int max;
    int64_t idle_ms;
};

/* Fills out with 2 * bytes hex digits of the kernel's random generator (getrandom) and a NUL;
 * -1 when it cannot (out is then ""). */
int session_random_hex(char *out, size_t bytes);
/* Compares two tokens in time that does not depend on where they differ; false when either is
 * NULL or their lengths differ. */
bool session_token_equal(const char *a, const char *b);

enum og_status session_store_init(struct console_sessions *s, int max, int idle_s,
                                  struct og_error *err);
/* Frees every session and its connection (no request may be running). */
void session_store_free(struct console_sessions *s);
/* A new session for login on db (taken over: freed with the session, also on failure), held
 * for the caller (session_release). OG_ERR_IO when all max sessions are open. */
enum og_status session_add(struct console_sessions *s, const char *login, struct db *db,
                           int64_t now_ms, struct console_session **out, struct og_error *err);
/* The open session of token, held for the caller, its idle clock restarted; NULL when there is
 * none or it has been idle longer than the bound (it is then closed). */
struct console_session *session_acquire(struct console_sessions *s, const char *token,
                                        int64_t now_ms);
void session_release(struct console_sessions *s, struct console_session *ses);
/* Marks a held session closed (logout, a lost connection): no later acquire finds it. */
void session_close(struct console_sessions *s, struct console_session *ses);
/* Closes and frees the sessions idle longer than the bound and nobody holds; returns how many
 * are open afterwards. */
int session_sweep(struct console_sessions *s, int64_t now_ms);

/* Failed logins per peer address within a minute (console.login_failures). */
#define CONSOLE_LIMITER_SLOTS 256
struct console_limiter {
    pthread_mutex_t lock;
    int per_min;
    struct {
        char addr[64];
        int64_t window_ms; /* start of its minute */
        int failures;
    } slot[CONSOLE_LIMITER_SLOTS];
};

void limiter_init(struct console_limiter *l, int per_min);
/* Whether addr may try a login now (fewer than per_min failures in its current minute). */
bool limiter_allowed(struct console_limiter *l, const char *addr, int64_t now_ms);
/* Counts one failed login of addr. */
void limiter_failed(struct console_limiter *l, const char *addr, int64_t now_ms);

/* ---- requests (api.c) -------------------------------------------------------------------- */

enum console_kind { CONSOLE_ARG, CONSOLE_HEADER, CONSOLE_COOKIE };

struct console_req {
    const char *method; /* "GET", "POST", ... */
    const char *path;   /* without the query */
    const char *peer;   /* the peer's address as text */
    const char *body;   /* POST body (not NUL-terminated), may be NULL */
    size_t body_len;
    bool body_too_large;
    /* A query argument, header or cookie by name, NULL when absent. */
    const char *(*get)(void *ctx, enum console_kind kind, const char *name);
    void *ctx;
};

struct console_resp {
    unsigned status;
    const char *content_type;
    char *body; /* malloc'd, or NULL with static_body */
    const char *static_body;
    size_t len;
    char set_cookie[256]; /* "" = none */
    bool cacheable;       /* a static file; else Cache-Control: no-store */
};

struct console_metrics {
    struct metric *requests[5]; /* by status class 1xx..5xx */
    struct metric *seconds;
    struct metric *logins_ok, *logins_refused, *logins_limited;
    struct metric *sessions;
    struct metric *actions;
};

struct console {
    const struct og_config *cfg;
    struct console_sessions sessions;
    struct console_limiter limiter;
    bool secure_cookie; /* Secure on the cookie (always, unless a test turns it off) */
    struct console_metrics m;
    volatile sig_atomic_t *stop;
};

/* Registers the console's metrics (ordergate_console_*). */
void console_metrics_register(struct console_metrics *m);
/* Answers one request into resp (resp->body malloc'd or static). Never fails: an error is a
 * reply (4xx for what the request did wrong, 5xx for what the console or database did). */
void console_handle(struct console *c, const struct console_req *req, struct console_resp *resp);
/* The monotonic clock in milliseconds, for the session clocks. */
int64_t console_now_ms(void);

/* ---- static files (generated from console/static/ by embed.cmake) ------------------------ */

struct console_asset {
    const char *path; /* "/", "/app.js" */
    const char *content_type;
    const unsigned char *data;
    size_t len;
};
extern const struct console_asset console_assets[];
extern const size_t console_nassets;

#endif
