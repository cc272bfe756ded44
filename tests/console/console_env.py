"""What the console's tests share: a database of their own (a copy of the db fixture's template),
four people with their own logins and passwords (a viewer, a support operator, an admin who may
change settings and a console admin who may only read them), a
small set of orders and exceptions, an ordergate-console of their own on a free loopback port,
and an HTTP client that keeps a session cookie and its CSRF token.

Needs PostgreSQL (PGHOST, PGPORT, PGUSER as deploy/local/services.sh exports them) whose
pg_hba.conf checks the console roles' members by password (services.sh writes that); fails,
never skips, when something is missing."""
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import psycopg2

TEMPLATE = os.environ.get("ORDERGATE_TEMPLATE_DB", "ordergate_tpl")


def fail(msg):
    print("FAIL " + msg, file=sys.stderr)
    sys.exit(1)


class Client:
    """One person's browser, without the browser: a cookie and the session's CSRF token."""

    def __init__(self, base):
        self.base = base
        self.cookie = None
        self.csrf = None

    def call(self, method, path, body=None, csrf=True, ctype="application/json", raw=None,
             headers=None):
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        req = urllib.request.Request(self.base + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", ctype)
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        if self.cookie:
            req.add_header("Cookie", "og_session=" + self.cookie)
        if csrf and self.csrf and method != "GET":
            req.add_header("X-CSRF-Token", self.csrf)
        try:
            with urllib.request.urlopen(req, timeout=20) as r:
                status, headers, text = r.status, r.headers, r.read().decode()
        except urllib.error.HTTPError as e:
            status, headers, text = e.code, e.headers, e.read().decode()
        m = re.match(r"og_session=([0-9a-f]*);", headers.get("Set-Cookie") or "")
        if m:
            self.cookie = m.group(1) or None
        try:
            doc = json.loads(text) if text else None
        except ValueError:
            doc = text
        return status, doc

    def login(self, login, password):
        status, doc = self.call("POST", "/api/login", {"login": login, "password": password})
        if status == 200:
            self.csrf = doc["csrf"]
        return status, doc


class Env:
    def __init__(self, console_bin, name, extra_conf=""):
        self.bin = console_bin
        tag = "%s_%d" % (name, os.getpid())
        self.db = "og_console_" + tag
        self.users = {k: ("og_c%s_%s" % (k, tag), secrets.token_hex(12))
                      for k in ("viewer", "support", "admin", "cadmin")}
        self.proc = None
        self.admin = psycopg2.connect(dbname="postgres")
        self.admin.autocommit = True
        with self.admin.cursor() as c:
            c.execute('DROP DATABASE IF EXISTS "%s"' % self.db)
            c.execute('CREATE DATABASE "%s" TEMPLATE "%s"' % (self.db, TEMPLATE))
            for kind, (login, pw) in self.users.items():
                c.execute('DROP ROLE IF EXISTS "%s"' % login)
                c.execute('CREATE ROLE "%s" LOGIN PASSWORD %%s' % login, (pw,))
            c.execute('GRANT ordergate_console_viewer TO "%s"' % self.users["viewer"][0])
            c.execute('GRANT ordergate_console_operator TO "%s"' % self.users["support"][0])
            c.execute('GRANT ordergate_console_admin, ordergate_admin TO "%s"'
                      % self.users["admin"][0])
            c.execute('GRANT ordergate_console_admin TO "%s"' % self.users["cadmin"][0])
        self.conn = psycopg2.connect(dbname=self.db)
        self.conn.autocommit = True
        self.work = tempfile.mkdtemp(prefix="og_console_")
        self.conf = os.path.join(self.work, "console.conf")
        with open(self.conf, "w") as f:
            f.write('database = { conninfo = "dbname=%s"; };\n' % self.db)
            f.write("console = { listen = \"127.0.0.1:0\"; %s };\n" % extra_conf)
        self.log = os.path.join(self.work, "console.log")

    def sql(self, q, args=None):
        with self.conn.cursor() as c:
            c.execute(q, args)
            return c.fetchall() if c.description else None

    def one(self, q, args=None):
        rows = self.sql(q, args)
        return rows[0][0] if rows else None

    def populate(self):
        """Orders and exceptions every test starts from:
        P1  pending, one stock line (SKU-A x2) and coupon CPN-1, shop {"email": "p1@example.com"},
            its deadline moved from 30 to 40 minutes by the operator "ops"
        P2  pending, gate-only
        C1  closed by hand, then paid 1000 late: a late_payment under manual review (refundable,
            the limit is 500)
        an unknown order's payment (txn T-U): an unknown_order exception
        a reconciliation recorded as the scanner records it: invariant 5 violated twice, the
            shop check stock failed"""
        self.sql("""
            SELECT ordergate.set_setting('auto_refund_limit_cents', '500');
            SELECT ordergate.add_stock('SKU-A', 10);
            SELECT ordergate.add_coupon('CPN-1');
            SELECT ordergate.place_order('P1', 2500, '[{"sku":"SKU-A","qty":2}]', 'CPN-1',
                                         now() + interval '30 minutes', '{"email":"p1@example.com"}');
            SELECT * FROM ordergate.set_deadline('P1', now() + interval '40 minutes', 'ops');
            SELECT ordergate.place_order('P2', 1000, '[]', NULL, now() + interval '2 minutes');
            SELECT ordergate.place_order('C1', 1000, '[]', NULL, now() + interval '1 hour');
            SELECT * FROM ordergate.close_order('C1', 'setup', 'test setup');
            SELECT * FROM ordergate.claim_payment('C1', 'T-C1', 1000, 'card');
            SELECT * FROM ordergate.claim_payment('NOPE', 'T-U', 700, 'wallet');
            SELECT ordergate.reconcile_run_record(now() - interval '3 minutes', NULL, 'violated',
                                                  '{"1": 0, "5": 2, "shop:stock": -1}', 0, NULL);
        """)

    def amended_reminded_order(self, order_no):
        """A pending gate-only order with a sent payment reminder (1800 s before its deadline,
        sent once the deadline moved to 1799 s ahead) and then an amendment by the operator "ops2"
        (amount 1000 -> 1200), as the consumer and an order service write them."""
        self.sql("""
            SELECT ordergate.set_setting('reminder_before_seconds', '1800');
            SELECT ordergate.place_order(%(o)s, 1000, '[]', NULL, now() + interval '1801 seconds');
            SELECT ordergate.set_setting('reminder_before_seconds', '');
            SELECT * FROM ordergate.set_deadline(%(o)s, now() + interval '1799 seconds', 'ops');
        """, {"o": order_no})
        sent = self.one("SELECT outcome FROM ordergate.claim_reminder(%s, 1800)", (order_no,))
        amended = self.one("SELECT outcome FROM ordergate.amend_order(%s, 1200, '[]', NULL, 'ops2')",
                           (order_no,))
        if (sent, amended) != ("sent", "amended"):
            fail("setting up %s: reminder %s, amendment %s" % (order_no, sent, amended))

    def start(self):
        logf = open(self.log, "w")
        self.proc = subprocess.Popen([self.bin, "--config", self.conf], stdout=logf,
                                     stderr=subprocess.STDOUT)
        deadline = time.time() + 10
        while time.time() < deadline:
            with open(self.log) as f:
                m = re.search(r"event=console_listening .* port=(\d+)", f.read())
            if m:
                self.base = "http://localhost:%s" % m.group(1)
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        fail("ordergate-console did not start:\n" + open(self.log).read())

    def client(self):
        return Client(self.base)

    def close(self):
        """Stops the console (SIGTERM) and drops what the test made. Returns the console's exit
        status: 0 after a clean stop (a sanitizer's finding, a leak among them, is not 0)."""
        rc = None
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                rc = self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                rc = "killed: no exit within 20 s of SIGTERM"
        elif self.proc is not None:
            rc = self.proc.returncode
        self.conn.close()
        with self.admin.cursor() as c:
            c.execute('DROP DATABASE IF EXISTS "%s" WITH (FORCE)' % self.db)
            for login, _ in self.users.values():
                c.execute('DROP ROLE IF EXISTS "%s"' % login)
        self.admin.close()
        return rc


class Checks:
    def __init__(self):
        self.failed = 0
        self.passed = 0

    def eq(self, name, got, want):
        if got == want:
            self.passed += 1
            print("ok   " + name)
        else:
            self.failed += 1
            print("FAIL %s: got %r, want %r" % (name, got, want))

    def true(self, name, cond, detail=""):
        self.eq(name + (" (%s)" % detail if detail and not cond else ""), bool(cond), True)

    def done(self, env=None):
        print("%d passed, %d failed" % (self.passed, self.failed))
        if env is not None:
            if self.failed:
                print(open(env.log).read())
            shutil.rmtree(env.work, ignore_errors=True)
        return 1 if self.failed else 0
