"""console_tls: ordergate-console serving TLS itself (console.tls_cert_file, console.tls_key_file).
The test makes a self-signed certificate for localhost with openssl, starts the console with it
on a loopback port, and checks that HTTPS answers (health, the pages, a login) with the session
cookie Secure, HttpOnly and SameSite=Strict; that plain HTTP on the same port gets no HTTP answer
while HTTPS goes on answering; and that a client which checks certificates refuses one it was not given.

    test_tls.py PATH/TO/ordergate-console"""
import http.client
import os
import socket
import ssl
import subprocess
import sys

from console_env import Checks, Env, fail


def make_cert(work):
    cert, key = os.path.join(work, "cert.pem"), os.path.join(work, "key.pem")
    r = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj",
                        "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                        "-keyout", key, "-out", cert], capture_output=True, text=True)
    if r.returncode != 0:
        fail("openssl could not make a certificate: " + r.stderr)
    return cert, key


def https(port, ctx, method, path, body=None, headers=None):
    conn = http.client.HTTPSConnection("localhost", port, context=ctx, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        return r.status, r.getheader("Set-Cookie") or "", r.read().decode()
    finally:
        conn.close()


def plain_http(port):
    """What a plain HTTP request to the TLS port gets: the status line, or why there was none."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            data = b""
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
        return data.split(b"\r\n", 1)[0].decode(errors="replace") or "closed without an answer"
    except OSError as e:
        return "refused: %s" % e


def main():
    env = Env(sys.argv[1], "tls")
    cert, key = make_cert(env.work)
    with open(env.conf, "w") as f:
        f.write('database = { conninfo = "dbname=%s"; };\n' % env.db)
        f.write('console = { listen = "127.0.0.1:0"; tls_cert_file = "%s"; tls_key_file = "%s"; };\n'
                % (cert, key))
    t = Checks()
    try:
        env.start()
        port = int(env.base.rsplit(":", 1)[1])
        t.true("the console says it serves TLS", "tls=on" in open(env.log).read())
        trusted = ssl.create_default_context(cafile=cert)

        st, _, body = https(port, trusted, "GET", "/healthz")
        t.eq("HTTPS answers, the certificate checked", (st, body), (200, "ok\n"))
        st, _, body = https(port, trusted, "GET", "/")
        t.true("HTTPS serves the pages", st == 200 and "ordergate console" in body, st)

        login, pw = env.users["viewer"]
        st, cookie, body = https(port, trusted, "POST", "/api/login",
                                 '{"login": "%s", "password": "%s"}' % (login, pw),
                                 {"Content-Type": "application/json"})
        t.eq("a login over HTTPS", st, 200)
        attrs = [a.strip() for a in cookie.split(";")]
        t.true("the session cookie is Secure, HttpOnly, SameSite=Strict",
               attrs[0].startswith("og_session=") and "Secure" in attrs and "HttpOnly" in attrs
               and "SameSite=Strict" in attrs, cookie)
        st, _, body = https(port, trusted, "GET", "/api/session", headers={"Cookie": attrs[0]})
        t.true("the session works over HTTPS", st == 200 and login in body, "%s %s" % (st, body))

        answer = plain_http(port)
        t.true("plain HTTP on the TLS port gets no HTTP answer", not answer.startswith("HTTP/"),
               answer)
        st, _, body = https(port, trusted, "GET", "/healthz")
        t.eq("HTTPS still answers after the plain request", (st, body), (200, "ok\n"))

        try:
            https(port, ssl.create_default_context(), "GET", "/healthz")
            refused = False
        except ssl.SSLCertVerificationError:
            refused = True
        t.true("a client that checks certificates refuses the self-signed one", refused)
    finally:
        t.eq("the console stops cleanly on SIGTERM (exit 0)", env.close(), 0)
    return t.done(env)


if __name__ == "__main__":
    sys.exit(main())
