/* The server's commit durability, as the consume loop's session sees it.
 *
 * Reads fsync, synchronous_commit and synchronous_standby_names (at start and every
 * DURABILITY_EVERY_MS, so a failover to a server set up otherwise is seen): a claim is durable
 * when fsync is on and synchronous_commit is not off, nor local while synchronous standbys are
 * configured; it is replicated when, besides, synchronous standbys are named and
 * synchronous_commit waits for them. A claim that is not durable could be lost after its offset
 * was committed: the consumer then stops unless consumer.allow_nondurable, in which case it logs
 * an error once and exports ordergate_consumer_commit_durable 0. A failed look changes nothing
 * (the next one tries again).
 *
 * Owns the verdict and when to look next; must not stop anything itself (the caller does, on
 * DURABILITY_STOP). */
#ifndef OG_CONSUMER_DURABILITY_H
#define OG_CONSUMER_DURABILITY_H

#include <stdbool.h>
#include <stdint.h>

#include "common/db.h"
#include "common/metrics.h"

#define DURABILITY_EVERY_MS 60000

struct durability {
    int64_t next_ms; /* monotonic; the next look (durability_due) */
    int durable;     /* the last verdict: -1 not looked yet, 0 no, 1 yes */
    /* the gauges set on each verdict (ordergate_consumer_commit_durable, _replicated) */
    struct metric *durable_gauge, *replicated_gauge;
};

enum durability_verdict {
    DURABILITY_KNOWN,   /* looked; durable, or not durable but allowed */
    DURABILITY_UNKNOWN, /* the look failed and the database may be away (retriable) */
    DURABILITY_STOP,    /* not durable and consumer.allow_nondurable is off: stop */
};

/* Not looked yet; the gauges are set on each verdict. */
void durability_init(struct durability *d, struct metric *durable_gauge,
                     struct metric *replicated_gauge);
/* True when DURABILITY_EVERY_MS have passed since the last look (now: monotonic ms). */
bool durability_due(const struct durability *d, int64_t now);
/* Looks now on db (one statement) and logs a changed verdict. A failed look that was not
 * retriable is DURABILITY_KNOWN: the verdict stands until the next look. */
enum durability_verdict durability_check(struct durability *d, struct db *db,
                                         bool allow_nondurable);

#endif
