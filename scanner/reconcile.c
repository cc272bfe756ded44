#include "scanner/reconcile.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

#define RECON_MAX_ROWS (RECONCILE_MAX_INVARIANT + RECONCILE_MAX_CHECKS)

/* The built-in invariants by number, then the shop's checks (invariant NULL) in the order
 * reconcile() runs them. */
static const struct db_stmt recon_stmt_check = {
    "og_reconcile",
    "SELECT r.invariant, r.name, r.violations, to_json(r.sample)::text FROM ordergate.reconcile("
    "$1::timestamptz, make_interval(secs => $2::int), make_interval(secs => $3::int)) "
    "WITH ORDINALITY AS r(invariant, name, violations, sample, ord) "
    "ORDER BY r.invariant NULLS LAST, r.ord",
    3};

static const struct db_stmt recon_stmt_repair = {"og_reconcile_repair",
                                                 "SELECT ordergate.reconcile_repair()", 0};

/* Open exceptions, and the overdue ones among them (what the alerts are about:
 * an unconfirmed auto-refund past refund_confirm_seconds, a manual review
 * past manual_review_max_age_seconds). */
static const struct db_stmt recon_stmt_open = {
    "og_exceptions_open",
    "SELECT ordergate.exceptions_open_count(), o.refunds_unconfirmed, o.reviews_overdue "
    "FROM ordergate.exceptions_overdue() o",
    0};

static const struct db_stmt recon_stmt_record = {
    "og_reconcile_run_record",
    "SELECT ordergate.reconcile_run_record($1::timestamptz, $2::timestamptz, $3, $4::jsonb, "
    "$5::bigint, $6)",
    6};

struct recon_row {
    int invariant; /* 0: a shop check (name shop:<name>) */
    char name[200];
    int64_t violations;
    char sample[800]; /* the first offending keys, comma-separated */
};

/* Turns the JSON array of keys into "a, b, c". Keys are order numbers, SKUs,
 * coupon ids or transaction numbers: shown as stored. */
static void recon_sample_format(const char *json, char *buf, size_t size)
{
    json_error_t jerr;
    json_t *arr = json != NULL ? json_loads(json, 0, &jerr) : NULL;
    size_t used = 0, i;
    json_t *v;

    buf[0] = '\0';
    if (arr == NULL || !json_is_array(arr)) {
        json_decref(arr);
        return;
    }
    json_array_foreach(arr, i, v)
    {
        const char *s = json_is_string(v) ? json_string_value(v) : "null";
        int n = snprintf(buf + used, size - used, "%s%s", i ? ", " : "", s);
        if (n < 0 || (size_t)n >= size - used)
            break;
        used += (size_t)n;
    }
    json_decref(arr);
}

static enum og_status recon_check(struct db *db, const struct reconcile_params *p,
                                  struct recon_row *rows, int *nrows, struct og_error *err)
{
    char grace[16], interval[16];
    const char *params[3];
    PGresult *res = NULL;
    enum og_status st;

    *nrows = 0;
    snprintf(grace, sizeof(grace), "%d", p->grace_s);
    snprintf(interval, sizeof(interval), "%d", p->scan_interval_s);
    params[0] = p->since;
    params[1] = grace;
    params[2] = interval;
    st = db_call(db, &recon_stmt_check, params, &res, err);
    if (st != OG_OK)
        goto out;
    if (PQnfields(res) != 4 || PQntuples(res) < 1 || PQntuples(res) > RECON_MAX_ROWS) {
        st = og_error_set(err, OG_ERR_INTERNAL, false,
                          "reconcile returned %d columns and %d rows; expected 4 columns and "
                          "one row per invariant",
                          PQnfields(res), PQntuples(res));
        goto out;
    }
    for (int i = 0, checks = 0; i < PQntuples(res); i++) {
        struct recon_row *r = &rows[i];
        if (PQgetisnull(res, i, 0) && ++checks > RECONCILE_MAX_CHECKS) {
            st = og_error_set(err, OG_ERR_INTERNAL, false,
                              "reconcile returned more than %d shop checks", RECONCILE_MAX_CHECKS);
            goto out;
        }
        r->invariant = PQgetisnull(res, i, 0) ? 0 : atoi(PQgetvalue(res, i, 0));
        snprintf(r->name, sizeof(r->name), "%s", PQgetvalue(res, i, 1));
        if (r->invariant == 0 ? strncmp(r->name, "shop:", 5) != 0
                              : r->invariant < 1 || r->invariant > RECONCILE_MAX_INVARIANT) {
            st = og_error_set(err, OG_ERR_INTERNAL, false, "reconcile returned invariant %d (%s)",
                              r->invariant, r->name);
            goto out;
        }
        r->violations = strtoll(PQgetvalue(res, i, 2), NULL, 10);
        recon_sample_format(PQgetisnull(res, i, 3) ? NULL : PQgetvalue(res, i, 3), r->sample,
                            sizeof(r->sample));
    }
    *nrows = PQntuples(res);
out:
    PQclear(res);
    return st;
}

static int64_t recon_violations_of(const struct recon_row *rows, int nrows, int invariant)
{
    for (int i = 0; i < nrows; i++)
        if (rows[i].invariant == invariant)
            return rows[i].violations;
    return 0;
}

enum og_status reconcile_run(struct db *db, const struct reconcile_params *p, FILE *out,
                             struct reconcile_result *result, struct og_error *err)
{
    struct recon_row rows[RECON_MAX_ROWS];
    int nrows = 0;
    int64_t inv5_before = 0;
    PGresult *res = NULL;
    enum og_status st;
    char q[900];

    memset(result, 0, sizeof(*result));
    st = recon_check(db, p, rows, &nrows, err);
    if (st != OG_OK)
        return st;

    /* Invariant 5 is the one reconcile may repair: only the database knows
     * which payments lack an exception, and the repair is idempotent. */
    inv5_before = recon_violations_of(rows, nrows, 5);
    if (p->repair && inv5_before > 0) {
        st = db_call(db, &recon_stmt_repair, NULL, &res, err);
        if (st == OG_OK && (PQnfields(res) != 1 || PQntuples(res) != 1))
            st = og_error_set(err, OG_ERR_INTERNAL, false, "reconcile_repair: unexpected result");
        if (st == OG_OK)
            result->repaired = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
        PQclear(res);
        if (st != OG_OK)
            return st;
        if (result->repaired > 0) {
            log_warn("reconcile_repaired",
                     "created=%" PRId64 " kind=late_payment resolution=manual_review",
                     result->repaired);
            st = recon_check(db, p, rows, &nrows, err);
            if (st != OG_OK)
                return st;
        }
    }

    st = db_call(db, &recon_stmt_open, NULL, &res, err);
    if (st == OG_OK && (PQnfields(res) != 3 || PQntuples(res) != 1))
        st = og_error_set(err, OG_ERR_INTERNAL, false, "exceptions_overdue: unexpected result");
    if (st == OG_OK) {
        result->exceptions_open = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
        result->refunds_unconfirmed = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
        result->reviews_overdue = strtoll(PQgetvalue(res, 0, 2), NULL, 10);
    }
    PQclear(res);
    res = NULL;
    if (st != OG_OK)
        return st;

    fprintf(out, "ordergate reconciliation: orders since %s, grace %d s, scanner interval %d s\n",
            p->since != NULL ? p->since : "the beginning", p->grace_s, p->scan_interval_s);
    fprintf(out, "  #  violations  invariant\n");
    for (int i = 0; i < nrows; i++) {
        const struct recon_row *r = &rows[i];
        if (r->invariant == 0) {
            /* A shop check: "-" for its number; one that failed says why where the
             * offenders go, and counts as a violated invariant. */
            struct reconcile_check *k = &result->check[result->checks++];
            snprintf(k->name, sizeof(k->name), "%s", r->name);
            k->violations = r->violations;
            if (r->violations < 0) {
                fprintf(out, "  -  %-10s  %s\n     error: %s\n", "FAILED", r->name, r->sample);
                result->invariants_violated++;
                result->checks_failed++;
                log_warn("reconcile_violation", "invariant=%s violations=-1 failed=%s", r->name,
                         log_quote(q, sizeof(q), r->sample));
                continue;
            }
            fprintf(out, "  -  %-10" PRId64 "  %s\n", r->violations, r->name);
        } else {
            fprintf(out, "  %d  %-10" PRId64 "  %s\n", r->invariant, r->violations, r->name);
            result->by_invariant[r->invariant] = r->violations;
            result->checked[r->invariant] = true;
            result->invariants++;
        }
        if (r->violations > 0) {
            fprintf(out, "     first: %s\n", r->sample);
            result->invariants_violated++;
            result->violations += r->violations;
            if (r->invariant == 0)
                log_warn("reconcile_violation", "invariant=%s violations=%" PRId64 " first=%s",
                         r->name, r->violations, log_quote(q, sizeof(q), r->sample));
            else
                log_warn("reconcile_violation", "invariant=%d violations=%" PRId64 " first=%s",
                         r->invariant, r->violations, log_quote(q, sizeof(q), r->sample));
        }
    }
    if (result->repaired > 0)
        fprintf(out,
                "repair: created %" PRId64 " missing late-payment exception%s (manual review); "
                "invariant 5 went from %" PRId64 " to %" PRId64 "\n",
                result->repaired, result->repaired == 1 ? "" : "s", inv5_before,
                recon_violations_of(rows, nrows, 5));
    else if (!p->repair && inv5_before > 0)
        fprintf(out, "repair: skipped (--dry-run)\n");
    fprintf(out,
            "open payment exceptions: %" PRId64 " (ordergatectl exceptions); overdue: %" PRId64
            " unconfirmed auto-refunds, %" PRId64 " manual reviews\n",
            result->exceptions_open, result->refunds_unconfirmed, result->reviews_overdue);
    if (result->invariants_violated == 0 && result->checks == 0)
        fprintf(out, "result: clean: all %d invariants hold\n", result->invariants);
    else if (result->invariants_violated == 0)
        fprintf(out, "result: clean: all %d invariants and %d shop check%s hold\n",
                result->invariants, result->checks, result->checks == 1 ? "" : "s");
    else
        fprintf(out, "result: VIOLATED: %d invariant%s, %" PRId64 " violation%s%s\n",
                result->invariants_violated, result->invariants_violated == 1 ? "" : "s",
                result->violations, result->violations == 1 ? "" : "s",
                result->checks_failed > 0 ? ", shop checks failed" : "");
    fflush(out);
    log_info("reconcile_done",
             "invariants=%d checks=%d invariants_violated=%d checks_failed=%d violations=%" PRId64
             " repaired=%" PRId64 " exceptions_open=%" PRId64 " refunds_unconfirmed=%" PRId64
             " reviews_overdue=%" PRId64,
             result->invariants, result->checks, result->invariants_violated, result->checks_failed,
             result->violations, result->repaired, result->exceptions_open,
             result->refunds_unconfirmed, result->reviews_overdue);
    return OG_OK;
}

enum og_status reconcile_record(struct db *db, const struct reconcile_params *p,
                                const char *started_at, const struct reconcile_result *r,
                                const char *failure, struct og_error *err)
{
    json_t *v = json_object();
    char repaired[24], *violations = NULL;
    const char *params[6];
    enum og_status st;

    if (v == NULL)
        return og_error_set(err, OG_ERR_NOMEM, false, "reconcile_record: out of memory");
    for (int i = 1; r != NULL && i <= RECONCILE_MAX_INVARIANT; i++) {
        char key[8];
        if (!r->checked[i])
            continue;
        snprintf(key, sizeof(key), "%d", i);
        json_object_set_new(v, key, json_integer(r->by_invariant[i]));
    }
    for (int i = 0; r != NULL && i < r->checks; i++)
        json_object_set_new(v, r->check[i].name, json_integer(r->check[i].violations));
    violations = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(v);
    if (violations == NULL)
        return og_error_set(err, OG_ERR_NOMEM, false, "reconcile_record: out of memory");
    snprintf(repaired, sizeof(repaired), "%" PRId64, r != NULL ? r->repaired : 0);
    params[0] = started_at;
    params[1] = p->since;
    params[2] = r == NULL ? "failed" : r->invariants_violated > 0 ? "violated" : "clean";
    params[3] = violations;
    params[4] = repaired;
    params[5] = r == NULL ? failure : NULL;
    st = db_call(db, &recon_stmt_record, params, NULL, err);
    free(violations);
    return st;
}
