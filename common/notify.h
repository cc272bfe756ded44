/* systemd readiness and watchdog notifications (the sd_notify protocol: one
 * datagram to the socket named by $NOTIFY_SOCKET). Without that variable
 * every call is a no-op, so the binaries behave the same outside systemd. */
#ifndef OG_COMMON_NOTIFY_H
#define OG_COMMON_NOTIFY_H

#include <stdint.h>

/* Sends one state string such as "READY=1" or "STATUS=consuming".
 * Returns 1 when sent, 0 when not running under systemd, -1 on error. */
int notify_send(const char *state);
/* Microseconds between watchdog pings systemd expects (half of
 * $WATCHDOG_USEC), or 0 when no watchdog is configured for this process. */
uint64_t notify_watchdog_interval_us(void);

#endif
