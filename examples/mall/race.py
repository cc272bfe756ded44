#!/usr/bin/env python3
"""The race plan of examples/mall/run.sh: the shop's catalogue, the orders each service places and
the callbacks each service receives, as tab-separated files for service.py and Service.java.

    race.py --orders N --rounds R --seed S --out DIR

Writes into DIR (all deterministic for a seed), for rounds r = 1..R (run.sh places round r+1
while round r is being paid and cancelled):
  skus.tsv      id, sku_code, price, stock        a few hot SKUs (short of stock) and cold ones
  coupons.tsv   coupon_id, member_id              one received, unused coupon per member that uses one
  ordersR.tsv   service, order_sn, member_id, coupon_id (0 = none), deadline_ms, items, at_ms
                (items = sku:qty,sku:qty; deadline_ms = payment window after placing; at_ms =
                when to place it, after the service started; in at_ms order)
  callsR.tsv    service, kind, order_sn, delta_ms, txn_no, amount_delta_cents, channel
                kind: pay           pay at the order's expire_at + delta_ms (races the scanner)
                      pay_twice     pay at expire_at + delta_ms; if that paid, pay again with
                                    txn_no + "-2" (a double payment)
                      after_cancel  wait until ordergate cancelled the order, then pay (late)
                      close         manual close at expire_at + delta_ms (operations)
                      mismatch      pay at once with the amount off by amount_delta_cents
                      unknown       pay at once for an order that does not exist
                A txn_no listed twice (once per service, same time) is a duplicate delivery.

service is "py" or "java": which implementation places or handles the line. The plan never says
what the outcome will be: the services report what the gate answered and check.sql compares
those answers with the database.
"""
import argparse
import os
import random

HOT_SKUS = [1, 2, 3, 4]
COLD_SKUS = [5, 6]
COUPON_ID = 1  # sms_coupon 1 (run.sh's catalogue): 5.00 off, no threshold


def gen_round(rnd, rnd_no, n, member):
    """Orders and callbacks of one round; returns (orders, calls, demand, coupon_members, member)."""
    orders = []   # [service, order_sn, member, coupon, deadline_ms, [(sku, qty)]]
    demand = {s: 0 for s in HOT_SKUS + COLD_SKUS}
    coupon_members = []

    def sn(service, seq):
        return "20261130%d%d%08d" % (rnd_no, 1 if service == "py" else 2, seq)

    for i in range(n):
        service = "py" if i % 2 == 0 else "java"
        lines = {}
        for _ in range(rnd.randint(1, 3)):
            sku = rnd.choice(HOT_SKUS) if rnd.random() < 0.8 else rnd.choice(COLD_SKUS)
            lines[sku] = lines.get(sku, 0) + rnd.randint(1, 2)
        member += 1
        coupon = 0
        if rnd.random() < 0.35:
            coupon = COUPON_ID
            coupon_members.append(member)
        for s, q in lines.items():
            demand[s] += q
        # Round 1 arrives at once; later rounds over 4 s, while round 1's orders are paid,
        # cancelled and give their stock back.
        at = 0 if rnd_no == 1 else rnd.randint(0, 4000)
        orders.append([service, sn(service, i + 1), member, coupon, rnd.randint(1500, 3500),
                       sorted(lines.items()), at])

    # A member who uses a coupon twice: the first order (cold SKU only, always in stock) takes it,
    # the second, placed right after it by the same service, finds it used (coupon_unavailable).
    for k in range(3):
        member += 1
        coupon_members.append(member)
        service = "py" if k % 2 == 0 else "java"
        pair = []
        for j in range(2):
            sku = COLD_SKUS[k % 2]
            demand[sku] += 1
            pair.append([service, sn(service, n + 2 * k + j + 1), member, COUPON_ID, 3000, [(sku, 1)], 0])
        at = rnd.randint(0, len(orders))
        orders[at:at] = pair           # consecutive in the service's sequence
    # An order for more of a hot SKU than the shop ever stocks: out_of_stock whatever the timing
    # (on a slow machine, cancels may give stock back before the round runs out of it).
    service = "py" if rnd_no % 2 else "java"
    member += 1
    orders.append([service, sn(service, n + 7), member, 0, 3000, [(HOT_SKUS[0], 100000)], 0])
    # A service places its orders in file order, each not before its time.
    orders.sort(key=lambda o: o[6])

    calls = []   # (service, kind, order_sn, delta_ms, txn_no, amount_delta, channel)
    txn = [0]

    def new_txn():
        txn[0] += 1
        return "T%d%07d" % (rnd_no, txn[0])

    def other(s):
        return "java" if s == "py" else "py"

    for _service, o_sn, _m, _c, _dl, _items, _at in orders:
        # Whoever placed an order, its callbacks may arrive at either service.
        chan = rnd.choice(["alipay", "wechat"])
        r = rnd.random()
        who = rnd.choice(["py", "java"])
        if r < 0.25:
            pass                                            # never paid: the scanner cancels it
        elif r < 0.45:
            calls.append((who, "pay", o_sn, rnd.randint(-1200, -600), new_txn(), 0, chan))
        elif r < 0.65:
            calls.append((who, "pay", o_sn, rnd.randint(-300, 1500), new_txn(), 0, chan))
        elif r < 0.72:
            t = new_txn()                                   # the same callback delivered twice
            d = rnd.randint(-1000, 1000)
            calls.append((who, "pay", o_sn, d, t, 0, chan))
            calls.append((other(who), "pay", o_sn, d, t, 0, chan))
        elif r < 0.79:
            calls.append((who, "pay_twice", o_sn, rnd.randint(-1200, -700), new_txn(), 0, chan))
        elif r < 0.86:
            calls.append((who, "after_cancel", o_sn, 0, new_txn(), 0, chan))
        elif r < 0.91:
            d = rnd.randint(-900, -300)                     # operations close it as it is paid
            calls.append((who, "close", o_sn, d, "", 0, ""))
            calls.append((other(who), "pay", o_sn, d, new_txn(), 0, chan))
        elif r < 0.96:
            calls.append((who, "mismatch", o_sn, 0, new_txn(), 1, chan))
            calls.append((other(who), "pay", o_sn, rnd.randint(-300, 1500), new_txn(), 0, chan))
        else:
            calls.append((who, "after_cancel", o_sn, 0, new_txn(), 0, chan))
            calls.append((other(who), "after_cancel", o_sn, 0, new_txn(), 0, chan))
    for k in range(2):
        calls.append(("py" if k == 0 else "java", "unknown", "2026113099%d%08d" % (rnd_no, k), 0,
                      new_txn(), 0, "alipay"))
    return orders, calls, demand, coupon_members, member


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--orders", type=int, default=240, help="orders per round")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if a.orders < 40:
        ap.error("--orders must be at least 40 (every kind of call needs a few orders)")
    if not 1 <= a.rounds <= 9:
        ap.error("--rounds must be 1..9")
    rnd = random.Random(a.seed)
    os.makedirs(a.out, exist_ok=True)
    member = 1000
    demand = {s: 0 for s in HOT_SKUS + COLD_SKUS}
    coupon_members = []
    for r in range(1, a.rounds + 1):
        orders, calls, d, cm, member = gen_round(rnd, r, a.orders, member)
        for s, q in d.items():
            demand[s] += q
        coupon_members += cm
        with open(os.path.join(a.out, "orders%d.tsv" % r), "w") as f:
            for service, o_sn, m, c, dl, items, at in orders:
                f.write("%s\t%s\t%d\t%d\t%d\t%s\t%d\n" % (service, o_sn, m, c, dl,
                                                         ",".join("%d:%d" % it for it in items), at))
        with open(os.path.join(a.out, "calls%d.tsv" % r), "w") as f:
            for c in calls:
                f.write("%s\t%s\t%s\t%d\t%s\t%d\t%s\n" % c)

    # Hot SKUs: stock for about 1 / 1.3 of the demand of all rounds, so the first round's
    # placements already run out and later rounds live on what cancels give back.
    with open(os.path.join(a.out, "skus.tsv"), "w") as f:
        prices = {1: "19.90", 2: "29.90", 3: "9.90", 4: "49.00", 5: "15.00", 6: "99.00"}
        for s in HOT_SKUS + COLD_SKUS:
            stock = int(demand[s] / 1.3 / a.rounds) if s in HOT_SKUS else demand[s] + 1000
            f.write("%d\tSKU-%d\t%s\t%d\n" % (s, s, prices[s], stock))
    with open(os.path.join(a.out, "coupons.tsv"), "w") as f:
        for m in coupon_members:
            f.write("%d\t%d\n" % (COUPON_ID, m))


if __name__ == "__main__":
    main()
