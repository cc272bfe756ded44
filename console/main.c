/* ordergate-console: the operator's web console (docs/console.md). Reads the configuration
 * (console.*, database.*), refuses plain HTTP off loopback unless told otherwise, serves the
 * pages, the JSON API (api.c) and its own /metrics and /healthz on one port (libmicrohttpd, a
 * thread per connection, bounded in number and idle time), and closes idle sessions once a
 * second until SIGTERM or SIGINT.
 *
 * Exit status: 0 stopped by a signal, 1 runtime failure (cannot listen), 2 bad usage or
 * configuration. */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include "common/cfg_doc.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/opt.h"
#include "common/signals.h"
#include "common/version.h"
#include "console/console.h"

#define MAIN_BODY_MAX 65536
#define MAIN_PER_IP   8
#define MAIN_PEM_MAX  (1024 * 1024)

enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

static const struct opt main_opts[] = {
    {"config", "FILE", OPT_ARG, "libconfig file; every setting is optional (docs/settings.md)",
     NULL, 0, 0},
    {"db", "CONNINFO", OPT_ARG,
     "libpq conninfo or URI the people's logins connect with (no user or password in it)",
     "database.conninfo", 0, 0},
    {"listen", "ADDR:PORT", OPT_ARG, "where the console listens (console.listen)", "console.listen",
     0, 0},
    {"log-level", "LEVEL", OPT_ARG, "debug, info, warn or error (log_level)", "log_level", 0, 0},
    {"check-config", NULL, 0, "validate the configuration, print it (secrets masked), exit", NULL,
     0, 0},
    {"list-settings", "FORMAT", OPT_OPTIONAL, "print the settings table and exit", NULL, 0, 0},
    {"version", NULL, 0, "print the version and exit", NULL, 0, 0},
    {"help", NULL, 0, "print this help and exit", NULL, 'h', 0},
    {NULL, NULL, 0, NULL, NULL, 0, 0},
};

static void main_usage(FILE *out)
{
    fprintf(out, "usage: " CONSOLE_PROG " [options]\n"
                 "\n"
                 "The operator's web console: the gate's live figures, the exception queue, order\n"
                 "search and timelines, closing an order by hand, settings. Each person logs in\n"
                 "with their own database login; what they may do is what its roles may execute\n"
                 "(docs/console.md). Every setting and its meaning: docs/settings.md.\n"
                 "\n"
                 "options:\n");
    opt_help(out, main_opts, CFG_PROG_CONSOLE);
    fprintf(out, "\nexit status: 0 stopped by a signal, 1 runtime failure, 2 bad usage or "
                 "configuration\n");
}

/* ---- listen address and TLS -------------------------------------------------------------- */

/* Resolves console.listen ("ADDR:PORT", "[V6]:PORT") numerically or by name. */
static enum og_status main_addr(const char *listen, struct sockaddr_storage *ss, socklen_t *len,
                                bool *loopback, struct og_error *err)
{
    char host[256], port[16];
    const char *colon;
    struct addrinfo hints, *res = NULL;
    int rc;

    if (listen[0] == '[') {
        const char *close = strchr(listen, ']');
        if (close == NULL || close[1] != ':' || (size_t)(close - listen - 1) >= sizeof(host))
            return og_error_set(err, OG_ERR_CONFIG, false, "console.listen: bad address %s",
                                listen);
        memcpy(host, listen + 1, (size_t)(close - listen - 1));
        host[close - listen - 1] = '\0';
        colon = close + 1;
    } else {
        colon = strrchr(listen, ':');
        if (colon == NULL || (size_t)(colon - listen) >= sizeof(host))
            return og_error_set(err, OG_ERR_CONFIG, false, "console.listen: bad address %s",
                                listen);
        memcpy(host, listen, (size_t)(colon - listen));
        host[colon - listen] = '\0';
    }
    snprintf(port, sizeof(port), "%s", colon + 1);
    memset(&hints, 0, sizeof(hints));
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    rc = getaddrinfo(host[0] != '\0' ? host : NULL, port, &hints, &res);
    if (rc != 0 || res == NULL)
        return og_error_set(err, OG_ERR_CONFIG, false, "console.listen: cannot resolve %s: %s",
                            listen, rc != 0 ? gai_strerror(rc) : "no address");
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    if (ss->ss_family == AF_INET)
        *loopback = (ntohl(((struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
    else
        *loopback = IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)ss)->sin6_addr);
    return OG_OK;
}

/* A PEM file read whole (NUL-terminated); NULL and err on failure. */
static char *main_pem(const char *setting, const char *path, struct og_error *err)
{
    FILE *f = fopen(path, "re");
    char *buf = NULL;
    size_t n = 0;

    if (f == NULL) {
        og_error_set(err, OG_ERR_CONFIG, false, "%s %s: %s", setting, path, strerror(errno));
        return NULL;
    }
    buf = malloc(MAIN_PEM_MAX + 1);
    if (buf != NULL)
        n = fread(buf, 1, MAIN_PEM_MAX + 1, f);
    fclose(f);
    if (buf == NULL || n == 0 || n > MAIN_PEM_MAX) {
        og_error_set(err, OG_ERR_CONFIG, false, "%s %s: empty, unreadable or above 1 MiB", setting,
                     path);
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

struct main_tls {
    char *cert, *key;
};

static void main_tls_free(struct main_tls *t)
{
    free(t->cert);
    if (t->key != NULL)
        explicit_bzero(t->key, strlen(t->key));
    free(t->key);
}

/* What a start checks before it listens: the address, TLS files, and that plain HTTP stays on
 * loopback unless console.allow_plain_http. --check-config runs exactly this. */
static enum og_status main_check(const struct og_config *cfg, struct sockaddr_storage *ss,
                                 socklen_t *len, struct main_tls *tls, struct og_error *err)
{
    const char *cert = cfg->console.tls_cert_file, *key = cfg->console.tls_key_file;
    bool loopback = false;
    enum og_status st;

    if (*cfg->console.listen == '\0')
        return og_error_set(err, OG_ERR_CONFIG, false, "console.listen: give ADDR:PORT");
    st = main_addr(cfg->console.listen, ss, len, &loopback, err);
    if (st != OG_OK)
        return st;
    if ((*cert == '\0') != (*key == '\0'))
        return og_error_set(err, OG_ERR_CONFIG, false,
                            "console.tls_cert_file and console.tls_key_file go together");
    if (*cert != '\0') {
        tls->cert = main_pem("console.tls_cert_file", cert, err);
        if (tls->cert == NULL)
            return OG_ERR_CONFIG;
        tls->key = main_pem("console.tls_key_file", key, err);
        if (tls->key == NULL)
            return OG_ERR_CONFIG;
    } else if (!loopback && !cfg->console.allow_plain_http) {
        return og_error_set(err, OG_ERR_CONFIG, false,
                            "console.listen %s is not loopback and no TLS is configured: give "
                            "console.tls_cert_file and console.tls_key_file, or put a TLS proxy "
                            "in front and set console.allow_plain_http = true",
                            cfg->console.listen);
    }
    return OG_OK;
}

/* ---- libmicrohttpd glue ------------------------------------------------------------------ */

struct main_upload {
    char *buf;
    size_t len;
    bool too_large;
    int64_t start_ms;
};

static const char *main_get(void *ctx, enum console_kind kind, const char *name)
{
    enum MHD_ValueKind k = kind == CONSOLE_ARG      ? MHD_GET_ARGUMENT_KIND
                           : kind == CONSOLE_HEADER ? MHD_HEADER_KIND
                                                    : MHD_COOKIE_KIND;
    return MHD_lookup_connection_value((struct MHD_Connection *)ctx, k, name);
}

static void main_peer(struct MHD_Connection *conn, char *buf, size_t size)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci != NULL ? ci->client_addr : NULL;

    snprintf(buf, size, "unknown");
    if (sa != NULL && sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf, (socklen_t)size);
    else if (sa != NULL && sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, buf, (socklen_t)size);
}

/* Behind a reverse proxy on this host every request comes from loopback: the address the login
 * rate limit counts is then the proxy's last X-Forwarded-For entry (the one it added itself).
 * Only a peer on loopback is believed: anyone else could write the header. */
static void main_forwarded(struct MHD_Connection *conn, char *peer, size_t size)
{
    const char *xff, *last;
    size_t n;

    if (strncmp(peer, "127.", 4) != 0 && strcmp(peer, "::1") != 0)
        return;
    xff = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Forwarded-For");
    if (xff == NULL)
        return;
    last = strrchr(xff, ',');
    last = last != NULL ? last + 1 : xff;
    last += strspn(last, " ");
    n = strspn(last, "0123456789abcdefABCDEF.:");
    if (n == 0 || n >= size || last[n] != '\0')
        return;
    memcpy(peer, last, n);
    peer[n] = '\0';
}

static enum MHD_Result main_queue(struct MHD_Connection *conn, struct console_resp *r)
{
    struct MHD_Response *resp;
    enum MHD_Result rc;

    if (r->body != NULL)
        resp = MHD_create_response_from_buffer(r->len, r->body, MHD_RESPMEM_MUST_FREE);
    else
        resp =
            MHD_create_response_from_buffer(r->len, (void *)r->static_body, MHD_RESPMEM_PERSISTENT);
    if (resp == NULL) {
        free(r->body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                            r->content_type != NULL ? r->content_type : "text/plain");
    /* No other origin's script, frame or form: the pages load only what the binary serves. */
    MHD_add_response_header(resp, "Content-Security-Policy",
                            "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; "
                            "form-action 'self'; base-uri 'none'");
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "X-Frame-Options", "DENY");
    MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL,
                            r->cacheable ? "no-cache" : "no-store");
    if (r->set_cookie[0] != '\0')
        MHD_add_response_header(resp, MHD_HTTP_HEADER_SET_COOKIE, r->set_cookie);
    rc = MHD_queue_response(conn, r->status, resp);
    MHD_destroy_response(resp);
    return rc;
}

static enum MHD_Result main_handle(void *cls, struct MHD_Connection *conn, const char *url,
                                   const char *method, const char *version, const char *upload_data,
                                   size_t *upload_data_size, void **con_cls)
{
    struct console *c = cls;
    struct main_upload *up = *con_cls;
    struct console_resp resp;
    struct console_req req;
    char peer[64];
    enum MHD_Result rc;
    double secs;

    if (up == NULL) {
        up = calloc(1, sizeof(*up));
        if (up == NULL)
            return MHD_NO;
        up->start_ms = console_now_ms();
        *con_cls = up;
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        size_t n = *upload_data_size;
        if (!up->too_large && up->len + n <= MAIN_BODY_MAX) {
            char *grown = realloc(up->buf, up->len + n + 1);
            if (grown == NULL)
                return MHD_NO;
            up->buf = grown;
            memcpy(up->buf + up->len, upload_data, n);
            up->len += n;
        } else {
            up->too_large = true;
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    /* Plain metrics and health, no session: what a scraper and a probe need. */
    if (strcmp(url, "/metrics") == 0 || strcmp(url, "/healthz") == 0) {
        memset(&resp, 0, sizeof(resp));
        resp.status = 200;
        if (strcmp(url, "/healthz") == 0) {
            resp.content_type = "text/plain";
            resp.static_body = "ok\n";
            resp.len = 3;
        } else {
            size_t need = metrics_render(NULL, 0);
            resp.body = malloc(need + 1);
            if (resp.body == NULL)
                return MHD_NO;
            resp.len = metrics_render(resp.body, need + 1);
            resp.content_type = "text/plain; version=0.0.4";
        }
        return main_queue(conn, &resp);
    }
    main_peer(conn, peer, sizeof(peer));
    main_forwarded(conn, peer, sizeof(peer));
    req = (struct console_req){.method = method,
                               .path = url,
                               .peer = peer,
                               .body = up->buf,
                               .body_len = up->len,
                               .body_too_large = up->too_large,
                               .get = main_get,
                               .ctx = conn};
    console_handle(c, &req, &resp);
    secs = (double)(console_now_ms() - up->start_ms) / 1000.0;
    metric_observe(c->m.seconds, secs);
    if (resp.status >= 100 && resp.status < 600)
        metric_inc(c->m.requests[resp.status / 100 - 1], 1);
    log_debug("console_request", "method=%s path=%s status=%u ms=%.1f peer=%s", method, url,
              resp.status, secs * 1000.0, peer);
    rc = main_queue(conn, &resp);
    (void)version;
    return rc;
}

/* Frees a request's upload, wiping it first: a login's body holds a password. */
static void main_done(void *cls, struct MHD_Connection *conn, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    struct main_upload *up = *con_cls;

    (void)cls;
    (void)conn;
    (void)toe;
    if (up == NULL)
        return;
    if (up->buf != NULL)
        explicit_bzero(up->buf, up->len);
    free(up->buf);
    free(up);
    *con_cls = NULL;
}

static void main_mhd_log(void *cls, const char *fmt, va_list ap)
{
    char msg[400], q[450];

    (void)cls;
    vsnprintf(msg, sizeof(msg), fmt, ap);
    msg[strcspn(msg, "\n")] = '\0';
    log_warn("console_http_error", "error=%s", log_quote(q, sizeof(q), msg));
}

static struct MHD_Daemon *main_start(struct console *c, const struct og_config *cfg,
                                     const struct sockaddr_storage *ss, const struct main_tls *tls)
{
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_AUTO | MHD_USE_ERROR_LOG;

    if (ss->ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    if (tls->cert != NULL) {
        flags |= MHD_USE_TLS;
        return MHD_start_daemon(flags, 0, NULL, NULL, main_handle, c, MHD_OPTION_EXTERNAL_LOGGER,
                                main_mhd_log, NULL, MHD_OPTION_NOTIFY_COMPLETED, main_done, NULL,
                                MHD_OPTION_SOCK_ADDR, (const struct sockaddr *)ss,
                                MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->console.max_connections,
                                MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)MAIN_PER_IP,
                                MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->console.timeout_s,
                                MHD_OPTION_HTTPS_MEM_CERT, tls->cert, MHD_OPTION_HTTPS_MEM_KEY,
                                tls->key, MHD_OPTION_END);
    }
    return MHD_start_daemon(flags, 0, NULL, NULL, main_handle, c, MHD_OPTION_EXTERNAL_LOGGER,
                            main_mhd_log, NULL, MHD_OPTION_NOTIFY_COMPLETED, main_done, NULL,
                            MHD_OPTION_SOCK_ADDR, (const struct sockaddr *)ss,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->console.max_connections,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)MAIN_PER_IP,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->console.timeout_s,
                            MHD_OPTION_END);
}

int main(int argc, char **argv)
{
    struct og_config cfg = {0};
    struct opt_args args = {0};
    struct og_error err = {0};
    struct console c;
    struct sockaddr_storage ss;
    socklen_t sslen = 0;
    struct main_tls tls = {0};
    struct MHD_Daemon *d = NULL;
    const union MHD_DaemonInfo *info;
    int code = EXIT_OK;

    memset(&c, 0, sizeof(c));
    log_init(CONSOLE_PROG, LOG_LVL_INFO);
    if (opt_parse(&args, main_opts, NULL, CFG_PROG_CONSOLE, argc - 1, argv + 1, &err) != OG_OK) {
        opt_error_print(CONSOLE_PROG, NULL, &err);
        opt_args_free(&args);
        return EXIT_USAGE;
    }
    if (opt_flag(&args, "help")) {
        main_usage(stdout);
        goto out;
    }
    if (opt_flag(&args, "version")) {
        printf(CONSOLE_PROG " %s\n", OG_VERSION);
        goto out;
    }
    if (opt_flag(&args, "list-settings")) {
        code =
            cfg_doc_list(stdout, CFG_PROG_CONSOLE, opt_arg(&args, "list-settings"), &err) == OG_OK
                ? EXIT_OK
                : EXIT_USAGE;
        if (code != EXIT_OK)
            opt_error_print(CONSOLE_PROG, NULL, &err);
        goto out;
    }
    if (args.npos > 0) {
        fprintf(stderr, CONSOLE_PROG ": unexpected argument %s (see " CONSOLE_PROG " --help)\n",
                args.pos[0]);
        code = EXIT_USAGE;
        goto out;
    }
    if (opt_configure(&cfg, &args, &err) != OG_OK ||
        main_check(&cfg, &ss, &sslen, &tls, &err) != OG_OK) {
        opt_error_print(CONSOLE_PROG, &cfg, &err);
        code = EXIT_USAGE;
        goto out;
    }
    log_set_level((enum log_level)log_level_parse(cfg.log_level));
    if (opt_flag(&args, "check-config")) {
        cfg_dump(&cfg, stdout);
        goto out;
    }
    c.cfg = &cfg;
    c.secure_cookie = true;
    c.stop = &signals_stop;
    limiter_init(&c.limiter, cfg.console.login_failures);
    if (session_store_init(&c.sessions, cfg.console.max_sessions, cfg.console.session_idle_s,
                           &err) != OG_OK) {
        opt_error_print(CONSOLE_PROG, &cfg, &err);
        code = EXIT_RUNTIME;
        goto out;
    }
    console_metrics_register(&c.m);
    signals_install();
    d = main_start(&c, &cfg, &ss, &tls);
    if (d == NULL) {
        log_error("console_listen_failed", "listen=%s error=%s", cfg.console.listen,
                  strerror(errno));
        code = EXIT_RUNTIME;
        goto out;
    }
    info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    log_info("console_listening", "listen=%s port=%u tls=%s", cfg.console.listen,
             info != NULL ? (unsigned)info->port : 0u, tls.cert != NULL ? "on" : "off");
    while (!signals_stop) {
        struct timespec tick = {0, 200 * 1000 * 1000};
        static int64_t last_sweep;
        int64_t now = console_now_ms();

        nanosleep(&tick, NULL);
        if (now - last_sweep >= 1000) {
            metric_set(c.m.sessions, session_sweep(&c.sessions, now));
            last_sweep = now;
        }
    }
    log_info("console_stopping", "sessions=%d", session_sweep(&c.sessions, console_now_ms()));
    /* Waits for the connection threads; each ends within its statement's timeout. */
    MHD_stop_daemon(d);
    session_store_free(&c.sessions);
out:
    main_tls_free(&tls);
    opt_args_free(&args);
    cfg_free(&cfg);
    return code;
}
