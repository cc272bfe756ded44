/* Retry in one place: db_call() repeats a gate call after a deadlock, a
 * terminated backend or a connection lost with the reply, and the gate's
 * answer stays consistent (cancelled, or already_cancelled when the first
 * attempt had committed) with every side effect applied exactly once. Each
 * fault is produced deterministically with real sessions: a lock holder, a
 * deadlock cycle, pg_terminate_backend(), and a TCP proxy that drops the
 * reply of a committed call. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "gate/gate_fixture.h"
#include "support/testutil.h"

/* A claim_cancel run in its own thread, so the test can act while it waits. */
struct bg_cancel {
    pthread_t thread;
    struct db *db;
    const char *const *nos;
    size_t n;
    struct gate_cancel_row rows[8];
    size_t nrows;
    enum og_status st;
    struct og_error err;
};

static void *bg_cancel_main(void *arg)
{
    struct bg_cancel *b = arg;

    b->st = gate_claim_cancel(b->db, b->nos, b->n, GATE_SRC_TIMEOUT_CONSUMER, b->rows, &b->nrows,
                              &b->err);
    return NULL;
}

static void bg_cancel_start(struct bg_cancel *b, struct db *db, const char *const *nos, size_t n)
{
    memset(b, 0, sizeof(*b));
    b->db = db;
    b->nos = nos;
    b->n = n;
    assert_int_equal(pthread_create(&b->thread, NULL, bg_cancel_main, b), 0);
}

/* Joins and asserts every order came back with `expected`. */
static void bg_cancel_finish(struct bg_cancel *b, enum gate_outcome expected)
{
    assert_int_equal(pthread_join(b->thread, NULL), 0);
    if (b->st != OG_OK)
        fail_msg("claim_cancel failed: %s (sqlstate %s)", b->err.msg, b->err.sqlstate);
    assert_int_equal(b->nrows, b->n);
    for (size_t i = 0; i < b->nrows; i++)
        if (b->rows[i].outcome != expected)
            fail_msg("%s: %s, expected %s", b->rows[i].order_no,
                     gate_outcome_str(b->rows[i].outcome), gate_outcome_str(expected));
}

/* Waits until a backend of application `app` in this database, other than
 * `not_pid`, waits for a lock; returns its pid. */
static int wait_lock_waiter(struct gfx *g, const char *app, int not_pid)
{
    char pid[16];

    snprintf(pid, sizeof(pid), "%d", not_pid);
    for (int i = 0; i < 1000; i++) {
        long found = gfx_long(g->sql,
                              "SELECT coalesce(max(pid), 0) FROM pg_stat_activity "
                              "WHERE datname = current_database() AND application_name = $1 "
                              "AND wait_event_type = 'Lock' AND pid <> $2::int",
                              app, pid, NULL);
        if (found != 0)
            return (int)found;
        testutil_sleep_ms(10);
    }
    fail_msg("no backend of %s started waiting for a lock", app);
    return 0;
}

static void terminate(struct gfx *g, int pid)
{
    char p[16];

    snprintf(p, sizeof(p), "%d", pid);
    assert_int_equal(gfx_long(g->sql, "SELECT pg_terminate_backend($1::int)::int", p, NULL), 1);
    for (int i = 0; i < 500; i++) {
        if (gfx_long(g->sql, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1::int", p,
                     NULL) == 0)
            return;
        testutil_sleep_ms(10);
    }
    fail_msg("backend %d did not exit", pid);
}

/* Two overdue orders sharing a SKU, one with a coupon. */
static void seed(struct gfx *g)
{
    gfx_stock(g, "s-a", 100);
    gfx_stock(g, "s-b", 100);
    gfx_coupon(g, "c1");
    gfx_place(g, "A", 1000, "[{\"sku\":\"s-a\",\"qty\":2},{\"sku\":\"s-b\",\"qty\":3}]", "c1",
              "-1 minute");
    gfx_place(g, "B", 1000, "[{\"sku\":\"s-b\",\"qty\":5}]", NULL, "-1 minute");
}

/* Exactly one cancellation's worth of side effects for A and B, done by `actor`. */
static void assert_effects_once(struct gfx *g, const char *actor)
{
    char buf[64];

    assert_int_equal(
        gfx_long(g->sql, "SELECT available FROM ordergate.inventory WHERE sku = 's-a'", NULL), 100);
    assert_int_equal(
        gfx_long(g->sql, "SELECT available FROM ordergate.inventory WHERE sku = 's-b'", NULL), 100);
    assert_string_equal(gfx_text(g->sql, buf, sizeof(buf),
                                 "SELECT state FROM ordergate.coupons WHERE coupon_id = 'c1'",
                                 NULL),
                        "available");
    assert_int_equal(gfx_long(g->sql,
                              "SELECT count(*) FROM ordergate.status_log WHERE order_no IN "
                              "('A', 'B') AND to_status = 'cancelled' AND actor = $1",
                              actor, NULL),
                     2);
    assert_int_equal(gfx_long(g->sql, "SELECT count(*) FROM ordergate.status_log", NULL), 2);
    assert_int_equal(gfx_long(g->sql,
                              "SELECT count(*) FROM ordergate.outbox WHERE event_type = "
                              "'order_cancelled' AND order_no IN ('A', 'B')",
                              NULL),
                     2);
    assert_int_equal(gfx_long(g->sql, "SELECT count(*) FROM ordergate.outbox", NULL), 2);
    gfx_reconcile_clean(g->sql);
}

/* The backend of an idle client is terminated; the next call reconnects
 * (and prepares its statement again) on its first retry. */
static void test_retry_after_idle_terminate(void **state)
{
    struct gfx *g = gfx_new("gretry_idle");
    const char *nos[] = {"A", "B"};
    struct gate_cancel_row rows[2];
    size_t nrows = 0;
    struct og_error err = {0};
    int pid;

    (void)state;
    seed(g);
    assert_int_equal(gfx_cancel1(g, "warm-up", GATE_SRC_TIMEOUT_CONSUMER), GATE_NOT_FOUND);
    pid = PQbackendPID(db_conn(g->db));
    terminate(g, pid);

    assert_int_equal(
        gate_claim_cancel(g->db, nos, 2, GATE_SRC_TIMEOUT_CONSUMER, rows, &nrows, &err), OG_OK);
    assert_int_equal(nrows, 2);
    assert_int_equal(rows[0].outcome, GATE_CANCELLED);
    assert_int_equal(rows[1].outcome, GATE_CANCELLED);
    assert_int_not_equal(PQbackendPID(db_conn(g->db)), pid);
    /* One retry, not a wasted second one on the dead socket. */
    assert_int_equal(gfx_log_count(g, "event=db_retry ", "stmt=og_claim_cancel", NULL), 1);
    assert_int_equal(gfx_log_count(g, "event=db_retry_exhausted", NULL), 0);
    assert_effects_once(g, GFX_APP);
    gfx_free(g);
}

/* The backend is terminated while the claim waits for a row lock held by
 * another session (a stock row: a locked order row is skipped and answered
 * busy, see gate_outcomes): the killed attempt rolls back whole, the retry
 * waits again on a new backend, and wins once the lock is released. */
static void test_retry_terminate_while_waiting(void **state)
{
    struct gfx *g = gfx_new("gretry_wait");
    const char *nos[] = {"A", "B"};
    struct bg_cancel bg;
    PGconn *locker;
    int pid, pid2;

    (void)state;
    seed(g);
    locker = testdb_connect(&g->t);
    testdb_exec(locker, "BEGIN");
    testdb_exec(locker, "SELECT 1 FROM ordergate.inventory WHERE sku = 's-a' FOR UPDATE");

    bg_cancel_start(&bg, g->db, nos, 2);
    pid = wait_lock_waiter(g, GFX_APP, 0);
    terminate(g, pid);
    /* The retry is back, on another backend, waiting for the same lock. */
    pid2 = wait_lock_waiter(g, GFX_APP, pid);
    assert_int_not_equal(pid2, pid);
    /* Nothing of the killed attempt is visible. */
    assert_int_equal(gfx_long(g->sql, "SELECT count(*) FROM ordergate.status_log", NULL), 0);
    testdb_exec(locker, "ROLLBACK");
    bg_cancel_finish(&bg, GATE_CANCELLED);
    PQfinish(locker);

    assert_true(gfx_log_count(g, "event=db_retry ", "stmt=og_claim_cancel", NULL) >= 1);
    assert_effects_once(g, GFX_APP);
    gfx_free(g);
}

/* A real deadlock: the claim holds order A and waits for the stock row of
 * s-b; another session holds s-b and asks for order A. The claim is the
 * victim (shorter deadlock_timeout), gets 40P01, and db_call repeats it. */
static void test_retry_after_deadlock(void **state)
{
    struct gfx *g = gfx_new("gretry_deadlock");
    const char *nos[] = {"A", "B"};
    struct bg_cancel bg;
    PGconn *locker;
    PGresult *res;
    char sql[160];

    (void)state;
    seed(g);
    /* The client's backend checks for deadlocks after 2 s of waiting (time
     * for this thread to close the cycle even on a busy machine), the
     * locker's only after 30 s, so the cycle is always broken on our side. */
    snprintf(sql, sizeof(sql), "ALTER DATABASE %s SET deadlock_timeout = '2s'", g->t.name);
    testdb_exec(g->sql, sql);
    db_free(g->db);
    /* The repeat waits 1 to 2 s: since a timeout cancel skips a locked order row, a repeat that
     * came before the locker's ROLLBACK below would find order A still locked by it and answer
     * busy (testdb_open's 5 to 10 ms lost that race on a loaded machine). */
    g->db = db_new(g->t.conninfo, NULL, GFX_APP,
                   &(struct db_retry){.max_attempts = 5, .base_ms = 2000, .cap_ms = 2000}, NULL);
    assert_non_null(g->db);
    locker = testdb_connect(&g->t);
    testdb_exec(locker, "SET deadlock_timeout = '30s'");
    testdb_exec(locker, "BEGIN");
    testdb_exec(locker, "SELECT 1 FROM ordergate.inventory WHERE sku = 's-b' FOR UPDATE");

    bg_cancel_start(&bg, g->db, nos, 2);
    (void)wait_lock_waiter(g, GFX_APP, 0);
    /* Close the cycle: the locker now wants order A, which the claim holds. */
    assert_int_equal(
        PQsendQuery(locker, "SELECT 1 FROM ordergate.orders WHERE order_no = 'A' FOR UPDATE"), 1);
    res = PQgetResult(locker);
    if (PQresultStatus(res) != PGRES_TUPLES_OK)
        fail_msg("the locker was the deadlock victim: %s", PQresultErrorMessage(res));
    PQclear(res);
    assert_null(PQgetResult(locker));
    /* The claim's first attempt is gone; its retry now waits for order A. */
    testdb_exec(locker, "ROLLBACK");
    bg_cancel_finish(&bg, GATE_CANCELLED);
    PQfinish(locker);

    assert_int_equal(
        gfx_log_count(g, "event=db_retry ", "stmt=og_claim_cancel", "sqlstate=40P01", NULL), 1);
    assert_effects_once(g, GFX_APP);
    gfx_free(g);
}

/* ------------------------------------------------------------------------
 * A TCP proxy between the client and PostgreSQL that, when armed, drops the
 * connection as soon as the server answers, instead of forwarding the
 * answer. libpq sends Bind/Execute/Sync together and the server sends the
 * (small) result only after the commit, so the client loses the reply of a
 * call that did commit: the "unknown outcome" every retry must survive. */

#define PROXY_PAIRS 4

struct proxy {
    int listen_fd;
    int port;
    int server_port;
    pthread_t thread;
    atomic_int armed;
    atomic_int stop;
    atomic_int drops;
    int fds[PROXY_PAIRS][2]; /* [client, server], -1 when free */
};

static int send_all(int fd, const char *buf, ssize_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, buf, (size_t)n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        buf += w;
        n -= w;
    }
    return 0;
}

static void proxy_close_pair(struct proxy *p, int i)
{
    close(p->fds[i][0]);
    close(p->fds[i][1]);
    p->fds[i][0] = p->fds[i][1] = -1;
}

static void proxy_accept(struct proxy *p)
{
    struct sockaddr_in addr = {.sin_family = AF_INET};
    int c = accept(p->listen_fd, NULL, NULL), s;

    if (c < 0)
        return;
    s = socket(AF_INET, SOCK_STREAM, 0);
    addr.sin_port = htons((uint16_t)p->server_port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (s < 0 || connect(s, (struct sockaddr *)&addr, sizeof(addr)) != 0) {
        close(c);
        if (s >= 0)
            close(s);
        return;
    }
    for (int i = 0; i < PROXY_PAIRS; i++)
        if (p->fds[i][0] < 0) {
            p->fds[i][0] = c;
            p->fds[i][1] = s;
            return;
        }
    close(c);
    close(s);
}

static void *proxy_main(void *arg)
{
    struct proxy *p = arg;
    char buf[16384];

    while (!atomic_load(&p->stop)) {
        struct pollfd pfd[1 + 2 * PROXY_PAIRS];
        int map[1 + 2 * PROXY_PAIRS], n = 0;

        pfd[n] = (struct pollfd){.fd = p->listen_fd, .events = POLLIN};
        map[n++] = -1;
        for (int i = 0; i < PROXY_PAIRS; i++)
            for (int side = 0; side < 2; side++)
                if (p->fds[i][side] >= 0) {
                    pfd[n] = (struct pollfd){.fd = p->fds[i][side], .events = POLLIN};
                    map[n++] = i * 2 + side;
                }
        if (poll(pfd, (nfds_t)n, 50) <= 0)
            continue;
        for (int k = 0; k < n; k++) {
            int i, side;
            ssize_t r;

            if (!(pfd[k].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            if (map[k] < 0) {
                proxy_accept(p);
                continue;
            }
            i = map[k] / 2;
            side = map[k] % 2;
            if (p->fds[i][side] < 0)
                continue;
            r = recv(p->fds[i][side], buf, sizeof(buf), 0);
            if (r <= 0) {
                proxy_close_pair(p, i);
                continue;
            }
            if (side == 1 && atomic_exchange(&p->armed, 0)) {
                /* The server answered: drop the answer and the connection. */
                proxy_close_pair(p, i);
                atomic_fetch_add(&p->drops, 1);
                continue;
            }
            if (send_all(p->fds[i][1 - side], buf, r) != 0)
                proxy_close_pair(p, i);
        }
    }
    for (int i = 0; i < PROXY_PAIRS; i++)
        if (p->fds[i][0] >= 0)
            proxy_close_pair(p, i);
    return NULL;
}

static void proxy_start(struct proxy *p)
{
    struct sockaddr_in addr = {.sin_family = AF_INET};
    socklen_t len = sizeof(addr);
    const char *pgport = getenv("PGPORT");

    memset(p, 0, sizeof(*p));
    for (int i = 0; i < PROXY_PAIRS; i++)
        p->fds[i][0] = p->fds[i][1] = -1;
    if (pgport == NULL || atoi(pgport) <= 0)
        fail_msg("PGPORT is not set; start PostgreSQL with deploy/local/services.sh up");
    p->server_port = atoi(pgport);
    p->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(p->listen_fd >= 0);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(p->listen_fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
    assert_int_equal(listen(p->listen_fd, 8), 0);
    assert_int_equal(getsockname(p->listen_fd, (struct sockaddr *)&addr, &len), 0);
    p->port = ntohs(addr.sin_port);
    assert_int_equal(pthread_create(&p->thread, NULL, proxy_main, p), 0);
}

static void proxy_stop(struct proxy *p)
{
    atomic_store(&p->stop, 1);
    pthread_join(p->thread, NULL);
    close(p->listen_fd);
}

static void test_retry_after_lost_reply(void **state)
{
    struct gfx *g = gfx_new("gretry_lost");
    const char *nos[] = {"A", "B"};
    struct gate_cancel_row rows[2];
    size_t nrows = 0;
    struct og_error err = {0};
    struct proxy proxy;
    struct db_retry retry = {.max_attempts = 5, .base_ms = 10, .cap_ms = 100};
    char conninfo[256];
    struct db *db;

    (void)state;
    seed(g);
    proxy_start(&proxy);
    snprintf(conninfo, sizeof(conninfo), "host=127.0.0.1 port=%d %s sslmode=disable", proxy.port,
             g->t.conninfo);
    db = db_new(conninfo, NULL, "test_gate_proxy", &retry, NULL);
    assert_non_null(db);
    /* Prepared once through the proxy, so the armed drop hits the execution. */
    {
        const char *warm[] = {"warm-up"};
        assert_int_equal(
            gate_claim_cancel(db, warm, 1, GATE_SRC_TIMEOUT_CONSUMER, rows, &nrows, &err), OG_OK);
        assert_int_equal(rows[0].outcome, GATE_NOT_FOUND);
    }
    atomic_store(&proxy.armed, 1);
    assert_int_equal(gate_claim_cancel(db, nos, 2, GATE_SRC_TIMEOUT_CONSUMER, rows, &nrows, &err),
                     OG_OK);
    assert_int_equal(atomic_load(&proxy.drops), 1);
    /* The first attempt committed; the repeat is told so and does nothing. */
    assert_int_equal(nrows, 2);
    assert_int_equal(rows[0].outcome, GATE_ALREADY_CANCELLED);
    assert_int_equal(rows[1].outcome, GATE_ALREADY_CANCELLED);
    assert_int_equal(rows[0].status, ORDER_CANCELLED);
    assert_int_equal(gfx_log_count(g, "event=db_retry ", "stmt=og_claim_cancel", NULL), 1);
    assert_effects_once(g, "test_gate_proxy");

    /* The same for a payment: the lost reply of a committed "paid" comes
     * back as duplicate with first_outcome paid, money applied once. */
    {
        struct gate_payment_result pay;
        gfx_place(g, "P", 1000, "[{\"sku\":\"s-a\",\"qty\":1}]", NULL, "10 minutes");
        assert_int_equal(gate_claim_payment(db, "P", "warm-txn", 1, "card", &pay, &err), OG_OK);
        assert_int_equal(pay.outcome, GATE_AMOUNT_MISMATCH);
        atomic_store(&proxy.armed, 1);
        assert_int_equal(gate_claim_payment(db, "P", "T-P", 1000, "card", &pay, &err), OG_OK);
        assert_int_equal(atomic_load(&proxy.drops), 2);
        assert_int_equal(pay.outcome, GATE_DUPLICATE);
        assert_int_equal(pay.first_outcome, GATE_PAID);
        assert_int_equal(pay.status, ORDER_PAID);
        assert_int_equal(gfx_long(g->sql,
                                  "SELECT count(*) FROM ordergate.status_log WHERE order_no = 'P' "
                                  "AND idempotency_key = 'T-P' AND actor = 'test_gate_proxy'",
                                  NULL),
                         1);
        assert_int_equal(gfx_long(g->sql,
                                  "SELECT count(*) FROM ordergate.outbox WHERE order_no = "
                                  "'P' AND event_type = 'order_paid'",
                                  NULL),
                         1);
        assert_int_equal(gfx_long(g->sql,
                                  "SELECT count(*) FROM ordergate.payments WHERE order_no = 'P' "
                                  "AND outcome = 'paid'",
                                  NULL),
                         1);
    }
    db_free(db);
    proxy_stop(&proxy);
    gfx_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_retry_after_idle_terminate, gfx_teardown),
        cmocka_unit_test_teardown(test_retry_terminate_while_waiting, gfx_teardown),
        cmocka_unit_test_teardown(test_retry_after_deadlock, gfx_teardown),
        cmocka_unit_test_teardown(test_retry_after_lost_reply, gfx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
