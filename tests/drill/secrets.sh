#!/usr/bin/env bash
# The drill leaves no secret readable on disk, and its Kafka clients are the product's.
#
#   secrets.sh BUILD_DIR
#
# The drill runs over the SASL_SSL listener of deploy/local/services.sh (ORDERGATE_KAFKA_TLS=1;
# fails without its exports) with the SASL password in kafka.sasl_password_file only, and a
# conninfo whose password holds a quote and a backslash (the cluster trusts local connections,
# so it is never checked, but every child must read it back from its configuration):
#   1. while it runs, the children's configuration files are mode 0600 in a directory of mode
#      0700 whose name is not known beforehand (nothing lands in TMPDIR itself), and they carry
#      the password file's path, the conninfo escaped for libconfig;
#   2. it ends clean (its producer, its offsets reader and its consumers all logged in with the
#      password from the file) and TMPDIR is empty afterwards;
#   3. stopped by SIGTERM (twice) in the middle, it exits, its children are gone and TMPDIR is
#      empty again;
#   4. SIGKILLed in the middle, its children are gone too (each dies with the drill), and what
#      it could not remove is its directory of mode 0700.
set -euo pipefail
build=$1
for v in ORDERGATE_KAFKA_TLS_BROKERS ORDERGATE_KAFKA_TLS_CA ORDERGATE_KAFKA_TLS_USER \
    ORDERGATE_KAFKA_TLS_PASSWORD_FILE; do
    if [ -z "${!v:-}" ]; then
        echo "secrets.sh: $v is not set (deploy/local/services.sh up with ORDERGATE_KAFKA_TLS=1)" >&2
        exit 1
    fi
done
db="og_drill_secrets_$$"
tpl=${ORDERGATE_TEMPLATE_DB:-ordergate_tpl}
work=$(mktemp -d)
tmpd=$work/tmp
mkdir -m 700 "$tmpd"
drill_pid=
cleanup() {
    if [ -n "$drill_pid" ] && kill -0 "$drill_pid" 2>/dev/null; then kill -KILL "$drill_pid" || true; fi
    psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" || true
    rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "secrets.sh: FAIL: $*" >&2; exit 1; }

psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE DATABASE $db TEMPLATE $tpl"
# The password is p"w\x: in the conninfo 'p"w\\x' (libpq unescapes \\), in libconfig each " and
# \ escaped once more.
cat >"$work/drill.conf" <<EOF
database: { conninfo = "dbname=$db password='p\\"w\\\\\\\\x'"; };
kafka: {
  brokers = "$ORDERGATE_KAFKA_TLS_BROKERS";
  sasl_password_file = "$ORDERGATE_KAFKA_TLS_PASSWORD_FILE";
  properties = ["security.protocol=SASL_SSL", "sasl.mechanisms=SCRAM-SHA-512",
                "sasl.username=$ORDERGATE_KAFKA_TLS_USER", "ssl.ca.location=$ORDERGATE_KAFKA_TLS_CA"];
};
EOF
unset ORDERGATE_KAFKA_SASL_PASSWORD_FILE ORDERGATE_BROKERS

# Starts the drill in the background with TMPDIR=$tmpd; $1 = seed.
drill_start() {
    TMPDIR=$tmpd "$build/tools/ordergatectl" --config "$work/drill.conf" drill --json \
        --orders 200 --consumers 1 --lead-ms 5000 --settle-s 60 --seed "$1" \
        >"$work/report" 2>"$work/log" &
    drill_pid=$!
}

# Waits (at most 60 s) until the drill's directory holds the scanner's and a consumer's file;
# prints the directory.
drill_conf_dir() {
    local i dir
    for ((i = 0; i < 600; i++)); do
        dir=$(find "$tmpd" -mindepth 1 -maxdepth 1 -type d -name 'ordergate-drill-*' | head -n 1)
        if [ -n "$dir" ] && [ "$(find "$dir" -type f | wc -l)" -ge 2 ]; then
            echo "$dir"
            return 0
        fi
        kill -0 "$drill_pid" 2>/dev/null || { cat "$work/log" >&2; fail "the drill ended before writing its files"; }
        sleep 0.1
    done
    cat "$work/log" >&2
    fail "no configuration directory of the drill in $tmpd within 60 s"
}

# Waits for the drill (at most 120 s); its exit status in $rc (not in a subshell: only this
# shell may wait for it).
drill_wait() {
    local i
    for ((i = 0; i < 1200; i++)); do
        if ! kill -0 "$drill_pid" 2>/dev/null; then
            set +e
            wait "$drill_pid"
            rc=$?
            set -e
            drill_pid=
            return 0
        fi
        sleep 0.1
    done
    fail "the drill did not end within 120 s"
}

assert_tmp_empty() {
    local left
    left=$(find "$tmpd" -mindepth 1 | head -n 5)
    [ -z "$left" ] || fail "$1: left behind in TMPDIR: $left"
}

# 1 and 2: a whole drill.
drill_start 5
dir=$(drill_conf_dir)
python3 - "$tmpd" "$dir" "$ORDERGATE_KAFKA_TLS_PASSWORD_FILE" <<'PY'
import os, re, stat, sys
tmpd, d, pwfile = sys.argv[1:4]
def fail(msg):
    sys.exit("secrets.sh: FAIL: " + msg)
entries = os.listdir(tmpd)
if entries != [os.path.basename(d)]:
    fail("TMPDIR holds %r, expected only the drill's directory" % entries)
st = os.lstat(d)
if not stat.S_ISDIR(st.st_mode) or stat.S_IMODE(st.st_mode) != 0o700 or st.st_uid != os.getuid():
    fail("%s: mode %o, expected a directory of ours with mode 700" % (d, stat.S_IMODE(st.st_mode)))
if not re.fullmatch(r"ordergate-drill-[A-Za-z0-9]{6}", os.path.basename(d)):
    fail("%s: not a name made by mkdtemp" % d)
files = sorted(os.listdir(d))
if len(files) < 2:
    fail("%s holds %r" % (d, files))
for f in files:
    p = os.path.join(d, f)
    fs = os.lstat(p)
    if not stat.S_ISREG(fs.st_mode) or stat.S_IMODE(fs.st_mode) != 0o600 or fs.st_uid != os.getuid():
        fail("%s: mode %o, expected a regular file of ours with mode 600" % (p, stat.S_IMODE(fs.st_mode)))
    text = open(p).read()
    if 'sasl_password_file = "%s";' % pwfile not in text:
        fail("%s does not carry kafka.sasl_password_file" % p)
    if "password='p\\\"w\\\\\\\\x'" not in text:
        fail("%s: the conninfo is not escaped for libconfig:\n%s" % (p, text))
    if open(pwfile).read().strip() in text:
        fail("%s holds the SASL password itself" % p)
print("secrets.sh: %d files of mode 600 in %s (mode 700)" % (len(files), d))
PY
drill_wait
cat "$work/report"
violations=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["violations"])' "$work/report" 2>/dev/null || echo missing)
if [ "$rc" != 0 ] || [ "$violations" != 0 ]; then
    tail -n 30 "$work/log" >&2
    fail "the drill over SASL_SSL ended with exit $rc, violations $violations"
fi
assert_tmp_empty "after a drill that ended"

# 3: SIGTERM in the middle of the race, twice.
drill_start 6
dir=$(drill_conf_dir)
sleep 2
kill -TERM "$drill_pid"
sleep 0.2
kill -TERM "$drill_pid" 2>/dev/null || true
drill_wait
tail -n 3 "$work/log"
[ "$rc" != 0 ] || fail "a drill stopped by SIGTERM exited 0"
if pgrep -f -- "$tmpd" >/dev/null; then
    pgrep -a -f -- "$tmpd" >&2
    fail "a child of the drill still runs after SIGTERM"
fi
assert_tmp_empty "after SIGTERM"
# 4: SIGKILL in the middle of the race.
drill_start 7
dir=$(drill_conf_dir)
sleep 2
kill -KILL "$drill_pid"
drill_wait
for ((i = 0; i < 50; i++)); do
    pgrep -f -- "$tmpd" >/dev/null || break
    sleep 0.1
done
if pgrep -f -- "$tmpd" >/dev/null; then
    pgrep -a -f -- "$tmpd" >&2
    fail "a child of the drill still runs 5 s after the drill was SIGKILLed"
fi
[ "$(stat -c %a "$dir")" = 700 ] || fail "after SIGKILL: $dir is mode $(stat -c %a "$dir")"
rm -rf "$dir"
assert_tmp_empty "after SIGKILL"
echo "secrets.sh: ok (drill over SASL_SSL clean; nothing left after it ended, nothing after SIGTERM, no child after SIGKILL)"
