/* Console sessions and the login rate limit (console.h). A session is one person's database
 * connection behind a random cookie; it lives until logout, until it has been idle for
 * console.session_idle_s, or until its connection is lost (never reopened: the console keeps no
 * password). Owns the session table; never talks to the database beyond closing a connection. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "console/console.h"

int64_t console_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int session_random_hex(char *out, size_t bytes)
{
    unsigned char raw[64];
    size_t got = 0;

    out[0] = '\0';
    if (bytes > sizeof(raw))
        return -1;
    while (got < bytes) {
        ssize_t n = getrandom(raw + got, bytes - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        got += (size_t)n;
    }
    for (size_t i = 0; i < bytes; i++)
        snprintf(out + 2 * i, 3, "%02x", raw[i]);
    return 0;
}

bool session_token_equal(const char *a, const char *b)
{
    size_t la, lb;
    unsigned char diff = 0;

    if (a == NULL || b == NULL)
        return false;
    la = strlen(a);
    lb = strlen(b);
    if (la != lb || la == 0)
        return false;
    for (size_t i = 0; i < la; i++)
        diff |= (unsigned char)(a[i] ^ b[i]);
    return diff == 0;
}

enum og_status session_store_init(struct console_sessions *s, int max, int idle_s,
                                  struct og_error *err)
{
    s->slot = calloc((size_t)max, sizeof(*s->slot));
    if (s->slot == NULL)
        return og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
    s->max = max;
    s->idle_ms = (int64_t)idle_s * 1000;
    pthread_mutex_init(&s->lock, NULL);
    return OG_OK;
}

static void session_free(struct console_session *ses)
{
    db_free(ses->db);
    pthread_mutex_destroy(&ses->lock);
    free(ses);
}

void session_store_free(struct console_sessions *s)
{
    for (int i = 0; s->slot != NULL && i < s->max; i++)
        if (s->slot[i] != NULL)
            session_free(s->slot[i]);
    free(s->slot);
    s->slot = NULL;
    pthread_mutex_destroy(&s->lock);
}

enum og_status session_add(struct console_sessions *s, const char *login, struct db *db,
                           int64_t now_ms, struct console_session **out, struct og_error *err)
{
    struct console_session *ses = calloc(1, sizeof(*ses));
    int free_slot = -1;

    *out = NULL;
    if (ses == NULL) {
        db_free(db);
        return og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
    }
    ses->db = db;
    if (session_random_hex(ses->token, CONSOLE_TOKEN_HEX / 2) != 0 ||
        session_random_hex(ses->csrf, CONSOLE_TOKEN_HEX / 2) != 0) {
        free(ses);
        db_free(db);
        return og_error_set(err, OG_ERR_IO, false, "no random numbers: %s", strerror(errno));
    }
    snprintf(ses->login, sizeof(ses->login), "%s", login);
    ses->last_ms = now_ms;
    ses->busy = 1;
    pthread_mutex_init(&ses->lock, NULL);
    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < s->max && free_slot < 0; i++)
        if (s->slot[i] == NULL)
            free_slot = i;
    if (free_slot >= 0)
        s->slot[free_slot] = ses;
    pthread_mutex_unlock(&s->lock);
    if (free_slot < 0) {
        session_free(ses);
        return og_error_set(err, OG_ERR_IO, false,
                            "all %d sessions are in use (console.max_sessions)", s->max);
    }
    *out = ses;
    return OG_OK;
}

struct console_session *session_acquire(struct console_sessions *s, const char *token,
                                        int64_t now_ms)
{
    struct console_session *found = NULL;

    if (token == NULL || strlen(token) != CONSOLE_TOKEN_HEX)
        return NULL;
    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < s->max; i++) {
        struct console_session *ses = s->slot[i];
        /* Every slot is compared, so the time taken says nothing about which one matched. */
        if (ses != NULL && session_token_equal(ses->token, token) && found == NULL)
            found = ses;
    }
    if (found != NULL && (found->closed || now_ms - found->last_ms > s->idle_ms)) {
        found->closed = true;
        found = NULL;
    }
    if (found != NULL) {
        found->busy++;
        found->last_ms = now_ms;
    }
    pthread_mutex_unlock(&s->lock);
    return found;
}

void session_release(struct console_sessions *s, struct console_session *ses)
{
    pthread_mutex_lock(&s->lock);
    ses->busy--;
    pthread_mutex_unlock(&s->lock);
}

void session_close(struct console_sessions *s, struct console_session *ses)
{
    pthread_mutex_lock(&s->lock);
    ses->closed = true;
    pthread_mutex_unlock(&s->lock);
}

int session_sweep(struct console_sessions *s, int64_t now_ms)
{
    struct console_session *gone[64];
    int ngone = 0, open = 0;

    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < s->max; i++) {
        struct console_session *ses = s->slot[i];
        if (ses == NULL)
            continue;
        if (now_ms - ses->last_ms > s->idle_ms)
            ses->closed = true;
        if (ses->closed && ses->busy == 0 && ngone < (int)(sizeof(gone) / sizeof(gone[0]))) {
            gone[ngone++] = ses;
            s->slot[i] = NULL;
        } else if (!ses->closed) {
            open++;
        }
    }
    pthread_mutex_unlock(&s->lock);
    /* Closing a connection may wait for the network: outside the table's lock. */
    for (int i = 0; i < ngone; i++)
        session_free(gone[i]);
    return open;
}

void limiter_init(struct console_limiter *l, int per_min)
{
    memset(l, 0, sizeof(*l));
    pthread_mutex_init(&l->lock, NULL);
    l->per_min = per_min;
}

/* The slot of addr, or the stalest one taken over for it. Called under l->lock. */
static int limiter_slot(struct console_limiter *l, const char *addr, int64_t now_ms)
{
    int oldest = 0;

    for (int i = 0; i < CONSOLE_LIMITER_SLOTS; i++) {
        if (strcmp(l->slot[i].addr, addr) == 0)
            return i;
        if (l->slot[i].window_ms < l->slot[oldest].window_ms)
            oldest = i;
    }
    snprintf(l->slot[oldest].addr, sizeof(l->slot[oldest].addr), "%s", addr);
    l->slot[oldest].window_ms = now_ms;
    l->slot[oldest].failures = 0;
    return oldest;
}

bool limiter_allowed(struct console_limiter *l, const char *addr, int64_t now_ms)
{
    bool ok;
    int i;

    pthread_mutex_lock(&l->lock);
    i = limiter_slot(l, addr, now_ms);
    if (now_ms - l->slot[i].window_ms >= 60000) {
        l->slot[i].window_ms = now_ms;
        l->slot[i].failures = 0;
    }
    ok = l->slot[i].failures < l->per_min;
    pthread_mutex_unlock(&l->lock);
    return ok;
}

void limiter_failed(struct console_limiter *l, const char *addr, int64_t now_ms)
{
    int i;

    pthread_mutex_lock(&l->lock);
    i = limiter_slot(l, addr, now_ms);
    if (now_ms - l->slot[i].window_ms >= 60000) {
        l->slot[i].window_ms = now_ms;
        l->slot[i].failures = 0;
    }
    l->slot[i].failures++;
    pthread_mutex_unlock(&l->lock);
}
