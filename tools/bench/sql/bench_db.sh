# The database setup the SQL benchmarks share, sourced by tools/bench/sql/bench_claim_*.sh (not
# run on its own): a fresh database built with SCHEMA/install.sql (SCHEMA: default this tree's
# schema/; another tree's schema/ measures that version on the same server, in the same run), a
# work directory, both removed on exit, and the order load the claim benchmarks measure.
#
# Owns: the variables top, schema, pgbin, psql, db, work and the EXIT trap. Must not touch the
# caller's arguments or anything it measures.

# bench_db_create NAME: the database og_bench_NAME_<pid>, with the schema installed.
bench_db_create() {
    here_db=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
    top=$(cd "$here_db/../../.." && pwd)
    schema=${SCHEMA:-$top/schema}
    pgbin=${PG_BINDIR:-/usr/lib/postgresql/15/bin}
    psql=(env PGOPTIONS="-c client_min_messages=warning" "$pgbin/psql" -X -q -v ON_ERROR_STOP=1)
    db="og_bench_${1}_$$"
    work=$(mktemp -d)
    trap '"${psql[@]}" -d postgres -c "DROP DATABASE IF EXISTS \"$db\"" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
    [ -r "$schema/install.sql" ] || { echo "bench: no $schema/install.sql" >&2; exit 2; }
    "${psql[@]}" -d postgres -c "CREATE DATABASE \"$db\" TEMPLATE template0" >/dev/null
    (cd "$schema" && "${psql[@]}" -d "$db" -f install.sql >/dev/null)
}

# bench_db_load_orders N DUE SEQUENCE: N pending orders B0..B<N-1> (1-3 lines each over 200 hot
# SKUs with enough stock, a coupon on every third, amount 1000 + g % 9000) whose expire_at is
# now() + DUE (an interval: '-1 minute' for due orders), and the sequence public.SEQUENCE from 0
# that hands out the benchmark's order numbers; then VACUUM ANALYZE and a checkpoint, so the
# load does not weigh on what is measured.
bench_db_load_orders() {
    "${psql[@]}" -d "$db" -v n="$1" -v due="$2" -v seq="$3" <<'SQL'
INSERT INTO ordergate.inventory (sku, available) SELECT 'SKU-' || g, 1000000000 FROM generate_series(1, 200) g;
INSERT INTO ordergate.coupons (coupon_id, state)
SELECT 'CP-' || g, 'locked' FROM generate_series(0, :n - 1) g WHERE g % 3 = 0;
INSERT INTO ordergate.orders (order_no, amount_cents, coupon_id, expire_at)
SELECT 'B' || g, 1000 + g % 9000, CASE WHEN g % 3 = 0 THEN 'CP-' || g END, now() + :'due'::interval
  FROM generate_series(0, :n - 1) g;
INSERT INTO ordergate.order_items (order_no, sku, qty)
SELECT 'B' || g, 'SKU-' || ((g + k * 37) % 200 + 1), k
  FROM generate_series(0, :n - 1) g, generate_series(1, 1 + g % 3) k;
UPDATE ordergate.inventory i SET available = i.total - h.q
  FROM (SELECT it.sku, sum(it.qty) AS q FROM ordergate.order_items it GROUP BY it.sku) h
 WHERE h.sku = i.sku;
CREATE SEQUENCE public.:"seq" MINVALUE 0 START 0;
VACUUM ANALYZE;
CHECKPOINT;
SQL
}

