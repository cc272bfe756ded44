/* The drill's options: the table --help prints, the defaults, and their parsing into struct
 * drill_opts. Owns every bound and every refusal of a bad value or combination; it must not
 * touch the database, the broker or the plan. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/parse.h"
#include "tools/ctl/drill/drill.h"

const struct opt drill_options[] = {
    {"orders", "N", OPT_ARG, "orders to place (default 2000)", NULL, 0, 0},
    {"consumers", "K", OPT_ARG, "consumer processes (default 2, at most 16)", NULL, 0, 0},
    {"pay-ratio", "R", OPT_ARG, "share of orders that get a payment callback (0.5)", NULL, 0, 0},
    {"dup-ratio", "R", OPT_ARG, "share of duplicated messages and callbacks (0.1)", NULL, 0, 0},
    {"loss-ratio", "R", OPT_ARG, "share of cancel messages never sent (0.02)", NULL, 0, 0},
    {"hold-ratio", "R", OPT_ARG, "share of paying customers holding the deadline (0.02)", NULL, 0,
     0},
    {"close-ratio", "R", OPT_ARG, "share of orders closed manually around T (0.01)", NULL, 0, 0},
    {"currencies", "LIST", OPT_ARG,
     "the orders' currencies in turn, comma-separated codes (EUR,JPY,KWD)", NULL, 0, 0},
    {"parts-ratio", "R", OPT_ARG,
     "share of orders allowing parts, paid in two or three around T (0.1)", NULL, 0, 0},
    {"charge-ratio", "R", OPT_ARG,
     "share of orders with a charge pending at the deadline, then captured or failed (0.05)", NULL,
     0, 0},
    {"release-ratio", "R", OPT_ARG, "share of orders released by staff around T (0.03)", NULL, 0,
     0},
    {"amend-ratio", "R", OPT_ARG, "share of orders whose line staff amend around T (0.03)", NULL, 0,
     0},
    {"deadline-ratio", "R", OPT_ARG, "share of orders whose deadline staff move later (0.03)", NULL,
     0, 0},
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
    {"reminders", "LIST", OPT_ARG,
     "with --schedule-in-db: payment reminders at these offsets in seconds before each deadline, "
     "the setting reminder_before_seconds for the drill's time (3,1; '' for none)",
     NULL, 0, 0},
    {"faults", "PLAN", OPT_ARG,
     "apply and clear the faults of this plan at their times after T, and report what each did "
     "to lateness (docs/ordergatectl.md)",
     NULL, 0, 0},
    {"bin-dir", "DIR", OPT_ARG, "where ordergate-consumer and ordergate-scanner are", NULL, 0, 0},
    {NULL, NULL, 0, NULL, NULL, 0, 0},
};

void drill_options_defaults(struct drill_opts *o)
{
    *o = (struct drill_opts){.orders = 2000,
                             .consumers = 2,
                             .pay_ratio = 0.5,
                             .dup_ratio = 0.1,
                             .loss_ratio = 0.02,
                             .hold_ratio = 0.02,
                             .close_ratio = 0.01,
                             .coupon_ratio = 0.3,
                             .double_pay_ratio = 0.02,
                             .parts_ratio = 0.1,
                             .charge_ratio = 0.05,
                             .mismatch_ratio = 0.03,
                             .release_ratio = 0.03,
                             .amend_ratio = 0.03,
                             .deadline_ratio = 0.03,
                             .ncurrencies = 3,
                             .currencies = {"EUR", "JPY", "KWD"},
                             .lead_ms = 6000,
                             .jitter_ms = 1500,
                             .skus = 10,
                             .garbage = 3,
                             .payers = 4,
                             .settle_s = 120,
                             .reminders = "3,1",
                             .seed = (uint64_t)clock_wall_ms()};
}

/* A share in [0, 1]: digits, optionally '.' and more digits; nothing else (no sign, space or
 * exponent), as strict as the integers of common/parse.h. */
static enum og_status drill_options_ratio(const char *what, const char *s, double *out,
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

/* --currencies: 1..DRILL_MAX_CURRENCIES distinct codes of three capital letters, comma-separated
 * (whether the database knows them is place_order's to say). */
static enum og_status drill_options_currencies(struct drill_opts *o, const char *s,
                                               struct og_error *err)
{
    const char *p = s;

    o->ncurrencies = 0;
    for (;;) {
        size_t n = strspn(p, "ABCDEFGHIJKLMNOPQRSTUVWXYZ");
        if (n != 3 || (p[3] != ',' && p[3] != '\0') || o->ncurrencies == DRILL_MAX_CURRENCIES)
            return og_error_set(err, OG_ERR_ARG, false,
                                "--currencies: expected 1 to %d codes such as EUR,JPY,KWD, got "
                                "\"%.64s\"",
                                DRILL_MAX_CURRENCIES, s);
        for (int i = 0; i < o->ncurrencies; i++)
            if (strncmp(o->currencies[i], p, 3) == 0)
                return og_error_set(err, OG_ERR_ARG, false, "--currencies: %.3s twice", p);
        memcpy(o->currencies[o->ncurrencies], p, 3);
        o->currencies[o->ncurrencies++][3] = '\0';
        if (p[3] == '\0')
            return OG_OK;
        p += 4;
    }
}

enum og_status drill_options_parse(struct drill_opts *o, const struct opt_args *a,
                                   struct og_error *err)
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
        {"payers", 1, DRILL_MAX_PAYERS, offsetof(struct drill_opts, payers)},
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
        {"parts-ratio", offsetof(struct drill_opts, parts_ratio)},
        {"charge-ratio", offsetof(struct drill_opts, charge_ratio)},
        {"release-ratio", offsetof(struct drill_opts, release_ratio)},
        {"amend-ratio", offsetof(struct drill_opts, amend_ratio)},
        {"deadline-ratio", offsetof(struct drill_opts, deadline_ratio)},
    };
    char what[32], *base = (char *)o;
    const char *v;
    int64_t n;

    if ((v = opt_arg(a, "orders")) != NULL) {
        if (parse_int64("--orders", v, 1, 10000000, &n, err) != OG_OK)
            return err->status;
        o->orders = (long)n;
    }
    if ((v = opt_arg(a, "seed")) != NULL) {
        if (parse_int64("--seed", v, 1, INT64_MAX, &n, err) != OG_OK)
            return err->status;
        o->seed = (uint64_t)n;
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
        if (drill_options_ratio(what, v, (double *)(base + ratios[i].offset), err) != OG_OK)
            return err->status;
    }
    if ((v = opt_arg(a, "currencies")) != NULL && drill_options_currencies(o, v, err) != OG_OK)
        return err->status;
    if (o->parts_ratio + o->charge_ratio > 1.0)
        return og_error_set(err, OG_ERR_ARG, false,
                            "--parts-ratio and --charge-ratio: together at most 1 (an order is "
                            "paid in parts or by a charge, not both)");
    o->no_kafka = opt_flag(a, "no-kafka");
    o->schedule_in_db = opt_flag(a, "schedule-in-db");
    o->bin_dir = opt_arg(a, "bin-dir");
    if (o->schedule_in_db && o->no_kafka)
        return og_error_set(err, OG_ERR_ARG, false,
                            "--schedule-in-db: the relays run in the consumers, which --no-kafka "
                            "leaves out");
    if (o->schedule_in_db && opt_arg(a, "garbage") != NULL && o->garbage > 0)
        return og_error_set(err, OG_ERR_ARG, false,
                            "--garbage: with --schedule-in-db the drill produces no message");
    if (o->schedule_in_db)
        o->garbage = 0;
    /* The database checks the list itself (set_setting: 22023); here only its shape. */
    if ((v = opt_arg(a, "reminders")) != NULL) {
        if (strlen(v) >= sizeof(o->reminders) || strspn(v, "0123456789,") != strlen(v))
            return og_error_set(err, OG_ERR_ARG, false,
                                "--reminders: offsets in seconds, comma-separated (3,1), or ''");
        if (!o->schedule_in_db && v[0] != '\0')
            return og_error_set(err, OG_ERR_ARG, false,
                                "--reminders: the reminders' messages need --schedule-in-db");
        snprintf(o->reminders, sizeof(o->reminders), "%s", v);
    }
    if (!o->schedule_in_db)
        o->reminders[0] = '\0';
    return OG_OK;
}
