"""console_browser: the console's pages in Debian's Chromium (headless), driven by Selenium.
A support person logs in (after a wrong password is refused), reads the overview, finds an
exception by kind and resolves it with a note, approves a refund, finds an order and reads its
timeline, and closes a pending order with a reason after the confirmation: each lands in the
database with their login as actor. A viewer sees no action button, and the API refuses the
writes the viewer's own session tries (nothing changes). Wrong passwords are refused, then
rate-limited. After a sweep of the real scanner and a failed reconciliation the overview shows
both, and an order's timeline its amendment and reminder. Screenshots of each page go to DIR.

    test_browser.py PATH/TO/ordergate-console DIR PATH/TO/ordergate-scanner"""
import os
import subprocess
import sys

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

from console_env import Checks, Env

CHROMIUM = "/usr/bin/chromium"
DRIVER = "/usr/bin/chromedriver"


def browser():
    for path in (CHROMIUM, DRIVER):
        if not os.access(path, os.X_OK):
            print("FAIL %s missing (Debian: apt-get install chromium chromium-driver)" % path)
            sys.exit(1)
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
              "--window-size=1280,900", "--disable-extensions", "--no-first-run"):
        opts.add_argument(a)
    return webdriver.Chrome(service=Service(DRIVER), options=opts)


def main():
    bin_path, shots, scanner_bin = sys.argv[1], sys.argv[2], sys.argv[3]
    os.makedirs(shots, exist_ok=True)
    env = Env(bin_path, "web")
    t = Checks()
    drv = None
    try:
        env.populate()
        env.start()
        exc_late = env.one("SELECT id FROM ordergate.exceptions WHERE kind = 'late_payment'")
        exc_unknown = env.one("SELECT id FROM ordergate.exceptions WHERE kind = 'unknown_order'")
        s_login, s_pw = env.users["support"]
        v_login, v_pw = env.users["viewer"]
        a_login, a_pw = env.users["admin"]
        drv = browser()
        # A page re-renders whole after each call: an element found a moment ago may be gone.
        wait = WebDriverWait(drv, 10, ignored_exceptions=[StaleElementReferenceException])
        texts = lambda css: drv.execute_script(
            "return [...document.querySelectorAll(arguments[0])].map((e) => e.textContent)", css)
        find = lambda css: wait.until(EC.visibility_of_element_located((By.CSS_SELECTOR, css)))
        text_in = lambda css, text: wait.until(EC.text_to_be_present_in_element((By.CSS_SELECTOR, css), text))

        def login(user, pw):
            find("#login-user").clear()
            drv.find_element(By.ID, "login-user").send_keys(user)
            drv.find_element(By.ID, "login-password").clear()
            drv.find_element(By.ID, "login-password").send_keys(pw)
            drv.find_element(By.ID, "login-submit").click()

        def go(hash_):
            drv.get(env.base + "/" + hash_)

        drv.get(env.base + "/")
        login(s_login, "not-the-password")
        t.true("wrong password refused on the page", text_in("#login-error", "login refused"))
        login(s_login, s_pw)
        t.true("overview after login", text_in("#fig-pending", "2"))
        t.true("overview chart drawn", drv.find_element(By.ID, "cancel-chart").is_displayed())
        t.true("overview: the last reconciliation and what it found",
               text_in("#fig-reconcile", "violated") and
               "invariant 5 (2), shop:stock failed" in find("#fig-reconcile-detail").text,
               find("#fig-reconcile-detail").text)
        t.eq("overview: who is logged in", drv.find_element(By.ID, "who").text, s_login)
        drv.save_screenshot(os.path.join(shots, "overview.png"))

        # Find the unknown-order exception by kind, open it, resolve it with a note.
        find("#nav-exceptions").click()
        Select(find("#f-kind")).select_by_value("unknown_order")
        drv.find_element(By.ID, "f-apply").click()
        wait.until(lambda d: texts("a.exc-link") == [str(exc_unknown)])
        t.true("support sees the bulk resolve button", drv.find_element(By.ID, "resolve-selected").is_displayed())
        drv.save_screenshot(os.path.join(shots, "exceptions.png"))
        drv.find_element(By.CSS_SELECTOR, "a.exc-link").click()
        find("#resolve-note").send_keys("no such order; money returned by hand")
        drv.find_element(By.ID, "resolve-btn").click()
        t.true("resolved on the page", text_in("#exception-detail", "by " + s_login))
        t.eq("resolved in the database, by the support login",
             env.sql("SELECT state, resolved_by FROM ordergate.exceptions WHERE id = %s", (exc_unknown,)),
             [("resolved", s_login)])

        # Approve the refund left to a person.
        go("#/exception/%d" % exc_late)
        find("#resolve-note").send_keys("customer asked, approved")
        drv.save_screenshot(os.path.join(shots, "exception.png"))
        drv.find_element(By.ID, "refund-approve").click()
        t.true("refund approved on the page", text_in("#flash", "requested"))
        t.eq("refund requested in the outbox, the login as actor",
             env.sql("SELECT payload->>'actor' FROM ordergate.outbox WHERE event_type = 'refund_requested'"),
             [(s_login,)])

        # Find P1, read its timeline, close it with a reason after the confirmation.
        find("#nav-orders").click()
        find("#order-q").send_keys("P1")
        drv.find_element(By.ID, "order-search").click()
        wait.until(EC.element_to_be_clickable((By.CSS_SELECTOR, "a.order-link"))).click()
        t.true("timeline shows the order placed", text_in("#timeline", "placed"))
        t.true("timeline shows the deadline moved, and by whom", text_in("#timeline", "deadline moved by ops"))
        find("#close-reason").send_keys("customer cancelled by phone")
        drv.find_element(By.ID, "close-btn").click()
        effects = find("#close-effects").text
        t.true("confirmation says what comes back", "SKU-A×2" in effects and "CPN-1" in effects, effects)
        t.eq("not closed before the confirmation", env.one("SELECT status FROM ordergate.orders WHERE order_no = 'P1'"),
             "pending_payment")
        drv.save_screenshot(os.path.join(shots, "order-close.png"))
        drv.find_element(By.ID, "close-confirm-yes").click()
        t.true("order cancelled on the page", text_in("#order-status", "cancelled"))
        t.true("timeline: cancelled by manual, the operator as actor", text_in("#timeline", "actor " + s_login))
        t.eq("status log: the support login as actor, the reason as note",
             env.sql("SELECT source, actor, note FROM ordergate.status_log WHERE order_no = 'P1'"),
             [("manual", s_login, "customer cancelled by phone")])
        drv.save_screenshot(os.path.join(shots, "order.png"))
        find("#logout").click()
        find("#login-form")

        # A viewer: no action button anywhere, and the API refuses the viewer's own session.
        login(v_login, v_pw)
        text_in("#who", v_login)
        go("#/exceptions?state=all")
        find("a.exc-link")
        t.eq("viewer: no selection boxes, no bulk resolve",
             (len(drv.find_elements(By.CSS_SELECTOR, ".exc-select")), len(drv.find_elements(By.ID, "resolve-selected"))),
             (0, 0))
        go("#/exception/%d" % exc_late)
        find("#exception-detail")
        t.eq("viewer: no resolve or refund button",
             [len(drv.find_elements(By.ID, i)) for i in ("resolve-btn", "refund-approve", "refund-decline")], [0, 0, 0])
        go("#/order/P2")
        find("#timeline")
        t.eq("viewer: no close button on a pending order", len(drv.find_elements(By.ID, "close-btn")), 0)
        t.true("viewer: no Settings in the menu", not drv.find_element(By.ID, "nav-settings").is_displayed())
        probe = """const [path, body, withCsrf, done] = arguments;
            fetch(path, {method: 'POST', credentials: 'same-origin',
                         headers: Object.assign({'Content-Type': 'application/json'},
                                                withCsrf ? {'X-CSRF-Token': S.csrf} : {}),
                         body: JSON.stringify(body)}).then((r) => done(r.status));"""
        t.eq("viewer's session: close refused by the API",
             drv.execute_async_script(probe, "/api/orders/P2/close", {"reason": "x", "confirm": True}, True), 403)
        t.eq("viewer's session: resolve refused by the API",
             drv.execute_async_script(probe, "/api/exceptions/resolve", {"ids": [exc_late], "note": "x"}, True), 403)
        t.eq("a write without the CSRF token refused",
             drv.execute_async_script(probe, "/api/logout", {}, False), 403)
        t.eq("viewer changed nothing",
             (env.one("SELECT status FROM ordergate.orders WHERE order_no = 'P2'"),
              env.one("SELECT state FROM ordergate.exceptions WHERE id = %s", (exc_late,)),
              env.one("SELECT count(*) FROM ordergate.console_audit WHERE actor = %s", (v_login,))),
             ("pending_payment", "open", 0))

        # After a sweep of the real scanner and a reconciliation that could not run, the overview
        # shows both; an order's amendment and sent reminder show on its timeline.
        env.sql("SELECT ordergate.place_order('S1', 500, '[]', NULL, now() - interval '5 seconds')")
        sweep = subprocess.run([scanner_bin, "--db", "dbname=" + env.db, "--grace", "0"],
                               capture_output=True, text=True, timeout=60)
        t.true("a scanner sweep ran (exit 0)", sweep.returncode == 0, sweep.stdout + sweep.stderr)
        env.sql("SELECT ordergate.reconcile_run_record(now() - interval '40 seconds', NULL, 'failed', '{}', 0, "
                "'canceling statement due to statement timeout')")
        env.amended_reminded_order("R1")
        go("#/overview")
        t.true("overview: the sweep, done, its cancel", text_in("#fig-scanner", "done") and
               "1 cancelled" in find("#fig-scanner").text, find("#fig-scanner").text)
        t.true("overview: the reconciliation failed, and why",
               text_in("#fig-reconcile", "failed") and "bad" in find("#fig-reconcile").get_attribute("class") and
               "statement timeout" in find("#fig-reconcile-detail").text, find("#fig-reconcile-detail").text)
        go("#/order/R1")
        t.true("timeline: the amendment, by whom", text_in("#timeline", "amended by ops2"))
        t.true("timeline: the reminder sent", text_in("#timeline", "reminder 1800 s before the deadline: sent"))
        find("#logout").click()

        # The admin's settings page, for the docs.
        login(a_login, a_pw)
        find("#nav-settings").click()
        t.true("admin: settings editable", find("#set-auto_refund_limit_cents").is_displayed())
        t.true("admin: the audit trail names the support login", text_in("#audit", s_login))
        drv.save_screenshot(os.path.join(shots, "settings.png"))
        cookies = {c["name"]: c for c in drv.get_cookies()}
        t.true("session cookie HttpOnly, Secure, SameSite=Strict",
               cookies.get("og_session", {}).get("httpOnly") and cookies["og_session"].get("secure")
               and cookies["og_session"].get("sameSite") == "Strict", str(cookies.get("og_session")))
        find("#logout").click()

        # Wrong passwords: refused, and after console.login_failures (5) in a minute, limited.
        # (One wrong attempt was made at the start.)
        for _ in range(4):
            login(v_login, "still-wrong")
            text_in("#login-error", "login refused")
            drv.execute_script("document.getElementById('login-error').textContent = ''")
        login(v_login, v_pw)
        t.true("after five failures even the right password is held back",
               text_in("#login-error", "too many failed logins"))
    except TimeoutException as e:
        t.eq("page reached its state in time (%s)" % (drv.current_url if drv else ""), str(e), "")
        if drv is not None:
            drv.save_screenshot(os.path.join(shots, "failure.png"))
            print(drv.find_element(By.TAG_NAME, "body").text)
    finally:
        if drv is not None:
            drv.quit()
        t.eq("the console stops cleanly on SIGTERM (exit 0)", env.close(), 0)
    return t.done(env)


if __name__ == "__main__":
    sys.exit(main())
