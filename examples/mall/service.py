#!/usr/bin/python3
"""The mall's order service in Python (psycopg2): places orders in the shop's own tables and in
ordergate in one transaction, applies payment callbacks through the gate, closes orders for
operations. Service.java makes the same calls in Java.

    service.py place ORDERS_TSV              place the orders of ORDERS_TSV tagged "py"
    service.py pay CALLS_TSV [--workers N]   the callbacks of CALLS_TSV tagged "py", on time,
                                             on N sessions (default 4)
    service.py close ORDER_SN OPERATOR REASON
                                             a manual close

The connection comes from libpq's environment (PGHOST, PGPORT, PGUSER, PGDATABASE, PGPASSWORD,
PGOPTIONS); the service needs the privileges of role mall_app (run.sh connects with
PGOPTIONS="-c role=mall_app"). Answers go to stdout, one tab-separated line per call:
    service, action, order_sn, txn_no, amount_cents, outcome, first_outcome    (\\N = none)
File formats: race.py. Every value reaches the database as a bound parameter.

Transactions follow the lock order of hooks.sql: the gate is called before any row a hook writes
is locked. Placing calls ordergate.place_order first, then locks the coupon row and the stock rows
by SKU id ascending; a payment calls ordergate.claim_payment (whose hook locks the shop's rows)
and only then touches oms_order. A serialization failure, deadlock, lock or statement timeout
(40001, 40P01, 55P03, 57014) rolls the whole shop transaction back and runs it again, gate call
included; the lock order means deadlocks should not happen, and check.sql fails if one did.
"""
import decimal
import sys
import threading
import time

import psycopg2
import psycopg2.errorcodes

SERVICE = "py"
APP_NAME = "mall-service-py"
# Retriable on the same connection (docs/integrate.md, "Errors"); a lost connection (08xxx,
# 57P01..57P03) would need a new one and fails the example instead.
TRANSIENT = (psycopg2.errorcodes.SERIALIZATION_FAILURE, psycopg2.errorcodes.DEADLOCK_DETECTED,
             psycopg2.errorcodes.LOCK_NOT_AVAILABLE, psycopg2.errorcodes.QUERY_CANCELED)
PAY_TYPE = {"alipay": 1, "wechat": 2}
CANCEL_WAIT_S = 30        # after_cancel: how long to wait for ordergate's cancel
stats = {"retries": 0, "deadlocks": 0}
stats_lock = threading.Lock()
out_lock = threading.Lock()


def connect():
    return psycopg2.connect("", application_name=APP_NAME)


def in_transaction(conn, fn, *args):
    """Runs fn(cursor, *args) in one transaction and commits; a transient failure rolls it back
    and runs it again (at most 5 times). fn returns (commit?, result)."""
    for attempt in range(5):
        try:
            with conn.cursor() as cur:
                commit, result = fn(cur, *args)
            if commit:
                conn.commit()
            else:
                conn.rollback()
            return result
        except psycopg2.Error as e:
            conn.rollback()
            if e.pgcode not in TRANSIENT or attempt == 4:
                raise
            with stats_lock:
                stats["retries"] += 1
                if e.pgcode == psycopg2.errorcodes.DEADLOCK_DETECTED:
                    stats["deadlocks"] += 1
            print("%s: %s, transaction retried: %s" % (SERVICE, e.pgcode, e.pgerror.strip()),
                  file=sys.stderr)
            time.sleep(0.01 * (attempt + 1))
    raise AssertionError("unreachable")


def place_tx(cur, order_sn, member_id, coupon_id, items, deadline_ms):
    """One order: the gate's gate-only order first, then the shop's rows: the coupon used, the
    stock locked, oms_order and its items. Rolled back whole unless everything is there."""
    skus = [sku for sku, _qty in items]
    cur.execute("SELECT id, price, sku_code FROM mall.pms_sku_stock WHERE id = ANY (%s)", (skus,))
    catalogue = {sku: (price, code) for sku, price, code in cur.fetchall()}
    if len(catalogue) != len(skus):
        return False, "out_of_stock"           # an unknown SKU
    total = sum(catalogue[sku][0] * qty for sku, qty in items)
    coupon_amount = decimal.Decimal("0.00")
    if coupon_id:
        cur.execute("SELECT amount, min_point FROM mall.sms_coupon WHERE id = %s", (coupon_id,))
        row = cur.fetchone()
        if row is None or total < row[1]:
            return False, "coupon_unavailable"
        coupon_amount = min(row[0], total - decimal.Decimal("0.01"))
    pay = total - coupon_amount

    # The gate before any row a hook writes (hooks.sql, lock order). Gate-only: no items, no
    # coupon in ordergate; the shop's rows below are the stock and the coupon, and the hooks keep
    # them in step with what ordergate decides. A repeated order_sn is 'duplicate' here, before
    # any stock moved.
    cur.execute("SELECT ordergate.place_order(%s, %s, '[]'::jsonb, NULL,"
                "                             now() + %s * interval '1 millisecond')",
                (order_sn, int(pay * 100), deadline_ms))
    outcome = cur.fetchone()[0]
    if outcome != "placed":
        return False, outcome

    # Then the hooks' order: the coupon row, the stock rows by SKU id ascending.
    history_id = None
    if coupon_id:
        # The member's first unused coupon of that kind (the shop's own choice of row).
        cur.execute("SELECT id FROM mall.sms_coupon_history"
                    " WHERE member_id = %s AND coupon_id = %s AND use_status = 0"
                    " ORDER BY id LIMIT 1 FOR UPDATE", (member_id, coupon_id))
        row = cur.fetchone()
        if row is None:
            return False, "coupon_unavailable"
        history_id = row[0]
    for sku, qty in items:                     # sorted by SKU id
        cur.execute("UPDATE mall.pms_sku_stock SET lock_stock = lock_stock + %s"
                    " WHERE id = %s AND stock - lock_stock >= %s RETURNING price",
                    (qty, sku, qty))
        row = cur.fetchone()
        if row is None:
            return False, "out_of_stock"
        if row[0] != catalogue[sku][0]:
            return False, "price_changed"      # the amount given to the gate is stale: retry
    cur.execute("INSERT INTO mall.oms_order (member_id, coupon_id, order_sn, member_username,"
                "       total_amount, pay_amount, coupon_amount, source_type, receiver_name,"
                "       receiver_phone, receiver_detail_address)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, 1, %s, %s, %s) RETURNING id",
                (member_id, coupon_id or None, order_sn, "member%d" % member_id, total, pay,
                 coupon_amount, "member %d" % member_id, "18000000000", "1 Example Road"))
    order_id = cur.fetchone()[0]
    for sku, qty in items:
        price, code = catalogue[sku]
        share = (coupon_amount * price * qty / total).quantize(decimal.Decimal("0.01"))
        cur.execute("INSERT INTO mall.oms_order_item (order_id, order_sn, product_name,"
                    "       product_price, product_quantity, product_sku_id, product_sku_code,"
                    "       coupon_amount, real_amount)"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    (order_id, order_sn, code, price, qty, sku, code, share, price * qty - share))
    if history_id is not None:
        cur.execute("UPDATE mall.sms_coupon_history"
                    "   SET use_status = 1, use_time = now(), order_id = %s, order_sn = %s"
                    " WHERE id = %s", (order_id, order_sn, history_id))
    return True, "placed"


def pay_tx(cur, order_sn, txn_no, amount_cents, channel):
    """A payment callback: the gate decides; on 'paid' its hook has already made the shop's
    order paid and its stock sold in this transaction, and the service records the pay type."""
    cur.execute("SELECT outcome, status, first_outcome FROM ordergate.claim_payment(%s, %s, %s, %s)",
                (order_sn, txn_no, amount_cents, channel))
    outcome, _status, first = cur.fetchone()
    if outcome == "paid":
        cur.execute("UPDATE mall.oms_order SET pay_type = %s, modify_time = now()"
                    " WHERE order_sn = %s AND status = 1", (PAY_TYPE.get(channel, 0), order_sn))
        if cur.rowcount != 1:
            raise RuntimeError("order %s: the gate answered paid but oms_order is not paid"
                               % order_sn)
    return True, (outcome, first)


def close_tx(cur, order_sn, operator, reason):
    cur.execute("SELECT outcome, status FROM ordergate.close_order(%s, %s, %s)",
                (order_sn, operator, reason))
    return True, cur.fetchone()[0]


def answer(action, order_sn, txn_no, amount, outcome, first):
    def f(v):
        return "\\N" if v is None else str(v)
    with out_lock:
        sys.stdout.write("\t".join(f(v) for v in (SERVICE, action, order_sn, txn_no, amount,
                                                  outcome, first)) + "\n")
        sys.stdout.flush()


def tsv_lines(path, service):
    with open(path) as fh:
        for line in fh:
            fields = line.rstrip("\n").split("\t")
            if fields and fields[0] == service:
                yield fields[1:]


def cmd_place(path):
    conn = connect()
    n = 0
    start = time.monotonic()
    for order_sn, member, coupon, deadline_ms, items, at_ms in tsv_lines(path, SERVICE):
        pause = start + int(at_ms) / 1000.0 - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        summed = {}
        for it in items.split(","):
            sku, qty = it.split(":")
            summed[int(sku)] = summed.get(int(sku), 0) + int(qty)
        outcome = in_transaction(conn, place_tx, order_sn, int(member), int(coupon),
                                 sorted(summed.items()), int(deadline_ms))
        answer("place", order_sn, None, None, outcome, None)
        n += 1
    conn.close()
    return n


def load_orders(conn, order_sns):
    """order_sn -> (pay amount in cents, ms until its expire_at by the database's clock)."""
    with conn.cursor() as cur:
        cur.execute("SELECT o.order_sn, (o.pay_amount * 100)::bigint,"
                    "       (extract(epoch FROM g.expire_at - now()) * 1000)::bigint"
                    "  FROM mall.oms_order o JOIN ordergate.orders g ON g.order_no = o.order_sn"
                    " WHERE o.order_sn = ANY (%s)", (list(order_sns),))
        rows = cur.fetchall()
    conn.rollback()
    return {sn: (amount, until) for sn, amount, until in rows}


def wait_cancelled(conn, order_sn):
    deadline = time.monotonic() + CANCEL_WAIT_S
    while time.monotonic() < deadline:
        with conn.cursor() as cur:
            cur.execute("SELECT status FROM ordergate.orders WHERE order_no = %s", (order_sn,))
            row = cur.fetchone()
        conn.rollback()
        if row and row[0] == "cancelled":
            return True
        if row and row[0] == "paid":
            return False
        time.sleep(0.1)
    raise RuntimeError("order %s: not cancelled within %d s" % (order_sn, CANCEL_WAIT_S))


def handle_call(conn, call, amount):
    kind, order_sn, _delta, txn_no, amount_delta, channel = call
    if kind == "close":
        outcome = in_transaction(conn, close_tx, order_sn, "ops-" + SERVICE, "customer asked to cancel")
        answer("close", order_sn, None, None, outcome, None)
        return
    if kind == "after_cancel" and not wait_cancelled(conn, order_sn):
        answer("skip", order_sn, txn_no, None, "paid_meanwhile", None)
        return
    cents = amount + int(amount_delta)
    outcome, first = in_transaction(conn, pay_tx, order_sn, txn_no, cents, channel)
    answer("pay", order_sn, txn_no, cents, outcome, first)
    if kind == "pay_twice" and outcome == "paid":
        t2 = txn_no + "-2"
        outcome, first = in_transaction(conn, pay_tx, order_sn, t2, cents, channel)
        answer("pay", order_sn, t2, cents, outcome, first)


def cmd_pay(path, workers):
    calls = [(c[0], c[1], int(c[2]), c[3], c[4], c[5]) for c in tsv_lines(path, SERVICE)]
    conn = connect()
    start = time.monotonic()
    known = load_orders(conn, {c[1] for c in calls})
    conn.close()
    queue = []    # (due, seq, call, amount): unknown orders once, unplaced ones skipped
    for seq, c in enumerate(calls):
        kind, order_sn, delta = c[0], c[1], c[2]
        if kind == "unknown":
            queue.append((0.0, seq, c, 100))
        elif order_sn not in known:
            answer("skip", order_sn, c[3] or None, None, "not_placed", None)
        else:
            amount, until = known[order_sn]
            due = 0.0 if kind == "mismatch" else (until + delta) / 1000.0
            queue.append((due, seq, c, amount))
    queue.sort()
    lock = threading.Lock()
    errors = []

    def worker():
        try:
            wconn = connect()
            while True:
                with lock:
                    if not queue:
                        break
                    due, _seq, call, amount = queue.pop(0)
                pause = start + due - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
                handle_call(wconn, call, amount)
            wconn.close()
        except Exception as e:    # reported, and the run fails
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return len(calls)


def main(argv):
    if len(argv) == 2 and argv[0] == "place":
        n = cmd_place(argv[1])
    elif argv[:1] == ["pay"] and len(argv) in (2, 4):
        workers = 4
        if len(argv) == 4:
            if argv[2] != "--workers" or not argv[3].isdigit() or not 1 <= int(argv[3]) <= 64:
                return usage()
            workers = int(argv[3])
        n = cmd_pay(argv[1], workers)
    elif len(argv) == 4 and argv[0] == "close":
        conn = connect()
        outcome = in_transaction(conn, close_tx, argv[1], argv[2], argv[3])
        answer("close", argv[1], None, None, outcome, None)
        conn.close()
        return 0
    else:
        return usage()
    print("service.py %s: %d lines, %d transactions retried (%d deadlocks)"
          % (argv[0], n, stats["retries"], stats["deadlocks"]), file=sys.stderr)
    return 0


def usage():
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
