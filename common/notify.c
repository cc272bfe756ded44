#include "common/notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

/* The longest a notification waits for room in the receiver's queue. */
#define NOTIFY_SEND_TIMEOUT_MS 100

int notify_send(const char *state)
{
    const char *path = getenv("NOTIFY_SOCKET");
    struct sockaddr_un addr;
    socklen_t len;
    size_t plen;
    int fd, rc = -1;

    if (path == NULL || *path == '\0')
        return 0;
    plen = strlen(path);
    if ((path[0] != '/' && path[0] != '@') || plen >= sizeof(addr.sun_path))
        return -1;
    memset(&addr, 0, sizeof(addr));
    addr.sun_family = AF_UNIX;
    memcpy(addr.sun_path, path, plen);
    if (path[0] == '@') /* abstract namespace socket */
        addr.sun_path[0] = '\0';
    len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + plen);
    fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    {
        /* A receiver whose queue is full (a busy or stuck manager) makes a datagram send wait:
         * bounded, so a notification never stops the loop that sends it. A ping lost this way
         * is followed by the next one within a second. */
        struct timeval tv = {0, NOTIFY_SEND_TIMEOUT_MS * 1000};
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    }
    if (sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&addr, len) >= 0)
        rc = 1;
    close(fd);
    return rc;
}

uint64_t notify_watchdog_interval_us(void)
{
    const char *usec = getenv("WATCHDOG_USEC");
    const char *pid = getenv("WATCHDOG_PID");
    char *end = NULL;
    unsigned long long v;

    if (usec == NULL || *usec == '\0')
        return 0;
    /* WATCHDOG_PID, when set, names the process the watchdog is meant for. */
    if (pid != NULL && *pid != '\0' && strtol(pid, NULL, 10) != (long)getpid())
        return 0;
    errno = 0;
    v = strtoull(usec, &end, 10);
    if (errno != 0 || end == usec || *end != '\0' || v == 0)
        return 0;
    return (uint64_t)v / 2;
}
