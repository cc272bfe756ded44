/* ordergatectl charge begin / charge failed: a charge still in flight at the order's deadline
 * (3-D Secure, a bank transfer), by hand, through the gate client (gate_begin_charge,
 * gate_charge_failed; schema/functions/gate/begin_charge.sql, charge_failed.sql). Its capture is
 * `pay --charge REF`. Every argument is checked first: bad input exits 2 with nothing sent. */
#include <inttypes.h>
#include <string.h>

#include "common/gate.h"
#include "tools/ctl/ctl.h"

static enum og_status charges_check(const struct opt_args *a, const char **order_no,
                                    const char **ref, struct og_error *err)
{
    *order_no = a->pos[0];
    *ref = opt_arg(a, "ref");
    if (!gate_order_no_valid(*order_no, strlen(*order_no)))
        return og_error_set(err, OG_ERR_ARG, false,
                            "invalid order number '%s' (1 to %d characters of A-Z a-z 0-9 . _ : -)",
                            *order_no, GATE_ORDER_NO_MAX);
    if (*ref == NULL)
        return og_error_set(err, OG_ERR_ARG, false,
                            "--ref REF is required (the payment provider's charge reference)");
    if (!gate_charge_ref_valid(*ref, strlen(*ref)))
        return og_error_set(err, OG_ERR_ARG, false,
                            "--ref '%s': 1 to %d characters of A-Z a-z 0-9 . _ : -", *ref,
                            GATE_CHARGE_REF_MAX);
    return OG_OK;
}

static json_t *charges_result(const char *command, const char *order_no, const char *ref,
                              enum gate_outcome outcome)
{
    json_t *o = json_object();

    if (o != NULL) {
        ctl_json_set(o, "command", json_string(command));
        ctl_json_set(o, "ok", json_true());
        ctl_json_set(o, "order_no", json_string(order_no));
        ctl_json_set(o, "charge_ref", json_string(ref));
        ctl_json_set(o, "outcome", json_string(gate_outcome_str(outcome)));
    }
    return o;
}

static enum og_status charge_begin_run(struct ctl *ctl, const struct opt_args *a, json_t **result,
                                       struct og_error *err)
{
    const char *order_no, *ref;
    int64_t seconds = 0;
    enum gate_outcome outcome;
    char bound[64] = "";
    json_t *out;
    struct db *db;
    enum og_status st;

    st = charges_check(a, &order_no, &ref, err);
    if (st != OG_OK)
        return st;
    if (opt_arg(a, "seconds") == NULL)
        return og_error_set(err, OG_ERR_ARG, false, "--seconds N is required");
    st = parse_duration("--seconds", opt_arg(a, "seconds"), 1, GATE_CHARGE_SECONDS_MAX, &seconds,
                        err);
    if (st != OG_OK)
        return st;
    db = ctl_db(ctl, err);
    if (db == NULL)
        return err->status;
    st = gate_begin_charge(db, order_no, ref, (int)seconds, &outcome, bound, sizeof(bound), err);
    if (st != OG_OK)
        return st;
    out = charges_result("charge begin", order_no, ref, outcome);
    if (out == NULL)
        return og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
    ctl_json_set(out, "seconds", json_integer(seconds));
    ctl_json_set(out, "bound_at", ctl_json_pg_time(bound));
    *result = out;
    return OG_OK;
}

static void charge_begin_text(const json_t *r, FILE *out)
{
    static const char *const keys[] = {"order_no", "charge_ref", "outcome", "bound_at", NULL};

    ctl_print_fields(out, r, keys);
}

static const struct opt charge_begin_opts[] = {
    {"ref", "REF", OPT_ARG, "the provider's charge reference (unique across orders)", NULL, 0, 0},
    {"seconds", "N", OPT_ARG,
     "how long the charge protects the order at most (3600, or 3d; <= max_pending_charge_seconds)",
     NULL, 0, 0},
    {NULL, NULL, 0, NULL, NULL, 0, 0},
};

const struct ctl_command ctl_cmd_charge_begin = {
    .name = "charge begin",
    .usage = "charge begin ORDER --ref REF --seconds N",
    .summary = "a charge of the order is in flight: no timeout cancel while it is pending "
               "(ordergate.begin_charge)",
    .details = "Outcomes: pending (recorded; bound_at is when it stops protecting the order) |\n"
               "duplicate (begun before for this order: nothing changes) | not_pending (the\n"
               "order is closed: nothing recorded) | not_found. A reference of another order,\n"
               "or N beyond max_pending_charge_seconds, is refused. The charge ends with\n"
               "`pay ORDER --charge REF ...` (its capture) or `charge failed ORDER --ref REF`.\n",
    .opts = charge_begin_opts,
    .min_pos = 1,
    .pos_name = "ORDER",
    .max_pos = 1,
    .run = charge_begin_run,
    .text = charge_begin_text,
};

static enum og_status charge_failed_run(struct ctl *ctl, const struct opt_args *a, json_t **result,
                                        struct og_error *err)
{
    const char *order_no, *ref;
    enum gate_outcome outcome;
    json_t *out;
    struct db *db;
    enum og_status st;

    st = charges_check(a, &order_no, &ref, err);
    if (st != OG_OK)
        return st;
    db = ctl_db(ctl, err);
    if (db == NULL)
        return err->status;
    st = gate_charge_failed(db, order_no, ref, &outcome, err);
    if (st != OG_OK)
        return st;
    out = charges_result("charge failed", order_no, ref, outcome);
    if (out == NULL)
        return og_error_set(err, OG_ERR_NOMEM, false, "out of memory");
    *result = out;
    return OG_OK;
}

static void charge_failed_text(const json_t *r, FILE *out)
{
    static const char *const keys[] = {"order_no", "charge_ref", "outcome", NULL};

    ctl_print_fields(out, r, keys);
}

static const struct opt charge_failed_opts[] = {
    {"ref", "REF", OPT_ARG, "the charge reference given to charge begin", NULL, 0, 0},
    {NULL, NULL, 0, NULL, NULL, 0, 0},
};

const struct ctl_command ctl_cmd_charge_failed = {
    .name = "charge failed",
    .usage = "charge failed ORDER --ref REF",
    .summary = "a pending charge ended without money (ordergate.charge_failed)",
    .details = "Outcomes: failed | duplicate (failed before) | already_captured (its capture\n"
               "came first: the payment stands). An unknown reference or another order's is\n"
               "refused. When it was the order's last pending charge and the deadline has\n"
               "passed, the order is cancelled within a second.\n",
    .opts = charge_failed_opts,
    .min_pos = 1,
    .pos_name = "ORDER",
    .max_pos = 1,
    .run = charge_failed_run,
    .text = charge_failed_text,
};
