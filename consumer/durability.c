/* The server's commit durability (consumer/durability.h): one statement on the consume loop's
 * session, a verdict, its gauges and its log lines.
 *
 * Must not stop the consumer or touch its readiness itself: the loop acts on the verdict. */
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "consumer/durability.h"

static const struct db_stmt durability_stmt = {
    "og_durability",
    "SELECT current_setting('fsync'), current_setting('synchronous_commit'), "
    "current_setting('synchronous_standby_names')",
    0};

void durability_init(struct durability *d, struct metric *durable_gauge,
                     struct metric *replicated_gauge)
{
    d->next_ms = 0;
    d->durable = -1;
    d->durable_gauge = durable_gauge;
    d->replicated_gauge = replicated_gauge;
}

bool durability_due(const struct durability *d, int64_t now)
{
    return now >= d->next_ms;
}

enum durability_verdict durability_check(struct durability *d, struct db *db, bool allow_nondurable)
{
    enum durability_verdict v = DURABILITY_KNOWN;
    PGresult *res = NULL;
    struct og_error err = {0};
    char q[600];

    d->next_ms = clock_mono_ms() + DURABILITY_EVERY_MS;
    if (db_call(db, &durability_stmt, NULL, &res, &err) != OG_OK) {
        log_warn("durability_unknown", "error=%s", log_quote(q, sizeof(q), err.msg));
        PQclear(res);
        /* Readiness says so until a batch step gets through. */
        return err.retriable ? DURABILITY_UNKNOWN : DURABILITY_KNOWN;
    }
    if (PQntuples(res) == 1 && PQnfields(res) == 3) {
        const char *fsync = PQgetvalue(res, 0, 0), *sync = PQgetvalue(res, 0, 1);
        const char *standbys = PQgetvalue(res, 0, 2);
        bool named = *standbys != '\0';
        bool durable = strcmp(fsync, "on") == 0 && strcmp(sync, "off") != 0 &&
                       !(named && strcmp(sync, "local") == 0);
        bool replicated = durable && named && strcmp(sync, "local") != 0;

        metric_set(d->durable_gauge, durable);
        metric_set(d->replicated_gauge, replicated);
        if (!durable && !allow_nondurable) {
            log_error("commit_not_durable",
                      "fsync=%s synchronous_commit=%s synchronous_standby_names=%s msg=\"a claim "
                      "could be lost after its offset was committed; stopping (set "
                      "consumer.allow_nondurable to run anyway)\"",
                      fsync, sync, log_quote(q, sizeof(q), standbys));
            v = DURABILITY_STOP;
        } else if ((int)durable != d->durable) {
            if (durable)
                log_info("commit_durable",
                         "fsync=%s synchronous_commit=%s synchronous_standby_names=%s "
                         "replicated=%d",
                         fsync, sync, log_quote(q, sizeof(q), standbys), replicated);
            else
                log_error("commit_not_durable",
                          "fsync=%s synchronous_commit=%s synchronous_standby_names=%s "
                          "msg=\"a claim could be lost after its offset was committed; running "
                          "because consumer.allow_nondurable is set\"",
                          fsync, sync, log_quote(q, sizeof(q), standbys));
        }
        d->durable = durable;
    }
    PQclear(res);
    return v;
}
