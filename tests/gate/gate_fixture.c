#include "gate/gate_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/log.h"

#define GFX_MAX_PARAMS 16

/* The fixture of the running test (tests run one at a time). */
static struct gfx *gfx_current;

struct gfx *gfx_new(const char *tag)
{
    struct gfx *g = calloc(1, sizeof(*g));

    assert_non_null(g);
    testdb_create(&g->t, tag);
    g->sql = testdb_connect(&g->t);
    g->db = testdb_open(&g->t, GFX_APP);
    g->log = tmpfile();
    assert_non_null(g->log);
    log_set_stream(g->log);
    gfx_current = g;
    return g;
}

void gfx_free(struct gfx *g)
{
    if (g == NULL)
        return;
    if (g == gfx_current)
        gfx_current = NULL;
    log_set_stream(NULL);
    db_free(g->db);
    PQfinish(g->sql);
    if (g->log != NULL)
        fclose(g->log);
    testdb_drop(&g->t);
    free(g);
}

int gfx_teardown(void **state)
{
    (void)state;
    gfx_free(gfx_current);
    return 0;
}

static int gfx_collect(va_list ap, const char **params)
{
    int n = 0;
    const char *p;

    while ((p = va_arg(ap, const char *)) != NULL) {
        if (n == GFX_MAX_PARAMS)
            fail_msg("too many parameters");
        params[n++] = p;
    }
    return n;
}

PGresult *gfx_raw(PGconn *c, const char *sql, int n, const char *const *params)
{
    return PQexecParams(c, sql, n, NULL, params, NULL, NULL, 0);
}

const char *gfx_sqlstate(const PGresult *res)
{
    const char *s = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    ExecStatusType st = PQresultStatus(res);

    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
        return "";
    return s != NULL ? s : "?????";
}

static PGresult *gfx_vquery(PGconn *c, const char *sql, va_list ap)
{
    const char *params[GFX_MAX_PARAMS];
    int n = gfx_collect(ap, params);
    PGresult *res = gfx_raw(c, sql, n, params);
    ExecStatusType st = PQresultStatus(res);

    if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK)
        fail_msg("SQL failed: %s\n%s", sql, PQerrorMessage(c));
    return res;
}

long gfx_long(PGconn *c, const char *sql, ...)
{
    va_list ap;
    PGresult *res;
    long v;

    va_start(ap, sql);
    res = gfx_vquery(c, sql, ap);
    va_end(ap);
    if (PQntuples(res) < 1)
        fail_msg("no row: %s", sql);
    v = PQgetisnull(res, 0, 0) ? 0 : atol(PQgetvalue(res, 0, 0));
    PQclear(res);
    return v;
}

const char *gfx_text(PGconn *c, char *buf, size_t size, const char *sql, ...)
{
    va_list ap;
    PGresult *res;

    va_start(ap, sql);
    res = gfx_vquery(c, sql, ap);
    va_end(ap);
    if (PQntuples(res) < 1)
        fail_msg("no row: %s", sql);
    snprintf(buf, size, "%s", PQgetisnull(res, 0, 0) ? "" : PQgetvalue(res, 0, 0));
    PQclear(res);
    return buf;
}

void gfx_exec(PGconn *c, const char *sql, ...)
{
    va_list ap;
    PGresult *res;

    va_start(ap, sql);
    res = gfx_vquery(c, sql, ap);
    va_end(ap);
    PQclear(res);
}

void gfx_checksum(PGconn *c, char *out, size_t size)
{
    /* Relation names come from the catalog and are quoted by format(%I);
     * each table is hashed over its rows in a stable order. */
    PGresult *list = PQexec(c, "SELECT format('%I.%I', schemaname, tablename) FROM pg_tables "
                               "WHERE schemaname = 'ordergate' ORDER BY 1");
    char sql[512];
    size_t used = 0;

    if (PQresultStatus(list) != PGRES_TUPLES_OK || PQntuples(list) < 7)
        fail_msg("cannot list the ordergate tables: %s", PQerrorMessage(c));
    out[0] = '\0';
    for (int i = 0; i < PQntuples(list); i++) {
        char one[64];
        snprintf(sql, sizeof(sql),
                 "SELECT md5(coalesce(string_agg(t::text, E'\\n' ORDER BY t::text), '')) FROM %s t",
                 PQgetvalue(list, i, 0));
        gfx_text(c, one, sizeof(one), sql, NULL);
        used += (size_t)snprintf(out + used, used < size ? size - used : 0, "%s=%.8s ",
                                 PQgetvalue(list, i, 0), one);
    }
    PQclear(list);
    {
        char seqs[256];
        gfx_text(c, seqs, sizeof(seqs),
                 "SELECT md5(coalesce(string_agg(format('%s:%s', sequencename, last_value), ',' "
                 "ORDER BY sequencename), '')) FROM pg_sequences WHERE schemaname = 'ordergate'",
                 NULL);
        snprintf(out + used, used < size ? size - used : 0, "seq=%.8s", seqs);
    }
}

void gfx_stock(struct gfx *g, const char *sku, long available)
{
    char n[32];

    snprintf(n, sizeof(n), "%ld", available);
    gfx_exec(g->sql, "INSERT INTO ordergate.inventory (sku, available) VALUES ($1, $2::bigint)",
             sku, n, NULL);
}

void gfx_coupon(struct gfx *g, const char *coupon_id)
{
    gfx_exec(g->sql, "INSERT INTO ordergate.coupons (coupon_id) VALUES ($1)", coupon_id, NULL);
}

const char *gfx_order_status(struct gfx *g, const char *order_no)
{
    return gfx_text(g->sql, g->text, sizeof(g->text),
                    "SELECT coalesce((SELECT status FROM ordergate.orders WHERE order_no = $1), "
                    "'absent')",
                    order_no, NULL);
}

const char *gfx_exception(struct gfx *g, const char *txn_no)
{
    assert_int_equal(gfx_long(g->sql, "SELECT count(*) FROM ordergate.exceptions WHERE txn_no = $1",
                              txn_no, NULL),
                     1);
    return gfx_text(g->sql, g->text, sizeof(g->text),
                    "SELECT format('%s|%s|%s|%s|%s|%s', kind, resolution, state, amount_cents, "
                    "currency, order_no) FROM ordergate.exceptions WHERE txn_no = $1",
                    txn_no, NULL);
}

const char *gfx_ts(struct gfx *g, char *buf, size_t size, const char *offset)
{
    return gfx_text(g->sql, buf, size,
                    "SELECT to_char((now() + $1::interval) AT TIME ZONE 'UTC', "
                    "'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')",
                    offset, NULL);
}

void gfx_place(struct gfx *g, const char *order_no, int64_t amount, const char *items,
               const char *coupon, const char *expire_offset)
{
    char when[64];
    enum gate_outcome outcome;
    struct og_error err = {0};

    gfx_ts(g, when, sizeof(when), expire_offset);
    if (gate_place(g->db, order_no, amount, items, coupon, when, &outcome, &err) != OG_OK)
        fail_msg("place %s: %s", order_no, err.msg);
    if (outcome != GATE_PLACED)
        fail_msg("place %s: %s, expected placed", order_no, gate_outcome_str(outcome));
}

enum gate_outcome gfx_cancel1(struct gfx *g, const char *order_no, enum gate_source source)
{
    struct gate_cancel_row row;
    size_t nrows = 0;
    struct og_error err = {0};

    if (gate_claim_cancel(g->db, &order_no, 1, source, &row, &nrows, &err) != OG_OK)
        fail_msg("claim_cancel %s: %s", order_no, err.msg);
    assert_int_equal(nrows, 1);
    assert_string_equal(row.order_no, order_no);
    return row.outcome;
}

enum gate_outcome gfx_pay(struct gfx *g, const char *order_no, const char *txn, int64_t amount,
                          struct gate_payment_result *out)
{
    struct gate_payment_result local;
    struct og_error err = {0};

    if (out == NULL)
        out = &local;
    if (gate_claim_payment(g->db, order_no, txn, amount, "card", out, &err) != OG_OK)
        fail_msg("claim_payment %s/%s: %s", order_no, txn, err.msg);
    return out->outcome;
}

int gfx_log_count(struct gfx *g, ...)
{
    char line[2048];
    const char *needles[GFX_MAX_PARAMS];
    int n, count = 0;
    va_list ap;

    va_start(ap, g);
    n = gfx_collect(ap, needles);
    va_end(ap);
    fflush(g->log);
    rewind(g->log);
    while (fgets(line, sizeof(line), g->log) != NULL) {
        int all = 1;
        for (int i = 0; i < n && all; i++)
            all = strstr(line, needles[i]) != NULL;
        count += all;
    }
    fseek(g->log, 0, SEEK_END);
    return count;
}

void gfx_reconcile_clean(PGconn *c)
{
    PGresult *res = PQexec(c, "SELECT invariant, name, violations, sample::text "
                              "FROM ordergate.reconcile() ORDER BY invariant");
    long total = 0;

    if (PQresultStatus(res) != PGRES_TUPLES_OK)
        fail_msg("reconcile failed: %s", PQerrorMessage(c));
    /* Invariants 1-18. */
    assert_int_equal(PQntuples(res), 18);
    for (int i = 0; i < PQntuples(res); i++) {
        long v = atol(PQgetvalue(res, i, 2));
        assert_int_equal(atoi(PQgetvalue(res, i, 0)), i + 1);
        if (v != 0)
            print_message("reconcile invariant %s (%s): %ld violations, e.g. %s\n",
                          PQgetvalue(res, i, 0), PQgetvalue(res, i, 1), v, PQgetvalue(res, i, 3));
        total += v;
    }
    PQclear(res);
    assert_int_equal(total, 0);
}
