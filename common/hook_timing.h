/* How long each of the shop's hooks takes, as the gate measures it (_hooks_run: each call's
 * wall time, failed calls included), turned into a histogram per hook.
 *
 * The gate sends a NOTICE per hook call when the session set ordergate.hook_timing = on:
 *   "ordergate_hook_timing id=<hooks.id> event=<event> ms=<milliseconds> fn=<function>"
 * hook_timing_attach sets that for every transaction of a struct db (db_set_local:
 * set_config(..., true) with each call, never on the session, so nothing leaks to other clients
 * of a pooler whatever database.pool_mode says, and timing works behind a transaction pooler
 * too) and installs, on each connection, a notice receiver that feeds the histogram
 * <metric>{hook="<function>"} (seconds); every other notice is printed to stderr as libpq's
 * default receiver does. */
#ifndef OG_COMMON_HOOK_TIMING_H
#define OG_COMMON_HOOK_TIMING_H

#include <libpq-fe.h>
#include <stdbool.h>

#include "common/db.h"
#include "common/error.h"

/* Distinct hooks with a series of their own; further ones share hook="other". */
#define HOOK_TIMING_SERIES_MAX 32
/* Room for a hook's name (a regprocedure's text). */
#define HOOK_TIMING_FN_MAX 256

struct hook_timing_sample {
    long long id;                /* hooks.id */
    char event[16];              /* cancelled, paid, late_payment */
    double ms;                   /* the call's wall time */
    char fn[HOOK_TIMING_FN_MAX]; /* the function, as the gate names it */
};

/* Parses one notice's primary message. True and *s filled when it is a timing notice in the
 * form above (a trailing newline allowed); false for anything else (*s undefined). */
bool hook_timing_parse(const char *msg, struct hook_timing_sample *s);

/* What hook_timing_connect feeds: the histogram's name (e.g. "ordergate_consumer_hook_seconds")
 * and HELP text. One per process is the usual; it must outlive the connections. */
struct hook_timing {
    const char *metric;
    const char *help;
};

/* Records one sample in metric{hook="<fn>"} (registered on first use, HOOK_TIMING_SERIES_MAX
 * series at most). Thread-safe. */
void hook_timing_observe(const struct hook_timing *ht, const struct hook_timing_sample *s);

/* A db connect hook (arg: a struct hook_timing): installs the notice receiver on conn; sends
 * nothing, cannot fail. */
enum og_status hook_timing_connect(void *arg, PGconn *conn, bool transaction_pool,
                                   struct og_error *err);
/* Hook timing for every call of db into ht (which must outlive db): the connect hook above and
 * ordergate.hook_timing = on for each transaction (db_set_local). */
void hook_timing_attach(struct db *db, struct hook_timing *ht);

#endif
