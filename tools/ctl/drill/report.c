/* What the drill says: progress lines and findings on stderr while it runs, then the report
 * (per-currency counts, parts, charges and currency mismatches among them),
 * one JSON object (--json prints it) from which the text is rendered, so both carry the same
 * facts. Owns the report's keys and the lateness figures. It must not change the drill's state:
 * it only reads it. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "tools/ctl/ctl.h"
#include "tools/ctl/drill/drill.h"

void drill_report_progress(const struct drill *d, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "drill %s [%+.1fs] ", d->prefix, (double)(clock_wall_ms() - d->t_ms) / 1000.0);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

void drill_report_finding(const char *fmt, ...)
{
    va_list ap;

    fputs(CTL_PROG " drill: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* $3 picks the orders: 'all'; 'moved', those whose due time moved after their first cancel
 * message was written (staff set a later deadline, or a charge was pending at the deadline:
 * the claim answered not_due and the consumer re-scheduled the message); 'kept', the others.
 * With the drill sending the messages (no --schedule-in-db), nothing writes a moved order a new
 * message: the consumer re-schedules the old one to its topic, which has no delay level, behind
 * every message the drill sent, due up to --spread-ms later, so such an order waits for them
 * (docs/consumer.md, "Delay levels") unless a sweep of the scanner comes first. */
static const struct db_stmt drill_report_stmt_lateness = {
    "drill_lateness",
    "SELECT count(*), "
    "       coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY l), 0), "
    "       coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY l), 0), coalesce(max(l), 0) "
    "  FROM (SELECT extract(epoch FROM s.created_at - o.expire_at) * 1000 AS l, "
    "               EXISTS (SELECT 1 FROM ordergate.deadline_changes c "
    "                        WHERE c.order_no = o.order_no AND c.after > c.before) "
    "            OR EXISTS (SELECT 1 FROM ordergate.charges h WHERE h.order_no = o.order_no) "
    "               AS moved "
    "          FROM ordergate.status_log s JOIN ordergate.orders o USING (order_no) "
    "         WHERE starts_with(o.order_no, $1) AND s.source = $2) x "
    " WHERE $3::text = 'all' OR moved = ($3::text = 'moved')",
    3};

/* Lateness of the cancellations of one source, in milliseconds; JSON null when unknown. */
static json_t *drill_report_lateness(struct db *db, const char *prefix, const char *source,
                                     const char *which)
{
    PGresult *res = NULL;
    struct og_error err = {0};
    json_t *j;

    if (db_call(db, &drill_report_stmt_lateness, (const char *[]){prefix, source, which}, &res,
                &err) != OG_OK)
        return json_null();
    j = json_pack("{s:I,s:f,s:f,s:f}", "count", (json_int_t)atol(PQgetvalue(res, 0, 0)), "p50_ms",
                  atof(PQgetvalue(res, 0, 1)), "p99_ms", atof(PQgetvalue(res, 0, 2)), "max_ms",
                  atof(PQgetvalue(res, 0, 3)));
    PQclear(res);
    return j;
}

json_t *drill_report_make(const struct drill *d, struct db *db, const struct drill_totals *t,
                          double seconds)
{
    long total_violations = d->violations + d->ledger_violations;
    json_t *j = json_object();
    const struct {
        const char *key;
        long long value;
    } counts[] = {
        {"placed", t->placed},
        {"paid", t->paid},
        {"cancelled_consumer", t->cancelled_consumer},
        {"cancelled_scanner", t->cancelled_scanner},
        {"cancelled_manual", t->cancelled_manual},
        {"pending", t->pending},
        {"late_payments", t->late_payments},
        {"double_payments", t->double_payments},
        {"messages", d->messages},
        {"duplicate_messages", d->dup_messages},
        {"lost_messages", d->lost_messages},
        {"duplicate_callbacks_absorbed", t->dup_callbacks_absorbed},
        {"dead_lettered", d->dlq_count},
        {"consumer_restarts", d->restarts},
        {"gate_errors", t->errors},
        {"repeated_calls", t->repeated_calls},
        {"scanner_exit", d->scanner_status},
        {"parts_orders", t->parts_orders},
        {"parts_kept", t->parts_kept},
        {"parts_refunded", t->parts_refunded},
        {"charges_begun", t->charges_begun},
        {"charges_captured", t->charges_captured},
        {"charges_failed", t->charges_failed},
        {"currency_mismatches", t->currency_mismatches},
        {"releases", t->releases},
        {"released", t->released},
        {"amendments", t->amendments},
        {"deadlines_moved", t->deadlines_moved},
        {"ledger_violations", d->ledger_violations},
        {"violations", total_violations},
    };
    json_t *currencies = json_object();

    ctl_json_set(j, "command", json_string("drill"));
    ctl_json_set(j, "ok", json_boolean(total_violations == 0));
    ctl_json_set(j, "drill", json_string(d->prefix));
    ctl_json_set(j, "trigger", json_string(d->o.no_kafka ? "scanner" : "consumer+scanner"));
    /* Who sent the cancel messages: the drill itself, or place_order's
     * outbox events through the consumers' relays (--schedule-in-db). */
    ctl_json_set(j, "scheduling",
                 json_string(d->o.no_kafka         ? "none"
                             : d->o.schedule_in_db ? "database"
                                                   : "drill"));
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
        ctl_json_set(j, counts[i].key, json_integer(counts[i].value));
    /* Per currency, in the order --currencies gave them. */
    for (int c = 0; c < d->o.ncurrencies; c++)
        ctl_json_set(currencies, d->o.currencies[c],
                     json_pack("{s:I,s:I,s:I}", "placed", (json_int_t)t->cur_placed[c], "paid",
                               (json_int_t)t->cur_paid[c], "cancelled",
                               (json_int_t)t->cur_cancelled[c]));
    ctl_json_set(j, "currencies", currencies);
    if (d->o.schedule_in_db) {
        json_t *topics = json_object();
        for (int i = 0; i < d->ndelay; i++)
            ctl_json_set(topics, d->delay_topics[i], json_integer(d->delay_messages[i]));
        ctl_json_set(j, "cancel_events", json_integer(d->sched_events));
        ctl_json_set(j, "unpublished_events", json_integer(d->sched_unpublished));
        ctl_json_set(j, "delay_topics", topics);
    }
    if (d->remind_set)
        ctl_json_set(j, "reminders",
                     json_pack("{s:s,s:I,s:I,s:I,s:I}", "offsets", d->o.reminders, "written",
                               (json_int_t)d->reminders_total, "sent",
                               (json_int_t)d->reminders_sent, "skipped",
                               (json_int_t)d->reminders_skipped, "pending",
                               (json_int_t)d->reminders_pending));
    ctl_json_set(j, "seconds", json_real(seconds));
    ctl_json_set(j, "lateness_consumer",
                 drill_report_lateness(db, d->prefix, "timeout_consumer", "all"));
    /* The consumer's cancels split by whether the order's due time moved (the statement says
     * why the moved ones are late when the drill sends the messages). */
    ctl_json_set(j, "lateness_consumer_due_kept",
                 drill_report_lateness(db, d->prefix, "timeout_consumer", "kept"));
    ctl_json_set(j, "lateness_consumer_due_moved",
                 drill_report_lateness(db, d->prefix, "timeout_consumer", "moved"));
    ctl_json_set(j, "lateness_scanner",
                 drill_report_lateness(db, d->prefix, "timeout_scanner", "all"));
    if (d->nfaults > 0)
        ctl_json_set(j, "faults", drill_faults_report(d, db));
    ctl_json_set(j, "reconcile", d->reconcile ? json_incref(d->reconcile) : json_null());
    return j;
}

static long drill_report_count(const json_t *r, const char *key)
{
    return (long)json_integer_value(json_object_get(r, key));
}

static void drill_report_text_lateness(FILE *out, const char *who, const json_t *lat)
{
    fprintf(out, "  lateness %-11s  p50 %.0f ms  p99 %.0f ms  max %.0f ms  (n=%ld)\n", who,
            json_real_value(json_object_get(lat, "p50_ms")),
            json_real_value(json_object_get(lat, "p99_ms")),
            json_real_value(json_object_get(lat, "max_ms")), drill_report_count(lat, "count"));
}

void drill_report_text(const json_t *r, FILE *out)
{
    struct drill_row {
        const char *label, *key;
    };
    static const struct drill_row orders[] = {
        {"orders placed", "placed"},
        {"paid", "paid"},
        {"cancelled by consumer", "cancelled_consumer"},
        {"cancelled by scanner (missed)", "cancelled_scanner"},
        {"cancelled manually", "cancelled_manual"},
        {"late payments (exceptions)", "late_payments"},
        {"double payments (exceptions)", "double_payments"},
        {NULL, NULL},
    };
    static const struct drill_row sent_by_drill[] = {
        {"cancel messages sent", "messages"},
        {"  duplicated", "duplicate_messages"},
        {"  lost on purpose", "lost_messages"},
        {NULL, NULL},
    };
    static const struct drill_row sent_by_db[] = {
        {"cancel_scheduled events (database)", "cancel_events"},
        {"  published by the relays", "messages"},
        {"  lost on purpose (marked published)", "lost_messages"},
        {"  never published", "unpublished_events"},
        {NULL, NULL},
    };
    static const struct drill_row money[] = {
        {"orders paid in parts", "parts_orders"},
        {"  parts kept by paid orders", "parts_kept"},
        {"  parts refunded (cancelled_part)", "parts_refunded"},
        {"charges pending at the deadline", "charges_begun"},
        {"  captured", "charges_captured"},
        {"  failed", "charges_failed"},
        {"payments in another currency", "currency_mismatches"},
        {"releases by staff that won", "releases"},
        {"  still released at the end", "released"},
        {"amendments by staff", "amendments"},
        {"deadlines moved by staff", "deadlines_moved"},
        {NULL, NULL},
    };
    static const struct drill_row rest[] = {
        {"duplicate callbacks absorbed", "duplicate_callbacks_absorbed"},
        {"dead-lettered", "dead_lettered"},
        {"consumer restarts (SIGKILL)", "consumer_restarts"},
        {"errors returned by the gate", "gate_errors"},
        {"gate calls repeated (connection lost)", "repeated_calls"},
        {NULL, NULL},
    };
    long total = drill_report_count(r, "violations");
    long ledger = drill_report_count(r, "ledger_violations");
    const char *trigger = ctl_json_str(r, "trigger");
    const char *scheduling = ctl_json_str(r, "scheduling");
    bool by_db = scheduling != NULL && strcmp(scheduling, "database") == 0;
    const struct drill_row *groups[] = {orders, money, by_db ? sent_by_db : sent_by_drill, rest};
    const char *topic, *code;
    json_t *count, *cur;

    fprintf(out, "drill %s (%s%s), %.1f s\n", ctl_json_str(r, "drill"),
            trigger != NULL && strcmp(trigger, "scanner") == 0 ? "scanner only"
                                                               : "consumers + scanner",
            by_db ? ", cancels scheduled by the database" : "",
            json_real_value(json_object_get(r, "seconds")));
    for (size_t g = 0; g < sizeof(groups) / sizeof(groups[0]); g++) {
        for (const struct drill_row *row = groups[g]; row->label != NULL; row++)
            fprintf(out, "  %-36s %10ld\n", row->label, drill_report_count(r, row->key));
        if (g == 0)
            json_object_foreach(json_object_get(r, "currencies"), code, cur)
                fprintf(out, "  in %-4s placed %8ld  paid %8ld  cancelled %8ld\n", code,
                        drill_report_count(cur, "placed"), drill_report_count(cur, "paid"),
                        drill_report_count(cur, "cancelled"));
        if (g == 2 && by_db)
            json_object_foreach(json_object_get(r, "delay_topics"), topic, count)
                fprintf(out, "  on %-33s %10ld\n", topic, (long)json_integer_value(count));
    }
    drill_report_text_lateness(out, "consumer", json_object_get(r, "lateness_consumer"));
    drill_report_text_lateness(out, "  due kept", json_object_get(r, "lateness_consumer_due_kept"));
    drill_report_text_lateness(out, "  due moved",
                               json_object_get(r, "lateness_consumer_due_moved"));
    if (!by_db &&
        drill_report_count(json_object_get(r, "lateness_consumer_due_moved"), "count") > 0)
        fprintf(out, "  (due moved: a later deadline or a charge pending at it; nothing sent such "
                     "an order a new message, so the consumer re-scheduled its old one behind the "
                     "drill's later ones: late by up to --spread-ms, by design)\n");
    drill_report_text_lateness(out, "scanner", json_object_get(r, "lateness_scanner"));
    drill_faults_text(json_object_get(r, "faults"), out);
    fprintf(out, "  reconciliation violations %ld, ledger violations %ld\n", total - ledger,
            ledger);
    fprintf(out, "  VIOLATIONS %ld: %s\n", total,
            total == 0 ? "the gate held" : "THE GATE DID NOT HOLD");
}
