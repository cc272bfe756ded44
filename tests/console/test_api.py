"""console_api: the console's JSON API against real PostgreSQL, as each role. A viewer reads and is
refused every write (403, nothing changed); a support operator resolves, decides a refund and
closes an order, each attributed to their login in the gate's own records and the audit trail;
an admin reads and changes settings. Bad input gets a 4xx and changes nothing; a write without
the CSRF token is refused; a wrong password is refused and then rate-limited; exception pages
follow each other without a gap or a repeat. The overview shows a real scanner sweep (its run, its
cancel, the minutes it counted) and a failed reconciliation; the timeline an order's amendments
and reminders.

    test_api.py PATH/TO/ordergate-console PATH/TO/ordergate-scanner"""
import subprocess
import sys

from console_env import Checks, Env


def state(env):
    """Everything a refused request could have changed, in one value."""
    return env.sql("""
        SELECT (SELECT string_agg(order_no || status, ',' ORDER BY order_no) FROM ordergate.orders),
               (SELECT string_agg(id || state || resolution || coalesce(note, ''), ',' ORDER BY id)
                  FROM ordergate.exceptions),
               (SELECT count(*) FROM ordergate.outbox),
               (SELECT count(*) FROM ordergate.console_audit),
               (SELECT string_agg(key || value, ',' ORDER BY key) FROM ordergate.settings),
               (SELECT string_agg(sku || available, ',') FROM ordergate.inventory)""")


def main():
    scanner_bin = sys.argv[2]
    env = Env(sys.argv[1], "api", "login_failures = 3;")
    t = Checks()
    try:
        env.populate()
        env.start()
        exc_late = env.one("SELECT id FROM ordergate.exceptions WHERE kind = 'late_payment'")
        exc_unknown = env.one("SELECT id FROM ordergate.exceptions WHERE kind = 'unknown_order'")
        viewer, support, admin = env.client(), env.client(), env.client()
        v_login, s_login, a_login = (env.users[k][0] for k in ("viewer", "support", "admin"))

        # Logins: each person as themselves; what they may do is what the database says.
        st, doc = viewer.login(v_login, env.users["viewer"][1])
        t.eq("viewer logs in", st, 200)
        t.eq("viewer may read, not resolve, close or see settings",
             (doc["may"]["read"], doc["may"]["resolve"], doc["may"]["close"], doc["may"]["settings"]),
             (True, False, False, False))
        t.true("session cookie set", viewer.cookie and len(viewer.cookie) == 64)
        st, doc = support.login(s_login, env.users["support"][1])
        t.eq("support logs in, may resolve and close", (st, doc["may"]["resolve"], doc["may"]["close"],
                                                        doc["may"]["settings"]), (200, True, True, False))
        st, doc = admin.login(a_login, env.users["admin"][1])
        t.eq("admin logs in, may change settings", (st, doc["may"]["settings"], doc["may"]["set_setting"]),
             (200, True, True))

        t.eq("each session's connection names its person",
             env.one("SELECT count(*) FROM pg_stat_activity WHERE usename = %s AND application_name = %s",
                     (s_login, "ordergate-console/" + s_login)), 1)

        # Reads, as the viewer.
        st, o = viewer.call("GET", "/api/overview")
        t.eq("overview", st, 200)
        t.eq("overview: pending orders", o["pending"]["total"], 2)
        t.eq("overview: P2 due within 5 minutes", (o["due"]["in_1m"], o["due"]["in_5m"]), (0, 1))
        t.eq("overview: a manual cancel in the last hour",
             [(c["source"], c["n"]) for c in o["cancels"]], [("manual", 1)])
        t.eq("overview: refunds requested, unconfirmed, reviews overdue",
             o["refunds"], {"requested": 0, "unconfirmed": 0, "overdue_reviews": 0})
        t.eq("overview: open exceptions by kind",
             sorted((e["kind"], e["n"]) for e in o["exceptions"]),
             [("late_payment", 1), ("unknown_order", 1)])
        r = o["reconcile"]
        t.eq("overview: the last reconciliation, what it found violated",
             (r["result"], r["violated"], r["since"], r["started_at"] < r["finished_at"]),
             ("violated", [{"name": "5", "n": 2}, {"name": "shop:stock", "n": -1}], None, True))
        t.true("overview: the reconciliation's age", 0 <= r["age_s"] < 60, r["age_s"])
        st, page = viewer.call("GET", "/api/exceptions?kind=late_payment")
        t.eq("exceptions filtered by kind", (st, [x["id"] for x in page["items"]]), (200, [exc_late]))
        st, page = viewer.call("GET", "/api/exceptions?channel=wallet")
        t.eq("exceptions filtered by channel", [x["id"] for x in page["items"]], [exc_unknown])
        st, page = viewer.call("GET", "/api/exceptions?min_amount=800")
        t.eq("exceptions filtered by amount", [x["id"] for x in page["items"]], [exc_late])
        st, page = viewer.call("GET", "/api/exceptions?min_age_s=3600")
        t.eq("exceptions filtered by age", page["items"], [])
        st, x = viewer.call("GET", "/api/exceptions/%d" % exc_late)
        t.eq("one exception: its payment and order", (st, x["payment"]["txn_no"], x["order"]["status"],
                                                      x["refundable"]), (200, "T-C1", "cancelled", True))
        st, _ = viewer.call("GET", "/api/exceptions/999999")
        t.eq("unknown exception: 404", st, 404)
        st, r = viewer.call("GET", "/api/orders?field=shop&q=email=p1@example.com")
        t.eq("order search by shop field", [o["order_no"] for o in r["items"]], ["P1"])
        st, r = viewer.call("GET", "/api/orders?field=txn_no&q=T-C1")
        t.eq("order search by txn_no", [o["order_no"] for o in r["items"]], ["C1"])
        st, r = viewer.call("GET", "/api/orders?q=P")
        t.eq("order search by number prefix", [o["order_no"] for o in r["items"]], ["P1", "P2"])
        st, o = viewer.call("GET", "/api/orders/C1")
        t.eq("timeline: closed by hand, late payment, exception, event",
             (o["history"][0]["source"], o["payments"][0]["outcome"], o["exceptions"][0]["kind"],
              "order_cancelled" in [e["event_type"] for e in o["events"]]),
             ("manual", "late_payment", "late_payment", True))
        st, o = viewer.call("GET", "/api/orders/P1")
        t.eq("timeline: the deadline moved, by whom", [d["operator"] for d in o["deadline_changes"]], ["ops"])
        t.eq("pending order: what closing gives back",
             o["close_effects"], {"stock_back": [{"sku": "SKU-A", "qty": 2}], "coupon_back": "CPN-1"})
        st, _ = viewer.call("GET", "/api/orders/NOPE-NOTHING")
        t.eq("unknown order: 404", st, 404)

        # The viewer's writes: refused by the database, nothing changed.
        before = state(env)
        st, doc = viewer.call("POST", "/api/exceptions/resolve", {"ids": [exc_unknown], "note": "x"})
        t.eq("viewer: resolve refused", st, 403)
        st, _ = viewer.call("POST", "/api/orders/P1/close", {"reason": "x", "confirm": True})
        t.eq("viewer: close refused", st, 403)
        st, _ = viewer.call("POST", "/api/exceptions/%d/refund" % exc_late,
                            {"decision": "approve", "note": "x"})
        t.eq("viewer: refund refused", st, 403)
        st, _ = viewer.call("GET", "/api/settings")
        t.eq("viewer: settings refused", st, 403)
        st, _ = support.call("GET", "/api/settings")
        t.eq("support: settings refused", st, 403)
        st, _ = support.call("POST", "/api/settings", {"key": "max_hold_seconds", "value": "60"})
        t.eq("support: changing a setting refused", st, 403)

        # Bad input: a clear 4xx, nothing changed.
        for name, method, path, body, want in [
            ("ids not numbers", "POST", "/api/exceptions/resolve", {"ids": ["x"], "note": "n"}, 400),
            ("no note", "POST", "/api/exceptions/resolve", {"ids": [exc_unknown]}, 400),
            ("501 ids", "POST", "/api/exceptions/resolve", {"ids": list(range(1, 502)), "note": "n"}, 400),
            ("blank reason", "POST", "/api/orders/P1/close", {"reason": "  ", "confirm": True}, 400),
            ("no confirmation", "POST", "/api/orders/P1/close", {"reason": "r"}, 400),
            ("bad order number", "POST", "/api/orders/P%20/close", {"reason": "r", "confirm": True}, 400),
            ("bad decision", "POST", "/api/exceptions/%d/refund" % exc_late,
             {"decision": "maybe", "note": "n"}, 400),
            ("state unknown", "GET", "/api/exceptions?state=bogus", None, 400),
            ("kind unknown", "GET", "/api/exceptions?kind=bogus", None, 400),
            ("before_at not a time", "GET", "/api/exceptions?before_at=half-past-nine&before_id=3", None, 400),
            ("before_at without before_id", "GET",
             "/api/exceptions?before_at=2026-01-01T00:00:00Z", None, 400),
            ("search field unknown", "GET", "/api/orders?field=bogus&q=x", None, 400),
            ("shop search without =", "GET", "/api/orders?field=shop&q=email", None, 400),
            ("unknown setting", "POST", "/api/settings", {"key": "bogus", "value": "1"}, 400),
        ]:
            who = admin if "setting" in name else support
            st, doc = who.call(method, path, body)
            t.true("bad input, %s: %d" % (name, want), st == want and isinstance(doc, dict) and doc.get("error"),
                   "got %s %r" % (st, doc))
        st, _ = support.call("POST", "/api/exceptions/resolve", raw=b"ids=1", ctype="application/x-www-form-urlencoded")
        t.eq("a form body: 415", st, 415)
        st, _ = support.call("POST", "/api/exceptions/resolve", {"ids": [exc_unknown], "note": "x"}, csrf=False)
        t.eq("a write without the CSRF token: 403", st, 403)
        t.eq("refused and bad requests changed nothing", state(env), before)

        # Support: resolve, refund, close, each attributed to the login.
        st, r = support.call("POST", "/api/exceptions/resolve", {"ids": [exc_unknown], "note": "no such order, refunded by hand"})
        t.eq("support resolves", (st, r["items"]), (200, [{"id": exc_unknown, "outcome": "resolved"}]))
        t.eq("the exception's resolver is the login",
             env.sql("SELECT state, resolved_by FROM ordergate.exceptions WHERE id = %s", (exc_unknown,)),
             [("resolved", s_login)])
        st, r = support.call("POST", "/api/exceptions/resolve", {"ids": [exc_unknown], "note": "again"})
        t.eq("resolving twice: already_resolved", r["items"][0]["outcome"], "already_resolved")
        st, r = support.call("POST", "/api/exceptions/%d/refund" % exc_late, {"decision": "approve", "note": "customer asked"})
        t.eq("support approves the refund", (st, r), (200, {"outcome": "requested"}))
        t.eq("refund_requested event from the console, the login as actor",
             env.sql("SELECT payload->>'source', payload->>'actor', payload->>'txn_no' FROM ordergate.outbox "
                     "WHERE event_type = 'refund_requested' AND order_no = 'C1'"),
             [("console", s_login, "T-C1")])
        t.eq("the approved refund can now be recorded",
             env.one("SELECT result FROM ordergate.record_refund('T-C1', 'RF-1', 'succeeded')"), "refunded")
        st, r = support.call("POST", "/api/exceptions/%d/refund" % exc_late, {"decision": "decline", "note": "x"})
        t.eq("a decided refund is not decided again", r, {"outcome": "not_open"})
        st, r = support.call("POST", "/api/orders/P1/close", {"reason": "customer cancelled by phone", "confirm": True})
        t.eq("support closes P1", (st, r), (200, {"outcome": "cancelled", "status": "cancelled"}))
        t.eq("status log: manual, the login as actor, the reason as note",
             env.sql("SELECT source, actor, note FROM ordergate.status_log WHERE order_no = 'P1'"),
             [("manual", s_login, "customer cancelled by phone")])
        t.eq("stock and coupon back",
             (env.one("SELECT available FROM ordergate.inventory WHERE sku = 'SKU-A'"),
              env.one("SELECT state FROM ordergate.coupons WHERE coupon_id = 'CPN-1'")), (10, "available"))
        st, r = support.call("POST", "/api/orders/P1/close", {"reason": "again", "confirm": True})
        t.eq("closing twice: already_cancelled", r["outcome"], "already_cancelled")
        t.eq("audit trail: every write with its actor",
             env.sql("SELECT actor, action, outcome FROM ordergate.console_audit ORDER BY id"),
             [(s_login, "resolve", "resolved"), (s_login, "resolve", "already_resolved"),
              (s_login, "refund_approve", "requested"), (s_login, "refund_decline", "not_open"),
              (s_login, "close", "cancelled"), (s_login, "close", "already_cancelled")])

        # The audit trail: the admin's to read, newest first, in pages.
        st, _ = support.call("GET", "/api/audit")
        t.eq("support: audit trail refused", st, 403)
        st, a = admin.call("GET", "/api/audit?limit=4")
        t.eq("admin reads the audit trail, newest first",
             (st, [(r["actor"], r["action"], r["target"]) for r in a["items"]]),
             (200, [(s_login, "close", "P1"), (s_login, "close", "P1"),
                    (s_login, "refund_decline", str(exc_late)), (s_login, "refund_approve", str(exc_late))]))
        st, a2 = admin.call("GET", "/api/audit?limit=4&before_id=%d" % a["items"][-1]["id"])
        t.eq("audit trail, next page", [r["action"] for r in a2["items"]], ["resolve", "resolve"])

        # Admin: settings read and changed, audited.
        st, s = admin.call("GET", "/api/settings")
        t.eq("admin reads settings", (st, {r["key"]: r["value"] for r in s["settings"]}.get("auto_refund_limit_cents")),
             (200, "500"))
        # A console admin without ordergate_admin: the settings page read-only, a change refused.
        cadmin = env.client()
        st, doc = cadmin.login(env.users["cadmin"][0], env.users["cadmin"][1])
        t.eq("console admin: may read settings, not change them",
             (st, doc["may"]["settings"], doc["may"]["set_setting"]), (200, True, False))
        st, s2 = cadmin.call("GET", "/api/settings")
        t.eq("console admin reads the same settings", (st, s2), (200, s))
        before = state(env)
        st, _ = cadmin.call("POST", "/api/settings", {"key": "auto_refund_limit_cents", "value": "900"})
        t.eq("console admin: changing a setting refused, nothing changed", (st, state(env)), (403, before))
        st, r = admin.call("POST", "/api/settings", {"key": "auto_refund_limit_cents", "value": "700"})
        t.eq("admin changes a setting", (st, r), (200, {"previous": "500"}))
        t.eq("setting changed and audited",
             (env.one("SELECT value FROM ordergate.settings WHERE key = 'auto_refund_limit_cents'"),
              env.sql("SELECT actor, target FROM ordergate.console_audit WHERE action = 'set_setting'")),
             ("700", [(a_login, "auto_refund_limit_cents")]))

        # Keyset pages: 120 more exceptions, read 50 at a time, newest first, none twice or missed.
        env.sql("SELECT ordergate.claim_payment('GONE-' || i, 'T-G' || i, 100 + i, 'card') "
                "FROM generate_series(1, 120) i")
        seen, path = [], "/api/exceptions?state=all&limit=50"
        for _ in range(10):
            st, page = viewer.call("GET", path)
            seen += [(x["created_at"], x["id"]) for x in page["items"]]
            if len(page["items"]) < 50:
                break
            last = page["items"][-1]
            path = "/api/exceptions?state=all&limit=50&before_at=%s&before_id=%d" % (
                last["created_at"].replace("+", "%2B"), last["id"])
        t.eq("pages: every exception once", sorted(i for _, i in seen),
             sorted(r[0] for r in env.sql("SELECT id FROM ordergate.exceptions")))
        t.eq("pages: newest first", seen, sorted(seen, reverse=True))

        # The overview after a sweep of the real scanner: its run, its cancel, and the minutes it
        # counted for the overview (the ones not counted yet read from the orders).
        st, o = viewer.call("GET", "/api/overview")
        t.eq("overview: no sweep yet", (st, o["scanner"]), (200, None))
        env.sql("SELECT ordergate.place_order('S1', 500, '[]', NULL, now() - interval '5 seconds')")
        sweep = subprocess.run([scanner_bin, "--db", "dbname=" + env.db, "--grace", "0"],
                               capture_output=True, text=True, timeout=60)
        t.true("a scanner sweep ran (exit 0)", sweep.returncode == 0, sweep.stdout + sweep.stderr)
        st, o = viewer.call("GET", "/api/overview")
        sc = o["scanner"]
        t.eq("overview: the sweep, done, one cancel",
             (st, sc["status"], sc["cancelled"], sc["finished_at"] >= sc["started_at"]), (200, "done", 1, True))
        t.true("overview: the sweep's age", 0 <= sc["age_s"] < 60, sc["age_s"])
        t.eq("overview: the sweep's cancel among the hour's, with the two closes by hand",
             {src: sum(c["n"] for c in o["cancels"] if c["source"] == src) for src in ("consumer", "scanner", "manual")},
             {"consumer": 0, "scanner": 1, "manual": 2})
        t.eq("the sweep counted the hour's oldest 15 minutes for the overview",
             env.one("SELECT count(*) FROM ordergate.console_cancel_minutes"), 15)
        t.true("overview: only the minutes after the sweep's counts read from the orders",
               env.one("SELECT max(minute) + interval '1 minute' = %s::timestamptz "
                       "FROM ordergate.console_cancel_minutes", (o["cancels_live_from"],)), o["cancels_live_from"])

        # A reconciliation that could not run: failed, with its reason, not clean.
        env.sql("SELECT ordergate.reconcile_run_record(now() - interval '40 seconds', NULL, 'failed', '{}', 0, "
                "'canceling statement due to statement timeout')")
        st, o = viewer.call("GET", "/api/overview")
        r = o["reconcile"]
        t.eq("overview: the last reconciliation failed, and why",
             (st, r["result"], r["violated"], r["detail"]),
             (200, "failed", [], "canceling statement due to statement timeout"))

        # An order's amendments and payment reminders on its timeline.
        env.amended_reminded_order("R1")
        st, o = viewer.call("GET", "/api/orders/R1")
        t.eq("timeline: the amendment, by whom, before and after",
             (st, [(m["operator"], m["before"]["amount_cents"], m["after"]["amount_cents"]) for m in o["amendments"]]),
             (200, [("ops2", 1000, 1200)]))
        t.eq("timeline: the reminder sent", [(m["offset_seconds"], m["state"], m["sent_at"] is not None)
                                             for m in o["reminders"]], [(1800, "sent", True)])

        # Logout ends the session.
        st, _ = viewer.call("POST", "/api/logout", {})
        t.eq("logout", st, 200)
        st, _ = viewer.call("GET", "/api/overview")
        t.eq("after logout: 401", st, 401)

        # Wrong passwords: refused, then rate-limited (3 a minute here) before the database is asked.
        intruder = env.client()
        codes = [intruder.login(v_login, "wrong-password")[0] for _ in range(4)]
        t.eq("wrong password refused, then limited", codes, [401, 401, 401, 429])
        st, _ = intruder.login(v_login, env.users["viewer"][1])
        t.eq("even the right password waits out the minute", st, 429)
        # Behind a proxy on loopback, the address counted is the one the proxy added last.
        proxied = env.client()
        st, _ = proxied.call("POST", "/api/login", {"login": v_login, "password": env.users["viewer"][1]},
                             headers={"X-Forwarded-For": "203.0.113.9, 198.51.100.7"})
        t.eq("another address behind the proxy is not held back", st, 200)
        st, text = env.client().call("GET", "/metrics")
        t.true("its own metrics: logins by result, actions, sessions",
               st == 200 and 'ordergate_console_logins_total{result="ok"} 5' in text
               and 'ordergate_console_logins_total{result="limited"} 2' in text
               and "ordergate_console_actions_total" in text and "ordergate_console_sessions" in text,
               text if isinstance(text, str) else repr(text))
        st, text = env.client().call("GET", "/healthz")
        t.eq("healthz", (st, text), (200, "ok\n"))
        log = open(env.log).read()
        t.true("no password in the log", all(pw not in log for _, pw in env.users.values()))
        t.true("actions logged with the login", "event=console_action login=%s action=close" % s_login in log)
    finally:
        t.eq("the console stops cleanly on SIGTERM (exit 0)", env.close(), 0)
    return t.done(env)


if __name__ == "__main__":
    sys.exit(main())
