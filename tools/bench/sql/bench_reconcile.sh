#!/usr/bin/env bash
# Times ordergate.reconcile() on a large, consistent book (default 1,000,000 orders: 60% cancelled,
# 30% paid, 10% pending; 1-3 lines each over 2,000 SKUs; a coupon on every third order; a late
# payment with its exception on every hundredth cancelled order), then plants one violation per
# invariant and checks that each is found. Drops the database at the end.
#
#   tools/bench/sql/bench_reconcile.sh [ORDERS]
#
# Connection: libpq's environment; a role that may create databases (superuser on a throwaway cluster).
set -euo pipefail

n=${1:-1000000}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../../.." && pwd)
pgbin=${PG_BINDIR:-/usr/lib/postgresql/15/bin}
psql=(env PGOPTIONS="-c client_min_messages=warning" "$pgbin/psql" -X -q -v ON_ERROR_STOP=1)
db="og_bench_reconcile_$$"
trap '"${psql[@]}" -d postgres -c "DROP DATABASE IF EXISTS \"$db\"" >/dev/null 2>&1 || true' EXIT

"${psql[@]}" -d postgres -c "CREATE DATABASE \"$db\" TEMPLATE template0" >/dev/null
"${psql[@]}" -d "$db" -f "$top/schema/install.sql" >/dev/null

echo "reconcile bench: loading $n orders"
"${psql[@]}" -d "$db" -v n="$n" <<'EOF'
SET synchronous_commit = off;
CREATE TEMP TABLE g AS
SELECT g, CASE WHEN g % 10 < 6 THEN 'cancelled' WHEN g % 10 < 9 THEN 'paid' ELSE 'pending_payment' END AS status
  FROM generate_series(0, :n - 1) g;
INSERT INTO ordergate.inventory (sku, available) SELECT 'SKU-' || s, 0 FROM generate_series(1, 2000) s;
INSERT INTO ordergate.coupons (coupon_id, state)
SELECT 'CP-' || g, CASE status WHEN 'cancelled' THEN 'available' WHEN 'paid' THEN 'used' ELSE 'locked' END
  FROM g WHERE g % 3 = 0;
INSERT INTO ordergate.orders (order_no, status, amount_cents, coupon_id, expire_at, created_at, closed_at)
SELECT 'R' || g, status, 1000 + g % 9000, CASE WHEN g % 3 = 0 THEN 'CP-' || g END,
       CASE WHEN status = 'pending_payment' THEN now() + interval '10 minutes' ELSE now() - interval '1 hour' END,
       now() - interval '2 hours', CASE WHEN status <> 'pending_payment' THEN now() - interval '1 hour' END
  FROM g;
INSERT INTO ordergate.order_items (order_no, sku, qty)
SELECT 'R' || g, 'SKU-' || ((g + k * 397) % 2000 + 1), k FROM g, generate_series(1, 1 + g % 3) k;
UPDATE ordergate.inventory i SET available = 1000000, total = 1000000 + coalesce(h.q, 0)
  FROM (SELECT it.sku, sum(it.qty) AS q FROM ordergate.order_items it
          JOIN ordergate.orders o ON o.order_no = it.order_no
         WHERE o.status IN ('pending_payment', 'paid') GROUP BY it.sku) h
 WHERE h.sku = i.sku;
INSERT INTO ordergate.payments (txn_no, order_no, amount_cents, channel, outcome)
SELECT 'T' || g, 'R' || g, 1000 + g % 9000, 'card', 'paid' FROM g WHERE status = 'paid';
INSERT INTO ordergate.payments (txn_no, order_no, amount_cents, channel, outcome)
SELECT 'L' || g, 'R' || g, 1000 + g % 9000, 'card', 'late_payment' FROM g WHERE status = 'cancelled' AND g % 100 = 1;
INSERT INTO ordergate.exceptions (order_no, kind, txn_no, amount_cents, resolution)
SELECT 'R' || g, 'late_payment', 'L' || g, 1000 + g % 9000, 'auto_refund' FROM g WHERE status = 'cancelled' AND g % 100 = 1;
INSERT INTO ordergate.status_log (order_no, from_status, to_status, source, idempotency_key, actor)
SELECT 'R' || g, 'pending_payment', status,
       CASE WHEN status = 'paid' THEN 'payment_callback' WHEN g % 2 = 0 THEN 'timeout_consumer' ELSE 'timeout_scanner' END,
       CASE WHEN status = 'paid' THEN 'T' || g ELSE 'R' || g END, 'bench'
  FROM g WHERE status <> 'pending_payment';
INSERT INTO ordergate.outbox (event_type, order_no, payload, published_at)
SELECT CASE WHEN status = 'paid' THEN 'order_paid' ELSE 'order_cancelled' END, 'R' || g, '{}', now()
  FROM g WHERE status <> 'pending_payment';
INSERT INTO ordergate.outbox (event_type, order_no, payload, published_at)
SELECT 'refund_requested', 'R' || g, '{}', now() FROM g WHERE status = 'cancelled' AND g % 100 = 1;
VACUUM ANALYZE;
EOF

run() {
    local label=$1 start end out
    start=$(date +%s.%N)
    out=$("${psql[@]}" -d "$db" -At -F ' ' -c "SELECT invariant, violations, coalesce(array_to_string(sample, ','), '') FROM ordergate.reconcile()")
    end=$(date +%s.%N)
    echo "reconcile bench: $label: $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }') s"
    echo "$out" | sed 's/^/    /'
}
run "clean book of $n orders"
bad=$("${psql[@]}" -d "$db" -At -c "SELECT sum(violations) FROM ordergate.reconcile()")
[ "$bad" = "0" ] || { echo "reconcile bench: FAIL the clean book shows $bad violations"; exit 1; }

"${psql[@]}" -d "$db" <<'EOF'
ALTER TABLE ordergate.status_log DISABLE TRIGGER status_log_append_only;
UPDATE ordergate.status_log SET from_status = 'paid' WHERE order_no = 'R10';          -- 1
UPDATE ordergate.inventory SET available = available + 1 WHERE sku = 'SKU-7';        -- 2
UPDATE ordergate.coupons SET state = 'locked' WHERE coupon_id = 'CP-3';              -- 3 (R3 is cancelled)
DELETE FROM ordergate.status_log WHERE order_no = 'R20';                             -- 4
DELETE FROM ordergate.exceptions WHERE txn_no = 'L1';                                -- 5
UPDATE ordergate.orders SET expire_at = now() - interval '1 hour' WHERE order_no = 'R9';  -- 6
DELETE FROM ordergate.outbox WHERE order_no = 'R30' AND event_type = 'order_cancelled';   -- 7
EOF
run "one planted violation per invariant"
found=$("${psql[@]}" -d "$db" -At -c "SELECT count(*) FROM ordergate.reconcile() WHERE violations > 0")
[ "$found" = "7" ] || { echo "reconcile bench: FAIL found violations of $found invariants, want 7"; exit 1; }
echo "reconcile bench: ok"
