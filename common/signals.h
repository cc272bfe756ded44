/* Shutdown signals. The handler only sets a flag; loops poll it with a short
 * timeout. A second SIGTERM/SIGINT while the first is being honoured exits
 * at once (status 130 for SIGINT, 143 for SIGTERM), for an operator who
 * really means it. */
#ifndef OG_COMMON_SIGNALS_H
#define OG_COMMON_SIGNALS_H

#include <signal.h>

extern volatile sig_atomic_t signals_stop;

/* Installs handlers for SIGTERM and SIGINT and ignores SIGPIPE. */
void signals_install(void);

#endif
