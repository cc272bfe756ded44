/* The systemd watchdog against a database that never answers.
 *
 * The consumer runs as systemd would run it (NOTIFY_SOCKET, WATCHDOG_USEC of the unit's
 * WatchdogSec) with due cancels in Kafka and a database address whose port accepts TCP
 * connections and never answers (a listening socket nobody accepts from: every connection
 * attempt waits the whole connect_timeout). While it tries to reconnect again and again, the
 * longest gap between two watchdog pings stays below WatchdogSec/2, the interval systemd asks
 * for, so systemd never kills it for a database outage. The units' WatchdogSec is at least
 * the budget consumer/consumer.h works out. */
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "consumer/consumer.h"
#include "ct.h"
#include "support/testutil.h"

/* Long enough for three connection attempts of 10 s after READY on an idle machine. */
#define OBSERVE_MS 32000
/* The watch goes on past OBSERVE_MS until the consumer has failed OBSERVE_STEPS batch steps (on a
 * machine so loaded that the consumer gets little CPU, an attempt takes longer than its 10 s),
 * up to OBSERVE_MAX_MS after READY: the gaps are measured over several attempts either way. */
#define OBSERVE_STEPS  2
#define OBSERVE_MAX_MS 90000

/* WatchdogSec of a unit file in deploy/systemd, in seconds. */
static long unit_watchdog_s(const char *unit)
{
    char path[512];
    char *text, *at;
    long s;

    snprintf(path, sizeof(path), "%s/deploy/systemd/%s", OG_SOURCE_DIR, unit);
    text = testutil_slurp(path);
    assert_non_null(text);
    at = strstr(text, "\nWatchdogSec=");
    assert_non_null(at);
    s = strtol(at + strlen("\nWatchdogSec="), NULL, 10);
    free(text);
    return s;
}

static void test_pings_while_database_unreachable(void **state)
{
    static struct ct t; /* static: ct_cleanup may tear it down after a failure */
    struct ct_proc p;
    struct sockaddr_in in = {0};
    struct sockaddr_un un = {0};
    socklen_t len = sizeof(in);
    char db[160], notify[108], usec[32], buf[256], order[32];
    int tcp, dgram, pings = 0;
    int64_t ready = -1, last = -1, gap_max = 0, start;
    long watchdog_s = unit_watchdog_s("ordergate-consumer.service");

    (void)state;
    assert_int_equal(unit_watchdog_s("ordergate-consumer@.service"), watchdog_s);
    if (watchdog_s < CONSUMER_WATCHDOG_MIN_S)
        fail_msg("WatchdogSec=%ld is below the consumer's budget of %d s (consumer/consumer.h)",
                 watchdog_s, CONSUMER_WATCHDOG_MIN_S);

    /* Accepts connections into its backlog and never answers the startup packet. */
    tcp = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(tcp >= 0);
    in.sin_family = AF_INET;
    in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(tcp, (struct sockaddr *)&in, sizeof(in)), 0);
    assert_int_equal(listen(tcp, 64), 0);
    assert_int_equal(getsockname(tcp, (struct sockaddr *)&in, &len), 0);
    snprintf(db, sizeof(db), "host=127.0.0.1 port=%d dbname=ordergate user=ordergate",
             (int)ntohs(in.sin_port));

    /* systemd's end of the notification socket. */
    snprintf(notify, sizeof(notify), "/tmp/og_notify_%d.sock", (int)getpid());
    unlink(notify);
    dgram = socket(AF_UNIX, SOCK_DGRAM, 0);
    assert_true(dgram >= 0);
    un.sun_family = AF_UNIX;
    snprintf(un.sun_path, sizeof(un.sun_path), "%s", notify);
    assert_int_equal(bind(dgram, (struct sockaddr *)&un, sizeof(un)), 0);
    {
        struct timeval tv = {0, 200 * 1000};
        setsockopt(dgram, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    }

    ct_setup(&t, "cwdog", 2, 0);
    for (int i = 1; i <= 20; i++) {
        snprintf(order, sizeof(order), "W-%d", i);
        ct_send_cancel(&t, t.topic, -1, order, ct_now_ms() - 1000);
    }
    ct_flush(&t);

    snprintf(usec, sizeof(usec), "%lld", (long long)watchdog_s * 1000000LL);
    setenv("NOTIFY_SOCKET", notify, 1);
    setenv("WATCHDOG_USEC", usec, 1);
    unsetenv("WATCHDOG_PID");
    ct_db_override = db;
    ct_spawn(&t, &p, "wd", t.topic, NULL);
    ct_db_override = NULL;
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");

    start = ct_now_ms();
    while (ready < 0 ? ct_now_ms() - start < 15000 + OBSERVE_MS
                     : ct_now_ms() - ready < OBSERVE_MS ||
                           (ct_now_ms() - ready < OBSERVE_MAX_MS &&
                            ct_log_count(&p, "event=batch_db_retry") < OBSERVE_STEPS)) {
        ssize_t n = recv(dgram, buf, sizeof(buf) - 1, 0);
        int64_t now = ct_now_ms();
        if (n <= 0)
            continue;
        buf[n] = '\0';
        if (strstr(buf, "READY=1") != NULL && ready < 0)
            ready = last = now;
        if (strstr(buf, "WATCHDOG=1") != NULL && ready >= 0) {
            if (now - last > gap_max)
                gap_max = now - last;
            last = now;
            pings++;
        }
    }
    /* The gap still open at the end counts too. */
    if (ready >= 0 && ct_now_ms() - last > gap_max)
        gap_max = ct_now_ms() - last;
    printf("# %d pings in %lld ms, longest gap %lld ms, WatchdogSec/2 = %ld ms, %d failed "
           "database steps\n",
           pings, ready >= 0 ? (long long)(ct_now_ms() - ready) : 0LL, (long long)gap_max,
           watchdog_s * 500, ct_log_count(&p, "event=batch_db_retry"));
    if (ready < 0)
        fail_msg("no READY=1 within %d ms (log %s)", 15000 + OBSERVE_MS, p.log);
    /* The consumer was trying: several batch attempts, each a connection attempt of 10 s. */
    if (ct_log_count(&p, "event=batch_db_retry") < OBSERVE_STEPS)
        fail_msg("fewer than %d failed database steps in %d ms after READY (log %s)", OBSERVE_STEPS,
                 OBSERVE_MAX_MS, p.log);
    assert_true(ct_log_has(&p, "event=stall_begin"));
    if (gap_max >= watchdog_s * 500)
        fail_msg("longest gap between watchdog pings %lld ms, WatchdogSec/2 is %ld ms (log %s)",
                 (long long)gap_max, watchdog_s * 500, p.log);
    /* Nothing reached the (real) test database. */
    assert_int_equal(ct_scalar(&t, "SELECT count(*) FROM ordergate.status_log"), 0);

    kill(p.pid, SIGKILL);
    ct_wait_exit(&p, 10000);
    close(dgram);
    close(tcp);
    unlink(notify);
    ct_teardown(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_pings_while_database_unreachable, ct_cleanup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
