/* ordergatectl drill: the acceptance test (README.md, "The drill") as a
 * product feature.
 *
 * Timeline of one drill:
 *   1. place N pending orders on a few hot SKUs (coupons on a share), due at
 *      one instant T (or spread over a window);
 *   2. start K consumers (child processes) on a drill topic and produce one
 *      delayed cancel message per order, some twice (duplicates), some never
 *      (lost), plus a few undecodable ones (dead letters);
 *   3. around T +- jitter fire payment callbacks through claim_payment for a
 *      share of the orders: duplicates, timeout-then-retry with the same
 *      txn_no, a second transaction for some; payment holds and manual closes
 *      for a few; optionally SIGKILL a consumer now and then and restart it;
 *   4. wait until every order whose message was not lost has left pending,
 *      stop the consumers, run the scanner once for the lost ones;
 *   5. reconcile: the database's invariants (ordergate.reconcile) and the
 *      drill's own ledger of every callback it sent.
 * Without Kafka (--no-kafka) the scanner, repeating every second, is the
 * only trigger: the first deployment tier (docs/operations.md, "Choose a
 * tier").
 * With --schedule-in-db the database writes the cancel messages: the drill
 * turns schedule_cancels on, fixes T before placement (place_order gets each
 * order's real deadline, which its cancel_scheduled event carries), marks
 * the lost share of those events published before any consumer starts (no
 * relay ever sends them), and produces nothing itself; the consumers' relays
 * publish the rest to delay topics named by level (<topic>.5s, <topic>.1m),
 * and holds write their own. The ledger then also asks that the consumers
 * cancelled every unpaid order whose message went out and the scanner only
 * lost ones, and that every event reached a delay topic.
 *
 * The drill's rows carry a unique prefix and the reconciliation is limited to
 * orders created since the drill began, so it can run on a shared database;
 * stock and coupon invariants are always checked whole. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <inttypes.h>
#include <jansson.h>
#include <librdkafka/rdkafka.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/db.h"
#include "common/gate.h"
#include "common/kafka.h"
#include "common/log.h"
#include "common/parse.h"
#include "common/path.h"
#include "common/pgarray.h"
#include "common/signals.h"
#include "tools/ctl/ctl.h"

#define DRILL_MAX_CONSUMERS 16
/* --schedule-in-db: the delay topics' levels, the last part of their names
 * (common/delay.h). A hold (4 s) and the drill's usual lead fit the first;
 * a longer wait goes to the second, or waits there when it is longer still. */
#define DRILL_DELAY_LEVELS 2
static const char *const drill_delay_levels[DRILL_DELAY_LEVELS] = {"5s", "1m"};

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
    uint64_t seed;
    const char *bin_dir;
};

/* What the drill planned for one order and what the gate answered. */
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
};

enum drill_action_kind { ACT_HOLD, ACT_PAY, ACT_CLOSE };

struct drill_action {
    int64_t at_ms;
    long order;
    enum drill_action_kind kind;
};

struct drill {
    struct drill_opts o;
    struct og_config *cfg;
    char prefix[32];
    char topic[96];
    char delay_topics[DRILL_DELAY_LEVELS][112]; /* what the consumers read: topic, or its levels */
    int ndelay;
    char topics_csv[DRILL_DELAY_LEVELS * 113];
    char dlq_topic[96];
    char group[96];
    /* The children's configuration files (drill_conf_dir_make): [0] the scanner's, [1 + k]
     * consumer k's, in conf_dir; "" = none written. */
    char conf_dir[PATH_MAX];
    char conf_path[DRILL_MAX_CONSUMERS + 1][PATH_MAX + 32];
    char consumer_bin[PATH_MAX];
    char scanner_bin[PATH_MAX];
    struct drill_order *orders;
    struct drill_action *actions;
    long nactions;
    int64_t t_ms;     /* the instant T */
    int64_t start_ms; /* wall clock at the start, for the reconciliation window */
    char start_iso[32];
    pid_t consumers[DRILL_MAX_CONSUMERS];
    pid_t scanner_pid;
    int restarts;
    long messages, dup_messages, lost_messages;
    int64_t dlq_count;
    /* --schedule-in-db: the setting's value before the drill (restored after
     * it), the drill's cancel_scheduled events and what reached the broker. */
    char schedule_before[8];
    long sched_events, sched_unpublished;
    int64_t delay_messages[DRILL_DELAY_LEVELS];
    int scanner_status;
    long violations;
    long ledger_violations;
    json_t *reconcile;
};

struct drill_worker {
    struct drill *d;
    int index;
    long done;
    long errors;
};

/* ---------------------------------------------------------------------------------------- */

static uint64_t drill_rng_next(uint64_t *s)
{
    /* xorshift64*: plenty for sampling, reproducible from --seed. */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * UINT64_C(2685821657736338717);
}

static double drill_rng_unit(uint64_t *s)
{
    return (double)(drill_rng_next(s) >> 11) / 9007199254740992.0;
}

static long drill_rng_range(uint64_t *s, long lo, long hi)
{
    return hi <= lo ? lo : lo + (long)(drill_rng_next(s) % (uint64_t)(hi - lo + 1));
}

static void drill_sleep_until(int64_t wall_ms)
{
    clock_sleep_until_flag((long)(wall_ms - clock_wall_ms()), &signals_stop, NULL);
}

static void drill_progress(const struct drill *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void drill_progress(const struct drill *d, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "drill %s [%+.1fs] ", d->prefix, (double)(clock_wall_ms() - d->t_ms) / 1000.0);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static struct db *drill_db(struct drill *d, const char *app)
{
    struct og_error err = {0};
    struct db_retry retry = {d->cfg->db_retry_max, d->cfg->db_retry_base_ms,
                             d->cfg->db_retry_cap_ms};
    struct db *db;

    if (db_new_passfile(d->cfg->db_conninfo, d->cfg->db_password_file, app, &retry, &signals_stop,
                        &db, &err) != OG_OK) {
        fprintf(stderr, "ordergatectl drill: %s\n", err.msg);
        return NULL;
    }
    db_set_session(db, &(struct db_session){0, 0, cfg_db_session(d->cfg).transaction_pool},
                   NULL); /* not connected yet: cannot fail */
    if (db_connect(db, &err) != OG_OK) {
        fprintf(stderr, "ordergatectl drill: %s\n", err.msg);
        db_free(db);
        db = NULL;
    }
    return db;
}

/* ---------------------------------------------------------------------------------------- */
/* Plan */

static int drill_action_cmp(const void *a, const void *b)
{
    const struct drill_action *x = a, *y = b;
    return (x->at_ms > y->at_ms) - (x->at_ms < y->at_ms);
}

static int drill_plan(struct drill *d)
{
    uint64_t rng = d->o.seed;
    long n = d->o.orders;
    long cap = n * 2 + 16;

    d->orders = calloc((size_t)n, sizeof(*d->orders));
    d->actions = calloc((size_t)cap, sizeof(*d->actions));
    if (d->orders == NULL || d->actions == NULL)
        return -1;
    for (long i = 0; i < n; i++) {
        struct drill_order *o = &d->orders[i];
        snprintf(o->order_no, sizeof(o->order_no), "%s%06ld", d->prefix, i);
        o->amount = drill_rng_range(&rng, 500, 20000); /* some above the auto-refund limit */
        o->qty = (int)drill_rng_range(&rng, 1, 3);
        o->sku = (int)(i % d->o.skus);
        if (drill_rng_unit(&rng) < d->o.coupon_ratio)
            snprintf(o->coupon, sizeof(o->coupon), "%sc%06ld", d->prefix, i);
        /* Spread due times rise with the order number, as they do for orders
         * placed over time with one payment window: a delay topic's
         * partitions then hold nearly monotonic due times, which is what
         * the consumer's pause-at-the-head waiting is built for. */
        o->due_ms = d->o.spread_ms > 0 ? (int64_t)d->o.spread_ms * i / n : 0;
        o->lost = drill_rng_unit(&rng) < d->o.loss_ratio;
        o->dup_msg = drill_rng_unit(&rng) < d->o.dup_ratio;
        o->pay = drill_rng_unit(&rng) < d->o.pay_ratio;
        o->pay_at_ms = drill_rng_range(&rng, -d->o.jitter_ms, d->o.jitter_ms);
        if (o->pay) {
            o->dup_cb = drill_rng_unit(&rng) < d->o.dup_ratio;
            o->retry_cb = drill_rng_unit(&rng) < d->o.dup_ratio;
            o->second_txn = drill_rng_unit(&rng) < d->o.double_pay_ratio;
            o->hold = drill_rng_unit(&rng) < d->o.hold_ratio;
        }
        o->close = drill_rng_unit(&rng) < d->o.close_ratio;
        o->close_at_ms = drill_rng_range(&rng, -d->o.jitter_ms, d->o.jitter_ms);
        /* With the database scheduling, a hold writes the order's message
         * anew (for the new deadline): an order that holds cannot lose it. */
        if (d->o.schedule_in_db && o->hold)
            o->lost = 0;
    }
    return 0;
}

/* Actions are planned relative to each order's due time, made absolute once
 * T is known (after placement). */
static void drill_schedule(struct drill *d)
{
    d->nactions = 0;
    for (long i = 0; i < d->o.orders; i++) {
        struct drill_order *o = &d->orders[i];
        o->due_ms += d->t_ms;
        if (o->hold) {
            /* The customer opens the payment page just before the deadline and
             * pays after it: the hold must keep the cancel away. */
            d->actions[d->nactions++] = (struct drill_action){o->due_ms - 1500, i, ACT_HOLD};
            o->pay_at_ms = o->due_ms + 1000;
        } else {
            o->pay_at_ms += o->due_ms;
        }
        if (o->pay)
            d->actions[d->nactions++] = (struct drill_action){o->pay_at_ms, i, ACT_PAY};
        if (o->close) {
            o->close_at_ms += o->due_ms;
            d->actions[d->nactions++] = (struct drill_action){o->close_at_ms, i, ACT_CLOSE};
        }
    }
    qsort(d->actions, (size_t)d->nactions, sizeof(*d->actions), drill_action_cmp);
}

/* ---------------------------------------------------------------------------------------- */
/* Setup: stock, coupons, orders */

static const struct db_stmt drill_stmt_stock = {"drill_stock",
                                                "SELECT ordergate.add_stock($1, $2::bigint)", 2};
static const struct db_stmt drill_stmt_coupon = {"drill_coupon", "SELECT ordergate.add_coupon($1)",
                                                 1};

static void *drill_place_worker(void *arg)
{
    struct drill_worker *w = arg;
    struct drill *d = w->d;
    struct db *db = drill_db(d, "ordergatectl-drill-place");
    struct og_error err = {0};
    char expire[32], items[160];

    if (db == NULL) {
        w->errors++;
        return NULL;
    }
    /* Nothing is set on these sessions (no synchronous_commit = off to place faster): a
     * transaction pooler may be in front whatever database.pool_mode says, and a session
     * setting would stay on a server connection that others get next. */
    for (long i = w->index; i < d->o.orders && !signals_stop; i += d->o.payers) {
        struct drill_order *o = &d->orders[i];
        enum gate_outcome out = GATE_UNKNOWN;

        if (o->coupon[0] != '\0' &&
            db_call(db, &drill_stmt_coupon, (const char *[]){o->coupon}, NULL, &err) != OG_OK) {
            fprintf(stderr, "ordergatectl drill: coupon %s: %s\n", o->coupon, err.msg);
            w->errors++;
            break;
        }
        snprintf(items, sizeof(items), "[{\"sku\":\"%ssku%02d\",\"qty\":%d}]", d->prefix, o->sku,
                 o->qty);
        /* Placement happens before T is fixed: give a far deadline now, then
         * move every order to its planned due time in one statement. With
         * the database scheduling, the deadline place_order is given is the
         * one its cancel message carries: T is fixed before placement. */
        clock_format_iso(d->o.schedule_in_db ? o->due_ms : clock_wall_ms() + 3600 * 1000, expire,
                         sizeof(expire));
        if (gate_place(db, o->order_no, o->amount, items, o->coupon[0] ? o->coupon : NULL, expire,
                       &out, &err) != OG_OK ||
            out != GATE_PLACED) {
            fprintf(stderr, "ordergatectl drill: place %s: %s\n", o->order_no,
                    out != GATE_PLACED && err.msg[0] == '\0' ? gate_outcome_str(out) : err.msg);
            w->errors++;
            break;
        }
        w->done++;
    }
    db_free(db);
    return NULL;
}

/* Sets every drill order's expire_at to T + its offset, once placement is
 * over, so that no order falls due while others are still being placed.
 * original_expire_at stays at placement time + 1 h (it only bounds holds).
 * Direct writes to orders are the owner's privilege: the drill runs as an
 * operator, never as the service role. */
static const struct db_stmt drill_stmt_due = {
    "drill_due",
    "UPDATE ordergate.orders o SET expire_at = to_timestamp(d.ms / 1000.0) "
    "  FROM unnest($1::text[], $2::bigint[]) AS d(order_no, ms) "
    " WHERE o.order_no = d.order_no AND o.status = 'pending_payment'",
    2};

static int drill_set_due(struct drill *d, struct db *db)
{
    struct pgarray names, times;
    struct og_error err = {0};
    int rc = 0;

    pgarray_init(&names);
    pgarray_init(&times);
    for (long i = 0; i < d->o.orders; i++) {
        pgarray_append(&names, d->orders[i].order_no);
        pgarray_append_int(&times, d->orders[i].due_ms);
    }
    if (pgarray_str(&names) == NULL || pgarray_str(&times) == NULL) {
        fprintf(stderr, "ordergatectl drill: setting due times: out of memory\n");
        rc = -1;
    } else if (db_call(db, &drill_stmt_due,
                       (const char *[]){pgarray_str(&names), pgarray_str(&times)}, NULL,
                       &err) != OG_OK) {
        fprintf(stderr, "ordergatectl drill: setting due times: %s\n", err.msg);
        rc = -1;
    }
    pgarray_free(&names);
    pgarray_free(&times);
    return rc;
}

static int drill_setup(struct drill *d, struct db *db)
{
    struct og_error err = {0};
    pthread_t tids[64];
    struct drill_worker w[64];
    int nthreads = d->o.payers;
    long placed = 0, errors = 0;
    int64_t t0 = clock_mono_ms();

    for (int s = 0; s < d->o.skus; s++) {
        char sku[48], qty[24];
        snprintf(sku, sizeof(sku), "%ssku%02d", d->prefix, s);
        snprintf(qty, sizeof(qty), "%ld", d->o.orders * 3 + 10);
        if (db_call(db, &drill_stmt_stock, (const char *[]){sku, qty}, NULL, &err) != OG_OK) {
            fprintf(stderr, "ordergatectl drill: add_stock: %s\n", err.msg);
            return -1;
        }
    }
    for (int t = 0; t < nthreads; t++) {
        w[t] = (struct drill_worker){.d = d, .index = t};
        pthread_create(&tids[t], NULL, drill_place_worker, &w[t]);
    }
    for (int t = 0; t < nthreads; t++) {
        pthread_join(tids[t], NULL);
        placed += w[t].done;
        errors += w[t].errors;
    }
    if (errors > 0 || placed != d->o.orders)
        return -1;
    drill_progress(d, "placed %ld orders on %d SKUs in %.1fs", placed, d->o.skus,
                   (double)(clock_mono_ms() - t0) / 1000.0);
    return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* --schedule-in-db: place_order writes the cancel messages, the consumers' relays publish them */

static const struct db_stmt drill_stmt_setting = {
    "drill_setting", "SELECT ordergate.set_setting('schedule_cancels', $1)", 1};

/* The drill's cancel_scheduled events (placements and holds) and how many are published. */
static const struct db_stmt drill_stmt_sched_count = {
    "drill_sched_count",
    "SELECT count(*), count(*) FILTER (WHERE published_at IS NOT NULL) FROM ordergate.outbox "
    " WHERE event_type = 'cancel_scheduled' AND starts_with(order_no, $1)",
    1};

/* Unpublished ones only: the partial index on unpublished rows keeps this cheap to poll. */
static const struct db_stmt drill_stmt_sched_unpublished = {
    "drill_sched_unpublished",
    "SELECT count(*) FROM ordergate.outbox "
    " WHERE published_at IS NULL AND event_type = 'cancel_scheduled' AND starts_with(order_no, $1)",
    1};

/* Losing a message: its row is marked published through the relay's own
 * function, so no relay ever sends it, as if the broker had lost it after
 * acknowledging it. At most 10000 per call (outbox_mark_published). */
static const struct db_stmt drill_stmt_lose = {
    "drill_lose",
    "SELECT ordergate.outbox_mark_published(ARRAY(SELECT b.id FROM ordergate.outbox b "
    " WHERE b.published_at IS NULL AND b.event_type = 'cancel_scheduled' "
    "   AND b.order_no = ANY ($1::text[]) ORDER BY b.id LIMIT 10000))",
    1};

/* Turns schedule_cancels on for the database (an admin's call); the value
 * it had is kept in d->schedule_before for drill_schedule_restore. */
static int drill_schedule_on(struct drill *d, struct db *db)
{
    PGresult *res = NULL;
    struct og_error err = {0};

    if (db_call(db, &drill_stmt_setting, (const char *[]){"1"}, &res, &err) != OG_OK) {
        fprintf(stderr,
                "ordergatectl drill: --schedule-in-db: set_setting('schedule_cancels', '1'): %s "
                "(the drill's role needs ordergate_admin)\n",
                err.msg);
        return -1;
    }
    snprintf(d->schedule_before, sizeof(d->schedule_before), "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    return 0;
}

/* Puts the setting back as the drill found it; says so when it cannot. */
static void drill_schedule_restore(struct drill *d, struct db *db)
{
    struct og_error err = {0};

    if (d->schedule_before[0] == '\0' || strcmp(d->schedule_before, "1") == 0)
        return;
    if (db == NULL ||
        db_call(db, &drill_stmt_setting, (const char *[]){d->schedule_before}, NULL, &err) != OG_OK)
        fprintf(stderr,
                "ordergatectl drill: schedule_cancels is still 1, it was %s before the drill: %s "
                "(SELECT ordergate.set_setting('schedule_cancels', '%s'))\n",
                d->schedule_before, db != NULL ? err.msg : "no database connection",
                d->schedule_before);
}

static int drill_sched_counts(struct drill *d, struct db *db, long *events, long *published)
{
    PGresult *res = NULL;
    struct og_error err = {0};

    if (db_call(db, &drill_stmt_sched_count, (const char *[]){d->prefix}, &res, &err) != OG_OK) {
        fprintf(stderr, "ordergatectl drill: counting cancel_scheduled events: %s\n", err.msg);
        return -1;
    }
    *events = atol(PQgetvalue(res, 0, 0));
    *published = atol(PQgetvalue(res, 0, 1));
    PQclear(res);
    return 0;
}

/* The drill's cancel_scheduled events no relay has published yet; -1 on a database error. */
static long drill_sched_unpublished(struct drill *d, struct db *db)
{
    PGresult *res = NULL;
    struct og_error err = {0};
    long n;

    if (db_call(db, &drill_stmt_sched_unpublished, (const char *[]){d->prefix}, &res, &err) !=
        OG_OK) {
        fprintf(stderr, "ordergatectl drill: %s\n", err.msg);
        return -1;
    }
    n = atol(PQgetvalue(res, 0, 0));
    PQclear(res);
    return n;
}

/* After placement, before any consumer (and so any relay of the drill)
 * runs: every order has its one unpublished event, and the planned share is
 * lost. An event published already means another relay serves this
 * database, which would publish to topics the drill does not watch. */
static int drill_schedule_lose(struct drill *d, struct db *db)
{
    struct pgarray lost;
    struct og_error err = {0};
    long events = 0, published = 0, planned = 0, marked = 0, n;
    int rc = -1;

    pgarray_init(&lost);
    if (drill_sched_counts(d, db, &events, &published) != 0)
        goto out;
    if (events != d->o.orders) {
        fprintf(stderr,
                "ordergatectl drill: place_order wrote %ld cancel_scheduled events for %ld "
                "orders (is schedule_cancels really 1?)\n",
                events, d->o.orders);
        goto out;
    }
    if (published > 0) {
        fprintf(stderr,
                "ordergatectl drill: %ld of the drill's cancel_scheduled events were published "
                "before its consumers ran: another outbox relay serves this database; "
                "--schedule-in-db needs a database of its own\n",
                published);
        goto out;
    }
    for (long i = 0; i < d->o.orders; i++)
        if (d->orders[i].lost) {
            pgarray_append(&lost, d->orders[i].order_no);
            planned++;
        }
    if (pgarray_str(&lost) == NULL) {
        fprintf(stderr, "ordergatectl drill: losing messages: out of memory\n");
        goto out;
    }
    do {
        PGresult *res = NULL;
        if (db_call(db, &drill_stmt_lose, (const char *[]){pgarray_str(&lost)}, &res, &err) !=
            OG_OK) {
            fprintf(stderr, "ordergatectl drill: losing messages: %s\n", err.msg);
            goto out;
        }
        n = atol(PQgetvalue(res, 0, 0));
        marked += n;
        PQclear(res);
    } while (n > 0);
    if (marked != planned) {
        fprintf(stderr, "ordergatectl drill: %ld messages to lose, %ld marked\n", planned, marked);
        goto out;
    }
    d->lost_messages = marked;
    rc = 0;
out:
    pgarray_free(&lost);
    return rc;
}

/* ---------------------------------------------------------------------------------------- */
/* Child processes */

static int drill_find_bin(const struct drill *d, const char *name, const char *subdir, char *out,
                          size_t size)
{
    char self[PATH_MAX];
    const char *path;

    if (d->o.bin_dir != NULL) {
        snprintf(out, size, "%s/%s", d->o.bin_dir, name);
        return access(out, X_OK) == 0 ? 0 : -1;
    }
    if (path_exe_dir(self, sizeof(self))) {
        /* Installed side by side, or the build tree (tools/ next to consumer/). */
        snprintf(out, size, "%s/%s", self, name);
        if (access(out, X_OK) == 0)
            return 0;
        snprintf(out, size, "%s/../%s/%s", self, subdir, name);
        if (access(out, X_OK) == 0)
            return 0;
    }
    path = getenv("PATH");
    while (path != NULL && *path) {
        const char *colon = strchr(path, ':');
        int len = colon ? (int)(colon - path) : (int)strlen(path);
        snprintf(out, size, "%.*s/%s", len, path, name);
        if (access(out, X_OK) == 0)
            return 0;
        path = colon ? colon + 1 : NULL;
    }
    return -1;
}

/* The children's configuration files hold what they need, secrets included (a conninfo's
 * password, kafka.properties such as sasl.password): they live in a directory of the drill's
 * own, made by mkdtemp under $TMPDIR (else /tmp), so with mode 0700 and a name nobody can know
 * beforehand, and each is created there exclusively (O_EXCL, never through a link) with mode
 * 0600. drill_conf_dir_remove takes the lot away when the drill ends, also when SIGINT or
 * SIGTERM stopped it (drill_signals_install). */
static int drill_conf_dir_make(struct drill *d)
{
    const char *tmp = getenv("TMPDIR");

    if (tmp == NULL || *tmp == '\0')
        tmp = "/tmp";
    if ((size_t)snprintf(d->conf_dir, sizeof(d->conf_dir), "%s/ordergate-drill-XXXXXX", tmp) >=
        sizeof(d->conf_dir)) {
        fprintf(stderr, "ordergatectl drill: TMPDIR %.64s...: too long\n", tmp);
        d->conf_dir[0] = '\0';
        return -1;
    }
    if (mkdtemp(d->conf_dir) == NULL) {
        fprintf(stderr, "ordergatectl drill: cannot make a directory in %s: %s\n", tmp,
                strerror(errno));
        d->conf_dir[0] = '\0';
        return -1;
    }
    return 0;
}

static void drill_conf_dir_remove(struct drill *d)
{
    for (int k = 0; k <= DRILL_MAX_CONSUMERS; k++) {
        if (d->conf_path[k][0] != '\0' && unlink(d->conf_path[k]) != 0 && errno != ENOENT)
            fprintf(stderr, "ordergatectl drill: cannot remove %s: %s\n", d->conf_path[k],
                    strerror(errno));
        d->conf_path[k][0] = '\0';
    }
    if (d->conf_dir[0] != '\0' && rmdir(d->conf_dir) != 0)
        fprintf(stderr, "ordergatectl drill: cannot remove %s: %s\n", d->conf_dir, strerror(errno));
    d->conf_dir[0] = '\0';
}

/* s as a libconfig string literal: '"' and '\' escaped, control characters as \xNN, so that
 * a child reads back exactly s (a password with a quote or a backslash in a conninfo). */
static void drill_conf_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(f, "\\x%02x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

/* One "name = value;" with value as a string literal. */
static void drill_conf_set(FILE *f, const char *name, const char *value)
{
    fprintf(f, " %s = ", name);
    drill_conf_str(f, value);
    fputc(';', f);
}

/* The children read config files written for this drill: the database and
 * brokers of the drill (with the password files and kafka.properties of its
 * own configuration), its own topics and group, no HTTP endpoint. Each
 * consumer slot gets its own file with a static group membership
 * (kafka.group_instance_id): a consumer killed and restarted in the same slot takes
 * its partitions back at once instead of waiting for the group to time the
 * dead member out. slot -1 is the scanner's file. */
static int drill_write_config(struct drill *d, int slot)
{
    FILE *f;
    const struct og_config *c = d->cfg;
    char *path = d->conf_path[slot + 1];
    char name[sizeof(d->topic) + 16];
    int fd;

    snprintf(path, sizeof(d->conf_path[0]), "%s/%s-%d.conf", d->conf_dir,
             slot < 0 ? "scanner" : "consumer", slot + 1);
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        fprintf(stderr, "ordergatectl drill: cannot create %s: %s\n", path, strerror(errno));
        path[0] = '\0'; /* not ours: never removed */
        return -1;
    }
    f = fdopen(fd, "w");
    if (f == NULL) {
        close(fd);
        return -1;
    }
    fprintf(f, "# written by ordergatectl drill %s\n", d->prefix);
    fprintf(f, "log_level = \"warn\";\n");
    fprintf(f, "database: {");
    drill_conf_set(f, "conninfo", c->db_conninfo);
    drill_conf_set(f, "password_file", c->db_password_file);
    drill_conf_set(f, "pool_mode", c->db_pool_mode);
    fprintf(f, " };\nkafka: {");
    drill_conf_set(f, "brokers", c->brokers);
    drill_conf_set(f, "topics", d->topics_csv);
    drill_conf_set(f, "group", d->group);
    drill_conf_set(f, "dead_letter_topic", d->dlq_topic);
    drill_conf_set(f, "sasl_password_file", c->kafka_sasl_password_file);
    fprintf(f, "\n ");
    if (slot >= 0) {
        char id[sizeof(d->group) + 16];
        snprintf(id, sizeof(id), "%s-%d", d->group, slot);
        drill_conf_set(f, "group_instance_id", id);
        fprintf(f, "\n ");
    }
    fprintf(f, " properties = [");
    for (size_t i = 0; i < c->kafka_props_n; i++) {
        fprintf(f, "%s", i ? ", " : "");
        drill_conf_str(f, c->kafka_props[i]);
    }
    fprintf(f, "]; };\n");
    fprintf(f, "consumer: { batch_size = %d; linger_ms = %d; metrics_listen = \"\"; };\n",
            c->batch_size, c->linger_ms);
    fprintf(f, "outbox: { enabled = true;");
    snprintf(name, sizeof(name), "%s.events", d->topic);
    drill_conf_set(f, "topic", name);
    snprintf(name, sizeof(name), "%s.refunds", d->topic);
    drill_conf_set(f, "refund_topic", name);
    snprintf(name, sizeof(name), "%s.alerts", d->topic);
    drill_conf_set(f, "alert_topic", name);
    fprintf(f, " batch = %d; interval_ms = %d; };\n", c->outbox_batch, c->outbox_interval_ms);
    fprintf(f, "scanner: { grace_s = 0; batch_size = %d; pause_ms = 0; every_s = 1; };\n",
            c->scan_batch_size);
    return fclose(f) == 0 ? 0 : -1;
}

static pid_t drill_spawn(const char *bin, const char *const *args)
{
    pid_t pid = fork();

    if (pid == 0) {
        execv(bin, (char *const *)args);
        fprintf(stderr, "ordergatectl drill: exec %s: %s\n", bin, strerror(errno));
        _exit(127);
    }
    return pid;
}

static pid_t drill_start_consumer(struct drill *d, int slot)
{
    const char *args[] = {d->consumer_bin, "--config", d->conf_path[slot + 1], NULL};
    return drill_spawn(d->consumer_bin, args);
}

/* Sends sig and waits up to timeout_ms; SIGKILL after that. Returns the
 * wait status, or -1 when the child had to be killed. */
static int drill_stop_child(pid_t pid, int sig, int timeout_ms)
{
    int status = 0;

    if (pid <= 0)
        return 0;
    kill(pid, sig);
    for (int waited = 0; waited < timeout_ms; waited += 50) {
        if (waitpid(pid, &status, WNOHANG) == pid)
            return status;
        usleep(50 * 1000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

/* ---------------------------------------------------------------------------------------- */
/* Kafka */

/* The drill's producer (cancel messages, topics, counts), built like every producer of the
 * product (kafka_producer_new: kafka.properties, kafka.sasl_password_file, TLS settings). */
static rd_kafka_t *drill_producer(struct drill *d)
{
    struct og_error err = {0};
    rd_kafka_t *rk = NULL;

    if (kafka_producer_new(d->cfg, "ordergatectl-drill", NULL, &rk, &err) != OG_OK)
        fprintf(stderr, "ordergatectl drill: producer: %s\n", err.msg);
    return rk;
}

/* A handle that only reads the consumer group's committed offsets: it never
 * subscribes, so it never joins the group. Built by kafka_conf_new for the
 * drill's group, as the consumers' own; it commits nothing. */
static rd_kafka_t *drill_group_reader(struct drill *d)
{
    struct og_config rc = *d->cfg; /* borrows every string: never freed */
    struct og_error err = {0};
    rd_kafka_conf_t *conf = NULL;
    char errstr[256];
    rd_kafka_t *rk;

    rc.group = d->group;
    rc.group_instance_id = (char *)"";
    if (kafka_conf_new(&rc, KAFKA_ROLE_CONSUMER, "ordergatectl-drill-offsets", &conf, &err) !=
        OG_OK) {
        fprintf(stderr, "ordergatectl drill: group offsets reader: %s\n", err.msg);
        return NULL;
    }
    if (rd_kafka_conf_set(conf, "enable.auto.commit", "false", errstr, sizeof(errstr)) !=
        RD_KAFKA_CONF_OK) {
        fprintf(stderr, "ordergatectl drill: group offsets reader: %s\n", errstr);
        rd_kafka_conf_destroy(conf);
        return NULL;
    }
    rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
    if (rk == NULL) {
        rd_kafka_conf_destroy(conf);
        fprintf(stderr, "ordergatectl drill: group offsets reader: %s\n", errstr);
    }
    return rk;
}

/* Messages of one topic the group has not committed yet (high watermark
 * minus committed offset, over every partition); -1 when the broker does
 * not answer. */
static int64_t drill_topic_lag(rd_kafka_t *rk, const char *topic)
{
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_topic_t *t = rd_kafka_topic_new(rk, topic, NULL);
    rd_kafka_topic_partition_list_t *parts = NULL;
    int64_t lag = 0;

    if (t == NULL || rd_kafka_metadata(rk, 0, t, &md, 10000) != RD_KAFKA_RESP_ERR_NO_ERROR ||
        md->topic_cnt != 1) {
        lag = -1;
        goto out;
    }
    parts = rd_kafka_topic_partition_list_new(md->topics[0].partition_cnt);
    for (int p = 0; p < md->topics[0].partition_cnt; p++)
        rd_kafka_topic_partition_list_add(parts, topic, md->topics[0].partitions[p].id);
    if (rd_kafka_committed(rk, parts, 10000) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        lag = -1;
        goto out;
    }
    for (int i = 0; i < parts->cnt; i++) {
        int64_t lo = 0, hi = 0, at = parts->elems[i].offset;
        if (rd_kafka_query_watermark_offsets(rk, topic, parts->elems[i].partition, &lo, &hi,
                                             10000) != RD_KAFKA_RESP_ERR_NO_ERROR) {
            lag = -1;
            goto out;
        }
        if (at < lo) /* nothing committed yet (RD_KAFKA_OFFSET_INVALID) */
            at = lo;
        lag += hi > at ? hi - at : 0;
    }
out:
    if (parts != NULL)
        rd_kafka_topic_partition_list_destroy(parts);
    if (md != NULL)
        rd_kafka_metadata_destroy(md);
    if (t != NULL)
        rd_kafka_topic_destroy(t);
    return lag;
}

/* The same over every delay topic the consumers read; -1 when the broker
 * does not answer for one of them. */
static int64_t drill_group_lag(struct drill *d, rd_kafka_t *rk)
{
    int64_t lag = 0;

    for (int i = 0; i < d->ndelay; i++) {
        int64_t l = drill_topic_lag(rk, d->delay_topics[i]);
        if (l < 0)
            return -1;
        lag += l;
    }
    return lag;
}

static int drill_create_topic(rd_kafka_t *rk, const char *topic, int partitions)
{
    struct og_error err = {0};
    bool created;

    if (kafka_topic_create(rk, topic, partitions, -1, &created, &err) != OG_OK) {
        fprintf(stderr, "ordergatectl drill: create topic: %s\n", err.msg);
        return -1;
    }
    return 0;
}

/* The delay topics, the dead-letter topic and the topics of the consumers'
 * outbox relays (drill_write_config). */
static int drill_create_topics(struct drill *d, rd_kafka_t *producer)
{
    static const char *const outbox_kinds[] = {"events", "refunds", "alerts"};
    int partitions = d->o.consumers > 2 ? 2 * d->o.consumers : 4;

    for (int i = 0; i < d->ndelay; i++)
        if (drill_create_topic(producer, d->delay_topics[i], partitions) != 0)
            return -1;
    if (drill_create_topic(producer, d->dlq_topic, 1) != 0)
        return -1;
    for (int k = 0; k < 3; k++) {
        char name[sizeof(d->topic) + 16];
        snprintf(name, sizeof(name), "%s.%s", d->topic, outbox_kinds[k]);
        if (drill_create_topic(producer, name, 1) != 0)
            return -1;
    }
    return 0;
}

static int drill_produce_one(rd_kafka_t *rk, const char *topic, const char *key, const char *value)
{
    rd_kafka_resp_err_t e;

    for (;;) {
        e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(key, strlen(key)),
                              RD_KAFKA_V_VALUE((void *)value, strlen(value)),
                              RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
        if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL)
            break;
        rd_kafka_poll(rk, 50);
    }
    return e == RD_KAFKA_RESP_ERR_NO_ERROR ? 0 : -1;
}

static int drill_produce(struct drill *d, rd_kafka_t *rk)
{
    char value[160], due[32];
    static const char *const garbage[] = {
        "not json", "{\"v\":2,\"order_no\":\"x\",\"due_at\":\"2026-11-30T16:00:00Z\"}",
        "{\"v\":1,\"order_no\":\"bad order\",\"due_at\":\"2026-11-30T16:00:00Z\"}",
        "{\"v\":1,\"order_no\":\"x1\",\"due_at\":\"yesterday\"}", "[]"};

    for (long i = 0; i < d->o.orders && !signals_stop; i++) {
        struct drill_order *o = &d->orders[i];
        if (o->lost) {
            d->lost_messages++;
            continue;
        }
        snprintf(value, sizeof(value), "{\"v\":1,\"order_no\":\"%s\",\"due_at\":\"%s\"}",
                 o->order_no, clock_format_iso(o->due_ms, due, sizeof(due)));
        if (drill_produce_one(rk, d->topic, o->order_no, value) != 0)
            return -1;
        d->messages++;
    }
    /* Duplicates go last, as a retried scheduler would send them. */
    for (long i = 0; i < d->o.orders; i++) {
        struct drill_order *o = &d->orders[i];
        if (o->lost || !o->dup_msg)
            continue;
        snprintf(value, sizeof(value), "{\"v\":1,\"order_no\":\"%s\",\"due_at\":\"%s\"}",
                 o->order_no, clock_format_iso(o->due_ms, due, sizeof(due)));
        if (drill_produce_one(rk, d->topic, o->order_no, value) != 0)
            return -1;
        d->dup_messages++;
    }
    for (int g = 0; g < d->o.garbage; g++) {
        const char *v = garbage[g % (int)(sizeof(garbage) / sizeof(garbage[0]))];
        if (drill_produce_one(rk, d->topic, "garbage", v) != 0)
            return -1;
    }
    return rd_kafka_flush(rk, 60000) == RD_KAFKA_RESP_ERR_NO_ERROR ? 0 : -1;
}

/* ---------------------------------------------------------------------------------------- */
/* The race: payment callbacks, holds and manual closes */

/* Counts a repeated call; returns the answer a payment's first sending stands for: when the
 * call was repeated (the connection was lost, perhaps after the commit) a "duplicate" is the
 * repeat meeting the attempt that had committed, whose outcome it carries. */
static enum gate_outcome drill_answer(struct drill_order *o, struct db *db,
                                      const struct gate_payment_result *r, bool first_sending)
{
    if (db_last_attempts(db) <= 1)
        return r->outcome;
    o->repeats++;
    return first_sending && r->outcome == GATE_DUPLICATE ? r->first_outcome : r->outcome;
}

static void drill_pay(struct drill_worker *w, struct db *db, struct drill_order *o, uint64_t *rng)
{
    char txn[64], txn2[64];
    struct gate_payment_result r = {0};
    struct og_error err = {0};

    snprintf(txn, sizeof(txn), "%s-t1", o->order_no);
    if (gate_claim_payment(db, o->order_no, txn, o->amount, "drill", &r, &err) != OG_OK) {
        o->errors++;
        w->errors++;
        return;
    }
    o->pay1 = drill_answer(o, db, &r, true);
    if (o->retry_cb) {
        /* The first answer was lost on the way back (client timeout); the
         * channel retries with the same transaction number a moment later,
         * while cancels keep running. */
        usleep((useconds_t)drill_rng_range(rng, 0, 300) * 1000);
        if (gate_claim_payment(db, o->order_no, txn, o->amount, "drill", &r, &err) != OG_OK)
            o->errors++;
        o->pay_retry = drill_answer(o, db, &r, false);
        o->pay_retry_first = r.first_outcome;
    }
    if (o->dup_cb) {
        if (gate_claim_payment(db, o->order_no, txn, o->amount, "drill", &r, &err) != OG_OK)
            o->errors++;
        o->pay_dup = drill_answer(o, db, &r, false);
        o->pay_dup_first = r.first_outcome;
    }
    if (o->second_txn) {
        snprintf(txn2, sizeof(txn2), "%s-t2", o->order_no);
        if (gate_claim_payment(db, o->order_no, txn2, o->amount, "drill", &r, &err) != OG_OK)
            o->errors++;
        o->pay2 = drill_answer(o, db, &r, true);
    }
}

static void *drill_race_worker(void *arg)
{
    struct drill_worker *w = arg;
    struct drill *d = w->d;
    struct db *db = drill_db(d, "ordergatectl-drill");
    uint64_t rng = d->o.seed ^ (uint64_t)(w->index + 1) * UINT64_C(0x9E3779B97F4A7C15);
    struct og_error err = {0};

    if (db == NULL) {
        w->errors++;
        return NULL;
    }
    for (long a = 0; a < d->nactions && !signals_stop; a++) {
        const struct drill_action *act = &d->actions[a];
        struct drill_order *o = &d->orders[act->order];
        enum order_status st;

        /* Each order belongs to one worker, so its actions keep their order. */
        if (act->order % d->o.payers != w->index)
            continue;
        drill_sleep_until(act->at_ms);
        switch (act->kind) {
        case ACT_HOLD:
            if (gate_hold(db, o->order_no, 4, &o->hold_out, NULL, 0, &err) != OG_OK)
                o->errors++;
            o->repeats += db_last_attempts(db) > 1;
            break;
        case ACT_PAY:
            drill_pay(w, db, o, &rng);
            break;
        case ACT_CLOSE:
            if (gate_close(db, o->order_no, "drill", "customer asked to cancel", &o->close_out, &st,
                           &err) != OG_OK)
                o->errors++;
            /* A repeat after a close that had committed finds it cancelled (by this close). */
            if (db_last_attempts(db) > 1) {
                o->repeats++;
                o->close_repeated = 1;
            }
            break;
        }
        if (o->errors > 0 && err.msg[0] != '\0') {
            fprintf(stderr, "ordergatectl drill: %s: %s\n", o->order_no, err.msg);
            err.msg[0] = '\0';
        }
        w->done++;
    }
    db_free(db);
    return NULL;
}

/* ---------------------------------------------------------------------------------------- */
/* Waiting, checking */

static const struct db_stmt drill_stmt_pending_due = {
    "drill_pending_due",
    "SELECT order_no FROM ordergate.orders "
    " WHERE status = 'pending_payment' AND expire_at <= now() AND starts_with(order_no, $1)",
    1};

static int drill_cmp_str(const void *a, const void *b)
{
    return strcmp(((const struct drill_order *)a)->order_no,
                  ((const struct drill_order *)b)->order_no);
}

/* Counts due, still pending orders whose message was not lost: the consumers'
 * remaining work. Returns -1 on a database error. */
static long drill_consumer_backlog(struct drill *d, struct db *db, long *pending_due)
{
    PGresult *res = NULL;
    struct og_error err = {0};
    long left = 0;

    if (db_call(db, &drill_stmt_pending_due, (const char *[]){d->prefix}, &res, &err) != OG_OK) {
        fprintf(stderr, "ordergatectl drill: %s\n", err.msg);
        return -1;
    }
    *pending_due = PQntuples(res);
    for (int i = 0; i < PQntuples(res); i++) {
        struct drill_order key, *o;
        snprintf(key.order_no, sizeof(key.order_no), "%s", PQgetvalue(res, i, 0));
        /* Orders are generated in sorted order, so bsearch applies. */
        o = bsearch(&key, d->orders, (size_t)d->o.orders, sizeof(*o), drill_cmp_str);
        if (o == NULL || !o->lost)
            left++;
    }
    PQclear(res);
    return left;
}

static const struct db_stmt drill_stmt_final = {
    "drill_final",
    "SELECT o.order_no, o.status, coalesce(s.source, ''), "
    "       (SELECT count(*) FROM ordergate.exceptions e WHERE e.order_no = o.order_no) "
    "  FROM ordergate.orders o LEFT JOIN ordergate.status_log s ON s.order_no = o.order_no "
    " WHERE starts_with(o.order_no, $1) ORDER BY o.order_no",
    1};

struct drill_totals {
    long placed, paid, cancelled_consumer, cancelled_scanner, cancelled_manual, pending;
    long late_payments, double_payments, dup_callbacks_absorbed, errors, repeated_calls;
};

static void drill_ledger_fail(struct drill *d, const struct drill_order *o, const char *what)
{
    if (d->ledger_violations < 20)
        fprintf(stderr, "ordergatectl drill: VIOLATION %s: %s\n", o->order_no, what);
    d->ledger_violations++;
}

/* Checks every answer the gate gave against the final state of the order. */
static int drill_check_ledger(struct drill *d, struct db *db, struct drill_totals *t)
{
    PGresult *res = NULL;
    struct og_error err = {0};

    if (db_call(db, &drill_stmt_final, (const char *[]){d->prefix}, &res, &err) != OG_OK) {
        fprintf(stderr, "ordergatectl drill: %s\n", err.msg);
        return -1;
    }
    if (PQntuples(res) != d->o.orders) {
        fprintf(stderr, "ordergatectl drill: expected %ld orders, found %d\n", d->o.orders,
                PQntuples(res));
        d->ledger_violations++;
    }
    for (int i = 0; i < PQntuples(res) && i < d->o.orders; i++) {
        struct drill_order *o = &d->orders[i];
        enum order_status st = order_status_parse(PQgetvalue(res, i, 1));
        const char *src = PQgetvalue(res, i, 2);
        long exceptions = atol(PQgetvalue(res, i, 3));
        long want_exceptions = 0;

        if (strcmp(o->order_no, PQgetvalue(res, i, 0)) != 0) {
            drill_ledger_fail(d, o, "order list differs from the plan");
            continue;
        }
        t->placed++;
        t->errors += o->errors;
        t->repeated_calls += o->repeats;
        if (o->close && o->close_repeated && o->close_out == GATE_ALREADY_CANCELLED &&
            st == ORDER_CANCELLED && strcmp(src, "manual") == 0)
            o->close_out = GATE_CANCELLED;
        if (o->errors > 0)
            drill_ledger_fail(d, o, "the gate returned an error to a caller");
        if (st == ORDER_PAID)
            t->paid++;
        else if (st == ORDER_PENDING)
            t->pending++;
        else if (strcmp(src, "timeout_consumer") == 0)
            t->cancelled_consumer++;
        else if (strcmp(src, "timeout_scanner") == 0)
            t->cancelled_scanner++;
        else if (strcmp(src, "manual") == 0)
            t->cancelled_manual++;
        if (st == ORDER_PENDING)
            drill_ledger_fail(d, o, "still pending after its deadline and the scanner");
        /* With the database scheduling every message but the lost ones went
         * out through a relay the drill waited for: the consumers cancel
         * those, the scanner exactly the lost ones that nobody paid or closed. */
        if (d->o.schedule_in_db && st == ORDER_CANCELLED) {
            if (!o->lost && strcmp(src, "timeout_scanner") == 0)
                drill_ledger_fail(d, o, "the scanner cancelled an order whose message was sent");
            if (o->lost && strcmp(src, "timeout_consumer") == 0)
                drill_ledger_fail(d, o, "a consumer cancelled an order whose message was lost");
        }
        if (o->pay) {
            /* The first answer decides; the state must agree with it. */
            if (o->pay1 == GATE_PAID && st != ORDER_PAID)
                drill_ledger_fail(d, o, "payment answered paid but the order is not paid");
            if (o->pay1 == GATE_LATE_PAYMENT) {
                t->late_payments++;
                want_exceptions++;
                if (st != ORDER_CANCELLED)
                    drill_ledger_fail(d, o, "late_payment but the order is not cancelled");
            }
            if (o->pay1 != GATE_PAID && o->pay1 != GATE_LATE_PAYMENT)
                drill_ledger_fail(d, o, "first payment answer was neither paid nor late_payment");
            if (st == ORDER_PAID && o->pay1 != GATE_PAID)
                drill_ledger_fail(d, o, "order paid without a winning payment");
            if (o->retry_cb) {
                if (o->pay_retry != GATE_DUPLICATE || o->pay_retry_first != o->pay1)
                    drill_ledger_fail(d, o, "retried payment did not return the first outcome");
                else
                    t->dup_callbacks_absorbed++;
            }
            if (o->dup_cb) {
                if (o->pay_dup != GATE_DUPLICATE || o->pay_dup_first != o->pay1)
                    drill_ledger_fail(d, o, "duplicate callback did not return the first outcome");
                else
                    t->dup_callbacks_absorbed++;
            }
            if (o->second_txn) {
                enum gate_outcome want = st == ORDER_PAID ? GATE_DOUBLE_PAYMENT : GATE_LATE_PAYMENT;
                want_exceptions++;
                if (o->pay2 != want)
                    drill_ledger_fail(d, o, "second transaction got the wrong outcome");
                if (o->pay2 == GATE_DOUBLE_PAYMENT)
                    t->double_payments++;
                else if (o->pay2 == GATE_LATE_PAYMENT)
                    t->late_payments++;
            }
            if (o->hold && o->hold_out != GATE_HELD && o->hold_out != GATE_NOT_PENDING)
                drill_ledger_fail(d, o, "hold got an unexpected outcome");
        } else if (st == ORDER_PAID) {
            drill_ledger_fail(d, o, "paid although no payment was sent");
        }
        if (o->close) {
            if (o->close_out == GATE_CANCELLED && (st != ORDER_CANCELLED || strcmp(src, "manual")))
                drill_ledger_fail(d, o, "manual close won but the log disagrees");
            if (o->close_out == GATE_ALREADY_PAID && st != ORDER_PAID)
                drill_ledger_fail(d, o, "close saw already_paid but the order is not paid");
            if (o->close_out == GATE_ALREADY_CANCELLED &&
                (st != ORDER_CANCELLED || strcmp(src, "manual") == 0))
                drill_ledger_fail(d, o, "close saw already_cancelled but the log disagrees");
        }
        if (exceptions != want_exceptions)
            drill_ledger_fail(d, o, "exceptions do not match the payments that lost");
    }
    PQclear(res);
    return 0;
}

/* With the database scheduling: every event of the drill was published,
 * and the delay topics hold at least what the relays marked published
 * (more with re-schedules and the relays' at-least-once repeats). The
 * orders' side is drill_check_ledger's. */
static int drill_check_schedule(struct drill *d, struct db *db, rd_kafka_t *producer)
{
    long published = 0;
    int64_t on_topics = 0;

    if (drill_sched_counts(d, db, &d->sched_events, &published) != 0)
        return -1;
    d->sched_unpublished = d->sched_events - published;
    d->messages = published - d->lost_messages; /* what the relays sent */
    for (int i = 0; i < d->ndelay; i++) {
        d->delay_messages[i] = kafka_topic_messages(producer, d->delay_topics[i], 10000);
        on_topics += d->delay_messages[i] > 0 ? d->delay_messages[i] : 0;
    }
    if (d->sched_unpublished > 0) {
        fprintf(stderr,
                "ordergatectl drill: VIOLATION %ld of the drill's %ld cancel_scheduled events "
                "were never published\n",
                d->sched_unpublished, d->sched_events);
        d->ledger_violations++;
    }
    if (on_topics < d->messages) {
        fprintf(stderr,
                "ordergatectl drill: VIOLATION the relays published %ld cancel messages, the delay "
                "topics hold %" PRId64 "\n",
                d->messages, on_topics);
        d->ledger_violations++;
    }
    return 0;
}

static const struct db_stmt drill_stmt_reconcile = {
    "drill_reconcile",
    "SELECT invariant, name, violations, array_to_string(sample, ' ') "
    "  FROM ordergate.reconcile($1::timestamptz, '0 seconds', '1 minute') ORDER BY invariant",
    1};

static int drill_reconcile(struct drill *d, struct db *db)
{
    PGresult *res = NULL;
    struct og_error err = {0};

    if (db_call(db, &drill_stmt_reconcile, (const char *[]){d->start_iso}, &res, &err) != OG_OK) {
        fprintf(stderr, "ordergatectl drill: reconcile: %s\n", err.msg);
        return -1;
    }
    d->reconcile = json_array();
    for (int i = 0; i < PQntuples(res); i++) {
        long v = atol(PQgetvalue(res, i, 2));
        d->violations += v;
        json_array_append_new(
            d->reconcile, json_pack("{s:i,s:s,s:I,s:s}", "invariant", atoi(PQgetvalue(res, i, 0)),
                                    "name", PQgetvalue(res, i, 1), "violations", (json_int_t)v,
                                    "sample", PQgetvalue(res, i, 3)));
        if (v > 0)
            fprintf(stderr, "ordergatectl drill: VIOLATION invariant %s (%s): %ld, e.g. %s\n",
                    PQgetvalue(res, i, 0), PQgetvalue(res, i, 1), v, PQgetvalue(res, i, 3));
    }
    PQclear(res);
    return 0;
}

static const struct db_stmt drill_stmt_lateness = {
    "drill_lateness",
    "SELECT count(*), "
    "       coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY l), 0), "
    "       coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY l), 0), coalesce(max(l), 0) "
    "  FROM (SELECT extract(epoch FROM s.created_at - o.expire_at) * 1000 AS l "
    "          FROM ordergate.status_log s JOIN ordergate.orders o USING (order_no) "
    "         WHERE starts_with(o.order_no, $1) AND s.source = $2) x",
    2};

/* Lateness of the cancellations of one source, in milliseconds. */
static json_t *drill_lateness(struct db *db, const char *prefix, const char *source)
{
    PGresult *res = NULL;
    struct og_error err = {0};
    json_t *j;

    if (db_call(db, &drill_stmt_lateness, (const char *[]){prefix, source}, &res, &err) != OG_OK)
        return json_null();
    j = json_pack("{s:I,s:f,s:f,s:f}", "count", (json_int_t)atol(PQgetvalue(res, 0, 0)), "p50_ms",
                  atof(PQgetvalue(res, 0, 1)), "p99_ms", atof(PQgetvalue(res, 0, 2)), "max_ms",
                  atof(PQgetvalue(res, 0, 3)));
    PQclear(res);
    return j;
}

/* ---------------------------------------------------------------------------------------- */
/* Report */

/* The drill's result: every count, the lateness of both triggers and the reconciliation. */
static json_t *drill_report(struct drill *d, const struct drill_totals *t, json_t *lat_consumer,
                            json_t *lat_scanner, double seconds)
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
        {"ledger_violations", d->ledger_violations},
        {"violations", total_violations},
    };

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
    if (d->o.schedule_in_db) {
        json_t *topics = json_object();
        for (int i = 0; i < d->ndelay; i++)
            ctl_json_set(topics, d->delay_topics[i], json_integer(d->delay_messages[i]));
        ctl_json_set(j, "cancel_events", json_integer(d->sched_events));
        ctl_json_set(j, "unpublished_events", json_integer(d->sched_unpublished));
        ctl_json_set(j, "delay_topics", topics);
    }
    ctl_json_set(j, "seconds", json_real(seconds));
    ctl_json_set(j, "lateness_consumer", json_incref(lat_consumer));
    ctl_json_set(j, "lateness_scanner", json_incref(lat_scanner));
    ctl_json_set(j, "reconcile", d->reconcile ? json_incref(d->reconcile) : json_null());
    return j;
}

static long drill_count(const json_t *r, const char *key)
{
    return (long)json_integer_value(json_object_get(r, key));
}

static void drill_text_lateness(FILE *out, const char *who, const json_t *lat)
{
    fprintf(out, "  lateness %-9s  p50 %.0f ms  p99 %.0f ms  max %.0f ms  (n=%ld)\n", who,
            json_real_value(json_object_get(lat, "p50_ms")),
            json_real_value(json_object_get(lat, "p99_ms")),
            json_real_value(json_object_get(lat, "max_ms")), drill_count(lat, "count"));
}

/* The report as text, from the same object --json prints. */
static void drill_text(const json_t *r, FILE *out)
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
    static const struct drill_row rest[] = {
        {"duplicate callbacks absorbed", "duplicate_callbacks_absorbed"},
        {"dead-lettered", "dead_lettered"},
        {"consumer restarts (SIGKILL)", "consumer_restarts"},
        {"errors returned by the gate", "gate_errors"},
        {"gate calls repeated (connection lost)", "repeated_calls"},
        {NULL, NULL},
    };
    long total = drill_count(r, "violations"), ledger = drill_count(r, "ledger_violations");
    const char *trigger = ctl_json_str(r, "trigger");
    const char *scheduling = ctl_json_str(r, "scheduling");
    bool by_db = scheduling != NULL && strcmp(scheduling, "database") == 0;
    const struct drill_row *groups[] = {orders, by_db ? sent_by_db : sent_by_drill, rest};
    const char *topic;
    json_t *count;

    fprintf(out, "drill %s (%s%s), %.1f s\n", ctl_json_str(r, "drill"),
            trigger != NULL && strcmp(trigger, "scanner") == 0 ? "scanner only"
                                                               : "consumers + scanner",
            by_db ? ", cancels scheduled by the database" : "",
            json_real_value(json_object_get(r, "seconds")));
    for (size_t g = 0; g < sizeof(groups) / sizeof(groups[0]); g++) {
        for (const struct drill_row *row = groups[g]; row->label != NULL; row++)
            fprintf(out, "  %-36s %10ld\n", row->label, drill_count(r, row->key));
        if (g == 1 && by_db)
            json_object_foreach(json_object_get(r, "delay_topics"), topic, count)
                fprintf(out, "  on %-33s %10ld\n", topic, (long)json_integer_value(count));
    }
    drill_text_lateness(out, "consumer", json_object_get(r, "lateness_consumer"));
    drill_text_lateness(out, "scanner", json_object_get(r, "lateness_scanner"));
    fprintf(out, "  reconciliation violations %ld, ledger violations %ld\n", total - ledger,
            ledger);
    fprintf(out, "  VIOLATIONS %ld: %s\n", total,
            total == 0 ? "the gate held" : "THE GATE DID NOT HOLD");
}

/* ---------------------------------------------------------------------------------------- */

static const struct opt drill_opts[] = {
    {"orders", "N", OPT_ARG, "orders to place (default 2000)", NULL, 0, 0},
    {"consumers", "K", OPT_ARG, "consumer processes (default 2, at most 16)", NULL, 0, 0},
    {"pay-ratio", "R", OPT_ARG, "share of orders that get a payment callback (0.5)", NULL, 0, 0},
    {"dup-ratio", "R", OPT_ARG, "share of duplicated messages and callbacks (0.1)", NULL, 0, 0},
    {"loss-ratio", "R", OPT_ARG, "share of cancel messages never sent (0.02)", NULL, 0, 0},
    {"hold-ratio", "R", OPT_ARG, "share of paying customers holding the deadline (0.02)", NULL, 0,
     0},
    {"close-ratio", "R", OPT_ARG, "share of orders closed manually around T (0.01)", NULL, 0, 0},
    {"kill-every", "S", OPT_ARG, "SIGKILL a random consumer every S seconds (0 = never)", NULL, 0,
     0},
    {"lead-ms", "MS", OPT_ARG, "time from the end of placement to T (6000; see --schedule-in-db)",
     NULL, 0, 0},
    {"jitter-ms", "MS", OPT_ARG, "payments and closes land within T +- MS (1500)", NULL, 0, 0},
    {"spread-ms", "MS", OPT_ARG, "spread due times over MS after T (0: all at T)", NULL, 0, 0},
    {"skus", "N", OPT_ARG, "hot SKUs shared by all orders (10)", NULL, 0, 0},
    {"garbage", "N", OPT_ARG, "undecodable messages to send (3)", NULL, 0, 0},
    {"payers", "N", OPT_ARG, "parallel payment callers (4)", NULL, 0, 0},
    {"settle-s", "S", OPT_ARG, "how long to wait for the consumers after T (120)", NULL, 0, 0},
    {"seed", "N", OPT_ARG, "random seed (default: time)", NULL, 0, 0},
    {"no-kafka", NULL, 0, "scanner-only tier: no consumers, the scanner repeats every second", NULL,
     0, 0},
    {"schedule-in-db", NULL, 0,
     "place_order schedules the cancels (schedule_cancels = 1), the consumers' relays send them; "
     "--lead-ms counts from the start of placement",
     NULL, 0, 0},
    {"bin-dir", "DIR", OPT_ARG, "where ordergate-consumer and ordergate-scanner are", NULL, 0, 0},
    {NULL, NULL, 0, NULL, NULL, 0, 0},
};

/* A share in [0, 1]: digits, optionally '.' and more digits; nothing else (no sign, space or
 * exponent), as strict as the integers of common/parse.h. */
static enum og_status drill_parse_ratio(const char *what, const char *s, double *out,
                                        struct og_error *err)
{
    size_t whole = s != NULL ? strspn(s, "0123456789") : 0;
    size_t frac = whole > 0 && s[whole] == '.' ? strspn(s + whole + 1, "0123456789") : 0;
    size_t len = s != NULL ? strlen(s) : 0;
    double v = -1;

    if (whole > 0 && (len == whole || (frac > 0 && len == whole + 1 + frac)))
        v = strtod(s, NULL);
    if (!(v >= 0.0 && v <= 1.0))
        return og_error_set(err, OG_ERR_ARG, false, "%s: expected a ratio in 0..1, got \"%.64s\"",
                            what, s != NULL ? s : "");
    *out = v;
    return OG_OK;
}

/* Reads the drill's options into d->o (defaults already there); OG_ERR_ARG on a bad value. */
static enum og_status drill_parse(struct drill *d, const struct opt_args *a, struct og_error *err)
{
    static const struct {
        const char *name;
        int64_t min, max;
        size_t offset; /* of an int in struct drill_opts */
    } ints[] = {
        {"consumers", 1, DRILL_MAX_CONSUMERS, offsetof(struct drill_opts, consumers)},
        {"kill-every", 0, 3600, offsetof(struct drill_opts, kill_every_s)},
        {"lead-ms", 0, 3600000, offsetof(struct drill_opts, lead_ms)},
        {"jitter-ms", 0, 600000, offsetof(struct drill_opts, jitter_ms)},
        {"spread-ms", 0, 86400000, offsetof(struct drill_opts, spread_ms)},
        {"skus", 1, 99, offsetof(struct drill_opts, skus)},
        {"garbage", 0, 1000, offsetof(struct drill_opts, garbage)},
        {"payers", 1, 64, offsetof(struct drill_opts, payers)},
        {"settle-s", 1, 86400, offsetof(struct drill_opts, settle_s)},
    };
    static const struct {
        const char *name;
        size_t offset; /* of a double in struct drill_opts */
    } ratios[] = {
        {"pay-ratio", offsetof(struct drill_opts, pay_ratio)},
        {"dup-ratio", offsetof(struct drill_opts, dup_ratio)},
        {"loss-ratio", offsetof(struct drill_opts, loss_ratio)},
        {"hold-ratio", offsetof(struct drill_opts, hold_ratio)},
        {"close-ratio", offsetof(struct drill_opts, close_ratio)},
    };
    char what[32], *base = (char *)&d->o;
    const char *v;
    int64_t n;

    if ((v = opt_arg(a, "orders")) != NULL) {
        if (parse_int64("--orders", v, 1, 10000000, &n, err) != OG_OK)
            return err->status;
        d->o.orders = (long)n;
    }
    if ((v = opt_arg(a, "seed")) != NULL) {
        if (parse_int64("--seed", v, 1, INT64_MAX, &n, err) != OG_OK)
            return err->status;
        d->o.seed = (uint64_t)n;
    }
    for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
        if ((v = opt_arg(a, ints[i].name)) == NULL)
            continue;
        snprintf(what, sizeof(what), "--%s", ints[i].name);
        if (parse_int64(what, v, ints[i].min, ints[i].max, &n, err) != OG_OK)
            return err->status;
        *(int *)(base + ints[i].offset) = (int)n;
    }
    for (size_t i = 0; i < sizeof(ratios) / sizeof(ratios[0]); i++) {
        if ((v = opt_arg(a, ratios[i].name)) == NULL)
            continue;
        snprintf(what, sizeof(what), "--%s", ratios[i].name);
        if (drill_parse_ratio(what, v, (double *)(base + ratios[i].offset), err) != OG_OK)
            return err->status;
    }
    d->o.no_kafka = opt_flag(a, "no-kafka");
    d->o.schedule_in_db = opt_flag(a, "schedule-in-db");
    d->o.bin_dir = opt_arg(a, "bin-dir");
    if (d->o.schedule_in_db && d->o.no_kafka)
        return og_error_set(err, OG_ERR_ARG, false,
                            "--schedule-in-db: the relays run in the consumers, which --no-kafka "
                            "leaves out");
    if (d->o.schedule_in_db && opt_arg(a, "garbage") != NULL && d->o.garbage > 0)
        return og_error_set(err, OG_ERR_ARG, false,
                            "--garbage: with --schedule-in-db the drill produces no message");
    if (d->o.schedule_in_db)
        d->o.garbage = 0;
    return OG_OK;
}

/* Starts the triggers: K consumers, or the repeating scanner without Kafka. */
static int drill_start_triggers(struct drill *d)
{
    if (d->o.no_kafka) {
        const char *args[] = {d->scanner_bin, "--config", d->conf_path[0], NULL};
        d->scanner_pid = drill_spawn(d->scanner_bin, args);
        return d->scanner_pid > 0 ? 0 : -1;
    }
    for (int k = 0; k < d->o.consumers; k++) {
        d->consumers[k] = drill_start_consumer(d, k);
        if (d->consumers[k] <= 0)
            return -1;
    }
    return 0;
}

/* Waits for the race workers, killing a consumer now and then, then for the
 * consumers to drain: every due order that had a message is settled, and the
 * group has committed every message of the cancel topics (duplicates and
 * garbage come last in their partitions and change no order, so the orders
 * alone cannot tell that the consumers got to them). With the database
 * scheduling, the relays must also have published every event of the drill
 * (a hold's, for one, may be written after its order's first one was
 * consumed). */
static void drill_wait(struct drill *d, struct db *db, pthread_t *tids)
{
    uint64_t rng = d->o.seed * 31 + 7;
    int64_t last_action = d->nactions > 0 ? d->actions[d->nactions - 1].at_ms : d->t_ms;
    int64_t next_kill = d->o.kill_every_s > 0 ? clock_wall_ms() + d->o.kill_every_s * 1000 : 0;
    int64_t deadline;
    int64_t last_report = 0;
    int64_t lag = -1;
    long pending_due = 0, left = -1, unpublished = 0;
    rd_kafka_t *group = d->o.no_kafka ? NULL : drill_group_reader(d);

    for (long i = 0; i < d->o.orders; i++)
        if (d->orders[i].due_ms > last_action)
            last_action = d->orders[i].due_ms;
    deadline = last_action + (int64_t)d->o.settle_s * 1000;
    while (!signals_stop && clock_wall_ms() < deadline) {
        int64_t now = clock_wall_ms();
        if (next_kill && now >= next_kill && !d->o.no_kafka) {
            int k = (int)drill_rng_range(&rng, 0, d->o.consumers - 1);
            kill(d->consumers[k], SIGKILL);
            waitpid(d->consumers[k], NULL, 0);
            d->consumers[k] = drill_start_consumer(d, k);
            d->restarts++;
            drill_progress(d, "SIGKILL consumer %d, restarted", k);
            next_kill = now + d->o.kill_every_s * 1000;
        }
        if (now > last_action + 500) {
            left = drill_consumer_backlog(d, db, &pending_due);
            if (left == 0 && d->o.schedule_in_db)
                unpublished = drill_sched_unpublished(d, db);
            if (left == 0 && unpublished == 0 && group != NULL)
                lag = drill_group_lag(d, group);
            if (left == 0 && unpublished == 0 && (group == NULL || lag == 0))
                break;
        }
        if (now - last_report >= 2000) {
            if (left < 0)
                drill_progress(d, "race running: callbacks in flight");
            else if (left > 0)
                drill_progress(d, "race running: %ld due orders still pending (%ld with a message)",
                               pending_due, left);
            else if (unpublished != 0)
                drill_progress(d, "orders settled; %ld cancel_scheduled events not yet published",
                               unpublished);
            else
                drill_progress(d, "orders settled; %" PRId64 " messages not yet committed", lag);
            last_report = now;
        }
        usleep(200 * 1000);
    }
    for (int t = 0; t < d->o.payers; t++)
        pthread_join(tids[t], NULL);
    if (group != NULL)
        rd_kafka_destroy(group);
    drill_progress(d,
                   "triggers drained: %ld due orders pending, %ld of them had a message; "
                   "messages not committed: %" PRId64,
                   pending_due, left < 0 ? 0 : left, group != NULL ? lag : 0);
}

/* While the drill runs, SIGINT and SIGTERM only ask it to stop (signals_stop), however often
 * they come: its way out stops the children and removes their configuration directory, and
 * every wait on that way is bounded. (The handler of common/signals.c ends the process on a
 * second signal, which would leave both behind.) */
static void drill_on_signal(int sig)
{
    (void)sig;
    signals_stop = 1;
}

static void drill_signals_install(struct sigaction old[2])
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = drill_on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old[0]);
    sigaction(SIGTERM, &sa, &old[1]);
}

static void drill_signals_restore(const struct sigaction old[2])
{
    sigaction(SIGINT, &old[0], NULL);
    sigaction(SIGTERM, &old[1], NULL);
}

static int drill_run_scanner_once(struct drill *d)
{
    const char *args[] = {d->scanner_bin, "--config", d->conf_path[0], "--every", "0", NULL};
    int status = 0;
    pid_t pid = drill_spawn(d->scanner_bin, args);

    if (pid <= 0 || waitpid(pid, &status, 0) != pid)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static enum og_status drill_run(struct ctl *ctl, const struct opt_args *a, json_t **result,
                                struct og_error *err)
{
    struct drill d;
    struct db *db = NULL;
    rd_kafka_t *producer = NULL;
    pthread_t tids[64];
    struct drill_worker w[64];
    struct drill_totals totals = {0};
    json_t *lat_c = NULL, *lat_s = NULL;
    struct sigaction old_signals[2];
    int64_t t0;
    enum og_status st;

    memset(&d, 0, sizeof(d));
    d.cfg = &ctl->cfg;
    d.o = (struct drill_opts){.orders = 2000,
                              .consumers = 2,
                              .pay_ratio = 0.5,
                              .dup_ratio = 0.1,
                              .loss_ratio = 0.02,
                              .hold_ratio = 0.02,
                              .close_ratio = 0.01,
                              .coupon_ratio = 0.3,
                              .double_pay_ratio = 0.02,
                              .lead_ms = 6000,
                              .jitter_ms = 1500,
                              .skus = 10,
                              .garbage = 3,
                              .payers = 4,
                              .settle_s = 120,
                              .seed = (uint64_t)clock_wall_ms()};
    if (drill_parse(&d, a, err) != OG_OK)
        return err->status;
    drill_signals_install(old_signals);
    /* Until the report exists, a failure has been described on stderr as it happened. */
    st = og_error_set(err, OG_ERR_INTERNAL, false, "the drill did not complete (see above)");
    t0 = clock_mono_ms();
    d.start_ms = clock_wall_ms();
    /* The reconciliation window opens a second early: clocks of client and
     * server may differ a little. */
    clock_format_iso(d.start_ms - 1000, d.start_iso, sizeof(d.start_iso));
    snprintf(d.prefix, sizeof(d.prefix), "dr%" PRIx64 "-",
             (uint64_t)(d.start_ms % INT64_C(0xffffffffff)));
    snprintf(d.topic, sizeof(d.topic), "ordergate.drill.%s", d.prefix);
    d.topic[strlen(d.topic) - 1] = '\0';
    snprintf(d.dlq_topic, sizeof(d.dlq_topic), "%s.dlq", d.topic);
    snprintf(d.group, sizeof(d.group), "ordergate-drill-%s", d.prefix);
    d.group[strlen(d.group) - 1] = '\0';
    d.t_ms = d.start_ms;
    /* The consumers read the drill's topic, or with the database scheduling
     * one topic per level, the level in the name (common/delay.h). */
    d.ndelay = d.o.schedule_in_db ? DRILL_DELAY_LEVELS : 1;
    for (int i = 0; i < d.ndelay; i++) {
        size_t len = strlen(d.topics_csv);
        if (d.o.schedule_in_db)
            snprintf(d.delay_topics[i], sizeof(d.delay_topics[i]), "%s.%s", d.topic,
                     drill_delay_levels[i]);
        else
            snprintf(d.delay_topics[i], sizeof(d.delay_topics[i]), "%s", d.topic);
        snprintf(d.topics_csv + len, sizeof(d.topics_csv) - len, "%s%s", i > 0 ? "," : "",
                 d.delay_topics[i]);
    }

    if ((!d.o.no_kafka && drill_find_bin(&d, "ordergate-consumer", "consumer", d.consumer_bin,
                                         sizeof(d.consumer_bin)) != 0) ||
        drill_find_bin(&d, "ordergate-scanner", "scanner", d.scanner_bin, sizeof(d.scanner_bin)) !=
            0) {
        st = og_error_set(err, OG_ERR_CONFIG, false,
                          "ordergate-consumer/ordergate-scanner not found beside ordergatectl or "
                          "on PATH (use --bin-dir)");
        goto out;
    }
    db = drill_db(&d, "ordergatectl-drill");
    if (db == NULL || drill_plan(&d) != 0)
        goto out;
    if (drill_conf_dir_make(&d) != 0)
        goto out;
    for (int k = -1; k < (d.o.no_kafka ? 0 : d.o.consumers); k++)
        if (drill_write_config(&d, k) != 0) {
            fprintf(stderr, "ordergatectl drill: cannot write the configuration of %s %d\n",
                    k < 0 ? "the scanner" : "consumer", k + 1);
            goto out;
        }
    if (d.o.schedule_in_db) {
        /* place_order gets each order's real deadline, which its cancel
         * message carries: the topics exist and T is fixed before placement. */
        if (drill_schedule_on(&d, db) != 0 || (producer = drill_producer(&d)) == NULL ||
            drill_create_topics(&d, producer) != 0)
            goto out;
        d.t_ms = clock_wall_ms() + d.o.lead_ms;
        drill_schedule(&d);
    }
    drill_progress(&d, "placing %ld orders (%d consumers%s, seed %" PRIu64 ")", d.o.orders,
                   d.o.no_kafka ? 0 : d.o.consumers,
                   d.o.no_kafka         ? ", scanner only"
                   : d.o.schedule_in_db ? ", cancels scheduled by the database"
                                        : "",
                   d.o.seed);
    if (drill_setup(&d, db) != 0)
        goto out;
    if (d.o.schedule_in_db) {
        /* Orders due before the consumers run are cancelled late, never wrongly. */
        if (clock_wall_ms() > d.t_ms - 2000)
            drill_progress(&d,
                           "placement ended %.1f s before T: orders may fall due before the "
                           "consumers run (raise --lead-ms)",
                           (double)(d.t_ms - clock_wall_ms()) / 1000.0);
        if (drill_schedule_lose(&d, db) != 0 || drill_start_triggers(&d) != 0)
            goto out;
        drill_progress(&d,
                       "%ld cancel_scheduled events in the outbox, %ld of them lost (marked "
                       "published); consumers and their relays started on %s",
                       d.o.orders, d.lost_messages, d.topics_csv);
    } else {
        if (!d.o.no_kafka &&
            ((producer = drill_producer(&d)) == NULL || drill_create_topics(&d, producer) != 0))
            goto out;
        /* T is fixed now that placement is done; everything after is relative. */
        d.t_ms = clock_wall_ms() + d.o.lead_ms;
        drill_schedule(&d);
        if (drill_set_due(&d, db) != 0 || drill_start_triggers(&d) != 0)
            goto out;
    }
    if (!d.o.no_kafka && !d.o.schedule_in_db) {
        if (drill_produce(&d, producer) != 0) {
            fprintf(stderr, "ordergatectl drill: producing cancel messages failed\n");
            goto out;
        }
        drill_progress(&d, "sent %ld cancel messages (%ld duplicates, %ld lost, %d garbage)",
                       d.messages + d.dup_messages, d.dup_messages, d.lost_messages, d.o.garbage);
    }
    for (int t = 0; t < d.o.payers; t++) {
        w[t] = (struct drill_worker){.d = &d, .index = t};
        pthread_create(&tids[t], NULL, drill_race_worker, &w[t]);
    }
    drill_wait(&d, db, tids);
    if (signals_stop) {
        fprintf(stderr, "ordergatectl drill: stopped by a signal; no report\n");
        goto out;
    }
    for (int k = 0; k < d.o.consumers && !d.o.no_kafka; k++) {
        int ws = drill_stop_child(d.consumers[k], SIGTERM, 30000);
        if (ws == -1 || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
            drill_progress(&d, "consumer %d did not stop cleanly on SIGTERM", k);
        d.consumers[k] = 0;
    }
    if (d.scanner_pid > 0) {
        drill_stop_child(d.scanner_pid, SIGTERM, 30000);
        d.scanner_pid = 0;
    }
    /* The fallback sweep: catches what the lost messages left behind. */
    d.scanner_status = drill_run_scanner_once(&d);
    drill_progress(&d, "scanner exited with %d", d.scanner_status);
    if (d.scanner_status != 0)
        d.ledger_violations++;
    if (d.o.schedule_in_db && drill_check_schedule(&d, db, producer) != 0)
        goto out;
    if (producer != NULL) {
        d.dlq_count = kafka_topic_messages(producer, d.dlq_topic, 10000);
        if (d.o.garbage > 0 && d.dlq_count < d.o.garbage) {
            fprintf(stderr,
                    "ordergatectl drill: VIOLATION %d garbage messages sent, %" PRId64
                    " dead-lettered\n",
                    d.o.garbage, d.dlq_count);
            d.ledger_violations++;
        }
    }
    if (drill_reconcile(&d, db) != 0 || drill_check_ledger(&d, db, &totals) != 0)
        goto out;
    lat_c = drill_lateness(db, d.prefix, "timeout_consumer");
    lat_s = drill_lateness(db, d.prefix, "timeout_scanner");
    *result = drill_report(&d, &totals, lat_c, lat_s, (double)(clock_mono_ms() - t0) / 1000.0);
    if (d.violations + d.ledger_violations == 0)
        st = OG_OK;
    else
        st = og_error_set(err, OG_ERR_INTERNAL, false, "%ld violations: the gate did not hold",
                          d.violations + d.ledger_violations);
out:
    for (int k = 0; k < DRILL_MAX_CONSUMERS; k++)
        if (d.consumers[k] > 0)
            drill_stop_child(d.consumers[k], SIGKILL, 1000);
    if (d.scanner_pid > 0)
        drill_stop_child(d.scanner_pid, SIGKILL, 1000);
    drill_schedule_restore(&d, db);
    drill_conf_dir_remove(&d);
    if (producer != NULL)
        rd_kafka_destroy(producer);
    json_decref(lat_c);
    json_decref(lat_s);
    json_decref(d.reconcile);
    free(d.orders);
    free(d.actions);
    db_free(db);
    drill_signals_restore(old_signals);
    return st;
}

const struct ctl_command ctl_cmd_drill = {
    .name = "drill",
    .usage = "drill [options]",
    .summary = "race payments against cancellations through the real triggers, then reconcile",
    .details = "Races payment callbacks against timeout cancellations on one batch of pending\n"
               "orders through the real consumers and scanner, then reconciles. Exit 0 only\n"
               "with zero violations, 1 with violations or when the drill could not complete.\n"
               "The database and the brokers are the global options' (--db, --brokers); --json\n"
               "prints the report as one JSON object. Progress goes to stderr.\n",
    .opts = drill_opts,
    .min_pos = 0,
    .max_pos = 0,
    .pos_name = NULL,
    .run = drill_run,
    .text = drill_text,
};
