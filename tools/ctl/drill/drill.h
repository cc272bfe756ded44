/* The drill (ordergatectl drill): the state its files share and what each file offers the
 * others. The timeline of a drill is run.c's opening comment.
 *
 * One file per concern, one name prefix per file:
 *   run.c       the command (ctl_cmd_drill): the timeline, signals, the way out (drill_run_*)
 *   options.c   the option table, defaults and parsing (drill_options_*)
 *   plan.c      the random plan of every order, the actions, the generator (drill_plan_*)
 *   setup.c     database sessions, stock, coupons, placement, due times (drill_setup_*)
 *   sched.c     --schedule-in-db: the setting, the lost events, counts (drill_sched_*)
 *   conf.c      the children's private configuration directory and files (drill_conf_*)
 *   children.c  the consumer and scanner processes, through common/child (drill_children_*)
 *   kafka.c     topics, the cancel messages, the group's lag (drill_kafka_*)
 *   race.c      payments, holds and closes; waiting for the triggers (drill_race_*)
 *   ledger.c    every answer against the final state, reconcile, the relays (drill_ledger_*)
 *   report.c    progress and findings on stderr, the report and its text (drill_report_*)
 *   faults.c    --faults: the plan, its commands at their times, each fault's lateness
 *               (drill_faults_*)
 *
 * Errors: a function that can fail returns enum og_status and fills a struct og_error
 * (common/error.h); it prints nothing. run.c hands the first failure to ordergatectl's main,
 * which prints it once. What the drill finds (violations, a gate error answered to a caller)
 * is not a failure of the drill: drill_report_finding prints it as it is found. */
#ifndef OG_TOOLS_CTL_DRILL_H
#define OG_TOOLS_CTL_DRILL_H

#include <jansson.h>
#include <librdkafka/rdkafka.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "common/cfg.h"
#include "common/db.h"
#include "common/error.h"
#include "common/gate.h"
#include "common/opt.h"

#define DRILL_MAX_CONSUMERS 16
#define DRILL_MAX_PAYERS    64
/* --schedule-in-db: the delay topics, one per level (run.c names them). */
#define DRILL_DELAY_LEVELS 2
/* --currencies: at most this many codes; an order pays in at most DRILL_MAX_PARTS parts. */
#define DRILL_MAX_CURRENCIES 8
#define DRILL_MAX_PARTS      3
/* A charge's bound: the order is protected this long after the charge begins (begin_charge's
 * max_seconds); the charge ends well within it (plan.c). */
#define DRILL_CHARGE_SECONDS 5
/* --faults: at most this many faults in a plan. */
#define DRILL_MAX_FAULTS 32

/* The options (options.c). */
struct drill_opts {
    long orders;
    int consumers;
    double pay_ratio;
    double dup_ratio;
    double loss_ratio;
    double hold_ratio;
    double close_ratio;
    double coupon_ratio;
    double double_pay_ratio;
    double parts_ratio;    /* orders that allow parts and are paid in two or three */
    double charge_ratio;   /* orders whose charge is pending at the deadline */
    double mismatch_ratio; /* paying orders that also get a payment in another currency */
    double release_ratio;  /* orders released by staff around their deadline */
    double amend_ratio;    /* orders whose lines staff amend around their deadline */
    double deadline_ratio; /* orders whose deadline staff move later around it */
    int ncurrencies;
    char currencies[DRILL_MAX_CURRENCIES][4]; /* the orders' currencies, in turn */
    int kill_every_s;
    int lead_ms;
    int jitter_ms;
    int spread_ms;
    int skus;
    int garbage;
    int payers;
    int settle_s;
    int no_kafka;
    int schedule_in_db;
    char reminders[64]; /* --reminders: reminder_before_seconds with --schedule-in-db ("" none) */
    uint64_t seed;
    const char *bin_dir;
};

/* What the drill planned for one order (plan.c) and what the gate answered (race.c). */
struct drill_order {
    char order_no[48];
    char coupon[48];
    int64_t amount;
    int qty;
    int sku;
    int64_t due_ms;
    unsigned lost : 1, dup_msg : 1, pay : 1, dup_cb : 1, retry_cb : 1, second_txn : 1, hold : 1,
        close : 1;
    int64_t pay_at_ms;
    int64_t close_at_ms;
    enum gate_outcome pay1, pay_retry, pay_dup, pay_retry_first, pay_dup_first, pay2, hold_out,
        close_out;
    int errors;
    /* Gate calls that db_call repeated after a transient failure (a lost connection, a
     * failover): each may have committed before the repeat, which then answers for it. */
    int repeats;
    unsigned close_repeated : 1;
    /* Money: the order's currency; parts (0: the order does not allow them, else 2 or 3
     * payments summing to the amount); a charge begun before the deadline and ended after it,
     * captured (charge_fail 0) or failed; a payment in another currency before pay1. */
    char currency[4];
    int parts;
    int64_t part_amount[DRILL_MAX_PARTS];
    int64_t part_at_ms[DRILL_MAX_PARTS];
    int64_t charge_at_ms, charge_end_ms;
    enum gate_outcome part_out[DRILL_MAX_PARTS];
    unsigned charge : 1, charge_fail : 1, mismatch : 1;
    enum gate_outcome charge_begin, charge_end, mismatch_out;
    /* Staff acts around the deadline, racing the cancels and payments: a release (not for an
     * order paid in parts or by a charge), an amendment of its line to amend_qty (same amount),
     * a deadline moved to deadline_to_ms (later than the one planned). */
    unsigned release : 1, amend : 1, deadline : 1;
    int amend_qty;
    int64_t release_at_ms, amend_at_ms, deadline_at_ms, deadline_to_ms;
    enum gate_outcome release_out, amend_out, deadline_out;
    enum order_status final_status; /* ledger.c */
};

/* One fault of a --faults plan (faults.c): start and duration relative to T; what the thread
 * did (applied_ms, cleared_ms: wall clock; exit statuses of the commands). */
struct drill_fault {
    char name[64];
    int line; /* of its [name] in the plan */
    int64_t start_ms, duration_ms;
    char *apply, *clear;
    unsigned applied : 1, cleared : 1;
    int64_t applied_ms, cleared_ms;
    int apply_status, clear_status;
};

enum drill_action_kind {
    DRILL_ACT_HOLD,
    DRILL_ACT_PAY,
    DRILL_ACT_CLOSE,
    DRILL_ACT_PART,         /* part number `part` of an order paid in parts */
    DRILL_ACT_CHARGE_BEGIN, /* before the deadline */
    DRILL_ACT_CHARGE_END,   /* after it, within the bound: captured or failed */
    DRILL_ACT_RELEASE,      /* staff release the order (release_order) */
    DRILL_ACT_AMEND,        /* staff amend its line (amend_order) */
    DRILL_ACT_DEADLINE      /* staff move its deadline later (set_deadline) */
};

struct drill_action {
    int64_t at_ms;
    long order;
    enum drill_action_kind kind;
    int part;
};

/* One drill. Written by the main thread only, except each order's answers, which only the
 * race worker that owns the order writes (race.c). */
struct drill {
    struct drill_opts o;
    struct og_config *cfg; /* the drill's own configuration (ordergatectl's) */
    char prefix[32];       /* of every order number, coupon and SKU of this drill */
    char topic[96];
    char delay_topics[DRILL_DELAY_LEVELS][112]; /* what the consumers read: topic, or its levels */
    int ndelay;
    char topics_csv[DRILL_DELAY_LEVELS * 113];
    char dlq_topic[96];
    char group[96];
    /* The children's configuration files (conf.c): [0] the scanner's, [1 + k] consumer k's,
     * in conf_dir; "" = none written. */
    char conf_dir[PATH_MAX];
    char conf_path[DRILL_MAX_CONSUMERS + 1][PATH_MAX + 32];
    char consumer_bin[PATH_MAX];
    char scanner_bin[PATH_MAX];
    struct drill_order *orders; /* sorted by order_no, as generated */
    struct drill_action *actions;
    long nactions;
    int64_t t_ms;     /* the instant T */
    int64_t start_ms; /* wall clock at the start, for the reconciliation window */
    char start_iso[32];
    pid_t consumers[DRILL_MAX_CONSUMERS]; /* 0 = not running */
    pid_t scanner_pid;
    int restarts;
    long messages, dup_messages, lost_messages;
    int64_t dlq_count;
    /* --schedule-in-db: the setting's value before the drill (restored after it), the drill's
     * cancel_scheduled events and what reached the broker. */
    char schedule_before[8];
    long sched_events, sched_unpublished;
    int64_t delay_messages[DRILL_DELAY_LEVELS];
    /* --reminders: the setting's value before the drill (restored after it, when remind_set)
     * and the drill's reminders by state after the settle (remind.c). */
    char remind_before[64];
    int remind_set;
    long reminders_total, reminders_sent, reminders_skipped, reminders_pending;
    int scanner_status;
    /* --faults (faults.c): the plan, and its thread, which alone writes the faults' records
     * until faults_done is raised. */
    const char *faults_path;
    struct drill_fault *faults;
    int nfaults;
    pthread_t faults_tid;
    int faults_running;
    volatile sig_atomic_t faults_stop, faults_done;
    long violations;
    long ledger_violations;
    json_t *reconcile;
};

/* The counts of the final state (ledger.c), for the report. */
struct drill_totals {
    long placed, paid, cancelled_consumer, cancelled_scanner, cancelled_manual, pending;
    long late_payments, double_payments, dup_callbacks_absorbed, errors, repeated_calls;
    /* Money: per currency (the index of d->o.currencies) orders placed, paid, cancelled; parts
     * captured on paid and on cancelled orders (refunded as cancelled_part); charges begun,
     * captured, failed; payments in another currency. */
    long cur_placed[DRILL_MAX_CURRENCIES], cur_paid[DRILL_MAX_CURRENCIES],
        cur_cancelled[DRILL_MAX_CURRENCIES];
    long parts_orders, parts_kept, parts_refunded, charges_begun, charges_captured, charges_failed,
        currency_mismatches;
    /* Staff acts: releases that won (the order then released, or paid later), orders released
     * at the end, amendments made, deadlines moved. */
    long releases, released, amendments, deadlines_moved;
};

/* ---- options.c -------------------------------------------------------------------------- */

extern const struct opt drill_options[];
/* The defaults, the seed from the clock. */
void drill_options_defaults(struct drill_opts *o);
/* Reads the options over the defaults in *o; OG_ERR_ARG on a bad value or combination. */
enum og_status drill_options_parse(struct drill_opts *o, const struct opt_args *a,
                                   struct og_error *err);

/* ---- plan.c ----------------------------------------------------------------------------- */

/* A number in lo..hi from a reproducible generator whose state is *s (seeded from --seed). */
long drill_plan_rng_range(uint64_t *s, long lo, long hi);
/* Plans every order (amounts, SKUs, coupons, which are lost, paid, held, closed), due times
 * relative to T. OG_ERR_NOMEM. */
enum og_status drill_plan_make(struct drill *d, struct og_error *err);
/* Once T is known: due times made absolute, the actions listed in time order. */
void drill_plan_schedule(struct drill *d);
/* The planned order of that number, or NULL. */
struct drill_order *drill_plan_find(const struct drill *d, const char *order_no);

/* ---- setup.c ---------------------------------------------------------------------------- */

/* A connected session of the drill's configuration (application_name app). */
/* Puts the setting `name` back to `before` with stmt (set_setting(name, $1)) after the drill set
 * it to drill_value; the error tells how to do it by hand. */
enum og_status drill_setup_restore_setting(struct db *db, const struct db_stmt *stmt,
                                           const char *name, const char *drill_value,
                                           const char *before, struct og_error *err);
enum og_status drill_setup_db(const struct drill *d, const char *app, struct db **db,
                              struct og_error *err);
/* Stock for the hot SKUs, then every order placed by --payers threads. */
enum og_status drill_setup_place(struct drill *d, struct db *db, struct og_error *err);
/* Every order's expire_at moved to its planned due time, in one statement. */
enum og_status drill_setup_due(const struct drill *d, struct db *db, struct og_error *err);

/* ---- sched.c ---------------------------------------------------------------------------- */

/* reminder_before_seconds set to --reminders (nothing when ""); its value before kept. */
enum og_status drill_remind_on(struct drill *d, struct db *db, struct og_error *err);
/* The setting put back as the drill found it. */
enum og_status drill_remind_restore(const struct drill *d, struct db *db, struct og_error *err);
/* The drill's reminders counted; an unpublished reminder message is a ledger violation. */
enum og_status drill_remind_check(struct drill *d, struct db *db, struct og_error *err);

/* schedule_cancels turned on; its value before kept in d->schedule_before. */
enum og_status drill_sched_on(struct drill *d, struct db *db, struct og_error *err);
/* The setting put back as the drill found it (nothing to do when it was 1 already). */
enum og_status drill_sched_restore(const struct drill *d, struct db *db, struct og_error *err);
/* The drill's cancel_scheduled events, and how many of them are published. */
enum og_status drill_sched_counts(const struct drill *d, struct db *db, long *events,
                                  long *published, struct og_error *err);
/* The drill's cancel_scheduled events no relay has published yet. */
enum og_status drill_sched_unpublished(const struct drill *d, struct db *db, long *n,
                                       struct og_error *err);
/* Before any relay of the drill runs: the planned share of the events marked published. */
enum og_status drill_sched_lose(struct drill *d, struct db *db, struct og_error *err);

/* ---- conf.c ----------------------------------------------------------------------------- */

/* The children's private directory (d->conf_dir) and every child's file in it (d->conf_path). */
enum og_status drill_conf_make(struct drill *d, struct og_error *err);
/* Removes every file written and the directory; says on stderr what it could not remove. */
void drill_conf_remove(struct drill *d);

/* ---- children.c ------------------------------------------------------------------------- */

/* Finds ordergate-consumer (unless --no-kafka) and ordergate-scanner; OG_ERR_CONFIG. */
enum og_status drill_children_find(struct drill *d, struct og_error *err);
/* Starts the triggers: K consumers, or without Kafka the scanner repeating every second. */
enum og_status drill_children_start(struct drill *d, struct og_error *err);
/* SIGKILLs consumer k and starts it again in the same slot. */
enum og_status drill_children_restart(struct drill *d, int k, struct og_error *err);
/* Asks the triggers to stop (SIGTERM, bounded); says which did not stop cleanly. */
void drill_children_stop(struct drill *d);
/* Kills whatever child still runs (the way out). */
void drill_children_kill(struct drill *d);
/* Runs the scanner once (the fallback sweep); *status is its exit status. */
enum og_status drill_children_scan_once(struct drill *d, int *status, struct og_error *err);

/* ---- kafka.c ---------------------------------------------------------------------------- */

/* The drill's producer and its reader of the group's offsets, built by common/kafka. */
enum og_status drill_kafka_producer(const struct drill *d, rd_kafka_t **rk, struct og_error *err);
enum og_status drill_kafka_reader(const struct drill *d, rd_kafka_t **rk, struct og_error *err);
/* The delay topics, the dead-letter topic and the consumers' outbox topics. */
enum og_status drill_kafka_topics(const struct drill *d, rd_kafka_t *producer,
                                  struct og_error *err);
/* The cancel messages: one per order not lost, duplicates, garbage; flushed. */
enum og_status drill_kafka_produce(struct drill *d, rd_kafka_t *rk, struct og_error *err);
/* Messages of the delay topics the group has not committed; -1 when a broker did not answer. */
int64_t drill_kafka_lag(const struct drill *d, rd_kafka_t *reader);

/* ---- race.c ----------------------------------------------------------------------------- */

/* Starts the --payers threads, each sending its orders' actions at their time, and waits until
 * the triggers have drained (a consumer SIGKILLed and restarted every --kill-every), for at
 * most --settle-s after the last due time or action, or until signals_stop; the threads are
 * joined when it returns. */
enum og_status drill_race_run(struct drill *d, struct db *db, struct og_error *err);

/* ---- ledger.c --------------------------------------------------------------------------- */

/* Every answer the gate gave against the final state of its order; fills *t. */
enum og_status drill_ledger_check(struct drill *d, struct db *db, struct drill_totals *t,
                                  struct og_error *err);
/* --schedule-in-db: every event published, the delay topics hold what the relays sent. */
enum og_status drill_ledger_schedule(struct drill *d, struct db *db, rd_kafka_t *producer,
                                     struct og_error *err);
/* The garbage messages reached the dead-letter topic. */
void drill_ledger_dead_letters(struct drill *d, rd_kafka_t *producer);
/* ordergate.reconcile over the drill's window, into d->reconcile and d->violations. */
enum og_status drill_ledger_reconcile(struct drill *d, struct db *db, struct og_error *err);

/* ---- report.c --------------------------------------------------------------------------- */

/* "drill PREFIX [+1.2s] ..." on stderr: how the drill is going. */
void drill_report_progress(const struct drill *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* "ordergatectl drill: ..." on stderr: something the drill found (a violation, a gate error). */
void drill_report_finding(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The report: every count, the lateness of both triggers (asked of db) and the reconciliation. */
json_t *drill_report_make(const struct drill *d, struct db *db, const struct drill_totals *t,
                          double seconds);
/* The report as text, from the object --json prints. */
void drill_report_text(const json_t *r, FILE *out);

/* ---- faults.c --------------------------------------------------------------------------- */

/* Reads the plan at path into d->faults; OG_ERR_ARG naming the file and line of the first
 * error (nothing kept then). */
enum og_status drill_faults_load(struct drill *d, const char *path, struct og_error *err);
void drill_faults_free(struct drill *d);
/* Once T is known: the thread that applies and clears each fault at its time. */
enum og_status drill_faults_start(struct drill *d, struct og_error *err);
/* Asks the thread to stop, clears every fault applied and not cleared, joins it. Idempotent. */
void drill_faults_stop(struct drill *d);
/* Wall-clock end of the plan's last fault as planned (0 without a plan). */
int64_t drill_faults_last_end_ms(const struct drill *d);
/* Apply or clear commands that failed. */
int drill_faults_failed(const struct drill *d);
/* The report's "faults": each fault's times and the lateness of the orders due during it and
 * in the 30 s after, and how long until lateness was normal again. */
json_t *drill_faults_report(const struct drill *d, struct db *db);
void drill_faults_text(const json_t *r, FILE *out);

#endif
