#!/usr/bin/env bash
# console_cli: ordergate-console's command line and --check-config, without a network or a
# database: what a start refuses (plain HTTP off loopback, half a TLS pair, a missing key file,
# a bad address, an unknown flag; exit 2, naming the setting) and what it accepts (loopback,
# plain HTTP allowed, a readable TLS pair); --help and --list-settings.
#
#   test_cli.sh PATH/TO/ordergate-console
set -uo pipefail
bin=${1:?usage: test_cli.sh ordergate-console}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0 passed=0

# expect NAME STATUS PATTERN ARGS...: exit STATUS, and PATTERN (grep -E) in stdout+stderr.
expect() {
    local name=$1 want=$2 pattern=$3 rc=0
    shift 3
    "$bin" "$@" >"$work/out" 2>&1 || rc=$?
    if [ "$rc" -eq "$want" ] && grep -Eq -- "$pattern" "$work/out"; then
        passed=$((passed + 1)); echo "ok   $name"
    else
        failed=$((failed + 1)); echo "FAIL $name: exit $rc (want $want), output:"; cat "$work/out"
    fi
}

printf 'not a key\n' >"$work/key.pem"
printf 'not a cert\n' >"$work/cert.pem"
expect "loopback by default" 0 'console.listen = "127.0.0.1:8470"' --check-config
expect "plain HTTP off loopback refused" 2 'console.listen 0.0.0.0:8470 is not loopback and no TLS' \
    --listen 0.0.0.0:8470 --check-config
printf 'console = { listen = "0.0.0.0:8470"; allow_plain_http = true; };\n' >"$work/plain.conf"
expect "plain HTTP off loopback when allowed" 0 'allow_plain_http = true' --config "$work/plain.conf" --check-config
printf 'console = { listen = "0.0.0.0:8470"; tls_cert_file = "%s/cert.pem"; };\n' "$work" >"$work/half.conf"
expect "half a TLS pair refused" 2 'tls_cert_file and console.tls_key_file go together' \
    --config "$work/half.conf" --check-config
printf 'console = { listen = "0.0.0.0:8470"; tls_cert_file = "%s/cert.pem"; tls_key_file = "%s/none.pem"; };\n' \
    "$work" "$work" >"$work/nokey.conf"
expect "missing key file refused" 2 'console.tls_key_file .*none.pem' --config "$work/nokey.conf" --check-config
printf 'console = { listen = "0.0.0.0:8470"; tls_cert_file = "%s/cert.pem"; tls_key_file = "%s/key.pem"; };\n' \
    "$work" "$work" >"$work/tls.conf"
expect "TLS pair off loopback accepted" 0 'tls_key_file' --config "$work/tls.conf" --check-config
expect "bad address refused" 2 'console.listen' --listen nowhere --check-config
expect "bad port refused" 2 'port' --listen 127.0.0.1:70000 --check-config
printf 'console = { session_idle_s = 5; };\n' >"$work/idle.conf"
expect "session_idle_s below its bound refused" 2 'session_idle_s' --config "$work/idle.conf" --check-config
expect "unknown flag refused" 2 'unknown option|--bogus' --bogus
expect "help" 0 'usage: ordergate-console' --help
expect "settings listed" 0 'console.login_failures' --list-settings
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
