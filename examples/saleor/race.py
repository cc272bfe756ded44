#!/usr/bin/python3
"""examples/saleor/race.py: Saleor's order service against the gate, raced. It stocks the shop,
places orders the way Saleor's checkout completes them (gate first, then the voucher code, the
stock, the order, its lines and allocations, in one transaction), then plays every order's
payment story at its time relative to the order's deadline while ordergate-scanner (run.sh
starts it) cancels what is overdue:

  pay          the whole amount, well before or around the deadline (racing the scanner)
  dup          the same payment delivered twice at once (two sessions)
  pay_twice    paid, then paid again by another transaction (double payment)
  late         paid only after the gate cancelled the order (late payment)
  close        staff cancel the order (close_order), mostly as a payment arrives
  mismatch     a wrong amount first, then the right one
  parts        an order that may be paid in parts: two or three parts, the last around the
               deadline; sometimes the parts add up to more than the total (overpaid)
  charge_ok    a charge begun before the deadline (begin_charge), captured after it
  charge_fail  a charge begun before the deadline that fails after it (charge_failed): the
               order is then due and cancelled
  unknown      a payment for an order that does not exist
  none         never paid: the scanner expires it
and, when the gate has them (release_order, amend_order, set_deadline):
  release      staff confirm the unpaid order near its deadline (racing the scanner), and it is
               paid later or never
  edit         staff add a unit to a line (amend_order), then the new total is paid
  deadline     staff give the customer more time (set_deadline), paid after the old deadline;
               or end the window now, and the scanner cancels the order early
and, when the gate has payment reminders, run.sh sets one a second before every deadline
(verify.sql: one payment_reminder event each; ordergate's invariant 17: none after the order
closed).

Amounts: Saleor's numeric(20,3) totals in USD, EUR, JPY and KWD, sent to the gate in minor units
by the currency's exponent (ordergate.currencies). Keys: the order's uuid is the gate's order_no
(its canonical text), its number an integer from order_order_number_seq.

    race.py --orders N --seed S      (libpq environment; role saleor: run.sh sets PGOPTIONS)

Every answer of the gate goes to saleor_race.answer for verify.sql; the process exits when no
order is pending any more (or fails after a bound). Every value is a bound parameter.
"""
import argparse
import datetime
import decimal
import heapq
import json
import random
import sys
import threading
import time
import uuid

import psycopg2
import psycopg2.errorcodes
import psycopg2.extras

D = decimal.Decimal
EXPONENT = {"USD": 2, "EUR": 2, "JPY": 0, "KWD": 3}
# Variant prices per currency (Saleor keeps them per channel; one channel per currency here).
PRICES = {
    1: {"USD": "19.99", "EUR": "18.50", "JPY": "1980", "KWD": "4.125"},
    2: {"USD": "5.49", "EUR": "4.99", "JPY": "600", "KWD": "1.375"},
    3: {"USD": "42.00", "EUR": "39.90", "JPY": "4500", "KWD": "9.850"},
    4: {"USD": "0.99", "EUR": "0.89", "JPY": "110", "KWD": "0.305"},
    5: {"USD": "12.00", "EUR": "11.00", "JPY": "1300", "KWD": "2.500"},
    6: {"USD": "7.25", "EUR": "6.75", "JPY": "800", "KWD": "1.760"},
}
HOT, COLD = [1, 2, 3, 4], [5, 6]
WAREHOUSE = "0f3e2a4c-1b2d-4e5f-8a9b-0c1d2e3f4a5b"
CODES = ["SAVE10-A", "SAVE10-B", "SAVE10-C"]
VOUCHER_LIMIT = 9
TRANSIENT = {psycopg2.errorcodes.SERIALIZATION_FAILURE, psycopg2.errorcodes.DEADLOCK_DETECTED,
             psycopg2.errorcodes.LOCK_NOT_AVAILABLE, psycopg2.errorcodes.QUERY_CANCELED}
STAFF = "staff-anna"

answers = []
answers_lock = threading.Lock()
stats = {"retries": 0}


def log(msg):
    print("race: " + msg, file=sys.stderr, flush=True)


def now_utc():
    return datetime.datetime.now(datetime.timezone.utc)


def connect():
    conn = psycopg2.connect("", application_name="saleor-service")
    return conn


def answer(action, order_no, txn_no, minor, currency, outcome, first=None):
    with answers_lock:
        answers.append((action, order_no, txn_no, minor, currency, outcome, first))


def in_tx(conn, fn, *args):
    """fn(cur, *args) -> (commit, result), one transaction, retried whole on a transient error."""
    for attempt in range(6):
        try:
            with conn.cursor() as cur:
                commit, result = fn(cur, *args)
            conn.commit() if commit else conn.rollback()
            return result
        except psycopg2.Error as e:
            conn.rollback()
            if e.pgcode not in TRANSIENT or attempt == 5:
                raise
            stats["retries"] += 1
            log("%s, transaction retried: %s" % (e.pgcode, (e.pgerror or "").strip()))
            time.sleep(0.02 * (attempt + 1))
    raise AssertionError("unreachable")


def minor_units(amount, currency):
    """numeric(20,3) -> the gate's minor units; an amount with more decimals has none."""
    scaled = amount * (10 ** EXPONENT[currency])
    if scaled != scaled.to_integral_value():
        raise ValueError("%s %s has no minor-unit form" % (amount, currency))
    return int(scaled)


def quantize(amount, currency):
    return amount.quantize(D(1).scaleb(-EXPONENT[currency]), rounding=decimal.ROUND_HALF_UP)


# ---- The plan --------------------------------------------------------------------------------
def plan(rnd, n, life):
    orders = []
    for i in range(n):
        cur = rnd.choice(sorted(EXPONENT))
        lines = {}
        for _ in range(rnd.randint(1, 3)):
            v = rnd.choice(HOT) if rnd.random() < 0.8 else rnd.choice(COLD)
            lines[v] = lines.get(v, 0) + rnd.randint(1, 2)
        partial = rnd.random() < 0.2
        code = rnd.choice(CODES) if rnd.random() < 0.3 else None
        r = rnd.random()
        if partial:
            story = "parts" if r < 0.75 else rnd.choice(["none", "pay", "close"])
        elif life and r < 0.18:
            story = rnd.choice(["release", "release", "edit", "deadline", "deadline_past"])
            if story == "edit":
                code = None           # an edit re-prices the order; without a voucher here
                lines[COLD[0]] = lines.get(COLD[0], 0) + 1    # the line it adds to, in stock
        else:
            r = rnd.random()
            story = ("none" if r < 0.18 else "pay" if r < 0.44 else "dup" if r < 0.51 else
                     "pay_twice" if r < 0.57 else "late" if r < 0.65 else "close" if r < 0.71 else
                     "mismatch" if r < 0.76 else "charge_ok" if r < 0.88 else "charge_fail")
        orders.append({
            "id": str(uuid.UUID(int=rnd.getrandbits(128), version=4)), "currency": cur,
            "lines": sorted(lines.items()), "partial": partial, "code": code, "story": story,
            "window": rnd.uniform(1.5, 3.5), "at": rnd.uniform(0, 3.0), "seed": rnd.random(),
        })
    orders.sort(key=lambda o: o["at"])
    # One order asks for more than the shop ever stocks: out_of_stock whatever the timing.
    orders[len(orders) // 2]["lines"] = [(HOT[0], 100000)]
    return orders


def setup(conn, orders):
    demand = {v: 0 for v in PRICES}
    for o in orders:
        for v, q in o["lines"]:
            if q < 1000:
                demand[v] += q
    with conn.cursor() as cur:
        for v in sorted(PRICES):
            qty = int(demand[v] / 1.3) if v in HOT else demand[v] + 100
            cur.execute("INSERT INTO saleor.warehouse_stock (id, warehouse_id, product_variant_id,"
                        " quantity, quantity_allocated) VALUES (%s, %s, %s, %s, 0)",
                        (v, WAREHOUSE, v, qty))
        cur.execute("INSERT INTO saleor.discount_voucher (id, type, name, usage_limit)"
                    " VALUES (1, 'entire_order', '10%% off', %s)", (VOUCHER_LIMIT,))
        for c in CODES:
            cur.execute("INSERT INTO saleor.discount_vouchercode (id, code, used, is_active,"
                        " voucher_id, created_at) VALUES (gen_random_uuid(), %s, 0, true, 1, now())",
                        (c,))
    conn.commit()


# ---- The order service -------------------------------------------------------------------------
def place_tx(cur, o):
    cur_code = o["currency"]
    subtotal = sum(D(PRICES[v][cur_code]) * q for v, q in o["lines"])
    discount = quantize(subtotal * D("0.1"), cur_code) if o["code"] else D(0)
    total = subtotal - discount
    minor = minor_units(total, cur_code)
    expire = now_utc() + datetime.timedelta(seconds=o["window"])
    cur.execute("SELECT nextval('saleor.order_order_number_seq')")
    number = cur.fetchone()[0]
    # The gate first: a repeated order is refused before any stock moves, and the transaction
    # holds no row a hook writes while it waits for anything of the gate's.
    cur.execute("SELECT ordergate.place_order(%s, %s, '[]'::jsonb, NULL, %s, %s::jsonb, %s, %s)",
                (o["id"], minor, expire, json.dumps({"number": number}), cur_code, o["partial"]))
    outcome = cur.fetchone()[0]
    if outcome != "placed":
        return False, (outcome, None)
    # Then the hooks' order: the voucher code, the stock rows by id.
    if o["code"]:
        cur.execute("UPDATE saleor.discount_vouchercode c SET used = c.used + 1"
                    "  FROM saleor.discount_voucher v"
                    " WHERE c.code = %s AND c.is_active AND v.id = c.voucher_id"
                    "   AND c.used < coalesce(v.usage_limit, c.used + 1) RETURNING c.id", (o["code"],))
        if cur.fetchone() is None:
            return False, ("voucher_unavailable", None)
    for v, q in o["lines"]:
        cur.execute("UPDATE saleor.warehouse_stock SET quantity_allocated = quantity_allocated + %s"
                    " WHERE id = %s AND quantity - quantity_allocated >= %s RETURNING id", (q, v, q))
        if cur.fetchone() is None:
            return False, ("out_of_stock", None)
    cur.execute("INSERT INTO saleor.order_order (id, number, created_at, updated_at, status,"
                " charge_status, authorize_status, user_email, origin, currency, total_net_amount,"
                " total_gross_amount, total_charged_amount, voucher_code, customer_note)"
                " VALUES (%s, %s, now(), now(), 'unconfirmed', 'none', 'none', %s, 'checkout', %s,"
                "         %s, %s, 0, %s, '')",
                (o["id"], number, "c%d@example.com" % number, cur_code, total, total, o["code"]))
    for v, q in o["lines"]:
        line_id = str(uuid.uuid4())
        price = D(PRICES[v][cur_code])
        cur.execute("INSERT INTO saleor.order_orderline (id, order_id, variant_id, product_name,"
                    " product_sku, quantity, quantity_fulfilled, currency, unit_price_gross_amount,"
                    " total_price_gross_amount) VALUES (%s, %s, %s, %s, %s, %s, 0, %s, %s, %s)",
                    (line_id, o["id"], v, "Variant %d" % v, "SKU-%d" % v, q, cur_code, price, price * q))
        cur.execute("INSERT INTO saleor.warehouse_allocation (order_line_id, stock_id,"
                    " quantity_allocated) VALUES (%s, %s, %s)", (line_id, v, q))
    return True, ("placed", minor)


def order_minor(cur, order_no):
    cur.execute("SELECT total_gross_amount, currency FROM saleor.order_order WHERE id = %s", (order_no,))
    total, currency = cur.fetchone()
    return minor_units(total, currency), currency


def pay_tx(cur, order_no, txn, minor, currency, charge_ref=None):
    """A payment notification: the gate decides; a paid order's payment rows are the paid
    hook's; a part (no hook runs for one) is recorded here, after the gate call."""
    cur.execute("SELECT outcome, first_outcome FROM ordergate.claim_payment(%s, %s, %s, %s, %s, %s)",
                (order_no, txn, minor, "card", currency, charge_ref))
    outcome, first = cur.fetchone()
    if outcome == "partial":
        cur.execute("INSERT INTO saleor.payment_transactionitem (token, created_at, modified_at,"
                    " name, psp_reference, currency, charged_value, authorized_value,"
                    " charge_pending_value, refunded_value, order_id)"
                    " VALUES (gen_random_uuid(), now(), now(), 'card', %s, %s, saleor.major_units(%s, %s),"
                    "         0, 0, 0, %s) ON CONFLICT (order_id, psp_reference) DO NOTHING",
                    (txn, currency, minor, EXPONENT[currency], order_no))
        cur.execute("UPDATE saleor.order_order o SET charge_status = 'partial', updated_at = now(),"
                    "       total_charged_amount = (SELECT sum(t.charged_value)"
                    "                                 FROM saleor.payment_transactionitem t"
                    "                                WHERE t.order_id = o.id)"
                    " WHERE o.id = %s", (order_no,))
    return True, (outcome, first)


def begin_tx(cur, order_no, ref, minor, currency):
    cur.execute("SELECT outcome FROM ordergate.begin_charge(%s, %s, 4)", (order_no, ref))
    outcome = cur.fetchone()[0]
    if outcome == "pending":
        cur.execute("INSERT INTO saleor.payment_transactionitem (token, created_at, modified_at,"
                    " name, psp_reference, currency, charged_value, authorized_value,"
                    " charge_pending_value, refunded_value, order_id)"
                    " VALUES (gen_random_uuid(), now(), now(), 'bank transfer', %s, %s, 0, 0,"
                    "         saleor.major_units(%s, %s), 0, %s)",
                    (ref, currency, minor, EXPONENT[currency], order_no))
    return True, outcome


def fail_tx(cur, order_no, ref):
    cur.execute("SELECT ordergate.charge_failed(%s, %s)", (order_no, ref))
    outcome = cur.fetchone()[0]
    if outcome == "failed":
        cur.execute("UPDATE saleor.payment_transactionitem SET charge_pending_value = 0,"
                    " modified_at = now() WHERE order_id = %s AND psp_reference = %s", (order_no, ref))
    return True, outcome


def one_row_tx(sql):
    def tx(cur, *args):
        cur.execute(sql, args)
        return True, cur.fetchone()[0]
    return tx


close_tx = one_row_tx("SELECT outcome FROM ordergate.close_order(%s, %s, %s)")
release_tx = one_row_tx("SELECT outcome FROM ordergate.release_order(%s, %s, %s)")
deadline_tx = one_row_tx("SELECT outcome FROM ordergate.set_deadline(%s, %s, %s)")


def edit_tx(cur, order_no):
    """Staff add a unit to the order's last line (by variant): the gate's amount first
    (amend_order), then the shop's order, line, stock and allocation, in the hooks' lock order."""
    cur.execute("SELECT o.currency, l.id, l.variant_id, l.unit_price_gross_amount"
                "  FROM saleor.order_order o JOIN saleor.order_orderline l ON l.order_id = o.id"
                " WHERE o.id = %s ORDER BY l.variant_id DESC LIMIT 1", (order_no,))
    currency, line_id, variant, price = cur.fetchone()
    cur.execute("SELECT total_gross_amount FROM saleor.order_order WHERE id = %s", (order_no,))
    total = cur.fetchone()[0] + price
    cur.execute("SELECT outcome FROM ordergate.amend_order(%s, %s, '[]'::jsonb,"
                " (SELECT shop FROM ordergate.orders WHERE order_no = %s), %s)",
                (order_no, minor_units(total, currency), order_no, STAFF))
    outcome = cur.fetchone()[0]
    if outcome != "amended":
        return False, outcome
    cur.execute("UPDATE saleor.order_order SET total_gross_amount = %s, total_net_amount = %s,"
                " updated_at = now() WHERE id = %s AND status = 'unconfirmed'", (total, total, order_no))
    if cur.rowcount != 1:
        raise RuntimeError("order %s amended at the gate but not unconfirmed in the shop" % order_no)
    cur.execute("UPDATE saleor.warehouse_stock SET quantity_allocated = quantity_allocated + 1"
                " WHERE id = %s AND quantity - quantity_allocated >= 1", (variant,))
    if cur.rowcount != 1:
        return False, "out_of_stock"          # the gate's amendment rolls back with it
    cur.execute("UPDATE saleor.order_orderline SET quantity = quantity + 1,"
                " total_price_gross_amount = total_price_gross_amount + unit_price_gross_amount"
                " WHERE id = %s", (line_id,))
    cur.execute("UPDATE saleor.warehouse_allocation SET quantity_allocated = quantity_allocated + 1"
                " WHERE order_line_id = %s AND stock_id = %s", (line_id, variant))
    return True, outcome


def gate_status(conn, order_no):
    with conn.cursor() as cur:
        cur.execute("SELECT status FROM ordergate.orders WHERE order_no = %s", (order_no,))
        row = cur.fetchone()
    conn.rollback()
    return row[0] if row else None


# ---- The stories ------------------------------------------------------------------------------
class Race:
    def __init__(self, orders, rnd, life):
        self.orders = orders
        self.rnd = rnd
        self.life = life
        self.queue = []           # (due wall time, seq, fn, args)
        self.qlock = threading.Condition()
        self.seq = 0
        self.placing_done = False
        self.busy = 0             # steps popped and still running (a 'late' one may re-queue)
        self.errors = []
        self.txn = 0

    def at(self, due, fn, *args):
        with self.qlock:
            self.seq += 1
            heapq.heappush(self.queue, (due, self.seq, fn, args))
            self.qlock.notify()

    def new_txn(self):
        with self.qlock:
            self.txn += 1
            return "TX-%06d" % self.txn

    # Each story step runs on a worker's connection at its time.
    def _pay_inner(self, cur, order_no, txn, delta_minor, charge_ref):
        minor, currency = order_minor(cur, order_no)
        _commit, (outcome, first) = pay_tx(cur, order_no, txn, minor + delta_minor, currency, charge_ref)
        return outcome, first, minor + delta_minor, currency

    def _pay(self, conn, order_no, txn, delta_minor, charge_ref, action):
        outcome, first, minor, currency = in_tx(
            conn, lambda cur: (True, self._pay_inner(cur, order_no, txn, delta_minor, charge_ref)))
        answer(action, order_no, txn, minor, currency, outcome, first)
        return outcome, first

    def pay_part(self, conn, order_no, txn, minor):
        def tx(cur):
            currency = order_minor(cur, order_no)[1]
            _c, (outcome, first) = pay_tx(cur, order_no, txn, minor, currency)
            return True, (outcome, first, currency)
        outcome, first, currency = in_tx(conn, tx)
        answer("pay", order_no, txn, minor, currency, outcome, first)

    def pay_twice(self, conn, order_no, txn):
        outcome, _ = self._pay(conn, order_no, txn, 0, None, "pay")
        if outcome == "paid":
            self._pay(conn, order_no, txn + "-2", 0, None, "pay")

    def late(self, conn, order_no, txn, give_up):
        status = gate_status(conn, order_no)
        if status == "pending_payment" and time.time() < give_up:
            self.at(time.time() + 0.2, Race.late, self, order_no, txn, give_up)
            return
        if status != "cancelled":
            answer("skip", order_no, txn, None, None, "not_cancelled:%s" % status)
            return
        self._pay(conn, order_no, txn, 0, None, "pay")

    def close(self, conn, order_no):
        answer("close", order_no, None, None, None,
               in_tx(conn, close_tx, order_no, STAFF, "the customer asked to cancel"))

    def begin(self, conn, order_no, ref):
        def tx(cur):
            minor, currency = order_minor(cur, order_no)
            return begin_tx(cur, order_no, ref, minor, currency)
        answer("begin", order_no, ref, None, None, in_tx(conn, tx))

    def capture(self, conn, order_no, ref):
        self._pay(conn, order_no, ref, 0, ref, "capture")

    def fail(self, conn, order_no, ref):
        answer("fail", order_no, ref, None, None, in_tx(conn, fail_tx, order_no, ref))

    def release(self, conn, order_no):
        answer("release", order_no, None, None, None,
               in_tx(conn, release_tx, order_no, STAFF, "cash on delivery"))

    def edit(self, conn, order_no):
        answer("amend", order_no, None, None, None, in_tx(conn, edit_tx, order_no))

    def set_deadline(self, conn, order_no, expire):
        answer("deadline", order_no, None, None, None,
               in_tx(conn, deadline_tx, order_no, expire, STAFF))

    def unknown(self, conn, order_no, txn):
        def tx(cur):
            return pay_tx(cur, order_no, txn, 500, "USD")
        outcome, first = in_tx(conn, tx)
        answer("pay", order_no, txn, 500, "USD", outcome, first)

    def schedule(self, o, expire):
        """The order's story, by its deadline (a wall-clock time in seconds)."""
        r = random.Random(o["seed"])
        n, s = o["id"], o["story"]
        if s == "pay":
            self.at(expire + r.choice([r.uniform(-1.2, -0.6), r.uniform(-0.3, 1.5)]),
                    Race._pay, self, n, self.new_txn(), 0, None, "pay")
        elif s == "dup":
            t, d = self.new_txn(), expire + r.uniform(-1.0, 1.0)
            self.at(d, Race._pay, self, n, t, 0, None, "pay")
            self.at(d, Race._pay, self, n, t, 0, None, "pay")
        elif s == "pay_twice":
            self.at(expire + r.uniform(-1.2, -0.7), Race.pay_twice, self, n, self.new_txn())
        elif s == "late":
            self.at(expire + 0.5, Race.late, self, n, self.new_txn(), expire + 20)
        elif s == "close":
            d = expire + r.uniform(-0.9, -0.3)
            self.at(d, Race.close, self, n)
            if r.random() < 0.7:          # as a payment arrives; else staff alone
                self.at(d, Race._pay, self, n, self.new_txn(), 0, None, "pay")
        elif s == "mismatch":
            self.at(expire - 1.3, Race._pay, self, n, self.new_txn(), 1, None, "pay")
            self.at(expire + r.uniform(-0.6, 1.0), Race._pay, self, n, self.new_txn(), 0, None, "pay")
        elif s == "parts":
            minor = o["minor"]
            k = 2 if minor < 3 or r.random() < 0.5 else 3
            cuts = sorted(r.sample(range(1, minor), k - 1)) if minor > k else []
            parts = [b - a for a, b in zip([0] + cuts, cuts + [minor])] if cuts else [minor]
            if r.random() < 0.25:
                parts[-1] += max(1, minor // 10)          # overpaid
            times = sorted(r.uniform(-1.3, -0.4) for _ in parts[:-1]) + [r.uniform(-0.4, 1.2)]
            for p, t in zip(parts, times):
                self.at(expire + t, Race.pay_part, self, n, self.new_txn(), p)
        elif s in ("charge_ok", "charge_fail"):
            ref = "CH-" + n[:8] + "-" + self.new_txn()
            self.at(expire - 0.7, Race.begin, self, n, ref)
            if s == "charge_ok":
                self.at(expire + r.uniform(0.3, 1.2), Race.capture, self, n, ref)
            else:
                self.at(expire + r.uniform(0.2, 0.8), Race.fail, self, n, ref)
        elif s == "release":
            self.at(expire + r.uniform(-0.4, 0.4), Race.release, self, n)
            if r.random() < 0.6:
                self.at(expire + 1.5, Race._pay, self, n, self.new_txn(), 0, None, "pay")
        elif s == "edit":
            self.at(expire - 1.2, Race.edit, self, n)
            self.at(expire - 0.3, Race._pay, self, n, self.new_txn(), 0, None, "pay")
        elif s == "deadline":
            later = datetime.datetime.fromtimestamp(expire + 3.0, datetime.timezone.utc)
            self.at(expire - 0.8, Race.set_deadline, self, n, later)
            self.at(expire + 1.0, Race._pay, self, n, self.new_txn(), 0, None, "pay")
        elif s == "deadline_past":
            self.at(expire - 1.2, Race.set_deadline, self, n, now_utc() - datetime.timedelta(seconds=1))

    def placer(self, mine, start):
        conn = connect()
        for o in mine:
            pause = start + o["at"] - time.time()
            if pause > 0:
                time.sleep(pause)
            outcome, minor = in_tx(conn, place_tx, o)
            answer("place", o["id"], None, minor, o["currency"], outcome)
            if outcome == "placed":
                o["minor"] = minor
                self.schedule(o, time.time() + o["window"])
        conn.close()

    def worker(self):
        conn = connect()
        try:
            while True:
                with self.qlock:
                    while not self.queue and not self.placing_done:
                        self.qlock.wait(0.1)
                    if not self.queue:
                        if self.placing_done:
                            break
                        continue
                    due, _seq, fn, args = self.queue[0]
                    if due > time.time():
                        self.qlock.wait(min(0.05, due - time.time()))
                        continue
                    heapq.heappop(self.queue)
                    self.busy += 1
                try:
                    fn(*args[:1], conn, *args[1:])
                finally:
                    with self.qlock:
                        self.busy -= 1
        except Exception as e:          # reported, and the race fails
            self.errors.append(e)
            log("worker failed: %r" % (e,))
        finally:
            conn.close()

    def run(self, workers):
        start = time.time() + 0.2
        placers = [threading.Thread(target=self.placer, args=(self.orders[k::2], start)) for k in range(2)]
        pool = [threading.Thread(target=self.worker) for _ in range(workers)]
        for t in placers + pool:
            t.start()
        for t in placers:
            t.join()
        for k in range(2):
            self.at(time.time(), Race.unknown, self, str(uuid.UUID(int=self.rnd.getrandbits(128), version=4)),
                    self.new_txn())
        # Workers stop once nothing is queued and no step runs that could queue another.
        while not self.errors:
            time.sleep(0.2)
            with self.qlock:
                if not self.queue and self.busy == 0:
                    break
        with self.qlock:
            self.placing_done = True
            self.queue.clear()
        for t in pool:
            t.join()
        if self.errors:
            raise self.errors[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--orders", type=int, default=180)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--settle", type=float, default=40.0, help="seconds to wait for no pending order")
    a = ap.parse_args()
    if a.orders < 60:
        ap.error("--orders must be at least 60 (every story needs a few orders)")
    rnd = random.Random(a.seed)
    conn = connect()
    with conn.cursor() as cur:
        cur.execute("SELECT to_regprocedure('ordergate.release_order(text,text,text)') IS NOT NULL"
                    "   AND to_regprocedure('ordergate.amend_order(text,bigint,jsonb,jsonb,text)') IS NOT NULL"
                    "   AND to_regprocedure('ordergate.set_deadline(text,timestamptz,text)') IS NOT NULL")
        life = cur.fetchone()[0]
    conn.rollback()
    orders = plan(rnd, a.orders, life)
    setup(conn, orders)
    log("%d orders, stories: %s; staff acts %s" % (
        len(orders), ", ".join("%s %d" % (s, sum(o["story"] == s for o in orders))
                               for s in sorted({o["story"] for o in orders})),
        "included" if life else "left out (the gate has no release_order/amend_order/set_deadline)"))
    race = Race(orders, rnd, life)
    race.run(a.workers)
    # Settled: no order pending any more (released ones count as settled).
    bound = time.time() + a.settle
    while True:
        with conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM ordergate.orders WHERE status = 'pending_payment'")
            pending = cur.fetchone()[0]
        conn.rollback()
        if pending == 0:
            break
        if time.time() > bound:
            raise SystemExit("race: %d orders still pending after %.0f s" % (pending, a.settle))
        time.sleep(0.2)
    with conn.cursor() as cur:
        psycopg2.extras.execute_values(
            cur, "INSERT INTO saleor_race.answer (action, order_no, txn_no, minor, currency,"
                 " outcome, first_outcome) VALUES %s", answers)
        cur.execute("INSERT INTO saleor_race.run (life) VALUES (%s)", (life,))
    conn.commit()
    conn.close()
    log("%d answers, %d transactions retried" % (len(answers), stats["retries"]))


if __name__ == "__main__":
    main()
