/* ordergatectl drill: the acceptance test (README.md, "The drill") as a
 * product feature.
 *
 * Timeline of one drill:
 *   1. place N pending orders on a few hot SKUs (coupons on a share), in
 *      several currencies (some allowing parts), due at one instant T (or
 *      spread over a window);
 *   2. start K consumers (child processes) on a drill topic and produce one
 *      delayed cancel message per order, some twice (duplicates), some never
 *      (lost), plus a few undecodable ones (dead letters);
 *   3. around T +- jitter fire payment callbacks through claim_payment for a
 *      share of the orders: duplicates, timeout-then-retry with the same
 *      txn_no, a second transaction for some, one in another currency; parts;
 *      charges begun before T and captured or failed after it; payment holds
 *      and manual closes for a few; optionally SIGKILL a consumer now and then
 *      and restart it;
 *   4. wait until every order whose message was not lost has left pending,
 *      stop the consumers, run the scanner once for the lost ones;
 *   5. reconcile: the database's invariants (ordergate.reconcile) and the
 *      drill's own ledger of every callback it sent, each order's money and
 *      the goods on the shelf.
 * Without Kafka (--no-kafka) the scanner, repeating every second, is the
 * only trigger: the first deployment tier (docs/operations.md, "Choose a
 * tier").
 * With --schedule-in-db the database writes the cancel messages: the drill
 * turns schedule_cancels on, fixes T before placement (place_order gets each
 * order's real deadline, which its cancel_scheduled event carries), marks
 * the lost share of those events published before any consumer starts (no
 * relay ever sends them), and produces nothing itself; the consumers' relays
 * publish the rest to delay topics named by level (<topic>.5s, <topic>.1m),
 * and holds write their own; with --reminders (3,1 by default) place_order also writes each
 * order's payment reminders and their messages, which the consumers claim at their due times. The
 * ledger then also asks that the consumers cancelled every unpaid order whose message went out and
 * the scanner only lost ones, and that every event reached a delay topic.
 *
 * The drill's rows carry a unique prefix and the reconciliation is limited to
 * orders created since the drill began, so it can run on a shared database;
 * stock and coupon invariants are always checked whole.
 *
 * This file owns the command (ctl_cmd_drill): the steps above in their order, the drill's
 * names (prefix, topics, group), its signal handling and its way out (children stopped,
 * configuration directory removed, schedule_cancels restored), whatever step failed. It must
 * not do a step's work itself: the steps live in the other files of tools/ctl/drill/ (drill.h
 * lists them). */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/signals.h"
#include "tools/ctl/ctl.h"
#include "tools/ctl/drill/drill.h"

/* --schedule-in-db: the delay topics' levels, the last part of their names (common/delay.h).
 * A hold (4 s) and the drill's usual lead fit the first; a longer wait goes to the second, or
 * waits there when it is longer still. */
static const char *const drill_run_levels[DRILL_DELAY_LEVELS] = {"5s", "1m"};

/* The drill's names, from the clock: the prefix of its rows, its topics and its group. */
static void drill_run_names(struct drill *d)
{
    /* The reconciliation window opens a second early: clocks of client and
     * server may differ a little. */
    clock_format_iso(d->start_ms - 1000, d->start_iso, sizeof(d->start_iso));
    snprintf(d->prefix, sizeof(d->prefix), "dr%" PRIx64 "-",
             (uint64_t)(d->start_ms % INT64_C(0xffffffffff)));
    snprintf(d->topic, sizeof(d->topic), "ordergate.drill.%s", d->prefix);
    d->topic[strlen(d->topic) - 1] = '\0';
    snprintf(d->dlq_topic, sizeof(d->dlq_topic), "%s.dlq", d->topic);
    snprintf(d->group, sizeof(d->group), "ordergate-drill-%s", d->prefix);
    d->group[strlen(d->group) - 1] = '\0';
    /* The consumers read the drill's topic, or with the database scheduling
     * one topic per level, the level in the name (common/delay.h). */
    d->ndelay = d->o.schedule_in_db ? DRILL_DELAY_LEVELS : 1;
    for (int i = 0; i < d->ndelay; i++) {
        size_t len = strlen(d->topics_csv);
        if (d->o.schedule_in_db)
            snprintf(d->delay_topics[i], sizeof(d->delay_topics[i]), "%s.%s", d->topic,
                     drill_run_levels[i]);
        else
            snprintf(d->delay_topics[i], sizeof(d->delay_topics[i]), "%s", d->topic);
        snprintf(d->topics_csv + len, sizeof(d->topics_csv) - len, "%s%s", i > 0 ? "," : "",
                 d->delay_topics[i]);
    }
}

/* The line that opens placement: what runs the drill and its seed (to repeat it). */
static void drill_run_announce(const struct drill *d)
{
    drill_report_progress(d, "placing %ld orders (%d consumers%s, seed %" PRIu64 ")", d->o.orders,
                          d->o.no_kafka ? 0 : d->o.consumers,
                          d->o.no_kafka         ? ", scanner only"
                          : d->o.schedule_in_db ? ", cancels scheduled by the database"
                                                : "",
                          d->o.seed);
}

/* Steps 1 and 2 with --schedule-in-db: place_order gets each order's real deadline, which its
 * cancel message carries, so the topics exist and T is fixed before placement; the lost share
 * is marked published before the consumers (and their relays) start. */
static enum og_status drill_run_place_scheduled(struct drill *d, struct db *db,
                                                rd_kafka_t **producer, struct og_error *err)
{
    if (drill_sched_on(d, db, err) != OG_OK || drill_remind_on(d, db, err) != OG_OK ||
        drill_kafka_producer(d, producer, err) != OG_OK ||
        drill_kafka_topics(d, *producer, err) != OG_OK)
        return err->status;
    d->t_ms = clock_wall_ms() + d->o.lead_ms;
    drill_plan_schedule(d);
    drill_run_announce(d);
    if (drill_setup_place(d, db, err) != OG_OK)
        return err->status;
    /* Orders due before the consumers run are cancelled late, never wrongly. */
    if (clock_wall_ms() > d->t_ms - 2000)
        drill_report_progress(d,
                              "placement ended %.1f s before T: orders may fall due before the "
                              "consumers run (raise --lead-ms)",
                              (double)(d->t_ms - clock_wall_ms()) / 1000.0);
    if (drill_sched_lose(d, db, err) != OG_OK || drill_children_start(d, err) != OG_OK)
        return err->status;
    drill_report_progress(d,
                          "%ld cancel_scheduled events in the outbox, %ld of them lost (marked "
                          "published); consumers and their relays started on %s",
                          d->o.orders, d->lost_messages, d->topics_csv);
    return OG_OK;
}

/* Steps 1 and 2 otherwise: placement with a far deadline, then T fixed and every order moved
 * to its due time, the triggers started and (with Kafka) the cancel messages sent. */
static enum og_status drill_run_place(struct drill *d, struct db *db, rd_kafka_t **producer,
                                      struct og_error *err)
{
    drill_run_announce(d);
    if (drill_setup_place(d, db, err) != OG_OK)
        return err->status;
    if (!d->o.no_kafka && (drill_kafka_producer(d, producer, err) != OG_OK ||
                           drill_kafka_topics(d, *producer, err) != OG_OK))
        return err->status;
    /* T is fixed now that placement is done; everything after is relative. */
    d->t_ms = clock_wall_ms() + d->o.lead_ms;
    drill_plan_schedule(d);
    if (drill_setup_due(d, db, err) != OG_OK || drill_children_start(d, err) != OG_OK)
        return err->status;
    if (d->o.no_kafka)
        return OG_OK;
    if (drill_kafka_produce(d, *producer, err) != OG_OK)
        return err->status;
    drill_report_progress(d, "sent %ld cancel messages (%ld duplicates, %ld lost, %d garbage)",
                          d->messages + d->dup_messages, d->dup_messages, d->lost_messages,
                          d->o.garbage);
    return OG_OK;
}

/* Steps 4 and 5 after the race: the triggers stopped, the fallback sweep, every check. */
static enum og_status drill_run_settle(struct drill *d, struct db *db, rd_kafka_t *producer,
                                       struct drill_totals *t, struct og_error *err)
{
    drill_children_stop(d);
    /* The fallback sweep: catches what the lost messages left behind. A sweep that could not
     * run is a violation, as one that failed. */
    if (drill_children_scan_once(d, &d->scanner_status, err) != OG_OK) {
        if (signals_stop)
            return err->status;
        drill_report_finding("%s", err->msg);
        d->scanner_status = -1;
    }
    drill_report_progress(d, "scanner exited with %d", d->scanner_status);
    if (d->scanner_status != 0)
        d->ledger_violations++;
    if (d->o.schedule_in_db && drill_ledger_schedule(d, db, producer, err) != OG_OK)
        return err->status;
    if (drill_remind_check(d, db, err) != OG_OK)
        return err->status;
    if (producer != NULL)
        drill_ledger_dead_letters(d, producer);
    if (drill_ledger_reconcile(d, db, err) != OG_OK || drill_ledger_check(d, db, t, err) != OG_OK)
        return err->status;
    return OG_OK;
}

/* While the drill runs, SIGINT and SIGTERM only ask it to stop (signals_stop), however often
 * they come: its way out stops the children and removes their configuration directory, and
 * every wait on that way is bounded. (The handler of common/signals.c ends the process on a
 * second signal, which would leave both behind.) */
static void drill_run_on_signal(int sig)
{
    (void)sig;
    signals_stop = 1;
}

static void drill_run_signals_install(struct sigaction old[2])
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = drill_run_on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old[0]);
    sigaction(SIGTERM, &sa, &old[1]);
}

static void drill_run_signals_restore(const struct sigaction old[2])
{
    sigaction(SIGINT, &old[0], NULL);
    sigaction(SIGTERM, &old[1], NULL);
}

static enum og_status drill_run(struct ctl *ctl, const struct opt_args *a, json_t **result,
                                struct og_error *err)
{
    struct drill d;
    struct db *db = NULL;
    rd_kafka_t *producer = NULL;
    struct drill_totals totals = {0};
    struct sigaction old_signals[2];
    struct og_error restore_err = {0};
    int64_t t0;
    enum og_status st;

    memset(&d, 0, sizeof(d));
    d.cfg = &ctl->cfg;
    drill_options_defaults(&d.o);
    if (drill_options_parse(&d.o, a, err) != OG_OK)
        return err->status;
    /* A bad plan is usage: refused before the drill changes anything. */
    if ((d.faults_path = opt_arg(a, "faults")) != NULL &&
        drill_faults_load(&d, d.faults_path, err) != OG_OK)
        return err->status;
    t0 = clock_mono_ms();
    d.start_ms = clock_wall_ms();
    d.t_ms = d.start_ms;
    drill_run_names(&d);
    if (drill_children_find(&d, err) != OG_OK) {
        drill_faults_free(&d);
        return err->status;
    }
    drill_run_signals_install(old_signals);
    st = drill_setup_db(&d, "ordergatectl-drill", &db, err);
    if (st == OG_OK)
        st = drill_plan_make(&d, err);
    if (st == OG_OK)
        st = drill_conf_make(&d, err);
    if (st != OG_OK)
        goto out;
    st = d.o.schedule_in_db ? drill_run_place_scheduled(&d, db, &producer, err)
                            : drill_run_place(&d, db, &producer, err);
    if (st == OG_OK)
        st = drill_race_run(&d, db, err);
    if (st != OG_OK)
        goto out;
    if (signals_stop) {
        st = og_error_set(err, OG_ERR_STOPPED, false, "stopped by a signal; no report");
        goto out;
    }
    st = drill_run_settle(&d, db, producer, &totals, err);
    if (st != OG_OK)
        goto out;
    *result = drill_report_make(&d, db, &totals, (double)(clock_mono_ms() - t0) / 1000.0);
    if (d.violations + d.ledger_violations > 0)
        st = og_error_set(err, OG_ERR_INTERNAL, false, "%ld violations: the gate did not hold",
                          d.violations + d.ledger_violations);
    else if (drill_faults_failed(&d) > 0)
        st = og_error_set(err, OG_ERR_INTERNAL, false,
                          "--faults: %d faults' commands failed (the report says which)",
                          drill_faults_failed(&d));
out:
    /* A drill that could not complete exits 1 (its --help), a bad setting met on the way
     * included: only its options and its programs are checked as usage (exit 2). */
    if (st == OG_ERR_ARG || st == OG_ERR_CONFIG)
        st = err->status = OG_ERR_INTERNAL;
    drill_faults_stop(&d);
    drill_children_kill(&d);
    if (drill_sched_restore(&d, db, &restore_err) != OG_OK)
        drill_report_finding("%s", restore_err.msg);
    if (drill_remind_restore(&d, db, &restore_err) != OG_OK)
        drill_report_finding("%s", restore_err.msg);
    drill_conf_remove(&d);
    if (producer != NULL)
        rd_kafka_destroy(producer);
    json_decref(d.reconcile);
    drill_faults_free(&d);
    free(d.orders);
    free(d.actions);
    db_free(db);
    drill_run_signals_restore(old_signals);
    return st;
}

const struct ctl_command ctl_cmd_drill = {
    .name = "drill",
    .usage = "drill [options]",
    .summary = "race payments against cancellations through the real triggers, then reconcile",
    .details = "Races payment callbacks against timeout cancellations on one batch of pending\n"
               "orders in several currencies (some paid in parts, some by a charge pending at\n"
               "the deadline) through the real consumers and scanner, then reconciles. Exit 0\n"
               "only with zero violations, 1 with violations or when the drill could not\n"
               "complete. The database and the brokers are the global options' (--db,\n"
               "--brokers); --json prints the report as one JSON object. Progress goes to\n"
               "stderr.\n",
    .opts = drill_options,
    .min_pos = 0,
    .max_pos = 0,
    .pos_name = NULL,
    .run = drill_run,
    .text = drill_report_text,
};
