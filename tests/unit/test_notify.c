/* sd_notify protocol: datagrams reach $NOTIFY_SOCKET; no socket, no effect. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/notify.h"

static void test_without_socket(void **state)
{
    (void)state;
    unsetenv("NOTIFY_SOCKET");
    assert_int_equal(notify_send("READY=1"), 0);
    unsetenv("WATCHDOG_USEC");
    assert_int_equal((long)notify_watchdog_interval_us(), 0);
}

static void test_datagram_arrives(void **state)
{
    char path[64], buf[64];
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    ssize_t n;

    (void)state;
    snprintf(path, sizeof(path), "/tmp/og_notify_%d.sock", (int)getpid());
    unlink(path);
    snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
    setenv("NOTIFY_SOCKET", path, 1);
    assert_int_equal(notify_send("READY=1"), 1);
    n = recv(fd, buf, sizeof(buf) - 1, 0);
    assert_int_equal((int)n, 7);
    buf[n] = '\0';
    assert_string_equal(buf, "READY=1");
    /* A socket path that is neither absolute nor abstract is refused. */
    setenv("NOTIFY_SOCKET", "relative.sock", 1);
    assert_int_equal(notify_send("READY=1"), -1);
    unsetenv("NOTIFY_SOCKET");
    close(fd);
    unlink(path);
}

static void test_watchdog_interval(void **state)
{
    char pid[16];

    (void)state;
    setenv("WATCHDOG_USEC", "20000000", 1);
    unsetenv("WATCHDOG_PID");
    assert_int_equal((long)notify_watchdog_interval_us(), 10000000);
    snprintf(pid, sizeof(pid), "%d", (int)getpid() + 1);
    setenv("WATCHDOG_PID", pid, 1); /* meant for another process */
    assert_int_equal((long)notify_watchdog_interval_us(), 0);
    setenv("WATCHDOG_USEC", "abc", 1);
    unsetenv("WATCHDOG_PID");
    assert_int_equal((long)notify_watchdog_interval_us(), 0);
    unsetenv("WATCHDOG_USEC");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_without_socket),
        cmocka_unit_test(test_datagram_arrives),
        cmocka_unit_test(test_watchdog_interval),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
