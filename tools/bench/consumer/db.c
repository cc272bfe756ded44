/* og_bench_consumer: PostgreSQL: the phase databases, bulk loads and what the phases read back. */
#include <string.h>

#include "common/db.h"
#include "tools/bench/consumer/bench_consumer.h"
#include "tools/bench/support/bench_pg.h"
#include "tools/bench/support/bench_run.h"

void db_drop(void)
{
    if (g.conn != NULL) {
        PQfinish(g.conn);
        g.conn = NULL;
    }
    if (g.admin == NULL || !g.db_created)
        return;
    bench_pg_db_drop(g.admin, g.dbname);
    g.db_created = false;
}

/* A fresh database for a phase, copied from the template. */
void db_fresh(const struct opts *o)
{
    static bool printed;
    char conninfo[192];

    db_drop();
    snprintf(g.dbname, sizeof(g.dbname), "%s", o->dbname);
    bench_pg_db_create(g.admin, g.dbname, o->template_db);
    g.db_created = true;
    snprintf(conninfo, sizeof(conninfo),
             "dbname=%s application_name=" PROG " options='-c client_min_messages=warning'",
             g.dbname);
    g.conn = bench_pg_connect(conninfo);
    if (!printed) {
        char v[256], md5[40], md5b[40];
        printf("schema: migrations %s; claim_cancel md5 %s, _cancel_orders+_cancel_orders_claim "
               "md5 %s\n",
               bench_pg_str(g.conn,
                            "SELECT string_agg(version, ',' ORDER BY version) "
                            "FROM ordergate.schema_migrations",
                            v, sizeof(v)),
               bench_pg_str(g.conn,
                            "SELECT md5(string_agg(prosrc, '' ORDER BY oid)) FROM pg_proc "
                            "WHERE proname = 'claim_cancel'",
                            md5, sizeof(md5)),
               bench_pg_str(g.conn,
                            "SELECT md5(string_agg(prosrc || coalesce(proconfig::text, ''), '' "
                            "ORDER BY proname)) FROM pg_proc "
                            "WHERE proname IN ('_cancel_orders', '_cancel_orders_claim')",
                            md5b, sizeof(md5b)));
        printed = true;
    }
}

void db_stock(const struct opts *o)
{
    char skus[16];
    const char *p[1] = {skus};

    snprintf(skus, sizeof(skus), "%d", o->skus);
    PQclear(bench_pg_query(g.conn,
                           "SELECT count(ordergate.add_stock('k' || i, 1000000000)) "
                           "FROM generate_series(0, $1::int - 1) i",
                           1, p));
}

/* Orders prefix0 .. prefix(n-1), pending; expire_at = base_ms + i * 1000 / per_s ms
 * (per_s 0: all at base_ms); items and coupons as in og_bench_gate. */
void db_load(const struct opts *o, const char *prefix, long n, int64_t base_ms, long per_s)
{
    double t0 = bench_mono_s();

    for (long a = 0; a < n; a += LOAD_CHUNK) {
        long b = a + LOAD_CHUNK < n ? a + LOAD_CHUNK : n;
        char lo[24], hi[24], every[16], base[24], per[24], items[16], skus[16];
        const char *pc[4] = {prefix, lo, hi, every};
        const char *po[6] = {prefix, lo, hi, every, base, per};
        const char *pi[5] = {prefix, lo, hi, items, skus};

        snprintf(lo, sizeof(lo), "%ld", a);
        snprintf(hi, sizeof(hi), "%ld", b);
        snprintf(every, sizeof(every), "%d", o->coupon_every);
        snprintf(base, sizeof(base), "%lld", (long long)base_ms);
        snprintf(per, sizeof(per), "%ld", per_s);
        snprintf(items, sizeof(items), "%d", o->items);
        snprintf(skus, sizeof(skus), "%d", o->skus);
        bench_check_stop();
        bench_pg_exec(g.conn, "BEGIN");
        /* Triggers off for the bulk load (superuser): see the file comment. */
        bench_pg_exec(g.conn, "SET LOCAL session_replication_role = replica");
        PQclear(bench_pg_query(
            g.conn,
            "INSERT INTO ordergate.coupons (coupon_id, state) "
            "SELECT $1 || 'c' || i, 'locked' FROM generate_series($2::bigint, $3::bigint - 1) i "
            "WHERE $4::int > 0 AND i % $4::int = 0",
            4, pc));
        PQclear(bench_pg_query(
            g.conn,
            "INSERT INTO ordergate.orders "
            "  (order_no, status, amount_cents, coupon_id, expire_at, original_expire_at) "
            "SELECT $1 || i, 'pending_payment', 1000 + (i % 50) * 100, "
            "       CASE WHEN $4::int > 0 AND i % $4::int = 0 THEN $1 || 'c' || i END, e, e "
            "FROM generate_series($2::bigint, $3::bigint - 1) i, "
            "     LATERAL (SELECT timestamptz 'epoch' + ($5::bigint + CASE WHEN "
            "$6::bigint > 0 THEN i * 1000 / $6::bigint ELSE 0 END) "
            "* interval '1 millisecond' AS e) x",
            6, po));
        PQclear(bench_pg_query(g.conn,
                               "INSERT INTO ordergate.order_items (order_no, sku, qty) "
                               "SELECT $1 || i, 'k' || ((i * 7 + j * 13) % $5::int), 1 + j "
                               "FROM generate_series($2::bigint, $3::bigint - 1) i, "
                               "     generate_series(0, $4::int - 1) j",
                               5, pi));
        bench_pg_exec(g.conn, "COMMIT");
        if (n > LOAD_CHUNK)
            bench_progress("loaded %s%ld..%s%ld", prefix, a, prefix, b - 1);
    }
    bench_progress("loaded %ld orders %s* in %.1f s", n, prefix, bench_mono_s() - t0);
}

/* Stock minus what the loaded orders hold (reconcile's stock invariant). */
void db_settle(void)
{
    double t0 = bench_mono_s();

    bench_pg_exec(g.conn,
                  "UPDATE ordergate.inventory v SET available = v.available - h.q "
                  "FROM (SELECT sku, sum(qty) AS q FROM ordergate.order_items GROUP BY sku) h "
                  "WHERE v.sku = h.sku");
    bench_pg_exec(g.conn, "VACUUM (ANALYZE) ordergate.orders");
    bench_pg_exec(g.conn, "VACUUM (ANALYZE) ordergate.order_items");
    bench_pg_exec(g.conn, "VACUUM (ANALYZE) ordergate.coupons");
    bench_pg_exec(g.conn, "VACUUM (ANALYZE) ordergate.inventory");
    bench_pg_exec(g.conn, "CHECKPOINT");
    bench_progress("stock settled, vacuum analyze, checkpoint: %.1f s", bench_mono_s() - t0);
}

double db_wal_lsn_bytes(void)
{
    return bench_pg_num(g.conn, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')", 0, NULL);
}

/* Autovacuum runs and checkpoints so far (to say what a phase competed with). */
void db_background(double *autovacuums, double *checkpoints)
{
    *autovacuums = bench_pg_num(g.conn,
                                "SELECT coalesce(sum(autovacuum_count + autoanalyze_count), 0) "
                                "FROM pg_stat_user_tables WHERE schemaname = 'ordergate'",
                                0, NULL);
    *checkpoints = bench_pg_num(
        g.conn, "SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter", 0, NULL);
}

long db_count_log(const char *prefix)
{
    const char *p[1] = {prefix};

    return (long)bench_pg_num(
        g.conn, "SELECT count(*) FROM ordergate.status_log WHERE order_no LIKE $1 || '%'", 1, p);
}

pid_t db_consumer_backend(void)
{
    return (pid_t)bench_pg_num(g.conn,
                               "SELECT coalesce(min(pid), 0) FROM pg_stat_activity "
                               "WHERE datname = current_database() "
                               "AND application_name = 'ordergate-consumer'",
                               0, NULL);
}

struct bench_prog;
/* Waits until a backend has no statement running (the stopped consumer's
 * claim in flight has committed). */
void db_backend_idle(pid_t backend, struct bench_prog *c)
{
    char pid[16];
    const char *p[1] = {pid};

    snprintf(pid, sizeof(pid), "%d", (int)backend);
    for (int i = 0; i < 3000; i++) {
        PGresult *res =
            bench_pg_query(g.conn, "SELECT state FROM pg_stat_activity WHERE pid = $1", 1, p);
        bool idle = PQntuples(res) == 0 || strncmp(PQgetvalue(res, 0, 0), "idle", 4) == 0;
        PQclear(res);
        if (idle)
            return;
        bench_prog_alive(c);
        bench_sleep_ms(10);
    }
    bench_die(
        "the consumer's database session stayed busy for 30 s while the consumer was stopped");
}
