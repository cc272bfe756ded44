/* --schedule-in-db: the database writes the cancel messages (place_order's cancel_scheduled
 * events in the outbox) and the consumers' relays send them. Owns the schedule_cancels setting
 * for the drill's time (turned on, put back), the lost share (events marked published before
 * any relay of the drill runs) and the counts of the drill's events. It must not touch the
 * broker or the orders. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/pgarray.h"
#include "tools/ctl/drill/drill.h"

static const struct db_stmt drill_sched_stmt_setting = {
    "drill_setting", "SELECT ordergate.set_setting('schedule_cancels', $1)", 1};

/* The drill's cancel_scheduled events (placements and holds) and how many are published. */
static const struct db_stmt drill_sched_stmt_count = {
    "drill_sched_count",
    "SELECT count(*), count(*) FILTER (WHERE published_at IS NOT NULL) FROM ordergate.outbox "
    " WHERE event_type = 'cancel_scheduled' AND starts_with(order_no, $1)",
    1};

/* Unpublished ones only: the partial index on unpublished rows keeps this cheap to poll. */
static const struct db_stmt drill_sched_stmt_unpublished = {
    "drill_sched_unpublished",
    "SELECT count(*) FROM ordergate.outbox "
    " WHERE published_at IS NULL AND event_type = 'cancel_scheduled' AND starts_with(order_no, $1)",
    1};

/* Losing a message: its row is marked published through the relay's own
 * function, so no relay ever sends it, as if the broker had lost it after
 * acknowledging it. At most 10000 per call (outbox_mark_published). */
static const struct db_stmt drill_sched_stmt_lose = {
    "drill_lose",
    "SELECT ordergate.outbox_mark_published(ARRAY(SELECT b.id FROM ordergate.outbox b "
    " WHERE b.published_at IS NULL AND b.event_type = 'cancel_scheduled' "
    "   AND b.order_no = ANY ($1::text[]) ORDER BY b.id LIMIT 10000))",
    1};

/* Turns schedule_cancels on for the database (an admin's call); the value
 * it had is kept in d->schedule_before for drill_sched_restore. */
enum og_status drill_sched_on(struct drill *d, struct db *db, struct og_error *err)
{
    PGresult *res = NULL;

    if (db_call(db, &drill_sched_stmt_setting, (const char *[]){"1"}, &res, err) != OG_OK) {
        og_error_prefix(err, "--schedule-in-db: set_setting('schedule_cancels', '1')");
        snprintf(err->msg + strlen(err->msg), sizeof(err->msg) - strlen(err->msg),
                 " (the drill's role needs ordergate_admin)");
        return err->status;
    }
    snprintf(d->schedule_before, sizeof(d->schedule_before), "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    return OG_OK;
}

/* Puts the setting back as the drill found it; the error tells how to do it by hand. */
enum og_status drill_sched_restore(const struct drill *d, struct db *db, struct og_error *err)
{
    if (d->schedule_before[0] == '\0' || strcmp(d->schedule_before, "1") == 0)
        return OG_OK;
    return drill_setup_restore_setting(db, &drill_sched_stmt_setting, "schedule_cancels", "1",
                                       d->schedule_before, err);
}

enum og_status drill_sched_counts(const struct drill *d, struct db *db, long *events,
                                  long *published, struct og_error *err)
{
    PGresult *res = NULL;

    if (db_call(db, &drill_sched_stmt_count, (const char *[]){d->prefix}, &res, err) != OG_OK) {
        og_error_prefix(err, "counting cancel_scheduled events");
        return err->status;
    }
    *events = atol(PQgetvalue(res, 0, 0));
    *published = atol(PQgetvalue(res, 0, 1));
    PQclear(res);
    return OG_OK;
}

enum og_status drill_sched_unpublished(const struct drill *d, struct db *db, long *n,
                                       struct og_error *err)
{
    PGresult *res = NULL;

    if (db_call(db, &drill_sched_stmt_unpublished, (const char *[]){d->prefix}, &res, err) != OG_OK)
        return err->status;
    *n = atol(PQgetvalue(res, 0, 0));
    PQclear(res);
    return OG_OK;
}

/* After placement, before any consumer (and so any relay of the drill)
 * runs: every order has its one unpublished event, and the planned share is
 * lost. An event published already means another relay serves this
 * database, which would publish to topics the drill does not watch. */
enum og_status drill_sched_lose(struct drill *d, struct db *db, struct og_error *err)
{
    struct pgarray lost;
    long events = 0, published = 0, planned = 0, marked = 0, n;
    enum og_status st;

    pgarray_init(&lost);
    st = drill_sched_counts(d, db, &events, &published, err);
    if (st != OG_OK)
        goto out;
    if (events != d->o.orders) {
        st = og_error_set(err, OG_ERR_INTERNAL, false,
                          "place_order wrote %ld cancel_scheduled events for %ld orders (is "
                          "schedule_cancels really 1?)",
                          events, d->o.orders);
        goto out;
    }
    if (published > 0) {
        st = og_error_set(err, OG_ERR_INTERNAL, false,
                          "%ld of the drill's cancel_scheduled events were published before its "
                          "consumers ran: another outbox relay serves this database; "
                          "--schedule-in-db needs a database of its own",
                          published);
        goto out;
    }
    for (long i = 0; i < d->o.orders; i++)
        if (d->orders[i].lost) {
            pgarray_append(&lost, d->orders[i].order_no);
            planned++;
        }
    if (pgarray_str(&lost) == NULL) {
        st = og_error_set(err, OG_ERR_NOMEM, false, "losing messages: out of memory");
        goto out;
    }
    do {
        PGresult *res = NULL;
        if (db_call(db, &drill_sched_stmt_lose, (const char *[]){pgarray_str(&lost)}, &res, err) !=
            OG_OK) {
            og_error_prefix(err, "losing messages");
            st = err->status;
            goto out;
        }
        n = atol(PQgetvalue(res, 0, 0));
        marked += n;
        PQclear(res);
    } while (n > 0);
    if (marked != planned) {
        st = og_error_set(err, OG_ERR_INTERNAL, false, "%ld messages to lose, %ld marked", planned,
                          marked);
        goto out;
    }
    d->lost_messages = marked;
out:
    pgarray_free(&lost);
    return st;
}
