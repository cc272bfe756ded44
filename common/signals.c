#include "common/signals.h"

#include <string.h>
#include <unistd.h>

volatile sig_atomic_t signals_stop = 0;

static void signals_handler(int sig)
{
    if (signals_stop) {
        /* Second signal: the operator wants out now. _exit is async-signal-safe. */
        _exit(128 + sig);
    }
    signals_stop = 1;
}

void signals_install(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = signals_handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
}
