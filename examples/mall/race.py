#!/usr/bin/env python3
"""The race plan of examples/mall/run.sh: the shop's catalogue, the orders each service places and
the callbacks each service receives, as tab-separated files for service.py and Service.java.

    race.py --orders N --seed S --out DIR

Writes into DIR (all deterministic for a seed):
  skus.tsv      id, sku_code, price, stock        a few hot SKUs (demand ~1.3x stock) and cold ones
  coupons.tsv   coupon_id, member_id              one received, unused coupon per member that uses one
  orders.tsv    service, order_sn, member_id, coupon_id (0 = none), deadline_ms, items
                (items = sku:qty,sku:qty; deadline_ms = payment window after placing)
  calls.tsv     service, kind, order_sn, delta_ms, txn_no, amount_delta_cents, channel
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--orders", type=int, default=240)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if a.orders < 40:
        ap.error("--orders must be at least 40 (every kind of call needs a few orders)")
    rnd = random.Random(a.seed)
    os.makedirs(a.out, exist_ok=True)

    orders = []   # (service, order_sn, member, coupon, deadline_ms, [(sku, qty)])
    member = 1000
    demand = {s: 0 for s in HOT_SKUS + COLD_SKUS}
    coupon_members = []
    for i in range(a.orders):
        service = "py" if i % 2 == 0 else "java"
        sn = "20261130%02d%08d" % (1 if service == "py" else 2, i + 1)
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
        orders.append([service, sn, member, coupon, rnd.randint(1500, 3500), sorted(lines.items())])

    # A member who uses a coupon twice: the first order (cold SKU only, always in stock) takes it,
    # the second, placed right after it by the same service, finds it used (coupon_unavailable).
    extra = []
    for k in range(3):
        member += 1
        coupon_members.append(member)
        service = "py" if k % 2 == 0 else "java"
        base = a.orders + 2 * k
        for j in range(2):
            sn = "20261130%02d%08d" % (1 if service == "py" else 2, base + j + 1)
            sku = COLD_SKUS[k % 2]
            demand[sku] += 1
            extra.append([service, sn, member, COUPON_ID, 3000, [(sku, 1)]])
    # Consecutive in the service's sequence: insert the pair together at a random place.
    for pair in (extra[0:2], extra[2:4], extra[4:6]):
        at = rnd.randint(0, len(orders))
        orders[at:at] = pair

    with open(os.path.join(a.out, "skus.tsv"), "w") as f:
        prices = {1: "19.90", 2: "29.90", 3: "9.90", 4: "49.00", 5: "15.00", 6: "99.00"}
        for s in HOT_SKUS + COLD_SKUS:
            stock = int(demand[s] / 1.3) if s in HOT_SKUS else demand[s] + 1000
            f.write("%d\tSKU-%d\t%s\t%d\n" % (s, s, prices[s], stock))
    with open(os.path.join(a.out, "coupons.tsv"), "w") as f:
        for m in coupon_members:
            f.write("%d\t%d\n" % (COUPON_ID, m))
    with open(os.path.join(a.out, "orders.tsv"), "w") as f:
        for service, sn, m, c, dl, items in orders:
            f.write("%s\t%s\t%d\t%d\t%d\t%s\n" % (service, sn, m, c, dl,
                                                 ",".join("%d:%d" % it for it in items)))

    calls = []   # (service, kind, order_sn, delta_ms, txn_no, amount_delta, channel)
    txn = 0

    def new_txn():
        nonlocal txn
        txn += 1
        return "T%08d" % txn

    def other(s):
        return "java" if s == "py" else "py"

    for service, sn, _m, _c, _dl, _items in orders:
        # Whoever places an order, callbacks for it may arrive at either service.
        chan = rnd.choice(["alipay", "wechat"])
        r = rnd.random()
        who = rnd.choice(["py", "java"])
        if r < 0.25:
            pass                                            # never paid: the scanner cancels it
        elif r < 0.45:
            calls.append((who, "pay", sn, rnd.randint(-1200, -600), new_txn(), 0, chan))
        elif r < 0.65:
            calls.append((who, "pay", sn, rnd.randint(-300, 1500), new_txn(), 0, chan))
        elif r < 0.72:
            t = new_txn()                                   # the same callback delivered twice
            d = rnd.randint(-1000, 1000)
            calls.append((who, "pay", sn, d, t, 0, chan))
            calls.append((other(who), "pay", sn, d, t, 0, chan))
        elif r < 0.79:
            calls.append((who, "pay_twice", sn, rnd.randint(-1200, -700), new_txn(), 0, chan))
        elif r < 0.86:
            calls.append((who, "after_cancel", sn, 0, new_txn(), 0, chan))
        elif r < 0.91:
            d = rnd.randint(-900, -300)                     # operations close it while it is paid
            calls.append((who, "close", sn, d, "", 0, ""))
            calls.append((other(who), "pay", sn, d, new_txn(), 0, chan))
        elif r < 0.96:
            calls.append((who, "mismatch", sn, 0, new_txn(), 1, chan))
            calls.append((other(who), "pay", sn, rnd.randint(-300, 1500), new_txn(), 0, chan))
        else:
            calls.append((who, "after_cancel", sn, 0, new_txn(), 0, chan))
            calls.append((other(who), "after_cancel", sn, 0, new_txn(), 0, chan))
    for k in range(2):
        calls.append(("py" if k == 0 else "java", "unknown", "20261130990000000%d" % k, 0,
                      new_txn(), 0, "alipay"))
    with open(os.path.join(a.out, "calls.tsv"), "w") as f:
        for c in calls:
            f.write("%s\t%s\t%s\t%d\t%s\t%d\t%s\n" % c)


if __name__ == "__main__":
    main()
