/* The console's request handling without a network or a database (console/api.c,
 * console/session.c): sessions and their idle bound, tokens, the login rate limit, and every
 * refusal a request meets before anything is sent to the database (no session, a missing or
 * wrong CSRF token, a body that is not JSON, bad ids, a close without its confirmation, methods
 * and paths that do not exist). A session here has no database connection: a request that got
 * as far as the database would crash the test, so each refusal is proven to come first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/log.h"
#include "console/console.h"

/* A request's query arguments, headers and cookies, by name. */
struct fake {
    const char *cookie, *csrf, *ctype;
    const char *arg, *arg_value; /* one query argument */
    const char *origin, *host;
};

static const char *fake_get(void *ctx, enum console_kind kind, const char *name)
{
    const struct fake *f = ctx;

    if (kind == CONSOLE_COOKIE && strcmp(name, "og_session") == 0)
        return f->cookie;
    if (kind == CONSOLE_HEADER && strcmp(name, "X-CSRF-Token") == 0)
        return f->csrf;
    if (kind == CONSOLE_HEADER && strcmp(name, "Content-Type") == 0)
        return f->ctype;
    if (kind == CONSOLE_HEADER && strcmp(name, "Origin") == 0)
        return f->origin;
    if (kind == CONSOLE_HEADER && strcmp(name, "Host") == 0)
        return f->host;
    if (kind == CONSOLE_ARG && f->arg != NULL && strcmp(name, f->arg) == 0)
        return f->arg_value;
    return NULL;
}

static struct og_config cfg;
static struct console con;

static int setup(void **state)
{
    (void)state;
    log_set_level(LOG_LVL_ERROR);
    if (cfg_init(&cfg, NULL) != OG_OK)
        return -1;
    memset(&con, 0, sizeof(con));
    con.cfg = &cfg;
    con.secure_cookie = true;
    limiter_init(&con.limiter, 3);
    return session_store_init(&con.sessions, 4, 60, NULL) == OG_OK ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    session_store_free(&con.sessions);
    cfg_free(&cfg);
    return 0;
}

static unsigned run(const char *method, const char *path, const struct fake *f, const char *body,
                    char *out, size_t size)
{
    struct console_req req = {.method = method,
                              .path = path,
                              .peer = "192.0.2.1",
                              .body = body,
                              .body_len = body != NULL ? strlen(body) : 0,
                              .get = fake_get,
                              .ctx = (void *)f};
    struct console_resp resp;

    console_handle(&con, &req, &resp);
    if (out != NULL) {
        const char *b = resp.body != NULL ? resp.body : resp.static_body;
        snprintf(out, size, "%.*s", (int)resp.len, b != NULL ? b : "");
    }
    free(resp.body);
    return resp.status;
}

/* A session without a database connection, released: its token and CSRF token. */
static struct console_session *session_new(void)
{
    struct console_session *ses = NULL;

    assert_int_equal(session_add(&con.sessions, "alice", NULL, console_now_ms(), &ses, NULL),
                     OG_OK);
    session_release(&con.sessions, ses);
    return ses;
}

static void test_tokens(void **state)
{
    char a[CONSOLE_TOKEN_HEX + 1], b[CONSOLE_TOKEN_HEX + 1];

    (void)state;
    assert_int_equal(session_random_hex(a, 32), 0);
    assert_int_equal(session_random_hex(b, 32), 0);
    assert_int_equal(strlen(a), CONSOLE_TOKEN_HEX);
    assert_string_not_equal(a, b);
    assert_true(session_token_equal(a, a));
    assert_false(session_token_equal(a, b));
    assert_false(session_token_equal(a, NULL));
    assert_false(session_token_equal("", ""));
    assert_false(session_token_equal("abc", "abcd"));
}

static void test_sessions(void **state)
{
    struct console_sessions s;
    struct console_session *x[4], *extra = NULL;
    struct og_error err = {0};

    (void)state;
    assert_int_equal(session_store_init(&s, 3, 60, NULL), OG_OK);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(session_add(&s, "bob", NULL, 1000, &x[i], NULL), OG_OK);
        session_release(&s, x[i]);
    }
    /* Full: refused, nothing added. */
    assert_int_equal(session_add(&s, "bob", NULL, 1000, &extra, &err), OG_ERR_IO);
    assert_null(extra);
    assert_non_null(strstr(err.msg, "console.max_sessions"));
    /* Found by its token, not by another's; the idle clock restarts with each use. */
    assert_ptr_equal(session_acquire(&s, x[0]->token, 30000), x[0]);
    session_release(&s, x[0]);
    assert_null(session_acquire(&s, x[1]->csrf, 30000));
    assert_null(session_acquire(&s, "short", 30000));
    assert_null(session_acquire(&s, NULL, 30000));
    /* 61 s after its last use a session is gone; x[0] was used at 30 s. */
    assert_null(session_acquire(&s, x[1]->token, 62000));
    assert_int_equal(session_sweep(&s, 62000), 1);
    assert_ptr_equal(session_acquire(&s, x[0]->token, 62000), x[0]);
    /* Closed while held: not found again, freed by the sweep only once released. */
    session_close(&s, x[0]);
    assert_int_equal(session_sweep(&s, 62000), 0);
    assert_null(session_acquire(&s, x[0]->token, 62000));
    session_release(&s, x[0]);
    assert_int_equal(session_sweep(&s, 62000), 0);
    assert_int_equal(session_add(&s, "bob", NULL, 62000, &extra, NULL), OG_OK);
    session_release(&s, extra);
    session_store_free(&s);
}

static void test_limiter(void **state)
{
    struct console_limiter l;

    (void)state;
    limiter_init(&l, 2);
    assert_true(limiter_allowed(&l, "10.0.0.1", 0));
    limiter_failed(&l, "10.0.0.1", 0);
    limiter_failed(&l, "10.0.0.1", 1000);
    assert_false(limiter_allowed(&l, "10.0.0.1", 2000));
    /* Another address is not held back; a minute later the first may try again. */
    assert_true(limiter_allowed(&l, "10.0.0.2", 2000));
    assert_true(limiter_allowed(&l, "10.0.0.1", 60001));
}

static void test_no_session(void **state)
{
    struct fake f = {0};
    char out[512];

    (void)state;
    assert_int_equal(run("GET", "/api/overview", &f, NULL, out, sizeof(out)), 401);
    assert_non_null(strstr(out, "log in"));
    f.cookie = "0000000000000000000000000000000000000000000000000000000000000000";
    assert_int_equal(run("GET", "/api/exceptions", &f, NULL, NULL, 0), 401);
    assert_int_equal(run("POST", "/api/exceptions/resolve", &f, "{}", NULL, 0), 401);
}

static void test_static_and_methods(void **state)
{
    struct fake f = {0};
    char out[256];

    (void)state;
    assert_int_equal(run("GET", "/", &f, NULL, out, sizeof(out)), 200);
    assert_non_null(strstr(out, "<!doctype html>"));
    assert_int_equal(run("GET", "/app.js", &f, NULL, NULL, 0), 200);
    for (size_t i = 0; i < console_nassets; i++)
        assert_non_null(strstr(console_assets[i].content_type, "; charset=utf-8"));
    assert_int_equal(run("GET", "/app.css", &f, NULL, NULL, 0), 200);
    assert_int_equal(run("GET", "/nothing.js", &f, NULL, NULL, 0), 404);
    assert_int_equal(run("GET", "/../etc/passwd", &f, NULL, NULL, 0), 404);
    assert_int_equal(run("POST", "/", &f, "", NULL, 0), 405);
    assert_int_equal(run("DELETE", "/api/overview", &f, NULL, NULL, 0), 405);
    assert_int_equal(run("GET", "/api/login", &f, NULL, NULL, 0), 405);
}

static void test_login_refusals(void **state)
{
    struct fake f = {.ctype = "application/json"};
    struct fake form = {.ctype = "application/x-www-form-urlencoded"};
    char out[512];

    (void)state;
    assert_int_equal(run("POST", "/api/login", &form, "login=a&password=b", NULL, 0), 415);
    assert_int_equal(run("POST", "/api/login", &f, "{not json", NULL, 0), 400);
    assert_int_equal(run("POST", "/api/login", &f, "[1]", NULL, 0), 400);
    assert_int_equal(
        run("POST", "/api/login", &f, "{\"login\":\"a b\",\"password\":\"x\"}", out, sizeof(out)),
        400);
    assert_non_null(strstr(out, "give login"));
    assert_int_equal(run("POST", "/api/login", &f, "{\"login\":\"alice\"}", NULL, 0), 400);
    assert_int_equal(
        run("POST", "/api/login", &f, "{\"login\":\"alice\",\"password\":\"\"}", NULL, 0), 400);
    /* Rate limit: after 3 failures in the minute, refused before anything else is read. */
    for (int i = 0; i < 3; i++)
        limiter_failed(&con.limiter, "192.0.2.1", console_now_ms());
    assert_int_equal(
        run("POST", "/api/login", &f, "{\"login\":\"alice\",\"password\":\"x\"}", out, sizeof(out)),
        429);
    assert_non_null(strstr(out, "too many"));
}

static void test_csrf(void **state)
{
    struct console_session *ses = session_new();
    struct fake f = {.cookie = ses->token, .ctype = "application/json"};
    char out[512];

    (void)state;
    /* No token, a wrong one, the session token in its place: refused before the body is read. */
    assert_int_equal(run("POST", "/api/exceptions/resolve", &f, "{\"ids\":[1],\"note\":\"x\"}", out,
                         sizeof(out)),
                     403);
    assert_non_null(strstr(out, "CSRF"));
    f.csrf = "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff";
    assert_int_equal(run("POST", "/api/orders/A1/close", &f, "{}", NULL, 0), 403);
    f.csrf = ses->token;
    assert_int_equal(run("POST", "/api/logout", &f, "{}", NULL, 0), 403);
    /* The right token from another origin's page: refused; from this one's: on to the body. */
    f.csrf = ses->csrf;
    f.host = "console.example:8470";
    f.origin = "https://evil.example";
    assert_int_equal(run("POST", "/api/logout", &f, "{}", out, sizeof(out)), 403);
    assert_non_null(strstr(out, "another origin"));
    assert_int_equal(run("POST", "/api/login", &f, "{}", NULL, 0), 403);
    f.origin = "https://console.example:8470";
    f.ctype = "text/plain";
    assert_int_equal(run("POST", "/api/logout", &f, "{}", NULL, 0), 415);
    f.origin = NULL;
    f.ctype = "application/json";
    /* The right token but a form body: 415. */
    f.csrf = ses->csrf;
    f.ctype = "text/plain";
    assert_int_equal(run("POST", "/api/exceptions/resolve", &f, "ids=1", NULL, 0), 415);
}

static void test_bad_input(void **state)
{
    struct console_session *ses = session_new();
    struct fake f = {.cookie = ses->token, .csrf = ses->csrf, .ctype = "application/json"};
    char out[512];

    (void)state;
    assert_int_equal(run("POST", "/api/exceptions/resolve", &f, "{\"note\":\"x\"}", NULL, 0), 400);
    assert_int_equal(
        run("POST", "/api/exceptions/resolve", &f, "{\"ids\":[],\"note\":\"x\"}", NULL, 0), 400);
    assert_int_equal(run("POST", "/api/exceptions/resolve", &f,
                         "{\"ids\":[1,\"2\"],\"note\":\"x\"}", out, sizeof(out)),
                     400);
    assert_non_null(strstr(out, "element 1"));
    assert_int_equal(
        run("POST", "/api/exceptions/resolve", &f, "{\"ids\":[0],\"note\":\"x\"}", NULL, 0), 400);
    assert_int_equal(run("POST", "/api/exceptions/resolve", &f, "{\"ids\":[1],\"note\":\"  \"}",
                         out, sizeof(out)),
                     400);
    assert_non_null(strstr(out, "note"));
    assert_int_equal(
        run("POST", "/api/exceptions/resolve", &f, "{\"ids\":[1],\"note\":\"a\\u0001b\"}", NULL, 0),
        400);
    assert_int_equal(run("POST", "/api/exceptions/7/refund", &f,
                         "{\"decision\":\"maybe\",\"note\":\"x\"}", NULL, 0),
                     400);
    assert_int_equal(
        run("POST", "/api/exceptions/7/refund", &f, "{\"decision\":\"approve\"}", NULL, 0), 400);
    assert_int_equal(
        run("POST", "/api/orders/A1/close", &f, "{\"reason\":\"x\"}", out, sizeof(out)), 400);
    assert_non_null(strstr(out, "confirm"));
    assert_int_equal(run("POST", "/api/orders/A1/close", &f, "{\"confirm\":true}", NULL, 0), 400);
    assert_int_equal(
        run("POST", "/api/orders/A%201/close", &f, "{\"reason\":\"x\",\"confirm\":true}", NULL, 0),
        400);
    assert_int_equal(run("POST", "/api/settings", &f, "{\"key\":\"x\"}", NULL, 0), 400);
    f.arg = "limit";
    f.arg_value = "0";
    assert_int_equal(run("GET", "/api/exceptions", &f, NULL, out, sizeof(out)), 400);
    assert_non_null(strstr(out, "limit"));
    f.arg = "before_id";
    f.arg_value = "12x";
    assert_int_equal(run("GET", "/api/exceptions", &f, NULL, NULL, 0), 400);
    f.arg = NULL;
    assert_int_equal(run("GET", "/api/orders", &f, NULL, NULL, 0), 400);
    assert_int_equal(run("GET", "/api/exceptions/abc", &f, NULL, NULL, 0), 404);
    assert_int_equal(run("GET", "/api/nothing", &f, NULL, NULL, 0), 404);
    /* Logout closes the session and clears the cookie; the token is dead afterwards. */
    assert_int_equal(run("POST", "/api/logout", &f, "{}", NULL, 0), 200);
    assert_int_equal(run("GET", "/api/exceptions/1", &f, NULL, NULL, 0), 401);
}

static void test_cookie_flags(void **state)
{
    struct console_session *ses = session_new();
    struct fake f = {.cookie = ses->token, .csrf = ses->csrf, .ctype = "application/json"};
    struct console_req req = {.method = "POST",
                              .path = "/api/logout",
                              .peer = "192.0.2.1",
                              .body = "{}",
                              .body_len = 2,
                              .get = fake_get,
                              .ctx = &f};
    struct console_resp resp;

    (void)state;
    console_handle(&con, &req, &resp);
    free(resp.body);
    assert_int_equal(resp.status, 200);
    assert_non_null(strstr(resp.set_cookie, "HttpOnly"));
    assert_non_null(strstr(resp.set_cookie, "SameSite=Strict"));
    assert_non_null(strstr(resp.set_cookie, "Secure"));
    assert_non_null(strstr(resp.set_cookie, "Max-Age=0"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokens),
        cmocka_unit_test(test_sessions),
        cmocka_unit_test(test_limiter),
        cmocka_unit_test(test_no_session),
        cmocka_unit_test(test_static_and_methods),
        cmocka_unit_test(test_login_refusals),
        cmocka_unit_test(test_csrf),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_cookie_flags),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
